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

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; imported on first use
    from archdsl.search._report_csv import trials_csv as trials_csv
    from archdsl.search._report_lines import progress_text as progress_text
    from archdsl.search._report_lines import trial_line as trial_line
    from archdsl.search._study_summary import summarize_study as summarize_study
    from archdsl.search.journal_check import JournalRepair as JournalRepair
    from archdsl.search.journal_check import repair_journal as repair_journal
    from archdsl.search.measures import Fidelity as Fidelity
    from archdsl.search.objectives import OBJECTIVES as OBJECTIVES
    from archdsl.search.record import NOT_USED as NOT_USED
    from archdsl.search.record import is_copy as is_copy
    from archdsl.search.report import ReportPaths as ReportPaths
    from archdsl.search.report import write_report as write_report
    from archdsl.search.runner import study_progress as study_progress
    from archdsl.search.runner import target_trials as target_trials
    from archdsl.search.saved_study import load_saved_study as load_saved_study
    from archdsl.search.saved_study import report_study as report_study
    from archdsl.search.session import SearchPlan as SearchPlan
    from archdsl.search.session import SearchResult as SearchResult
    from archdsl.search.session import describe_space as describe_space
    from archdsl.search.session import plan_search as plan_search
    from archdsl.search.session import plan_space as plan_space
    from archdsl.search.session import run_planned as run_planned
    from archdsl.search.session import search as search
    from archdsl.search.settings import GREY_BASE as GREY_BASE
    from archdsl.search.settings import PAPER_BASE as PAPER_BASE
    from archdsl.search.settings import SMALL_BASE as SMALL_BASE
    from archdsl.search.settings import SearchSettings as SearchSettings
    from archdsl.search.storage import JOURNAL_SCHEME as JOURNAL_SCHEME
    from archdsl.search.storage import journal_path as journal_path
    from archdsl.search.storage import proxy_answering as proxy_answering
    from archdsl.search.storage_proxy import DEFAULT_HOST as DEFAULT_PROXY_HOST  # noqa: F401 (exported as another name)
    from archdsl.search.storage_proxy import DEFAULT_PORT as DEFAULT_PROXY_PORT  # noqa: F401 (exported as another name)
    from archdsl.search.storage_proxy import DEFAULT_THREADS as DEFAULT_PROXY_THREADS  # noqa: F401 (exported as another name)
    from archdsl.search.storage_proxy import RunningProxy as RunningProxy
    from archdsl.search.storage_proxy import start_proxy as start_proxy

__getattr__, __dir__, __all__ = lazy_exports(__name__, own=("PRUNERS", "STRATEGIES"))


class _CallablePackage(types.ModuleType):
    """`archdsl.search(...)` is `archdsl.search.search(...)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return __getattr__("search")(*args, **kwargs)  # the lazy export, as every other one


sys.modules[__name__].__class__ = _CallablePackage
