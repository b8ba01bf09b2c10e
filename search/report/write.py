"""What a study found, written to files under the study's folder: report/report.md, its plots,
report/trials.csv and the best designs' .arch files (the parts: `_study_summary` and `_report_*`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import optuna

from archdsl.files import ensure_dir, held_lock, is_in_progress, save_figure, write_text
from archdsl.search.report._csv import trials_csv
from archdsl.search.report._figures import make_figures
from archdsl.search.report._lines import summary_text
from archdsl.search.report._markdown import markdown
from archdsl.search.report._summary import (
    StudySummary,
    TrialRow,
    held_out_text,
    objective_values_text,
    summarize_study,
)
from archdsl.search.studies.naming import path_part

__all__ = ["REPORT_LOCK", "ReportPaths", "write_report"]

# In the study's folder: held while a worker writes the report (archdsl.files.held_lock), kept, empty.
REPORT_LOCK = ".report.lock"


@dataclass(frozen=True)
class ReportPaths:
    """What `write_report` wrote, and the terminal summary of the study."""

    report: Path  # report/report.md
    figures: dict[str, Path]  # plot name -> report/<name>.png
    best: dict[int, Path]  # trial number -> best/<rank>-trial<number>-<id>.arch
    summary_text: str
    csv: Path | None = None  # report/trials.csv


def write_report(study: optuna.Study, study_dir: Path) -> ReportPaths:
    """Write report/report.md, its PNGs, report/trials.csv and best/*.arch for `study` under `study_dir`.
    Workers that finish together take turns (`REPORT_LOCK`), each reading the study in its turn: the files
    are the last writer's whole report."""
    with held_lock(study_dir / REPORT_LOCK, within=study_dir):
        summary = summarize_study(study)  # read in its turn: one that read before would report an older study
        report_dir = ensure_dir(study_dir / "report", within=study_dir)  # no link: nothing outside is removed
        best_dir = ensure_dir(study_dir / "best", within=study_dir)
        _remove(best_dir.glob("*.arch"))  # the front can shrink: keep only today's winners
        best: dict[int, Path] = {}
        for rank, row in enumerate(summary.best, start=1):
            if row.spec:
                # The short id comes from the storage: it must not choose where the file goes.
                name = f"{rank}-trial{row.number}-{path_part(str(row.short_id))}.arch"
                best[row.number] = write_text(best_dir / name, _best_header(summary, row) + row.spec, within=study_dir)
        _remove(report_dir.glob("*.png"))  # a plot that no longer applies must not linger
        figures = {
            name: save_figure(
                fig, report_dir / f"{name}.png", within=study_dir, dpi=100, bbox_inches="tight"
            )  # legends sit outside
            for name, fig in make_figures(study, summary).items()
        }
        table = write_text(report_dir / "trials.csv", trials_csv(summary), within=study_dir)
        # what a retrain command names: absolute, so that it runs from any folder (--out may be relative)
        specs = {n: str(p.absolute()) for n, p in best.items()}
        text = markdown(
            summary,
            {name: path.name for name, path in figures.items()},
            {n: str(Path("..") / "best" / p.name) for n, p in best.items()},
            specs,
        )
        report = write_text(report_dir / "report.md", text, within=study_dir)
    terminal = summary_text(summary, specs)
    return ReportPaths(report=report, figures=figures, best=best, summary_text=terminal, csv=table)


def _best_header(summary: StudySummary, row: TrialRow) -> str:
    """The comment that opens a best design's .arch file: what chose it (validation) and its test figures."""
    return (
        f"# trial {row.number} of study {summary.name}, chosen on validation images: "
        f"{objective_values_text(summary, row)}\n"
        f"# {held_out_text(summary.held_out.get(row.number))}\n"
    )


def _remove(paths: Iterable[Path]) -> None:
    """Remove the report's own old files; a write in progress (another process's) is left alone."""
    for path in paths:
        if not is_in_progress(path):
            path.unlink(missing_ok=True)  # a writer of an older archdsl, unlocked, may have taken it
