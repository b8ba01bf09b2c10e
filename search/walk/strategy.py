"""The seam every search strategy implements (`Strategy`), as Optuna's `BaseSampler` is its samplers' seam: what
the runner, the planning and the report ask of a way of choosing the designs, so that none of them asks which
strategy it is by name. `registry.REGISTRY` holds one of each (docs/architecture.md, "Adding a strategy").

Light at import (the registry lists the names for `archdsl search --help` without importing Optuna): a strategy
imports its sampler's library when it makes one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    import optuna

    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.objectives import Objective
    from archdsl.search.space import Space
    from archdsl.search.studies.storage import StorageOptions
    from archdsl.search.walk.buildup import Rules
    from archdsl.search.walk.keep_rules import Keep, Knobs

PRUNERS = ("median", "halving", "hyperband", "none")  # --pruner: Optuna's, on the per-epoch validation accuracy
# Pruning rungs at epochs 1, 3, 9, ...: the halving pruners keep a third of the trials at each.
REDUCTION_FACTOR = 3


class SettingsView(Protocol):
    """The settings a strategy reads (`settings.SearchSettings` has them)."""

    @property
    def n_trials(self) -> int: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def model_fields_set(self) -> set[str]: ...  # the flags given (pydantic's): a default --n-trials caps no walk


class PlanView(Protocol):
    """What a strategy reads of the study's plan. The plan it is given is `archdsl.search.plan.SearchPlan`, named here
    by what it has rather than imported: the plan names its strategy and its settings, which list the strategies
    (`registry`), so an import of the plan here would close a loop (tests/test_layering.py). A strategy that reads
    more of the plan adds it here; mypy checks that the plan has it."""

    @property
    def settings(self) -> SettingsView: ...
    @property
    def space(self) -> Space: ...
    @property
    def objectives(self) -> tuple[Objective, ...]: ...
    @property
    def keep(self) -> Keep: ...
    @property
    def knobs(self) -> Knobs: ...
    @property
    def settles(self) -> tuple[Budget, ...]: ...
    @property
    def walk_rules(self) -> Rules: ...
    @property
    def storage(self) -> StorageOptions: ...


class Strategy(ABC):
    """A way of choosing the designs a study measures: its `name` (`--strategy`) and one-line `help`, and the Optuna
    sampler that runs it (`sampler`). The other answers have defaults that fit a sampler drawing designs until
    `--n-trials` of them are measured; the build-up walk (`buildup_strategy.BuildUp`) overrides them."""

    name: ClassVar[str]
    help: ClassVar[str]
    # It walks the build-up rule: it climbs a ladder of budgets where none was measured, its sampler is a
    # `planned.PlannedSampler` (whose walk the runner's stop rule asks whether it is done), and its study's answer is
    # the walk's (report._summary reads it through `registry.walks`).
    walks: ClassVar[bool] = False
    # The settings (SearchSettings or Fidelity field names) only this strategy reads: `--keep mean` is refused, and
    # --keep left out of the recorded command, for a strategy without "keep"; the settle stage runs with "settle_steps".
    flags: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def sampler(self, plan: PlanView) -> optuna.samplers.BaseSampler:
        """The Optuna sampler that chooses each trial's design (one per worker; it lives in memory, not the
        storage)."""

    def target_trials(self, plan: PlanView) -> int:
        """The most designs the study measures: `--n-trials`, fewer when the space holds fewer."""
        return min(plan.settings.n_trials, plan.space.n_designs())

    def fewest_trials(self, plan: PlanView) -> int:
        """The fewest designs the study measures before it ends on its own (`--dry-run`'s time estimate)."""
        return self.target_trials(plan)

    def auto_pruner(self, epochs: int, raised: bool) -> str:
        """The pruner `--pruner auto` takes at a fidelity of `epochs` (`raised`: on a ladder of budgets): Hyperband
        where it has two brackets or more (at least 3 epochs, as on the replay table's 6), else median: with one
        bracket Hyperband is successive halving, the pruner the replayed efficiency study rejected for its
        regret (settings.AUTO_PRUNER says what it measured)."""
        return "median" if epochs < REDUCTION_FACTOR else "hyperband"

    def reach_text(self, plan: PlanView) -> str | None:
        """A line on the designs of the space the strategy cannot reach (`--dry-run` and the study's first
        line); None where it reaches them all."""
        return None

    def rule_text(self, plan: PlanView) -> str | None:
        """A line on how it decides, with the flags that set it (`--dry-run`); None where nothing is set."""
        return None
