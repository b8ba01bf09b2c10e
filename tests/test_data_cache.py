"""Generated datasets are cached by the bytes they hold, not by their count."""

from __future__ import annotations

import numpy as np

from archdsl.data import load_corrupted, registry
from archdsl.data._cache import ByteBoundedCache, nbytes


def test_the_least_recently_used_go_first_once_the_budget_is_spent():
    cache = ByteBoundedCache(max_bytes=3000)
    made = []

    def make(key):
        made.append(key)
        return np.zeros(1000, dtype=np.uint8)

    for key in ("a", "b", "c"):
        cache.get(key, lambda key=key: make(key))
    cache.get("a", lambda: make("a"))  # a hit: "a" is now the most recent
    cache.get("d", lambda: make("d"))  # over budget: "b" goes
    assert made == ["a", "b", "c", "d"] and len(cache) == 3 and cache.bytes == 3000
    cache.get("b", lambda: make("b"))
    assert made[-1] == "b"  # it had been evicted
    big = cache.get("huge", lambda: np.zeros(5000, dtype=np.uint8))  # larger than the budget: not kept
    assert len(big) == 5000 and cache.bytes <= 3000


def test_the_corrupted_sets_cache_stays_within_its_bytes(monkeypatch):
    cache = registry._generated_corrupted_set.cache
    cache.clear()
    monkeypatch.setattr(cache, "max_bytes", 700_000)  # two sets of 100 images (about 0.31 MB each)
    sets = load_corrupted("synthetic-c:test=100", corruptions=["contrast", "brightness"], severities=[1, 2, 3])
    assert len(sets) == 6 and nbytes(sets[0].images) > 300_000
    assert len(cache) == 2 and cache.bytes <= 700_000
    again = load_corrupted("synthetic-c:test=100", corruptions=["brightness"], severities=[3])[0]
    assert again.images is sets[-1].images  # the most recent ones are still there
    cache.clear()
