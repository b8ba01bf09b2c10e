"""The corpus of bad specs: each file names the mistakes it must be reported for.

Every `tests/bad_specs/*.arch` starts with `# expect: LINE:COL fragment` lines, one per
diagnostic; the test demands exactly those diagnostics, at those places, in that order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import parse_spec

CORPUS = Path(__file__).parent / "bad_specs"
EXPECT = re.compile(r"^# expect: (\d+):(\d+) (.+)$", re.M)
BAD_SPECS = sorted(CORPUS.glob("*.arch"))


def test_corpus_is_large_enough():
    assert len(BAD_SPECS) >= 30


@pytest.mark.parametrize("path", BAD_SPECS, ids=lambda p: p.stem)
def test_bad_spec_reports_expected_diagnostics(path: Path):
    text = path.read_text()
    expected = [(int(line), int(col), fragment.strip()) for line, col, fragment in EXPECT.findall(text)]
    assert expected, f"{path.name} has no `# expect:` line"
    with pytest.raises(SpecError) as info:
        parse_spec(text, str(path))
    diagnostics = info.value.diagnostics
    got = [(d.span.line, d.span.column, d.message) for d in diagnostics]
    assert len(got) == len(expected), got
    for (line, col, message), (want_line, want_col, fragment) in zip(got, expected, strict=True):
        assert (line, col) == (want_line, want_col), got
        assert fragment in message, got
    # The rendering points at each place: `path:line:col: error:` and a caret line.
    rendered = str(info.value)
    for line, col, _ in expected:
        assert f"{path}:{line}:{col}: error: " in rendered
    assert rendered.count("^") >= len(expected)
    assert rendered.endswith("1 error" if len(expected) == 1 else f"{len(expected)} errors")
