"""Which cheap fidelity predicts a long training? Estimators replayed against a reference trained long.

A search ranks designs after a short training (its fidelity); a user trains the chosen design longer. This
script takes three tables of the same designs (`benchmarks/buildup_table.py`):

- `--reference`: every design trained long (the reference budget: its curves flattening), on paired seeds;
- `--cheap`: every design at the search's default fidelity, on paired seeds (the runs a walk is answered from);
- `--rung` (optional): every design at a longer annealed fidelity (a rung for the walk's short list);

and answers, on validation figures only (the test figures are reported beside them):

1. Can the reference rank? Its split-half reliability: Kendall's tau between the designs' means over two
   disjoint halves of its seeds, over every way to halve them; each design's mean and 95 % t-interval; the
   designs the reference's best does not beat beyond the noise (the walk's paired test).
2. The bias: each design's gap between the cheap fidelity and the reference, beside where its MSAs are.
3. The estimators (`ESTIMATORS`: the cheap runs' last validation value, learning-curve extrapolation, the sum
   of training losses, and the rung for the walk's short list), each replayed: the build-up walk
   (`archdsl.search.walk.buildup.walk`, the search's own, on each paired-seed draw of `--seeds` of the cheap
   table's seeds) is
   answered by the estimator's per-seed scores; its answer is right when the reference names it best or ties
   it with the best. Reported per estimator: the share of right answers, the CPU it took against training
   every design at the reference budget on as many seeds, and Kendall's tau between its design scores (all
   seeds) and the reference's means, against 0.8 x the reference's split-half Kendall.

    python benchmarks/fidelity_study.py --reference search/tables/fashion-mnist-k-reference.json \
        --cheap benchmarks/tables/fashion-mnist-k-seeds-3-5/fashion-mnist-k-6-seeds.json \
        --rung benchmarks/tables/fashion-mnist-k-rung/table.json --json summary.json --figures docs/figures
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="the end-of-training table")
    parser.add_argument("--cheap", required=True, help="the search's default fidelity on the same designs")
    parser.add_argument("--rung", help="a longer annealed fidelity on the same designs (the rung estimator)")
    parser.add_argument("--seeds", type=int, default=3, help="paired seeds per replayed walk (the search's --seeds)")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--markdown", help="write the tables docs/results.md shows here")
    parser.add_argument("--figures", help="write the bias and estimator figures into this folder")
    parser.add_argument("--name", default="", help="a prefix for the figures' file names")
    return parser.parse_args(argv)


def load_table(path: str):
    from archdsl.search.fidelity.replay import Table

    return Table.model_validate_json(Path(path).read_text())


# -- the reference -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DesignStats:
    layout: str
    n_msa: int
    val: dict[int, float]  # seed -> validation top-1
    test: dict[int, float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.val.values())

    @property
    def test_mean(self) -> float:
        return statistics.fmean(self.test.values())

    def interval(self) -> tuple[float, float]:
        """The search's 95 % t-interval of the mean over the seeds (`seed_stats.estimate`)."""
        from archdsl.search.seed_stats import estimate

        found = estimate(tuple(self.val[s] for s in sorted(self.val)), (0.0, 1.0))
        assert found.low is not None and found.high is not None, "an interval needs two seeds"
        return found.low, found.high


def design_stats(table) -> dict[str, DesignStats]:
    """Digest -> the design's validation and test top-1 per seed, for the designs with runs."""
    return {
        d.digest: DesignStats(
            d.layout, d.n_msa, {r.seed: r.val_acc for r in d.runs}, {r.seed: r.test_acc for r in d.runs}
        )
        for d in table.designs
        if d.runs
    }


def paired_gap(end: DesignStats, cheap: DesignStats) -> float:
    """What a design gains from the cheap fidelity to the reference budget: the mean over the seeds both
    measured of (end - cheap) validation top-1 (paired: seed s trains on the same subset and batch order)."""
    shared = sorted(set(end.val) & set(cheap.val))
    return statistics.fmean(end.val[x] - cheap.val[x] for x in shared)


def common_seeds(stats: dict[str, DesignStats]) -> list[int]:
    """The seeds every design has a run of."""
    return sorted(set.intersection(*(set(s.val) for s in stats.values())))


