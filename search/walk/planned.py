"""The build-up walk as an Optuna sampler: each trial measures what `buildup.walk` asks next of the study's
trials, so the walk runs through `study.optimize` like every sampler, on one worker or many."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.search._optuna_private import fixed_params, storage_of, trial_id
from archdsl.search.objectives import Objective
from archdsl.search.space import ParamValue, Space
from archdsl.search.studies.record import (
    BUILDUP_STEP_ATTR,
    RUNG_ATTR,
    SEED_BASE_ATTR,
    SEED_INDICES_ATTR,
    STRATEGY_ATTR,
    is_measuring,
    measurements,
    trials,
)
from archdsl.search.walk.buildup import PLAIN, Ask, Rules, Walk, walk


class PlannedSampler(optuna.samplers.BaseSampler):
    """Each trial takes the measurement `walk` asks next on the study's trials (its step label, `strategy`, and its
    budget rung or seed index in the trial's user attrs). An enqueued trial (an endpoint, a retry) keeps its own
    design. The walk is read once per trial, when the trial starts (`latest`).

    While another worker is measuring what the walk asks, the trial waits for its verdict (`wait(study)` between
    looks, e.g. failing a dead worker's trials) rather than measure it twice; past `deadline` (time.monotonic) it
    takes the design anyway, as a copy that does not count. When the walk is done, the runner's stop rule ends
    the study (`runner._StopAt`, asking `walk` too); a trial that starts anyway (another worker's) takes the last
    design walked, a copy that ends at once.
    """

    def __init__(
        self,
        space: Space,
        lead: Objective,
        lead_index: int,
        rules: Rules = PLAIN,
        wait: Callable[[optuna.Study], object] = lambda study: None,
        deadline: float | None = None,
    ) -> None:
        self._space, self._lead, self._lead_index, self._rules = space, lead, lead_index, rules
        self._wait, self._deadline = wait, deadline
        self._planned: dict[int, dict[str, ParamValue]] = {}
        self.latest: Walk | None = None  # the walk as last read (by a trial that started, or the stop rule)

    def settling(self, ask: Ask) -> bool:
        """Whether `ask` is the settle stage's (a budget above the walk's ladder)."""
        return ask.rung >= self._rules.rungs

    def walk(self, study: optuna.Study) -> Walk:
        """Where the walk stands on `study`'s trials now (one scan of them)."""
        found = measurements(trials(study), self._lead.name, self._lead_index)
        self.latest = walk(self._space, found, self._lead, self._rules)
        return self.latest

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if fixed_params(trial) is not None:
            return
        ask = self._next_unclaimed(study)
        if ask is None:
            steps = self.latest.steps if self.latest is not None else ()
            self._planned[trial.number] = dict(steps[-1].params if steps else self._space.endpoints()[0].params)
            return
        self._planned[trial.number] = ask.params
        attrs: dict[str, object] = {STRATEGY_ATTR: "buildup", BUILDUP_STEP_ATTR: ask.label}
        if ask.seed_index is not None:  # an extra seed of a design measured already (not counted by --n-trials): a
            # race's look, or the stand-in for a seed that failed to learn
            attrs = {STRATEGY_ATTR: ask.why, SEED_INDICES_ATTR: [ask.seed_index]}
        elif self.settling(ask):  # the settle stage: fresh paired seeds, after the walk's own
            attrs[SEED_BASE_ATTR] = self._rules.racing.seeds
        if ask.rung:  # a raised budget: the trial trains at this rung of the ladder (or the settle stage's)
            attrs[RUNG_ATTR] = ask.rung
        for key, value in attrs.items():
            storage_of(study).set_trial_user_attr(trial_id(trial), key, value)
            # `trial` is the running trial's own copy, which its optuna.Trial reads user attrs from.
            trial.set_user_attr(key, value)

    def _next_unclaimed(self, study: optuna.Study) -> Ask | None:
        """What the walk asks next, once no other worker is measuring it (or the deadline passed)."""
        while True:
            ask = self.walk(study).next
            if ask is None:
                return None
            digest = self._space.arch_from_params(ask.params).digest()
            indices = None if ask.seed_index is None else [ask.seed_index]
            late = self._deadline is not None and time.monotonic() > self._deadline
            if late or not is_measuring(trials(study), digest, indices, ask.rung):
                return ask
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
