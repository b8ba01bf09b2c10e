"""What a study found: its trials as typed rows, the winners, plots and a Markdown summary.

Everything here reads the study's storage only (designs are stored as `.arch` text in
each trial), so any machine that reaches the storage can report on a study that ran
elsewhere. Functions return values (rows, figures, text); `write_report` writes them under
the study's folder that the caller names (`archdsl search` and `archdsl report` do).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.files import ensure_dir, save_figure, write_text
from archdsl.search.objectives import OBJECTIVES, Objective
from archdsl.search.storage import FAIL_REASON_ATTR
from archdsl.search.trial import DIGEST_ATTR, METRICS_ATTR, PRUNED_REASON_ATTR, REUSED_ATTR, SPEC_ATTR

MIN_TRIALS_FOR_IMPORTANCE = 4


@dataclass(frozen=True)
class TrialRow:
    """One trial as the report shows it: state, parameters, values, metrics, design and a note (why it failed, what it
    reused)."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    params: dict[str, Any]
    values: tuple[float, ...] | None
    metrics: dict[str, Any]
    n_msa: int | None
    short_id: str | None
    spec: str | None
    note: str  # why it failed or was pruned, or which trial it reused


@dataclass(frozen=True)
class StudySummary:
    """A study read back: its objectives and strategy, every trial as a row, and the best trials (or Pareto front)."""

    name: str
    objectives: tuple[Objective, ...]
    strategy: str
    rows: tuple[TrialRow, ...]
    best: tuple[TrialRow, ...]  # the best trial, or the Pareto front (several objectives)

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.rows)


def study_objectives(study: optuna.Study) -> tuple[Objective, ...]:
    """The objectives a study records (its `objectives` attr), or `value0`, `value1`, ... for a study made elsewhere."""
    names = str(study.user_attrs.get("objectives", "")).split(",")
    if len(names) == len(study.directions) and all(n in OBJECTIVES for n in names):
        return tuple(OBJECTIVES[n] for n in names)
    # A study made outside archdsl: name the values by position.
    return tuple(
        Objective(f"value{i}", d.name.lower(), OBJECTIVES["accuracy"].cost, "", "")  # type: ignore[arg-type]
        for i, d in enumerate(study.directions)
    )


def summarize_study(study: optuna.Study) -> StudySummary:
    """Every trial of a study as a `TrialRow`, and the winners: one row per design."""
    objectives = study_objectives(study)
    rows = tuple(_row(t) for t in study.get_trials(deepcopy=False))
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    best_numbers: list[int] = []
    if complete:
        best_trials = [study.best_trial] if len(objectives) == 1 else study.best_trials
        # One row per design: a reused trial repeats its twin's design.
        seen: set[str] = set()
        for t in sorted(best_trials, key=lambda t: t.number):
            digest = t.user_attrs.get(DIGEST_ATTR, str(t.number))
            if digest not in seen:
                seen.add(digest)
                best_numbers.append(t.number)
    by_number = {r.number: r for r in rows}
    return StudySummary(
        name=study.study_name,
        objectives=objectives,
        strategy=str(study.user_attrs.get("strategy", "?")),
        rows=rows,
        best=tuple(by_number[n] for n in best_numbers),
    )


def _row(t: FrozenTrial) -> TrialRow:
    attrs = t.user_attrs
    note = ""
    if FAIL_REASON_ATTR in attrs:
        note = str(attrs[FAIL_REASON_ATTR])
    elif t.state == TrialState.FAIL:
        note = "interrupted, or its worker stopped"
    elif PRUNED_REASON_ATTR in attrs and t.state == TrialState.PRUNED:
        note = str(attrs[PRUNED_REASON_ATTR])
    elif REUSED_ATTR in attrs:
        note = f"same design as trial {attrs[REUSED_ATTR]}"
    spec = attrs.get(SPEC_ATTR)
    return TrialRow(
        number=t.number,
        state=t.state.name,
        params=dict(t.params),
        values=tuple(t.values) if t.values is not None else None,
        metrics=dict(attrs.get(METRICS_ATTR, {})),
        n_msa=attrs.get("n_msa"),
        short_id=attrs.get("short_id"),
        spec=spec,
        note=note,
    )


