"""The search strategies by name: the one list (`REGISTRY`), from which `--strategy`'s choices (`STRATEGIES`), the
settings' check and every reading of a study's recorded strategy derive. A new strategy is one file (a `Strategy`)
and one line here (docs/architecture.md, "Adding a strategy").

Light at import: `archdsl search --help` lists the names without importing Optuna.
"""

from __future__ import annotations

from archdsl.errors import UsageError
from archdsl.search.walk.buildup_strategy import BuildUp
from archdsl.search.walk.sampler_strategies import NSGAII, TPE, Grid, Random
from archdsl.search.walk.strategy import Strategy

REGISTRY: dict[str, Strategy] = {
    strategy.name: strategy
    for strategy in (
        BuildUp(),  # the default
        TPE(),
        NSGAII(),
        Grid(),
        Random(),
    )
}
STRATEGIES = tuple(REGISTRY)  # as the registry was when the command line was built: --strategy's choices


def strategy_named(name: str) -> Strategy:
    """The registered strategy `name`; a UsageError naming the known ones otherwise."""
    if name not in REGISTRY:
        raise UsageError(f"unknown strategy {name!r}", hint=f"choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]


def walks(recorded: object) -> bool:
    """Whether the strategy a study recorded (its `strategy` attr, a name or None) walks the build-up rule: a study
    resumed by another strategy records that one."""
    strategy = REGISTRY.get(recorded) if isinstance(recorded, str) else None
    return strategy is not None and strategy.walks
