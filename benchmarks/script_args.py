"""The benchmarks' own argument checks, as `archdsl`'s CLI makes them: a bad value ends in one line (argparse's
`error:` for a flag's type, exit 2; `archdsl: error:` for a `UsageError`), never a traceback after minutes of
work. Users rerun these scripts from the docs, with paths and names of their own.

Argparse types (`positive_int`, `fraction`, `shard`, `at_least(0)`) check a flag's value alone; the output
checks (`output_file`, `output_folder`, `file_prefix`) run before any work, so a run never ends on a path it
cannot write, nor writes outside the folder it was given.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

from archdsl.errors import UsageError, visible

PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a file name's start: no folder, no `..`, nothing unprintable


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more (epochs, threads, a run count)."""
    return at_least(1)(text)


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of `low` or more."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{visible(text)}' is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value

    return whole


def fraction(text: str) -> float:
    """An argparse type: a fraction of the images, above 0 and at most 1 (never NaN, which every comparison
    lets through)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{visible(text)}' is not a number") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"{visible(text)} is not a fraction above 0 and at most 1")
    return value


def non_negative(text: str) -> float:
    """An argparse type: a finite number of 0 or more (points of top-1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{visible(text)}' is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{visible(text)} is not a finite number of 0 or more")
    return value


def shard(text: str) -> tuple[int, int]:
    """An argparse type: `I/N`, this process's share of the runs (every N-th from the I-th, 0 <= I < N)."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{visible(text)}' is not I/N (0/2 and 1/2: two shards)") from None
    if not slash or n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"'{visible(text)}': I must be 0 to N-1 of N shards (0/2 and 1/2: two)")
    return i, n


def output_file(path: str | None, option: str) -> None:
    """A file the script will write, checked before its work: not a folder, in a folder that exists."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} '{visible(path)}' is a folder", hint=f"give {option} a file path")
    folder = target.parent
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise UsageError(
            f"{option} '{visible(path)}': its folder '{visible(folder)}' {what}",
            hint=f"create the folder first, or give {option} a path in one",
        )


def output_folder(path: str | None, option: str) -> None:
    """A folder the script will write into (created if missing): not a file, nor under one."""
    if path is None:
        return
    existing = next((p for p in (Path(path), *Path(path).parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UsageError(f"{option} '{visible(path)}': '{visible(existing)}' is a file", hint=f"give {option} a folder")


def file_prefix(name: str, option: str) -> None:
    """A prefix of a file name the script writes into its folder: letters, digits, `.`, `_`, `-`, so that the
    file stays in that folder (no `/`, no `..`) and its name prints as typed (no terminal escapes)."""
    if name and not PREFIX.fullmatch(name):
        raise UsageError(
            f"{option} '{visible(name)}' is not a plain file-name prefix",
            hint=f"{option} takes letters, digits, '.', '_' and '-' (and starts with a letter or digit)",
        )
