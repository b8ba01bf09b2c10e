"""Checks on the paths a command will write, done before any work starts.

A run that trains for an hour and then finds it cannot create its output folder, or that
quietly replaces a trained checkpoint, loses work. So commands call these first: a path
that cannot be written, or that holds something we would overwrite, is a `UserError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from archdsl.errors import UserError

RUNS_DIR = "runs"  # where runs and studies go unless told otherwise (`--out`)


def prepare_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Create the output folder `path` (and its parents) and return it; `option` names the flag."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {str(path)!r} is a file, not a folder", hint=f"give {option} a folder path")
    _make_dir(path, f"the {option} folder {str(path)!r}", option)
    return path


@contextmanager
def output_dir(path: str | os.PathLike[str], option: str) -> Iterator[Path]:
    """`prepare_dir` for a command whose inputs are checked next (the dataset, the storage): when
    the block ends in a `UserError` (or Ctrl-C), the folders this call created are removed again, if they are
    still empty, so a mistake leaves no empty `--out` behind (and never removes anything written)."""
    path = Path(path)
    with _removed_on_error(path):
        yield prepare_dir(path, option)


@contextmanager
def output_file(path: str | os.PathLike[str], option: str, *, overwrite: bool = False) -> Iterator[Path]:
    """`prepare_file` for a command that reads its inputs next: a `UserError` in the block removes
    the folders this call made for the file, if they are still empty."""
    path = Path(path)
    with _removed_on_error(path.parent):
        yield prepare_file(path, option, overwrite=overwrite)


@contextmanager
def _removed_on_error(folder: Path) -> Iterator[None]:
    new = [p for p in (folder, *folder.parents) if not p.exists()]  # innermost first
    try:
        yield
    except (UserError, KeyboardInterrupt):
        for made in new:
            try:
                made.rmdir()  # only an empty folder goes
            except OSError:
                break
        raise


def prepare_file(path: str | os.PathLike[str], option: str, *, overwrite: bool = False) -> Path:
    """Check that the output file `path` may be written (creating its folder); refuse to replace one
    unless `overwrite`, since it may be a trained checkpoint or a hand-written spec."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{option} {str(path)!r} is a folder", hint=f"give {option} a file path")
    if path.exists() and not overwrite:
        raise UserError(
            f"{option} {str(path)!r} already exists", hint="add --force to overwrite it, or choose another path"
        )
    _make_dir(path.parent, f"the folder of {option} {str(path)!r}", option)
    return path


def _make_dir(path: Path, what: str, option: str) -> None:
    hint = f"give {option} a path you can write to"
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UserError(f"cannot create {what}: {str(existing)!r} is a file", hint=hint)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {what}: {err.strerror}", hint=hint) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into {what}: permission denied", hint=hint)
