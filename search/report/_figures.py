"""A study's plots: Optuna's history, Pareto front and importances, and where the MSAs went.

Functions return matplotlib `Figure`s and leave pyplot's global state as they found it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optuna

from archdsl.search.objectives import Objective
from archdsl.search.report._summary import StudySummary, TrialRow
from archdsl.search.seed_stats import INTERVAL_LEVEL

# fANOVA importances from a handful of trials mostly measure noise: below this many complete
# trials there is no importance plot (the report says why), and above it a caveat.
MIN_TRIALS_FOR_IMPORTANCE = 10


def make_figures(study: optuna.Study, summary: StudySummary) -> dict[str, Any]:
    """name -> matplotlib Figure; a plot that does not apply (too few trials) is left out. Optuna draws
    through pyplot: its figures are closed there, so pyplot's open figures are left as they were."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    from optuna.visualization import matplotlib as ovm

    figures: dict[str, Any] = {}
    if summary.count("COMPLETE") == 0:
        return figures
    lead = summary.objectives[0]
    already_open = set(plt.get_fignums())
    # Optuna's plots switch pyplot's global style to ggplot: keep that inside this block.
    with warnings.catch_warnings(), matplotlib.rc_context():
        warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
        target = None if len(summary.objectives) == 1 else (lambda t: t.values[0])
        ax = ovm.plot_optimization_history(study, target=target, target_name=lead.name)
        if _seed_error_bars(ax, summary, lambda row: row.number):
            ax.legend()
        _mark_pruned(ax, summary)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        figures["history"] = ax.figure
        if len(summary.objectives) >= 2:
            # Optuna draws at most 3 axes; beyond that, the front of the first two objectives.
            shown = summary.objectives[:3] if len(summary.objectives) == 3 else summary.objectives[:2]
            ax = ovm.plot_pareto_front(
                study,
                targets=lambda t: tuple(t.values[i] for i in range(len(shown))),
                target_names=[o.name for o in shown],
            )
            if len(shown) == 2:
                _label_front(ax, summary)
            figures["pareto"] = ax.figure
        if _importance_applies(summary):
            try:
                ax = ovm.plot_param_importances(study, target=target, target_name=lead.name)
                figures["importance"] = ax.figure
            except (RuntimeError, ValueError, ZeroDivisionError):
                pass  # importances need variation optuna did not find
            except AssertionError:
                pass  # optuna labels the bars through an Agg-style canvas: not on this process's backend
    for number in set(plt.get_fignums()) - already_open:
        plt.close(number)
    for fig in figures.values():
        fig.set_size_inches(7, 4.5)
        fig.tight_layout()
    if any(row.layout for row in summary.rows):
        figures["msa"] = _msa_figure(summary, lead)
    return figures


def _importance_applies(summary: StudySummary) -> bool:
    return summary.count("COMPLETE") >= MIN_TRIALS_FOR_IMPORTANCE and _params_vary(summary)


def _params_vary(summary: StudySummary) -> bool:
    complete = [r for r in summary.rows if r.state == "COMPLETE"]
    return any(len({str(r.params.get(name)) for r in complete}) > 1 for name in complete[0].params)


def _mark_pruned(ax: Any, summary: StudySummary) -> None:
    """Optuna's history shows complete trials only: add the pruned ones at their last value."""
    pruned = [(r.number, r.values[0]) for r in summary.rows if r.state == "PRUNED" and r.values]
    if pruned:
        ax.scatter(*zip(*pruned, strict=True), marker="x", color="tab:orange", s=40, zorder=3, label="pruned")
        ax.legend()


def _seed_error_bars(
    ax: Any, summary: StudySummary, x_of: Callable[[TrialRow], float], rows: Sequence[TrialRow] | None = None
) -> bool:
    """Each complete trial's accuracy with its 95 % t-interval over the paired seeds (seed_stats), as error
    bars behind its point (whether any was drawn); none where the lead objective is not the accuracy, nor
    for a trial of one seed."""
    if summary.objectives[0].name != "accuracy":
        return False
    points = []
    for row in summary.rows if rows is None else rows:
        seeds = summary.accuracy_estimate(row) if row.state == "COMPLETE" else None
        if seeds is not None and seeds.low is not None and seeds.high is not None:
            points.append((x_of(row), seeds.mean, seeds.mean - seeds.low, seeds.high - seeds.mean))
    if points:
        x, y, below, above = zip(*points, strict=True)
        ax.errorbar(
            x, y, yerr=[below, above], fmt="none", ecolor="0.45", elinewidth=1, capsize=3, zorder=2,
            label=f"{INTERVAL_LEVEL:.0%} interval over seeds",
        )  # fmt: skip
    return bool(points)


