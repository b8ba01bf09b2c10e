"""How the next design is chosen: Optuna samplers, and the paper's build-up procedure.

`tpe`, `nsga2`, `grid` and `random` are Optuna samplers driven by `study.optimize`.
`buildup` is the paper's rule (Sec. 4.1), proposed by `PlannedSampler` through `study.optimize` too:
start from the base CNN, add an MSA at the end of the last stage and keep adding there
while the lead objective improves; when an addition does not help (or the stage is
full), try the end of the stage before; stop after the first stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UsageError
from archdsl.search._optuna_private import fixed_params, storage_of, trial_id
from archdsl.search.objectives import Objective
from archdsl.search.seed_stats import KEEP_LEVEL, improves_beyond_noise
from archdsl.search.settings import PRUNERS, REDUCTION_FACTOR, STRATEGIES
from archdsl.search.space import ParamValue, Space
from archdsl.search.studies.record import (
    BUILDUP_STEP_ATTR,
    SEED_INDICES_ATTR,
    STRATEGY_ATTR,
    design_seed_values,
    design_verdicts,
    is_measuring,
    lost_seeds,
    seed_values,
    trials,
)

GRID_LIMIT = 4096  # a grid larger than this is a mistake, not a search


def make_sampler(strategy: str, space: Space, n_objectives: int, seed: int | None) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of a strategy (`buildup`'s is `PlannedSampler`, made by the runner);
    its random draws for trial n come from (seed, n) (see `PerTrialSeed`)."""
    if strategy == "tpe":
        # multivariate: the k's of different stages interact (a budget of MSAs).
        return PerTrialSeed(lambda s: optuna.samplers.TPESampler(seed=s, multivariate=True, n_startup_trials=4), seed)
    if strategy == "nsga2":
        size = max(4, min(16, space.size()))
        return PerTrialSeed(lambda s: optuna.samplers.NSGAIISampler(seed=s, population_size=size), seed)
    if strategy == "grid":
        # GridSampler's shuffle of the grid must be the same on every worker (a trial stores
        # only its grid index), and it hands trial n the n-th grid point: not per trial.
        if space.size() > GRID_LIMIT:
            raise UsageError(
                f"the grid has {space.size()} points (more than {GRID_LIMIT})",
                hint="search fewer knobs (--search k), or use --strategy tpe",
            )
        return _GridSampler({n: list(v) for n, v in space.choices().items()}, seed=seed)
    if strategy == "random":
        return PerTrialSeed(lambda s: optuna.samplers.RandomSampler(seed=s), seed)
    raise UsageError(f"unknown strategy {strategy!r}", hint=f"choose from {', '.join(STRATEGIES)}")


class _GridSampler(optuna.samplers.GridSampler):
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
    `--seed` (what docs/search.md tells users to do on several machines), or a resumed
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


def step_label(stage: str | None) -> str:
    """What a build-up step tries: `base`, or `+1 MSA in c3` (the stage that changed)."""
    return "base" if stage is None else f"+1 MSA in {stage}"


def buildup_max_trials(space: Space) -> int:
    """The longest build-up walk: the base, then one MSA added at a time until every stage is full
    (a walk stops sooner when an added MSA does not help)."""
    return 1 + sum(stage.max_k for stage in space.stages)


@dataclass(frozen=True)
class NextStep:
    """The design the walk measures next, and the stage that got one more MSA (None for the base);
    `seed_index` for a race's extra-seed trial of a design already measured (`--max-seeds`)."""

    params: dict[str, ParamValue]
    stage: str | None
    seed_index: int | None = None

    @property
    def label(self) -> str:
        return step_label(self.stage)


@dataclass(frozen=True)
class Walk:
    """Where the build-up walk stands on a study's finished trials: the steps it has taken, and the
    design it measures next (None: the walk is done)."""

    steps: list[BuildupStep]
    next: NextStep | None

    @property
    def answer(self) -> dict[str, ParamValue] | None:
        """The design the walk kept last: its answer (the best mean may be a design it rejected as noise)."""
        kept = [step for step in self.steps if step.accepted]
        return kept[-1].params if kept else None


