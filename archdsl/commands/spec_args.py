"""The arguments that name a design, worded alike in every command: the spec (a .arch file or a
built-in spec's name) and `--classes`, which `archdsl.lang.with_classes` applies."""

from __future__ import annotations

import argparse
from typing import Any

from archdsl.commands._args import positive_int


def add_spec_argument(
    parser: argparse.ArgumentParser,
    name: str = "spec",
    *,
    what: str | None = None,
    example: str = "alter50",
    **kwargs: Any,
) -> None:
    """The argument `name` (positional, or a flag such as `--spec`) that `archdsl.load_spec` reads;
    `what` says what the design is for, `kwargs` go to `add_argument` (nargs, metavar, required)."""
    text = f"a .arch file or a built-in spec name (e.g. {example})"
    parser.add_argument(name, help=f"{what}: {text}" if what else text, **kwargs)


def add_classes_argument(parser: argparse.ArgumentParser) -> None:
    """`--classes N`: another number of classes than the spec's."""
    parser.add_argument(
        "--classes", type=positive_int, metavar="N", help="override the spec's number of classes (default: the spec's)"
    )
