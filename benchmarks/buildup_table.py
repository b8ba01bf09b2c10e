"""A fully measured build-up space: every design of `resnet-fmnist`'s k x init space, trained over seeds.

The NAS-Bench way of asking whether a search is worth running: train every design of a small
space several times, keep every number, then replay searches against the table
(`archdsl search --fidelity table:PATH`, `benchmarks/search_efficiency.py`) instead of training.

The space is what `archdsl search --dataset fashion-mnist --base resnet-fmnist --search k,init`
searches: MSAs at the end of each of the three stages (k in 0..1 per stage, the build-up rule)
and the scheme the weights are drawn by (`torch`, the reference's, or `timm`): 16 designs.
(`k,heads` would give 32, but an MSA in the 28x28 first stage trains at 125 images/s on one
core against 915 for the ResNet, and 32 designs x 3 seeds would take about 4.5 core-hours.)
Each design is trained once per seed with the search's own code
(`archdsl.search.measures.train_candidate`) and the reference's `weak` recipe (its SGD
recipe for CNNs, `cifar100_general.yaml`), shortened (`--epochs`, one warm-up epoch), on a
fixed class-stratified subset of Fashion-MNIST's training
images, and is measured as a search trial measures it: test top-1 and NLL on the full 10,000-image
test set after every epoch (the learning curve a pruner sees), robustness on Fashion-MNIST-C
(15 corruptions at severity 3 on a stratified tenth of the test images), Hessian NEP/APE,
params, FLOPs, latency, and the wall and CPU time of training and of measuring.

Each finished run is one line of `--work/runs-*.jsonl`, so the script resumes where it stopped
and runs in pieces (`--shard 0/2` and `--shard 1/2` in two processes); `--assemble` writes the
table (a JSON file with its schema, the exact command and the versions) from those lines:

    nohup python benchmarks/buildup_table.py --shard 0/2 > table-0.log 2>&1 &
    nohup python benchmarks/buildup_table.py --shard 1/2 > table-1.log 2>&1 &
    python benchmarks/buildup_table.py --assemble

Needs Fashion-MNIST (`apt-get install dataset-fashion-mnist`, or the IDX files under --data-root).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

BASE = "resnet-fmnist"
SEARCHED = ("k", "init")
DATASET = "fashion-mnist"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="runs/buildup-table", help="where each finished run's line goes")
    parser.add_argument("--out", default="search/tables/fashion-mnist-k-init.json", help="the assembled table")
    parser.add_argument("--data-root", default=os.environ.get("ARCHDSL_DATA", "/usr/share/datasets"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--recipe",
        default="weak",
        help="the reference's SGD recipe (cifar100_general.yaml); `deit`, shortened to 6 epochs, left every design "
        "at 30-52%% test top-1 (AdamW at 1.25e-4 barely moves in 190 steps), ranking learning speed at a tiny rate",
    )
    parser.add_argument("--epochs", type=int, default=6, help="epochs in all, one of them warm-up")
    parser.add_argument("--subset", type=float, default=0.05, help="class-stratified fraction of the 60,000")
    parser.add_argument("--robustness-subset", type=float, default=0.1, help="of the corrupted test images")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shard", default="0/1", help="I/N: this process runs every N-th run from the I-th")
    parser.add_argument("--limit", type=int, help="stop after this many runs (a smoke test)")
    parser.add_argument("--assemble", action="store_true", help="write --out from the finished runs and stop")
    parser.add_argument("--markdown", help="with --assemble: also write the per-design table (docs/search.md's) here")
    return parser.parse_args()


def the_space():
    """The searched space, fitted to Fashion-MNIST exactly as `archdsl search` fits it."""
    from archdsl.data import describe
    from archdsl.search.measures import fit_to_data, load_base
    from archdsl.search.space import make_space

    info = describe(DATASET)
    base = fit_to_data(load_base(BASE), info.image_shape, info.num_classes)
    return make_space(base, SEARCHED)


def designs(space) -> list[tuple[str, dict, object]]:
    """(digest, the first parameter set naming it, Arch) for every distinct design, in grid order."""
    choices = space.choices()
    seen: dict[str, tuple[str, dict, object]] = {}
    for values in itertools.product(*choices.values()):
        params = dict(zip(choices, values, strict=True))
        arch = space.arch_from_params(params)
        seen.setdefault(arch.digest(), (arch.digest(), params, arch))
    return list(seen.values())


def fidelity(args: argparse.Namespace):
    from archdsl.search.measures import Fidelity

    return Fidelity(
        epochs=args.epochs,
        subset=args.subset,
        recipe=args.recipe,
        train_settings=(("warmup_epochs", 1),),
        hessian_batches=2,
        test_subset=args.robustness_subset,  # used for the corrupted sets only: the clean test set stays whole
    )


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_one(arch, data, fid, seed: int) -> dict:
    from archdsl.search import measures as measure

    curve: list[dict] = []
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    trained = measure.train_candidate(
        arch, data, fid, device="cpu", seed=seed, run_dir=None, on_epoch=lambda e, a: None, progress=False
    )
    train_wall, train_cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    for m in trained.history:
        curve.append(
            {
                "epoch": int(m["epoch"]),
                "test_acc": m["test_acc"],
                "test_nll": m["test_loss"],
                "train_loss": m["train_loss"],
                "seconds": m["seconds"],
            }
        )
    wall1, cpu1 = time.perf_counter(), cpu_seconds()
    robustness = measure.robustness(trained.model, data, fid, seed=seed, device="cpu")
    nep, ape = measure.hessian(trained.model, data, fid, seed=seed, device="cpu")
    latency = measure.latency_ms(arch, data, fid, "cpu", seed)
    return {
        "seed": seed,
        "accuracy": trained.accuracy,
        "nll": curve[-1]["test_nll"],
        "robustness": robustness,
        "nep": nep,
        "ape": ape,
        "latency": latency,
        "curve": curve,
        "train_seconds": train_wall,
        "train_cpu_seconds": train_cpu,
        "measure_seconds": time.perf_counter() - wall1,
        "measure_cpu_seconds": cpu_seconds() - cpu1,
    }


def versions() -> dict[str, str]:
    import numpy
    import optuna
    import timm
    import torch

    import archdsl

    return {
        "archdsl": archdsl.__version__,
        "torch": torch.__version__,
        "timm": timm.__version__,
        "optuna": optuna.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next(
        (line.split(":", 1)[1].strip() for line in lines if "model name" in line),
        platform.processor() or "unknown CPU",
    )
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} x {cpu}"


def finished(work: Path) -> dict[tuple[str, int], dict]:
    done = {}
    for path in sorted(work.glob("runs-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["digest"], row["run"]["seed"]] = row
    return done


def assemble(args: argparse.Namespace, space, all_designs) -> dict:
    from archdsl.lang.printer import format_arch
    from archdsl.search.measures import static_costs
    from archdsl.search.space import layout_text

    done = finished(Path(args.work))
    meta = next(iter(done.values()))["meta"] if done else {}
    rows = []
    for digest, params, arch in all_designs:
        runs = sorted((row["run"] for (d, _), row in done.items() if d == digest), key=lambda r: r["seed"])
        costs = static_costs(arch)
        rows.append(
            {
                "digest": digest,
                "layout": layout_text(arch),
                "n_msa": arch.n_msa,
                "params": params,
                "n_params": int(costs["params"]),
                "flops": costs["flops"],
                "runs": runs,
            }
        )
    from archdsl.search.replay import TABLE_SCHEMA

    return {
        "schema": TABLE_SCHEMA,
        "description": (
            f"Every design of {BASE}'s k x init build-up space on Fashion-MNIST, trained once per seed "
            "with the reference's weak recipe (shortened) by benchmarks/buildup_table.py"
        ),
        "command": meta.get("command", ""),
        "versions": meta.get("versions", {}),
        "machine": meta.get("machine", ""),
        "dataset": DATASET,
        "base": format_arch(space.base),
        "searched": list(SEARCHED),
        "fidelity": meta.get("fidelity", {}),
        "seeds": sorted({r["seed"] for d in rows for r in d["runs"]}),
        "statistics": seed_statistics(rows),
        "designs": rows,
    }


def seed_statistics(rows: list[dict]) -> dict:
    """Can the table tell designs apart? The seed-to-seed spread of each design's final test top-1
    against the spread between designs, and the rank correlation of the designs between seeds."""
    import numpy as np
    from scipy.stats import kendalltau, spearmanr

    seeds = sorted({r["seed"] for d in rows for r in d["runs"]})
    complete = [d for d in rows if {r["seed"] for r in d["runs"]} == set(seeds)]
    if len(complete) < 3 or len(seeds) < 2:
        return {"designs_with_every_seed": len(complete)}
    acc = np.array([[r["accuracy"] for r in sorted(d["runs"], key=lambda r: r["seed"])] for d in complete])
    pairs = [(a, b) for i, a in enumerate(range(len(seeds))) for b in range(i + 1, len(seeds))]
    spearman = [float(spearmanr(acc[:, a], acc[:, b]).statistic) for a, b in pairs]
    kendall = [float(kendalltau(acc[:, a], acc[:, b]).statistic) for a, b in pairs]
    means = acc.mean(axis=1)
    order = np.argsort(-means)
    return {
        "designs_with_every_seed": len(complete),
        "seeds": seeds,
        "seed_std_mean": float(acc.std(axis=1, ddof=1).mean()),  # within a design, averaged over designs
        "seed_std_max": float(acc.std(axis=1, ddof=1).max()),
        "design_mean_std": float(means.std(ddof=1)),  # between designs' means
        "best_minus_second": float(means[order[0]] - means[order[1]]),
        "spearman_between_seeds": spearman,
        "kendall_between_seeds": kendall,
        "best_design": complete[int(order[0])]["layout"] + " " + json.dumps(complete[int(order[0])]["params"]),
    }


def markdown(table: dict) -> str:
    """The table as docs/search.md shows it: each design's means +- standard deviations over the seeds."""
    import numpy as np

    def cell(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
        v = np.array(values) * scale
        return f"{v.mean():.{digits}f} +- {v.std(ddof=1):.{digits}f}" if len(v) > 1 else f"{v.mean():.{digits}f}"

    lines = [
        "| design | init | params | top-1 % | NLL | robustness % | NEP % | APE | train CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = sorted(table["designs"], key=lambda d: -np.mean([r["accuracy"] for r in d["runs"]] or [0]))
    for d in rows:
        runs = d["runs"]
        if not runs:
            continue
        lines.append(
            f"| `{d['layout']}` | {d['params'].get('init', '')} | {d['n_params']:,} "
            f"| {cell([r['accuracy'] for r in runs], 100)} | {cell([r['nll'] for r in runs], digits=3)} "
            f"| {cell([r['robustness'] for r in runs], 100)} | {cell([r['nep'] for r in runs], 100, 0)} "
            f"| {cell([r['ape'] for r in runs], digits=0)} | {cell([r['train_cpu_seconds'] for r in runs], digits=0)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    import torch

    args = parse_args()
    torch.set_num_threads(args.threads)
    space = the_space()
    all_designs = designs(space)
    work = Path(args.work)
    if args.assemble:
        table = assemble(args, space, all_designs)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        from archdsl.search.replay import Table

        Table.model_validate(table)  # what `--fidelity table:PATH` reads
        out.write_text(json.dumps(table, indent=1) + "\n")
        n_runs = sum(len(d["runs"]) for d in table["designs"])
        print(f"{out}: {len(table['designs'])} designs, {n_runs} runs")
        print(json.dumps(table["statistics"], indent=1))
        if args.markdown:
            Path(args.markdown).write_text(markdown(table))
        return

    from archdsl.search import measures as measure

    index, count = (int(p) for p in args.shard.split("/"))
    work.mkdir(parents=True, exist_ok=True)
    done = finished(work)
    # Seed-major, so that a table cut short holds whole seeds.
    todo = [(seed, d) for seed in args.seeds for d in all_designs][index::count]
    todo = [(seed, d) for seed, d in todo if (d[0], seed) not in done]
    fid = fidelity(args)
    meta = {
        "command": "python benchmarks/buildup_table.py " + " ".join(sys.argv[1:]),
        "versions": versions(),
        "machine": machine(),
        "fidelity": {
            **fid.model_dump(exclude={"train_settings"}),
            "train_settings": dict(fid.train_settings),
            # measures.load_data: a search's trials never read the test set (the table's test_acc fields hold
            # validation top-1 for tables made from now on; the shipped table's were measured on the test set)
            "test_set": "none: scored on the validation images held out of the training split "
            "(archdsl.data.split_validation's default; robustness: their corrupted copies)",
            "threads": args.threads,
        },
    }
    data = measure.load_data(DATASET, Path(args.data_root), seed=0)
    print(f"{len(all_designs)} designs, {len(todo)} runs to do in this shard", flush=True)
    for n, (seed, (digest, params, arch)) in enumerate(todo[: args.limit]):
        started = time.perf_counter()
        run = run_one(arch, data, fid, seed)
        row = {"digest": digest, "params": params, "run": run, "meta": meta}
        with (work / f"runs-{index}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        from archdsl.search.space import layout_text

        print(
            f"[{n + 1}/{len(todo)}] seed {seed} {layout_text(arch)} {params}: acc {run['accuracy']:.4f} "
            f"rob {run['robustness']:.4f} nep {run['nep']:.3f} ape {run['ape']:.1f} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
