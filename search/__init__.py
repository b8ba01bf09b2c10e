"""Search where the MSAs go (imported as `archdsl.search`).

- `space`: the build-up space of a base network (k MSAs per stage, heads, windows);
- `objectives`: what can be optimised, with its direction and cost;
- `strategies`: Optuna samplers and the paper's build-up walk;
- `trial`: one trial, measured in stages, deduplicated by design digest;
- `record`: a trial's record in its study: every attr's name, the one scan of a study's trials, and the
  rules that tell which trials count, are copies, extra seeds or a design's first;
- `measures`: a design's measures, the one search module that builds, trains, analyses and loads
  data (the others import only archdsl's torch-free core and the run's set-up: tests/test_layering.py);
- `storage`: journal file, RDB (PostgreSQL) or gRPC proxy storage, heartbeats, retries;
- `storage_proxy`: Optuna's gRPC proxy in front of a storage (`start_proxy`: `archdsl study serve`);
- `replay`: trials answered from a fully measured table (`--fidelity table:PATH`), chosen on its
  validation values (its test values are for reporting only);
- `runner`: a whole search on one worker;
- `saved_study`: a study a search left behind, opened by name (`load_saved_study`) and
  reported (`report_study`: `archdsl report`);
- `journal_check`: damaged journal lines found, and repaired (`repair_journal`: `archdsl study repair`);
- `report`: what a study found (`_study_summary`), rendered by `_report_lines` (terminal),
  `_report_csv`, `_report_figures` and `_report_markdown`, and written (`write_report`);
  `seed_stats`: the arithmetic on paired seeds: a design's mean with its 95 % interval, the paired test
  of the walk and of the ties, and whether a measured table tells its designs apart;
- `final_test`: the chosen designs' test figures, which their trials sealed, opened once the search has ended
  (stored on the study, labelled as not used for selection);
- `settings`: a study's settings (`SearchSettings`, each field a flag of `archdsl search`), the default base
  and pruner they resolve to, and the command line that runs a study again (`reproduce_command`);
- `session`: a whole study from its settings, read once into one `SearchPlan` that the runner and every
  trial read, and run (`archdsl search`, and `archdsl.search(...)`);
- `distributed`: a torchrun group as one worker (rank 0 samples, every rank trains).

The package is also the function: `archdsl.search(n_trials=4)` runs `session.search` (a package
and a function cannot share the name `archdsl.search` otherwise). The exports below are
imported on first use, so that the command line can list STRATEGIES without importing Optuna.
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
