"""Rendering of diagnostics: `path:line:col: error: message`, source line, caret, hint, count."""

from __future__ import annotations

from archdsl.lang.diagnostics import Diagnostic, Span, SpecError, render

SOURCE = "arch t {\n    stage c4 { msa(24, 8) }\n}\n"


def test_render_points_a_caret_under_the_span():
    diag = Diagnostic(Span(2, 24, 2, 25), "window 8 does not fit the 4x4 map of stage c4", "use `global`")
    assert render([diag], SOURCE, "x.arch").splitlines() == [
        "x.arch:2:24: error: window 8 does not fit the 4x4 map of stage c4",
        "        stage c4 { msa(24, 8) }",
        "                           ^",
        "  hint: use `global`",
        "1 error",
    ]


def test_caret_underlines_the_whole_span_and_tabs_keep_alignment():
    text = "\tstage c1 { mas }\n"
    out = render([Diagnostic(Span(1, 13, 1, 16), "unknown block `mas`")], text, "t.arch").splitlines()
    line, caret = out[1], out[2]
    assert caret.strip() == "^~~"
    assert line.index("mas") == caret.index("^")


def test_spec_error_sorts_and_counts_and_handles_missing_spans():
    err = SpecError(
        [Diagnostic(None, "late"), Diagnostic(Span(2, 5, 2, 10), "second"), Diagnostic(Span(1, 1, 1, 5), "first")],
        source=SOURCE,
        path="p.arch",
    )
    assert [d.message for d in err.diagnostics] == ["first", "second", "late"]
    text = str(err)
    assert "p.arch: error: late" in text
    assert text.index("first") < text.index("second") < text.index("late")
    assert text.endswith("\n3 errors")
    assert err.exit_code == 1 and err.message == "first"
