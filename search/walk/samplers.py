"""What the strategies other than the walk run their Optuna samplers with (`sampler_strategies`): each trial's
random draws seeded by (seed, trial number), a grid that the runner's stop rule ends; and Optuna's pruners on the
per-epoch validation accuracy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UsageError
from archdsl.search.objectives import Objective
from archdsl.search.walk.strategy import PRUNERS, REDUCTION_FACTOR


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
