"""The one way a command prints: every line goes through `archdsl.errors.visible_lines`, since any
of them may quote a name the user typed or a file held (a spec name, an --out path, a study's
trial), and a name must not drive the user's terminal (colours, cursor moves, cleared screens)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archdsl.errors import UserError


def say(text: object = "", *, err: bool = False, end: str = "\n", flush: bool = False) -> None:
    """Print `text` to stdout (stderr with `err`), control characters escaped, line breaks kept."""
    from archdsl.errors import visible_lines

    print(visible_lines(text), end=end, file=sys.stderr if err else sys.stdout, flush=flush)


def say_error(err: UserError) -> int:
    """`err` on stderr as the CLI says it (a spec's mistakes with their places, else `archdsl: error: ...`),
    for a command that goes on to its next file; the exit status it asks for."""
    say(str(err) if getattr(err, "diagnostics", None) else f"archdsl: error: {err}", err=True)
    return err.exit_code
