"""`archdsl fmt FILE... [--check] [--diff]`: rewrite specs in their canonical layout.

Comments are kept (attached to the line they end or to the item below them). A file is
rewritten only if its meaning is unchanged (`archdsl.lang.format_source` checks that the IR of
the new text equals the old one).
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from archdsl.commands._say import say, say_error
from archdsl.commands.recording_parser import Subcommands
from archdsl.errors import UsageError, UserError
from archdsl.files import write_text

EXAMPLES = ("archdsl fmt my.arch", "archdsl fmt --check specs/*.arch", "archdsl fmt --diff my.arch")


def register(subparsers: Subcommands) -> None:
    parser = subparsers.add_parser(
        "fmt",
        help="rewrite .arch files in the canonical layout (comments kept)",
        description="Format .arch files in place; with --check or --diff nothing is written.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".arch files to format")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change, listing it")
    parser.add_argument("--diff", action="store_true", help="write nothing; print a unified diff of the changes")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.lang import format_source

    # Check every path before touching any file, so a typo leaves everything as it was.
    for path in args.files:
        if path.is_dir():
            raise UsageError(f"{str(path)!r} is a folder", hint=f"fmt takes .arch files, e.g. {path}/*.arch")
        if path.exists() and not path.is_file():
            raise UsageError(f"{str(path)!r} is not a regular file", hint="fmt rewrites .arch files in place")
        if not path.is_file():
            hint = "fmt takes paths to .arch files"
            if not path.suffix and len(path.parts) == 1:
                hint += " (built-in specs cannot be rewritten: `archdsl check` reads them)"
            raise UsageError(f"no such file: {str(path)!r}", hint=hint)
    status = 0
    changed: list[Path] = []
    for path in args.files:
        try:
            text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is dropped
            formatted = format_source(text, str(path))
        except UserError as err:
            status = max(status, say_error(err))
            continue
        except UnicodeDecodeError:
            say(f"archdsl: error: {str(path)!r} is not UTF-8 text", err=True)
            status = 1
            continue
        if formatted == text:
            continue
        changed.append(path)
        if args.diff:
            diff = difflib.unified_diff(
                text.splitlines(True), formatted.splitlines(True), f"{path}", f"{path} (formatted)"
            )
            say("".join(diff), end="")
        if args.check:
            say(f"would reformat {path}")
        elif not args.diff:
            write_text(path, formatted)  # atomic: a crash never leaves half a spec
            say(f"reformatted {path}")
    if (args.check or args.diff) and changed:
        status = max(status, 1)
    return status