def split_half_kendall(stats: dict[str, DesignStats], seeds: list[int]) -> list[float]:
    """Kendall's tau between the designs' means over two disjoint halves of `seeds`, for every way to halve
    them (each unordered pair of halves once; an odd seed out is left out in turn)."""
    from scipy.stats import kendalltau

    half = len(seeds) // 2
    taus, seen = [], set()
    for first in itertools.combinations(seeds, half):
        rest = [s for s in seeds if s not in first]
        for second in itertools.combinations(rest, half):
            key = frozenset((first, second))
            if key in seen:
                continue
            seen.add(key)
            a = [statistics.fmean(s.val[x] for x in first) for s in stats.values()]
            b = [statistics.fmean(s.val[x] for x in second) for s in stats.values()]
            taus.append(float(kendalltau(a, b).statistic))
    return taus


def beats_beyond_noise(a: Sequence[float], b: Sequence[float]) -> bool:
    """The build-up walk's own test (paired, one-sided, at its level): `a` beats `b` beyond the noise."""
    from archdsl.search.objectives import OBJECTIVES
    from archdsl.search.seed_stats import improves_beyond_noise

    return improves_beyond_noise(tuple(a), tuple(b), OBJECTIVES["accuracy"])


def reference_best_and_ties(stats: dict[str, DesignStats], seeds: list[int]) -> tuple[str, list[str]]:
    """The digest of the design with the best mean, and those it does not beat beyond the noise on `seeds`."""
    best = max(stats, key=lambda d: stats[d].mean)
    values = {d: [s.val[x] for x in seeds] for d, s in stats.items()}
    ties = [d for d in stats if d != best and not beats_beyond_noise(values[best], values[d])]
    return best, ties


# -- the estimators ------------------------------------------------------------------------------


def last_value(run, budget: float) -> float:
    """The search's fidelity today: the validation top-1 after the run's last epoch."""
    return run.val_acc


def training_loss_sum(run, budget: float) -> float:
    """Minus the sum over epochs of the mean training loss (Ru et al., 2021, "Speedy performance estimation
    for neural architecture search": SoTL): a design that learns faster scores higher."""
    return -sum(p.train_loss for p in run.curve)


# The exponents tried by the extrapolation (acc(t) = a - b t^-c through the curve's last two points):
# learning curves of SGD-trained nets follow such power laws (Domhan et al., 2015; Hestness et al., 2017).
POWER_LAW_EXPONENTS = (0.5, 1.0, 2.0)


def extrapolated(run, budget: float) -> float:
    """Learning-curve extrapolation: the power laws `a - b t^-c` through the run's last two validation points
    (t in epochs), read at `budget` epochs of the run's fidelity and averaged over `POWER_LAW_EXPONENTS` (their
    spread is the fit's uncertainty: `extrapolation_spread`). With one point, that point."""
    return float(np.mean(_power_law_predictions(run, budget)))


def extrapolation_spread(run, budget: float) -> float:
    return float(np.std(_power_law_predictions(run, budget)))


def _power_law_predictions(run, budget: float) -> list[float]:
    if len(run.curve) < 2:
        return [run.val_acc]
    (t1, v1), (t2, v2) = ((p.epoch, p.val_acc) for p in run.curve[-2:])
    predictions = []
    for c in POWER_LAW_EXPONENTS:
        b = (v2 - v1) / (t1**-c - t2**-c)
        a = v2 + b * t2**-c
        predictions.append(min(1.0, max(0.0, a - b * budget**-c)))
    return predictions


Estimator = Callable[[object, float], float]
ESTIMATORS: dict[str, Estimator] = {
    "last": last_value,
    "extrapolation": extrapolated,
    "loss-sum": training_loss_sum,
}


# -- replaying the walk --------------------------------------------------------------------------


