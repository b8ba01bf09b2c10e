"""Every trial of a study as CSV (`report/trials.csv`, `archdsl report --csv`)."""

from __future__ import annotations

import csv
import io

from archdsl.search._study_summary import StudySummary
from archdsl.search.trial import SEED_VALUES_KEY, STDERR_KEY


def trials_csv(summary: StudySummary) -> str:
    """Every trial as CSV (like `optuna trials -f table`): one column per objective and per parameter, and
    with --seeds N > 1 each paired seed's accuracy (`;`-separated) and the standard error of their mean."""
    param_names = list(dict.fromkeys(name for row in summary.rows for name in row.params))
    paired = [key for key in (SEED_VALUES_KEY, STDERR_KEY) if any(key in row.metrics for row in summary.rows)]
    header = [
        "trial",
        "state",
        *[o.name for o in summary.objectives],
        *paired,
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
                *[_cell(row.metrics.get(key)) for key in paired],
                "" if row.n_msa is None else row.n_msa,
                row.layout or "",
                *[row.params.get(name, "") for name in param_names],
                row.step or "",
                "" if row.seconds is None else f"{row.seconds:.1f}",
                row.note,
            ]
        )
    return out.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return ""
    return ";".join(f"{v:.6g}" for v in value) if isinstance(value, list) else f"{value:.6g}"
