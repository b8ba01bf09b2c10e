"""How the next design is chosen: Optuna samplers, and the paper's build-up procedure.

`tpe`, `nsga2`, `grid` and `random` are Optuna samplers driven by `study.optimize`.
`buildup` is the paper's rule (Sec. 4.1) played as a sequence of enqueued trials:
start from the base CNN, add an MSA at the end of the last stage and keep adding there
while the lead objective improves; when an addition does not help (or the stage is
full), try the end of the stage before; stop after the first stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UsageError
from archdsl.search import STRATEGIES
from archdsl.search.objectives import Objective
from archdsl.search.space import ParamValue, Space

GRID_LIMIT = 4096  # a grid larger than this is a mistake, not a search


def make_sampler(strategy: str, space: Space, n_objectives: int, seed: int | None) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of a strategy (`buildup` enqueues its own trials and samples nothing)."""
    if strategy == "tpe":
        # multivariate: the k's of different stages interact (a budget of MSAs).
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=4)
    if strategy == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(16, space.size())))
    if strategy == "grid":
        if space.size() > GRID_LIMIT:
            raise UsageError(
                f"the grid has {space.size()} points (more than {GRID_LIMIT})",
                hint="search fewer knobs (--search k), or use --strategy tpe",
            )
        return optuna.samplers.GridSampler({n: list(v) for n, v in space.choices().items()}, seed=seed)
    if strategy in ("random", "buildup"):
        # buildup enqueues every trial; the sampler only ever fills fixed parameters.
        return optuna.samplers.RandomSampler(seed=seed)
    raise UsageError(f"unknown strategy {strategy!r}", hint=f"choose from {', '.join(STRATEGIES)}")


def make_pruner(objectives: tuple[Objective, ...], epochs: int) -> optuna.pruners.BasePruner:
    """Median pruning on the per-epoch test accuracy, for single-objective accuracy studies.

    Optuna prunes only single-objective studies, and only the accuracy has a value per epoch.
    """
    if len(objectives) == 1 and objectives[0].name == "accuracy" and epochs > 1:
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)
    return optuna.pruners.NopPruner()


@dataclass(frozen=True)
class BuildupStep:
    """One step of the build-up walk: the design tried, the stage given an MSA, its value, whether it was kept."""

    params: dict[str, ParamValue]
    stage: str | None  # the stage that got one more MSA (None for the base)
    value: float | None  # the lead objective (None: failed or pruned)
    accepted: bool
    state: str = "COMPLETE"  # the trial's state: COMPLETE, PRUNED or FAIL

    @property
    def label(self) -> str:
        return step_label(self.stage)


BUILDUP_STEP_ATTR = "buildup_step"  # a build-up trial's step_label, for reports and the dashboard


def step_label(stage: str | None) -> str:
    """What a build-up step tries: `base`, or `+1 MSA in c3` (the stage that changed)."""
    return "base" if stage is None else f"+1 MSA in {stage}"


# Evaluates one design (running a trial only if the study has not got it) -> its finished trial;
# the stage is the one that got one more MSA (None for the base).
Evaluate = Callable[[dict[str, ParamValue], str | None], FrozenTrial | None]


def run_buildup(space: Space, lead: Objective, lead_index: int, evaluate: Evaluate) -> list[BuildupStep]:
    """Play the build-up rule; `evaluate` returns None when the budget is spent (the walk stops)."""
    start = space.endpoints()[0].params  # the ResNet end: no MSA, default heads/windows
    current = dict(start)
    steps: list[BuildupStep] = []
    trial = evaluate(current, None)
    if trial is None:
        return steps
    best = _value(trial, lead_index)
    steps.append(BuildupStep(dict(current), None, best, best is not None, trial.state.name))
    for stage in reversed([s for s in space.stages if s.max_k > 0]):
        key = f"k_{stage.name}"
        while int(current[key]) < stage.max_k:
            candidate = dict(current, **{key: int(current[key]) + 1})
            trial = evaluate(candidate, stage.name)
            if trial is None:
                return steps
            value = _value(trial, lead_index)
            accepted = value is not None and (best is None or lead.better(value, best))
            steps.append(BuildupStep(candidate, stage.name, value, accepted, trial.state.name))
            if not accepted:
                break  # rule 2: this MSA did not help; try the end of an earlier stage
            current, best = candidate, value
    return steps


def _value(trial: FrozenTrial, index: int) -> float | None:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return None
    return float(trial.values[index])
