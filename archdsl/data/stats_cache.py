"""Per-channel mean and std of a folder's training images, computed once and kept on disk.

A folder's statistics need every training image decoded (an hour for ImageNet's 1.28 million
on a few cores): they are computed on the first start and kept in
`$ARCHDSL_CACHE/stats/<digest>.json` (default `~/.cache/archdsl`, or `$XDG_CACHE_HOME/archdsl`),
keyed by the digest of the folder's files (paths, sizes, modification times) and of how they
are fitted, so a later start reads two short lists instead of the images, and a changed folder
is read again. A cache that cannot be written (a read-only home) only costs the next start the
same pass; a damaged entry is recomputed.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from archdsl.files import write_json

CACHE_ENV = "ARCHDSL_CACHE"
Stats = tuple[tuple[float, ...], tuple[float, ...]]  # mean, std: one value per channel


def cache_dir() -> Path:
    """Where archdsl keeps what it computes from your data: $ARCHDSL_CACHE, else
    $XDG_CACHE_HOME/archdsl, else ~/.cache/archdsl."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "archdsl"


def cached_stats(key: str, compute: Callable[[], Stats]) -> Stats:
    """The statistics kept under `key`, or `compute()`'s, kept for the next start."""
    path = cache_dir() / "stats" / f"{key}.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return tuple(float(m) for m in saved["mean"]), tuple(float(s) for s in saved["std"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not there yet, or damaged: compute it
    mean, std = compute()
    with contextlib.suppress(OSError):  # a cache only: if it cannot be written, the next start computes them again
        write_json(path, {"mean": list(mean), "std": list(std)})
    return mean, std