def trial_line(study: optuna.Study, trial: FrozenTrial) -> str:
    """`trial 3 COMPLETE accuracy=0.52 [k_c1=0 k_c2=1 k_c3=0]`, with the reason of a failure."""
    row = _row(trial)
    names = [o.name for o in study_objectives(study)]
    values = (
        " ".join(f"{n}={v:.4g}" for n, v in zip(names, row.values, strict=False))
        if row.values and row.state == "COMPLETE"
        else ""
    )
    params = " ".join(f"{k}={v}" for k, v in row.params.items())
    parts = [f"trial {row.number} {row.state}", values, f"[{params}]", f"({row.note})" if row.note else ""]
    return " ".join(p for p in parts if p)


# -- figures --------------------------------------------------------------------------------


def make_figures(study: optuna.Study, summary: StudySummary) -> dict[str, Any]:
    """name -> matplotlib Figure; a plot that does not apply (too few trials) is left out.

    Optuna draws through pyplot; its figures are closed in pyplot before returning, so the caller
    gets plain Figure objects and pyplot's list of open figures (global state) is left as it was.
    """
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    figures: dict[str, Any] = {}
    if summary.count("COMPLETE") == 0:
        return figures
    lead = summary.objectives[0]
    already_open = set(plt.get_fignums())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
        target = None if len(summary.objectives) == 1 else (lambda t: t.values[0])
        ax = ovm.plot_optimization_history(study, target=target, target_name=lead.name)
        figures["history"] = ax.figure
        if 2 <= len(summary.objectives) <= 3:
            ax = ovm.plot_pareto_front(study, target_names=[o.name for o in summary.objectives])
            figures["pareto"] = ax.figure
        elif len(summary.objectives) > 3:
            # Optuna draws at most 3 axes: show the front of the first two objectives.
            first, second = summary.objectives[:2]
            ax = ovm.plot_pareto_front(
                study, targets=lambda t: (t.values[0], t.values[1]), target_names=[first.name, second.name]
            )
            figures["pareto"] = ax.figure
        if summary.count("COMPLETE") >= MIN_TRIALS_FOR_IMPORTANCE and _params_vary(summary):
            try:
                ax = ovm.plot_param_importances(study, target=target, target_name=lead.name)
                figures["importance"] = ax.figure
            except (RuntimeError, ValueError, ZeroDivisionError):
                pass  # importances need variation optuna did not find
            except AssertionError:
                pass  # optuna labels the bars through an Agg-style canvas: not on this process's backend
    for number in set(plt.get_fignums()) - already_open:
        plt.close(number)
    figures["msa"] = _msa_figure(summary, lead)
    for fig in figures.values():
        fig.set_size_inches(7, 4.5)
        fig.tight_layout()
    return figures


def _params_vary(summary: StudySummary) -> bool:
    complete = [r for r in summary.rows if r.state == "COMPLETE"]
    return any(len({str(r.params.get(name)) for r in complete}) > 1 for name in complete[0].params)


