"""The `archdsl` command line: one subcommand per module in `archdsl.commands`.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`func` to a `run(args) -> int`. Registration must stay light (no torch import), so that
`archdsl check` answers at once; the heavy imports happen inside `run`.

This is the only layer that prints, and the one that decides where files go: commands check
their output paths before work starts and hand folders down to the library, which writes
only there (through `archdsl.files`). Process-wide settings (matplotlib's backend) are set
here, never in library calls. A `UserError` ends in its message and its exit status, an
`OSError` on a named file in its message and status 1; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import keyword
import os
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
    "import",
    "analyze",
    "search",
    "report",
)


def command_module(name: str) -> str:
    """The module of command `name`; one named after a Python keyword lives in `<name>_.py` (import_.py)."""
    return f"archdsl.commands.{name}_" if keyword.iskeyword(name) else f"archdsl.commands.{name}"


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions as usual, but prints an `examples:` epilog line by line, as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


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
        module = importlib.import_module(command_module(name))
        module.register(subparsers)
        # A command module may list a few command lines (`EXAMPLES`) for the end of its --help.
        command = subparsers.choices[name]
        command.formatter_class = HelpFormatter
        examples = getattr(module, "EXAMPLES", ())
        if examples and command.epilog is None:
            command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    return parser


def main(argv: list[str] | None = None) -> int:
    # The commands draw figures into files only: no GUI backend (and no display) is needed.
    os.environ.setdefault("MPLBACKEND", "Agg")
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
    except OSError as err:
        # A full disk, a file removed or made unreadable mid-run: the machine's state, not a
        # bug in archdsl, and the path says what to fix. Commands check their outputs up front
        # (archdsl.commands.outputs); this is the net for what happens later.
        if err.filename is None:
            raise
        print(f"archdsl: error: {err.strerror or err}: {err.filename}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
