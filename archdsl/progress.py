"""The one way archdsl makes progress bars: tqdm's, drawn only on a terminal, and never a stray line.

`show=False` hides a bar; `show=True` still hides it when stderr is not a TTY (tqdm's
`disable=None`), so a run piped into a log file gets no `\\r`-separated bar updates. There
`log_line` says what the bar would have shown, one plain line per step worth a line (an epoch),
so that a log is never silent for minutes; `StepLog` does it for a loop of many short steps (a
corrupted set, a Hessian-vector product), a line at most every `LOG_EVERY_SECONDS`.

On a terminal a bar leaves no line that says nothing:
- it first shows after `DELAY_SECONDS` (tqdm's `delay`), so a step that ends sooner (a cached
  or empty one, a tiny evaluation) draws nothing at all;
- it clears itself when closed without any work done (a failure or Ctrl-C before the first
  step, an empty loop), instead of leaving a `0%` line above what is printed next.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

DELAY_SECONDS = 0.5  # a bar that finishes within this never shows
LOG_EVERY_SECONDS = 10.0  # a log's lines of a loop of steps: at most one this often, and the last step's


def progress_bar(iterable: Iterable[T] | None = None, *, show: bool, **options: Any) -> Any:
    """A tqdm bar over `iterable` (or a manual one with `total=`), drawn only if `show` and stderr is a terminal."""
    options.setdefault("delay", DELAY_SECONDS)
    return _bar_class()(iterable, disable=None if show else True, dynamic_ncols=True, **options)


def log_line(text: str, *, show: bool, file: Any = None) -> None:
    """`text` as one plain line on stderr (or `file`) where `progress_bar(show=show)` draws nothing
    because the output is not a terminal (a log file, a pipe); on a terminal the bar says it."""
    stream = sys.stderr if file is None else file
    if show and not _is_terminal(stream):
        print(text, file=stream, flush=True)


def _is_terminal(stream: Any) -> bool:
    """tqdm's test for `disable=None`: a stream without `isatty`, or a closed one, counts as no terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@cache
def _bar_class() -> type:
    from tqdm.auto import tqdm  # imported here: `import archdsl` stays light

    class Bar(tqdm):
        """tqdm, with `delay` kept by every redraw and no line left by a bar that did nothing."""

        _shown = False

        def display(self, msg: str | None = None, pos: int | None = None) -> bool:
            # tqdm waits `delay` before its own redraws, but `set_description`/`set_postfix`
            # draw at once; a bar drawn that way and closed within the delay kept its half
            # line without a newline, and the next output ran on behind it.
            if not self._shown and self.delay > 0 and self._time() < self.start_t + self.delay:
                return False
            self._shown = True
            return super().display(msg, pos)

        def close(self) -> None:
            if not getattr(self, "disable", True):
                if self.n == self.initial:
                    self.leave = False  # nothing done: clear the line rather than leave `0%` behind
                if self._shown:
                    # tqdm decides "never displayed" from its own redraws only; a bar drawn
                    # by a postfix must still clear its line or end it with a newline.
                    self.last_print_t: float = max(self.last_print_t, self.start_t + self.delay)
            super().close()

    return Bar


class StepLog:
    """Plain lines on stderr for a loop of `total` steps where `progress_bar(show=show)` draws nothing (a log, a
    pipe): `what: 3/75 <text>` when LOG_EVERY_SECONDS have passed since the last line (the first step's too), and
    at the last step, so a log shows a long loop moving without a line per quick step."""

    def __init__(self, what: str, total: int, *, show: bool) -> None:
        self.what, self.total, self.show = what, total, show
        self.done = 0
        self._last: float | None = None
        self._ended = False

    def step(self, text: str = "", count: int = 1) -> None:
        """`count` more steps done; `text` says where the loop is (`fog 3: top-1 0.52`)."""
        self.done += count
        now = time.monotonic()
        if self._ended:
            return  # the last step's line is said once
        self._ended = self.done >= self.total
        if self._last is None or now - self._last >= LOG_EVERY_SECONDS or self._ended:
            self._last = now
            log_line(f"{self.what}: {self.done}/{self.total}" + (f" {text}" if text else ""), show=self.show)


class Stages:
    """The seconds each stage of a long command took (`seconds`, by name, in the order they ran), and in a log
    (where the stages' bars are not drawn) a line as each starts and as it ends: `analyze: robustness ... mean
    top-1 over the corrupted test sets`, `analyze: robustness took 12.3 s`."""

    def __init__(self, command: str, *, show: bool) -> None:
        self.command, self.show = command, show
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str, what: str = "") -> Iterator[None]:
        """Time the block as stage `name` (its seconds add up, where a stage runs twice); `what` says more."""
        log_line(f"{self.command}: {name} ..." + (f" {what}" if what else ""), show=self.show)
        start = time.perf_counter()
        yield
        took = time.perf_counter() - start
        self.seconds[name] = round(self.seconds.get(name, 0.0) + took, 3)
        log_line(f"{self.command}: {name} took {took:.1f} s", show=self.show)
