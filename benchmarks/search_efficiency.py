"""Is the search worth running? Every strategy and pruner replayed against a fully measured table.

Each search is run through archdsl's own search code (`run_search`, the strategies, Optuna's
pruners, an in-memory study) with every trial answered from the table (`archdsl.search.fidelity.replay`:
a seed drawn per trial, the curve reported to the pruner, the recorded time on a simulated
clock), `--repeats` times with different seeds. Reported as NAS-Bench reports it:

- regret of the best-so-far: the table's mean validation accuracy (over seeds) of the best design
  the search has *seen* (by the values it was answered with) below the best design's, against
  trials and against simulated time; median and quartiles over the repeats;
- the regret on *test* accuracy of the design a search ends with (chosen on validation, as the
  search chooses), and the share of replays that end at the table's best design;
- trials to reach the best design within the seed noise (a regret no larger than the median
  seed-to-seed standard deviation of a design's accuracy), as a ratio to random search;
- where the build-up walk ends: the rank and regret of the last design it kept;
- the pruners (none, median, successive halving, Hyperband) on TPE and random search: the
  simulated time a whole search takes and the regret it ends with;
- hypervolume (of the table's mean values, each objective scaled to [0, 1] by the table's
  range, reference point 1.1) for accuracy x params and accuracy x robustness, as a fraction
  of the whole table's front.

    python benchmarks/search_efficiency.py --figures docs/figures   # the docs' figures: the shipped table, 100 repeats
    python benchmarks/search_efficiency.py --table PATH --repeats 20 --markdown /tmp/eff.md --figures /tmp/fig

Writes `search-efficiency-regret.png` and `search-efficiency-hypervolume.png` under --figures
(runs/search-efficiency unless given: a smoke run leaves the shipped figures alone) and the
Markdown tables to --markdown (and stdout).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

STRATEGIES = ("buildup", "tpe", "random", "nsga2", "grid")
PRUNERS = ("none", "median", "halving", "hyperband")
PRUNED_STRATEGIES = ("tpe", "random")  # the pruners are compared on these
FRONTS = ("accuracy,params", "accuracy,robustness")
FRONT_STRATEGIES = ("nsga2", "tpe", "random")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="fashion-mnist-k", help="a table's path, or a built-in table's name")
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--base", default="resnet-fmnist")
    parser.add_argument("--search", default="k")
    parser.add_argument("--seeds", type=int, default=1, help="paired seeds per trial (the search's --seeds)")
    parser.add_argument("--max-seeds", type=int, help="racing up to this many seeds (the search's --max-seeds)")
    parser.add_argument("--repeats", type=int, default=100, help="replays of each strategy and pruner")
    parser.add_argument(
        "--figures", default="runs/search-efficiency", help="where the figures go (the docs': --figures docs/figures)"
    )
    parser.add_argument("--markdown", help="also write the Markdown tables here")
    parser.add_argument("--jobs", type=int, default=1, help="processes replaying in parallel")
    parser.add_argument("--quick", action="store_true", help="10 repeats: a smoke test")
    return parser.parse_args()


@dataclass(frozen=True)
class Seen:
    """One measured trial of a replayed search, in the order the search measured it."""

    digest: str
    state: str  # COMPLETE, PRUNED, FAIL; EXTRA: a race's extra seed of a design already seen (--max-seeds)
    values: tuple[float, ...] | None  # what the search was answered with (None for an extra seed)
    sim_seconds: float
    kept: bool | None = None  # a build-up step: kept by the walk
    best: bool = False  # the report's best design (its mean over every seed measured, racing's too)


@dataclass(frozen=True)
class Truth:
    """The table's answer to "how good is this design": mean values over its seeds."""

    accuracy: dict[str, float]  # validation top-1: what the search chooses on
    test: dict[str, float]  # test top-1: what the user gets
    robustness: dict[str, float]
    params: dict[str, float]
    noise: float  # median over designs of the seed-to-seed std of the accuracy

    @property
    def best(self) -> float:
        return max(self.accuracy.values())

    @property
    def worst(self) -> float:
        return min(self.accuracy.values())

    @property
    def best_design(self) -> str:
        return max(self.accuracy, key=self.accuracy.__getitem__)


