"""A study on the terminal: a line per finished trial, the study's progress, and a short summary."""

from __future__ import annotations

from collections.abc import Mapping

import optuna
from optuna.trial import FrozenTrial

from archdsl.search.objectives import OBJECTIVES
from archdsl.search.report._checklist import checklist_line
from archdsl.search.report._numbers import mean_text
from archdsl.search.report._retrain import retrain_text
from archdsl.search.report._settle import choice_lines, failed_seed_lines, settle_lines
from archdsl.search.report._summary import (
    PRUNED_MARK,
    StudySummary,
    TrialRow,
    copies_text,
    design_text,
    duration_text,
    held_out_text,
    moving_steps,
    objective_values_text,
    step_layout,
    step_value_text,
    study_objectives,
    ties_text,
    trial_row,
    verdict_text,
)
from archdsl.search.runner import StudyProgress
from archdsl.search.seed_stats import estimate
from archdsl.search.studies.record import COPY_ATTR, RecordedStep, is_copy, read_protocol, rung_of


def trial_line(study: optuna.Study, trial: FrozenTrial) -> str:
    """`trial 3 COMPLETE accuracy=0.52 ± 0.11  c1:CC c2:CM c3:CCCC  (14 s)`, with the budget where the walk raised it
    (`... c3:CCCC at 2 epochs on 86 images (100 %)  (14 s)`) and the reason of a failure."""
    if is_copy(trial):
        return f"trial {trial.number} drew trial {trial.user_attrs[COPY_ATTR]}'s design: not counted, drawing again"
    row = trial_row(trial)
    names = [o.name for o in study_objectives(study)]
    values = ""
    if row.values and row.state in ("COMPLETE", "PRUNED"):
        mark = f" {PRUNED_MARK}" if row.state == "PRUNED" else ""
        values = " ".join(f"{n}={_value_text(n, v, row)}{mark}" for n, v in zip(names, row.values, strict=False))
    simulated = "simulated " if row.simulated else ""
    seconds = f"({simulated}{duration_text(row.seconds)})" if row.seconds is not None else ""
    parts = [f"trial {row.number} {row.state}", values, f" {design_text(row)}{_raised(study, trial)} ", seconds]
    line = " ".join(p for p in parts if p)
    return f"{line}  ({row.note})" if row.note else line


def _value_text(name: str, value: float, row: TrialRow) -> str:
    """A trial's value: its accuracy over its own paired seeds as the summary writes a figure (`0.82 ± 0.20`,
    report/_numbers.py), any other value (or a pruned trial's last) at 4 significant digits."""
    if name == "accuracy" and row.state == "COMPLETE" and len(row.own_seeds) > 1:
        return mean_text(estimate(row.own_seeds, OBJECTIVES["accuracy"].bounds), interval=True)
    return f"{value:.4g}"


def _raised(study: optuna.Study, trial: FrozenTrial) -> str:
    """` at 2 epochs on 86 images (100 %)` for a trial at a raised budget (the study's protocol says which)."""
    rung = rung_of(trial)
    if rung == 0:
        return ""
    protocol = read_protocol(study)
    return f" at {protocol.budget_text(rung) if protocol is not None else f'budget rung {rung}'}"


def progress_text(progress: StudyProgress) -> str:
    """`[3/8, ETA 1:20 min]`: designs measured of the most the study measures, and the time left (a range where
    the study may raise budgets or settle: `[2/5, ETA 40 s to 2:30 min]`)."""
    if progress.eta_seconds is None:
        return f"[{progress.done}/{progress.total}]"
    low = duration_text(progress.eta_seconds)
    high = duration_text(progress.eta_high) if progress.eta_high is not None else low
    return f"[{progress.done}/{progress.total}, ETA {low if low == high else f'{low} to {high}'}]"


def summary_text(summary: StudySummary, spec_files: Mapping[int, str] | None = None) -> str:
    """A few lines for the terminal: the build-up walk's verdicts, the trial counts, the best designs (with the
    command that retrains each as its trial trained, where `spec_files` names its .arch file by trial number), the
    designs still moving at the top of the ladder, and the checklist's line."""
    lines = [f"build-up: {step_text(summary, step)}" for step in summary.steps]
    lines += [*choice_lines(summary), *failed_seed_lines(summary), *settle_lines(summary)]
    lines.append(
        f"study {summary.name}: {len(summary.rows)} trials ({summary.count('COMPLETE')} complete, "
        f"{summary.count('PRUNED')} pruned, {summary.count('FAIL')} failed"
        # trials other workers are measuring (or will): the rows count them, so the parts add up
        + "".join(f", {summary.count(s)} {s.lower()}" for s in ("RUNNING", "WAITING") if summary.count(s))
        + ")"
        + (f"; {copies_text(summary.copies)} drawn again" if summary.copies else "")
    )
    for row in summary.best:
        values = objective_values_text(summary, row)
        budget = f"  at {summary.budget_text(row.rung)}" if summary.laddered else ""
        lines.append(f"  best: trial {row.number} ({row.n_msa} MSA) {values}  {design_text(row)}{budget}")
        ties = ties_text(summary)
        if ties:
            lines.append(f"    {ties}")
        lines.append(f"    {held_out_text(summary.held_out.get(row.number))}")
        command = retrain_text(summary, row, (spec_files or {}).get(row.number))
        lines += [f"    retrain: {command}"] if command else []
    lines += [f"  {_moving_text(summary, step)}" for step in moving_steps(summary)]
    checklist = checklist_line(summary)
    return "\n".join([*lines, *([f"  {checklist}"] if checklist else [])])


def step_text(summary: StudySummary, step: RecordedStep) -> str:
    """A build-up verdict on one line: its step, design, value and verdict, and where the walk climbs a ladder of
    budgets the budget it settled at, marked where it was still moving at the top of the ladder."""
    layout = f"{found}  " if (found := step_layout(summary, step)) else ""
    line = f"{step.step:<16} {layout}{step_value_text(summary, step, interval=False):>14}  {verdict_text(step)}"
    if summary.laddered:
        line += f" at {summary.budget_text(step.rung)}" + (" (still moving)" if step.moving else "")
    return line


def _moving_text(summary: StudySummary, step: RecordedStep) -> str:
    design = f" ({found})" if (found := step_layout(summary, step)) else ""
    return (
        f"train longer to be sure: {step.step}{design} was still moving at {summary.budget_text(step.rung)}, the "
        "last budget (its standing changed, or its gap closed beyond the noise, at the last step up)"
    )
