"""A trial's record in its study: the name of every attribute a search writes on a trial or on the
study, and the rules by which every reading of the study's trials tells what a trial is.

`trials(study)` is the one scan of a study's trials (tests/test_search_record.py finds no other), and
every question about them is answered by the rules here, so the runner, the build-up walk, the look for
a twin, the report and the final test agree on which trials count. A trial is

- a *copy* (`copy_of`): it drew a design the study has; never measured, never counted;
- a *verdict*: finished with something to say about its design: COMPLETE, PRUNED, or a FAIL of the
  design's own doing (not an interrupted or stopped run, not a copy);
- an *extra seed* (`seed_indices`): a race's trial of a design measured already, on more paired seeds;
  its values pool with the design's other trials by seed index, and it is no design of its own;
- *active*: RUNNING, or WAITING to run (a queued design, a retry);
- its design's *first* trial: the design's first COMPLETE trial that is no extra seed, the one the
  report shows with the design's values on every seed index measured (`seed_values_by_design`).

A design is its `Arch.digest()` (`digest`): two trials of one digest measure one design. Where the build-up
walk raises the budget, a trial measures its design at one rung of the ladder (`rung`; 0, the first budget,
when absent), and values pool by design and rung (`design_key`): a design measured at two budgets has two sets
of values, never mixed, and counts once towards --n-trials.

The test figures a trial measures are sealed on the study (`seal_test`), never on the trial, where nothing
that chooses reads them; the final test alone opens them (`open_test`, `archdsl.search.report.final_test`).
A seal names its trial and design, and every reading checks it (`checked_figures`): it is a study attr that
anyone who can write the storage can write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import optuna
from optuna.trial import FrozenTrial, TrialState
from pydantic import BaseModel, ConfigDict, ValidationError

from archdsl.errors import visible
from archdsl.search._optuna_private import storage_of, trial_id
from archdsl.search.fidelity.budget import Budget
from archdsl.search.seed_stats import Standing

# -- a trial's user attrs ------------------------------------------------------------------------
DIGEST_ATTR = "digest"  # the design's Arch.digest(): one design, one digest
SPEC_ATTR = "spec"  # the canonical .arch text, so that any machine can report the design
SHORT_ID_ATTR = "short_id"
N_MSA_ATTR = "n_msa"
LAYOUT_ATTR = "layout"  # `c1:CC c2:CM ...`: where the MSAs are (space.layout_text)
METRICS_ATTR = "metrics"  # every value measured (the objectives' and more), on validation images
SEED_VALUES_KEY = "accuracy_seeds"  # in `metrics` with --seeds N > 1: the accuracy on each paired seed
STDERR_KEY = "accuracy_stderr"  # ... and the standard error of their mean (the trial's accuracy)
STRATEGY_ATTR = "strategy"  # what queued the trial: buildup, race, leaders, redraw (also a study attr)
BUILDUP_STEP_ATTR = "buildup_step"  # a build-up trial's step: `base`, `+1 MSA in c3`
ENDPOINT_ATTR = "endpoint"  # a --seed-endpoints trial: resnet, alternet, swin-like
# An extra-seed trial (racing, --max-seeds): the paired seed indices it trained its design on; a design's
# other trials (without the attr) trained indices 0..--seeds-1.
SEED_INDICES_ATTR = "seed_indices"
SEED_BASE_ATTR = "seed_base"  # a settle-stage trial's first paired seed index: fresh seeds, after the walk's own
RUNG_ATTR = "rung"  # a build-up trial at a raised budget: its rung on the ladder (absent: 0, the first budget)
COPY_ATTR = "copy_of"  # the trial drew the design of this (earlier) trial
CLAIM_ATTR = "claimed"  # the trial looked, found no twin and measures its design (`twin_decision`)
FAIL_REASON_ATTR = "fail_reason"
PRUNED_REASON_ATTR = "pruned_reason"
DIR_ATTR = "dir"  # the trial's folder of files
RANK_DIGESTS_ATTR = "rank_digests"  # under torchrun: the digest of the design each rank of the group trained
SIM_SECONDS_ATTR = "sim_seconds"  # a replayed trial's simulated time
# The CPU seconds of a trial's measuring (training, validation and test scoring, analyses), every thread of its
# process; a replayed trial's: its table runs' recorded CPU (absent where the table records only wall time).
CPU_SECONDS_ATTR = "cpu_seconds"
TABLE_SEED_ATTR = "table_seed"  # the seed of the table run that answered a replayed trial
# The first words of a FAIL that says nothing about the design: its worker died, or a bug stopped the search.
WORKER_STOPPED = "worker stopped"
SEARCH_STOPPED = "stopped the search"
# User attrs that describe one run of a trial, not its design: a retry starts without them.
RUN_ATTRS = (FAIL_REASON_ATTR, PRUNED_REASON_ATTR, METRICS_ATTR, COPY_ATTR, CLAIM_ATTR, DIR_ATTR)

State = Literal["COMPLETE", "PRUNED", "FAIL"]  # a verdict's
_Record = TypeVar("_Record", bound=BaseModel)


@dataclass(frozen=True)
class Measured:
    """What a study knows of one design at one budget: its verdict's state, the lead objective's value (the mean
    over the paired seeds; None when it failed or was pruned), each paired seed's value (seed index -> value,
    pooled over the design's trials at that budget) and the seed indices a race could not measure."""

    state: State
    value: float | None
    seeds: Mapping[int, float] = field(default_factory=dict)
    lost: frozenset[int] = frozenset()