def truth_of(replay) -> Truth:
    designs = replay.table.designs
    acc = {d.digest: statistics.fmean(r.val_acc for r in d.runs) for d in designs if d.runs}
    test = {d.digest: statistics.fmean(r.test_acc for r in d.runs) for d in designs if d.runs}
    rob = {
        d.digest: statistics.fmean(r.robustness for r in d.runs)
        for d in designs
        if d.runs and all(r.robustness is not None for r in d.runs)
    }
    spreads = [statistics.stdev(r.val_acc for r in d.runs) for d in designs if len(d.runs) > 1]
    noise = statistics.median(spreads) if spreads else 0.0
    return Truth(acc, test, rob, {d.digest: float(d.n_params) for d in designs}, noise)


def replay_once(
    replay,
    space,
    strategy: str,
    *,
    pruner: str,
    seed: int,
    objectives: str,
    seeds: int = 1,
    max_seeds: int | None = None,
) -> list[Seen]:
    """One search, replayed in memory through `run_search`; its measured trials in order."""
    import optuna

    from archdsl.search.fidelity.measures import Fidelity
    from archdsl.search.fidelity.replay import TABLE_PREFIX
    from archdsl.search.objectives import parse_objectives
    from archdsl.search.plan import SearchPlan
    from archdsl.search.report import summarize_study
    from archdsl.search.runner import run_search
    from archdsl.search.settings import SearchSettings
    from archdsl.search.studies.record import DIGEST_ATTR, SIM_SECONDS_ATTR, is_copy, is_extra_seed, is_verdict, trials

    objs = parse_objectives(objectives)
    name = f"{strategy}-{pruner}-{seed}"
    settings = SearchSettings(
        strategy=strategy, objectives=objectives, n_trials=space.n_designs(), seed=seed, pruner=pruner,
        study_name=name, fidelity_source=f"{TABLE_PREFIX}{replay.source}", max_seeds=max_seeds,
    )  # fmt: skip
    study = optuna.create_study(
        storage=optuna.storages.InMemoryStorage(), study_name=name, directions=[o.direction for o in objs]
    )
    plan = SearchPlan(
        settings=settings, fidelity=Fidelity(epochs=replay.epochs, seeds=seeds), space=space, objectives=objs,
        study_name=name, base_name=space.base.name, replay=replay, study=study, keep_files=False,
    )  # fmt: skip
    outcome = run_search(plan)
    kept = {}
    if outcome.buildup is not None:
        for step in outcome.buildup.steps:
            kept[space.arch_from_params(step.params).digest()] = step.accepted
    summary = summarize_study(outcome.study)
    best = summary.best[0].number if len(summary.best) == 1 else None
    seen = []
    for t in trials(outcome.study):
        if not is_verdict(t) or is_copy(t):
            continue
        digest = t.user_attrs[DIGEST_ATTR]
        values = tuple(t.values) if t.values is not None else None
        state = "EXTRA" if is_extra_seed(t) else t.state.name
        sim = float(t.user_attrs.get(SIM_SECONDS_ATTR, 0.0))
        seen.append(Seen(digest, state, None if state == "EXTRA" else values, sim, kept.get(digest), t.number == best))
    return seen


def _replay_task(task: tuple) -> list[Seen]:
    replay, space, seeds, max_seeds, strategy, pruner, seed, objectives = task
    return replay_once(
        replay, space, strategy, pruner=pruner, seed=seed, objectives=objectives, seeds=seeds, max_seeds=max_seeds
    )


def _quiet() -> None:
    import logging

    import optuna

    optuna.logging.set_verbosity(logging.ERROR)


# -- measures of one replay ------------------------------------------------------------------


def regret_curve(seen: list[Seen], truth: Truth) -> list[float]:
    """After each trial: the true regret of the design the search believes best (complete trials only)."""
    incumbent: tuple[float, str] | None = None
    curve = []
    for s in seen:
        if s.state == "COMPLETE" and s.values is not None and (incumbent is None or s.values[0] > incumbent[0]):
            incumbent = (s.values[0], s.digest)
        worst_case = truth.best - truth.worst
        curve.append(worst_case if incumbent is None else truth.best - truth.accuracy[incumbent[1]])
    return curve


