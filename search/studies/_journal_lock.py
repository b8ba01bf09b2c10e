"""The lock a study journal's writers take turns with: Optuna's symbolic link `PATH.lock`, without its endless spin.

Optuna (4.9-5.x) judges a lock by the modification time of the file its link points at: a dangling link (the study
folder moved while a worker held it) fails `os.stat`, and Optuna retries forever at 100 % CPU; with its grace period
it removes a lock it judges stale, which a worker on another machine may still hold. This lock judges the link
itself (`os.lstat`) and stops on a stale one with a UserError; it never removes it (docs/storage.md, "A lock left
behind", says why). Releasing the link is Optuna's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from optuna.storages.journal import JournalFileSymlinkLock

from archdsl.errors import UserError

GRACE_PERIOD_S = 30  # Optuna's grace period for a journal lock; a write holds it for milliseconds
_MAX_SLEEP_S = 1.0


class JournalLock(JournalFileSymlinkLock):
    """Optuna's symbolic-link lock on a journal, with a stale or dangling lock refused (see the module)."""

    def __init__(self, journal: str | os.PathLike[str], grace_period: float = GRACE_PERIOD_S) -> None:
        super().__init__(str(journal), grace_period=None)  # None: Optuna's own forced release is off
        self._target = str(journal)  # our own copy: Optuna's attribute for it is private
        self._link = Path(f"{journal}.lock")
        self._grace = grace_period

    def acquire(self) -> bool:
        sleep_s = 0.001
        seen: tuple[int, int] | None = None  # the waited-on link's (inode, mtime): a new holder makes a new link
        seen_since = time.monotonic()
        while True:
            try:
                os.symlink(self._target, self._link)
                return True
            except FileExistsError:
                pass
            try:
                info = os.lstat(self._link)
            except FileNotFoundError:  # released between the two calls: try again at once
                continue
            if seen != (info.st_ino, info.st_mtime_ns):
                seen, seen_since = (info.st_ino, info.st_mtime_ns), time.monotonic()
            waited = time.monotonic() - seen_since
            # The link's age by the clock as well: a link left long ago is named after a second, not a grace period.
            age = max(waited, time.time() - info.st_mtime)
            if waited >= min(1.0, self._grace) and age >= self._grace:
                raise stale_lock_error(self._link, age)
            time.sleep(sleep_s)
            sleep_s = min(sleep_s * 2, _MAX_SLEEP_S)


def stale_lock_error(link: Path, age: float) -> UserError:
    """The UserError for a journal lock left behind: which link, where it points, and how to clear it."""
    target = os.readlink(link) if link.is_symlink() else None
    dangling = target is not None and not (link.parent / target).exists()
    why = f", and points at {target}, which does not exist (the study folder moved while a worker wrote?)"
    return UserError(
        f"the study journal's lock {link} has been held for {age:.0f} s{why if dangling else ''}: "
        "a worker stopped while writing, or it is not released",
        hint=f"if no worker of this study is running, remove the lock (rm {link}) and run again",
    )
