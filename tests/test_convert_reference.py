"""The reference implementation's layout (xxxnell/how-do-vits-work) -> archdsl.

tests/fixtures/reference_checkpoint_keys.json lists the key names and shapes of the reference's
CIFAR-100 pre-activation ResNet-50, AlterNet-50 and post-activation ResNet-50 (the released
`resnet_50` file's model), transcribed from its code (see the file's "source"), and the same three
for ImageNet (`stem=True`: the 7x7 stem, 1000 classes, the AlterNet's 7x7 windows). The mapping is
checked against those names, and the imported weights against a forward pass written here from
the reference's description, straight on the reference's names: neither side uses archdsl's
blocks or the mapping under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from archdsl.errors import UserError
from archdsl.ir import SmoothBlock
from archdsl.lang.spec import load_spec, parse_spec
from archdsl.nn.build import build
from archdsl.nn.convert import detect_format
from archdsl.nn.convert.reference import ALTERNET_STEM, PREACT_STEM, convert, reference_layout

FIXTURE = Path(__file__).parent / "fixtures" / "reference_checkpoint_keys.json"
MODELS = json.loads(FIXTURE.read_text())["models"]
IMPORTABLE = [name for name, model in MODELS.items() if model["archdsl_spec"]]
BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def fixture_shapes(name: str) -> dict[str, tuple[int, ...]]:
    return {key: tuple(shape) for key, shape in MODELS[name]["keys"]}


def random_reference_state(name: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights with exactly the reference's keys and shapes, at scales that keep activations sane."""
    gen = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    for key, shape in fixture_shapes(name).items():
        if key.endswith("num_batches_tracked"):
            state[key] = torch.tensor(7)
        elif key.endswith("running_var"):
            state[key] = torch.rand(shape, generator=gen) + 0.5
        elif key.endswith(("running_mean", ".bias")):
            state[key] = torch.randn(shape, generator=gen) * 0.1
        elif len(shape) == 1:  # BN weight
            state[key] = torch.rand(shape, generator=gen) + 0.5
        elif key.endswith("pos_embedding"):
            state[key] = torch.randn(shape, generator=gen)  # large enough to matter, and not symmetric
        else:
            fan_in = math.prod(shape[1:])
            state[key] = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
    return state


# --- the reference's forward pass, on its own key names (models/*.py of the reference) --------------


def _bn(x, s, p):
    return F.batch_norm(x, s[p + "running_mean"], s[p + "running_var"], s[p + "weight"], s[p + "bias"], eps=1e-5)


def _preact_bottleneck(x, s, p, stride):
    # models/preresnet_dnn_block.py Bottleneck: the projection shortcut reads the activated input.
    act = F.relu(_bn(x, s, p + "bn."))
    skip = F.conv2d(act, s[p + "shortcut.0.weight"], stride=stride) if p + "shortcut.0.weight" in s else x
    out = F.conv2d(act, s[p + "conv1.weight"])
    out = F.conv2d(F.relu(_bn(out, s, p + "conv2.0.")), s[p + "conv2.2.weight"], stride=stride, padding=1)
    out = F.conv2d(F.relu(_bn(out, s, p + "conv3.0.")), s[p + "conv3.2.weight"])
    return out + skip


def _post_bottleneck(x, s, p, stride):
    # models/resnet_dnn_block.py Bottleneck: conv-BN(-ReLU) units, ReLU after the sum, a conv-BN shortcut on x.
    skip = x
    if p + "shortcut.0.weight" in s:
        skip = _bn(F.conv2d(x, s[p + "shortcut.0.weight"], stride=stride), s, p + "shortcut.1.")
    out = F.relu(_bn(F.conv2d(x, s[p + "conv1.0.weight"]), s, p + "conv1.1."))
    out = F.relu(_bn(F.conv2d(out, s[p + "conv2.0.weight"], stride=stride, padding=1), s, p + "conv2.1."))
    out = _bn(F.conv2d(out, s[p + "conv3.0.weight"]), s, p + "conv3.1.")
    return F.relu(out + skip)


