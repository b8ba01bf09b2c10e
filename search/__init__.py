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
- `final_test`: the test set read once, when the search has ended, for the chosen designs (their figures,
  `held_out`, stored on the study, labelled as not used for selection);
- `session`: a whole study from its settings, read once into one `SearchPlan` that the runner and every
  trial read (`archdsl search`, and `archdsl.search(...)`);
- `distributed`: a torchrun group as one worker (rank 0 samples, every rank trains).

The package is also the function: `archdsl.search(n_trials=4)` runs `session.search` (a package
and a function cannot share the name `archdsl.search` otherwise). The exports below are
imported on first use, so that the command line can list STRATEGIES without importing Optuna.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from archdsl.exports import lazy_exports

# Kept here (not in `strategies`) so that the CLI can list them without importing Optuna.
STRATEGIES = ("buildup", "tpe", "nsga2", "grid", "random")
PRUNERS = ("median", "halving", "hyperband", "none")  # --pruner: Optuna's, on the per-epoch validation accuracy

_EXPORTS = {
    "search": "archdsl.search.session",
    "SearchSettings": "archdsl.search.session",
    "SearchResult": "archdsl.search.session",
    "Fidelity": "archdsl.search.measures",
    "SearchPlan": "archdsl.search.session",
    "plan_space": "archdsl.search.session",
    "plan_search": "archdsl.search.session",
    "run_planned": "archdsl.search.session",
    "describe_space": "archdsl.search.session",
    "SMALL_BASE": "archdsl.search.session",
    "GREY_BASE": "archdsl.search.session",
    "PAPER_BASE": "archdsl.search.session",
    "OBJECTIVES": "archdsl.search.objectives",
    "write_report": "archdsl.search.report",
    "summarize_study": "archdsl.search._study_summary",
    "trial_line": "archdsl.search._report_lines",
    "progress_text": "archdsl.search._report_lines",
    "study_progress": "archdsl.search.runner",
    "target_trials": "archdsl.search.runner",
    "journal_path": "archdsl.search.storage",
    "JOURNAL_SCHEME": "archdsl.search.storage",
    "proxy_answering": "archdsl.search.storage",
    "is_copy": "archdsl.search.record",
    # what `archdsl report` and `archdsl study` do
    "load_saved_study": "archdsl.search.saved_study",
    "report_study": "archdsl.search.saved_study",
    "ReportPaths": "archdsl.search.report",
    "trials_csv": "archdsl.search._report_csv",
    "NOT_USED": "archdsl.search.held_out",
    "repair_journal": "archdsl.search.journal_check",
    "JournalRepair": "archdsl.search.journal_check",
    "start_proxy": "archdsl.search.storage_proxy",
    "RunningProxy": "archdsl.search.storage_proxy",
    "DEFAULT_PROXY_HOST": "archdsl.search.storage_proxy:DEFAULT_HOST",
    "DEFAULT_PROXY_PORT": "archdsl.search.storage_proxy:DEFAULT_PORT",
    "DEFAULT_PROXY_THREADS": "archdsl.search.storage_proxy:DEFAULT_THREADS",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, own=("PRUNERS", "STRATEGIES"))


class _CallablePackage(types.ModuleType):
    """`archdsl.search(...)` is `archdsl.search.search(...)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return __getattr__("search")(*args, **kwargs)  # the lazy export, as every other one


sys.modules[__name__].__class__ = _CallablePackage
