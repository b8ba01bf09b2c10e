"""A fresh model starts where its origin's did: the spec's `init` scheme, tensor by tensor.

The rules below are written from what the origins do, not from archdsl's code:
- the reference implementation of AlterNet and its ResNets (xxxnell/how-do-vits-work) has no
  init of its own: every Conv2d and Linear is PyTorch's default, weight `kaiming_uniform_(a=sqrt(5))`
  = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), BatchNorm
  weight 1 and bias 0, and the local MSA's (2w-1)x(2w-1) position table `randn * 0.02`;
- timm's PiT: PyTorch's defaults too, with `pos_embed` and `cls_token` `trunc_normal_(std=.02)`
  (timm's truncation is at -2 and 2, absolute) and LayerNorm 1/0;
- timm's ViT and Swin (`init_weights_vit_timm`): Linear weights `trunc_normal_(std=.02)` and
  zero biases, the class token normal(1e-6), positions and relative tables trunc-normal(0.02),
  the patch conv PyTorch's default. archdsl's `timm` scheme also draws the other convs as
  timm's ResNets (`kaiming_normal_`, fan-out, ReLU gain) and the AlterNet MSA's projections
  (1x1 convs) as Linear weights: what every spec got before `init` existed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from _timm_support import PAPER
from torch import nn

from archdsl.errors import UserError
from archdsl.lang.spec import builtin_names, load_spec, parse_spec
from archdsl.nn import init_schemes
from archdsl.nn.build import build
from archdsl.nn.convert.timm import timm_to_archdsl

# Many small tensor operations: one thread each is fastest on a few shared cores.
pytestmark = pytest.mark.usefixtures("one_thread")

# Sampling error allowed on a tensor's mean and variance, in standard errors: a few hundred
# tensors are checked per spec, each at this many, with a fixed seed.
SIGMAS = 6.0
# Elements of a large tensor whose mean and variance are measured (its bounds are checked on all).
SAMPLE = 50_000


@dataclass(frozen=True)
class Uniform:
    bound: float


@dataclass(frozen=True)
class Normal:
    std: float
    cut: float | None = None  # timm's trunc_normal_ cuts at +-2 (absolute)


@dataclass(frozen=True)
class Constant:
    value: float


Rule = Uniform | Normal | Constant
TRUNC_002 = Normal(0.02, cut=2.0)


def _fan_in(weight: torch.Tensor) -> int:
    return weight[0].numel()


def _kind_of_parent(model: nn.Module, name: str, up: int) -> str | None:
    parent = model.get_submodule(".".join(name.split(".")[:-up])) if name.count(".") >= up else model
    return getattr(parent, "kind", None)


def origin_rule(model: nn.Module, module_name: str, module: nn.Module, param: str, scheme: str) -> Rule:
    """The distribution the origin of `scheme` draws this parameter from."""
    if isinstance(module, (nn.BatchNorm2d, nn.LayerNorm)):
        return Constant(1.0 if param == "weight" else 0.0)
    if param in ("pos_embed", "relative_position_bias_table"):
        return TRUNC_002
    if param == "cls_token":
        return TRUNC_002 if scheme == "torch" else Normal(1e-6)  # timm's PiT; timm's ViT
    if param == "rel_pos_bias":  # the AlterNet MSA's table
        return Normal(0.02) if scheme == "torch" else TRUNC_002
    assert isinstance(module, (nn.Conv2d, nn.Linear)), f"no rule for {module_name}.{param}"
    default = Uniform(1 / math.sqrt(_fan_in(module.weight)))
    if scheme == "torch":
        return default
    projection = (
        module_name.rsplit(".", 1)[-1] in ("q", "kv", "proj") and _kind_of_parent(model, module_name, 2) == "msa"
    )
    if isinstance(module, nn.Linear) or projection:
        return TRUNC_002 if param == "weight" else Constant(0.0)
    if module_name == "stem.proj" or _kind_of_parent(model, module_name, 1) == "pool":
        return default  # the patch conv and PiT's pooling conv: PyTorch's default
    fan_out = module.weight.shape[0] * module.weight[0, 0].numel()
    return Normal(math.sqrt(2.0 / fan_out)) if param == "weight" else Constant(0.0)


def sample(values: torch.Tensor) -> torch.Tensor:
    """About SAMPLE elements of a tensor (evenly spaced: the draws are independent, so any fixed
    subset is a fair sample), in float64."""
    x = values.detach().flatten()
    return x[:: max(1, x.numel() // SAMPLE)].double()


def assert_drawn_from(values: torch.Tensor, rule: Rule, what: str) -> None:
    """Constants exactly; bounds on every element; mean and variance on a sample, within sampling error."""
    if isinstance(rule, Constant):
        assert torch.all(values == rule.value), what
        return
    largest = values.detach().abs().max().item()
    if isinstance(rule, Uniform):
        assert largest <= rule.bound * (1 + 1e-6), f"{what}: beyond the uniform bound"
        var, var_of_square = rule.bound**2 / 3, 4 * rule.bound**4 / 45
    else:
        if rule.cut is not None:
            assert largest <= rule.cut, f"{what}: beyond the truncation"
        var, var_of_square = rule.std**2, 2 * rule.std**4
    x = sample(values)
    n = x.numel()
    assert abs(x.mean().item()) <= SIGMAS * math.sqrt(var / n), f"{what}: mean {x.mean().item():.3g}"
    measured = x.square().mean().item()  # about a known mean of 0
    assert abs(measured - var) <= SIGMAS * math.sqrt(var_of_square / n), (
        f"{what}: std {math.sqrt(measured):.4g}, origin's {math.sqrt(var):.4g}"
    )


def assert_origin_init(model: nn.Module, scheme: str) -> int:
    """Every parameter of `model` drawn as its origin draws it; returns how many tensors were checked."""
    checked = 0
    for module_name, module in model.named_modules():
        for param, value in module.named_parameters(recurse=False):
            rule = origin_rule(model, module_name, module, param, scheme)
            assert_drawn_from(value, rule, f"{module_name}.{param} ({scheme})")
            checked += 1
    return checked


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_spec_starts_as_its_origin(name):
    arch = load_spec(name)
    expected = "timm" if name in ("vit-ti", "swin-ti") else "torch"
    assert arch.init == expected  # the specs name it: AlterNets, ResNets and PiT torch, ViT and Swin timm
    model = build(arch, seed=0)
    assert assert_origin_init(model, arch.init) == len(list(model.parameters()))


def test_init_timm_on_an_alternet_is_the_transformer_init():
    arch = load_spec("alter18").model_copy(update={"init": "timm"})
    assert_origin_init(build(arch, seed=0), "timm")
    # ... and not PyTorch's defaults (the rules tell the schemes apart).
    with pytest.raises(AssertionError):
        assert_origin_init(build(arch, seed=0), "torch")
    with pytest.raises(AssertionError):
        assert_origin_init(build(load_spec("alter18"), seed=0), "timm")


def _former_init(model: nn.Module) -> None:
    """archdsl's init before the `init` setting, as it was written (one pass of layer rules,
    then each block's own), for the bit-for-bit comparison below."""
    from timm.layers import trunc_normal_

    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    for module in model.modules():
        kind = getattr(module, "kind", None)
        if kind == "patch":
            module.proj.reset_parameters()
            if module.pos_embed is not None:
                trunc_normal_(module.pos_embed, std=0.02)
            if module.cls_token is not None:
                nn.init.normal_(module.cls_token, std=1e-6)
        elif kind == "msa":
            for layer in (module.attn.q, module.attn.kv, module.attn.proj):
                trunc_normal_(layer.weight, std=0.02)
            nn.init.zeros_(module.attn.proj.bias)
            trunc_normal_(module.attn.rel_pos_bias, std=0.02)
        elif kind == "attn" and module.attn.relative_position_bias_table is not None:
            trunc_normal_(module.attn.relative_position_bias_table, std=0.02)


