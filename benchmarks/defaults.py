"""Wall time of the commands a user runs first, with their defaults: `archdsl search` (README's
first command) and `archdsl analyze` on the built-in `tiny` after one epoch on `synthetic`.

Each command runs as its own process; the table gives its wall time, the CPU time it used
(user + system, all its threads) and the load average around it. On a shared machine the CPU
time is the steadier figure: CPU time / cores is about the wall time on a quiet machine.

    python benchmarks/defaults.py                      # both
    python benchmarks/defaults.py --only analyze       # the analysis, optimized and --no-optimize
    python benchmarks/defaults.py --only search
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str]) -> tuple[float, float]:
    """Run `command`; its (wall seconds, CPU seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def row(label: str, command: list[str]) -> None:
    load = os.getloadavg()[0]
    wall, cpu = timed(command)
    print(f"{label:<46}{wall:>9.1f}{cpu:>9.1f}{load:>7.1f}{os.getloadavg()[0]:>7.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("search", "analyze"))
    parser.add_argument("--eager", action="store_true", help="also run analyze --no-optimize (slow)")
    args = parser.parse_args()
    archdsl = [sys.executable, "-m", "archdsl"]
    print(f"{os.cpu_count()} cores; seconds: wall, CPU (user + system); load average before and after")
    print(f"{'command':<46}{'wall':>9}{'CPU':>9}{'load':>7}{'after':>7}")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        if args.only in (None, "search"):
            row("archdsl search", [*archdsl, "search", "--out", str(out / "runs"), "--no-progress"])
        if args.only in (None, "analyze"):
            run = out / "tiny"
            train = ["train", "tiny", "--dataset", "synthetic", "--epochs", "1", "--out", str(run), "--no-progress"]
            row("archdsl train tiny --dataset synthetic --epochs 1", [*archdsl, *train])
            checkpoint = str(run / "final.safetensors")
            analyze = ["analyze", checkpoint, "--out", str(out / "a"), "--no-progress"]
            row("archdsl analyze (defaults)", [*archdsl, *analyze])
            if args.eager:
                row(
                    "archdsl analyze --no-optimize",
                    [*archdsl, "analyze", checkpoint, "--out", str(out / "b"), "--no-progress", "--no-optimize"],
                )


if __name__ == "__main__":
    main()
