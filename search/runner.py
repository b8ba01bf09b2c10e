"""A search from start to end on one worker: open the study, run trials, return the outcome.

Every worker of a study runs the same `run_search` on the same study (`load_if_exists`): running the command
again resumes it, running it on more machines spreads it. `n_trials` counts the study's distinct designs
measured (`record.measured_designs`), not a worker's trials; a copy does not count, and after
`REDRAW_FALLBACK` copies in a row an undrawn design is queued (docs/storage.md, "Storage, resuming and several
workers").
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial

from archdsl.errors import UserError
from archdsl.search._optuna_private import storage_of
from archdsl.search.fidelity.budget import Budget
from archdsl.search.fidelity.replay import is_replay
from archdsl.search.fidelity.replaying import make_objective
from archdsl.search.fidelity.trial import TrialFailed
from archdsl.search.settings import flag_number
from archdsl.search.space import ParamValue, Space
from archdsl.search.studies.for_report import record_protocol, record_random_pick, record_walk
from archdsl.search.studies.naming import REPLAY_SUFFIX
from archdsl.search.studies.record import (
    BASE_ATTR,
    BASE_DIGEST_ATTR,
    COMMAND_ATTR,
    DIGEST_ATTR,
    ENDPOINT_ATTR,
    FIDELITY_ATTR,
    FINISHED,
    OBJECTIVES_ATTR,
    SEARCHED_ATTR,
    SEED_INDICES_ATTR,
    SEEDS_ATTR,
    STRATEGY_ATTR,
    claimed_seed_indices,
    design_seed_values,
    digest_of,
    first_trials,
    is_copy,
    is_verdict,
    measured_designs,
    read_protocol,
    rung_of,
    seed_values,
    taken_designs,
    trials,
    workers_at_work,
)
from archdsl.search.studies.storage import fail_stale_trials, open_storage
from archdsl.search.walk.buildup import Walk
from archdsl.search.walk.planned import PlannedSampler
from archdsl.search.walk.samplers import make_pruner

if TYPE_CHECKING:
    from archdsl.search.plan import SearchPlan

REDRAW_FALLBACK = 10  # copies in a row after which a random undrawn design is queued
REDRAW_TRIES = 1000  # random points tried to find an undrawn design


@dataclass(frozen=True)
class SearchOutcome:
    """What `run_search` did: the study, the trials this worker finished, the build-up walk (for `buildup`), and stale
    trials it re-queued."""

    study: optuna.Study
    new_trials: int
    buildup: Walk | None  # where the build-up walk ended (None for the samplers)
    stale_failed: list[int]
    exhausted: int | None = None  # the space's number of designs, when all were taken before n_trials


@dataclass(frozen=True)
class StudyProgress:
    """How far a study is: designs measured of the most it will measure, and the time left at its pace."""

    done: int  # distinct designs with a verdict, all workers together (what --n-trials counts)
    total: int  # the most the study will measure (`target_trials`), or `done` once it went past
    eta_seconds: float | None  # None before any trial took measurable time, or when nothing is left
    eta_high: float | None = None  # the most time left, where it is a range (a walk's raises and settle stage)


def target_trials(plan: SearchPlan) -> int:
    """The most designs the study will measure: `n_trials`, fewer when the space (or the longest
    build-up walk) holds fewer (`Strategy.target_trials`)."""
    return plan.strategy.target_trials(plan)


def study_progress(study: optuna.Study, total: int, plan: SearchPlan | None = None) -> StudyProgress:
    """`done/total` and an ETA, shared among the workers at work now (the trials running elsewhere, plus this
    worker). With the study's `plan`, the ETA is a range: the work left (`time_estimate.remaining_seconds`: the
    fewest to the most designs left, the last verdict's raises, the settle stage) at the pace of the finished trials,
    so a trial at a raised budget counts what it trains. Without it, the mean trial time times the designs left."""
    from archdsl.search.time_estimate import FinishedTrial, remaining_seconds

    found = trials(study)
    done = measured_designs(found)
    finished = [t for t in found if t.state in FINISHED and is_verdict(t) and t.duration]
    left = max(0, total - done)
    workers = 1 + workers_at_work(found)
    progress = StudyProgress(done=done, total=max(total, done), eta_seconds=None)
    if plan is not None:
        work = plan.workload
        measured = [
            FinishedTrial(rung_of(t), len(t.user_attrs.get(SEED_INDICES_ATTR) or ()) or work.seeds, _seconds(t))
            for t in finished
        ]
        fewest = max(0, min(plan.strategy.fewest_trials(plan), total) - done)
        span = remaining_seconds(work, measured, (fewest, left))
        if span is None or span[1] <= 0:
            return progress
        return dataclasses.replace(progress, eta_seconds=span[0] / workers, eta_high=span[1] / workers)
    seconds = [_seconds(t) for t in finished]
    if left and seconds and sum(seconds) > 0:
        return dataclasses.replace(progress, eta_seconds=sum(seconds) / len(seconds) * left / workers)
    return progress


def _seconds(trial: FrozenTrial) -> float:
    return trial.duration.total_seconds() if trial.duration else 0.0


def open_study(plan: SearchPlan) -> optuna.Study:
    """The study of `plan` in its storage, created if missing; a UserError if it optimises other objectives."""
    storage = open_storage(plan.storage, plan.out, plan.study_name)
    directions = [o.direction for o in plan.objectives]
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=plan.study_name,
            directions=directions,
            load_if_exists=True,
        )
    except ValueError as err:  # e.g. an invalid name
        raise UserError(f"cannot open study {plan.study_name!r}: {err}") from err
    names = ",".join(o.name for o in plan.objectives)
    recorded = study.user_attrs.get(OBJECTIVES_ATTR)
    if [d.name.lower() for d in study.directions] != directions or recorded not in (None, names):
        raise UserError(
            f"study {plan.study_name!r} optimises {len(study.directions)} objective(s) "
            f"({recorded or '?'}), not {names}",
            hint="use the study's --objectives, or a new --study-name",
        )
    study.set_user_attr(OBJECTIVES_ATTR, names)
    _check_same_fidelity(study, plan.settings.fidelity_source)
    _check_same_seeds(study, plan.fidelity.seeds)
    _check_same_rules(study, plan)
    study.set_user_attr(STRATEGY_ATTR, plan.settings.strategy)
    study.set_user_attr(COMMAND_ATTR, plan.command)
    if study.metric_names != [o.name for o in plan.objectives]:
        # optuna-dashboard (and Optuna's plots) then say "accuracy", not "Objective 0".
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([o.name for o in plan.objectives])
    return study


def _check_same_fidelity(study: optuna.Study, fidelity: str) -> None:
    """A study is trained or replayed, never both: a replayed trial's design is not measured, and its time is
    simulated. (Two tables of the study's space may answer one study: the table itself is checked against the
    space.) A study from before the attribute takes this command's."""
    recorded = study.user_attrs.get(FIDELITY_ATTR)
    if recorded is not None and is_replay(recorded) != is_replay(fidelity):

        def said(source: str) -> str:
            return f"replayed from a table (--fidelity {source})" if is_replay(source) else "trained (--fidelity train)"

        raise UserError(
            f"study {study.study_name!r} is {said(recorded)}, not {said(fidelity)} as this command asks",
            hint="give the study's --fidelity, or a new --study-name (a replayed study's default name ends in "
            f"{REPLAY_SUFFIX})",
        )
    if recorded is None:
        study.set_user_attr(FIDELITY_ATTR, fidelity)


