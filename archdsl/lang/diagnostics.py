"""Errors in a spec, with the place they happened and how to render them for a terminal.

Every mistake in a `.arch` file, in syntax or in meaning, becomes a `Diagnostic`; all the
diagnostics of one file travel together in one `SpecError`, whose `str()` is the complete
report the CLI prints:

    specs/bad.arch:3:52: error: window 8 does not fit the 4x4 map of stage c4
        stage c4(width=512, stride=2) { [conv msa(24, 8)]*2 }
                                                       ^
      hint: windows that tile the 4x4 map: 1, 2, 4, or `global`
    1 error
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archdsl.errors import UserError, visible, visible_lines


@dataclass(frozen=True, order=True)
class Span:
    """A region of the source, 1-based; `end_column` is one past the last character."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, line: int, column: int) -> Span:
        return cls(line, column, line, column + 1)


@dataclass(frozen=True)
class Diagnostic:
    """One mistake: where (None when there is no source, e.g. an IR built in code), what, and a fix."""

    span: Span | None
    message: str
    hint: str | None = None


SHOWN_WIDTH = 100  # characters of a source line shown under a message; longer lines are cut around the caret
_CONTEXT_BEFORE = 40  # of those, before the caret


def _caret_lines(source_line: str, span: Span) -> list[str]:
    # Tabs are expanded in both the line and the caret prefix, so the caret stays under the
    # right character whatever the user's tab width (the prefix is a prefix of the line).
    line = source_line.expandtabs(4).rstrip()
    start = len(source_line[: span.column - 1].expandtabs(4))
    if span.end_line == span.line:
        end = len(source_line[: max(span.end_column - 1, span.column)].expandtabs(4))
    else:
        end = len(line)  # a multi-line span: underline to the end of its first line
    # Escape what must not reach the terminal raw; offsets[i] is where character i starts.
    pieces = [visible(char) for char in line]
    offsets = [0]
    for piece in pieces:
        offsets.append(offsets[-1] + len(piece))
    shown = "".join(pieces)
    start, end = (offsets[min(i, len(line))] + max(i - len(line), 0) for i in (start, end))
    width = max(end - start, 1)
    if len(shown) > SHOWN_WIDTH:  # a long line (or a file of one line): the part around the caret
        first = max(0, min(start - _CONTEXT_BEFORE, len(shown) - SHOWN_WIDTH))
        last = first + SHOWN_WIDTH
        lead = "..." if first > 0 else ""
        shown = lead + shown[first:last] + ("..." if last < len(shown) else "")
        start = start - first + len(lead)
        width = max(1, min(width, len(shown) - start))
    return [f"    {shown}", "    " + " " * start + "^" + "~" * (width - 1)]


def render(diagnostics: Sequence[Diagnostic], source: str | None, path: str) -> str:
    """`path:line:col: error: message`, the source line, a caret, the hint; then a count."""
    lines_of_source = source.splitlines() if source is not None else []
    out: list[str] = []
    for diag in diagnostics:
        span = diag.span
        if span is None:
            out.append(f"{path}: error: {diag.message}")
        else:
            out.append(f"{path}:{span.line}:{span.column}: error: {diag.message}")
            if 1 <= span.line <= len(lines_of_source):
                out.extend(_caret_lines(lines_of_source[span.line - 1], span))
        if diag.hint:
            out.append(f"  hint: {diag.hint}")
    count = len(diagnostics)
    out.append(f"{count} error" if count == 1 else f"{count} errors")
    # Messages and paths may quote names read from a file (a checkpoint's design): escaped as the source is.
    return visible_lines("\n".join(out))


class SpecError(UserError):
    """A spec with one or more mistakes. `str(err)` renders them all (the CLI prints that)."""

    exit_code = 1

    def __init__(self, diagnostics: Sequence[Diagnostic], *, source: str | None = None, path: str = "<string>") -> None:
        if not diagnostics:
            raise ValueError("a SpecError needs at least one diagnostic")
        # Sorted by position so the report reads top to bottom; span-less ones go last.
        self.diagnostics: tuple[Diagnostic, ...] = tuple(
            sorted(diagnostics, key=lambda d: (d.span is None, d.span or Span(0, 0, 0, 0)))
        )
        self.source = source
        self.path = path
        first = self.diagnostics[0]
        super().__init__(first.message, hint=first.hint)

    def __str__(self) -> str:
        return render(self.diagnostics, self.source, self.path)
