"""Reading a call's arguments: binding them to parameter names and checking each value, with
the language's messages (every mistake reported with its span, then a neutral value used).

The settings, the built-in blocks and the plug-in kinds (`archdsl.kinds`) all read their
arguments through `ArgumentReader`, so a mistake reads the same wherever it is made.
"""

from __future__ import annotations

import math
import re

from archdsl.errors import did_you_mean
from archdsl.lang.diagnostics import Diagnostic, Span
from archdsl.lang.limits import MAX_NUMBER
from archdsl.lang.parser import Arg, Call, Name, Number, Value
from archdsl.lang.parser import _one_of as one_of  # "a, b or c", as the syntax errors list tokens
from archdsl.lang.problems import Path

BOOLEANS = {"true": True, "false": False}

# Guards against inputs that are valid syntax but absurd (`conv*999999999`, numbers past
# int32, ...) live in `archdsl.lang.limits`; they are reported here with their spans.

_INTEGER = re.compile(r"[+\-]?[0-9]+\Z")
_DECIMAL = re.compile(r"[+\-]?[0-9]*\.[0-9]*([eE][+\-]?[0-9]+)?\Z|[+\-]?[0-9]+[eE][+\-]?[0-9]+\Z")
DIMS = re.compile(r"[0-9]+(x[0-9]+)*\Z")


def describe(value: Value) -> str:
    if isinstance(value, Call):
        return f"`{value.name.text}(...)`"
    return f"`{value.text}`"


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class ArgumentReader:
    """Diagnostics and source spans collected while reading values."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.spans: dict[Path, Span] = {}
        self._bind_failed = False  # whether the latest `bind` reported a bad argument

    def error(self, span: Span | None, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(span, message, hint))

    def positive_int(self, value: Value, what: str) -> int | None:
        """The value as a whole number >= 1, or None after reporting why it is not one."""
        return self.integer(value, what, low=1)

    def integer(self, value: Value, what: str, low: float | None = None, high: float | None = None) -> int | None:
        """The value as a whole number within `low`..`high` (and the language's limit), or None after
        reporting why it is not one."""
        if not isinstance(value, Number):
            self.error(value.span, f"{what} must be a number, not {describe(value)}")
            return None
        text = value.text
        if _INTEGER.match(text):
            number = int(text)
            if low is not None and number < low:
                self.error(value.span, f"{what} must be at least {_bound(low)}, got {number}")
                return None
            if high is not None and number > high:
                self.error(value.span, f"{what} must be at most {_bound(high)}, got {number}")
                return None
            if number > MAX_NUMBER:
                self.error(value.span, f"{what} is too large: {text}", f"at most {MAX_NUMBER}")
                return None
            return number
        if _DECIMAL.match(text):
            self.error(value.span, f"{what} must be a whole number, got {text}")
        else:
            self.error(value.span, f"bad number `{text}`", f"{what} is written with digits only, e.g. 64")
        return None

    def whole_number(self, value: Value, what: str) -> int | None:
        """A number >= 0 (`shift=0` is no shift), or None after reporting why it is not one."""
        if isinstance(value, Number) and _INTEGER.match(value.text) and int(value.text) == 0:
            return 0
        return self.positive_int(value, what)

    def boolean(self, value: Value, what: str) -> bool | None:
        """`true` or `false`, or None after reporting why the value is neither."""
        if isinstance(value, Name) and value.text in BOOLEANS:
            return BOOLEANS[value.text]
        hint = did_you_mean(value.text, tuple(BOOLEANS)) if isinstance(value, Name) else None
        self.error(value.span, f"{what} must be `true` or `false`, not {describe(value)}", hint)
        return None

    def positive_float(self, value: Value, what: str) -> float | None:
        """A number above 0 (`1e-6`, `0.5`, `2`), or None after reporting why it is not one."""
        read = self._real(value, what)
        if read is None:
            return None
        number, text = read
        if not math.isfinite(number) or number <= 0:
            self.error(value.span, f"{what} must be above 0, got {text}")
            return None
        return number

    def real(self, value: Value, what: str, low: float | None = None, high: float | None = None) -> float | None:
        """A number within `low`..`high` (`1e-6`, `0.5`, `2`), or None after reporting why it is not one."""
        read = self._real(value, what)
        if read is None:
            return None
        number, text = read
        if not math.isfinite(number):
            self.error(value.span, f"{what} must be a finite number, got {text}")
        elif low is not None and number < low:
            self.error(value.span, f"{what} must be at least {_bound(low)}, got {text}")
        elif high is not None and number > high:
            self.error(value.span, f"{what} must be at most {_bound(high)}, got {text}")
        else:
            return number
        return None

    def _real(self, value: Value, what: str) -> tuple[float, str] | None:
        """The value as a float and as written, or None after reporting that it is no number."""
        text = value.text if isinstance(value, Number) else None
        if text is None or not (_INTEGER.match(text) or _DECIMAL.match(text)):
            hint = f"{what} is written like 1e-6 or 0.5"
            self.error(value.span, f"{what} must be a number, not {describe(value)}", hint)
            return None
        return float(text), text

    def bind(self, args: tuple[Arg, ...], callee: str, params: tuple[str, ...]) -> dict[str, Arg]:
        """Match arguments to parameter names like Python does (by position, in the order of
        `params`, then by keyword); report every mismatch."""
        positional = len(params)
        errors_before = len(self.diagnostics)
        bound: dict[str, Arg] = {}
        seen_keyword = False
        n_positional = 0
        for arg in args:
            if arg.keyword is None:
                if seen_keyword:
                    self.error(
                        arg.span,
                        f"positional argument after a keyword argument in `{callee}(...)`",
                        "write positional arguments first",
                    )
                    continue
                if n_positional >= positional:
                    plural = "s" if positional != 1 else ""
                    self.error(
                        arg.span,
                        f"`{callee}` takes at most {positional} positional argument{plural} ({', '.join(params)})",
                    )
                    continue
                name = params[n_positional]
                n_positional += 1
            else:
                seen_keyword = True
                name = arg.keyword.text
                if name not in params:
                    hint = did_you_mean(name, params) or f"`{callee}` takes: {', '.join(params)}"
                    self.error(arg.keyword.span, f"unknown argument `{name}` for `{callee}`", hint)
                    continue
            if name in bound:
                self.error(arg.span, f"argument `{name}` of `{callee}` given twice")
                continue
            bound[name] = arg
        self._bind_failed = len(self.diagnostics) > errors_before
        return bound

    def require(self, bound: dict[str, Arg], name: str, callee: str, span: Span, example: str) -> Arg | None:
        # After a bad argument (`windw=4`) the missing one is its echo: report only the cause.
        if name not in bound:
            if not self._bind_failed:
                self.error(span, f"`{callee}` needs `{name}`", f"e.g. {example}")
            return None
        return bound[name]

    def choice(self, value: Value, options: tuple[str, ...], what: str, example: str) -> Name | None:
        """The name a setting's value is called by, if it is one of `options`; else None after reporting it."""
        name = value.name if isinstance(value, Call) else value
        if isinstance(name, Name) and name.text in options:
            return name
        hint = did_you_mean(name.text, options) if isinstance(name, Name) else None
        listed = one_of([f"`{option}`" for option in options])
        self.error(name.span, f"{what} must be {listed}, not {describe(value)}", hint or example)
        return None
