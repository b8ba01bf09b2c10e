"""Every trial of a study as CSV (`report/trials.csv`, `archdsl report --csv`)."""

from __future__ import annotations

import csv
import io

from archdsl.search.report._summary import StudySummary, TrialRow
from archdsl.search.seed_stats import mean_and_stderr
from archdsl.search.studies.record import NOT_USED, SEED_VALUES_KEY, STDERR_KEY

INTERVAL_COLUMNS = ("accuracy_ci95_low", "accuracy_ci95_high")  # the accuracy's 95 % t-interval (seed_stats)
CHOSEN_COLUMN = "chosen"  # `best`, or `tied` with it within the noise (seed_stats.tied_with)
TEST_COLUMNS = (f"test_accuracy ({NOT_USED})", f"test_accuracy_seeds ({NOT_USED})")


def trials_csv(summary: StudySummary) -> str:
    """Every trial as CSV (like `optuna trials -f table`): one column per objective and per parameter, and
    with --seeds N > 1 each paired seed's accuracy (`;`-separated), the standard error of their mean and its
    95 % t-interval, which trials are the best and tied with it; once the search has ended, the chosen
    designs' test figures (measured after the search, not used for selection); where the build-up walk climbs a
    ladder of budgets, the budget each trial trained at."""
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
        values = list(row.values) if row.values else [""] * len(summary.objectives)
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
    return f"{seeds.low:.6g}", f"{seeds.high:.6g}"


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
    return f"{mean_and_stderr(tuple(figures.accuracy))[0]:.6g}", _cell(figures.accuracy)


def _cell(value: object) -> str:
    if value is None:
        return ""
    return ";".join(f"{v:.6g}" for v in value) if isinstance(value, list) else f"{value:.6g}"
