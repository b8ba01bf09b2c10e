"""How fast the front end answers: parse+lower+check per spec, and `archdsl check` end to end.

    python benchmarks/lang_check.py [--quick]

Reports milliseconds per spec in process, and the wall time of the CLI (a fresh Python
each run, so it includes interpreter start and the imports of every command's
`register`), next to a bare `python -c pass` as the baseline ratio.
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


if __name__ == "__main__":
    main()
