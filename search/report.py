"""What a study found: its trials as typed rows, the winners, plots and a Markdown summary.

Everything here reads the study's storage only (designs are stored as `.arch` text in
each trial), so any machine that reaches the storage can report on a study that ran
elsewhere. Functions return values (rows, figures, text); `write_report` writes them under
the study's folder that the caller names (`archdsl search` and `archdsl report` do).
"""

from __future__ import annotations

import csv
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.files import ensure_dir, save_figure, write_text
from archdsl.search.naming import path_part
from archdsl.search.objectives import OBJECTIVES, Objective
from archdsl.search.optuna_private import retried_trial
from archdsl.search.replay import SIM_SECONDS_ATTR
from archdsl.search.runner import COMMAND_ATTR, StudyProgress
from archdsl.search.space import layout_text, msa_per_stage
from archdsl.search.storage import FAIL_REASON_ATTR, is_copy
from archdsl.search.strategies import BUILDUP_STEP_ATTR
from archdsl.search.trial import (
    DIGEST_ATTR,
    LAYOUT_ATTR,
    METRICS_ATTR,
    PRUNED_REASON_ATTR,
    SPEC_ATTR,
)

# fANOVA importances from a handful of trials mostly measure noise: below this many complete
# trials there is no importance plot (the report says why), and above it a caveat.
MIN_TRIALS_FOR_IMPORTANCE = 10
PRUNED_MARK = "✂"  # beside a pruned trial's value: the last one it reported, not a final one


@dataclass(frozen=True)
class TrialRow:
    """One trial as the report shows it: state, parameters, values, metrics, design and a note (why it failed)."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    params: dict[str, Any]
    values: tuple[float, ...] | None
    metrics: dict[str, Any]
    n_msa: int | None
    short_id: str | None
    spec: str | None
    note: str  # why it failed or was pruned
    layout: str | None = None  # `c1:CC c2:CM ...` (space.layout_text)
    seconds: float | None = None  # from start to finish (None while it runs); simulated for a replayed trial
    simulated: bool = False  # `seconds` is a replayed trial's simulated time (archdsl.search.replay)
    step: str | None = None  # a build-up trial's step: `base`, `+1 MSA in c3`

    @property
    def msa_per_stage(self) -> dict[str, int]:
        return msa_per_stage(self.layout) if self.layout else {}


@dataclass(frozen=True)
class StudySummary:
    """A study read back: its objectives and strategy, every trial as a row, and the best trials (or Pareto front)."""

    name: str
    objectives: tuple[Objective, ...]
    strategy: str
    rows: tuple[TrialRow, ...]  # every trial but the copies
    best: tuple[TrialRow, ...]  # the best trial, or the Pareto front (several objectives)
    command: str | None = None  # the command line that reproduces the study
    copies: int = 0  # trials that drew a design the study had already (drawn again, not counted)

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
    trials = study.get_trials(deepcopy=False)
    rows = tuple(_row(t) for t in trials if not is_copy(t))
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    best_numbers: list[int] = []
    if complete:
        best_trials = [study.best_trial] if len(objectives) == 1 else study.best_trials
        # One row per design (two workers may have measured one design at the same moment).
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
        command=study.user_attrs.get(COMMAND_ATTR),
        copies=len(trials) - len(rows),
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
    retried = retried_trial(t)
    if retried is not None:  # its worker died (killed, lost) and the design was queued again
        note = "; ".join(p for p in (f"retry of trial {retried}", note) if p)
    spec = attrs.get(SPEC_ATTR)
    seconds = None
    if t.datetime_start is not None and t.datetime_complete is not None:
        seconds = (t.datetime_complete - t.datetime_start).total_seconds()
    simulated = SIM_SECONDS_ATTR in attrs
    if simulated:  # replayed: the time the trial would have taken, not the milliseconds its replay took
        seconds = float(attrs[SIM_SECONDS_ATTR])
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
        layout=attrs.get(LAYOUT_ATTR) or _layout_of(spec),
        seconds=seconds,
        step=attrs.get(BUILDUP_STEP_ATTR),
        simulated=simulated,
    )


def _layout_of(spec: str | None) -> str | None:
    """The layout of a trial recorded before trials kept one (from its .arch text)."""
    if not spec:
        return None
    from archdsl.errors import UserError
    from archdsl.lang.spec import parse_spec

    try:
        return layout_text(parse_spec(spec))
    except UserError:
        return None


def design_text(row: TrialRow) -> str:
    """A trial's design in one line: its layout, and the searched knobs other than k."""
    knobs = {k: v for k, v in row.params.items() if not k.startswith("k_")} if row.layout else row.params
    parts = [row.layout] if row.layout else []
    parts += [f"{k}={v}" for k, v in knobs.items()]
    return " ".join(parts)


