"""A `folder:` dataset's 15 x 5 corrupted test sets: generated (the first process) against read back
from the on-disk cache (every later process), side by side.

Writes a folder of Fashion-MNIST-sized images (28x28 grey PNGs: Fashion-MNIST's test images where the
data root or the Debian package has them, else random ones), then runs `load_corrupted` on it in
fresh processes sharing one cache folder: the first generates every set and keeps it
(`archdsl.data.corrupted_cache`), the later ones read the kept copies. Each process times only
`load_corrupted` (not Python's start), with every set's pixels touched (`np.asarray(...).sum()`)
so that a memory-mapped copy is really read.

Usage: benchmarks/corrupted_cache.py [--images 300] [--repeats 2] [--data-root DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TIMED = """
import sys, time
import numpy as np
from archdsl.data import load_corrupted
started = time.perf_counter()
sets = load_corrupted(sys.argv[1])
touched = sum(int(np.asarray(s.images.images).sum() % 7) for s in sets)
print(len(sets), time.perf_counter() - started)
"""


def write_folder(root: Path, images: int, data_root: str | None) -> str:
    """ROOT/train and ROOT/val of 10 classes, `images` test images; what the images are."""
    from PIL import Image

    try:
        from archdsl.data import load_split

        test = load_split("fashion-mnist", "test", root=data_root)
        pixels, labels, source = (
            np.asarray(test.images[: 2 * images])[..., 0],
            test.labels[: 2 * images],
            "Fashion-MNIST",
        )
    except Exception:  # no Fashion-MNIST here: random grey images
        rng = np.random.default_rng(0)
        pixels = rng.integers(0, 256, (2 * images, 28, 28), dtype=np.uint8)
        labels, source = np.arange(2 * images) % 10, "random"
    for k, (image, label) in enumerate(zip(pixels, labels, strict=True)):
        folder = root / ("val" if k < images else "train") / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{k}.png")
    return source


def timed_process(dataset: str, cache: Path) -> tuple[int, float]:
    """Sets loaded and seconds, in a new process with the cache folder `cache`."""
    env = {**os.environ, "ARCHDSL_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", TIMED, dataset], env=env, check=True, capture_output=True, text=True)
    count, seconds = out.stdout.split()
    return int(count), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300, help="test images in the folder")
    parser.add_argument("--repeats", type=int, default=2, help="cached processes after the first")
    parser.add_argument("--data-root", help="where Fashion-MNIST's IDX files are (else the default data root)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder, cache = Path(scratch) / "photos", Path(scratch) / "cache"
        source = write_folder(folder, args.images, args.data_root)
        dataset = f"folder:{folder},size=28"
        os.environ["ARCHDSL_CACHE"] = str(cache)
        from archdsl.data import load_split

        load_split(dataset, "train")  # the folder's statistics kept first: both sides time the corrupted sets only
        sets, first = timed_process(dataset, cache)
        cached = [timed_process(dataset, cache)[1] for _ in range(args.repeats)]
        kept = sum(path.stat().st_size for path in cache.rglob("*.npy"))
    best = min(cached)
    print(f"{args.images} {source} test images, 28x28 grey, {sets} corrupted sets, {os.cpu_count()} cores")
    print(f"{'process':28} {'seconds':>8} {'first / this':>12}")
    print(f"{'first (generates, keeps)':28} {first:8.2f} {1:12.1f}")
    print(f"{'later (reads the cache)':28} {best:8.3f} {first / best:12.1f}")
    print(f"cache: {kept / 2**20:.1f} MiB on disk")


if __name__ == "__main__":
    main()
