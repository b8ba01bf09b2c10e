"""How long the corruption generator takes: seconds per corruption (all 5 severities).

    python benchmarks/corruptions.py --quick          # 500 images, a few seconds
    python benchmarks/corruptions.py --n 10000        # the full CIFAR-C size: 15 x 5 x 10,000

Images come from the built-in synthetic set (32x32 RGB, like CIFAR). Besides seconds it
prints each corruption's time as a ratio to gaussian_noise (the cheapest: one random
draw), which stays comparable across machines, and the time the full 15 x 5 x 10,000
would take, extrapolated linearly from --n.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from archdsl.data import load_split
from archdsl.data.corruptions import CORRUPTIONS, EXTRA_CORRUPTIONS, SEVERITIES, corrupt

FULL_SIZE = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="images per severity (default 2000)")
    parser.add_argument("--quick", action="store_true", help="500 images")
    parser.add_argument("--extras", action="store_true", help="also time the 4 extra corruptions")
    parser.add_argument("--chunk", type=int, default=2000, help="images per corrupt() call, as write_corrupted")
    args = parser.parse_args()
    n = 500 if args.quick else args.n
    images = np.asarray(load_split(f"synthetic:test={n},train=100", "test").images)
    names = CORRUPTIONS + (EXTRA_CORRUPTIONS if args.extras else ())

    timings: dict[str, float] = {}
    for name in names:
        start = time.perf_counter()
        for severity in SEVERITIES:
            for offset in range(0, n, args.chunk):
                corrupt(images[offset : offset + args.chunk], name, severity, seed=severity)
        timings[name] = time.perf_counter() - start

    base = timings["gaussian_noise"]
    print(f"{n} images x 5 severities per corruption")
    print(f"{'corruption':20s} {'seconds':>8s} {'img/s':>9s} {'x gaussian_noise':>17s}")
    for name, seconds in timings.items():
        print(f"{name:20s} {seconds:8.2f} {5 * n / seconds:9.0f} {seconds / base:17.1f}")
    fifteen = sum(timings[name] for name in CORRUPTIONS)
    print(f"{'total (the 15)':20s} {fifteen:8.2f}")
    scale = FULL_SIZE / n
    print(
        f"15 x 5 x {FULL_SIZE:,}: {'measured' if n == FULL_SIZE else f'about (x{scale:g}, linear)'} "
        f"{fifteen * scale:.0f} s = {fifteen * scale / 60:.1f} min"
    )


if __name__ == "__main__":
    main()
