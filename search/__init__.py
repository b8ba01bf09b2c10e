"""Search where the MSAs go (imported as `archdsl.search`).

- `space`: the build-up space of a base network (k MSAs per stage, heads, windows);
- `objectives`: what can be optimised, with its direction and cost;
- `strategies`: Optuna samplers and the paper's build-up walk;
- `trial`: one trial, measured in stages, deduplicated by design digest;
- `objective`: the one place that calls training, analysis and data;
- `storage`: journal file or RDB (PostgreSQL) storage, heartbeats, retries;
- `runner`: a whole search on one worker; `report`: what a study found;
- `session`: a whole study from its settings (`archdsl search`, and `archdsl.search(...)`).

The package is also the function: `archdsl.search(n_trials=4)` runs `session.search` (a package
and a function cannot share the name `archdsl.search` otherwise). The exports below are
imported on first use, so that the command line can list STRATEGIES without importing Optuna.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Kept here (not in `strategies`) so that the CLI can list them without importing Optuna.
STRATEGIES = ("buildup", "tpe", "nsga2", "grid", "random")

_EXPORTS = {
    "search": "archdsl.search.session",
    "SearchSettings": "archdsl.search.session",
    "SearchResult": "archdsl.search.session",
    "Fidelity": "archdsl.search.objective",
    "write_report": "archdsl.search.report",
    "summarize_study": "archdsl.search.report",
}

__all__ = ["STRATEGIES", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'archdsl.search' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


class _CallablePackage(types.ModuleType):
    """`archdsl.search(...)` is `archdsl.search.search(...)`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return __getattr__("search")(*args, **kwargs)  # the lazy export, as every other one


sys.modules[__name__].__class__ = _CallablePackage
