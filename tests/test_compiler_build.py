"""Building models from IRs: structure, forward/backward, init, attention correctness."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _timm_support import KIND_SPECS, SMALL_SPECS

from archdsl.ir import block_shapes
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import load_spec, parse_spec
from archdsl.nn.blocks.attention import AlterMSABlock, WindowAttention, attention, math_attention
from archdsl.nn.blocks.conv import PreActBlock
from archdsl.nn.build import build, create_model, drop_path_rates

SPECS = sorted((Path(__file__).parent.parent / "specs").glob("*.arch"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_spec_builds_and_runs(path: Path) -> None:
    arch = load_spec(str(path))
    model = create_model(path, seed=0)
    assert model.arch == arch
    x = torch.randn(2, arch.input.channels, arch.input.height, arch.input.width)
    with torch.no_grad():
        logits = model.train()(x)  # train mode: BN uses batch statistics
    assert logits.shape == (2, arch.classes)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", sorted([*SMALL_SPECS, *KIND_SPECS]))
def test_each_block_module_reads_and_writes_what_its_ir_block_declares(name: str) -> None:
    """The IR's shape rule (layout, channels, map size) is the one the built modules follow."""
    arch = parse_spec({**SMALL_SPECS, **KIND_SPECS}[name])
    model = build(arch, seed=0).eval()
    outputs = {}
    hooks = [
        module.register_forward_hook(lambda m, i, o, n=n: outputs.setdefault(n, o))
        for n, module in model.named_blocks()
    ]
    with torch.no_grad():
        model(torch.zeros(1, arch.input.channels, arch.input.height, arch.input.width))
    for hook in hooks:
        hook.remove()
    modules = dict(model.named_blocks())
    for shape in block_shapes(arch):
        module, out = modules[shape.qualified_name], outputs[shape.qualified_name]
        assert module.layout == shape.block.layout, shape.qualified_name
        height, width = shape.out_size
        if shape.block.layout == "map":
            assert tuple(out.shape[1:]) == (shape.out_channels, height, width), shape.qualified_name
        else:
            assert tuple(out.shape[1:]) == (arch.prefix_tokens + height * width, shape.out_channels), (
                shape.qualified_name
            )


def test_module_paths_and_kinds_follow_the_spec() -> None:
    arch = load_spec("alter50")
    model = build(arch)
    names = dict(model.named_modules())
    for stage in arch.stages:
        assert len(model.stages[stage.name]) == len(stage.blocks)
        for index, block in enumerate(stage.blocks):
            assert names[f"stages.{stage.name}.{index}"].kind == block.kind
    assert isinstance(names["stages.c3.5"], AlterMSABlock)
    assert isinstance(names["stages.c3.4"], PreActBlock)
    # only shape-changing conv blocks carry a projection shortcut
    with_projection = [n for n, b in model.named_blocks() if getattr(b, "shortcut", None) is not None]
    assert with_projection == ["stages.c1.0", "stages.c2.0", "stages.c3.0", "stages.c4.0"]
    assert model.forward_head(model.forward_features(torch.randn(1, 3, 32, 32)), pre_logits=True).shape == (1, 2048)


def test_backward_reaches_every_parameter() -> None:
    # alter-style design with every block type, projection shortcuts and MSAs; no drop
    # path here, since a dropped branch would (rightly) get no gradient.
    model = create_model("tiny", seed=0).train()
    torch.manual_seed(0)
    loss = F.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([1, 2]))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_same_seed_same_weights_and_global_rng_untouched() -> None:
    arch = load_spec("alter18")
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b, c = build(arch, seed=7), build(arch, seed=7), build(arch, seed=8)
    assert torch.rand(1) == before  # seeding a build does not disturb the caller's RNG
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["stages.c4.1.attn.q.weight"], sc["stages.c4.1.attn.q.weight"])


@pytest.mark.parametrize("n_blocks", [0, 1, 2, 5, 16, 50])
@pytest.mark.parametrize("drop_path", [0.0, 0.1, 0.3])
def test_stochastic_depth_is_timms_rule(drop_path, n_blocks) -> None:
    from timm.layers import calculate_drop_path_rates

    timms = calculate_drop_path_rates(drop_path, n_blocks)
    assert drop_path_rates(drop_path, n_blocks) == pytest.approx(timms, rel=2**-22, abs=1e-9)  # float32: 2 ulps


