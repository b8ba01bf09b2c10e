"""A study on the terminal: a line per finished trial, the study's progress, and a short summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial

from archdsl.search.report._summary import (
    PRUNED_MARK,
    StudySummary,
    copies_text,
    design_text,
    duration_text,
    held_out_text,
    objective_values_text,
    study_objectives,
    ties_text,
    trial_row,
)
from archdsl.search.runner import StudyProgress
from archdsl.search.studies.record import COPY_ATTR, is_copy

if TYPE_CHECKING:
    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.walk.buildup import Step


def trial_line(study: optuna.Study, trial: FrozenTrial) -> str:
    """`trial 3 COMPLETE accuracy=0.52  c1:CC c2:CM c3:CCCC  (14 s)`, with the reason of a failure."""
    if is_copy(trial):
        return f"trial {trial.number} drew trial {trial.user_attrs[COPY_ATTR]}'s design: not counted, drawing again"
    row = trial_row(trial)
    names = [o.name for o in study_objectives(study)]
    values = ""
    if row.values and row.state in ("COMPLETE", "PRUNED"):
        mark = f" {PRUNED_MARK}" if row.state == "PRUNED" else ""
        values = " ".join(f"{n}={v:.4g}{mark}" for n, v in zip(names, row.values, strict=False))
    simulated = "simulated " if row.simulated else ""
    seconds = f"({simulated}{duration_text(row.seconds)})" if row.seconds is not None else ""
    parts = [f"trial {row.number} {row.state}", values, f" {design_text(row)} ", seconds]
    line = " ".join(p for p in parts if p)
    return f"{line}  ({row.note})" if row.note else line


def progress_text(progress: StudyProgress) -> str:
    """`[3/8, ETA 1:20 min]`: designs measured of the most the study measures, and the time left."""
    eta = f", ETA {duration_text(progress.eta_seconds)}" if progress.eta_seconds is not None else ""
    return f"[{progress.done}/{progress.total}{eta}]"


def summary_text(summary: StudySummary) -> str:
    """A few lines for the terminal: the trial counts and the best designs."""
    lines = [
        f"study {summary.name}: {len(summary.rows)} trials ({summary.count('COMPLETE')} complete, "
        f"{summary.count('PRUNED')} pruned, {summary.count('FAIL')} failed"
        # trials other workers are measuring (or will): the rows count them, so the parts add up
        + "".join(f", {summary.count(s)} {s.lower()}" for s in ("RUNNING", "WAITING") if summary.count(s))
        + ")"
        + (f"; {copies_text(summary.copies)} drawn again" if summary.copies else "")
    ]
    for row in summary.best:
        values = objective_values_text(summary, row)
        lines.append(f"  best: trial {row.number} ({row.n_msa} MSA) {values}  {design_text(row)}")
        ties = ties_text(summary)
        if ties:
            lines.append(f"    {ties}")
        lines.append(f"    {held_out_text(summary.held_out.get(row.number))}")
    return "\n".join(lines)


def step_text(step: Step, budgets: tuple[Budget, ...], train_images: int | None = None) -> str:
    """A build-up verdict on one line: its step, value and verdict, and where the walk raises budgets the budget
    it settled at, with a word where it was still moving at the top of the ladder."""
    verdict = "kept" if step.accepted else "rejected"
    value = step.state.lower() if step.value is None else f"{step.value:.4g}"
    line = f"{step.label:<16} {value:>8}  {verdict}"
    if len(budgets) > 1:
        line += f" at {budgets[step.rung].text(train_images)}"
        if step.moving:
            line += " (still moving at the last budget: train longer to be sure)"
    return line