def _msa_figure(summary: StudySummary, lead: Objective) -> Any:
    """The lead objective against the number of MSAs: the paper's build-up curve, per trial."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure()
    ax = fig.add_subplot()
    points = [
        (r.n_msa, r.values[0], r.number)
        for r in summary.rows
        if r.state == "COMPLETE" and r.values and r.n_msa is not None
    ]
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="tab:blue", label="trial")
    best = {r.number for r in summary.best}
    marked = [p for p in points if p[2] in best]
    ax.scatter([p[0] for p in marked], [p[1] for p in marked], color="tab:red", marker="*", s=160, label="best")
    for n, v, number in points:
        ax.annotate(str(number), (n, v), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("number of MSA blocks")
    ax.set_ylabel(lead.name)
    ax.set_title(f"{summary.name}: {lead.name} against MSAs")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    return fig


# -- Markdown -------------------------------------------------------------------------------


def markdown(summary: StudySummary, figure_files: dict[str, str], best_files: dict[int, str]) -> str:
    """report.md of a study: the best designs with their specs, the plots, and a table of every trial."""
    objs = ", ".join(f"{o.name} ({o.direction})" for o in summary.objectives)
    lines = [
        f"# Search report: {summary.name}",
        "",
        f"- strategy: {summary.strategy}",
        f"- objectives: {objs}",
        f"- trials: {len(summary.rows)} ({summary.count('COMPLETE')} complete, {summary.count('PRUNED')} pruned, "
        f"{summary.count('FAIL')} failed, {summary.count('RUNNING')} running, {summary.count('WAITING')} waiting)",
        "",
        "## Best designs" if len(summary.objectives) == 1 else "## Pareto front",
        "",
    ]
    if not summary.best:
        lines += ["No trial has completed yet.", ""]
    for row in summary.best:
        values = ", ".join(f"{o.name} = {_fmt(v)}" for o, v in zip(summary.objectives, row.values or (), strict=False))
        lines += [f"### Trial {row.number} ({row.n_msa} MSA): {values}", ""]
        if row.number in best_files:
            lines += [f"Spec: `{best_files[row.number]}`", ""]
        if row.spec:
            lines += ["```arch", row.spec.rstrip(), "```", ""]
    if figure_files:
        lines += ["## Plots", ""]
        for name, path in figure_files.items():
            lines += [f"![{name}]({path})", ""]
    lines += ["## All trials", ""]
    header = ["trial", "state", "MSA", *[o.name for o in summary.objectives], "params", "note"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary.rows:
        cells = [_fmt(v) for v in row.values] if row.values else ["" for _ in summary.objectives]
        params = " ".join(f"{k}={v}" for k, v in row.params.items())
        note = row.note.replace("|", "/").replace("\n", " ")
        lines.append(
            f"| {row.number} | {row.state} | {'' if row.n_msa is None else row.n_msa} | "
            + " | ".join(cells)
            + f" | {params} | {note} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    if abs(value) >= 1e5:
        return f"{value:.4g}"
    return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def summary_text(summary: StudySummary) -> str:
    """A few lines for the terminal: the trial counts and the best designs."""
    lines = [
        f"study {summary.name}: {len(summary.rows)} trials ({summary.count('COMPLETE')} complete, "
        f"{summary.count('PRUNED')} pruned, {summary.count('FAIL')} failed)"
    ]
    for row in summary.best:
        values = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(summary.objectives, row.values or (), strict=False))
        params = " ".join(f"{k}={v}" for k, v in row.params.items())
        lines.append(f"  best: trial {row.number} ({row.n_msa} MSA) {values}  [{params}]")
    return "\n".join(lines)


# -- files ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportPaths:
    """What `write_report` wrote, and the terminal summary of the study."""

    report: Path  # report/report.md
    figures: dict[str, Path]  # plot name -> report/<name>.png
    best: dict[int, Path]  # trial number -> best/<rank>-trial<number>-<id>.arch
    summary_text: str


def write_report(study: optuna.Study, study_dir: Path) -> ReportPaths:
    """Write report/report.md, its PNGs and best/*.arch for `study` under `study_dir`."""
    summary = summarize_study(study)
    report_dir = ensure_dir(study_dir / "report")
    best_dir = ensure_dir(study_dir / "best")
    for old in best_dir.glob("*.arch"):  # the front can shrink: keep only today's winners
        old.unlink()
    best: dict[int, Path] = {}
    for rank, row in enumerate(summary.best, start=1):
        if row.spec:
            best[row.number] = write_text(best_dir / f"{rank}-trial{row.number}-{row.short_id}.arch", row.spec)
    figures = {
        name: save_figure(fig, report_dir / f"{name}.png", dpi=100, bbox_inches="tight")  # legends sit outside
        for name, fig in make_figures(study, summary).items()
    }
    text = markdown(
        summary,
        {name: path.name for name, path in figures.items()},
        {n: str(Path("..") / "best" / p.name) for n, p in best.items()},
    )
    report = write_text(report_dir / "report.md", text)
    return ReportPaths(report=report, figures=figures, best=best, summary_text=summary_text(summary))
