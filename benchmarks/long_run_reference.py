"""Does the search's fidelity predict what the user will get? Designs of a measured table, trained 4x longer.

The search ranks designs after a short run (its default fidelity: `fast`, 2 epochs, a tenth of the
training split). A user trains the chosen design for longer. This script takes the designs of a table
made at the default fidelity (`search/tables/fashion-mnist-k.json` unless told: every design of
`resnet-fmnist`'s `--search k` space, so the designs span the whole ranking), trains each on 2 paired
seeds with 4x the default budget (4x the epochs at the same subset and recipe; the recipe's schedule is
scaled to the run, so it still ends annealed), exactly as `benchmarks/buildup_table.py` trains a table run
(its `run_one` code path, without the analyses), and compares the two rankings: Kendall's tau and
Spearman between the table's mean validation top-1 (its 3 seeds) and the long run's mean validation and
test top-1 (2 seeds).

Each finished run is one line of `--work/runs.jsonl`, so the script resumes where it stopped;
`--report` prints the comparison (and writes it as JSON with `--json`):

    OMP_NUM_THREADS=1 nohup nice -n 10 python benchmarks/long_run_reference.py > long-run.log 2>&1 &
    python benchmarks/long_run_reference.py --report --json benchmarks/tables/long-run/summary.json

Needs Fashion-MNIST (`apt-get install dataset-fashion-mnist`, or the IDX files under --data-root).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from buildup_table import DATASET, fidelity, machine, train_and_test, versions

FACTOR = 4  # the long run's budget: this many times the default fidelity's epochs


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="search/tables/fashion-mnist-k.json", help="the default-fidelity table")
    parser.add_argument("--work", default="benchmarks/tables/long-run", help="where each finished run's line goes")
    parser.add_argument("--data-root", default=os.environ.get("ARCHDSL_DATA", "/usr/share/datasets"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--report", action="store_true", help="print the rank correlations and stop")
    parser.add_argument("--json", help="with --report: also write them here")
    return parser.parse_args()


def load_table(path: str):
    from archdsl.search.fidelity.replay import Table

    return Table.model_validate_json(Path(path).read_text())


def finished(work: Path) -> dict[tuple[str, int], dict]:
    path = work / "runs.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return {(row["digest"], row["seed"]): row for row in rows}


def long_fidelity(table_fidelity: dict):
    """The table's fidelity with FACTOR x its epochs (the same recipe and subset)."""
    given = argparse.Namespace(recipe=table_fidelity.get("recipe"), epochs=None, subset=table_fidelity.get("subset"))
    short = fidelity(given)
    return short.model_copy(update={"epochs": FACTOR * short.epochs}), short


def train_one(arch, data, test_set, fid, seed: int) -> dict:
    """One long training as a table run trains (validation images held out), then the test top-1."""
    run = train_and_test(arch, data, test_set, fid, seed)
    return {
        "seed": seed,
        "val_acc": run.val_acc,
        "test_acc": run.test_acc,
        "val_curve": [point["val_acc"] for point in run.curve],
        "seconds": run.train_seconds,
        "cpu_seconds": run.train_cpu_seconds + run.test_cpu_seconds,
    }


def report(args: argparse.Namespace) -> dict:
    from scipy.stats import kendalltau, spearmanr

    table = load_table(args.table)
    done = finished(Path(args.work))
    rows = []
    for d in table.designs:
        long_runs = [done[d.digest, s] for s in args.seeds if (d.digest, s) in done]
        if len(long_runs) == len(args.seeds) and d.runs:
            rows.append(
                {
                    "layout": d.layout,
                    "short_val": statistics.fmean(r.val_acc for r in d.runs),
                    "short_test": statistics.fmean(r.test_acc for r in d.runs),
                    "long_val": statistics.fmean(r["val_acc"] for r in long_runs),
                    "long_test": statistics.fmean(r["test_acc"] for r in long_runs),
                    "long_seed_std": statistics.stdev(r["val_acc"] for r in long_runs) if len(long_runs) > 1 else 0.0,
                }
            )
    if len(rows) < 3:
        raise SystemExit(f"only {len(rows)} designs have every long-run seed: nothing to correlate yet")
    short = [r["short_val"] for r in rows]

    def corr(key: str) -> dict:
        long = [r[key] for r in rows]
        return {
            "kendall": float(kendalltau(short, long).statistic),
            "spearman": float(spearmanr(short, long).statistic),
        }

    cpu = sum(r["cpu_seconds"] for r in done.values())
    summary = {
        "table": args.table,
        "designs": len(rows),
        "seeds": args.seeds,
        "factor": FACTOR,
        "short_val_vs_long_val": corr("long_val"),
        "short_val_vs_long_test": corr("long_test"),
        "long_seed_std": statistics.fmean(r["long_seed_std"] for r in rows),
        "long_design_mean_std": statistics.stdev(r["long_val"] for r in rows),
        "cpu_seconds": cpu,
        "rows": sorted(rows, key=lambda r: -r["short_val"]),
    }
    print(f"{len(rows)} designs x {len(args.seeds)} seeds at {FACTOR}x the epochs, {cpu / 60:.0f} CPU min")
    print("| design | default val % (3 seeds) | long val % | long test % |")
    print("|---|---|---|---|")
    for r in summary["rows"]:
        print(
            f"| `{r['layout']}` | {100 * r['short_val']:.1f} | {100 * r['long_val']:.1f} | {100 * r['long_test']:.1f} |"
        )
    for key in ("short_val_vs_long_val", "short_val_vs_long_test"):
        print(f"{key}: Kendall {summary[key]['kendall']:.2f}, Spearman {summary[key]['spearman']:.2f}")
    return summary


def main() -> None:
    import torch

    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.report:
        summary = report(args)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
        return

    from archdsl.data import load_split
    from archdsl.lang.spec import parse_spec
    from archdsl.search.fidelity import measures as measure

    table = load_table(args.table)
    fid, short = long_fidelity(table.fidelity)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    done = finished(work)
    # Seed-major: a run cut short holds every design on the first seed.
    todo = [(seed, d) for seed in args.seeds for d in table.designs if (d.digest, seed) not in done]
    data = measure.load_data(DATASET, Path(args.data_root), seed=0, val_subset=fid.val_subset, val_split=fid.val_split)
    test_set = load_split(DATASET, "test", Path(args.data_root))
    meta = {
        "command": "python benchmarks/long_run_reference.py " + " ".join(sys.argv[1:]),
        "versions": versions(),
        "machine": machine(),
        "epochs": fid.epochs,
        "default_epochs": short.epochs,
        "recipe": fid.recipe,
        "subset": fid.subset,
    }
    print(f"{len(table.designs)} designs, {len(todo)} runs to do at {fid.epochs} epochs", flush=True)
    base = parse_spec(table.base)
    from archdsl.search.space import make_space

    space = make_space(base, tuple(table.searched))
    with (work / "runs.jsonl").open("a") as out:
        for seed, d in todo:
            arch = space.arch_from_params(d.params)
            assert arch.digest() == d.digest, f"{d.layout}: the table's design is not the one rebuilt"
            run = train_one(arch, data, test_set, fid, seed)
            out.write(json.dumps({"digest": d.digest, "layout": d.layout, **run, "meta": meta}) + "\n")
            out.flush()
            print(f"{d.layout} seed {seed}: val {run['val_acc']:.4f} test {run['test_acc']:.4f}", flush=True)


if __name__ == "__main__":
    main()
