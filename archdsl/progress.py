"""The one way archdsl makes progress bars: tqdm's, drawn only on a terminal.

`show=False` hides a bar; `show=True` still hides it when stderr is not a TTY (tqdm's
`disable=None`), so a run piped into a log file gets no `\\r`-separated bar updates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def progress_bar(iterable: Iterable[T] | None = None, *, show: bool, **options: Any) -> Any:
    """A tqdm bar over `iterable` (or a manual one with `total=`), drawn only if `show` and stderr is a terminal."""
    from tqdm.auto import tqdm  # imported here: `import archdsl` stays light

    return tqdm(iterable, disable=None if show else True, dynamic_ncols=True, **options)
