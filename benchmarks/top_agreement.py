"""Not speed: can a budget rank the designs near the top? Kendall's tau against the end of training, on the top only.

A search's last step compares the few designs near the best (the settle stage re-measures two of them). A cheap
budget that separates the good designs from the bad ranks all designs well and can still order the top by noise.
This script takes the reference (`--reference`, trained long) and tables at cheaper budgets (`--table`, any seeds:
their means are compared, not paired runs), keeps the designs within `--within` points of the reference's best,
and prints, as a Markdown table:

- the reference's own split-half Kendall on those designs (`fidelity_study.split_half_kendall`): how well the end
  of training ranks them itself, the ceiling for any cheaper budget;
- for each table: its epochs and seeds, Kendall's tau between its means and the reference's on the top designs
  (and on all designs), and the reference's figure of the table's best design.

    python benchmarks/top_agreement.py --reference search/tables/odd-one-out-k-reference.json \\
        --table search/tables/odd-one-out-k-8.json benchmarks/tables/odd-one-out-k-16-settle.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

from fidelity_study import design_stats, load_table, split_half_kendall
from script_args import non_negative


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="the end-of-training table (assembled JSON)")
    parser.add_argument("--table", nargs="+", required=True, help="tables of cheaper budgets over the same designs")
    parser.add_argument(
        "--within",
        type=non_negative,
        default=1.5,
        help="points of validation top-1 below the reference's best that count as the top (default 1.5)",
    )
    return parser.parse_args(argv)


def kendall(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def agreement_rows(reference, tables, within: float) -> tuple[str, list[str]]:
    """The reference's line and one line per table (Markdown), on the designs within `within` points of the best."""
    ref = design_stats(reference)
    best = max(s.mean for s in ref.values())
    top = [d for d, s in ref.items() if s.mean >= best - within / 100]
    seeds = sorted(set.intersection(*(set(ref[d].val) for d in top)))
    halves = split_half_kendall({d: ref[d] for d in top}, seeds) if len(seeds) >= 2 else []
    own = f"{statistics.fmean(halves):.2f}" if halves else "n/a (one seed)"
    head = (
        f"Top: the {len(top)} of {len(ref)} designs within {within:g} points of the reference's best "
        f"({100 * best:.2f} %, {reference.fidelity.get('epochs')} epochs, seeds {seeds}); the reference's own "
        f"split-half Kendall on them: {own}."
    )
    rows = ["| table | epochs | seeds | Kendall on the top | Kendall on all | its best, at the reference |"]
    rows.append("|---|---|---|---|---|---|")
    for name, table in tables:
        stats = design_stats(table)
        shared_top = [d for d in top if d in stats]
        shared_all = [d for d in ref if d in stats]
        if len(shared_top) < 2:
            raise SystemExit(f"{name}: fewer than two of the reference's top designs have runs")
        on_top = kendall([stats[d].mean for d in shared_top], [ref[d].mean for d in shared_top])
        on_all = kendall([stats[d].mean for d in shared_all], [ref[d].mean for d in shared_all])
        pick = max(shared_all, key=lambda d: stats[d].mean)
        table_seeds = sorted(set().union(*(set(stats[d].val) for d in shared_all)))
        rows.append(
            f"| `{name}` | {table.fidelity.get('epochs')} | {table_seeds} | {on_top:.2f} | {on_all:.2f} | "
            f"`{ref[pick].layout}` {100 * ref[pick].mean:.2f} % ({100 * (ref[pick].mean - best):+.2f}) |"
        )
    return head, rows


def read_table(path: str):
    """The assembled table at `path`, or one line that names the file and what is wrong with it."""
    try:
        return load_table(path)
    except OSError as error:
        sys.exit(f"top_agreement: {path}: cannot be read ({error.strerror or error})")
    except ValueError as error:  # pydantic's ValidationError: not JSON, or not a table
        sys.exit(f"top_agreement: {path}: not a table ({str(error).splitlines()[0]})")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    reference = read_table(args.reference)
    tables = [(path.rsplit("/", 1)[-1].removesuffix(".json"), read_table(path)) for path in args.table]
    head, rows = agreement_rows(reference, tables, args.within)
    print(head + "\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