def test_stochastic_depth_grows_linearly_over_all_blocks() -> None:
    assert drop_path_rates(0.1, 5) == pytest.approx([0.0, 0.025, 0.05, 0.075, 0.1])
    model = create_model("alter50", drop_path_rate=0.1)
    rates = [getattr(b.drop_path, "drop_prob", 0.0) for _, b in model.named_blocks()]
    n = len(rates)
    assert rates == pytest.approx([0.1 * j / (n - 1) for j in range(n)])


POST_BASIC = """arch post-basic { input 3x8x8 classes 4 stem conv3x3(4, norm=true) conv = basic(preact=false)
    head mean(norm=false) stage a(width=4) { conv } stage b(width=8, stride=2) { conv } }"""


def test_post_activation_words_compute_the_post_activation_resnet() -> None:
    # He et al. 2016 (models/resnet.py of the reference): stem conv-BN-ReLU; per block relu(bn(conv(relu(bn(conv
    # x))))) + shortcut, then ReLU, the shortcut conv1x1-BN where the shape changes; head pool-Linear, no BN.
    from archdsl.lang.spec import parse_spec
    from archdsl.run.optimize import fold_batchnorms

    model = build(parse_spec(POST_BASIC), seed=0).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.3)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.normal_(0, 0.3)
    w = dict(model.named_parameters()) | dict(model.named_buffers())

    def bn(x, p):
        return F.batch_norm(x, w[p + "running_mean"], w[p + "running_var"], w[p + "weight"], w[p + "bias"])

    def block(x, p, stride):
        out = F.relu(bn(F.conv2d(x, w[p + "conv1.weight"], stride=stride, padding=1), p + "norm1."))
        out = bn(F.conv2d(out, w[p + "conv2.weight"], padding=1), p + "norm2.")
        skip = bn(F.conv2d(x, w[p + "shortcut.weight"], stride=stride), p + "shortcut_norm.") if stride > 1 else x
        return F.relu(out + skip)

    x = torch.randn(3, 3, 8, 8)
    want = F.relu(bn(F.conv2d(x, w["stem.conv.weight"], padding=1), "stem.norm."))
    want = block(block(want, "stages.a.0.", 1), "stages.b.0.", 2).mean(dim=(2, 3))
    want = F.linear(want, w["head.fc.weight"], w["head.fc.bias"])
    with torch.no_grad():
        assert torch.allclose(model(x), want, atol=1e-6)
        assert fold_batchnorms(model) == 1 + 2 + 3  # every BN reads one conv: stem, 2 + 2 units, 1 shortcut
        assert torch.allclose(model(x), want, atol=1e-5)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())


def naive_window_attention(attn: WindowAttention, x: torch.Tensor) -> torch.Tensor:
    """Loop over windows and heads with explicit softmax(QK^T * scale + bias) V."""
    q, (k, v) = attn.q(x), attn.kv(x).chunk(2, dim=1)
    out = torch.zeros_like(q)
    wh, ww = attn.window
    d = attn.dim_head
    table = attn.rel_pos_bias
    for i in range(0, x.shape[2], wh):
        for j in range(0, x.shape[3], ww):
            tokens = [(a, b) for a in range(wh) for b in range(ww)]
            for h in range(attn.heads):
                sl = slice(h * d, (h + 1) * d)
                qs = torch.stack([q[0, sl, i + a, j + b] for a, b in tokens])
                ks = torch.stack([k[0, sl, i + a, j + b] for a, b in tokens])
                vs = torch.stack([v[0, sl, i + a, j + b] for a, b in tokens])
                bias = torch.tensor(
                    [[(ka - qa + wh - 1) * (2 * ww - 1) + (kb - qb + ww - 1) for ka, kb in tokens] for qa, qb in tokens]
                )
                weights = torch.softmax(qs @ ks.T * d**-0.5 + table[bias], dim=-1)
                res = weights @ vs
                for t, (a, b) in enumerate(tokens):
                    out[0, sl, i + a, j + b] = res[t]
    return attn.proj(out)


@pytest.mark.parametrize("window", [(2, 2), (2, 3), (4, 6)])
def test_window_attention_matches_a_naive_loop(window: tuple[int, int]) -> None:
    torch.manual_seed(0)
    attn = WindowAttention(6, 5, heads=2, dim_head=3, window=window)
    torch.nn.init.normal_(attn.rel_pos_bias)
    x = torch.randn(1, 6, 4, 6)
    with torch.no_grad():
        assert torch.allclose(attn(x), naive_window_attention(attn, x), atol=1e-5)