def _check_same_seeds(study: optuna.Study, seeds: int) -> None:
    """A study measures every design on one number of paired seeds (`--seeds`): means over other numbers are not
    compared. A study from before the attribute: the seeds of its first measured design."""
    recorded = study.user_attrs.get(SEEDS_ATTR) or _seeds_of_first_design(study)
    if recorded is not None and recorded != seeds:
        raise UserError(
            f"study {study.study_name!r} measures each design on {recorded} paired seeds, not {seeds} as this "
            "command asks",
            hint=f"give the study's --seeds {recorded} (--max-seeds races more), or a new --study-name",
        )
    if study.user_attrs.get(SEEDS_ATTR) is None:
        study.set_user_attr(SEEDS_ATTR, seeds)


def _check_same_rules(study: optuna.Study, plan: SearchPlan) -> None:
    """A resumed study keeps the rules its protocol recorded (`for_report.record_protocol`, at each run's start):
    how the build-up walk keeps an MSA (--keep: another rule flips its answer on the trials it has), and a trained
    study's ladder of budgets (--epochs, --subset, --budget-steps: its trials were measured at the recorded rungs,
    and a shorter ladder has no rung for them). A study that recorded no protocol yet takes this command's."""
    recorded = read_protocol(study)
    if recorded is None:
        return
    name, keep = study.study_name, plan.keep
    if "keep" in plan.strategy.flags and recorded.keep != keep:
        raise UserError(
            f"study {name!r} keeps an MSA by {recorded.keep}, not {keep} as this command asks",
            hint=f"give the study's --keep {recorded.keep}, or a new --study-name for the other rule",
        )
    knobs = plan.knobs
    if "knobs" in plan.strategy.flags and plan.space.searched != ("k",) and recorded.knobs != knobs:
        raise UserError(
            f"study {name!r} gave a new MSA's knobs by --knobs {recorded.knobs}, not {knobs} as this command asks",
            hint=f"give the study's --knobs {recorded.knobs}, or a new --study-name for the other rule",
        )
    rungs = [*plan.rungs, *plan.settles]
    if plan.replay is None and recorded.table is None and recorded.budgets and recorded.budgets != rungs:
        first, steps = recorded.budgets[0], len(recorded.budgets) - 1 - recorded.settle_steps
        raise UserError(
            f"study {name!r} climbs the budgets {_ladder_text(recorded.budgets)}, not {_ladder_text(rungs)} as this "
            "command asks",
            hint=f"give the study's --epochs {first.epochs} --subset {flag_number(first.subset)} --budget-steps "
            f"{steps} --settle-steps {recorded.settle_steps}, or a new --study-name",
        )