@pytest.mark.parametrize(
    "spec",
    [
        "arch a { input 3x16x16 classes 10 stem conv3x3(8) conv = basic init timm "
        "stage c1(width=8) { conv msa(2, 4) } stage c2(width=16) { conv msa(2, 4, dim_head=8) } }",
        "arch v { input 3x16x16 classes 5 stem patch(4, 24) head class pos absolute init timm "
        "stage s(width=24) { [attn(2, global) mlp(2)]*2 } }",
        "arch s { input 3x16x16 classes 5 stem patch(2, 16, norm=true) pos relative init timm "
        "stage a(width=16) { attn(2, 4) mlp(2) } stage b(width=32) { merge attn(4, 4) mlp(2) } }",
    ],
    ids=["alternet", "vit", "swin"],
)
def test_init_timm_draws_the_former_weights_bit_for_bit(spec, monkeypatch):
    """`init timm` is the former init: the same seed gives the same weights as before `init` existed."""
    arch = parse_spec(spec)
    want = build(arch, seed=3).state_dict()
    monkeypatch.setattr(init_schemes, "initialise", lambda model, scheme: _former_init(model))
    former = build(arch, seed=3).state_dict()
    assert want.keys() == former.keys()
    for key in want:
        assert torch.equal(want[key], former[key]), key


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_transformers_start_as_timm_builds_them(name):
    """pit-ti, vit-ti and swin-ti against the timm models themselves: each tensor drawn alike
    (constants equal; the spread of a random tensor within its sampling error)."""
    cls, kwargs, _ = PAPER[name]
    torch.manual_seed(0)
    reference = cls(**kwargs)
    arch = load_spec(name)
    theirs = timm_to_archdsl(arch, reference.state_dict())
    ours = build(arch, seed=0).state_dict()
    assert theirs.keys() == ours.keys()
    for key, mine in ours.items():
        if torch.all(theirs[key] == theirs[key].flatten()[0]):
            assert torch.equal(mine, theirs[key]), key
            continue
        a, b = sample(mine), sample(theirs[key])
        # The ratio of two spreads, each with a relative standard error of about 1/sqrt(2n).
        tolerance = SIGMAS * math.sqrt(1 / a.numel())
        ratio = a.square().mean().sqrt().item() / b.square().mean().sqrt().item()
        assert abs(ratio - 1) <= tolerance, f"{key}: std ratio {ratio:.3f}"


