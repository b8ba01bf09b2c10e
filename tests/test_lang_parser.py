"""The language core: every form of the core language (docs/language.md) parses and lowers to the IR it means."""

from __future__ import annotations

import pytest

from archdsl.ir import ConvBlock, MSABlock, Stem
from archdsl.lang.diagnostics import Span, SpecError
from archdsl.lang.parser import BlockRef, Group, parse
from archdsl.lang.spec import parse_spec

HEADER = "arch t {\n    input 3x32x32\n    classes 10\n    stem conv3x3(16)\n"


def spec(body: str, settings: str = "") -> str:
    return HEADER + settings + body + "\n}\n"


def blocks(text: str):
    return [b for stage in parse_spec(text).stages for b in stage.blocks]


def test_design_example_lowers_to_the_paper_layout():
    text = """
    # Alter-ResNet-50 for CIFAR-100, the paper's layout (84.0 % top-1).
    arch alter50 {
        input   3x32x32                   # channels x height x width
        classes 100
        stem    conv3x3(64)
        conv  = bottleneck(expansion=4)   # what a plain `conv` means here; or `basic`

        stage c1(width=64)            { conv*3 }
        stage c2(width=128, stride=2) { conv*3, msa(heads=6, window=4) }
        stage c3(width=256, stride=2) { conv*5 msa(12, 4) }
        stage c4(width=512, stride=2) { [conv msa(heads=24, window=4)]*2 }
    }
    """
    arch = parse_spec(text)
    layout = ["".join("M" if isinstance(b, MSABlock) else "C" for b in s.blocks) for s in arch.stages]
    assert layout == ["CCC", "CCCM", "CCCCCM", "CMCM"]
    assert [s.stride for s in arch.stages] == [1, 2, 2, 2]
    assert [s.width for s in arch.stages] == [64, 128, 256, 512]
    heads = [b.heads for s in arch.stages for b in s.blocks if isinstance(b, MSABlock)]
    assert heads == [6, 12, 24, 24]
    assert arch.input.height == 32 and arch.classes == 100 and arch.stem.channels == 64


def test_stride_defaults_to_one_then_two():
    arch = parse_spec(spec("stage a(width=8) { conv }\nstage b(width=8) { conv }\nstage c(width=8, stride=1) { conv }"))
    assert [s.stride for s in arch.stages] == [1, 2, 1]


def test_positional_and_keyword_msa_arguments_mean_the_same():
    forms = ["msa(6, 4)", "msa(heads=6, window=4)", "msa(6, window=4)", "msa(window=4, heads=6)", "msa(6, 4, 64)"]
    lowered = {blocks(spec(f"stage a(width=8) {{ conv {form} }}"))[1] for form in forms}
    assert lowered == {MSABlock(heads=6, window=4, dim_head=64)}


def test_global_window_and_dim_head():
    (_, msa) = blocks(spec("stage a(width=8) { conv msa(3, window=global, dim_head=32) }"))
    assert msa == MSABlock(heads=3, window=None, dim_head=32)
    (_, msa) = blocks(spec("stage a(width=8) { conv msa(3, global) }"))
    assert msa.window is None


def test_conv_defaults_to_bottleneck_expansion_4():
    (conv,) = blocks(spec("stage a(width=8) { conv }"))
    assert conv == ConvBlock(variant="bottleneck", expansion=4)


def test_conv_setting_and_block_arguments():
    text = spec(
        "stage a(width=8) { conv conv() conv(bottleneck) conv(expansion=2) conv(basic, expansion=3) }", "conv = basic\n"
    )
    arch = parse_spec(text)
    assert arch.conv == ConvBlock(variant="basic", expansion=1)
    assert list(arch.stages[0].blocks) == [
        ConvBlock(variant="basic", expansion=1),
        ConvBlock(variant="basic", expansion=1),
        ConvBlock(variant="bottleneck", expansion=4),
        ConvBlock(variant="basic", expansion=2),
        ConvBlock(variant="basic", expansion=3),
    ]
    assert parse_spec(spec("stage a(width=8) { conv }", "conv = bottleneck(2)\n")).conv.expansion == 2