def _ladder_text(budgets: list[Budget]) -> str:
    """`2, 4, 8 epochs` (on the same images), or `2 epochs on 10 %, 4 epochs on 20 %`."""
    if all(budget.subset == budgets[0].subset for budget in budgets):
        return ", ".join(str(budget.epochs) for budget in budgets) + " epochs"
    return ", ".join(budget.text() for budget in budgets)


def _seeds_of_first_design(study: optuna.Study) -> int | None:
    firsts = first_trials(trials(study))
    return len(seed_values(next(iter(firsts.values())))) or None if firsts else None


def check_same_space(study: optuna.Study, space: Space) -> None:
    """A study searches one space: the same base design and the same knobs on every worker."""
    identity = {BASE_DIGEST_ATTR: space.base.digest(), SEARCHED_ATTR: ",".join(space.searched)}
    recorded = {k: study.user_attrs.get(k) for k in identity}
    # Compare key by key: workers started together write these one at a time, so another
    # worker may see some keys set and others not yet. Writing the same value twice is harmless.
    if any(value is not None and value != identity[key] for key, value in recorded.items()):
        raise UserError(
            f"study {study.study_name!r} searches another space (base {study.user_attrs.get(BASE_ATTR)!r}, knobs "
            f"{recorded[SEARCHED_ATTR]}) than this command ({space.base.name!r}, knobs {identity[SEARCHED_ATTR]})",
            hint="give the study's --base, --dataset and --search, or a new --study-name",
        )
    for key, value in identity.items():
        if recorded[key] is None:
            study.set_user_attr(key, value)
    if study.user_attrs.get(BASE_ATTR) is None:
        study.set_user_attr(BASE_ATTR, space.base.name)
    _check_trials_in_choices(study, space)


def _check_trials_in_choices(study: optuna.Study, space: Space) -> None:
    """Every trial's parameters among the space's choices: a study made before a choice set changed (before
    2026-12-06 a window holding the whole map was offered twice, as the layout's window and as `global`) would
    otherwise fail inside Optuna's samplers."""
    choices = space.choices()
    for trial in trials(study):
        for name, value in trial.params.items():
            if name in choices and value not in choices[name]:
                raise UserError(
                    f"study {study.study_name!r}: trial {trial.number} has {name}={value!r}, which this space does "
                    f"not offer (its choices: {', '.join(map(repr, choices[name]))})",
                    hint="the study was made by an older archdsl; search it again under a new --study-name",
                )


