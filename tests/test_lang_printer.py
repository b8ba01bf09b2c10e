"""Printing IRs back to .arch text: round trip for any valid IR, compression, kept comments."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archdsl.ir import (
    INIT_SCHEMES,
    Arch,
    AttnBlock,
    ConvBlock,
    InputShape,
    MergeBlock,
    MLPBlock,
    MSABlock,
    Norm,
    PatchStem,
    PoolBlock,
    Position,
    SmoothBlock,
    Stage,
    Stem,
    block_shapes,
)
from archdsl.lang.checks import problems
from archdsl.lang.printer import compress, format_arch, format_source
from archdsl.lang.spec import builtin_names, load_spec, parse_spec, resolve_spec

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,8}", fullmatch=True)
conv_blocks = st.builds(
    ConvBlock, variant=st.sampled_from(["bottleneck", "basic"]), expansion=st.integers(1, 6), preact=st.booleans()
)
msa_blocks = st.builds(
    MSABlock,
    heads=st.integers(1, 32),
    window=st.none() | st.integers(1, 64),
    dim_head=st.sampled_from([16, 32, 64, 96]),
)
# Transformer words inside conv stages: an explicit dim_head, so any channel count fits; a
# window is fixed up below like an msa's, a kernel fits any map.
attn_in_conv_stage = st.builds(
    AttnBlock,
    heads=st.integers(1, 8),
    window=st.none() | st.integers(1, 8),
    dim_head=st.sampled_from([8, 16, 64]),
    qkv_bias=st.booleans(),
) | st.builds(AttnBlock, heads=st.integers(1, 4), kernel=st.sampled_from([1, 3, 5]), dim_head=st.just(8))
other_blocks = st.builds(MLPBlock, ratio=st.integers(1, 4)) | st.just(SmoothBlock())


@st.composite
def valid_archs(draw) -> Arch:
    n_stages = draw(st.integers(1, 4))
    stage_names = draw(st.lists(names, min_size=n_stages, max_size=n_stages, unique=True))
    default_conv = draw(conv_blocks)
    stages = []
    for index, name in enumerate(stage_names):
        stride = draw(st.sampled_from([1, 2]) if index else st.sampled_from([1, 1, 2]))
        first = draw(st.just(default_conv) | conv_blocks)  # a conv may always downsample
        rest = draw(
            st.lists(st.just(default_conv) | conv_blocks | msa_blocks | attn_in_conv_stage | other_blocks, max_size=7)
        )
        stages.append(Stage(name=name, width=draw(st.integers(1, 512)), stride=stride, blocks=(first, *rest)))
    height, width = draw(st.sampled_from([(32, 32), (16, 16), (8, 12), (7, 7), (1, 5)]))
    arch = Arch(
        name=draw(names),
        input=InputShape(channels=draw(st.integers(1, 4)), height=height, width=width),
        classes=draw(st.integers(1, 1000)),
        stem=Stem(channels=draw(st.integers(1, 128)), norm=draw(st.booleans())),
        conv=default_conv,
        stages=tuple(stages),
        init=draw(st.sampled_from(INIT_SCHEMES)),
        head_norm=draw(st.booleans()),
    )
    # A stride must not shrink a map below 1x1: drop the strides that would.
    size = (height, width)
    strided = []
    for stage in arch.stages:
        stride = stage.stride if min(size) >= stage.stride else 1
        strided.append(stage.model_copy(update={"stride": stride}))
        size = (-(-size[0] // stride), -(-size[1] // stride))
    arch = arch.model_copy(update={"stages": tuple(strided)})
    # Windows drawn at random rarely tile their map: replace the ones that do not by a
    # size that does (or global), keeping the draw's variety elsewhere.
    fixed = []
    shapes = iter(block_shapes(arch))
    for stage in arch.stages:
        blocks = []
        for block in stage.blocks:
            side = math.gcd(*next(shapes).out_size)
            if isinstance(block, (MSABlock, AttnBlock)) and block.window is not None and side % block.window:
                block = block.model_copy(update={"window": draw(st.sampled_from([None, 1, side]))})
            blocks.append(block)
        fixed.append(stage.model_copy(update={"blocks": tuple(blocks)}))
    arch = arch.model_copy(update={"stages": tuple(fixed)})
    assert problems(arch) == []
    return arch


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def token_blocks(draw, channels: int, size: tuple[int, int], class_token: bool) -> list:
    """A run of transformer blocks valid on a `size` map of `channels`-dim tokens."""
    blocks = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["attn", "attn", "mlp"] + ([] if class_token else ["smooth"])))
        if kind == "mlp":
            blocks.append(MLPBlock(ratio=draw(st.integers(1, 4))))
            continue
        if kind == "smooth":
            blocks.append(SmoothBlock())
            continue
        heads = draw(st.sampled_from(_divisors(channels)[:6]))
        dim_head = draw(st.just(channels // heads) | st.sampled_from([4, 8]))
        reach = "global" if class_token else draw(st.sampled_from(["global", "window", "kernel"]))
        window = kernel = None
        shift = 0
        if reach == "window":
            window = draw(st.sampled_from(_divisors(math.gcd(*size))))
            if max(size) > window > 1 and draw(st.booleans()):
                shift = draw(st.just(window // 2) | st.integers(1, window - 1))
        elif reach == "kernel":
            kernel = draw(st.sampled_from([1, 3, 5]))
        qkv_bias = draw(st.booleans())
        blocks.append(
            AttnBlock(heads=heads, window=window, kernel=kernel, shift=shift, dim_head=dim_head, qkv_bias=qkv_bias)
        )
    return blocks


@st.composite
def valid_token_archs(draw) -> Arch:
    """ViT-, PiT- and Swin-like designs: patch stem, transformer stages, merge/pool between them."""
    height, width = draw(st.sampled_from([(32, 32), (16, 16), (8, 12), (12, 12)]))
    size = draw(st.sampled_from(_divisors(math.gcd(height, width))[:4]))
    stride = draw(st.sampled_from([size, 1]))
    channels = draw(st.sampled_from([8, 12, 16, 24]))
    stem = PatchStem(size=size, channels=channels, stride=stride, norm=draw(st.booleans()))
    class_token = draw(st.booleans())
    grid = ((height - size) // stride + 1, (width - size) // stride + 1)
    stage_names = draw(st.lists(names, min_size=3, max_size=3, unique=True))
    stages = [
        Stage(
            name=stage_names[0], width=channels, stride=1, blocks=tuple(draw(token_blocks(channels, grid, class_token)))
        )
    ]
    for name in stage_names[1:]:
        if min(grid) < 2 or not draw(st.booleans()):
            break
        down = draw(st.sampled_from(["pool"] if class_token else ["merge", "pool", "conv"]))
        wide = channels * draw(st.sampled_from([1, 2])) if down == "pool" else draw(st.sampled_from([8, 16, 32]))
        first = {"merge": MergeBlock(), "pool": PoolBlock(), "conv": ConvBlock(variant="basic", expansion=1)}[down]
        grid = (-(-grid[0] // 2), -(-grid[1] // 2))
        channels = wide
        rest = draw(token_blocks(channels, grid, class_token))
        stages.append(Stage(name=name, width=wide, stride=2, blocks=(first, *rest)))
    has_attn = any(isinstance(b, AttnBlock) for stage in stages for b in stage.blocks)
    kinds = ["none", "absolute"] + (["relative"] if has_attn and not class_token else [])
    kind = draw(st.sampled_from(kinds))
    pos = Position(kind=kind, class_token=draw(st.booleans()) if kind == "absolute" and class_token else True)
    arch = Arch(
        name=draw(names),
        input=InputShape(channels=3, height=height, width=width),
        classes=draw(st.integers(1, 100)),
        stem=stem,
        stages=tuple(stages),
        head="class" if class_token else "mean",
        pos=pos,
        norm=Norm(eps=draw(st.sampled_from([1e-6, 1e-5, 1e-3, 0.25]))),
        init=draw(st.sampled_from(INIT_SCHEMES)),
        head_norm=draw(st.booleans()),
    )
    assert problems(arch) == [], problems(arch)
    return arch


def assert_round_trip(arch: Arch) -> None:
    text = format_arch(arch)
    assert parse_spec(text) == arch
    assert format_arch(parse_spec(text)) == text  # printing is a fixed point


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_archs())
def test_round_trip_of_any_valid_ir(arch: Arch):
    assert_round_trip(arch)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_token_archs())
def test_round_trip_of_any_valid_transformer_ir(arch: Arch):
    assert_round_trip(arch)


def test_builtin_specs_round_trip():
    for name in builtin_names():
        arch = load_spec(name)
        assert parse_spec(format_arch(arch)) == arch


def test_compress_writes_the_fewest_blocks():
    assert compress(list("CCCCCM")) == ["C*5", "M"]
    assert compress(list("CMCM")) == ["[C M]*2"]
    assert compress(list("CCCMCM")) == ["C*2", "[C M]*2"]
    assert compress(list("CMC")) == ["C", "M", "C"]
    assert compress([]) == []


def test_format_arch_omits_defaults_and_prints_global():
    arch = parse_spec(
        "arch t { input 3x16x16 classes 10 stem conv3x3(8) conv = basic "
        "stage a(width=8) { conv conv conv(bottleneck) } "
        "stage b(width=8, stride=1) { conv msa(2, window=global) msa(2, 4, dim_head=32) } }"
    )
    text = format_arch(arch)
    assert "    conv  = basic\n" in text
    assert "stage a(width=8)" in text and "stage b(width=8, stride=1)" in text
    assert "{ conv*2 conv(bottleneck) }" in text
    assert "msa(2, window=global) msa(2, 4, dim_head=32)" in text


def test_format_source_keeps_every_comment():
    text = (
        "# header\n"
        "arch t { # on the arch line\n"
        "  input 3x8x8   # size\n"
        "  # about classes\n"
        "  classes 2\n"
        "  stem conv3x3(4)\n"
        "  stage a(width=4) {\n"
        "     conv  # inside a multi-line body\n"
        "  }\n"
        "  # before the end\n"
        "} # closing\n"
        "# footer\n"
    )
    out = format_source(text)
    for comment in [
        "# header",
        "# on the arch line",
        "# size",
        "# about classes",
        "# inside a multi-line body",
        "# before the end",
        "# closing",
        "# footer",
    ]:
        assert out.count(comment) == 1, comment
    assert out.index("# about classes") < out.index("classes 2")
    assert "input   3x8x8  # size" in out
    assert parse_spec(out) == parse_spec(text)
    assert format_source(out) == out


def test_builtin_specs_format_to_a_fixed_point():
    for name in builtin_names():
        once = format_source(resolve_spec(name).read_text())
        assert format_source(once) == once


def test_format_source_refuses_to_return_text_that_means_another_design(monkeypatch):
    from archdsl.lang import printer

    text = format_arch(load_spec("tiny"))
    assert printer.format_source(text) == text  # the real printer keeps the meaning
    other = text.replace("classes 10", "classes 11")
    assert other != text
    monkeypatch.setattr(printer, "format_arch", lambda arch, *_: other)
    with pytest.raises(AssertionError, match="fmt changed the meaning of <string>"):
        printer.format_source(text)
