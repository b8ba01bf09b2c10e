"""Hostile or absurd specs and IRs: a clear error, in bounded time and memory.

The limits (docs/language.md): a spec file of at most 256 KiB, numbers up to 2^31 - 1, at
most 64 stages and 1000 blocks per design, names of at most 64 characters, and a design
whose estimated memory (weights plus one image's activations) is over 16 GiB is refused
before anything is allocated. An IR read from a file is held to exactly the same rules.
"""

from __future__ import annotations

import warnings

import pytest

from archdsl.cli import main
from archdsl.errors import ArchdslWarning, UserError
from archdsl.ir import Arch, ConvBlock, InputShape, MSABlock, Stage
from archdsl.lang.checks import ensure_valid
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import parse_spec

SMALL = """arch small {
    input   3x32x32
    classes 10
    stem    conv3x3(16)
    conv  = basic
    stage c1(width=16)           { conv }
    stage c2(width=32, stride=2) { conv msa(2, 4) }
}
"""


def small_ir(**changes) -> Arch:
    return parse_spec(SMALL).model_copy(update=changes)


def test_a_spec_file_over_the_size_limit_is_refused_without_reading_or_echoing_it(tmp_path, capsys):
    path = tmp_path / "huge.arch"
    path.write_text("arch x { " + "garbage" * (10 * 2**20 // 7) + "\n")  # one 10 MB line
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "is 10,485,7" in err and "a spec file holds at most 262,144 bytes" in err
    assert len(err) < 1000  # the 10 MB line is not echoed
    with pytest.raises(SpecError, match="at most 262,144 bytes"):
        parse_spec("arch x {" + " " * 2**18 + "}")


def test_echoed_source_lines_are_cut_around_the_mistake(capsys):
    line = "    classes 10 " + "# " + "x" * 5000 + "\n"
    text = SMALL.replace("    classes 10\n", line).replace(
        "stem    conv3x3(16)", "stem    conv3x3(16)  " + "y" * 3000 + " ?"
    )
    with pytest.raises(SpecError) as info:
        parse_spec(text, "long.arch")
    rendered = str(info.value)
    assert "unexpected character '?'" in rendered
    source, caret = [ln for ln in rendered.splitlines() if ln.startswith("    ")][:2]
    assert len(source) <= 130 and "..." in source
    assert source[caret.index("^")] == "?"  # the caret still points at the character


def test_control_characters_are_escaped_when_a_line_is_echoed():
    text = SMALL.replace("classes 10", "classes 10 # \x1b[2J\x1b]0;pwned\x07 \x00").replace(
        "stem    conv3x3(16)", "stem  conv3x3(16) \x1b"
    )
    with pytest.raises(SpecError) as info:
        parse_spec(text, "esc.arch")
    rendered = str(info.value)
    assert "\x1b" not in rendered and "\x00" not in rendered and "\x07" not in rendered
    assert "\\x1b" in rendered
    source, caret = [ln for ln in rendered.splitlines() if ln.startswith("    ")][:2]
    assert source[caret.index("^") : caret.index("^") + 4] == "\\x1b"


def test_a_right_to_left_override_in_a_comment_warns(tmp_path, capsys):
    path = tmp_path / "rtl.arch"
    path.write_text(SMALL.replace("classes 10", "classes 10   # \u202e }01 sessalc {"))
    assert main(["check", str(path)]) == 0
    captured = capsys.readouterr()
    assert "ok (small" in captured.out
    assert f"archdsl: warning: {path}:3:20:" in captured.err and "U+202E" in captured.err
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        parse_spec(path.read_text(), str(path))
    assert [w.category for w in seen] == [ArchdslWarning]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"input": InputShape(channels=3, height=10**30, width=10**30)}, "input.height is too large"),
        ({"classes": 2**31}, "classes is too large"),
        (
            {"stages": tuple(Stage(name=f"s{i}", width=8, stride=1, blocks=(ConvBlock(),)) for i in range(100_000))},
            "100000 stages: a design has at most 64",
        ),
        ({"stages": (Stage(name="c1", width=8, stride=1, blocks=(ConvBlock(),) * 1001),)}, "1001 blocks"),
        ({"name": "n" * 65}, "at most 64 characters"),
    ],
)
def test_an_ir_from_a_file_is_held_to_the_limits_of_the_language(change, message):
    with pytest.raises(SpecError, match=message):
        ensure_valid(small_ir(**change))


def test_a_huge_input_with_a_window_is_refused_at_once_not_in_a_divisor_loop():
    stage = Stage(name="c1", width=8, stride=1, blocks=(ConvBlock(), MSABlock(heads=1, window=3)))
    arch = small_ir(input=InputShape(channels=3, height=10**30, width=10**30), stages=(stage,))
    with pytest.raises(SpecError, match="too large"):
        ensure_valid(arch)


@pytest.mark.parametrize(
    "old, new",
    [
        ("stage c1(width=16)", "stage c1(width=1000000000)"),
        ("stage c1(width=16)", "stage c1(width=2147483647)"),
        ("conv3x3(16)", "conv3x3(2147483647)"),
        ("classes 10", "classes 2147483647"),
        ("msa(2, 4)", "msa(2, 4, dim_head=2147483647)"),
        ("input   3x32x32", "input   3x2147483647x2147483647"),
    ],
)
def test_check_and_compile_refuse_a_design_too_large_to_build_with_its_estimate(tmp_path, capsys, old, new):
    path = tmp_path / "big.arch"
    path.write_text(SMALL.replace(old, new))
    for command in ("check", "compile"):
        assert main([command, str(path)]) == 1, command
        err = capsys.readouterr().err
        assert "needs about" in err and "more than the 16 GiB" in err and "Traceback" not in err, err


def test_build_refuses_before_allocating():
    from archdsl.nn.build import build
    from archdsl.nn.summary import DesignTooLarge

    arch = parse_spec(SMALL.replace("stage c1(width=16)", "stage c1(width=1000000000)"))
    with pytest.raises(DesignTooLarge) as info:
        build(arch)
    assert isinstance(info.value, UserError) and info.value.estimate > info.value.limit


@pytest.mark.parametrize(
    "blocks, values",
    [
        # Each block's output (8 channels x 4x4 tokens = 128) plus what its word keeps besides:
        ("attn(2, global)", 128 + 2 * 16 * 16),  # attention maps: heads x queries x keys (all 16)
        ("attn(2, 2)", 128 + 2 * 16 * 4),  # 2x2 windows: 4 keys a query
        ("attn(2, kernel=3)", 128 + 2 * 16 * 9),  # a 3x3 neighbourhood: 9 keys a query
        ("mlp(3)", 128 + 3 * 128),  # the hidden layer: ratio x the output
        ("pool", 128 // 4),  # a halved map, nothing kept besides
    ],
)
def test_the_memory_estimate_counts_outputs_attention_maps_and_hidden_layers(blocks, values):
    from archdsl.nn.summary import memory_estimate, summarize

    stride = 2 if blocks == "pool" else 1
    arch = parse_spec(f"""arch t {{
    input   3x8x8
    classes 10
    stem    patch(2, 8)
    stage s1(width=8, stride={stride}) {{ {blocks} }}
}}""")
    stem, head = 8 * 16, 10
    assert memory_estimate(summarize(arch), arch).activations == 4 * (stem + values + head)  # float32