def test_digest_keeps_the_default_and_names_the_other_scheme():
    plain = load_spec("alter50")
    text = (
        "arch a { input 3x32x32 classes 10 stem conv3x3(16) stage c1(width=16) { conv msa(2, 4) } "
        "stage c2(width=32) { conv msa(2, 4) } }"
    )
    implicit = parse_spec(text)
    explicit = parse_spec(text.replace("stem", "init torch stem"))
    other = parse_spec(text.replace("stem", "init timm stem"))
    assert implicit == explicit and implicit.digest() == explicit.digest()
    assert "init" not in implicit.canonical_json()  # at its default: the designs before it keep their ids
    assert other.digest() != implicit.digest() and other.init == "timm"
    assert plain.init == "torch" and plain.digest() == plain.model_copy(update={"init": "torch"}).digest()


def test_a_bad_scheme_points_at_the_word():
    text = "arch a {\n  input 3x8x8 classes 2 stem conv3x3(4)\n  init tourch\n  stage c1(width=4) { conv }\n}\n"
    with pytest.raises(UserError) as caught:
        parse_spec(text, "bad.arch")
    message = str(caught.value)
    assert "bad.arch:3:8: error: init must be `torch` or `timm`, not `tourch`" in message
    assert "       ^~~~~~" in message
    assert "did you mean `torch`?" in message


def test_buildup_and_classifier_reset_keep_the_scheme():
    from archdsl.buildup import layout

    base = load_spec("alter50-base").model_copy(update={"init": "timm"})
    assert layout(base, (0, 1, 1, 2)).init == "timm"
    model = build(parse_spec("arch t { input 3x8x8 classes 3 stem conv3x3(8) stage c(width=8) { conv } }"), seed=0)
    model.reset_classifier(500)
    assert_drawn_from(model.head.fc.weight, Uniform(1 / math.sqrt(32)), "new classifier (torch)")
    timm_model = build(model.arch.model_copy(update={"init": "timm"}), seed=0)
    timm_model.reset_classifier(500)
    assert_drawn_from(timm_model.head.fc.weight, TRUNC_002, "new classifier (timm)")


# -- the first forward pass of a reference-layout model ---------------------------------------
# `tiny` written with plain torch modules in the reference implementation's layout, every layer
# left at PyTorch's default and the MSA's table `randn * 0.02`.


