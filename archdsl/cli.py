"""The `archdsl` command line: one subcommand per module in `archdsl.commands`.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`func` to a `run(args) -> int`. Registration must stay light (no torch import), so that
`archdsl check` answers at once; the heavy imports happen inside `run`.

This is the only layer that prints or touches files on the user's behalf. A `UserError`
ends in its message and its exit status; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from archdsl.errors import UserError

# The order is the order of `archdsl --help`.
COMMAND_MODULES = (
    "check",
    "fmt",
    "compile",
    "morph",
    "data",
    "train",
    "eval",
    "analyze",
    "search",
    "report",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archdsl",
        description=(
            "Design hybrid CNN/Transformer vision networks as .arch specs: check and compile "
            "them to PyTorch, morph them along the AlterNet build-up rule, train and analyse "
            "them, and search where the MSAs should go."
        ),
        epilog="Run `archdsl COMMAND --help` for the options of one command.",
    )
    from archdsl import __version__

    parser.add_argument("--version", action="version", version=f"archdsl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"archdsl.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"archdsl: error: {err}" if not getattr(err, "diagnostics", None) else str(err), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("archdsl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
