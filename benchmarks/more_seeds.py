"""How many paired seeds does the search's default fidelity need to rank a table's designs reproducibly?

A table made at the search's default fidelity (`search/tables/fashion-mnist-k.json`: 3 paired seeds)
misses issue 28's aims (a seed std at most a third of the spread of the designs' means, Spearman >= 0.8
between two seeds' rankings), and a 4x longer run does not separate the designs better
(`benchmarks/long_run_reference.py`). This script measures the other knob, the number of seeds: the
table's designs trained on more seed indices (`buildup_table.py --search k --seeds 3 4 5 --work
benchmarks/tables/fashion-mnist-k-seeds-3-5`, the same code and fidelity) are pooled with the table's,
then the seeds are cut into disjoint groups of N (N = 1, 2, 3 with 6 seeds) and each group ranks the
designs by its mean validation top-1. Two groups are two independent searches that each measured every
design on N paired seeds: the Spearman between their rankings is how reproducible an N-seed answer is,
and the std of a design's N-seed mean over the groups against the spread of the designs' means is the
noise ratio an N-seed search works with.

    python benchmarks/more_seeds.py [--json benchmarks/tables/fashion-mnist-k-seeds-3-5/summary.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from buildup_table import finished


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="search/tables/fashion-mnist-k.json", help="the default-fidelity table")
    parser.add_argument(
        "--work", default="benchmarks/tables/fashion-mnist-k-seeds-3-5", help="buildup_table.py's runs on more seeds"
    )
    parser.add_argument("--json", help="also write the summary here")
    return parser.parse_args()


def pooled_values(table_path: str, work: Path) -> tuple[list[str], list[int], list[list[float]]]:
    """(layouts, seeds, values): each design's validation top-1 per seed, for the designs and seeds that
    every design has (the table's runs and the extra runs of `work`)."""
    from archdsl.search.fidelity.replay import Table

    table = Table.model_validate_json(Path(table_path).read_text())
    extra = finished(work) if work.is_dir() else {}
    by_design = {d.digest: {r.seed: r.val_acc for r in d.runs} for d in table.designs}
    for (digest, seed), row in extra.items():
        if digest in by_design:
            by_design[digest][seed] = row["run"]["val_acc"]
    seeds = sorted(set.intersection(*(set(v) for v in by_design.values())))
    return [d.layout for d in table.designs], seeds, [[by_design[d.digest][s] for s in seeds] for d in table.designs]


def group_agreement(values: list[list[float]], group_size: int) -> dict:
    """Disjoint groups of `group_size` seeds (in seed order): the Spearman and Kendall between every two
    groups' rankings of the designs by their group mean, and the std of a design's group mean over the
    groups (averaged over the designs) against the std of the designs' means over all seeds."""
    from scipy.stats import kendalltau, spearmanr

    n_groups = len(values[0]) // group_size
    means = [[statistics.fmean(v[g * group_size : (g + 1) * group_size]) for v in values] for g in range(n_groups)]
    pairs = list(itertools.combinations(range(n_groups), 2))
    spread = statistics.stdev(statistics.fmean(v) for v in values)
    noise = statistics.fmean(statistics.stdev(m[i] for m in means) for i in range(len(values)))
    return {
        "seeds_per_group": group_size,
        "groups": n_groups,
        "spearman": [float(spearmanr(means[a], means[b]).statistic) for a, b in pairs],
        "kendall": [float(kendalltau(means[a], means[b]).statistic) for a, b in pairs],
        "noise": noise,
        "spread": spread,
        "noise_ratio": noise / spread,
    }


def main() -> None:
    args = parse_args()
    layouts, seeds, values = pooled_values(args.table, Path(args.work))
    results = [group_agreement(values, n) for n in range(1, len(seeds) // 2 + 1)]
    summary = {"table": args.table, "designs": len(layouts), "seeds": seeds, "by_seeds_per_group": results}
    print(f"{len(layouts)} designs x {len(seeds)} paired seeds {seeds}")
    print("| seeds per answer | independent answers | Spearman between them (median; min-max) | noise / spread |")
    print("|---|---|---|---|")
    for r in results:
        rho = r["spearman"]
        print(
            f"| {r['seeds_per_group']} | {r['groups']} | {statistics.median(rho):.2f} ({min(rho):.2f}-{max(rho):.2f}) "
            f"| {r['noise_ratio']:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
