"""The test set's figures of the chosen designs, opened once, at the end of a search.

A search chooses on validation images only; each trial seals its test figures on the study (`record.seal_test`).
The last worker out opens the seals of the report's best designs and those tied with them, each at its budget
(`record.open_test`), labelled as not used for selection; no design is trained again (docs/search.md: "sealed
until the search ends").
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from archdsl.search.report._summary import TrialRow, summarize_study
from archdsl.search.studies.record import HeldOutFigures, design_key, open_test, search_ended, trials


def designs_to_test(study: optuna.Study) -> tuple[TrialRow, ...]:
    """The report's best designs and those tied with them, that have no test figures yet."""
    summary = summarize_study(study)
    chosen = {row.number: row for row in (*summary.best, *summary.ties)}
    return tuple(row for number, row in sorted(chosen.items()) if number not in summary.held_out)


def run_final_test(
    study: optuna.Study, *, on_start: Callable[[tuple[TrialRow, ...]], None] | None = None
) -> dict[int, HeldOutFigures]:
    """Open the sealed test figures of the designs `designs_to_test` names, once the search has ended, and store
    them on `study`; `on_start(rows)` before. Returns what it stored (trial number -> figures)."""
    if not search_ended(trials(study)):  # the last worker out runs the final test
        return {}
    rows = designs_to_test(study)
    if not rows:
        return {}
    if on_start is not None:
        on_start(rows)
    found = trials(study)
    # a design's trials at the row's budget: figures at two budgets are two designs' (record.design_key)
    return {
        row.number: open_test(study, row.number, [t for t in found if row.digest and design_key(t) == row.design_key])
        for row in rows
    }
