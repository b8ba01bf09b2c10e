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
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from archdsl.commands.config_file import settings_from_config
from archdsl.commands.recording_parser import RecordingParser
from archdsl.errors import ArchdslWarning, UserError, did_you_mean, from_worker, visible_lines

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
    "study",
)


def command_module(name: str) -> str:
    """The module of command `name`; one named after a Python keyword lives in `<name>_.py` (import_.py)."""
    return f"archdsl.commands.{name}_" if keyword.iskeyword(name) else f"archdsl.commands.{name}"


class CommandParser(RecordingParser):
    """Every archdsl parser: flags are spelled out, and a flag a command does not know is its error.

    argparse's defaults would run `train --epoch 1` as `--epochs 1` (abbreviations), and hand an
    unknown flag up to `archdsl`, whose usage line says nothing about the command's flags. Here
    an unknown flag ends with the command's own usage and the flag it most probably meant.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        with settings_from_config(self, args):  # `--config FILE.yaml`: the file's values as defaults
            known, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}" + self._suggestion(extras))
        return known, extras

    def _suggestion(self, extras: list[str]) -> str:
        flags = self.long_flags()
        for word in extras:
            hint = did_you_mean(word.split("=", 1)[0], flags) if word.startswith("--") else None
            if hint:
                return f"\n  hint: {hint}"
        return ""


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions as usual, but prints an `examples:` epilog line by line, as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
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
    # Subcommands (and theirs, `data list`) are made by the parser's class: CommandParser.
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
    """Run one command line; the exit status. A reader that closes the pipe early (`archdsl
    search --dry-run | head -3`) ends the command quietly, with the status of a process a
    closed pipe stopped (128 + SIGPIPE), as `head`'s other writers end."""
    try:
        status = _run(argv)
        sys.stdout.flush()  # output still buffered meets the closed pipe here, not at exit
        return status
    except BrokenPipeError:
        # Python would report the failed flush again at exit: stdout goes nowhere from now on.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + SIGPIPE


def program() -> NoReturn:
    """The `archdsl` program (its script and `python -m archdsl`): `main()`'s status as the exit status.
    A rank that torchrun started ends without the interpreter's teardown
    (`archdsl.run.distributed.exit_rank`: torch's gloo threads outlive the command)."""
    try:
        status = main()
        from archdsl.run import distributed  # after the command: `archdsl check` stays quick

        if distributed.launched():
            distributed.exit_rank(status)
    except KeyboardInterrupt:  # Ctrl-C after the command's own handling (`_run`), or while it printed its line
        print("archdsl: interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)


SIGPIPE = getattr(signal, "SIGPIPE", 13)  # 13 on every POSIX system; Windows has no SIGPIPE
DDP_GRAD_STRIDES = "Grad strides do not match bucket view strides"  # torch's warning, from its start


def _run(argv: list[str] | None) -> int:
    # The commands draw figures into files only: no GUI backend (and no display) is needed.
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        parser = build_parser()  # inside: Ctrl-C while the commands' modules load is an interruption too
        args = parser.parse_args(argv)  # a bad --config file is a UsageError, a bad flag argparse's exit 2
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        with warnings.catch_warnings():
            warnings.simplefilter("always", ArchdslWarning)
            # DDP's, at the first step of every data-parallel run of a channels_last model: its gradients and its
            # buckets differ in strides only where a dimension has size 1 (a 1x1 kernel; autograd's layout
            # contract allows no other difference), so they hold the same bytes in the same order
            # (docs/training.md, "Data-parallel training").
            warnings.filterwarnings("ignore", message=DDP_GRAD_STRIDES, category=UserWarning)
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except UserError as raised:
        err = from_worker(raised)
        # Messages quote names and keys read from files: printed with their control characters escaped.
        message = f"archdsl: error: {err}" if not getattr(err, "diagnostics", None) else str(err)
        print(visible_lines(message), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as err:  # its message, if any, says what was interrupted ("while connecting to HOST:PORT")
        print(f"archdsl: interrupted {err}".rstrip(), file=sys.stderr)
        return getattr(err, "status", 130)  # 130 for Ctrl-C, 143 for SIGTERM (commands._signals.Terminated)
    except OSError as err:
        # A full disk, a file removed or made unreadable mid-run: the machine's state, not a
        # bug in archdsl, and the path says what to fix. Commands check their outputs up front
        # (archdsl.outputs); this is the net for what happens later.
        if err.filename is None:
            raise
        print(visible_lines(f"archdsl: error: {err.strerror or err}: {err.filename}"), file=sys.stderr)
        return 1


_default_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """archdsl's own warnings as one line for the user; anyone else's as Python prints them."""
    if issubclass(category, ArchdslWarning):
        print(visible_lines(f"archdsl: warning: {message}"), file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
