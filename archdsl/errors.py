"""The one error type for user mistakes, and the one warning type.

Anything a user can get wrong (a bad spec, a missing dataset, a bad flag, a bad storage
URL) raises a `UserError`. The CLI catches exactly this type, prints its message and exits
with `exit_code`; every other exception is a bug in archdsl and keeps its traceback.

Something the user should know that stops nothing (a torn journal record set aside, a
suspicious character in a spec) is an `ArchdslWarning` through Python's `warnings`: the
CLI prints it as `archdsl: warning: ...`, a library user sees or filters it as usual.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """A mistake the user can fix. `str(err)` is the complete message for the terminal."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


def from_worker(err: UserError) -> UserError:
    """`err`, or the error it wraps when torch's DataLoader re-raised a worker's UserError: torch builds a new one
    whose message is "Caught UserError in DataLoader worker process N." and the worker's whole traceback, which
    ends with the original error's own message (and hint). Images decoded by worker processes (a folder's
    files) fail that way: the terminal gets the original line, not the traceback."""
    text = err.message
    marker = f"\n{type(err).__module__}.{type(err).__qualname__}: "
    if not text.startswith(f"Caught {type(err).__name__} in DataLoader worker") or marker not in text:
        return err
    original = text[text.rindex(marker) + len(marker) :].rstrip("\n")
    message, _, hint = original.partition("\n  hint: ")
    return type(err)(message, hint=hint or None)


class UsageError(UserError):
    """A bad command line (unknown flag value, conflicting options): exit status 2."""

    exit_code = 2


def visible(text: object) -> str:
    """`text` (a key, a name read from a file) as it may reach the terminal: control and format
    characters (ESC, NUL, newlines, bidirectional overrides, ...) as Python escapes, so a file
    cannot drive the user's terminal or fake lines of output. For every untrusted text in a message."""
    return "".join(_visible_char(char) for char in str(text))


def visible_lines(text: object) -> str:
    """`visible` for a message of several lines: its line breaks kept, every other control character
    escaped. The CLI prints every error and warning through it, whatever text the message quotes."""
    return "\n".join(visible(line) for line in str(text).split("\n"))


def _visible_char(char: str) -> str:
    if char.isprintable() or char == " ":
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one of `choices` a mistyped `word` most probably meant, or None if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The hint "did you mean `x`?" for a mistyped `word`, or None: the one spelling of
    suggestions in every message (spec keywords, spec and dataset names, options)."""
    match = closest(word, choices)
    return f"did you mean `{match}`?" if match else None


def install_extra(extra: str) -> str:
    """How to install one of archdsl's extras, for a hint: from a package index, and in a clone
    (the README's editable install, where `archdsl[...]` would fetch another copy of archdsl)."""
    return f"pip install 'archdsl[{extra}]' (in a clone of archdsl: pip install -e '.[{extra}]')"


class ArchdslWarning(UserWarning):
    """Worth telling the user; the work goes on."""
