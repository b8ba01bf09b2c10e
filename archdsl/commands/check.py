"""`archdsl check FILE...`: validate specs and print one summary line per good one.

Pure front end: importing or running this command never imports torch, so checking a
spec answers at once (a test holds it to that).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archdsl.commands._say import say, say_error
from archdsl.commands.recording_parser import Subcommands
from archdsl.commands.spec_args import add_spec_argument
from archdsl.errors import UserError

if TYPE_CHECKING:
    from archdsl.ir import Arch


EXAMPLES = ("archdsl check alter50", "archdsl check my.arch other.arch")


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser(
        "check",
        help="validate .arch specs (syntax, shapes, windows) without building them",
        description="Parse and check each spec; print `path: ok (...)` or every mistake with its place.",
    )
    add_spec_argument(parser, "specs", nargs="+", metavar="SPEC")
    parser.set_defaults(func=run)


def summary_line(label: str, arch: Arch) -> str:
    """`label: ok (name, N blocks, M MSA, init <scheme>, id <short id>)`."""
    return f"{label}: ok ({arch.name}, {arch.n_blocks} blocks, {arch.n_msa} MSA, init {arch.init}, id {arch.short_id})"


def run(args: argparse.Namespace) -> int:
    from archdsl.lang import load_spec
    from archdsl.nn import ensure_fits  # arithmetic on the IR, no torch

    status = 0
    for spec in args.specs:
        try:
            arch = load_spec(spec)
            ensure_fits(arch)
        except UserError as err:  # every file is reported, not just the first bad one; the exit status remembers
            status = max(status, say_error(err))
            continue
        say(summary_line(spec, arch))
    return status
