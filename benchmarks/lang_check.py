"""How fast the front end answers: parse+lower+check per spec, and `archdsl check` end to end.

    python benchmarks/lang_check.py [--quick]

Reports milliseconds per spec in process, and the wall time of the CLI (a fresh Python
each run, so it includes interpreter start and the imports of every command's
`register`), next to a bare `python -c pass` as the baseline ratio.

Then big files (up to the 256 KiB limit): CPU seconds per 1,000 blocks of `parse` as the
file grows, with Python's cyclic garbage collector paused (what `parse` does) and running
(what it did). Constant microseconds per block mean linear time; with the collector
running they grow with the file, since every collection walks every object alive.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _wall(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeats = 3 if args.quick else 10
    loops = 50 if args.quick else 500

    from archdsl.lang.spec import builtin_names, parse_spec, resolve_spec

    print(f"{'spec':<18} {'blocks':>6} {'ms/parse':>9}")
    for name in builtin_names():
        text = resolve_spec(name).read_text()
        arch = parse_spec(text)
        start = time.perf_counter()
        for _ in range(loops):
            parse_spec(text)
        ms = (time.perf_counter() - start) / loops * 1e3
        print(f"{name:<18} {arch.n_blocks:>6} {ms:>9.2f}")

    python = _wall([sys.executable, "-c", "pass"], repeats)
    check = _wall([sys.executable, "-m", "archdsl", "check", "alter50"], repeats)
    print(f"python -c pass        {python * 1e3:7.0f} ms")
    print(f"archdsl check alter50 {check * 1e3:7.0f} ms  ({check / python:.1f}x python start)")
    print()
    big_files((2_500, 10_000) if args.quick else (2_500, 5_000, 10_000, 20_000, 40_000))


def _big_spec(blocks: int) -> str:
    per_stage = 50
    body = " ".join(["conv"] * per_stage)
    stages = [f"    stage s{i}(width=8) {{ {body} }}" for i in range(blocks // per_stage)]
    return (
        "arch big {\n    input 3x32x32\n    classes 10\n    stem conv3x3(8)\n    conv = basic\n"
        + "\n".join(stages)
        + "\n}\n"
    )


def big_files(sizes: tuple[int, ...]) -> None:
    import gc

    from archdsl.lang.parser import _lark, _ToAst, parse

    _lark()
    print(f"{'blocks':>7} {'KiB':>5} {'paused us/block':>16} {'running us/block':>17} {'ratio':>6}")
    for blocks in sizes:
        text = _big_spec(blocks)
        gc.collect()
        start = time.process_time()
        parse(text)
        paused = time.process_time() - start
        gc.collect()
        start = time.process_time()
        _ToAst().transform(_lark().parse(text))  # the same work with the collector running
        running = time.process_time() - start
        print(
            f"{blocks:>7} {len(text) // 1024:>5} {paused / blocks * 1e6:>16.1f} {running / blocks * 1e6:>17.1f} "
            f"{running / paused:>6.2f}"
        )


if __name__ == "__main__":
    main()