# (design digest, budget rung) -> what is measured there: what the build-up walk reads (walk.buildup.walk)
Measurements = Mapping[tuple[str, int], Measured]

# -- a trial's system attrs: the worker of a running journal trial (storage.WorkerHeartbeat) --------
HOST_ATTR = "archdsl:host"
PID_ATTR = "archdsl:pid"
BEAT_ATTR = "archdsl:heartbeat"  # time.time() of the worker's last beat
REPAIRED_ATTR = "archdsl:repaired"  # a trial whose creation record `archdsl study repair` rebuilt
SEALED_MARK = "archdsl:sealed"  # the trial sealed its test figures on the study (`seal_test`): none is a figure

# -- the study's user attrs ----------------------------------------------------------------------
OBJECTIVES_ATTR = "objectives"  # the objectives' names, comma-separated (the study's metric names too)
BASE_ATTR = "base"  # the base design's name
BASE_DIGEST_ATTR = "base_digest"  # ... and digest, with `searched`: the space a study searches
SEARCHED_ATTR = "searched"
FIDELITY_ATTR = "fidelity"  # `train`, or the `table:...` its trials are replayed from
SEEDS_ATTR = "seeds"  # the paired seeds (--seeds) each design is measured on
COMMAND_ATTR = "command"  # the command line that reproduces the study
# The design the build-up walk kept last, the search's answer, at the budget its last verdict settled at: its
# `design_key` (the digest, `@rung` above the first budget; a study from before the budgets: the digest alone).
WALK_END_ATTR = "buildup_end"
WALK_STEPS_ATTR = "buildup_steps"  # the walk's verdicts (`RecordedStep`), as the runner's end saw them
WALK_FAILED_ATTR = "buildup_failed_seeds"  # the seeds on which a design failed to learn (`RecordedFailedSeed`)
WALK_SETTLE_ATTR = "buildup_settle"  # the settle stage, budget by budget (`RecordedSettle`)
WALK_CHOICES_ATTR = "buildup_choices"  # the knobs the walk chose as stages took their first MSA (`RecordedChoice`)
PROTOCOL_ATTR = "protocol"  # how every trial is trained and scored (`Protocol`): seeds, splits, budgets, recipe
RANDOM_PICK_ATTR = "random_pick"  # a replayed study's: what random designs within its CPU score (`RandomPick`)
TEST_ATTR_PREFIX = "test:"  # + a chosen trial's number: its design's test figures, opened by the final test
SEALED_ATTR_PREFIX = "sealed:"  # + a trial's number: the test figures it measured, sealed until the final test
NOT_USED = "not used for selection"  # how every rendering labels the test figures
NO_TABLE_FIGURES = "no test figures in this table"

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


