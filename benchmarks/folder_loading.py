"""A `folder:` dataset's epoch of loading: decoded into memory first (threads) vs kept on disk and
decoded by DataLoader workers, and the memory each holds.

Writes a folder of JPEG photos (640x480, like a camera's, resized to `--size`), then times one
epoch of training batches (the weak recipe's crop and flip) per variant, each from a cold start
of the set (the stats already cached, as on a second start):

- in memory: the split decoded at once on a pool of threads (the loader before DiskImages),
  then batches cut from the array in the main process;
- on disk, 0 workers: each batch decoded in the main process;
- on disk, N workers: each batch decoded in a worker process.

Memory: the bytes the main process holds for the split (the array, or the paths a worker is
sent: the pickled dataset), and tracemalloc's peak over the epoch. Ratios against the first row.

Usage: benchmarks/folder_loading.py [--images 600] [--size 64] [--workers 2,4] [--quick]
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np


def write_folder(root: Path, images: int, classes: int = 4) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", images), ("val", max(classes, images // 10))):
        for k in range(count):
            folder = root / split / f"class{k % classes}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, (480 // 8, 640 // 8, 3), dtype=np.uint8)
            photo = Image.fromarray(pixels).resize((640, 480), Image.Resampling.BILINEAR)
            photo.save(folder / f"{k}.jpg", quality=90)


def epoch(dataset: str, variant: str, workers: int) -> tuple[float, int, int]:
    """Seconds for one epoch of batches, bytes held for the split, peak bytes traced."""
    from archdsl.data import load_split
    from archdsl.run.loader import ImageSetDataset, make_loader

    tracemalloc.start()
    started = time.perf_counter()
    train = load_split(dataset, "train")
    if variant == "in memory":
        from dataclasses import replace

        train = replace(train, images=np.asarray(train.images))
        held = train.images.nbytes
    else:
        held = len(pickle.dumps(ImageSetDataset(train)))
    for _ in make_loader(train, 64, augment=True, recipe="weak", seed=0, workers=workers):
        pass
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, held, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--quick", action="store_true", help="120 images, 2 workers")
    args = parser.parse_args()
    images, worker_counts = args.images, [int(n) for n in args.workers.split(",")]
    if args.quick:
        images, worker_counts = 120, [2]
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.setdefault("ARCHDSL_CACHE", str(Path(scratch) / "cache"))
        write_folder(Path(scratch) / "photos", images)
        dataset = f"folder:{Path(scratch) / 'photos'},size={args.size}"
        from archdsl.data import load_split

        load_split(dataset, "train")  # the first read: statistics cached, as on any later start
        rows = [("in memory (threads), 0 workers", *epoch(dataset, "in memory", 0))]
        rows += [(f"on disk, {n} workers", *epoch(dataset, "on disk", n)) for n in [0, *worker_counts]]
    base_seconds, base_held, base_peak = rows[0][1:]
    print(f"{images} JPEGs 640x480 -> {args.size}x{args.size}, one epoch of batches of 64, {os.cpu_count()} cores")
    print(f"{'variant':34} {'seconds':>8} {'ratio':>6} {'held (KB)':>10} {'ratio':>7} {'peak (MB)':>10} {'ratio':>6}")
    for name, seconds, held, peak in rows:
        print(
            f"{name:34} {seconds:8.2f} {seconds / base_seconds:6.2f} {held / 1024:10.1f} {held / base_held:7.3f} "
            f"{peak / 2**20:10.1f} {peak / base_peak:6.2f}"
        )


if __name__ == "__main__":
    main()
