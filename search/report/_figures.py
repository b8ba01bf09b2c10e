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
from archdsl.search.report._numbers import mean_text
from archdsl.search.report._summary import StudySummary, TrialRow
from archdsl.search.seed_stats import INTERVAL_LEVEL
from archdsl.search.studies.record import trials

# fANOVA importances from a handful of trials mostly measure noise: below this many complete
# trials there is no importance plot (the report says why), and above it a caveat.
MIN_TRIALS_FOR_IMPORTANCE = 10


def make_figures(study: optuna.Study, summary: StudySummary) -> dict[str, Any]:
    """name -> matplotlib Figure; a plot that does not apply (too few trials) is left out. Optuna draws
    through pyplot: its figures are closed there, so pyplot's open figures are left as they were."""
    import matplotlib
    import matplotlib.pyplot as plt
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
        rung = importance_rung(summary)
        if rung is not None:
            try:
                ax = ovm.plot_param_importances(_at_rung(study, summary, rung), target=target, target_name=lead.name)
                _title_importance(ax, summary, rung)
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
    figures = {"history": _history_figure(summary, lead), **figures}  # the history first, as report.md shows it
    if any(row.layout for row in summary.rows):
        figures["msa"] = _msa_figure(summary, lead)
    return figures


def importance_rung(summary: StudySummary) -> int | None:
    """The budget rung the parameter importances are computed at: the one most complete trials trained at (the
    higher of two as common), where it has MIN_TRIALS_FOR_IMPORTANCE of them and their parameters vary; None: no
    importance plot. Trials at two budgets are never pooled: the budget's effect would be credited to whichever
    parameters the raised trials had."""
    complete = [r for r in summary.rows if r.state == "COMPLETE"]
    if not complete:
        return None
    rungs = [r.rung for r in complete]
    rung = max(set(rungs), key=lambda r: (rungs.count(r), r))
    at_rung = [r for r in complete if r.rung == rung]
    if len(at_rung) < MIN_TRIALS_FOR_IMPORTANCE or not _params_vary(at_rung):
        return None
    return rung


def importance_trials(summary: StudySummary, rung: int) -> int:
    """How many complete trials the importances at budget rung `rung` are computed from."""
    return sum(r.state == "COMPLETE" and r.rung == rung for r in summary.rows)


def _params_vary(complete: list[TrialRow]) -> bool:
    return any(len({str(r.params.get(name)) for r in complete}) > 1 for name in complete[0].params)


def _at_rung(study: optuna.Study, summary: StudySummary, rung: int) -> optuna.Study:
    """The study itself where it has one budget; else an in-memory copy of its trials at budget rung `rung`."""
    if not summary.laddered:
        return study
    numbers = {r.number for r in summary.rows if r.rung == rung}
    copy = optuna.create_study(directions=study.directions, storage=optuna.storages.InMemoryStorage())
    copy.add_trials([t for t in trials(study) if t.number in numbers])
    return copy


def _title_importance(ax: Any, summary: StudySummary, rung: int) -> None:
    where = f" at {summary.budget_label(rung)}" if summary.laddered else ""
    ax.set_title("", loc="left")
    ax.set_title(f"Parameter importances{where} ({importance_trials(summary, rung)} trials)")


def _budget_styles(summary: StudySummary) -> dict[int, dict[str, Any]]:
    """Rung -> the colour and marker its points are drawn with (every rung a trial trained at)."""
    rungs = sorted({r.rung for r in summary.rows})
    return {
        rung: {"color": _BUDGET_COLOURS[i % len(_BUDGET_COLOURS)], "marker": _BUDGET_MARKERS[i % len(_BUDGET_MARKERS)]}
        for i, rung in enumerate(rungs)
    }


def _scatter_by_budget(
    ax: Any, summary: StudySummary, rows: Sequence[TrialRow], x_of: Callable[[TrialRow], float]
) -> None:
    """Each complete or pruned trial's lead value: in a study of one budget, complete ones as dots and pruned ones
    crossed; on a ladder of budgets, every point in its budget's colour and marker, labelled with its budget
    (pruned ones crossed, in their budget's colour)."""
    for state in ("COMPLETE", "PRUNED"):
        for rung, style in _budget_styles(summary).items():
            points = [(x_of(r), r.values[0]) for r in rows if r.state == state and r.rung == rung and r.values]
            if not points:
                continue
            if summary.laddered:
                label = f"{state.lower()} at {summary.budget_label(rung)}"
                shape = {**style, "s": 36} if state == "COMPLETE" else {**style, "marker": "x", "s": 48}
            else:
                label, shape = state.lower(), _STATE_STYLES[state]
            ax.scatter(*zip(*points, strict=True), label=label, zorder=3, **shape)


def _history_figure(summary: StudySummary, lead: Objective) -> Any:
    """The lead objective of every trial by number, each point at its budget, and the search's answer: the design
    the report names, at the budget it was measured at (its mean over the seeds), a line from its trial on. Not a
    running best over the trials: on a ladder of budgets that rises because the budget rose."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    _scatter_by_budget(ax, summary, summary.rows, lambda row: row.number)
    _seed_error_bars(ax, summary, lambda row: row.number)
    if len(summary.objectives) == 1 and len(summary.best) == 1 and summary.best[0].values:
        best = summary.best[0]
        found = summary.accuracy_estimate(best)
        value = found.mean if found is not None else (best.values or (0.0,))[0]
        figure = mean_text(found, interval=True) if found is not None else f"{value:.4g}"
        end = max(max(r.number for r in summary.rows), best.number + 0.5)
        where = f" at {summary.budget_label(best.rung)}" if summary.laddered else ""
        ax.plot(
            [best.number, end], [value, value], color="tab:red", ls="--", lw=1.5, zorder=4,
            label=f"the search's answer: trial {best.number}{where}, {figure}",
        )  # fmt: skip
    ax.set_xlabel("trial")
    ax.set_ylabel(lead.name)
    ax.set_title(f"{summary.name}: {lead.name} of each trial", fontsize=11)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="best", fontsize=8)
    return fig


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
    _scatter_by_budget(top, summary, rows, lambda row: column[row.number])
    marked = [(column[r.number], r.values[0]) for r in rows if r.number in best and r.values]
    if marked:
        named = "the search's answer" if len(summary.objectives) == 1 else "the Pareto front"
        top.scatter(*zip(*marked, strict=True), marker="*", s=200, color="tab:red", zorder=4, label=named)
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
# One colour and marker per budget rung, the first budget first (a study of one budget: _STATE_STYLES).
_BUDGET_COLOURS = ("tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")
_BUDGET_MARKERS = ("o", "s", "^", "D", "v", "P")
# Darker for more MSAs in a stage (the MSA shade of the analysis plots, then browns).
_MSA_COLOURS = ("#f2d8a7", "#e0a95b", "#b9772c", "#8a5216")