class RefBottleneck(nn.Module):
    """Pre-activation bottleneck: BN-ReLU-1x1, BN-ReLU-3x3(stride), BN-ReLU-1x1(4w) + shortcut
    (a 1x1 conv on the activated input where the shape changes)."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        out = 4 * width
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, width, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(width), nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn3, self.conv3 = nn.BatchNorm2d(width), nn.Conv2d(width, out, 1, bias=False)
        self.short = nn.Conv2d(cin, out, 1, stride, bias=False) if stride != 1 or cin != out else None

    def forward(self, x):
        a = F.relu(self.bn1(x))
        skip = self.short(a) if self.short is not None else x
        y = self.conv1(a)
        y = self.conv2(F.relu(self.bn2(y)))
        y = self.conv3(F.relu(self.bn3(y)))
        return y + skip


class RefMSA(nn.Module):
    """BN-GELU-1x1(width)-BN, attention in w x w windows (q, kv 1x1 convs without bias, proj with
    bias, one relative table shared by the heads), + input."""

    def __init__(self, channels: int, width: int, heads: int, dim_head: int, window: int):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head, self.window = heads, dim_head, window
        self.bn1, self.conv = nn.BatchNorm2d(channels), nn.Conv2d(channels, width, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.q = nn.Conv2d(width, inner, 1, bias=False)
        self.kv = nn.Conv2d(width, 2 * inner, 1, bias=False)
        self.proj = nn.Conv2d(inner, channels, 1)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        offset = coords[:, None, :] - coords[:, :, None] + window - 1
        self.index = offset[0] * (2 * window - 1) + offset[1]

    def forward(self, x):
        b, _, h, w = x.shape
        y = self.bn2(self.conv(F.gelu(self.bn1(x))))
        q, kv = self.q(y), self.kv(y)
        s, n = self.window, self.window**2

        def windows(t):  # (b, c, h, w) -> (b * windows, heads, n, dim_head)
            t = t.reshape(b, -1, h // s, s, w // s, s).permute(0, 2, 4, 3, 5, 1).reshape(-1, n, t.shape[1])
            return t.reshape(t.shape[0], n, -1, self.dim_head).transpose(1, 2)

        k, v = kv.chunk(2, dim=1)
        q, k, v = windows(q), windows(k), windows(v)
        logits = q @ k.transpose(-1, -2) * self.dim_head**-0.5 + self.table[self.index]
        out = (logits.softmax(-1) @ v).transpose(1, 2).reshape(b, h // s, w // s, s, s, -1)
        out = out.permute(0, 5, 1, 3, 2, 4).reshape(b, -1, h, w)
        return self.proj(out) + x


def reference_tiny() -> nn.Sequential:
    """`tiny`: stem 3x3(16); c1 conv; c2 conv msa(2, 4); c3 [conv msa(4, 4, dim_head=16)]*2."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        RefBottleneck(16, 16, 1),
        RefBottleneck(64, 32, 2),
        RefMSA(128, 32, heads=2, dim_head=64, window=4),
        RefBottleneck(128, 64, 2),
        RefMSA(256, 64, heads=4, dim_head=16, window=4),
        RefBottleneck(256, 64, 1),
        RefMSA(256, 64, heads=4, dim_head=16, window=4),
    )


def block_stats(blocks: list[nn.Module], images: torch.Tensor) -> torch.Tensor:
    """Per block: the std of its output and of its residual branch (output minus input) over the batch."""
    rows = []
    x = images
    with torch.no_grad():
        for block in blocks:
            y = block(x)
            branch = (y - x).std().item() if y.shape == x.shape else float("nan")
            rows.append((y.std().item(), branch))
            x = y
    return torch.tensor(rows)


SEEDS = (0, 1, 2)


def _stats_over_seeds(make_blocks) -> torch.Tensor:
    images = torch.randn(16, 3, 32, 32, generator=torch.Generator().manual_seed(99))
    return torch.stack([block_stats(make_blocks(seed), images) for seed in SEEDS]).mean(0)


def _archdsl_blocks(scheme: str):
    def make(seed: int) -> list[nn.Module]:
        model = build(load_spec("tiny").model_copy(update={"init": scheme}), seed=seed).train()
        return [model.stem, *(block for _, block in model.named_blocks())]

    return make


def _reference_blocks(seed: int) -> list[nn.Module]:
    torch.manual_seed(seed)
    return list(reference_tiny().train())


def test_first_forward_pass_has_the_reference_activation_statistics():
    """The first training-mode forward pass of `tiny` (init torch) and of the reference-layout
    model: per block, the output's std and the residual branch's std agree within 15 %,
    averaged over three seeds (the former init, `init timm`, misses by far more)."""
    reference = _stats_over_seeds(_reference_blocks)
    ours = _stats_over_seeds(_archdsl_blocks("torch"))
    former = _stats_over_seeds(_archdsl_blocks("timm"))
    known = ~reference.isnan()
    assert torch.equal(known, ~ours.isnan())
    ratio = (ours / reference)[known]
    assert ((ratio - 1).abs() <= 0.15).all(), ratio
    assert ((former / reference)[known] - 1).abs().max() > 0.5
