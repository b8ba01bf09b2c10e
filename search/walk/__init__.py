"""How the next design is chosen: the paper's build-up walk and Optuna's samplers (docs/search.md, "Strategies")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; imported on first use
    from archdsl.search.walk.strategies import PlannedSampler as PlannedSampler
    from archdsl.search.walk.strategies import Racing as Racing
    from archdsl.search.walk.strategies import Walk as Walk
    from archdsl.search.walk.strategies import make_pruner as make_pruner
    from archdsl.search.walk.strategies import make_sampler as make_sampler
    from archdsl.search.walk.strategies import walk_buildup as walk_buildup

__getattr__, __dir__, __all__ = lazy_exports(__name__)
