"""The test set's figures of the chosen designs, opened once, at the end of a search.

A search chooses on validation images only. Each trial that completes scores each of its seeds' models
once on the test split as it trains them (a replayed trial reads its table runs' test figures) and seals
the figures on the study (`record.seal_test`), where nothing that chooses reads them. When the search has
ended (the worker that finds no other trial of the study running or waiting: the last one out), the
report's best designs and the designs tied with them within the noise have their seals opened
(`record.open_test`): their test figures on every seed they were measured on, stored on the study
(`test:<trial>`) and labelled as not used for selection. No design is trained again; a design that has its
figures is not opened again (a resumed study opens only a new winner's).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from archdsl.search._study_summary import TrialRow, summarize_study
from archdsl.search.record import HeldOutFigures, digest_of, open_test, search_ended, trials


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
    return {
        row.number: open_test(study, row.number, [t for t in found if row.digest and digest_of(t) == row.digest])
        for row in rows
    }