def test_post_activation_words():
    text = spec(
        "stage a(width=8) { conv conv(basic) conv(preact=true) conv(bottleneck, expansion=2, preact=false) }",
        "conv = basic(preact=false)\nhead mean(norm=false)\n",
    ).replace("conv3x3(16)", "conv3x3(16, norm=true)")
    arch = parse_spec(text)
    assert arch.stem == Stem(channels=16, norm=True) and arch.head == "mean" and not arch.head_norm
    assert arch.conv == ConvBlock(variant="basic", expansion=1, preact=False)
    assert list(arch.stages[0].blocks) == [
        ConvBlock(variant="basic", expansion=1, preact=False),
        ConvBlock(variant="basic", expansion=1, preact=False),  # a block inherits the plain conv's activation order
        ConvBlock(variant="basic", expansion=1, preact=True),
        ConvBlock(variant="bottleneck", expansion=2, preact=False),
    ]
    # The defaults, written out, are the designs without them (same digest).
    plain = parse_spec(spec("stage a(width=8) { conv }"))
    written = spec("stage a(width=8) { conv(preact=true) }", "conv = bottleneck(preact=true)\nhead mean(norm=true)\n")
    assert parse_spec(written.replace("conv3x3(16)", "conv3x3(16, norm=false)")).digest() == plain.digest()


def test_repeats_nest_and_commas_are_optional():
    spaced = blocks(spec("stage a(width=8) { conv*2 [conv [conv msa(2, 4)]*2]*2 }"))
    commas = blocks(spec("stage a(width=8) { conv, conv, [conv, [conv, msa(2, 4)]*2]*2, }"))
    assert spaced == commas
    assert "".join("M" if isinstance(b, MSABlock) else "C" for b in spaced) == "CC" + "CCMCM" * 2


def test_equals_sign_is_optional_and_formatting_does_not_change_the_digest():
    a = parse_spec(spec("stage a(width=8) { conv*2 msa(2, 4) }", "conv = bottleneck(expansion=4)\n"))
    b = parse_spec(
        "arch other{input=3x32x32 classes=10 stem=conv3x3(16) conv bottleneck stage a(8){conv conv msa(2,4)}}"
    )
    assert a.digest() == b.digest()  # the arch name is not part of the identity
    assert a.name != b.name


def test_comments_and_hyphenated_names():
    arch = parse_spec(
        "# head\narch alter50-code { # x\n input 3x8x8 # y\n classes 2 stem conv3x3(4)\n stage c-1(width=4) { conv } }"
    )
    assert arch.name == "alter50-code" and arch.stages[0].name == "c-1"


def test_ast_spans_point_at_the_source():
    node = parse("arch t {\n  stage c1(width=8) { conv [msa(2, 4)]*2 }\n}")
    (stage,) = node.settings
    assert stage.keyword.span == Span(2, 3, 2, 8)
    conv, group = stage.body
    assert isinstance(conv.atom, BlockRef) and conv.atom.span == Span(2, 23, 2, 27)
    assert isinstance(group.atom, Group) and group.atom.span == Span(2, 28, 2, 39)
    assert group.count.text == "2" and group.span == Span(2, 28, 2, 41)
    assert stage.body_span == Span(2, 21, 2, 43)


def test_windows_are_checked_against_the_map_of_their_stage():
    # Stage a keeps the 32x32 input map (stride 1), stage b halves it to 16x16.
    parse_spec(spec("stage a(width=8) { conv msa(2, 8) msa(2, 32) }\nstage b(width=8) { conv msa(2, 16) }"))
    with pytest.raises(SpecError, match="window 5 does not tile the 32x32 map of stage a"):
        parse_spec(spec("stage a(width=8) { conv msa(2, 5) }"))
    with pytest.raises(SpecError, match="window 32 does not fit the 16x16 map of stage b"):
        parse_spec(spec("stage a(width=8) { conv }\nstage b(width=8) { conv msa(2, 32) }"))


def test_every_independent_error_is_reported():
    text = spec("stage a(width=0) { conv mas(2, 4) msa(2, 5) }\nstage a(width=8, stride=x) { conv }", "clases 3\n")
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    messages = [d.message for d in info.value.diagnostics]
    assert any("unknown setting `clases`" in m for m in messages)
    assert any("width must be at least 1" in m for m in messages)
    assert any("unknown block `mas`" in m for m in messages)
    assert any("stride must be a number" in m for m in messages)
    assert any("duplicate stage name" in m for m in messages)
    lines = [d.span.line for d in info.value.diagnostics]
    assert lines == sorted(lines)
