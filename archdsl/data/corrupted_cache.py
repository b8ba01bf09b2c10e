"""Generated corrupted copies kept on disk: made by the first process, read back by every later one.

A dataset without released corrupted sets (`folder:`, `hf:`, `imagenet`, mnist and fashion-mnist)
gets its 15 corruptions x 5 severities from the generator (`archdsl.data.corruptions`): minutes
on a folder of photos, which every `analyze`, `eval` and `search` process would otherwise repeat.
Each copy is kept as `cache_dir()/corrupted/<key>/<corruption>-<severity>.npy` (the cache folder
of `archdsl.data.stats_cache`) and read back memory-mapped and read-only. `<key>` digests what
identifies the clean images (the caller's: the digest of its files and how they are fitted) and
the generator's code (`generator_version`), so a changed folder or a changed generator is made
again instead of served stale. As with the statistics: a cache that cannot be written costs only
the next process the same work, never an error; a damaged or truncated entry is made again and
replaced; each file is written whole (a temporary file renamed into place).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from archdsl.data.stats_cache import cache_dir
from archdsl.errors import UserError, visible
from archdsl.files import atomic_writer

FOLDER = "corrupted"  # under cache_dir(): delete it to clear every kept copy
# A copy is kept only if its disk keeps this much free after it, and the copies kept stay within the budget
# (GiB, $ARCHDSL_CORRUPTED_CACHE_GIB): ImageNet's 50,000 validation images make 75 copies of 7.5 GB, which
# must not fill the disk of a home folder; past the budget, a process makes the copies it lacks again.
FREE_RESERVE_BYTES = 2 * 2**30
BUDGET_ENV = "ARCHDSL_CORRUPTED_CACHE_GIB"
DEFAULT_BUDGET_GIB = 32.0


@functools.cache
def generator_version(code: tuple[object, ...]) -> str:
    """16 hex digits of the source of `code` (the modules and functions that compute a copy's
    pixels) and of the libraries whose arithmetic they use (numpy, scipy, Pillow).

    A digest of the code rather than a version constant to bump by hand: no change to the
    generator (a parameter, an operation, how a seed becomes a stream) can serve copies made
    before it. Any edit, a comment included, makes the copies once more: the safe side. Where
    the source is not installed, the archdsl version stands for it."""
    import PIL
    import scipy

    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"numpy {np.__version__} scipy {scipy.__version__} Pillow {PIL.__version__}\n".encode())
    for part in code:
        try:
            source = inspect.getsource(part)  # type: ignore[arg-type]
        except (OSError, TypeError):
            from archdsl import __version__

            source = f"{getattr(part, '__qualname__', getattr(part, '__name__', part))} of archdsl {__version__}"
        digest.update(source.encode())
    return digest.hexdigest()


def copy_path(identity: str, version: str, corruption: str, severity: int) -> Path:
    """Where the copy of the clean images `identity` names, under `corruption` at `severity`, is kept."""
    key = hashlib.blake2b(f"{identity}\n{version}".encode(), digest_size=8).hexdigest()
    return cache_dir() / FOLDER / key / f"{corruption}-{severity}.npy"


def kept_copy(path: Path, shape: tuple[int, ...], make: Callable[[], np.ndarray]) -> np.ndarray:
    """The uint8 images of `shape` kept at `path` (memory-mapped, read-only), or `make()`'s, kept
    there for the next process. An entry of another shape or type, or one that does not read (a
    truncated file, a damaged header), is made again and replaced."""
    budget = budget_bytes()  # a bad $ARCHDSL_CORRUPTED_CACHE_GIB is refused before any work
    try:
        kept = np.load(path, mmap_mode="r", allow_pickle=False)
        if kept.shape == tuple(shape) and kept.dtype == np.uint8:
            return kept
    except (OSError, ValueError, EOFError):
        pass  # not there yet, or damaged: make it
    images = make()
    # A cache only: if it cannot be written (or would fill the disk), the next process makes the copy again.
    with contextlib.suppress(OSError):
        if _room_for(path, images.nbytes, budget):
            with atomic_writer(path, binary=True) as stream:
                np.save(stream, images, allow_pickle=False)
    images.setflags(write=False)
    return images


def budget_bytes() -> int:
    """The most bytes of copies kept under `cache_dir()/corrupted`: $ARCHDSL_CORRUPTED_CACHE_GIB, else 32 GiB."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return int(DEFAULT_BUDGET_GIB * 2**30)
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib < 0:
        raise UserError(f"{BUDGET_ENV}={visible(text)}: not a size in GiB", hint="e.g. 32, or 0 to keep no copy")
    return int(gib * 2**30)


def _room_for(path: Path, size: int, budget: int) -> bool:
    """Whether `size` more bytes keep the copies within `budget` and the cache's disk `FREE_RESERVE_BYTES` free."""
    kept = sum(entry.stat().st_size for entry in (cache_dir() / FOLDER).glob("*/*.npy"))
    if kept + size > budget:
        return False
    folder = next(parent for parent in (path, *path.parents) if parent.exists())
    return shutil.disk_usage(folder).free - size >= FREE_RESERVE_BYTES
