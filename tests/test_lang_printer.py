"""Printing IRs back to .arch text: round trip for any valid IR, compression, kept comments."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archdsl.ir import Arch, ConvBlock, InputShape, MSABlock, Stage, Stem, block_shapes
from archdsl.lang.checks import problems
from archdsl.lang.printer import compress, format_arch, format_source
from archdsl.lang.spec import builtin_names, load_spec, parse_spec, resolve_spec

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,8}", fullmatch=True)
conv_blocks = st.builds(ConvBlock, variant=st.sampled_from(["bottleneck", "basic"]), expansion=st.integers(1, 6))
msa_blocks = st.builds(
    MSABlock,
    heads=st.integers(1, 32),
    window=st.none() | st.integers(1, 64),
    dim_head=st.sampled_from([16, 32, 64, 96]),
)


@st.composite
def valid_archs(draw) -> Arch:
    n_stages = draw(st.integers(1, 4))
    stage_names = draw(st.lists(names, min_size=n_stages, max_size=n_stages, unique=True))
    default_conv = draw(conv_blocks)
    stages = []
    for index, name in enumerate(stage_names):
        stride = draw(st.sampled_from([1, 2]) if index else st.sampled_from([1, 1, 2]))
        first = draw(st.just(default_conv) | conv_blocks)  # a conv may always downsample
        rest = draw(st.lists(st.just(default_conv) | conv_blocks | msa_blocks, max_size=7))
        stages.append(Stage(name=name, width=draw(st.integers(1, 512)), stride=stride, blocks=(first, *rest)))
    height, width = draw(st.sampled_from([(32, 32), (16, 16), (8, 12), (7, 7), (1, 5)]))
    arch = Arch(
        name=draw(names),
        input=InputShape(channels=draw(st.integers(1, 4)), height=height, width=width),
        classes=draw(st.integers(1, 1000)),
        stem=Stem(channels=draw(st.integers(1, 128))),
        conv=default_conv,
        stages=tuple(stages),
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
            if isinstance(block, MSABlock) and block.window is not None and side % block.window:
                block = block.model_copy(update={"window": draw(st.sampled_from([None, 1, side]))})
            blocks.append(block)
        fixed.append(stage.model_copy(update={"blocks": tuple(blocks)}))
    arch = arch.model_copy(update={"stages": tuple(fixed)})
    assert problems(arch) == []
    return arch


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_archs())
def test_round_trip_of_any_valid_ir(arch: Arch):
    text = format_arch(arch)
    assert parse_spec(text) == arch
    assert format_arch(parse_spec(text)) == text  # printing is a fixed point


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
