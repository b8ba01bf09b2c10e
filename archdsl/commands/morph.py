"""`archdsl morph BASE`: move a design along the AlterNet build-up rule and print the spec.

Exactly one of `--layout k1,k2,...` (MSAs per stage), `--msa N` (the first N MSAs of the
build-up order) or `--ratio R` (0 = the base, 1 = the Swin-like endpoint). The result is
printed as canonical `.arch` text, or written with `-o`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from archdsl.commands._args import whole_number
from archdsl.commands._say import say
from archdsl.commands.recording_parser import Subcommands
from archdsl.commands.spec_args import add_spec_argument
from archdsl.errors import UsageError
from archdsl.files import write_text

if TYPE_CHECKING:
    from archdsl.buildup import Window

EXAMPLES = (
    "archdsl morph alter50-base --layout 0,1,1,2 --name alter50",
    "archdsl morph alter50-base --msa 3 --heads 3,6,12,24 --window global",
    "archdsl morph resnet18 --ratio 1 -o swinlike18.arch",
)


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser(
        "morph",
        help="place MSAs in a base spec by the build-up rule (layout, count or ratio)",
        description="Rewrite BASE by the AlterNet build-up rule: k MSAs at the end of each stage "
        "(C*(n-2k) [C M]*k), and print the resulting .arch spec.",
    )
    add_spec_argument(parser, "base", example="alter50-base")
    how = parser.exclusive(required=True)
    how.add_argument("--layout", metavar="K,K,...", help="MSAs per stage, e.g. 0,1,1,2")
    how.add_argument("--msa", metavar="N", type=whole_number(0, "an integer >= 0"), help="add N MSAs in build-up order")
    how.add_argument("--ratio", metavar="R", type=_ratio, help="0 (the base) .. 1 (Swin-like: every stage full)")
    parser.add_argument(
        "--heads", metavar="H,H,...", help="heads per stage, or one value for all (default: 3 per 64 channels of width)"
    )
    parser.add_argument(
        "--window",
        metavar="W",
        help="window size or `global`, one for all or per stage (default: 4 where it tiles the map, else global)",
    )
    parser.add_argument("--name", help="name of the new arch (default: derived from the base)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the spec here instead of printing it")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it already exists")
    parser.set_defaults(func=run)


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1 (0: the base, 1: Swin-like), got {text}")
    return value


def _int_list(text: str, option: str, *, least: int) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"{option} takes comma-separated integers, not {text!r}") from None
    if any(value < least for value in values):
        raise UsageError(f"{option} takes integers >= {least}, not {text!r}")
    return values


def _windows(text: str | None) -> Window | list[Window]:
    if text is None:
        return None
    values: list[Window] = []
    for part in text.split(","):
        part = part.strip()
        if part == "global":
            values.append("global")
            continue
        try:
            number = int(part)
        except ValueError:
            raise UsageError(f"--window takes integers or `global`, not {part!r}") from None
        if number < 1:
            raise UsageError(f"--window takes positive integers or `global`, not {part!r}")
        values.append(number)
    return values[0] if len(values) == 1 else values


def run(args: argparse.Namespace) -> int:
    from archdsl.buildup import buildup, layout, ratio
    from archdsl.lang import format_arch, load_spec
    from archdsl.outputs import prepare_file

    base = load_spec(args.base)
    if args.output is not None:  # an existing file may be a hand-written spec (even BASE itself)
        prepare_file(args.output, "--output", overwrite=args.force)
    heads = None
    if args.heads is not None:
        heads_list = _int_list(args.heads, "--heads", least=1)
        heads = heads_list[0] if len(heads_list) == 1 else heads_list
    window = _windows(args.window)
    if args.layout is not None:
        arch = layout(base, _int_list(args.layout, "--layout", least=0), heads, window, name=args.name)
    elif args.msa is not None:
        arch = buildup(base, args.msa, heads, window, name=args.name)
    else:
        arch = ratio(base, args.ratio, heads, window, name=args.name)
    text = format_arch(arch)
    if args.output is None:
        say(text, end="" if text.endswith("\n") else "\n")
    else:
        write_text(args.output, text)
        say(f"wrote {arch.name} ({arch.n_msa} MSA, digest {arch.short_id}) to {args.output}")
    return 0
