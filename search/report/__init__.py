"""What a study found: its summary read back from the storage, the final test of its best designs, and the
report's renderings (terminal lines, report.md, plots, trials.csv; `write` puts them in files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.search.report._csv import trials_csv as trials_csv
    from archdsl.search.report._lines import progress_text as progress_text
    from archdsl.search.report._lines import step_text as step_text
    from archdsl.search.report._lines import summary_text as summary_text
    from archdsl.search.report._lines import trial_line as trial_line
    from archdsl.search.report._summary import TrialRow as TrialRow
    from archdsl.search.report._summary import duration_text as duration_text
    from archdsl.search.report._summary import summarize_study as summarize_study
    from archdsl.search.report.final_test import run_final_test as run_final_test
    from archdsl.search.report.saved import load_saved_study as load_saved_study
    from archdsl.search.report.saved import report_study as report_study
    from archdsl.search.report.write import ReportPaths as ReportPaths
    from archdsl.search.report.write import write_report as write_report

_EXPORTS = {
    "trials_csv": "archdsl.search.report._csv",
    "progress_text": "archdsl.search.report._lines",
    "step_text": "archdsl.search.report._lines",
    "summary_text": "archdsl.search.report._lines",
    "trial_line": "archdsl.search.report._lines",
    "TrialRow": "archdsl.search.report._summary",
    "duration_text": "archdsl.search.report._summary",
    "summarize_study": "archdsl.search.report._summary",
    "run_final_test": "archdsl.search.report.final_test",
    "load_saved_study": "archdsl.search.report.saved",
    "report_study": "archdsl.search.report.saved",
    "ReportPaths": "archdsl.search.report.write",
    "write_report": "archdsl.search.report.write",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
