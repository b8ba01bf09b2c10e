"""Semantic checks on IRs built in code (no source): paths, messages, hints, ensure_valid."""

from __future__ import annotations

import pytest

from archdsl.ir import Arch, ConvBlock, InputShape, MSABlock, Stage, Stem
from archdsl.lang.checks import ensure_valid, problems
from archdsl.lang.diagnostics import SpecError

C = ConvBlock()


def arch(*stages: Stage, size: int = 32) -> Arch:
    return Arch(
        name="t",
        input=InputShape(channels=3, height=size, width=size),
        classes=10,
        stem=Stem(channels=8),
        stages=stages,
    )


def test_valid_design_has_no_problems_and_passes_through():
    a = arch(
        Stage(name="a", width=8, stride=1, blocks=(C, MSABlock(heads=2, window=8))),
        Stage(name="b", width=8, stride=2, blocks=(C, MSABlock(heads=2, window=None))),
    )
    assert problems(a) == []
    assert ensure_valid(a) is a


def test_window_problem_path_and_hint_lists_fitting_sizes():
    a = arch(
        Stage(name="a", width=8, stride=1, blocks=(C,)),
        Stage(name="b", width=8, stride=4, blocks=(C, C, MSABlock(heads=2, window=3))),
    )
    (problem,) = problems(a)
    assert problem.path == ("stages", 1, "blocks", 2, "window")
    assert problem.message == "window 3 does not tile the 8x8 map of stage b"
    assert "1, 2, 4, 8, or `global`" in problem.hint


def test_non_square_map_uses_common_divisors():
    a = Arch(
        name="t",
        input=InputShape(channels=3, height=8, width=12),
        classes=10,
        stem=Stem(channels=8),
        stages=(Stage(name="a", width=8, stride=1, blocks=(C, MSABlock(heads=2, window=3))),),
    )
    (problem,) = problems(a)
    assert "8x12" in problem.message and "1, 2, 4, or `global`" in problem.hint


def test_msa_cannot_start_a_strided_stage():
    a = arch(
        Stage(name="a", width=8, stride=1, blocks=(C,)),
        Stage(name="b", width=8, stride=2, blocks=(MSABlock(heads=2, window=4), C)),
    )
    (problem,) = problems(a)
    assert problem.path == ("stages", 1, "blocks", 0)
    assert "cannot downsample" in problem.message
    # ...but it may start a stage of stride 1.
    assert problems(arch(Stage(name="a", width=8, stride=1, blocks=(MSABlock(heads=2, window=4),)))) == []


def test_striding_a_map_below_1x1():
    stages = [Stage(name=f"s{i}", width=8, stride=1 if i == 0 else 2, blocks=(C,)) for i in range(4)]
    assert problems(arch(*stages, size=8)) == []  # 8 -> 4 -> 2 -> 1
    found = problems(arch(*stages, Stage(name="s4", width=8, stride=2, blocks=(C,)), size=8))
    assert [p.path for p in found] == [("stages", 4, "stride")]
    assert "1x1 map below 1x1" in found[0].message


def test_duplicate_and_invalid_names_and_empty_stages():
    a = Arch(
        name="bad name",
        input=InputShape(channels=3, height=8, width=8),
        classes=10,
        stem=Stem(channels=8),
        stages=(
            Stage(name="a", width=8, stride=1, blocks=(C,)),
            Stage(name="a", width=8, stride=1, blocks=()),
            Stage(name="x.y", width=8, stride=1, blocks=(C,)),
        ),
    )
    paths = [p.path for p in problems(a)]
    assert paths == [("name",), ("stages", 1, "name"), ("stages", 1, "blocks"), ("stages", 2, "name")]


def test_ensure_valid_raises_spec_error_without_spans():
    a = arch(Stage(name="a", width=8, stride=1, blocks=(C, MSABlock(heads=2, window=64))))
    with pytest.raises(SpecError) as info:
        ensure_valid(a)
    (diag,) = info.value.diagnostics
    assert diag.span is None
    text = str(info.value)
    assert text.startswith(
        "arch t: error: window 64 does not fit the 32x32 map of stage a (at stages.0.blocks.1.window)"
    )
    assert text.endswith("1 error")
