"""The transformer words against timm: exact parameter counts, the same function, exact FLOPs.

timm's models are built from the constructor arguments written out here (those of the paper's
released checkpoints and small variants of them), given random weights, converted with
`archdsl.nn.convert.timm` and loaded strictly into the compiled spec; the logits must agree.
"""

from __future__ import annotations

import pytest
import torch
from _timm_support import PAPER, SMALL, assert_same_function, n_params, randomize
from torch.utils.flop_counter import FlopCounterMode

from archdsl.lang.spec import load_spec, parse_spec
from archdsl.nn.blocks.attention import math_attention
from archdsl.nn.build import build
from archdsl.nn.summary import summarize


def counted_flops(model: torch.nn.Module, arch) -> int:
    x = torch.randn(1, arch.input.channels, arch.input.height, arch.input.width)
    with math_attention(), FlopCounterMode(display=False) as counter, torch.no_grad():
        model.eval()(x)
    return counter.get_total_flops()


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_transformers_have_timms_parameter_counts(name: str) -> None:
    cls, kwargs, params = PAPER[name]
    arch = load_spec(name)
    summary = summarize(arch)
    model = build(arch, seed=0)
    assert summary.params == n_params(model) == params
    for block, (qualified, module) in zip(summary.blocks, model.named_blocks(), strict=True):
        assert block.qualified_name == qualified and block.kind == module.kind
        assert block.params == n_params(module), qualified
    assert summary.stem.params == n_params(model.stem) and summary.head.params == n_params(model.head)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_transformers_compute_timms_function(name: str) -> None:
    cls, kwargs, params = PAPER[name]
    reference = randomize(cls(**kwargs))
    assert n_params(reference) == params
    assert_same_function(reference, load_spec(name), torch.randn(2, 3, 32, 32))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_transformers_compute_timms_function(name: str) -> None:
    text, cls, kwargs = SMALL[name]
    arch = parse_spec(text)
    reference = randomize(cls(**kwargs), seed=3)
    assert n_params(reference) == summarize(arch).params
    assert_same_function(reference, arch, torch.randn(3, 3, arch.input.height, arch.input.width))


def test_vit_ti_flops_agree_with_torchs_counter() -> None:
    arch = load_spec("vit-ti")
    assert summarize(arch).flops == counted_flops(build(arch, seed=0), arch)


# Every new word and setting once: kernels, windows on a non-square map, shifts, relative
# positions over a whole map, merging an odd side, pooling with and without a class token,
# smoothing, conv blocks between token blocks (both layouts), both LayerNorm heads.
FLOP_SPECS = {
    "local": """arch local { input 3x16x16 classes 4 stem patch(2, 16) pos relative
        stage s(width=16) { attn(2, kernel=3) mlp(2) attn(4, kernel=5, dim_head=3) mlp(1) } }""",
    "windows": """arch windows { input 3x12x24 classes 4 stem patch(2, 8, norm=true) pos relative
        stage a(width=8) { attn(2, 3) mlp(4) attn(2, 3, shift=1) mlp(4) attn(1, global) smooth }
        stage b(width=12) { merge attn(3, 3) mlp(4) } }""",
    "pool-class": """arch pool-class { input 3x16x16 classes 4 stem patch(3, 8, stride=1) head class pos absolute
        stage a(width=8) { attn(2, global) mlp(2) }
        stage b(width=24) { pool attn(3, global) mlp(2) } }""",
    "hybrid": """arch hybrid { input 3x16x16 classes 4 stem conv3x3(8) conv = basic
        stage a(width=8) { conv attn(2, 4) mlp(2) smooth conv }
        stage b(width=16) { conv msa(2, global) attn(2, kernel=3) }
        stage c(width=32) { pool mlp(2) } }""",
}


@pytest.mark.parametrize("name", sorted(FLOP_SPECS))
def test_summary_agrees_with_built_model_and_torch_flop_counter(name: str) -> None:
    arch = parse_spec(FLOP_SPECS[name])
    model = build(arch, seed=0)
    summary = summarize(arch)
    assert summary.params == n_params(model)
    for block, (qualified, module) in zip(summary.blocks, model.named_blocks(), strict=True):
        assert block.qualified_name == qualified and block.kind == module.kind
        assert block.params == n_params(module), qualified
    assert summary.flops == counted_flops(model, arch)


@pytest.mark.parametrize("name", sorted(FLOP_SPECS))
def test_summary_shapes_match_the_feature_maps_of_each_block(name: str) -> None:
    arch = parse_spec(FLOP_SPECS[name])
    model = build(arch, seed=0).eval()
    shapes: dict[str, tuple[int, ...]] = {}

    def hook(module, args, output, name):
        to_map = getattr(module, "feature_map", None)
        shapes[name] = tuple((to_map(output) if to_map else output).shape[1:])

    for name_, module in model.named_blocks():
        module.register_forward_hook(lambda m, a, o, name=name_: hook(m, a, o, name))
    with torch.no_grad():
        logits = model(torch.randn(2, 3, arch.input.height, arch.input.width))
    assert logits.shape == (2, arch.classes)
    assert {b.qualified_name: b.out_shape for b in summarize(arch).blocks} == shapes


def _single_attn(kernel_or_window: str, size: int = 4):
    body = f"stage s(width=4) {{ attn(2, {kernel_or_window}) }}"
    arch = parse_spec(f"arch a {{ input 1x{size}x{size} classes 2 stem patch(1, 4) {body} }}")
    model = randomize(build(arch, seed=0)).double()
    attention = model.stages.s[0].attn
    tokens = torch.randn(2, size * size, 4, dtype=torch.float64)
    with torch.no_grad():
        return attention, attention(tokens), tokens


def test_a_kernel_as_wide_as_twice_the_map_is_global_attention() -> None:
    local, out, tokens = _single_attn("kernel=7")
    glob, _, _ = _single_attn("global")
    glob.load_state_dict(local.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(glob(tokens), out)


def test_a_1x1_kernel_attends_to_each_token_alone() -> None:
    attention, out, tokens = _single_attn("kernel=1")
    with torch.no_grad():
        values = attention.qkv(tokens).chunk(3, dim=-1)[2]
        torch.testing.assert_close(out, attention.proj(values))


def test_smooth_is_a_2x2_box_blur_with_zeros_past_the_border() -> None:
    arch = parse_spec("arch s { input 1x3x3 classes 2 stem conv3x3(1) stage a(width=1) { conv(basic) smooth } }")
    model = build(arch, seed=0)
    smooth = model.stages.a[1]
    assert smooth.kind == "smooth" and n_params(smooth) == 0
    x = torch.arange(9.0).reshape(1, 1, 3, 3)
    want = torch.tensor([[2.0, 3.0, 1.75], [5.0, 6.0, 3.25], [3.25, 3.75, 2.0]])
    torch.testing.assert_close(smooth(x)[0, 0], want)
