"""The test set, read once, at the end of a search: the chosen designs' final figures.

A search chooses on validation images only. When it has ended (the worker that finds no other trial of
the study running or waiting: the last one out), the report's best designs and the designs tied with
them within the noise are trained again exactly as their trials trained them (the same training images,
fidelity and paired seeds: `measures.held_out_accuracy`) and scored once on the test split. A replayed
study (`--fidelity table:...`) reads the test figures its table recorded for the same runs, or says the
table has none. The figures go on the study (`held_out`), never on a trial, so nothing that chooses
can read them; a design that has them is not measured again (a resumed study tests only a new winner).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import optuna

from archdsl.search import measures as measure
from archdsl.search._study_summary import TrialRow, summarize_study
from archdsl.search.held_out import NO_TABLE_FIGURES, HeldOutFigures, final_test_attr
from archdsl.search.record import TABLE_SEED_ATTR, search_ended, trial_numbered, trials
from archdsl.search.replay import TableDesign, TableRun, paired_runs

if TYPE_CHECKING:
    from archdsl.search.session import SearchPlan


def designs_to_test(study: optuna.Study) -> tuple[TrialRow, ...]:
    """The report's best designs and those tied with them, that have no test figures yet."""
    summary = summarize_study(study)
    chosen = {row.number: row for row in (*summary.best, *summary.ties)}
    return tuple(row for number, row in sorted(chosen.items()) if number not in summary.held_out)


def run_final_test(
    plan: SearchPlan, study: optuna.Study, *, on_start: Callable[[tuple[TrialRow, ...]], None] | None = None
) -> dict[int, HeldOutFigures]:
    """Measure the test figures of the designs `designs_to_test` names, once the search has ended, and store
    them on `study`; `on_start(rows)` before the first. Returns what it stored (trial number -> figures)."""
    if not search_ended(trials(study)):  # the last worker out runs the final test
        return {}
    rows = designs_to_test(study)
    if not rows:
        return {}
    if on_start is not None:
        on_start(rows)
    if plan.replay is not None:
        found = {row.number: _from_table(plan, study, row) for row in rows}
    else:
        found = _trained(plan, rows)
    for number, figures in found.items():
        study.set_user_attr(final_test_attr(number), figures.model_dump())
    return found


def _trained(plan: SearchPlan, rows: tuple[TrialRow, ...]) -> dict[int, HeldOutFigures]:
    """Each design trained again on its trial's paired seeds, each model scored once on the test split."""
    assert plan.data is not None, "a trained search has its data"
    s = plan.settings
    test_set = measure.load_test_split(plan.data, download=s.download)
    found = {}
    for row in rows:
        arch = plan.space.arch_from_params(row.params)  # the trial's design, as its trial built it
        seeds = [measure.seed_of(s.seed, index) for index in range(len(row.seed_values))]
        pairs = [
            measure.held_out_accuracy(
                arch, plan.data, test_set, plan.fidelity, device=s.device, seed=seed, progress=s.progress
            )
            for seed in seeds
        ]
        found[row.number] = HeldOutFigures(
            seeds=seeds, accuracy=[test for _, test in pairs], validation=[val for val, _ in pairs], source="trained"
        )
    return found


def _from_table(plan: SearchPlan, study: optuna.Study, row: TrialRow) -> HeldOutFigures:
    """The test figures the table recorded for the runs that answered the design's trial."""
    assert plan.replay is not None, "a replayed study has its table"
    design = plan.replay.design(plan.space.arch_from_params(row.params))
    trial = trial_numbered(study, row.number)
    runs = _trial_runs(design, trial.user_attrs.get(TABLE_SEED_ATTR), len(row.seed_values), plan.settings.seed)
    seeds = [run.seed for run in runs]
    values = [_table_test_accuracy(run, plan.fidelity.epochs) for run in runs]
    if not values or any(v is None for v in values):
        return HeldOutFigures(seeds=seeds, accuracy=[], source="table", note=NO_TABLE_FIGURES)
    return HeldOutFigures(seeds=seeds, accuracy=[v for v in values if v is not None], source="table")


def _trial_runs(design: TableDesign, drawn_seed: object, n_seeds: int, seed: int) -> list[TableRun]:
    """The table runs a replayed trial was answered with (`replay.Replaying.start`): seed index s is
    `replay.paired_runs`'s; a one-seed trial's run was drawn, and its seed recorded on the trial."""
    if n_seeds == 1 and drawn_seed is not None:
        return [run for run in design.runs if run.seed == drawn_seed][:1]
    return list(paired_runs(design, seed, range(n_seeds)))


def _table_test_accuracy(run: TableRun, epochs: int) -> float | None:
    """A run's test top-1 after `epochs` (its final one when they are all), where the table recorded one
    (a run-level `test_acc`, schema /2); None where it did not."""
    final = getattr(run, "test_acc", None)
    if final is None:
        return None
    if epochs < len(run.curve):
        return getattr(run.curve[epochs - 1], "test_acc", None)
    return float(final)
