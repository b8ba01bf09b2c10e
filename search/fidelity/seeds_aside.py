"""A design's later paired seeds trained beside its first, each in a forked one-thread process (CPU only).

Why: a search's candidates are small, and torch's intra-op threads speed one small model's training far less
than the cores it holds (on 2 cores, 2 threads train odd-one-out's base 1.2-1.3x faster than one). Training the
paired seeds side by side, one thread each, keeps every core busy on its own model: the trial's wall time falls
from about (seeds / 1.3) to (seeds / cores) seeds' worth. The values are the same as training the seeds in turn
on one thread each (a test holds them equal): each seed trains the same model on the same batches; only where
it runs changes.

Used where it can change nothing but the time: a CPU device, more than one paired seed, at least two cores,
`fork` available (the children share the loaded data copy-on-write) and no torchrun group (whose ranks must
stay in step). The first seed stays in the calling process: its curve goes to the pruner and its model to the
analyses; the later seeds' processes send back only their numbers, and a pruned or failed trial stops them.
The search owns them: they end with it, however it ends (stopped by its `finally` on an exception, Ctrl-C or
SIGTERM; killed by the kernel when their parent dies by SIGKILL), and one that dies fails its trial in one line.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True)
class SeedFigures:
    """What a later seed's process sends back: its validation top-1 and its test top-1 (for the seal)."""

    accuracy: float
    test: float


class SeedAsideFailed(Exception):
    """A later seed's process ended without its figures (killed, or an error that could not be sent back)."""


def cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_seconds() -> float:
    """The CPU time of this process (every thread) and of its children that have ended: a trial's CPU with its
    later seeds' processes counted (they are joined before the trial records its time)."""
    try:
        import resource
    except ImportError:  # not Unix: no children (fork is Unix's)
        return time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def can_train_aside(device: str, seeds: int, *, distributed: bool) -> bool:
    """Whether a design's `seeds` paired seeds train side by side here (the module's docstring says when)."""
    return (
        seeds > 1
        and device == "cpu"
        and not distributed
        and cores() >= 2
        and "fork" in multiprocessing.get_all_start_methods()
    )


def threads_each(seeds: int) -> int:
    """The intra-op threads each seed's process uses: the cores shared out, at least one (so a 16-core machine
    training 3 seeds gives each 5 threads, and 2 cores with 3 seeds run three one-thread processes)."""
    return max(1, cores() // seeds)


class _Aside:
    """The processes training the later seeds; `figures()` waits for them, in seed order."""

    def __init__(self, train_one: Callable[[int], SeedFigures], seeds: list[int], threads: int) -> None:
        context = multiprocessing.get_context("fork")
        self._children: list[tuple[Any, Connection]] = []
        for seed in seeds:
            receive, send = context.Pipe(duplex=False)
            # not a daemon: a daemon may not start the DataLoader workers that images read from disk train with
            child = context.Process(target=_child, args=(train_one, seed, threads, send, os.getpid()))
            child.start()
            send.close()  # the parent keeps only its reading end: EOF once the child has gone
            self._children.append((child, receive))

    def figures(self) -> list[SeedFigures]:
        results = []
        for child, receive in self._children:
            try:
                kind, payload = receive.recv()
            except EOFError:
                child.join()
                raise SeedAsideFailed(f"a paired seed's training process {_ending(child.exitcode)}") from None
            child.join()
            if kind == "error":
                raise payload
            results.append(payload)
        return results

    def stop(self) -> None:
        for child, receive in self._children:
            if child.is_alive():
                child.kill()
            child.join()
            receive.close()


@contextmanager
def seeds_aside(train_one: Callable[[int], SeedFigures], seeds: list[int]) -> Iterator[_Aside]:
    """Start one process per seed of `seeds`, each calling `train_one(seed)` on its share of the cores, while the
    caller trains the first seed on its own share; leaving the block (the trial pruned, failed, or done) stops
    whatever still runs. The caller's thread count is set to its share inside the block and restored after."""
    import torch

    threads = threads_each(len(seeds) + 1)
    before = torch.get_num_threads()
    aside = _Aside(train_one, seeds, threads)
    torch.set_num_threads(threads)
    try:
        yield aside
    finally:
        torch.set_num_threads(before)
        aside.stop()


def _ending(exitcode: int | None) -> str:
    """How a seed's process ended without its figures, in words: "was killed (SIGKILL)", "exited with code 3"."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed ({signal.Signals(-exitcode).name})"
        except ValueError:  # a signal number Python has no name for
            return f"was killed (signal {-exitcode})"
    return f"exited with code {exitcode} without its result"


def _end_with_parent(parent: int) -> None:
    """In a seed's process: die with the search (Linux's parent-death signal), even where the search is killed
    by SIGKILL and no `finally` of its runs; and take SIGTERM as its default (to end), not as the search's
    interruption (`archdsl.commands._signals`), which the fork copied: a seed sent SIGTERM fails its trial."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the search's `finally` stops its seeds, SIGKILL aside
        return
    if os.getppid() != parent:  # the search died before the signal was asked for
        os._exit(1)


def _child(train_one: Callable[[int], SeedFigures], seed: int, threads: int, send: Connection, parent: int) -> None:
    """A later seed's process: train it on `threads` threads and send its figures, or the error that stopped it
    (re-raised in the parent, so that a diverged seed fails its trial as it would in turn)."""
    _end_with_parent(parent)
    import torch

    torch.set_num_threads(threads)
    try:
        message: tuple[str, Any] = ("ok", train_one(seed))
    except BaseException as err:  # noqa: BLE001 - every failure goes back to the trial, which decides
        message = ("error", err)
    try:
        send.send(message)
    except Exception:  # the error itself does not pickle: send its text
        send.send(("error", SeedAsideFailed("".join(traceback.format_exception(message[1])))))
    finally:
        send.close()
        os._exit(0)  # no atexit handlers of the parent's (Optuna's storage, progress bars) run in the child
