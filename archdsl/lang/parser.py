"""Text -> AST: the syntax of `.arch` specs, with a source span on every node.

The grammar (`grammar.lark`) is generic on purpose: keywords are plain names and numbers
are lexed leniently, so that this module only decides *structure* (braces, brackets,
commas, `*N`) and `archdsl.lang.lower` decides *meaning* with precise messages. Lark's
exceptions are turned into `Diagnostic`s here; nothing from lark escapes.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.resources
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.tree import Meta

from archdsl.errors import ArchdslWarning
from archdsl.lang.diagnostics import Diagnostic, Span, SpecError
from archdsl.lang.limits import MAX_SOURCE_BYTES

# --- AST -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    """A token that starts with a digit: `100`, `3x32x32`, or a bad one like `1O0`."""

    text: str
    span: Span


@dataclass(frozen=True)
class Name:
    text: str
    span: Span


@dataclass(frozen=True)
class Arg:
    """One call argument; `keyword` is None for a positional one."""

    keyword: Name | None
    value: Value
    span: Span


@dataclass(frozen=True)
class Call:
    """`name(args)`, e.g. `conv3x3(64)`, `bottleneck(expansion=4)`, `c1(width=64)`."""

    name: Name
    args: tuple[Arg, ...]
    span: Span


Value = Number | Name | Call


@dataclass(frozen=True)
class BlockRef:
    """A block in a stage body: `conv`, `conv(basic)`, `msa(6, 4)`; `args` None without parens."""

    name: Name
    args: tuple[Arg, ...] | None
    span: Span


@dataclass(frozen=True)
class Group:
    """`[seq]`, a bracketed sequence (useful with a repeat)."""

    elements: tuple[Element, ...]
    span: Span


@dataclass(frozen=True)
class Element:
    """A block or group with an optional repeat count (`conv*3`, `[conv msa(6, 4)]*2`)."""

    atom: BlockRef | Group
    count: Number | None
    span: Span


@dataclass(frozen=True)
class Setting:
    """`keyword [=] value [{ blocks }]`: `input 3x32x32`, `conv = basic`, `stage c1(width=64) { ... }`."""

    keyword: Name
    value: Value
    body: tuple[Element, ...] | None
    body_span: Span | None
    span: Span


@dataclass(frozen=True)
class ArchNode:
    """The whole file: `arch NAME { settings }`; `keyword` should read `arch`."""

    keyword: Name
    name: Name
    settings: tuple[Setting, ...]
    span: Span


# --- tree -> AST ----------------------------------------------------------------------


def _token_span(token: Token) -> Span:
    # Lark types positions as optional; the LALR parser sets them on every token.
    return Span(cast(int, token.line), cast(int, token.column), cast(int, token.end_line), cast(int, token.end_column))


def _meta_span(meta: Meta) -> Span:
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _join(first: Span, last: Span) -> Span:
    return Span(first.line, first.column, last.end_line, last.end_column)


def _span_of(node: Value | Element) -> Span:
    return node.span


class _ToAst(Transformer[Token, ArchNode]):
    """Bottom-up: each rule returns its AST node. A rule's span (`meta`) covers its
    brackets too, since lark computes it from all its tokens, filtered ones included."""

    def number(self, children: list[Token]) -> Number:
        (token,) = children
        return Number(str(token), _token_span(token))

    def name(self, children: list[Token]) -> Name:
        (token,) = children
        return Name(str(token), _token_span(token))

    def arglist(self, children: list[Arg | Value | None]) -> tuple[Arg, ...]:
        args = []
        for child in children:
            if child is None:  # `()`: the optional first argument is absent
                continue
            args.append(child if isinstance(child, Arg) else Arg(None, child, _span_of(child)))
        return tuple(args)

    @v_args(meta=True)
    def keyword_arg(self, meta: Meta, children: list[Any]) -> Arg:
        keyword, value = children
        return Arg(Name(str(keyword), _token_span(keyword)), value, _meta_span(meta))

    @v_args(meta=True)
    def call(self, meta: Meta, children: list[Any]) -> Call:
        token, args = children
        return Call(Name(str(token), _token_span(token)), args, _meta_span(meta))

    @v_args(meta=True)
    def block(self, meta: Meta, children: list[Any]) -> BlockRef:
        token, args = children
        return BlockRef(Name(str(token), _token_span(token)), args, _meta_span(meta))

    def seq(self, children: list[Any]) -> tuple[Element, ...]:
        return tuple(child for child in children if isinstance(child, Element))

    @v_args(meta=True)
    def group(self, meta: Meta, children: list[Any]) -> Group:
        (elements,) = children
        return Group(elements, _meta_span(meta))

    @v_args(meta=True)
    def element(self, meta: Meta, children: list[Any]) -> Element:
        atom, count_token = children
        count = Number(str(count_token), _token_span(count_token)) if count_token is not None else None
        return Element(atom, count, _meta_span(meta))

    @v_args(meta=True)
    def body(self, meta: Meta, children: list[Any]) -> tuple[tuple[Element, ...], Span]:
        (elements,) = children
        return elements, _meta_span(meta)

    def setting(self, children: list[Any]) -> Setting:
        keyword, value, body = children
        name = Name(str(keyword), _token_span(keyword))
        elements, body_span = body if body is not None else (None, None)
        # The setting's own span is `keyword value`: errors about it point there, not at its body.
        return Setting(name, value, elements, body_span, _join(name.span, _span_of(value)))

    def start(self, children: list[Any]) -> ArchNode:
        keyword, name, *settings = children
        keyword_name = Name(str(keyword), _token_span(keyword))
        arch_name = Name(str(name), _token_span(name))
        return ArchNode(keyword_name, arch_name, tuple(settings), _join(keyword_name.span, arch_name.span))


# --- parsing and syntax errors ----------------------------------------------------------

# In the order they are listed in "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "COMMA": "`,`",
    "EQUAL": "`=`",
    "STAR": "`*`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "$END": "the end of the file",
    "<END-OF-FILE>": "the end of the file",
}
_END = {"$END", "<END-OF-FILE>"}
_CLOSERS = {"{": "}", "[": "]", "(": ")"}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = importlib.resources.files("archdsl.lang").joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def _one_of(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _expected_text(expected: set[str]) -> str:
    order = list(_TERMINAL_NAMES)
    names = [_TERMINAL_NAMES.get(t, t) for t in sorted(expected, key=lambda t: order.index(t) if t in order else 99)]
    return _one_of(names)


def _open_brackets(text: str, stop: tuple[int, int] | None = None) -> list[tuple[str, Span]]:
    """Brackets still open at `stop` (line, column) or at the end; innermost last. Comments skipped."""
    stack: list[tuple[str, Span]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        for col, char in enumerate(line.split("#", 1)[0], start=1):
            if stop is not None and (line_no, col) >= stop:
                return stack
            if char in _CLOSERS:
                stack.append((char, Span.point(line_no, col)))
            elif char in _CLOSERS.values() and stack and _CLOSERS[stack[-1][0]] == char:
                stack.pop()
    return stack


def _end_span(text: str) -> Span:
    lines = text.splitlines() or [""]
    return Span.point(len(lines), len(lines[-1]) + 1)


def _expected_terminals(err: UnexpectedInput) -> set[str]:
    # LALR merges states, so `err.expected` can list tokens that are not acceptable here
    # (after `msa(2` it offers `{`); the interactive parser knows the exact set.
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:
        try:
            return set(parser.accepts())
        except Exception:  # pragma: no cover - accepts() is best effort; fall back to lark's set
            pass
    return set(getattr(err, "expected", set()) or set())


def _is_blank(text: str) -> bool:
    return not any(line.split("#", 1)[0].strip() for line in text.splitlines())


def _bracket_hint(text: str, token: Token) -> str | None:
    """Explain an unexpected token by the brackets around it (the usual cause)."""
    at = _token_span(token)
    open_now = _open_brackets(text, (at.line, at.column))
    if token.type in ("RPAR", "RSQB", "RBRACE"):
        opener = {v: k for k, v in _CLOSERS.items()}[str(token)]
        if all(char != opener for char, _ in open_now):
            return f"this `{token}` closes nothing"
        char, span = open_now[-1]
        if _CLOSERS[char] != str(token):
            return f"the `{char}` on line {span.line}, column {span.column} is still open"
        return None
    if open_now:
        char, span = open_now[-1]
        if span.line < at.line and token.type in ("LBRACE", "NAME"):
            return f"is a `{_CLOSERS[char]}` missing? the `{char}` on line {span.line} is still open"
    return None


def _syntax_diagnostic(err: UnexpectedInput, text: str) -> Diagnostic:
    if isinstance(err, UnexpectedCharacters):
        position = err.pos_in_stream
        char = text[position] if position is not None and position < len(text) else "?"
        hint = "a spec holds names, numbers, `{ } [ ] ( ) , * =` and `#` comments"
        return Diagnostic(Span.point(err.line, err.column), f"unexpected character {char!r}", hint)
    expected = _expected_terminals(err)
    at_end = isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END")
    if at_end:
        if _is_blank(text):
            return Diagnostic(Span.point(1, 1), "empty spec", "a spec reads `arch NAME { input 3x32x32 ... }`")
        open_now = _open_brackets(text)
        if open_now:
            char, span = open_now[-1]
            return Diagnostic(span, f"unclosed `{char}`", f"close it with `{_CLOSERS[char]}`")
        return Diagnostic(_end_span(text), f"unexpected end of the file: expected {_expected_text(expected)}")
    assert isinstance(err, UnexpectedToken)  # characters and the end of the file are handled above
    token = err.token
    shown = f"`{token}`"
    span = _token_span(token)
    if expected and expected <= _END:
        return Diagnostic(span, f"unexpected {shown} after the end of the arch", "a file holds one `arch NAME { ... }`")
    message = (
        f"unexpected {shown}: expected {_expected_text(expected)}" if len(expected) <= 5 else f"unexpected {shown}"
    )
    advice = "separate arguments with `,`" if expected == {"COMMA", "RPAR"} else _bracket_hint(text, token)
    return Diagnostic(span, message, advice)


def check_size(size: int, path: str) -> None:
    """Refuse a spec over the size limit before it is read or parsed (`SpecError`)."""
    if size > MAX_SOURCE_BYTES:
        raise SpecError(
            [
                Diagnostic(
                    None,
                    f"the spec is {size:,} bytes; a spec file holds at most {MAX_SOURCE_BYTES:,} bytes",
                    "is it a spec? a .arch file is a few hundred bytes of text",
                )
            ],
            path=path,
        )


@contextlib.contextmanager
def _no_garbage_collection() -> Iterator[None]:
    """Parsing makes hundreds of thousands of small objects and no cycles. Python's cyclic
    collector, run every few hundred allocations over everything alive, made parse time
    grow faster than the text (benchmarks/lang_check.py); paused, it is linear."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse(text: str, path: str = "<string>") -> ArchNode:
    """Parse spec text into an `ArchNode`, or raise `SpecError` at the first syntax error."""
    check_size(len(text.encode("utf-8", "surrogatepass")), path)
    with _no_garbage_collection():
        try:
            tree = _lark().parse(text)
        except UnexpectedInput as err:
            raise SpecError([_syntax_diagnostic(err, text)], source=text, path=path) from None
        except RecursionError:  # pragma: no cover - lark's LALR parser is iterative; kept as a guard
            raise SpecError([Diagnostic(None, "the spec is nested too deeply")], source=text, path=path) from None
        try:
            node = _ToAst().transform(tree)
        except (RecursionError, VisitError) as err:
            if isinstance(err, VisitError) and not isinstance(err.orig_exc, RecursionError):
                raise
            raise SpecError(
                [Diagnostic(None, "the spec is nested too deeply", "use fewer levels of `[...]`")],
                source=text,
                path=path,
            ) from None
    _warn_bidi_controls(text, path)
    return node


# Characters that make a terminal or an editor show text in another order than it is read
# (the "Trojan Source" attack): in a comment they could hide what a spec really says.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _warn_bidi_controls(text: str, path: str) -> None:
    """One warning per file, at the first such character, with the count."""
    first = _BIDI_CONTROLS.search(text)
    if first is None:
        return
    count = len(_BIDI_CONTROLS.findall(text))
    line = text.count("\n", 0, first.start()) + 1
    column = first.start() - (text.rfind("\n", 0, first.start()) + 1) + 1
    more = f" (and {count - 1} more)" if count > 1 else ""
    warnings.warn(
        f"{path}:{line}:{column}: a bidirectional control character (U+{ord(first.group()):04X}) in a comment{more}: "
        "the text may show in another order than archdsl reads it",
        ArchdslWarning,
        stacklevel=3,
    )


_COMMENT = re.compile(r"#[^\n]*")


def comments(text: str) -> list[tuple[int, str]]:
    """Every `#` comment as (line, text). `#` has no other use in the language, so a scan suffices
    (line by line: counting newlines from the start for each comment was quadratic)."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _COMMENT.search(line)
        if match:
            found.append((number, match.group().rstrip()))
    return found
