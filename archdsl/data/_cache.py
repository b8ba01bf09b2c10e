"""A least-recently-used cache bounded by the bytes it holds, not by its number of entries.

Generated datasets are cached per process (analysis asks for the same 75 corrupted sets for
every model), but their size depends on the user's parameters (`synthetic:test=50000`): a
cache of N entries could hold any amount of memory. This one evicts the least recently used
entries once the arrays it holds pass `max_bytes`; a value larger than the budget on its own
is returned without being kept.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
MiB = 2**20


def nbytes(value: Any) -> int:
    """The bytes of the numpy arrays in `value`: an array, a tuple/list of them, or an object
    with `images` and `labels` arrays (an ImageSet)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(nbytes(item) for item in value)
    if hasattr(value, "images") and hasattr(value, "labels"):
        return nbytes(value.images) + nbytes(value.labels)
    return 0


class ByteBoundedCache:
    """`get(key, make)`: the cached value of `key`, or `make()`'s (kept if it fits)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        value = make()
        size = nbytes(value)
        if size > self.max_bytes:
            return value
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, size)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, (_, evicted) = self._entries.popitem(last=False)
                    self._bytes -= evicted
            return self._entries[key][0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def byte_bounded_cache(max_bytes: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: cache a function of hashable arguments in a `ByteBoundedCache` (`.cache`,
    `.cache_clear()`)."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        cache = ByteBoundedCache(max_bytes)

        @functools.wraps(function)
        def cached(*args: Hashable) -> T:
            return cache.get(args, lambda: function(*args))

        cached.cache = cache  # type: ignore[attr-defined]
        cached.cache_clear = cache.clear  # type: ignore[attr-defined]
        return cached

    return decorate
