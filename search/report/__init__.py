"""What a study found: its summary read back from the storage, the final test of its best designs, and the
report's renderings (terminal lines, report.md, plots, trials.csv; `write` puts them in files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; imported on first use
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

__getattr__, __dir__, __all__ = lazy_exports(__name__)