@pytest.mark.parametrize("window", [(2, 2), (4, 6)])
@pytest.mark.parametrize(("channels", "out", "narrow"), [(6, 5, False), (2, 3, True)])
def test_window_attention_trains_through_the_naive_loops_function_and_gradients(
    window: tuple[int, int], channels: int, out: int, narrow: bool
) -> None:
    # With gradients on, the block takes its explicit path (not SDPA), and with heads wider than
    # its channels (dim_head 4 > 2, 3) the reordered products of `_narrow_attention`: same values
    # and the same gradient for every parameter, the relative-position table included, in float64.
    torch.manual_seed(0)
    attn = WindowAttention(channels, out, heads=2, dim_head=4 if narrow else 3, window=window).double()
    attn.train()  # the reordered products are the training mode's
    assert attn.narrow == narrow
    torch.nn.init.normal_(attn.rel_pos_bias)
    torch.nn.init.normal_(attn.proj.bias)
    x = torch.randn(1, channels, 4, 6, dtype=torch.float64, requires_grad=True)
    got, want = attn(x), naive_window_attention(attn, x)
    assert torch.allclose(got, want, atol=1e-12)
    inputs = [x, *attn.parameters()]
    upstream = torch.randn_like(got)
    for a, b in zip(
        torch.autograd.grad(got, inputs, upstream), torch.autograd.grad(want, inputs, upstream), strict=True
    ):
        assert torch.allclose(a, b, atol=1e-12)
    with torch.no_grad():  # eval mode: the reference's order, the same function
        assert torch.allclose(attn.eval()(x), want, atol=1e-12)


@pytest.mark.parametrize("bias_shape", [(5, 5), (1, 3, 5, 5), (4, 3, 5, 5)])
def test_attention_agrees_with_sdpa_in_value_gradient_and_double_backward(bias_shape) -> None:
    # `attention` with a bias that needs a gradient (training) against SDPA's math kernel, which
    # computes the same function; strided q (heads split off a token-major tensor) as the blocks give.
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 5, 3, 2, dtype=torch.float64).transpose(1, 2).requires_grad_() for _ in range(3))
    bias = torch.randn(bias_shape, dtype=torch.float64, requires_grad=True)
    got = attention(q, k, v, bias, scale=0.7)
    with math_attention():
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.7)
    assert torch.allclose(got, want, atol=1e-12)
    inputs = (q, k, v, bias)
    grads = torch.autograd.grad(got.square().sum(), inputs, create_graph=True)
    with math_attention():
        wanted = torch.autograd.grad(want.square().sum(), inputs, create_graph=True)
    for a, b in zip(grads, wanted, strict=True):
        assert torch.allclose(a, b, atol=1e-12)
    # A Hessian-vector product (analyze's NEP/APE) through the explicit form.
    hv = torch.autograd.grad(sum((g * g).sum() for g in grads), bias)
    with math_attention():
        hv_want = torch.autograd.grad(sum((g * g).sum() for g in wanted), bias)
    assert torch.allclose(hv[0], hv_want[0], atol=1e-10)


def test_channels_last_bf16_autocast_and_double_backward() -> None:
    model = create_model("tiny", seed=0).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref = model(x)
        cl = model.to(memory_format=torch.channels_last)(x.to(memory_format=torch.channels_last))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(x)
    assert torch.allclose(ref, cl, atol=1e-4)
    assert low.dtype == torch.bfloat16 and torch.isfinite(low).all()

    # Hessian-vector products need a double backward: the math kernel provides it.
    block = model.stages.c3[3]
    assert block.kind == "msa"
    params = list(block.parameters())
    feat = torch.randn(1, 256, 8, 8)
    with math_attention():
        grads = torch.autograd.grad(block(feat).square().sum(), params, create_graph=True)
        hv = torch.autograd.grad(sum((g * g).sum() for g in grads), params[0])
    assert torch.isfinite(hv[0]).all()


def test_invalid_ir_is_rejected_before_torch() -> None:
    arch = load_spec("alter50")
    c4 = arch.stages[3]
    bad = arch.model_copy(update={"stages": (*arch.stages[:3], c4.model_copy(update={"blocks": c4.blocks[::-1]}))})
    with pytest.raises(SpecError, match="MSA cannot downsample"):
        build(bad)