def walk_answer(table, scores: dict[str, tuple[float, ...]]) -> tuple[str, list[str]]:
    """The build-up walk (`archdsl.search.walk.buildup.walk`, the search's own) answered by `scores` (digest ->
    per-seed values, paired): the digest of the design it keeps last, and the digests it measured."""
    from archdsl.search.objectives import OBJECTIVES
    from archdsl.search.studies.record import Measured
    from archdsl.search.walk.buildup import walk

    space = space_of(table)
    measured: dict[tuple[str, int], Measured] = {}
    while (ask := walk(space, measured, OBJECTIVES["accuracy"]).next) is not None:
        digest = space.arch_from_params(ask.params).digest()
        values = scores[digest]
        measured[(digest, ask.rung)] = Measured("COMPLETE", statistics.fmean(values), dict(enumerate(values)))
    answer = walk(space, measured, OBJECTIVES["accuracy"]).answer
    end = space.arch_from_params(answer).digest() if answer is not None else None
    return end, [digest for digest, _ in measured]


def space_of(table):
    from archdsl.lang.spec import parse_spec
    from archdsl.search.space import make_space

    return make_space(parse_spec(table.base), tuple(table.searched))


@dataclass(frozen=True)
class Replay:
    estimator: str
    seeds: tuple[int, ...]
    answer: str
    right: bool
    cpu_seconds: float


def runs_by_seed(table) -> dict[str, dict[int, object]]:
    return {d.digest: {r.seed: r for r in d.runs} for d in table.designs if d.runs}


def cpu_of(run) -> float:
    return (run.train_cpu_seconds or run.train_seconds) + (getattr(run, "test_cpu_seconds", 0.0) or 0.0)


def replays(cheap, reference, rung, n_seeds: int, budget: float) -> list[Replay]:
    """Every estimator's walk on every draw of `n_seeds` of the cheap table's seeds (and, for the rung, every
    draw of as many of the rung table's seeds)."""
    ref = design_stats(reference)
    ref_seeds = common_seeds(ref)
    best, ties = reference_best_and_ties(ref, ref_seeds)
    right_answers = {best, *ties}
    cheap_runs = runs_by_seed(cheap)
    cheap_seeds = sorted(set.intersection(*(set(r) for r in cheap_runs.values())))
    out = []
    for draw in itertools.combinations(cheap_seeds, n_seeds):
        for name, estimator in ESTIMATORS.items():
            scores = {d: tuple(estimator(runs[s], budget) for s in draw) for d, runs in cheap_runs.items()}
            answer, measured = walk_answer(cheap, scores)
            cpu = sum(cpu_of(cheap_runs[d][s]) for d in measured for s in draw)
            out.append(Replay(name, draw, answer, answer in right_answers, cpu))
        if rung is not None:
            out.extend(rung_replays(cheap, cheap_runs, rung, draw, n_seeds, right_answers))
    return out


def rung_replays(cheap, cheap_runs, rung, draw, n_seeds: int, right_answers: set[str]) -> list[Replay]:
    """The rung estimator: the walk on the cheap runs' last values; then its answer and every measured design
    it does not beat beyond the noise (its short list) trained at the rung's fidelity on `n_seeds` paired
    seeds (each draw of the rung table's seeds), and the best mean there is the answer (successive halving
    with a restart: the rung trains from scratch, annealed)."""
    scores = {d: tuple(runs[s].val_acc for s in draw) for d, runs in cheap_runs.items()}
    end, measured = walk_answer(cheap, scores)
    short = [end] + [d for d in measured if d != end and not beats_beyond_noise(scores[end], scores[d])]
    walk_cpu = sum(cpu_of(cheap_runs[d][s]) for d in measured for s in draw)
    rung_runs = runs_by_seed(rung)
    rung_seeds = sorted(set.intersection(*(set(r) for r in rung_runs.values())))
    out = []
    for rung_draw in itertools.combinations(rung_seeds, n_seeds):
        if len(short) == 1:
            answer, cpu = end, walk_cpu
        else:
            means = {d: statistics.fmean(rung_runs[d][s].val_acc for s in rung_draw) for d in short}
            answer = max(means, key=means.__getitem__)
            cpu = walk_cpu + sum(cpu_of(rung_runs[d][s]) for d in short for s in rung_draw)
        out.append(Replay("rung", draw + rung_draw, answer, answer in right_answers, cpu))
    return out


