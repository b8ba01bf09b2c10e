"""Argument types shared by the commands' flags that are not settings fields (those are made from
their fields: archdsl.commands.settings_flags).

Each type raises `argparse.ArgumentTypeError`, so a bad value is a usage error (exit 2)
with argparse's `argument --flag: ...` prefix. Light: no torch, nothing heavy imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn


def whole_number(least: int, wanted: str) -> Callable[[str], int]:
    """The type of a flag that takes an integer of at least `least` (`wanted` says what it expects)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {value}")
        return value

    return parse


positive_int = whole_number(1, "a positive integer")


def renamed(new: str, why: str) -> Callable[[str], NoReturn]:
    """The type of a flag's old name: any value is refused, naming the flag to give instead (and in a
    --config file the key), with `why` it was renamed."""

    def refuse(text: str) -> NoReturn:
        key = new.removeprefix("--").replace("-", "_")
        raise argparse.ArgumentTypeError(f"renamed {new} ({why}): give {new} {text}, or `{key}:` in a --config file")

    return refuse


def name_list(text: str) -> tuple[str, ...]:
    """A list flag's value: names separated by commas, `fog,contrast` (every list flag of every
    command takes this one form; repeats are dropped)."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names
