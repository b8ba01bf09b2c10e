"""Wall time of the commands a user runs first, with their defaults: `archdsl search` (README's
first command) and `archdsl analyze` on the built-in `tiny` after one epoch on `synthetic`.

Each command runs as its own process; the table gives its wall time, the CPU time it used
(user + system, all its threads) and the load average around it.

On a shared, loaded machine neither figure of a 2-thread run says what a quiet machine would
do: torch's OpenMP threads spin while they wait for each other, and when the cores are
oversubscribed a thread waits for a partner that is not running. Measured on 2 cores under a
load average of 10, a train step of alter-small-base took 0.25 s of CPU on one thread and
2.9 s on two (0.32 s with OMP_WAIT_POLICY=passive). So by default each command runs on one
thread (`--threads 1`, OMP_NUM_THREADS=1): its CPU time hardly depends on the load, and a
quiet 2-core machine takes at most that long in wall time (less, by as much as two threads
gain).

    python benchmarks/defaults.py                      # both, one thread each
    python benchmarks/defaults.py --only analyze       # train tiny 1 epoch, then analyze's defaults
    python benchmarks/defaults.py --only search
    python benchmarks/defaults.py --threads 0          # torch's own thread count (a quiet machine)
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


def timed(command: list[str], threads: int) -> tuple[float, float]:
    """Run `command` on `threads` threads (0: torch's choice); its (wall seconds, CPU seconds of
    the process and its children)."""
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def row(label: str, command: list[str], threads: int) -> None:
    load = os.getloadavg()[0]
    wall, cpu = timed(command, threads)
    print(f"{label:<46}{wall:>9.1f}{cpu:>9.1f}{load:>7.1f}{os.getloadavg()[0]:>7.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("search", "analyze"))
    parser.add_argument("--eager", action="store_true", help="also run analyze --no-optimize (slow)")
    parser.add_argument(
        "--threads", type=int, default=1, metavar="N", help="OMP_NUM_THREADS of each command (0: torch's; default: 1)"
    )
    args = parser.parse_args()
    archdsl = [sys.executable, "-m", "archdsl"]
    threads = args.threads
    print(f"{os.cpu_count()} cores, threads: {threads or 'torch default'}; seconds: wall, CPU (user + system)")
    print("load average before and after")
    print(f"{'command':<46}{'wall':>9}{'CPU':>9}{'load':>7}{'after':>7}")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        if args.only in (None, "search"):
            row("archdsl search", [*archdsl, "search", "--out", str(out / "runs"), "--no-progress"], threads)
        if args.only in (None, "analyze"):
            run = out / "tiny"
            train = ["train", "tiny", "--dataset", "synthetic", "--epochs", "1", "--out", str(run), "--no-progress"]
            row("archdsl train tiny --dataset synthetic --epochs 1", [*archdsl, *train], threads)
            checkpoint = str(run / "final.safetensors")
            analyze = ["analyze", checkpoint, "--out", str(out / "a"), "--no-progress"]
            row("archdsl analyze (defaults)", [*archdsl, *analyze], threads)
            if args.eager:
                row(
                    "archdsl analyze --no-optimize",
                    [*archdsl, "analyze", checkpoint, "--out", str(out / "b"), "--no-progress", "--no-optimize"],
                    threads,
                )


if __name__ == "__main__":
    main()