def _label_front(ax: Any, summary: StudySummary) -> None:
    """Each front point labelled with its layout, as MSAs per stage: `(0,1,1,2)`."""
    labelled = [r for r in summary.best if r.values and r.layout]
    if not labelled:
        return
    low, high = ax.get_xlim()
    for row in labelled:
        x, y = (row.values or (0.0, 0.0))[:2]  # never empty: `labelled` has values
        right_half = x > (low + high) / 2  # labels point inwards, so none runs off the plot
        ax.annotate(
            "(" + ",".join(str(k) for k in row.msa_per_stage.values()) + ")",
            (x, y),
            textcoords="offset points",
            xytext=(-7 if right_half else 7, 3),
            ha="right" if right_half else "left",
            fontsize=8,
            color="0.2",
        )
    stages = ",".join(labelled[0].msa_per_stage)
    ax.text(0.99, 0.01, f"labels: MSAs per stage ({stages})", transform=ax.transAxes, ha="right", fontsize=7)


def _msa_figure(summary: StudySummary, lead: Objective) -> Any:
    """Where each trial put its MSAs (a cell per stage: how many) under the lead objective, trials side by side
    by number; a pruned trial at its last reported value, crossed, over a hatched column."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    rows = [r for r in summary.rows if r.layout]
    stages = list(rows[0].msa_per_stage)
    counts = np.array([[r.msa_per_stage.get(s, 0) for r in rows] for s in stages], dtype=float)
    column = {r.number: i for i, r in enumerate(rows)}
    width = min(16.0, max(7.0, 1.5 + 0.4 * len(rows)))
    fig = Figure(figsize=(width, 3.0 + 0.35 * len(stages)), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, max(1.2, 0.45 * len(stages))])

    best = {r.number for r in summary.best}
    for state, style in _STATE_STYLES.items():
        points = [(column[r.number], r.values[0]) for r in rows if r.state == state and r.values]
        if points:
            top.scatter(*zip(*points, strict=True), label=state.lower(), zorder=3, **style)
    marked = [(column[r.number], r.values[0]) for r in rows if r.number in best and r.values]
    if marked:
        top.scatter(*zip(*marked, strict=True), marker="*", s=200, color="tab:red", zorder=4, label="best")
    _seed_error_bars(top, summary, lambda row: column[row.number], rows)
    top.set_ylabel(lead.name)
    top.grid(alpha=0.3)
    top.legend(loc="best", fontsize=8)
    top.set_title(f"{summary.name}: where the MSAs went", fontsize=11)

    most = int(counts.max()) if counts.size else 0
    colours = ["#ffffff", *[_MSA_COLOURS[min(i, len(_MSA_COLOURS) - 1)] for i in range(most)]]
    edges_x = np.arange(len(rows) + 1) - 0.5
    edges_y = np.arange(len(stages) + 1) - 0.5
    bottom.pcolormesh(
        edges_x, edges_y, counts, cmap=ListedColormap(colours), vmin=-0.5, vmax=most + 0.5, edgecolors="0.85", lw=0.5
    )
    bottom.invert_yaxis()  # the first stage on top, as in the spec
    for i, row in enumerate(rows):
        if row.state != "COMPLETE":  # a pruned or failed trial's column is hatched
            bottom.bar(i, len(stages), bottom=-0.5, width=1, fill=False, hatch="///", edgecolor="0.7", lw=0)
        for line in range(len(stages)):
            k = int(counts[line, i])
            if k and len(rows) <= 60:
                bottom.text(i, line, str(k), ha="center", va="center", fontsize=9, zorder=5)
    bottom.set_yticks(range(len(stages)), stages)
    bottom.set_ylabel("MSAs per stage")
    bottom.set_xlabel("trial (hatched: pruned or failed)")
    stride = max(1, -(-len(rows) // 25))  # at most ~25 labels
    bottom.set_xticks(range(0, len(rows), stride), [str(r.number) for r in rows[::stride]])
    bottom.set_xlim(-0.5, len(rows) - 0.5)
    return fig


_STATE_STYLES = {
    "COMPLETE": {"marker": "o", "color": "tab:blue", "s": 36},
    "PRUNED": {"marker": "x", "color": "tab:orange", "s": 48},
}
# Darker for more MSAs in a stage (the MSA shade of the analysis plots, then browns).
_MSA_COLOURS = ("#f2d8a7", "#e0a95b", "#b9772c", "#8a5216")
