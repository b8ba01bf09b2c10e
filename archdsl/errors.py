"""The one error type for user mistakes.

Anything a user can get wrong (a bad spec, a missing dataset, a bad flag, a bad storage
URL) raises a `UserError`. The CLI catches exactly this type, prints its message and exits
with `exit_code`; every other exception is a bug in archdsl and keeps its traceback.
"""

from __future__ import annotations


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


class UsageError(UserError):
    """A bad command line (unknown flag value, conflicting options): exit status 2."""

    exit_code = 2