def estimator_kendall(cheap, reference, budget: float) -> dict[str, float]:
    """Kendall's tau between each estimator's design scores (the mean over every cheap seed) and the
    reference's design means."""
    from scipy.stats import kendalltau

    ref = design_stats(reference)
    cheap_runs = runs_by_seed(cheap)
    digests = [d for d in ref if d in cheap_runs]
    out = {}
    for name, estimator in ESTIMATORS.items():
        scores = [statistics.fmean(estimator(r, budget) for r in cheap_runs[d].values()) for d in digests]
        out[name] = float(kendalltau(scores, [ref[d].mean for d in digests]).statistic)
    return out


def rung_kendall(rung, reference) -> float:
    from scipy.stats import kendalltau

    ref, r = design_stats(reference), design_stats(rung)
    digests = [d for d in ref if d in r]
    return float(kendalltau([r[d].mean for d in digests], [ref[d].mean for d in digests]).statistic)


def fidelity_fields(table) -> dict:
    """What a table's runs were trained and scored with (tables assembled before 2026-12-04 call the validation
    fraction `test_subset`)."""
    f = table.fidelity
    return {
        "epochs": f.get("epochs"),
        "subset": f.get("subset"),
        "val_subset": f.get("val_subset", f.get("test_subset")),
        "recipe": f.get("recipe"),
    }


def budget_in_cheap_epochs(cheap, reference) -> float:
    """The reference's training, in epochs of the cheap fidelity (epochs x training subset)."""
    c, r = cheap.fidelity, reference.fidelity
    return r["epochs"] * r["subset"] / c["subset"]


# -- the report ----------------------------------------------------------------------------------


def summarize(args: argparse.Namespace) -> dict:
    reference, cheap = load_table(args.reference), load_table(args.cheap)
    rung = load_table(args.rung) if args.rung else None
    ref = design_stats(reference)
    seeds = common_seeds(ref)
    taus = split_half_kendall(ref, seeds)
    best, ties = reference_best_and_ties(ref, seeds)
    budget = budget_in_cheap_epochs(cheap, reference)
    cheap_stats = design_stats(cheap)
    designs = []
    for digest, s in sorted(ref.items(), key=lambda kv: -kv[1].mean):
        low, high = s.interval()
        c = cheap_stats[digest]
        designs.append(
            {
                "layout": s.layout,
                "n_msa": s.n_msa,
                "reference_val": s.mean,
                "reference_val_interval": [low, high],
                "reference_test": s.test_mean,
                "cheap_val": c.mean,
                "cheap_test": c.test_mean,
                "gap": paired_gap(s, c),
                "best": digest == best,
                "tied_with_best": digest in ties,
            }
        )
    all_replays = replays(cheap, reference, rung, args.seeds, budget)
    ref_cpu = statistics.fmean(cpu_of(r) for d in reference.designs for r in d.runs)
    every_design_cpu = ref_cpu * len(ref) * args.seeds
    estimators = {}
    kendall = estimator_kendall(cheap, reference, budget)
    if rung is not None:
        kendall["rung"] = rung_kendall(rung, reference)
    for name in dict.fromkeys(r.estimator for r in all_replays):
        mine = [r for r in all_replays if r.estimator == name]
        cpu = statistics.fmean(r.cpu_seconds for r in mine)
        right = sum(r.right for r in mine) / len(mine)
        estimators[name] = {
            "replays": len(mine),
            "right": right,
            "cpu_seconds": cpu,
            "cpu_share_of_every_design_to_the_end": cpu / every_design_cpu,
            "right_per_cpu_hour": right / (cpu / 3600),
            "kendall_with_reference": kendall[name],
            "answers": dict(statistics.Counter(ref[r.answer].layout for r in mine).most_common()),
        }
    summary = {
        "reference": args.reference,
        "cheap": args.cheap,
        "rung": args.rung,
        "reference_fidelity": fidelity_fields(reference),
        "cheap_fidelity": fidelity_fields(cheap),
        "rung_fidelity": fidelity_fields(rung) if rung else None,
        "reference_seeds": seeds,
        "split_half_kendall": {"mean": statistics.fmean(taus), "min": min(taus), "max": max(taus), "splits": len(taus)},
        "reference_best": ref[best].layout,
        "tied_with_best": [ref[d].layout for d in ties],
        "designs": designs,
        "budget_in_cheap_epochs": budget,
        "every_design_to_the_end_cpu_seconds": every_design_cpu,
        "replay_seeds": args.seeds,
        "estimators": estimators,
    }
    return summary