@dataclass(frozen=True)
class Racing:
    """How many paired seeds the walk's test looks at: `seeds` first (--seeds), one more per look while
    it cannot decide, up to `max_seeds` (--max-seeds); no racing when they are equal."""

    seeds: int = 1
    max_seeds: int = 1

    @property
    def first(self) -> int:
        return max(2, self.seeds)  # a paired test needs two seeds

    @property
    def level(self) -> float:
        """The level of each look: KEEP_LEVEL shared out over the race's looks (Bonferroni), so that a
        null improvement is kept at most KEEP_LEVEL of the time however many looks the race takes."""
        return KEEP_LEVEL / max(1, self.max_seeds - self.first + 1)


def walk_buildup(
    space: Space, lead: Objective, lead_index: int, trials: Iterable[FrozenTrial], racing: Racing = Racing()
) -> Walk:
    """Replay the build-up rule on `trials` (a study's trials, any order, any worker): every design of
    the walk that has a verdict is a step taken; the first one without, or the extra seed a race needs
    (`racing`), is the next. A pure function of the study's history, so a resumed study, or another
    worker, walks the same way."""
    trials = list(trials)
    verdicts, lost = design_verdicts(trials), lost_seeds(trials)

    def verdict(params: dict[str, ParamValue]) -> FrozenTrial | None:
        return verdicts.get(space.arch_from_params(params).digest())

    def compare(candidate: dict[str, ParamValue], incumbent: dict[str, ParamValue]) -> bool | tuple[int, int]:
        c, i = (space.arch_from_params(p).digest() for p in (candidate, incumbent))
        return race_decision(design_seed_values(trials, c), design_seed_values(trials, i), lead, racing, (c, i), lost)

    return _walk(space, lead, lead_index, verdict, compare if racing.max_seeds > 1 else None)


def race_decision(
    candidate: dict[int, float],
    incumbent: dict[int, float],
    lead: Objective,
    racing: Racing,
    digests: tuple[str, str] = ("candidate", "incumbent"),
    lost: set[tuple[str, int]] | None = None,
) -> bool | tuple[int, int]:
    """The walk's paired test between two designs' per-seed values, look by look (n = racing.first ..
    racing.max_seeds seeds, each at `racing.level`): True to keep the candidate, False to reject it
    (not beyond the noise at the last look, or worse beyond it), or (which, seed index) to measure next
    (0: the candidate, 1: the incumbent) when a look cannot decide. A seed a race could not measure
    (its trial failed or was pruned) ends the race: the candidate is not kept."""
    for n in range(racing.first, max(racing.first, racing.max_seeds) + 1):
        for which, values in enumerate((candidate, incumbent)):
            missing = [s for s in range(n) if s not in values]
            if missing:
                return False if (digests[which], missing[0]) in (lost or set()) else (which, missing[0])
        c, i = tuple(candidate[s] for s in range(n)), tuple(incumbent[s] for s in range(n))
        if improves_beyond_noise(c, i, lead, racing.level):
            return True
        if n >= racing.max_seeds or improves_beyond_noise(i, c, lead, racing.level):
            return False
    return False


# A race's test of a candidate against the incumbent (by their params): keep it, reject it, or
# (0 for the candidate, 1 for the incumbent; seed index) to measure first.
Compare = Callable[[dict[str, ParamValue], dict[str, ParamValue]], "bool | tuple[int, int]"]


def _walk(
    space: Space,
    lead: Objective,
    lead_index: int,
    verdict: Callable[[dict[str, ParamValue]], FrozenTrial | None],
    compare: Compare | None = None,
) -> Walk:
    """The build-up rule over `verdict` (a design's finished trial, None if not measured yet); `compare`
    decides between two measured designs when racing (else the paired test on the trials' own seeds)."""
    current = dict(space.endpoints()[0].params)  # the ResNet end: no MSA, default heads/windows
    steps: list[BuildupStep] = []
    trial = verdict(current)
    if trial is None:
        return Walk(steps, NextStep(dict(current), None))
    best = _value(trial, lead_index)
    best_seeds = _seed_values(trial, lead)
    steps.append(BuildupStep(dict(current), None, best, best is not None, trial.state.name))
    for stage in reversed([s for s in space.stages if s.max_k > 0]):
        key = f"k_{stage.name}"
        while int(current[key]) < stage.max_k:
            candidate = dict(current, **{key: int(current[key]) + 1})
            trial = verdict(candidate)
            if trial is None:
                return Walk(steps, NextStep(candidate, stage.name))
            value = _value(trial, lead_index)
            seeds = _seed_values(trial, lead)
            if value is None:
                accepted = False
            elif best is None:
                accepted = True
            elif compare is not None and lead.name == "accuracy":
                decision = compare(candidate, current)  # --max-seeds: a race, seed by seed
                if not isinstance(decision, bool):
                    which, index = decision
                    return Walk(steps, NextStep(candidate if which == 0 else dict(current), stage.name, index))
                accepted = decision
            elif seeds and best_seeds and len(seeds) == len(best_seeds):
                accepted = improves_beyond_noise(seeds, best_seeds, lead)  # --seeds N: paired, beyond the noise
            else:
                accepted = lead.better(value, best)
            steps.append(BuildupStep(candidate, stage.name, value, accepted, trial.state.name))
            if not accepted:
                break  # rule 2: this MSA did not help; try the end of an earlier stage
            current, best, best_seeds = candidate, value, seeds
    return Walk(steps, None)