def load_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """An existing study; a UserError naming the known ones if there is none by that name."""
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError as err:
        known = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise UserError(
            f"no study named {name!r} in this storage",
            hint=f"known studies: {', '.join(known)}" if known else "run `archdsl search --study-name NAME` first",
        ) from err


def run_search(
    plan: SearchPlan, *, on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None
) -> SearchOutcome:
    """Run this worker's share of the study of `plan`; `on_trial(study, trial)` after every finished trial.

    `plan.study`: the study, already opened and checked against the space (`plan_search`: `open_study`,
    `check_same_space`), for a caller that reports those errors before it starts; opened here if None.
    """
    space, settings = plan.space, plan.settings
    study = plan.study
    if study is None:
        study = open_study(plan)
        check_same_space(study, space)
    sampler = plan.strategy.sampler(plan)
    walker = sampler if isinstance(sampler, PlannedSampler) else None  # the walk: the stop rule asks it
    pruner = make_pruner(plan.objectives, plan.fidelity.epochs, plan.pruner)
    # Re-open with this worker's sampler and pruner (they live in memory, not in the storage).
    study = optuna.load_study(study_name=plan.study_name, storage=storage_of(study), sampler=sampler, pruner=pruner)
    stale = fail_stale_trials(study, plan.storage)
    record_protocol(study, plan)  # how every trial trains and is scored: the report's checklist reads it
    objective = make_objective(plan)  # trained, or replayed from a table
    before = _finished(study)

    if settings.seed_endpoints:
        _queue_endpoints(study, space)
    leaders = None
    if walker is None and plan.max_seeds > plan.fidelity.seeds and [o.name for o in plan.objectives] == ["accuracy"]:
        leaders = _Leaders(plan.max_seeds, plan.objectives[0].direction == "maximize")
    # the strategy's count: --n-trials, or a walk's longest where --n-trials was not given (a walk that chooses its
    # windows measures up to 10 designs on resnet-fmnist's k,window space; the default 8 would cut it short)
    stop = _StopAt(plan.strategy.target_trials(plan), space, settings.seed, walker, leaders)
    if not stop.done(study):
        # No trial count for optimize: copies do not count, so _StopAt (the walk's end, the grid's
        # end, or the timeout) ends the loop.
        study.optimize(
            objective,
            n_trials=None,
            timeout=settings.timeout,
            catch=(TrialFailed,),
            callbacks=[stop, *([on_trial] if on_trial is not None else [])],
            # A trained trial leaves a model's memory behind; a replayed one nothing (and a collection takes ~0.1-1 s).
            gc_after_trial=plan.replay is None,
        )
    walk = None
    if walker is not None:  # the walk the last trial saw, when it saw the walk done; else where it stands now
        walk = walker.latest if walker.latest is not None and walker.latest.next is None else walker.walk(study)
    if walk is not None:  # where the report reads it
        record_walk(study, space, walk)
    record_random_pick(study, plan)
    exhausted = space.n_designs() if _finished(study) < settings.n_trials and _exhausted(study, space) else None
    return SearchOutcome(
        study=study,
        new_trials=_finished(study) - before,
        buildup=walk,
        stale_failed=stale,
        exhausted=exhausted,
    )


def _queue_endpoints(study: optuna.Study, space: Space) -> None:
    """--seed-endpoints: the space's endpoints the study lacks, queued first."""
    taken = {digest_of(t) for t in trials(study)}
    for endpoint in space.endpoints():
        if space.arch_from_params(endpoint.params).digest() not in taken:
            study.enqueue_trial(endpoint.params, user_attrs={ENDPOINT_ATTR: endpoint.name}, skip_if_exists=True)


def _finished(study: optuna.Study) -> int:
    """What counts towards --n-trials (`record.measured_designs`)."""
    return measured_designs(trials(study))


