"""Search where the MSAs go (imported as `archdsl.search`).

Its modules and the path of one trial through them: docs/architecture.md ("The map", "Search").
The package is also the function: `archdsl.search(n_trials=4)` runs `session.search`. The exports
below are imported on first use, so that the command line can list STRATEGIES without importing Optuna.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from archdsl.exports import lazy_exports
from archdsl.search.settings import PRUNERS as PRUNERS  # light: the CLI lists them without importing Optuna
from archdsl.search.settings import STRATEGIES as STRATEGIES

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.search.fidelity.batch import BATCH_FROM_DATA as BATCH_FROM_DATA
    from archdsl.search.fidelity.measures import Fidelity as Fidelity
    from archdsl.search.objectives import OBJECTIVES as OBJECTIVES
    from archdsl.search.plan import SearchPlan as SearchPlan
    from archdsl.search.planning import SearchResult as SearchResult
    from archdsl.search.planning import describe_space as describe_space
    from archdsl.search.planning import dry_run_check as dry_run_check
    from archdsl.search.planning import estimate_time as estimate_time
    from archdsl.search.planning import plan_search as plan_search
    from archdsl.search.planning import plan_space as plan_space
    from archdsl.search.planning import run_planned as run_planned
    from archdsl.search.planning import search as search
    from archdsl.search.report import progress_text as progress_text
    from archdsl.search.report import step_text as step_text
    from archdsl.search.report import summarize_study as summarize_study
    from archdsl.search.report import trial_line as trial_line
    from archdsl.search.report import trials_csv as trials_csv
    from archdsl.search.report.saved import load_saved_study as load_saved_study
    from archdsl.search.report.saved import report_study as report_study
    from archdsl.search.report.write import ReportPaths as ReportPaths
    from archdsl.search.report.write import write_report as write_report
    from archdsl.search.runner import study_progress as study_progress
    from archdsl.search.runner import target_trials as target_trials
    from archdsl.search.settings import GREY_BASE as GREY_BASE
    from archdsl.search.settings import PAPER_BASE as PAPER_BASE
    from archdsl.search.settings import SMALL_BASE as SMALL_BASE
    from archdsl.search.settings import SearchSettings as SearchSettings
    from archdsl.search.studies import JournalRepair as JournalRepair
    from archdsl.search.studies import repair_journal as repair_journal
    from archdsl.search.studies.proxy import DEFAULT_HOST as DEFAULT_PROXY_HOST  # noqa: F401 (exported as another name)
    from archdsl.search.studies.proxy import DEFAULT_PORT as DEFAULT_PROXY_PORT  # noqa: F401 (exported as another name)
    from archdsl.search.studies.proxy import DEFAULT_THREADS as DEFAULT_PROXY_THREADS  # noqa: F401 (exported as another name)
    from archdsl.search.studies.proxy import RunningProxy as RunningProxy
    from archdsl.search.studies.proxy import start_proxy as start_proxy
    from archdsl.search.studies.record import NOT_USED as NOT_USED
    from archdsl.search.studies.record import is_copy as is_copy
    from archdsl.search.studies.storage import JOURNAL_SCHEME as JOURNAL_SCHEME
    from archdsl.search.studies.storage import journal_path as journal_path
    from archdsl.search.studies.storage import proxy_answering as proxy_answering

_EXPORTS = {
    "Fidelity": "archdsl.search.fidelity.measures",
    "OBJECTIVES": "archdsl.search.objectives",
    "SearchPlan": "archdsl.search.plan",
    "SearchResult": "archdsl.search.planning",
    "describe_space": "archdsl.search.planning",
    "dry_run_check": "archdsl.search.planning",
    "estimate_time": "archdsl.search.planning",
    "plan_search": "archdsl.search.planning",
    "plan_space": "archdsl.search.planning",
    "run_planned": "archdsl.search.planning",
    "search": "archdsl.search.planning",
    "progress_text": "archdsl.search.report",
    "step_text": "archdsl.search.report",
    "summarize_study": "archdsl.search.report",
    "trial_line": "archdsl.search.report",
    "trials_csv": "archdsl.search.report",
    "load_saved_study": "archdsl.search.report.saved",
    "report_study": "archdsl.search.report.saved",
    "ReportPaths": "archdsl.search.report.write",
    "write_report": "archdsl.search.report.write",
    "study_progress": "archdsl.search.runner",
    "target_trials": "archdsl.search.runner",
    "GREY_BASE": "archdsl.search.settings",
    "PAPER_BASE": "archdsl.search.settings",
    "SMALL_BASE": "archdsl.search.settings",
    "SearchSettings": "archdsl.search.settings",
    "JournalRepair": "archdsl.search.studies",
    "repair_journal": "archdsl.search.studies",
    "DEFAULT_PROXY_HOST": "archdsl.search.studies.proxy:DEFAULT_HOST",
    "DEFAULT_PROXY_PORT": "archdsl.search.studies.proxy:DEFAULT_PORT",
    "DEFAULT_PROXY_THREADS": "archdsl.search.studies.proxy:DEFAULT_THREADS",
    "RunningProxy": "archdsl.search.studies.proxy",
    "start_proxy": "archdsl.search.studies.proxy",
    "NOT_USED": "archdsl.search.studies.record",
    "BATCH_FROM_DATA": "archdsl.search.fidelity.batch",
    "is_copy": "archdsl.search.studies.record",
    "JOURNAL_SCHEME": "archdsl.search.studies.storage",
    "journal_path": "archdsl.search.studies.storage",
    "proxy_answering": "archdsl.search.studies.storage",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, own=("PRUNERS", "STRATEGIES"))


class _CallablePackage(types.ModuleType):
    """`archdsl.search(...)` is `archdsl.search.search(...)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return __getattr__("search")(*args, **kwargs)  # the lazy export, as every other one


sys.modules[__name__].__class__ = _CallablePackage