def markdown(summary: dict) -> str:
    ties = ", ".join(f"`{t}`" for t in summary["tied_with_best"])
    lines = [
        f"Reference: {len(summary['designs'])} designs x seeds {summary['reference_seeds']}; split-half Kendall "
        f"{summary['split_half_kendall']['mean']:.2f} (min {summary['split_half_kendall']['min']:.2f}, max "
        f"{summary['split_half_kendall']['max']:.2f}, {summary['split_half_kendall']['splits']} splits); best "
        f"`{summary['reference_best']}`, tied with it: {ties or 'none'}.",
        "",
        "| design | MSAs | reference val % (95 % interval) | reference test % | cheap val % | gap (points) |",
        "|---|---|---|---|---|---|",
    ]
    for d in summary["designs"]:
        low, high = d["reference_val_interval"]
        mark = " (best)" if d["best"] else " (tied)" if d["tied_with_best"] else ""
        lines.append(
            f"| `{d['layout']}`{mark} | {d['n_msa']} "
            f"| {100 * d['reference_val']:.2f} [{100 * low:.2f}, {100 * high:.2f}] "
            f"| {100 * d['reference_test']:.2f} | {100 * d['cheap_val']:.2f} | {100 * d['gap']:+.2f} |"
        )
    lines += [
        "",
        "| estimator | replays | answer right (the reference's best or tied) | CPU per search | share of every design "
        "at the reference's budget | right answers per CPU-hour | Kendall with the reference |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in summary["estimators"].items():
        lines.append(
            f"| {name} | {e['replays']} | {100 * e['right']:.0f} % | {e['cpu_seconds'] / 60:.1f} min "
            f"| {100 * e['cpu_share_of_every_design_to_the_end']:.0f} % | {e['right_per_cpu_hour']:.1f} "
            f"| {e['kendall_with_reference']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def figures(summary: dict, folder: Path, name: str) -> list[Path]:
    """The bias (each design's gap between the cheap fidelity and the reference, by its MSAs) and the two
    rankings side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    designs = summary["designs"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.get_cmap("viridis")
    most = max(d["n_msa"] for d in designs) or 1
    for d in designs:
        low, high = d["reference_val_interval"]
        c = colours(d["n_msa"] / most)
        left.errorbar(100 * d["cheap_val"], 100 * d["reference_val"], yerr=[[100 * (d["reference_val"] - low)],
                      [100 * (high - d["reference_val"])]], fmt="o", color=c, capsize=3)  # fmt: skip
        left.annotate(d["layout"], (100 * d["cheap_val"], 100 * d["reference_val"]), fontsize=7,
                      xytext=(4, 2), textcoords="offset points")  # fmt: skip
    left.set_xlabel("cheap fidelity: mean validation top-1 %")
    left.set_ylabel("reference budget: mean validation top-1 % (95 % interval)")
    left.set_title("the two rankings (each design's mean over its seeds)")
    order = sorted(designs, key=lambda d: d["gap"])
    right.barh([d["layout"] for d in order], [100 * d["gap"] for d in order],
               color=[colours(d["n_msa"] / most) for d in order])  # fmt: skip
    right.set_xlabel("gain from the cheap fidelity to the reference budget (points)")
    right.set_title("the bias: each design's gain (colour: its MSAs)")
    from matplotlib.patches import Patch

    counts = sorted({d["n_msa"] for d in designs})
    right.legend(
        [Patch(color=colours(n / most)) for n in counts], [f"{n} MSA" for n in counts], loc="lower right", fontsize=7
    )
    right.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    path = folder / f"{name}fidelity-bias.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]


def write_summary(summary: dict, text: str, json_path: str | None, markdown_path: str | None) -> None:
    """Print the tables `text`, and write them and the `summary` where asked (search_regret.py's too)."""
    print(text)
    if json_path:
        Path(json_path).write_text(json.dumps(summary, indent=1) + "\n")
    if markdown_path:
        Path(markdown_path).write_text(text)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    summary = summarize(args)
    write_summary(summary, markdown(summary), args.json, args.markdown)
    if args.figures:
        for path in figures(summary, Path(args.figures), args.name):
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