def _exhausted(study: optuna.Study, space: Space) -> bool:
    return len(taken_designs(trials(study))) >= space.n_designs()


class _StopAt:
    """After each trial: stop once the study holds `n` measured designs, every design is taken, or the walk is
    done (`walker.walk`); for a sampler, queue an undrawn design after `REDRAW_FALLBACK` copies in a row, and
    re-measure its leading designs (`leaders`) before it stops."""

    def __init__(
        self, n: int, space: Space, seed: int, walker: PlannedSampler | None = None, leaders: _Leaders | None = None
    ) -> None:
        self.n = n
        self.space = space
        self.seed = seed
        self.walker = walker
        self.leaders = leaders
        self.copies_in_a_row = 0

    def done(self, study: optuna.Study) -> bool:
        """Whether the study has nothing left to measure for this search (queueing a leader's extra seeds
        when the samplers' designs are all measured and a leader lacks some)."""
        if self.walker is not None:  # done, or asking for a design past --n-trials (a verdict's budgets still count,
            # and so does the settle stage, which may measure a design the walk did not: the answer at the base's
            # knobs, where the walk chose others)
            ask = self.walker.walk(study).next
            if ask is None:
                return True
            if self.walker.settling(ask):
                return False
            new = self.space.arch_from_params(ask.params).digest() not in taken_designs(trials(study))
            return new and (_finished(study) >= self.n or _exhausted(study, self.space))
        if _finished(study) < self.n and not _exhausted(study, self.space):
            return False
        return self.leaders is None or not self.leaders.remeasure(study)

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if (_finished(study) >= self.n or self.walker is not None) and self.done(study):
            study.stop()
            return
        if not is_copy(trial) or self.walker is not None:
            self.copies_in_a_row = 0
            return
        self.copies_in_a_row += 1
        taken = taken_designs(trials(study))
        if len(taken) >= self.space.n_designs() and self.done(study):
            study.stop()
        elif self.copies_in_a_row % REDRAW_FALLBACK == 0:
            from archdsl.run.loader import derive_seed  # torch at import: only when a copy repeats

            params = self._undrawn(taken, random.Random(derive_seed(self.seed, trial.number)))
            if params is not None:
                study.enqueue_trial(params, user_attrs={STRATEGY_ATTR: "redraw"})

    def _undrawn(self, taken: set[str], rng: random.Random) -> dict[str, ParamValue] | None:
        for _ in range(REDRAW_TRIES):
            params = self.space.random_design(rng)
            if self.space.arch_from_params(params).digest() not in taken:
                return params
        return None


LEADERS = 3  # the samplers' leading designs re-measured up to --max-seeds before the study ends


@dataclass(frozen=True)
class _Leaders:
    """A single-objective accuracy study's `LEADERS` best designs by their mean over the seeds measured,
    re-measured on every seed index up to `max_seeds` (extra-seed trials, `strategy` = `leaders`), so that
    the best design is not one lucky draw. A leader that falls back on its new seeds lets the next in."""

    max_seeds: int
    maximize: bool

    def remeasure(self, study: optuna.Study) -> bool:
        """Queue the leaders' missing seeds; whether any are queued or being measured."""
        found = trials(study)
        firsts = {digest: t for digest, t in first_trials(found).items() if DIGEST_ATTR in t.user_attrs}
        pooled = {digest: design_seed_values(found, digest) for digest in firsts}
        sign = 1.0 if self.maximize else -1.0
        ranked = sorted(pooled, key=lambda d: -sign * sum(pooled[d].values()) / max(1, len(pooled[d])))
        pending = False
        for digest in ranked[:LEADERS]:
            claimed, active = claimed_seed_indices(found, digest)
            pending |= active
            for index in range(self.max_seeds):
                if index not in pooled[digest] and index not in claimed:
                    # the digest now: a waiting trial gets it only when it runs, and unclaimed it was queued again
                    attrs = {STRATEGY_ATTR: "leaders", SEED_INDICES_ATTR: [index], DIGEST_ATTR: digest}
                    study.enqueue_trial(firsts[digest].params, user_attrs=attrs)
                    pending = True
        return pending