def trial_line(study: optuna.Study, trial: FrozenTrial) -> str:
    """`trial 3 COMPLETE accuracy=0.52  c1:CC c2:CM c3:CCCC  (14 s)`, with the reason of a failure."""
    if is_copy(trial):
        return f"trial {trial.number} drew trial {trial.user_attrs['copy_of']}'s design: not counted, drawing again"
    row = _row(trial)
    names = [o.name for o in study_objectives(study)]
    values = ""
    if row.values and row.state in ("COMPLETE", "PRUNED"):
        mark = f" {PRUNED_MARK}" if row.state == "PRUNED" else ""
        values = " ".join(f"{n}={v:.4g}{mark}" for n, v in zip(names, row.values, strict=False))
    seconds = f"({'simulated ' if row.simulated else ''}{_duration(row.seconds)})" if row.seconds is not None else ""
    parts = [f"trial {row.number} {row.state}", values, f" {design_text(row)} ", seconds]
    line = " ".join(p for p in parts if p)
    return f"{line}  ({row.note})" if row.note else line


def progress_text(progress: StudyProgress) -> str:
    """`[3/8, ETA 1:20 min]`: designs measured of the most the study measures, and the time left."""
    eta = f", ETA {_duration(progress.eta_seconds)}" if progress.eta_seconds is not None else ""
    return f"[{progress.done}/{progress.total}{eta}]"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s" if round(seconds, 1) < 10 else f"{seconds:.0f} s"  # 9.97: `10 s`, not `10.0 s`
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d} min" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d} h"


# -- the trials table ------------------------------------------------------------------------


