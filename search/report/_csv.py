"""Every trial of a study as CSV (`report/trials.csv`, `archdsl report --csv`): column names in plain snake_case
(they load as names in pandas and R), every figure at FIGURE_DIGITS significant digits."""

from __future__ import annotations

import csv
import io

from archdsl.search.report._summary import StudySummary, TrialRow
from archdsl.search.seed_stats import mean_and_stderr
from archdsl.search.studies.record import SEED_VALUES_KEY, STDERR_KEY

INTERVAL_COLUMNS = ("accuracy_ci95_low", "accuracy_ci95_high")  # the accuracy's 95 % t-interval (seed_stats)
CHOSEN_COLUMN = "chosen"  # `best`, or `tied` with it within the noise (seed_stats.tied_with)
# The chosen designs' test figures, measured after the search: not used for selection (docs: trials.csv's columns)
TEST_COLUMNS = ("test_accuracy", "test_accuracy_seeds")
FIGURE_DIGITS = 6  # significant digits of every figure: an accuracy on up to 100,000 images is exact at 6


def trials_csv(summary: StudySummary) -> str:
    """Every trial as CSV (like `optuna trials -f table`): one column per objective and per parameter, and
    with --seeds N > 1 each paired seed's accuracy (`;`-separated), the standard error of their mean and its
    95 % t-interval, which trials are the best and tied with it; once the search has ended, the chosen
    designs' test figures (`test_accuracy`, `test_accuracy_seeds`: measured after the search, not used for
    selection); where the build-up walk climbs a ladder of budgets, the budget each trial trained at."""
    param_names = list(dict.fromkeys(name for row in summary.rows for name in row.params))
    paired = [key for key in (SEED_VALUES_KEY, STDERR_KEY) if any(key in row.metrics for row in summary.rows)]
    intervals = INTERVAL_COLUMNS if paired and "accuracy" in {o.name for o in summary.objectives} else ()
    chosen = (CHOSEN_COLUMN,) if summary.ties_apply and len(summary.best[0].seed_values) > 1 else ()
    tests = TEST_COLUMNS if summary.held_out else ()
    header = [
        "trial",
        "state",
        *[o.name for o in summary.objectives],
        *paired,
        *intervals,
        *chosen,
        *tests,
        "msa",
        "layout",
        *param_names,
        "step",
        *(("budget",) if summary.laddered else ()),
        "seconds",
        "note",
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in summary.rows:
        values = [_cell(v) for v in row.values] if row.values else [""] * len(summary.objectives)
        writer.writerow(
            [
                row.number,
                row.state,
                *values,
                *[_cell(row.metrics.get(key)) for key in paired],
                *(_interval_cells(summary, row) if intervals else ()),
                *((_chosen(summary, row),) if chosen else ()),
                *(_test_cells(summary, row) if tests else ()),
                "" if row.n_msa is None else row.n_msa,
                row.layout or "",
                *[row.params.get(name, "") for name in param_names],
                row.step or "",
                *((summary.budget_text(row.rung),) if summary.laddered else ()),
                "" if row.seconds is None else f"{row.seconds:.1f}",
                row.note,
            ]
        )
    return out.getvalue()


def _interval_cells(summary: StudySummary, row: TrialRow) -> tuple[str, str]:
    seeds = summary.accuracy_estimate(row) if row.state == "COMPLETE" else None
    if seeds is None or seeds.low is None or seeds.high is None:
        return "", ""
    return _cell(seeds.low), _cell(seeds.high)


def _chosen(summary: StudySummary, row: TrialRow) -> str:
    if row.number in {r.number for r in summary.best}:
        return "best"
    return "tied" if row.number in {r.number for r in summary.ties} else ""


def _test_cells(summary: StudySummary, row: TrialRow) -> tuple[str, str]:
    figures = summary.held_out.get(row.number)
    if figures is None:
        return "", ""
    if not figures.accuracy:
        return figures.note, ""
    return _cell(mean_and_stderr(tuple(figures.accuracy))[0]), _cell(figures.accuracy)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # a count (params, FLOPs) in full, not at 6 digits
    return f"{value:.{FIGURE_DIGITS}g}" if isinstance(value, float) else str(value)