def chosen(seen: list[Seen]) -> str | None:
    """The design a search ends with: the report's best (by its mean over every seed it was measured on,
    on validation), or its best complete trial by the values it was answered with."""
    best = [s for s in seen if s.best]
    if best:
        return best[0].digest
    done = [s for s in seen if s.state == "COMPLETE" and s.values is not None]
    return max(done, key=lambda s: s.values[0]).digest if done else None  # type: ignore[index]


def clock(seen: list[Seen]) -> list[float]:
    return list(np.cumsum([s.sim_seconds for s in seen]))


def trials_to_reach(curve: list[float], noise: float) -> float:
    """The first trial (1-based) whose regret is within the seed noise; inf if never."""
    return next((n for n, r in enumerate(curve, start=1) if r <= noise + 1e-12), math.inf)


def on_grid(curve: list[float], times: list[float], grid: np.ndarray, start: float) -> np.ndarray:
    """A regret curve as a step function of simulated time, sampled at `grid` (`start` before the first trial)."""
    out = np.full(len(grid), start)
    for t, r in zip(times, curve, strict=True):
        out[grid >= t] = r
    return out


def front_hypervolume(seen: list[Seen], truth: Truth, names: tuple[str, str]) -> list[float]:
    """After each trial: the hypervolume of the true values of the complete trials so far, over the table's."""
    from archdsl.search._optuna_private import hypervolume

    points = _scaled_points(truth, names)
    reference = [1.1, 1.1]
    whole = hypervolume(list(points.values()), reference)
    curve, found = [], []
    for s in seen:
        if s.state == "COMPLETE" and s.digest in points:
            found.append(points[s.digest])
        curve.append(hypervolume(found, reference) / whole if found else 0.0)
    return curve


def _scaled_points(truth: Truth, names: tuple[str, str]) -> dict[str, list[float]]:
    """Each design's true values, minimised and scaled to [0, 1] by the table's range (0: the best)."""
    columns = {
        "accuracy": (truth.accuracy, True),
        "robustness": (truth.robustness, True),
        "params": (truth.params, False),
    }
    points: dict[str, list[float]] = {}
    for name in names:
        values, maximise = columns[name]
        low, high = min(values.values()), max(values.values())
        span = (high - low) or 1.0
        for digest, v in values.items():
            points.setdefault(digest, []).append((high - v) / span if maximise else (v - low) / span)
    return {d: p for d, p in points.items() if len(p) == len(names)}


# -- the study --------------------------------------------------------------------------------