def trials_csv(summary: StudySummary) -> str:
    """Every trial as CSV (like `optuna trials -f table`): one column per objective and per parameter."""
    param_names = list(dict.fromkeys(name for row in summary.rows for name in row.params))
    header = [
        "trial",
        "state",
        *[o.name for o in summary.objectives],
        "msa",
        "layout",
        *param_names,
        "step",
        "seconds",
        "note",
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in summary.rows:
        values = list(row.values) if row.values else [""] * len(summary.objectives)
        writer.writerow(
            [
                row.number,
                row.state,
                *values,
                "" if row.n_msa is None else row.n_msa,
                row.layout or "",
                *[row.params.get(name, "") for name in param_names],
                row.step or "",
                "" if row.seconds is None else f"{row.seconds:.1f}",
                row.note,
            ]
        )
    return out.getvalue()


# -- figures --------------------------------------------------------------------------------


def make_figures(study: optuna.Study, summary: StudySummary) -> dict[str, Any]:
    """name -> matplotlib Figure; a plot that does not apply (too few trials) is left out.

    Optuna draws through pyplot; its figures are closed in pyplot before returning, so the caller
    gets plain Figure objects and pyplot's list of open figures (global state) is left as it was.
    """
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
    """Where each trial put its MSAs (a cell per stage: how many), under the lead objective.

    The point of a build-up search: which stage each added MSA went to, and what it did to the
    objective. Pruned trials are drawn (their last reported value, crossed, and a hatched column).
    Trials are placed side by side in the order of their numbers.
    """
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


# -- Markdown -------------------------------------------------------------------------------


def markdown(summary: StudySummary, figure_files: dict[str, str], best_files: dict[int, str]) -> str:
    """report.md of a study: the best designs with their specs, the plots, and a table of every trial."""
    objs = ", ".join(f"{o.name} ({o.direction})" for o in summary.objectives)
    total = sum(r.seconds or 0.0 for r in summary.rows)
    lines = [
        f"# Search report: {summary.name}",
        "",
        f"- strategy: {summary.strategy}",
        f"- objectives: {objs}",
        f"- trials: {len(summary.rows)} ({summary.count('COMPLETE')} complete, {summary.count('PRUNED')} pruned, "
        f"{summary.count('FAIL')} failed, {summary.count('RUNNING')} running, {summary.count('WAITING')} waiting), "
        f"{_duration(total)} of {'simulated ' if any(r.simulated for r in summary.rows) else ''}trial time"
        + (f"; {_copies(summary.copies)} drawn again (not counted)" if summary.copies else ""),
    ]
    if summary.command:
        lines += [f"- reproduce: `{summary.command}`"]
    lines += ["", "## Best designs" if len(summary.objectives) == 1 else "## Pareto front", ""]
    if not summary.best:
        lines += ["No trial has completed yet.", ""]
    for row in summary.best:
        values = ", ".join(f"{o.name} = {_fmt(v)}" for o, v in zip(summary.objectives, row.values or (), strict=False))
        lines += [f"### Trial {row.number} ({row.n_msa} MSA): {values}", ""]
        if row.layout:
            lines += [f"Layout: `{row.layout}`", ""]
        if row.number in best_files:
            lines += [f"Spec: `{best_files[row.number]}`", ""]
        if row.spec:
            lines += ["```arch", row.spec.rstrip(), "```", ""]
    if figure_files:
        lines += ["## Plots", ""]
        for name, path in figure_files.items():
            lines += [f"![{name}]({path})", ""]
            if name == "importance":
                lines += [
                    f"Parameter importances (fANOVA) from {summary.count('COMPLETE')} complete trials: "
                    "a rough guide until a study has a few dozen.",
                    "",
                ]
    complete = summary.count("COMPLETE")
    if complete and "importance" not in figure_files and complete < MIN_TRIALS_FOR_IMPORTANCE:
        lines += [
            f"No parameter-importance plot: {complete} complete trial{'s' if complete != 1 else ''}; "
            f"it needs {MIN_TRIALS_FOR_IMPORTANCE}.",
            "",
        ]
    lines += ["## All trials", ""]
    header = ["trial", "state", "MSA", "design", *[o.name for o in summary.objectives], "time", "note"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary.rows:
        mark = f" {PRUNED_MARK}" if row.state == "PRUNED" else ""
        shown = [_fmt(v) + mark for v in row.values] if row.values else ["" for _ in summary.objectives]
        note = " ".join(p for p in (row.step or "", row.note) if p).replace("|", "/").replace("\n", " ")
        cells = [
            str(row.number),
            row.state,
            "" if row.n_msa is None else str(row.n_msa),
            f"`{design_text(row)}`" if design_text(row) else "",
            *shown,
            "" if row.seconds is None else _duration(row.seconds),
            note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if any(r.state == "PRUNED" and r.values for r in summary.rows):
        lines += ["", f"{PRUNED_MARK} pruned: the last value the trial reported before it was stopped."]
    lines += ["", "All trials as CSV: `trials.csv` (also `archdsl report STUDY --csv`)."]
    return "\n".join(lines) + "\n"


def _copies(n: int) -> str:
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def _fmt(value: float) -> str:
    if abs(value) >= 1e5:
        return f"{value:.4g}"
    return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def summary_text(summary: StudySummary) -> str:
    """A few lines for the terminal: the trial counts and the best designs."""
    lines = [
        f"study {summary.name}: {len(summary.rows)} trials ({summary.count('COMPLETE')} complete, "
        f"{summary.count('PRUNED')} pruned, {summary.count('FAIL')} failed"
        # trials other workers are measuring (or will): the rows count them, so the parts add up
        + "".join(f", {summary.count(s)} {s.lower()}" for s in ("RUNNING", "WAITING") if summary.count(s))
        + ")"
        + (f"; {_copies(summary.copies)} drawn again" if summary.copies else "")
    ]
    for row in summary.best:
        values = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(summary.objectives, row.values or (), strict=False))
        lines.append(f"  best: trial {row.number} ({row.n_msa} MSA) {values}  {design_text(row)}")
    return "\n".join(lines)


# -- files ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportPaths:
    """What `write_report` wrote, and the terminal summary of the study."""

    report: Path  # report/report.md
    figures: dict[str, Path]  # plot name -> report/<name>.png
    best: dict[int, Path]  # trial number -> best/<rank>-trial<number>-<id>.arch
    summary_text: str
    csv: Path | None = None  # report/trials.csv


def write_report(study: optuna.Study, study_dir: Path) -> ReportPaths:
    """Write report/report.md, its PNGs, report/trials.csv and best/*.arch for `study` under `study_dir`."""
    summary = summarize_study(study)
    report_dir = ensure_dir(study_dir / "report")
    best_dir = ensure_dir(study_dir / "best")
    for old in best_dir.glob("*.arch"):  # the front can shrink: keep only today's winners
        old.unlink()
    best: dict[int, Path] = {}
    for rank, row in enumerate(summary.best, start=1):
        if row.spec:
            # The short id comes from the storage: it must not choose where the file goes.
            name = f"{rank}-trial{row.number}-{path_part(str(row.short_id))}.arch"
            best[row.number] = write_text(best_dir / name, row.spec)
    for old in report_dir.glob("*.png"):  # a plot that no longer applies must not linger
        old.unlink()
    figures = {
        name: save_figure(fig, report_dir / f"{name}.png", dpi=100, bbox_inches="tight")  # legends sit outside
        for name, fig in make_figures(study, summary).items()
    }
    table = write_text(report_dir / "trials.csv", trials_csv(summary))
    text = markdown(
        summary,
        {name: path.name for name, path in figures.items()},
        {n: str(Path("..") / "best" / p.name) for n, p in best.items()},
    )
    report = write_text(report_dir / "report.md", text)
    return ReportPaths(report=report, figures=figures, best=best, summary_text=summary_text(summary), csv=table)