class PlannedSampler(optuna.samplers.BaseSampler):
    """The build-up walk as a sampler: each trial takes the design `walk_buildup` names next on the
    study's trials (its step label and `strategy` in the trial's user attrs), so the walk runs through
    `study.optimize` like every sampler. An enqueued trial (an endpoint, a retry) keeps its own design.

    While another worker is measuring the next design, the trial waits for its verdict (`wait(study)`
    between looks, e.g. failing a dead worker's trials) rather than measure it twice; past `deadline`
    (time.monotonic) it takes the design anyway, as a copy that does not count. When the walk is done,
    a trial takes the last design walked (a copy): the runner's callback then stops the study.
    """

    def __init__(
        self,
        space: Space,
        lead: Objective,
        lead_index: int,
        wait: Callable[[optuna.Study], object] = lambda study: None,
        deadline: float | None = None,
        racing: Racing = Racing(),
    ) -> None:
        self._space, self._lead, self._lead_index, self._racing = space, lead, lead_index, racing
        self._wait, self._deadline = wait, deadline
        self._planned: dict[int, dict[str, ParamValue]] = {}

    def walk(self, study: optuna.Study) -> Walk:
        """Where the walk stands on `study`'s trials now."""
        return walk_buildup(self._space, self._lead, self._lead_index, trials(study), self._racing)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if fixed_params(trial) is not None:
            return
        step = self._next_unclaimed(study)
        if step is None:
            walked = self.walk(study).steps
            self._planned[trial.number] = dict(walked[-1].params if walked else self._space.endpoints()[0].params)
            return
        self._planned[trial.number] = step.params
        if step.seed_index is None:
            attrs: dict[str, object] = {STRATEGY_ATTR: "buildup", BUILDUP_STEP_ATTR: step.label}
        else:  # a race's extra seed of a design measured already (not counted towards --n-trials)
            attrs = {STRATEGY_ATTR: "race", SEED_INDICES_ATTR: [step.seed_index]}
        for key, value in attrs.items():
            storage_of(study).set_trial_user_attr(trial_id(trial), key, value)
            # `trial` is the running trial's own copy, which its optuna.Trial reads user attrs from.
            trial.set_user_attr(key, value)

    def _next_unclaimed(self, study: optuna.Study) -> NextStep | None:
        """The walk's next design, once no other worker is measuring it (or the deadline passed)."""
        while True:
            step = self.walk(study).next
            if step is None:
                return None
            digest = self._space.arch_from_params(step.params).digest()
            indices = None if step.seed_index is None else [step.seed_index]
            late = self._deadline is not None and time.monotonic() > self._deadline
            if late or not is_measuring(trials(study), digest, indices):
                return step
            self._wait(study)
            time.sleep(1.0)  # another worker is measuring it: its verdict decides the walk's next step

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return {}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str, distribution: Any) -> Any:
        if trial.number not in self._planned:  # a trial this sampler did not see start
            self.before_trial(study, trial)
        return self._planned[trial.number][name]

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self._planned.pop(trial.number, None)


def _seed_values(trial: FrozenTrial, lead: Objective) -> tuple[float, ...]:
    """The lead objective's value on each paired seed (`--seeds N`, N > 1), or () without them."""
    values = tuple(seed_values(trial).values()) if lead.name == "accuracy" else ()
    return values if len(values) > 1 else ()


def _value(trial: FrozenTrial, index: int) -> float | None:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return None
    return float(trial.values[index])