class Protocol(BaseModel):
    """How a study trains and scores every trial, as its runner records it (`PROTOCOL_ATTR`): what the report's
    checklist says and what its retrain commands give `archdsl train`. Counts are None for a replayed study (the
    table's runs were trained as its description says)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    dataset: str
    data_root: str | None = None
    seed: int  # --seed
    seeds: int  # the paired seeds every design is measured on (--seeds)
    max_seeds: int  # the most a race measures (--max-seeds; --seeds without racing)
    keep: str = "beyond-noise"  # how the build-up walk kept a candidate (--keep; an older study: the paired test)
    knobs: str = "base"  # what the walk gave a new MSA's searched knobs (--knobs; an older study: the base's)
    # Paired seed index i trains with training_seeds[i] (every design alike; a replayed study: the seed of the table
    # run that answers index i); empty where a replayed trial draws one run of its design (--seeds 1).
    training_seeds: list[int]
    budgets: list[Budget]  # the ladder of budgets, rung by rung (one: the study's fidelity), then the settle stage's
    settle_steps: int = 0  # how many of `budgets`, the last ones, are the settle stage's (--settle-steps)
    train_images: int | None = None  # the training split less the validation images: what --subset is a share of
    held_out: int | None = None  # validation images held out of the training split (--val-split)
    validation_images: int | None = None  # those that score every trial (--val-subset of them)
    test_images: int | None = None  # the test split: sealed by each trial, opened once, at the end
    recipe: str = "fast"
    train_settings: dict[str, Any] = {}  # the recipe settings given (the dataset's card included)
    batch_chosen: str | None = None  # why the batch size was chosen from the data (`fidelity.batch`), where it was
    device: str = "auto"
    optimize: bool = True
    # The intra-op threads that trained paired seed index 0 on a CPU (None: a GPU, a replay, or an older study): CPU
    # training's figures depend on it, so the retrain command sets it (OMP_NUM_THREADS).
    threads: int | None = None
    table: str | None = None  # a replayed study's table (--fidelity table:...)

    def budget_text(self, rung: int) -> str:
        """`2 epochs on 86 images (100 %)`: budget rung `rung` (`budget rung N` where the protocol holds none)."""
        return self.budgets[rung].text(self.train_images) if rung < len(self.budgets) else f"budget rung {rung}"


class RecordedStep(BaseModel):
    """One verdict of the build-up walk as the report reads it (`walk.buildup.Step`, its design by digest): the
    step, its value and state at the budget rung it settled at, whether it was kept, where it stood against the
    incumbent at each budget (rung, standing), and whether it was still moving at the top of the ladder."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    step: str  # `base`, `+1 MSA in c3`
    digest: str
    value: float | None
    accepted: bool
    state: State = "COMPLETE"
    rung: int = 0
    standings: list[tuple[int, Standing]] = []
    moving: bool = False

    @property
    def key(self) -> str:
        """Its design at its budget, as `design_key` names it."""
        return self.digest if self.rung == 0 else f"{self.digest}@{self.rung}"


class RecordedFailedSeed(BaseModel):
    """A paired seed on which a design failed to learn (`walk.buildup.FailedSeed`, its design by digest): its value
    at budget `rung`, the median of the design's other seeds there, and the seed index that stood in for it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    digest: str
    rung: int
    index: int
    value: float
    typical: float
    replacement: int


class RecordedSettle(BaseModel):
    """The settle stage at one budget (`walk.buildup.Settled`): each shortlisted design's mean on its fresh paired
    seeds there (by digest; None: it failed), the best, and whether it beats every other beyond the noise."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    rung: int
    values: list[tuple[str, float | None]]
    best: str
    called: bool


class RecordedChoice(BaseModel):
    """A stage's knob the walk chose as the stage took its first MSA (`walk.buildup.Choice`): each value's mean over
    the paired seeds at budget `rung` (None: failed), and the value chosen."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    stage: str
    knob: str
    rung: int
    values: list[tuple[int | str, float | None]]
    chosen: int | str


class RandomPick(BaseModel):
    """What a random pick of designs within a replayed study's CPU would be expected to score, from its table:
    designs drawn at random without repeats, each measured as the study measures them (its paired seeds' runs and
    their CPU), until the next would pass `cpu_seconds`; `expected_best` is the mean, over `draws` random orders,
    of the best mean validation top-1 among the designs measured (`designs`: how many, on average)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    cpu_seconds: float
    expected_best: float
    designs: float
    draws: int


ACTIVE = (TrialState.RUNNING, TrialState.WAITING)