def quartiles(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and quartiles per column of ragged rows (a shorter row holds its last value)."""
    width = max(len(r) for r in rows)
    padded = np.array([r + [r[-1]] * (width - len(r)) for r in rows])
    q1, med, q3 = np.percentile(padded, [25, 50, 75], axis=0)
    return med, q1, q3


def median_text(values: list[float], fmt: str = "{:.0f}") -> str:
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < len(values) / 2:
        return "not reached"
    med = statistics.median(values)
    return fmt.format(med)


def main() -> None:
    args = parse_args()
    repeats = 10 if args.quick else args.repeats
    from matplotlib.figure import Figure

    from archdsl import markdown
    from archdsl.data import describe
    from archdsl.files import save_figure
    from archdsl.search.fidelity.measures import fit_to_data, load_base
    from archdsl.search.fidelity.replay import check_replay, load_replay
    from archdsl.search.objectives import parse_objectives
    from archdsl.search.space import make_space, parse_searched

    info = describe(args.dataset)
    space = make_space(
        fit_to_data(load_base(args.base), info.image_shape, info.num_classes), parse_searched(args.search)
    )
    replay = load_replay(f"table:{args.table}")
    measured = parse_objectives("accuracy,robustness,params")
    check_replay(replay, space, args.dataset, measured, args.seeds, args.max_seeds or args.seeds)
    truth = truth_of(replay)
    started = time.perf_counter()

    configs = [(s, "none") for s in STRATEGIES] + [(s, p) for s in PRUNED_STRATEGIES for p in PRUNERS if p != "none"]
    configs.append(("buildup", "median"))
    tasks = [(s, p, seed, "accuracy") for s, p in configs for seed in range(repeats)]
    tasks += [(s, "none", seed, o) for o in FRONTS for s in FRONT_STRATEGIES for seed in range(repeats)]
    with ProcessPoolExecutor(args.jobs, initializer=_quiet) as pool:
        done = list(
            pool.map(_replay_task, [(replay, space, args.seeds, args.max_seeds, *task) for task in tasks], chunksize=4)
        )
    print(f"{len(tasks)} replayed searches in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    results = dict(zip(tasks, done, strict=True))
    runs = {(s, p): [results[s, p, seed, "accuracy"] for seed in range(repeats)] for s, p in configs}
    fronts = {
        (o, s): [front_hypervolume(results[s, "none", seed, o], truth, tuple(o.split(","))) for seed in range(repeats)]
        for o in FRONTS
        for s in FRONT_STRATEGIES
    }

    curves = {key: [regret_curve(s, truth) for s in seen] for key, seen in runs.items()}
    times = {key: [clock(s) for s in seen] for key, seen in runs.items()}
    reach = {key: [trials_to_reach(c, truth.noise) for c in cs] for key, cs in curves.items()}
    reach_time = {
        key: [t[n - 1] if math.isfinite(n) else math.inf for n, t in zip(reach[key], times[key], strict=True)]
        for key in runs
    }

    # -- figures
    figures = Path(args.figures)
    figures.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    horizon = max(t[-1] for ts in times.values() for t in ts)
    grid = np.linspace(0, horizon, 200)
    start = truth.best - truth.worst

    def draw(ax, key, label, by_time: bool) -> None:
        if by_time:
            sampled = [on_grid(c, t, grid, start) for c, t in zip(curves[key], times[key], strict=True)]
            q1, med, q3 = np.percentile(np.array(sampled), [25, 50, 75], axis=0)
            x, step = grid / 60, None
        else:
            med, q1, q3 = quartiles(curves[key])
            x, step = np.arange(1, len(med) + 1), "post"
        (line,) = ax.plot(x, med, label=label, drawstyle="steps-post" if step else "default")
        ax.fill_between(x, q1, q3, alpha=0.15, color=line.get_color(), step=step)

    panels = (
        (axes[0, 0], "strategies (no pruner)", [(s, "none") for s in STRATEGIES], False),
        (axes[0, 1], "strategies (no pruner)", [(s, "none") for s in STRATEGIES], True),
        (axes[1, 0], "pruners on random search", [("random", p) for p in PRUNERS], True),
        (axes[1, 1], "pruners on TPE", [("tpe", p) for p in PRUNERS], True),
    )
    for ax, title, keys, by_time in panels:
        for key in keys:
            draw(ax, key, key[0] if key[1] == "none" and "strategies" in title else key[1], by_time)
        ax.axhline(truth.noise, color="grey", linestyle=":", linewidth=1, label="seed noise")
        ax.set_xlabel("simulated time (min, one worker)" if by_time else "trials (designs measured)")
        ax.set_ylabel("regret of the best-so-far (top-1)")
        ax.set_title(f"{title}: median and quartiles of {repeats}", fontsize=10)
        ax.legend(fontsize=7)
    save_figure(fig, figures / "search-efficiency-regret.png", dpi=110)

    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, len(FRONTS))
    for ax, objectives in zip(axes, FRONTS, strict=True):
        for strategy in FRONT_STRATEGIES:
            med, q1, q3 = quartiles(fronts[objectives, strategy])
            x = np.arange(1, len(med) + 1)
            (line,) = ax.plot(x, med, label=strategy, drawstyle="steps-post")
            ax.fill_between(x, q1, q3, alpha=0.15, color=line.get_color(), step="post")
        ax.set_xlabel("trials")
        ax.set_ylabel("hypervolume / the table's")
        ax.set_title(f"{objectives.replace(',', ' x ')}: median and quartiles of {repeats}")
        ax.legend(fontsize=8)
    save_figure(fig, figures / "search-efficiency-hypervolume.png", dpi=110)

    # -- tables
    random_reach = statistics.median(reach["random", "none"])
    lines = [
        f"Table {args.table}: {len(truth.accuracy)} designs, seed noise (median std of a design's accuracy over "
        f"{len(replay.table.seeds)} seeds) {truth.noise:.4f}; best mean accuracy {truth.best:.4f}, "
        f"worst {truth.worst:.4f}; best mean test accuracy {max(truth.test.values()):.4f}; "
        f"{repeats} replays each, --seeds {args.seeds}"
        + (f" --max-seeds {args.max_seeds}." if args.max_seeds else "."),
        "",
    ]
    rows = []
    for s in STRATEGIES:
        key = (s, "none")
        med = statistics.median(reach[key])
        ratio = f"{med / random_reach:.2f}" if math.isfinite(med) and math.isfinite(random_reach) else "-"
        share = sum(math.isfinite(n) for n in reach[key]) / repeats
        end = statistics.median(c[-1] for c in curves[key])
        total = statistics.median(t[-1] for t in times[key])
        ends_with = [chosen(seen) for seen in runs[key]]
        best_test = max(truth.test.values())
        test_regret = statistics.fmean(best_test - truth.test[d] if d else best_test for d in ends_with)
        at_best = sum(d == truth.best_design for d in ends_with) / repeats
        rows.append(
            [s, median_text(reach[key]), ratio, f"{share:.0%}", f"{end:.4f}", f"{test_regret:.4f}", f"{at_best:.0%}",
             f"{total / 60:.1f} min"]
        )  # fmt: skip
    lines += markdown.table(
        ["strategy", "trials to the best within the noise (median)", "ratio to random", "reached in",
         "regret at the end (median)", "test regret of the chosen design (mean)", "ends at the table's best",
         "simulated time, whole search (median)"],
        rows,
    )  # fmt: skip

    ranking = sorted(truth.accuracy, key=truth.accuracy.get, reverse=True)
    ends = []
    for seen in runs["buildup", "none"]:
        kept = [s.digest for s in seen if s.kept]
        if kept:
            ends.append(kept[-1])
    lines += [
        "",
        "Where the build-up walk ends (the last design it kept; no pruner):",
        "",
    ]
    walk_lengths = statistics.median(len(s) for s in runs["buildup", "none"])
    lines += markdown.table(
        ["rank of the end (1 = best of the table)", "replays", "regret", "trials in the walk (median)"],
        [
            [f"{ranking.index(digest) + 1} of {len(ranking)}", f"{ends.count(digest)} of {len(ends)}",
             f"{truth.best - truth.accuracy[digest]:.4f}", f"{walk_lengths:.0f}"]
            for digest in sorted(set(ends), key=ranking.index)
        ],
    )  # fmt: skip
    lines += [
        "",
        "Pruners (the same searches stopped early; at equal regret the cheaper one wins):",
        "",
    ]
    rows = []
    for s in (*PRUNED_STRATEGIES, "buildup"):
        for p in PRUNERS:
            key = (s, p)
            if key not in runs:
                continue
            pruned = statistics.median(sum(x.state == "PRUNED" for x in seen) for seen in runs[key])
            total = statistics.median(t[-1] for t in times[key])
            base = statistics.median(t[-1] for t in times[s, "none"])
            end = statistics.median(c[-1] for c in curves[key])
            to_best = median_text([x / 60 for x in reach_time[key]], "{:.1f} min")
            rows.append(
                [s, p, f"{pruned:.0f}", f"{end:.4f}", to_best, f"{total / 60:.1f} min", f"{1 - total / base:.0%}"]
            )
    lines += markdown.table(
        ["strategy", "pruner", "pruned trials (median)", "regret at the end (median)",
         "time to the best within the noise (median)", "simulated time, whole search (median)",
         "time saved vs no pruner"],
        rows,
    )  # fmt: skip
    lines += [
        "",
        "Hypervolume (of the table's mean values, scaled; 1 = the whole table's front), median after n trials:",
        "",
    ]
    rows = []
    for (objectives, strategy), hv in fronts.items():
        med, _, _ = quartiles(hv)
        rows.append(
            [
                objectives.replace(",", " x "),
                strategy,
                *(f"{med[min(n, len(med)) - 1]:.3f}" for n in (4, 8, 12, len(med))),
            ]
        )
    lines += markdown.table(["objectives", "strategy", "after 4", "after 8", "after 12", "at the end"], rows)
    lines.append("")
    lines.append(f"({time.perf_counter() - started:.0f} s for {len(tasks)} replayed searches, {args.jobs} processes)")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
