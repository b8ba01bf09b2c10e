"""How the next design is chosen: the strategies (`strategy.Strategy`, the seam each implements; `registry.REGISTRY`,
name -> strategy), the paper's build-up walk, one pure function (`buildup.walk`) that an Optuna sampler runs in a
study (`planned.PlannedSampler`, `buildup_strategy.BuildUp`), and Optuna's samplers and pruners for the other
strategies (`sampler_strategies`, `samplers`); docs/search.md, "Strategies"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.search.walk.buildup import Ask as Ask
    from archdsl.search.walk.buildup import Rules as Rules
    from archdsl.search.walk.buildup import Step as Step
    from archdsl.search.walk.buildup import Walk as Walk
    from archdsl.search.walk.buildup import longest_walk as longest_walk
    from archdsl.search.walk.buildup import walk as walk
    from archdsl.search.walk.planned import PlannedSampler as PlannedSampler
    from archdsl.search.walk.registry import REGISTRY as REGISTRY
    from archdsl.search.walk.registry import strategy_named as strategy_named
    from archdsl.search.walk.samplers import make_pruner as make_pruner
    from archdsl.search.walk.strategy import Strategy as Strategy

_EXPORTS = {
    "Ask": "archdsl.search.walk.buildup",
    "Rules": "archdsl.search.walk.buildup",
    "Step": "archdsl.search.walk.buildup",
    "Walk": "archdsl.search.walk.buildup",
    "longest_walk": "archdsl.search.walk.buildup",
    "walk": "archdsl.search.walk.buildup",
    "PlannedSampler": "archdsl.search.walk.planned",
    "REGISTRY": "archdsl.search.walk.registry",
    "strategy_named": "archdsl.search.walk.registry",
    "make_pruner": "archdsl.search.walk.samplers",
    "Strategy": "archdsl.search.walk.strategy",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
