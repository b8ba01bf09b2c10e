"""The one way archdsl makes progress bars: tqdm's, drawn only on a terminal, and never a stray line.

`show=False` hides a bar; `show=True` still hides it when stderr is not a TTY (tqdm's
`disable=None`), so a run piped into a log file gets no `\\r`-separated bar updates. There
`log_line` says what the bar would have shown, one plain line per step worth a line (an epoch),
so that a log is never silent for minutes.

On a terminal a bar leaves no line that says nothing:
- it first shows after `DELAY_SECONDS` (tqdm's `delay`), so a step that ends sooner (a cached
  or empty one, a tiny evaluation) draws nothing at all;
- it clears itself when closed without any work done (a failure or Ctrl-C before the first
  step, an empty loop), instead of leaving a `0%` line above what is printed next.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

DELAY_SECONDS = 0.5  # a bar that finishes within this never shows


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