def read_protocol(study: optuna.Study) -> Protocol | None:
    """How `study` trains and scores its trials, as its runner recorded it (None: not recorded, or unreadable)."""
    return _read(study, PROTOCOL_ATTR, Protocol)


def read_walk_steps(study: optuna.Study) -> tuple[RecordedStep, ...]:
    """The build-up walk's verdicts as the runner's end recorded them (() for a sampler's study, or none yet)."""
    recorded = study.user_attrs.get(WALK_STEPS_ATTR)
    try:
        return tuple(RecordedStep.model_validate(step) for step in recorded or ())
    except (ValidationError, TypeError):
        return ()


def read_failed_seeds(study: optuna.Study) -> tuple[RecordedFailedSeed, ...]:
    """The seeds on which the walk found a design failed to learn, as the runner's end recorded them."""
    return _read_list(study, WALK_FAILED_ATTR, RecordedFailedSeed)


def read_settle(study: optuna.Study) -> tuple[RecordedSettle, ...]:
    """The walk's settle stage, budget by budget, as the runner's end recorded it (() without one)."""
    return _read_list(study, WALK_SETTLE_ATTR, RecordedSettle)


def read_choices(study: optuna.Study) -> tuple[RecordedChoice, ...]:
    """The knobs the walk chose as stages took their first MSA, as the runner's end recorded them (() without)."""
    return _read_list(study, WALK_CHOICES_ATTR, RecordedChoice)


def _read_list(study: optuna.Study, attr: str, model: type[_Record]) -> tuple[_Record, ...]:
    """The study attr `attr` as a tuple of `model`s (() where absent, or written by a version it does not read)."""
    try:
        return tuple(model.model_validate(item) for item in study.user_attrs.get(attr) or ())
    except (ValidationError, TypeError):
        return ()


def read_random_pick(study: optuna.Study) -> RandomPick | None:
    """A replayed study's random pick within its CPU (None: not recorded)."""
    return _read(study, RANDOM_PICK_ATTR, RandomPick)


def _read(study: optuna.Study, key: str, model: type[_Record]) -> _Record | None:
    """The study attr `key` as a `model` (None where absent, or written by a version it does not read)."""
    try:
        return model.model_validate(study.user_attrs[key]) if key in study.user_attrs else None
    except ValidationError:
        return None


def cpu_seconds(found: Iterable[FrozenTrial]) -> tuple[float, int]:
    """The CPU seconds of the trials that recorded theirs (`CPU_SECONDS_ATTR`), and how many finished trials that
    measured something (no copy) recorded none."""
    total, missing = 0.0, 0
    for t in found:
        if CPU_SECONDS_ATTR in t.user_attrs:
            total += float(t.user_attrs[CPU_SECONDS_ATTR])
        elif t.state in FINISHED and not is_copy(t) and DIGEST_ATTR in t.user_attrs:
            missing += 1
    return total, missing