def _local_attention(x, s, p, dim_head=64):
    # models/alternet.py LocalAttention + models/attentions.py Attention2d.
    table = s[p + "pos_embedding"]
    w = (table.shape[0] + 1) // 2
    coords = [(i, j) for i in range(w) for j in range(w)]  # tokens row by row in a window
    bias = torch.stack(
        [torch.stack([table[kr - qr + w - 1, kc - qc + w - 1] for kr, kc in coords]) for qr, qc in coords]
    )  # [query, key]: the table at (key - query) + w - 1
    b, c, h, width = x.shape
    windows = x.reshape(b, c, h // w, w, width // w, w).permute(0, 2, 4, 1, 3, 5).reshape(-1, c, w, w)
    q = F.conv2d(windows, s[p + "attn.to_q.weight"])
    k, v = F.conv2d(windows, s[p + "attn.to_kv.weight"]).chunk(2, dim=1)
    heads = q.shape[1] // dim_head

    def split(t):  # 'b (h d) x y -> b h (x y) d'
        return t.reshape(t.shape[0], heads, dim_head, w * w).transpose(-1, -2)

    q, k, v = split(q), split(k), split(v)
    attn = (q @ k.transpose(-1, -2) * dim_head**-0.5 + bias).softmax(dim=-1)
    out = (attn @ v).transpose(-1, -2).reshape(-1, heads * dim_head, w, w)
    out = F.conv2d(out, s[p + "attn.to_out.0.weight"], s[p + "attn.to_out.0.bias"])
    out = out.reshape(b, h // w, width // w, -1, w, w).permute(0, 3, 1, 4, 2, 5)
    return out.reshape(b, -1, h, width)


def _attention_block(x, s, p):
    # models/alternet.py AttentionBlockB: BN-GELU-1x1-BN, local attention, residual.
    act = F.gelu(_bn(x, s, p + "norm1."))
    skip = F.conv2d(act, s[p + "shortcut.0.weight"]) if p + "shortcut.0.weight" in s else x
    out = _bn(F.conv2d(act, s[p + "conv.weight"]), s, p + "norm2.")
    return _local_attention(out, s, p + "attn.") + skip


def reference_forward(s: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    stem = s[ALTERNET_STEM] if ALTERNET_STEM in s else s[PREACT_STEM]
    imagenet = stem.shape[-1] == 7  # stem=True: convnxn(3, 64, kernel_size=7, stride=2, padding=3), then a max-pool
    x = F.conv2d(x, stem, stride=2, padding=3) if imagenet else F.conv2d(x, stem, padding=1)
    if "layer0.1.weight" in s:  # models/resnet.py: conv-BN-ReLU
        x = F.relu(_bn(x, s, "layer0.1."))
    if imagenet:
        x = F.max_pool2d(x, 3, stride=2, padding=1)
    for layer in range(1, 5):
        index = 0
        while any(f"layer{layer}.{index}.{name}.weight" in s for name in ("norm1", "bn", "conv1.0")):
            p = f"layer{layer}.{index}."
            stride = 2 if layer > 1 and index == 0 else 1
            if p + "norm1.weight" in s:
                x = _attention_block(x, s, p)
            elif p + "bn.weight" in s:
                x = _preact_bottleneck(x, s, p, stride)
            else:
                x = _post_bottleneck(x, s, p, stride)
            index += 1
    if "classifier.0.bn.weight" in s:  # BNGAPBlock; GAPBlock (models/resnet.py) pools straight away
        x = F.relu(_bn(x, s, "classifier.0.bn."))
    x = x.mean(dim=(2, 3))
    return F.linear(x, s["classifier.0.dense.weight"], s["classifier.0.dense.bias"])


# --- the tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", IMPORTABLE)
def test_the_mapping_names_exactly_the_reference_keys_and_shapes(name: str) -> None:
    arch = load_spec(MODELS[name]["archdsl_spec"])
    layout = reference_layout(arch)
    assert {key: part.reference_shape for key, part in layout.items()} == fixture_shapes(name)
    # and every archdsl weight is filled exactly once
    ours = {k: tuple(v.shape) for k, v in build(arch, seed=0).state_dict().items()}
    assert sorted(part.key for part in layout.values()) == sorted(ours)
    assert all(ours[part.key] == part.shape for part in layout.values())


@pytest.mark.parametrize("name", IMPORTABLE)
def test_the_fixture_agrees_with_the_archdsl_parameter_count(name: str) -> None:
    model = MODELS[name]
    counted = sum(math.prod(shape) for key, shape in model["keys"] if not key.endswith(BUFFERS))
    assert counted == model["parameters"]
    assert counted == sum(p.numel() for p in build(load_spec(model["archdsl_spec"]), seed=0).parameters())


# The input of the function-parity test: the ResNets compute the same function at any size, so the ImageNet
# ResNets are compared on 64x64 images (2x2 maps in stage 4); the ImageNet AlterNet's 7x7 windows need 224x224.
PARITY_INPUT = {
    "preresnet_dnn_50_imagenet": (2, 64),
    "resnet_dnn_50_imagenet": (2, 64),
    "alternet_50_imagenet": (1, 224),
}


@pytest.mark.slow  # two float64 forward passes of a ResNet-50-sized model
@pytest.mark.parametrize("name", IMPORTABLE)
def test_random_reference_weights_import_and_compute_the_reference_function(name: str) -> None:
    arch = load_spec(MODELS[name]["archdsl_spec"])
    state = random_reference_state(name)
    assert detect_format(state).name == "reference"
    model = build(arch, seed=0)
    model.load_state_dict(convert(arch, state), strict=True)
    model = model.double().eval()
    batch, size = PARITY_INPUT.get(name, (2, 32))
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        ours = model(x)
        theirs = reference_forward({k: v.double() if v.is_floating_point() else v for k, v in state.items()}, x)
    assert ours.shape == (batch, arch.classes)
    assert (ours - theirs).abs().max().item() <= 1e-10 * theirs.abs().max().item()


def test_an_archdsl_model_round_trips_through_the_reference_layout_exactly() -> None:
    arch = load_spec("tiny")  # conv and MSA blocks, a projection shortcut in every stage
    model = build(arch, seed=3).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    ours = model.state_dict()
    theirs = {key: ours[part.key].reshape(part.reference_shape) for key, part in reference_layout(arch).items()}
    back = build(arch, seed=4).eval()
    back.load_state_dict(convert(arch, theirs), strict=True)
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(x), back(x))


def test_either_stem_name_is_accepted() -> None:
    arch = load_spec("resnet50")
    state = random_reference_state("preresnet_dnn_50")
    state[ALTERNET_STEM] = state.pop(PREACT_STEM)  # a reference AlterNet without MSA names its stem so
    assert torch.equal(convert(arch, state)["stem.weight"], state[ALTERNET_STEM])


def test_the_released_post_activation_resnet_imports_as_resnet50_post_only() -> None:
    post = random_reference_state("resnet_dnn_50")
    assert detect_format(post).name == "reference"
    assert set(convert(load_spec("resnet50-post"), post)) == set(build(load_spec("resnet50-post")).state_dict())
    with pytest.raises(UserError, match="post-activation ResNet") as err:
        convert(load_spec("resnet50"), post)
    assert "--spec resnet50-post" in err.value.hint
    with pytest.raises(UserError, match="pre-activation ResNet or AlterNet") as err:
        convert(load_spec("resnet50-post"), random_reference_state("preresnet_dnn_50"))
    assert "resnet50" in err.value.hint


def test_a_post_activation_net_with_an_msa_names_its_stem_as_an_alternet_and_round_trips() -> None:
    # Not a reference model, but the layout extends to it: StemA's conv and BN under `layer0.layer0`.
    arch = parse_spec(
        """arch post-msa { input 3x16x16 classes 5 stem conv3x3(8, norm=true) conv = basic(preact=false)
           head mean(norm=false) stage a(width=8) { conv conv(bottleneck, expansion=2) }
           stage b(width=16, stride=2) { conv msa(2, 4, dim_head=8) } }"""
    )
    layout = reference_layout(arch)
    assert {"layer0.layer0.0.weight", "layer0.layer0.1.running_var", "layer1.1.shortcut.1.weight"} <= set(layout)
    assert "layer1.1.conv3.1.bias" in layout and not any(key.startswith("classifier.0.bn") for key in layout)
    model = build(arch, seed=3).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    ours = model.state_dict()
    theirs = {key: ours[part.key].reshape(part.reference_shape) for key, part in layout.items()}
    theirs = {key.replace("layer0.layer0.", "layer0."): value for key, value in theirs.items()}  # either stem name
    back = build(arch, seed=4).eval()
    back.load_state_dict(convert(arch, theirs), strict=True)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(x), back(x))


def test_a_layout_mismatch_names_the_keys_in_the_references_own_words() -> None:
    # the code layout's AlterNet-50 given as the paper layout: c3's blocks 1 and 3 differ
    state = random_reference_state("alternet_50")
    with pytest.raises(UserError) as err:
        convert(load_spec("alter50"), state)
    text = str(err.value)
    assert "missing: layer3.1.bn.bias" in text and "unexpected: layer3.1.attn.attn.to_kv.weight" in text


def test_a_window_that_differs_is_named_with_both_shapes() -> None:
    state = random_reference_state("alternet_50")
    state["layer4.1.attn.pos_embedding"] = torch.zeros(3, 3)  # trained with window 2
    with pytest.raises(UserError, match=r"1 of the wrong shape: layer4\.1\.attn\.pos_embedding 3x3 \(expected 7x7\)"):
        convert(load_spec("alter50-code"), state)


def test_a_spec_the_reference_cannot_express_is_refused_by_name() -> None:
    with pytest.raises(UserError, match="conv3x3 or conv7x7 stem, not patch"):
        reference_layout(load_spec("vit-ti"))
    smoothed = load_spec("tiny").model_copy(deep=True)
    stage = smoothed.stages[0]
    blocks = (*stage.blocks, SmoothBlock())
    smoothed = smoothed.model_copy(
        update={"stages": (stage.model_copy(update={"blocks": blocks}), *smoothed.stages[1:])}
    )
    with pytest.raises(UserError, match=r"stages\.c1\.1 \(smooth\) has no counterpart"):
        reference_layout(smoothed)


@pytest.mark.parametrize(
    ("entry", "spec", "told"),
    [
        ("alternet_50_imagenet", "alter50-code", "alter50-imagenet"),
        ("preresnet_dnn_50_imagenet", "resnet50", "resnet50-imagenet"),
        ("resnet_dnn_50_imagenet", "resnet50-post", "resnet50-post-imagenet"),
        ("resnet_dnn_50_imagenet", "resnet50", "resnet50-post-imagenet"),  # post-activation too: one line says both
        ("resnet_dnn_50", "resnet50-post-imagenet", "resnet50-post"),
    ],
)
def test_an_imagenet_file_for_a_cifar_spec_or_back_names_the_stem_and_the_spec_to_use(
    entry: str, spec: str, told: str
) -> None:
    with pytest.raises(UserError) as err:
        convert(load_spec(spec), random_reference_state(entry))
    assert "stem" in str(err.value) and f"--spec {told}" in (err.value.hint or "")
