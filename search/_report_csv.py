"""Every trial of a study as CSV (`report/trials.csv`, `archdsl report --csv`)."""

from __future__ import annotations

import csv
import io

from archdsl.search._study_summary import StudySummary


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