def trials(study: optuna.Study, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
    """The study's trials (in `states`), in number order: the one scan of a study's trials."""
    return study.get_trials(deepcopy=False, states=states)


def pareto_front(study: optuna.Study) -> list[FrozenTrial]:
    """The Pareto front of a multi-objective study (Optuna's), without a race's extra seeds."""
    return [t for t in study.best_trials if not is_extra_seed(t)]


def is_copy(trial: FrozenTrial) -> bool:
    """A trial that drew a design the study had already (never measured, never counted)."""
    return COPY_ATTR in trial.user_attrs


def is_verdict(trial: FrozenTrial) -> bool:
    """Whether a finished trial says something about its design (not an interrupted run): COMPLETE and
    PRUNED do; FAIL does when the design itself failed (diverged, out of memory), not when its worker
    was interrupted or killed or an error in archdsl stopped the search, and not for a copy."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    reason = trial.user_attrs.get(FAIL_REASON_ATTR)
    return (
        trial.state == TrialState.FAIL
        and reason is not None
        and not str(reason).startswith((WORKER_STOPPED, SEARCH_STOPPED))
    )


def is_extra_seed(trial: FrozenTrial) -> bool:
    """A race's trial of a design already measured: more seeds of it, not another design."""
    return SEED_INDICES_ATTR in trial.user_attrs


def is_active(trial: FrozenTrial) -> bool:
    """Running, or waiting to run: a worker measures it now or will."""
    return trial.state in ACTIVE


def digest_of(trial: FrozenTrial) -> str | None:
    return trial.user_attrs.get(DIGEST_ATTR)


def rung_of(trial: optuna.Trial | FrozenTrial) -> int:
    """The budget rung a trial measured its design at (0, the first budget, unless the walk raised it)."""
    return int(trial.user_attrs.get(RUNG_ATTR, 0))


def design_key(trial: FrozenTrial) -> str:
    """One key per design and budget: its digest, with `@rung` above the first budget (a trial recorded without a
    digest is a design of its own). Values pool under one key; never across budgets."""
    key = trial.user_attrs.get(DIGEST_ATTR, f"trial {trial.number}")
    rung = rung_of(trial)
    return key if rung == 0 else f"{key}@{rung}"


def seed_indices(trial: optuna.Trial | FrozenTrial, seeds: int) -> tuple[int, ...]:
    """The paired seed indices a trial trains its design on: an extra-seed trial's `seed_indices`,
    else 0..seeds-1 (`--seeds`), from `seed_base` on for the settle stage's."""
    given = trial.user_attrs.get(SEED_INDICES_ATTR)
    first = int(trial.user_attrs.get(SEED_BASE_ATTR, 0))
    return tuple(int(i) for i in given) if given else tuple(range(first, first + seeds))


def seed_values(trial: FrozenTrial) -> dict[int, float]:
    """Seed index -> a complete trial's accuracy there (its one accuracy with --seeds 1); {} without one."""
    if trial.state != TrialState.COMPLETE:
        return {}
    metrics = trial.user_attrs.get(METRICS_ATTR, {})
    per_seed = metrics.get(SEED_VALUES_KEY) or ([metrics["accuracy"]] if "accuracy" in metrics else [])
    first = int(trial.user_attrs.get(SEED_BASE_ATTR, 0))
    indices = trial.user_attrs.get(SEED_INDICES_ATTR) or range(first, first + len(per_seed))
    return {int(index): float(value) for index, value in zip(indices, per_seed, strict=False)}


def seed_values_by_design(found: Iterable[FrozenTrial]) -> dict[str, dict[int, float]]:
    """Design key (`design_key`: the digest, and the budget above the first) -> seed index -> the design's
    accuracy there, pooled over its complete trials (the first trial of an index counts: a design is measured
    once per index and budget)."""
    values: dict[str, dict[int, float]] = {}
    for t in sorted(found, key=lambda t: t.number):
        if digest_of(t) is not None:
            for index, value in seed_values(t).items():
                values.setdefault(design_key(t), {}).setdefault(index, value)
    return values


def design_seed_values(found: Iterable[FrozenTrial], key: str) -> dict[int, float]:
    """Seed index -> the accuracy there of the design (and budget) `key` (`seed_values_by_design`)."""
    return seed_values_by_design(t for t in found if design_key(t) == key).get(key, {})


def first_trials(found: Iterable[FrozenTrial]) -> dict[str, FrozenTrial]:
    """Each design's first trial: its first COMPLETE trial that is no extra seed (in number order)."""
    firsts: dict[str, FrozenTrial] = {}
    for t in sorted(found, key=lambda t: t.number):
        if t.state == TrialState.COMPLETE and not is_extra_seed(t):
            firsts.setdefault(design_key(t), t)
    return firsts


def measured_designs(found: Iterable[FrozenTrial]) -> int:
    """What --n-trials counts: the distinct designs with a verdict. A trial interrupted or lost with its
    worker does not count (its design runs again), nor a copy, nor a design measured twice (a worker
    killed in the middle of its look for a twin: `twin_decision`)."""
    return len({design_key(t).partition("@")[0] for t in found if t.state in FINISHED and is_verdict(t)})


def taken_designs(found: Iterable[FrozenTrial]) -> set[str]:
    """The designs that have a verdict or are being (or waiting to be) measured."""
    return {
        digest
        for t in found
        if (digest := digest_of(t)) is not None and not is_copy(t) and (is_verdict(t) or is_active(t))
    }


def design_verdicts(found: Iterable[FrozenTrial]) -> dict[str, FrozenTrial]:
    """Design key (`design_key`) -> the trial whose verdict stands for the design at that budget: a COMPLETE one
    over a failed or pruned one, else the last (extra seeds and trials without a verdict left out)."""
    verdicts: dict[str, FrozenTrial] = {}
    for t in sorted(found, key=lambda t: t.number):
        if digest_of(t) is None or not is_verdict(t) or is_extra_seed(t):
            continue
        key = design_key(t)
        if key not in verdicts or verdicts[key].state != TrialState.COMPLETE:
            verdicts[key] = t
    return verdicts


def lost_seeds(found: Iterable[FrozenTrial]) -> set[tuple[str, int]]:
    """(design key, seed index) of each race's extra seed that failed or was pruned: a seed a race could not
    measure."""
    return {
        (design_key(t), int(i))
        for t in found
        if is_extra_seed(t) and is_verdict(t) and t.state != TrialState.COMPLETE
        for i in t.user_attrs[SEED_INDICES_ATTR]
    }


def measurements(found: Iterable[FrozenTrial], lead: str, lead_index: int = 0) -> dict[tuple[str, int], Measured]:
    """What the study has measured of each design at each budget, for the build-up walk (`walk.buildup.walk`): its
    verdict's state and value of the lead objective (`lead`, at `lead_index` of the trial's values), and for the
    accuracy its values on every paired seed (pooled over its trials at that budget) and the seeds a race lost."""
    found = list(found)
    pooled, lost = seed_values_by_design(found), lost_seeds(found)
    out: dict[tuple[str, int], Measured] = {}
    for key, t in design_verdicts(found).items():
        complete = t.state == TrialState.COMPLETE and t.values is not None
        seeds = pooled.get(key, {}) if lead == "accuracy" else {}
        out[(str(digest_of(t)), rung_of(t))] = Measured(
            state=t.state.name,  # type: ignore[arg-type]  # COMPLETE, PRUNED or FAIL: a verdict's
            value=float(t.values[lead_index]) if complete else None,
            seeds=seeds,
            lost=frozenset(i for k, i in lost if k == key),
        )
    return out


def claimed_seed_indices(found: Iterable[FrozenTrial], key: str) -> tuple[set[int], bool]:
    """The seed indices of design (and budget) `key` that its extra-seed trials have measured or are measuring,
    and whether any of them is still active (a copy, with no verdict, is no pending measurement)."""
    claimed: set[int] = set()
    pending = False
    for t in found:
        if design_key(t) == key and is_extra_seed(t) and (is_verdict(t) or is_active(t)):
            claimed.update(int(i) for i in t.user_attrs[SEED_INDICES_ATTR])
            pending |= is_active(t)
    return claimed, pending


def is_measuring(found: Iterable[FrozenTrial], digest: str, indices: list[int] | None, rung: int = 0) -> bool:
    """Whether a running trial measures design `digest` at budget `rung` on seed indices `indices` (None: a
    design's own)."""
    return any(
        t.state == TrialState.RUNNING
        and digest_of(t) == digest
        and rung_of(t) == rung
        and t.user_attrs.get(SEED_INDICES_ATTR) == indices
        for t in found
    )


def twin_decision(
    found: Iterable[FrozenTrial], number: int, digest: str, indices: list[int] | None = None, rung: int = 0
) -> tuple[str, FrozenTrial | None]:
    """What trial `number`, which has written `digest`, does with its design on seeing `found`:
    ("copy", twin) when `twin` has it, ("wait", twin) while `twin` is deciding, or ("measure", None).

    Every trial writes its digest, looks, then writes either `copy_of` or its claim (`CLAIM_ATTR`).
    A twin has the design when it has a verdict on it, is running and has claimed it, is running with a
    lower number (it measures it or finds the one that does), or is waiting to (a retry) with a lower
    number. A running twin with a higher number that has written its digest but not the verdict of its
    look is deciding: its look may have missed this trial's digest, so this trial waits for it (it
    becomes a copy or claims) rather than claim as well. A trial only waits for higher numbers, so the
    waits end; of the workers that draw one design at once, exactly one measures it, whatever the order
    of their writes and looks (tests/test_search_workers.py tries every order). An extra-seed trial's
    twins are those on the same seed indices (`indices`): a race measures the design again elsewhere; and a
    trial's twins are those at its budget (`rung`): the walk measures a design again at a raised budget.
    """
    deciding = None
    for t in found:
        if t.number == number or digest_of(t) != digest or is_copy(t):
            continue
        if t.user_attrs.get(SEED_INDICES_ATTR) != indices or rung_of(t) != rung:
            continue
        if is_verdict(t):
            return "copy", t
        earlier = t.number < number
        if (t.state == TrialState.RUNNING and (earlier or CLAIM_ATTR in t.user_attrs)) or (
            t.state == TrialState.WAITING and earlier
        ):
            return "copy", t
        if t.state == TrialState.RUNNING:
            deciding = t
    return ("wait", deciding) if deciding is not None else ("measure", None)


def workers_at_work(found: Iterable[FrozenTrial]) -> int:
    """The trials running now that measure something (not copies): the workers at work."""
    return sum(t.state == TrialState.RUNNING and not is_copy(t) for t in found)


def search_ended(found: Iterable[FrozenTrial]) -> bool:
    """Whether no trial of the study is active: every worker is done, and the last one out may open
    the chosen designs' test figures."""
    return not any(is_active(t) for t in found)


class HeldOutFigures(BaseModel):
    """Test top-1 on paired seeds, held out of every choice: what one trial sealed (`seal_test`), or a chosen
    design's figures over every seed it was measured on, opened by the final test (`open_test`). Either says
    whose it is (`trial`, `digest`): a study attr anyone who can write the storage can write, it is checked
    when read (`checked_figures`), and one that does not check is never a figure."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    seeds: list[int]  # the training seeds (a replayed design's: the table runs' seeds)
    accuracy: list[float]  # test top-1 per seed, a fraction; empty when there is none (`note` says why)
    indices: list[int] = []  # the paired seed index of each seed
    source: Literal["trained", "table"] = "trained"
    note: str = ""
    # Whose: the trial that sealed them (a seal) or the design's first trial (opened figures), and the design's
    # digest. None in the records of an archdsl that did not write them (those do not check).
    trial: int | None = None
    digest: str | None = None
    # Figures that name no trial (`trial` None: an earlier archdsl's, or edited), or opened from such a seal: whose
    # they are cannot be checked, so they are shown marked `UNCHECKED` (and never used), not called damaged.
    unchecked: bool = False


# What the figures that name no trial are shown with, and the way to checked ones.
UNCHECKED = (
    "unchecked (sealed by an earlier archdsl: they name no trial, so whose they are is not known; a study run again "
    "under a new --study-name seals checked ones)"
)


class DamagedFigures(ValueError):
    """Held-out figures that do not check (`checked_figures`); the message says what is wrong with them."""


def checked_figures(value: object, number: int, digest: str | None) -> HeldOutFigures | None:
    """The held-out figures a study attr holds (`value`) for trial `number` of design `digest`, checked: None
    when it holds none, a DamagedFigures unless they are trial `number`'s, of that design, with as many seeds
    as seed indices and a finite fraction for each seed (or none at all: `note` says why). Figures that name no
    trial (an earlier archdsl's) are checked but for whose they are, and marked `unchecked`. The note is made
    safe to print: it is text from the storage, as every other."""
    if value is None:  # never written, or removed
        return None
    try:
        figures = HeldOutFigures.model_validate(value)
    except ValidationError:
        raise DamagedFigures("not a record of test figures") from None
    seeds, indices, accuracy = figures.seeds, figures.indices, figures.accuracy
    unchecked = figures.unchecked or figures.trial is None
    if figures.trial is not None and figures.trial != number:
        raise DamagedFigures(f"they are trial {figures.trial}'s")
    if figures.trial is not None and figures.digest != digest:
        raise DamagedFigures("they name another design")
    if len(seeds) != len(indices):
        raise DamagedFigures(f"{_count(len(seeds), 'seed')} but {_count(len(indices), 'seed index', 'seed indices')}")
    if len(set(indices)) != len(indices):
        raise DamagedFigures("a seed index twice")
    if accuracy and len(accuracy) != len(seeds):
        raise DamagedFigures(f"{_count(len(accuracy), 'figure')} for {_count(len(seeds), 'seed')}")
    outside = next((v for v in accuracy if not 0 <= v <= 1), None)  # NaN is no fraction either
    if outside is not None:
        raise DamagedFigures(f"an accuracy of {outside:g}, not a fraction in [0, 1]")
    return figures.model_copy(update={"note": visible(figures.note), "unchecked": unchecked})


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or f'{one}s'}"


def seal_test(trial: optuna.Trial, figures: HeldOutFigures) -> None:
    """Seal the test figures `trial` measured on its study, where nothing that chooses reads them, stamped with
    whose they are (the trial, its design); the trial keeps a mark that it sealed them (`SEALED_MARK`), so
    that a seal removed from the study is told from one never written."""
    whose = figures.model_copy(update={"trial": trial.number, "digest": trial.user_attrs.get(DIGEST_ATTR)})
    trial.study.set_user_attr(f"{SEALED_ATTR_PREFIX}{trial.number}", whose.model_dump())
    storage_of(trial.study).set_trial_system_attr(trial_id(trial), SEALED_MARK, True)


def open_test(study: optuna.Study, number: int, design_trials: Iterable[FrozenTrial]) -> HeldOutFigures:
    """Open the seals of a chosen design's complete trials (`number`: its first trial) and store its test figures
    on every seed index measured, pooled as its validation values are (`seed_values_by_design`: the first trial
    of an index counts), on the study: the figures the report shows, labelled `NOT_USED`. Each seal is checked
    (`checked_figures`): a damaged or missing one leaves the design without figures, and the note names it."""
    design = sorted((t for t in design_trials if t.state == TrialState.COMPLETE), key=lambda t: t.number)
    seeds: dict[int, int] = {}
    values: dict[int, float] = {}
    source: Literal["trained", "table"] = "trained"
    notes: list[str] = []  # why there are no figures, the gravest first
    unchecked = False  # a seal that names no trial (an earlier archdsl's) was opened
    for t in design:
        try:
            seal = checked_figures(study.user_attrs.get(f"{SEALED_ATTR_PREFIX}{t.number}"), t.number, digest_of(t))
        except DamagedFigures as err:
            notes.insert(0, f"the sealed test figures of trial {t.number} are damaged ({err}): none shown")
            continue
        if seal is None:
            if t.system_attrs.get(SEALED_MARK):
                notes.insert(0, f"the seal of trial {t.number} is missing (removed from the study): none shown")
            else:
                notes.append("no sealed test figures (its trials ran before trials sealed them)")
            continue
        source, notes = seal.source, [*notes, *([seal.note] if seal.note else [])]
        unchecked = unchecked or seal.unchecked
        for position, index in enumerate(seal.indices):
            seeds.setdefault(index, seal.seeds[position])
            if seal.accuracy:
                values.setdefault(index, seal.accuracy[position])
    indices = sorted(seeds)
    whole = indices and not notes and all(i in values for i in indices)
    note = "" if whole else (notes or ["no sealed test figures (its trials ran before trials sealed them)"])[0]
    figures = HeldOutFigures(
        seeds=[seeds[i] for i in indices], accuracy=[values[i] for i in indices] if whole else [], indices=indices,
        source=source, note=note, trial=number, digest=digest_of(design[0]) if design else None, unchecked=unchecked,
    )  # fmt: skip
    study.set_user_attr(f"{TEST_ATTR_PREFIX}{number}", figures.model_dump())
    return figures


def read_held_out(study: optuna.Study, found: Iterable[FrozenTrial] | None = None) -> dict[int, HeldOutFigures]:
    """Trial number -> its design's test figures, as the final test opened them on `study` (`found`: its trials,
    when the caller has them), each checked (`checked_figures`): damaged ones are figures without accuracy
    whose note names the trial."""
    digests = {t.number: digest_of(t) for t in (trials(study) if found is None else found)}
    opened: dict[int, HeldOutFigures] = {}
    for key, value in study.user_attrs.items():
        number = key[len(TEST_ATTR_PREFIX) :]
        if not key.startswith(TEST_ATTR_PREFIX) or not number.isdecimal():  # int() reads these
            continue
        try:
            if int(number) not in digests:
                raise DamagedFigures("the study has no such trial")
            figures = checked_figures(value, int(number), digests[int(number)])
        except DamagedFigures as err:
            note = f"the test figures opened for trial {number} are damaged ({err}): none shown"
            figures = HeldOutFigures(seeds=[], accuracy=[], note=note)
        if figures is not None:
            opened[int(number)] = figures
    return opened
