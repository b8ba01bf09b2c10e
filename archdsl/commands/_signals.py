"""SIGTERM as an interruption: a scheduler (SLURM, Kubernetes, systemd, `kill`) stopping a command gets the same
clean ending as Ctrl-C.

Python's default for SIGTERM ends the process where it stands: no `finally` runs, so a search would leave its
paired seeds' processes training (`archdsl.search.fidelity.seeds_aside`) and its trial RUNNING in the journal.
Raised in the main thread as a `KeyboardInterrupt`, it takes Ctrl-C's path instead: the seeds' processes are
stopped, the trial is marked and queued again, and the command ends in one line with 128 + SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM (raised by `terminate_as_interrupt`); `status` is the exit status it ends in."""

    status = 128 + signal.SIGTERM


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM raises `Terminated` in the main thread. A second SIGTERM, while the first one's
    clean-up runs, ends the process at once (Python's default), as a second Ctrl-C is expected to."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        yield
        return

    def on_sigterm(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated("by SIGTERM")

    before = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
