"""Writing files: the one small I/O layer that the CLI and the library share.

Where files go is the caller's decision: the CLI picks and checks every output path before
work starts (`archdsl.outputs`), and a library function that keeps artefacts (a
training run, a checkpoint, a search trial, generated CIFAR-C files, a search report)
writes only at the path or inside the folder it was given. Every such write goes through
this module, which writes to a temporary file beside the target and renames it into place:
a crash, a full disk or Ctrl-C mid-write leaves the previous file whole, never half a file.

The result is what a plain `open(path, "w")` would leave, apart from the atomicity: a new file
gets the mode the umask allows (0666 & ~umask; `mkstemp` alone makes 0600), a replaced file
keeps its mode, and a symlink is followed (its target is replaced, the link stays a link).

A write into a folder archdsl owns (a run, a study, an analysis) names that folder, `within=`:
then a symbolic link anywhere between the folder and the file is refused (`LinkedPathError`)
instead of followed, so a link planted among a run's files (on shared scratch space, say) cannot
make archdsl replace, append to or delete a file outside the folder. The folder itself may be a link.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from archdsl.errors import UserError, visible

Folder = str | os.PathLike[str] | None


class LinkedPathError(UserError):
    """A write into a run, study or analysis folder met a symbolic link on its way (see the module)."""


def check_within(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """`path`, refused (`LinkedPathError`) if it or a folder between `folder` and it is a symbolic link,
    or if it lies outside `folder`. `folder` itself may be a link: the user chose it."""
    target, root = Path(path), Path(folder)
    try:
        parts = target.relative_to(root).parts
    except ValueError:
        raise LinkedPathError(f"refusing to write {visible(target)}: it is outside {visible(root)}") from None
    step = root
    for part in parts:
        if part in ("", ".", ".."):
            raise LinkedPathError(f"refusing to write {visible(target)}: it is outside {visible(root)}")
        step = step / part
        if step.is_symlink():
            raise LinkedPathError(
                f"refusing to write {visible(target)}: {visible(step)} is a symbolic link "
                f"(to {visible(os.readlink(step))}), and archdsl never writes outside {visible(root)}",
                hint=f"remove the link {visible(step)} (archdsl writes its own file there), or pass another --out",
            )
    return target


def what_is_there(path: str | os.PathLike[str]) -> str:
    """What stands at `path` where a regular file was expected, for a message: "no such file", "a
    folder, not a file", "a FIFO, not a regular file", ..."""
    target = Path(path)
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"{kind}, not a file" if kind == "a folder" else f"{kind}, not a regular file"


def ensure_dir(path: str | os.PathLike[str], *, within: Folder = None) -> Path:
    """The folder `path`, created with its parents if missing (no link on the way from `within`)."""
    if within is not None:
        check_within(path, within)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, within: Folder = None) -> Iterator[Path]:
    """A temporary path beside `path` to write to; renamed onto `path` when the block succeeds.

    The temporary name keeps the target's suffix, for writers that choose a format by it
    (matplotlib's `savefig`). If the block fails the temporary file is removed. With `within`,
    a link on the way from that folder is refused (`check_within`), not followed.
    """
    target = Path(path)
    if within is not None:
        check_within(target, within)
    elif target.is_symlink():
        target = Path(os.path.realpath(target))  # write the file the link points at
    ensure_dir(target.parent)
    mode = _mode_of(target)
    handle, name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}", dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, mode)  # after the writer: one that re-creates the file gets it too
        try:
            os.replace(temporary, target)
        except OSError as err:  # the message names the user's file, not our temporary one
            raise OSError(err.errno, err.strerror, str(target)) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def is_in_progress(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a temporary file of `atomic_path` (its name hidden): a write in progress,
    maybe another process's, that no one else may remove."""
    return Path(path).name.startswith(".")


@contextlib.contextmanager
def held_lock(path: str | os.PathLike[str], *, within: Folder = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created if missing, kept) for the block: processes
    (and threads, each with its own call) that rewrite the same files take turns.

    The system releases the lock when its holder exits, so a crash leaves no stale lock behind
    (flock; NFS honours it on Linux). Where there is no flock (Windows), or the file system refuses
    locks (some NFS mounts: ENOLCK), the block runs unlocked: each file is still written whole
    (`atomic_path`), only the writers' turns are not kept.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    target = Path(path)
    ensure_dir(target.parent, within=within)
    if within is not None:
        check_within(target, within)
    with open(target, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)  # Ctrl-C while waiting raises KeyboardInterrupt (PEP 475)
            locked = True
        except OSError as err:
            if err.errno not in _NO_LOCKS:
                raise
            locked = False
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


# What flock raises on a file system that keeps no locks.
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


def _mode_of(target: Path) -> int:
    """The permission bits `target` should end with: its own if it exists, else 0666 & ~umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where the system tells it (Linux's
    /proc/self/status); elsewhere set and put back at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, binary: bool = False, within: Folder = None) -> Iterator[IO[Any]]:
    """An open file (text, UTF-8, or binary) whose content replaces `path` when the block succeeds."""
    with atomic_path(path, within=within) as temporary:
        if binary:
            with open(temporary, "wb") as stream:
                yield stream
        else:
            with open(temporary, "w", encoding="utf-8", newline="") as stream:
                yield stream


def write_text(path: str | os.PathLike[str], text: str, *, within: Folder = None) -> Path:
    """Write `text` (UTF-8) to `path` atomically; returns the path."""
    with atomic_writer(path, within=within) as stream:
        stream.write(text)
    return Path(path)


def write_json(path: str | os.PathLike[str], data: Any, *, within: Folder = None) -> Path:
    """Write `data` as indented JSON (non-JSON values as their `str`) to `path` atomically."""
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n", within=within)


class _Figure(Protocol):
    def savefig(self, fname: Any, **kwargs: Any) -> Any: ...


def save_figure(figure: _Figure, path: str | os.PathLike[str], *, within: Folder = None, **savefig: Any) -> Path:
    """Save a matplotlib figure to `path` atomically (format from the suffix); returns the path."""
    with atomic_path(path, within=within) as temporary:
        figure.savefig(temporary, **savefig)
    return Path(path)
