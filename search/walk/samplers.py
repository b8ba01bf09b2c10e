"""What the strategies other than the walk run their Optuna samplers with (`sampler_strategies`): each trial's
random draws seeded by (seed, trial number), a grid that the runner's stop rule ends; and Optuna's pruners on the
per-epoch validation accuracy."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UsageError
from archdsl.search.objectives import Objective
from archdsl.search.walk.strategy import PRUNERS, REDUCTION_FACTOR

if TYPE_CHECKING:
    from archdsl.search.space import Space


class NonStoppingGridSampler(optuna.samplers.GridSampler):
    """Optuna's GridSampler, except that the runner's stop rule (`runner._StopAt`: every design
    taken, then the leaders re-measured up to --max-seeds) ends the study, not the grid's last point:
    GridSampler stopped it there, before the leaders' extra seeds were measured."""

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        pass  # GridSampler's after_trial only stops the study


class PerTrialSeed(optuna.samplers.BaseSampler):
    """A sampler whose random draws for trial n come from a generator seeded with (seed, n).

    Optuna's samplers keep one random stream per process: two workers started with the same
    `--seed` (what docs/storage.md tells users to do on several machines), or a resumed
    search, would draw the same designs again. Trial numbers are unique in a study, so
    seeding by them gives every trial, whichever worker runs it, its own stream, and a
    search on one worker stays reproducible. The samplers used here keep all other state in
    the study, so a fresh one per trial samples as the long-lived one would.
    """

    def __init__(self, make: Callable[[int | None], optuna.samplers.BaseSampler], seed: int | None) -> None:
        self._make = make
        self._seed = seed
        self._number: int | None = None
        self._sampler = make(seed)

    def _for(self, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        if trial.number != self._number:
            from archdsl.run.loader import derive_seed

            seed = None if self._seed is None else derive_seed(self._seed, trial.number) % 2**32
            self._sampler, self._number = self._make(seed), trial.number
        return self._sampler

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str, distribution: Any) -> Any:
        return self._for(trial).sample_independent(study, trial, name, distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._for(trial).before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self._for(trial).after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        pass  # the streams are fixed by (seed, trial number)


class UniformDesignSampler(optuna.samplers.BaseSampler):
    """`--strategy random`: each trial's design drawn uniformly over the space's distinct designs
    (`Space.random_design`), as the replays' random search draws them, not over its parameters: Optuna's
    RandomSampler draws each parameter on its own, so a design that many points name (the ResNet, whose windows and
    heads do not matter where it has no MSA) comes up that many times more often, and designs without MSAs are
    favoured. Every parameter is drawn at once (`sample_relative`), in the distributions `Space.suggest` asks for."""

    def __init__(self, space: Space, seed: int | None) -> None:
        self._space = space
        self._rng = random.Random(seed)
        self._independent = optuna.samplers.RandomSampler(seed=seed)  # a parameter outside the space (none today)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, IntDistribution

        return {
            name: IntDistribution(0, int(values[-1])) if name.startswith("k_") else CategoricalDistribution(values)
            for name, values in self._space.choices().items()
        }

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        if not search_space:
            return {}
        return {name: value for name, value in self._space.random_design(self._rng).items() if name in search_space}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str, distribution: Any) -> Any:
        return self._independent.sample_independent(study, trial, name, distribution)


def make_pruner(objectives: tuple[Objective, ...], epochs: int, kind: str = "median") -> optuna.pruners.BasePruner:
    """Optuna's pruner `kind` (one of `PRUNERS`) on the per-epoch validation accuracy, for single-objective
    accuracy studies: median, successive halving or Hyperband (rungs at epochs 1, 3, 9, ... up to `epochs`).

    Optuna prunes only single-objective studies, and only the accuracy has a value per epoch.
    """
    if kind not in PRUNERS:
        raise UsageError(f"unknown pruner {kind!r}", hint=f"choose from {', '.join(PRUNERS)}")
    if kind == "none" or not (len(objectives) == 1 and objectives[0].name == "accuracy" and epochs > 1):
        return optuna.pruners.NopPruner()
    if kind == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=REDUCTION_FACTOR)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs, reduction_factor=REDUCTION_FACTOR)
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)
