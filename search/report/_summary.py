"""A study read back from its storage alone (designs are stored as `.arch` text): its trials as typed rows,
the winners (the best trial, or the Pareto front), and the words every rendering shares (`_report_*`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.search._optuna_private import retried_trial
from archdsl.search.objectives import OBJECTIVES, Objective
from archdsl.search.report._numbers import estimate_text, mean_text
from archdsl.search.seed_stats import SeedEstimate, estimate, tied_with
from archdsl.search.space import msa_per_stage
from archdsl.search.studies.record import (
    BUILDUP_STEP_ATTR,
    COMMAND_ATTR,
    DIGEST_ATTR,
    FAIL_REASON_ATTR,
    LAYOUT_ATTR,
    METRICS_ATTR,
    N_MSA_ATTR,
    NOT_USED,
    OBJECTIVES_ATTR,
    PRUNED_REASON_ATTR,
    SHORT_ID_ATTR,
    SIM_SECONDS_ATTR,
    SPEC_ATTR,
    STRATEGY_ATTR,
    UNCHECKED,
    WALK_END_ATTR,
    HeldOutFigures,
    Protocol,
    RandomPick,
    RecordedChoice,
    RecordedFailedSeed,
    RecordedSettle,
    RecordedStep,
    cpu_seconds,
    design_key,
    first_trials,
    is_copy,
    pareto_front,
    read_choices,
    read_failed_seeds,
    read_held_out,
    read_protocol,
    read_random_pick,
    read_settle,
    read_walk_steps,
    rung_of,
    seed_values,
    seed_values_by_design,
    trials,
)
from archdsl.search.walk.registry import walks

PRUNED_MARK = "✂"  # beside a pruned trial's value: the last one it reported, not a final one


@dataclass(frozen=True)
class TrialRow:
    """One trial as the report shows it: state, parameters, values, metrics, design and a note (why it failed)."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    params: dict[str, Any]
    values: tuple[float, ...] | None
    metrics: dict[str, Any]
    n_msa: int | None
    short_id: str | None
    spec: str | None
    note: str  # why it failed or was pruned
    layout: str | None = None  # `c1:CC c2:CM ...` (space.layout_text)
    seconds: float | None = None  # from start to finish (None while it runs); simulated for a replayed trial
    simulated: bool = False  # `seconds` is a replayed trial's simulated time (archdsl.search.fidelity.replay)
    step: str | None = None  # a build-up trial's step: `base`, `+1 MSA in c3`
    digest: str | None = None  # the design's (Arch.digest)
    rung: int = 0  # the budget rung it trained at (record.rung_of: 0, the first budget, unless the walk raised it)
    # A design's first trial: its values on every seed index measured, its own and a race's extra-seed
    # trials' (record.seed_values_by_design), by index; None: the trial's own values.
    pooled_seeds: tuple[float, ...] | None = None

    @property
    def msa_per_stage(self) -> dict[str, int]:
        return msa_per_stage(self.layout) if self.layout else {}

    @property
    def design_key(self) -> str:
        """One key per design and budget, as `record.design_key` names it: its digest, `@rung` above the first
        budget (a trial recorded without a digest is a design of its own)."""
        key = self.digest or f"trial {self.number}"
        return key if self.rung == 0 else f"{key}@{self.rung}"

    own_seeds: tuple[float, ...] = ()  # the trial's own values by seed index (a complete trial's)

    @property
    def seed_values(self) -> tuple[float, ...]:
        """The accuracy on each paired seed (one value with --seeds 1), pooled over the design's trials for
        its first one; () without an accuracy."""
        return self.own_seeds if self.pooled_seeds is None else self.pooled_seeds


@dataclass(frozen=True)
class StudySummary:
    """A study read back: its objectives and strategy, every trial as a row, and the best trials (or Pareto front)."""

    name: str
    objectives: tuple[Objective, ...]
    strategy: str
    rows: tuple[TrialRow, ...]  # every trial but the copies
    best: tuple[TrialRow, ...]  # the best trial, or the Pareto front (several objectives)
    command: str | None = None  # the command line that reproduces the study
    copies: int = 0  # trials that drew a design the study had already (drawn again, not counted)
    # Designs the best does not beat beyond the noise (seed_stats.tied_with; a single-objective accuracy
    # study with paired seeds), one row per design, by trial number.
    ties: tuple[TrialRow, ...] = ()
    # Trial number -> its design's test figures, measured after the search (archdsl.search.report.final_test):
    # for the report only; nothing above was chosen with them.
    held_out: dict[int, HeldOutFigures] = field(default_factory=dict)
    protocol: Protocol | None = None  # how every trial trained and was scored (None: a study from before it)
    steps: tuple[RecordedStep, ...] = ()  # the build-up walk's verdicts, as the runner's end recorded them
    cpu_seconds: float = 0.0  # the CPU of the trials that recorded theirs (record.cpu_seconds)
    cpu_unknown: int = 0  # ... and the measured trials that recorded none
    random_pick: RandomPick | None = None  # a replayed study's: random designs within its CPU, from the table
    failed_seeds: tuple[RecordedFailedSeed, ...] = ()  # the seeds on which the walk found a design did not learn
    choices: tuple[RecordedChoice, ...] = ()  # the knobs the walk chose as stages took their first MSA
    settled: tuple[RecordedSettle, ...] = ()  # the walk's settle stage, budget by budget

    def budget_text(self, rung: int) -> str:
        """`2 epochs on 86 images (100 %)`: budget rung `rung` as the study's protocol records it."""
        return self.protocol.budget_text(rung) if self.protocol is not None else f"budget rung {rung}"

    def budget_label(self, rung: int) -> str:
        """Budget rung `rung` in the fewest words that tell the ladder's budgets apart: `2 epochs` where every
        budget trains on the same images, else as `budget_text`."""
        budgets = self.protocol.budgets if self.protocol is not None else []
        if rung < len(budgets) and all(b.subset == budgets[0].subset for b in budgets):
            return budgets[rung].epochs_text()
        return self.budget_text(rung)

    @property
    def laddered(self) -> bool:
        """Whether the study's walk climbs a ladder of budgets (its verdicts settle at one of several)."""
        return self.protocol is not None and len(self.protocol.budgets) > 1

    def row_of(self, key: str) -> TrialRow | None:
        """The row that shows design (and budget) `key`: its first complete trial, else its last trial."""
        found = [row for row in self.rows if row.design_key == key]
        firsts = [row for row in found if row.pooled_seeds is not None]
        shown = firsts or found[-1:]
        return shown[0] if shown else None

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.rows)

    def accuracy_estimate(self, row: TrialRow) -> SeedEstimate | None:
        """The row's accuracy over its paired seeds, with its 95 % interval (None: no accuracy objective)."""
        if "accuracy" not in {o.name for o in self.objectives} or not row.seed_values:
            return None
        return estimate(row.seed_values, OBJECTIVES["accuracy"].bounds)

    @property
    def ties_apply(self) -> bool:
        """Whether the study has ties to tell: one best design, on an accuracy measured on paired seeds."""
        return len(self.objectives) == 1 and self.objectives[0].name == "accuracy" and len(self.best) == 1


def study_objectives(study: optuna.Study) -> tuple[Objective, ...]:
    """The objectives a study records (its `objectives` attr), or `value0`, `value1`, ... for a study made elsewhere."""
    names = str(study.user_attrs.get(OBJECTIVES_ATTR, "")).split(",")
    if len(names) == len(study.directions) and all(n in OBJECTIVES for n in names):
        return tuple(OBJECTIVES[n] for n in names)
    # A study made outside archdsl: name the values by position.
    return tuple(
        Objective(f"value{i}", d.name.lower(), OBJECTIVES["accuracy"].cost, "", "")  # type: ignore[arg-type]
        for i, d in enumerate(study.directions)
    )


def summarize_study(study: optuna.Study) -> StudySummary:
    """Every trial of a study as a `TrialRow`, and the winners: one row per design."""
    objectives = study_objectives(study)
    found = trials(study)
    firsts = first_trials(found)
    pooled = seed_values_by_design(found)
    rows = tuple(
        trial_row(t, pooled.get(design_key(t)) if firsts.get(design_key(t)) is t else None)
        for t in found
        if not is_copy(t)
    )
    by_number = {r.number: r for r in rows}
    best: list[TrialRow] = []
    if firsts:
        # One row per design (two workers may have measured one design at the same moment).
        for number in sorted(_best_numbers(study, objectives, rows, firsts)):
            if by_number[number].design_key not in {r.design_key for r in best}:
                best.append(by_number[number])
    spent, unknown = cpu_seconds(found)
    summary = StudySummary(
        name=study.study_name,
        objectives=objectives,
        strategy=str(study.user_attrs.get(STRATEGY_ATTR, "?")),
        rows=rows,
        best=tuple(best),
        command=study.user_attrs.get(COMMAND_ATTR),
        copies=len(found) - len(rows),
        held_out=read_held_out(study, found),
        protocol=read_protocol(study),
        steps=read_walk_steps(study),
        cpu_seconds=spent,
        cpu_unknown=unknown,
        random_pick=read_random_pick(study),
        failed_seeds=read_failed_seeds(study),
        settled=read_settle(study),
        choices=read_choices(study),
    )
    return dataclasses.replace(summary, ties=_ties(summary))


def _best_numbers(
    study: optuna.Study, objectives: tuple[Objective, ...], rows: tuple[TrialRow, ...], firsts: dict[str, FrozenTrial]
) -> list[int]:
    """The best trial (one objective) or the Pareto front, never a race's extra seed, by number. A build-up
    walk's best is the design it kept last (as its --keep rule kept it); otherwise an accuracy is
    judged on the design's mean over every seed it was measured on, not on the seeds of its first trial; any
    other objective on the value of the design's first trial."""
    if len(objectives) > 1:
        return [t.number for t in pareto_front(study)]
    # (the walk's answer only while the study is a walk's: one resumed by a sampler is judged by its means)
    walk_end = study.user_attrs.get(WALK_END_ATTR) if walks(study.user_attrs.get(STRATEGY_ATTR)) else None
    if walk_end in firsts:
        return [firsts[walk_end].number]
    candidates = _at_one_budget([r for r in rows if r.number in {t.number for t in firsts.values()} and r.values])
    if objectives[0].name == "accuracy" and any(r.pooled_seeds for r in candidates):
        return [max((r for r in candidates if r.pooled_seeds), key=lambda r: (fmean(r.seed_values), -r.number)).number]
    sign = 1.0 if objectives[0].direction == "maximize" else -1.0
    return [max(candidates, key=lambda r: (sign * (r.values or (0.0,))[0], -r.number)).number] if candidates else []


def _at_one_budget(candidates: list[TrialRow]) -> list[TrialRow]:
    """The candidates at the budget most of them were measured at (the higher one of two as common): values at
    two budgets are never compared."""
    rungs = [row.rung for row in candidates]
    return [row for row in candidates if row.rung == max(set(rungs), key=lambda r: (rungs.count(r), r))]


def _ties(summary: StudySummary) -> tuple[TrialRow, ...]:
    """The designs tied with the one best design within the noise at its budget, each by its first complete trial
    there."""
    if not summary.ties_apply:
        return ()
    best = summary.best[0]
    firsts = {row.number: row for row in summary.rows if row.pooled_seeds is not None and row.rung == best.rung}
    others = {n: row.seed_values for n, row in firsts.items() if row.design_key != best.design_key}
    return tuple(firsts[n] for n in tied_with(best.seed_values, others, summary.objectives[0]))


def trial_row(t: FrozenTrial, pooled: dict[int, float] | None = None) -> TrialRow:
    """One trial as a `TrialRow`: its note says why it failed, was pruned or was retried; `pooled`, its
    design's values by seed index when it is the design's first trial."""
    attrs = t.user_attrs
    note = ""
    if FAIL_REASON_ATTR in attrs:
        note = str(attrs[FAIL_REASON_ATTR])
    elif t.state == TrialState.FAIL:
        note = "interrupted, or its worker stopped"
    elif PRUNED_REASON_ATTR in attrs and t.state == TrialState.PRUNED:
        note = str(attrs[PRUNED_REASON_ATTR])
    retried = retried_trial(t)
    if retried is not None:  # its worker died (killed, lost) and the design was queued again
        note = "; ".join(p for p in (f"retry of trial {retried}", note) if p)
    spec = attrs.get(SPEC_ATTR)
    seconds = t.duration.total_seconds() if t.duration is not None else None
    simulated = SIM_SECONDS_ATTR in attrs
    if simulated:  # replayed: the time the trial would have taken, not the milliseconds its replay took
        seconds = float(attrs[SIM_SECONDS_ATTR])
    return TrialRow(
        number=t.number,
        state=t.state.name,
        params=dict(t.params),
        values=tuple(t.values) if t.values is not None else None,
        metrics=dict(attrs.get(METRICS_ATTR, {})),
        n_msa=attrs.get(N_MSA_ATTR),
        short_id=attrs.get(SHORT_ID_ATTR),
        spec=spec,
        note=note,
        layout=attrs.get(LAYOUT_ATTR),
        seconds=seconds,
        step=attrs.get(BUILDUP_STEP_ATTR),
        simulated=simulated,
        digest=attrs.get(DIGEST_ATTR),
        rung=rung_of(t),
        pooled_seeds=None if pooled is None else tuple(v for _, v in sorted(pooled.items())),
        own_seeds=tuple(seed_values(t).values()),
    )


def design_text(row: TrialRow) -> str:
    """A trial's design in one line: its layout, and the searched knobs other than k."""
    knobs = {k: v for k, v in row.params.items() if not k.startswith("k_")} if row.layout else row.params
    parts = [row.layout] if row.layout else []
    parts += [f"{k}={v}" for k, v in knobs.items()]
    return " ".join(parts)


_DAY = 86_400  # seconds


def duration_text(seconds: float) -> str:
    """`9.5 s`, `14 s`, `1:20 min`, `2:05 h`; from two days on `3 days`, `1.1 years`, `31,688,088 years` (a dry run's
    estimate of a long ladder: hours in the millions read as nothing); `forever` for no finite time."""
    if not math.isfinite(seconds):
        return "forever"
    if seconds >= 2 * _DAY:
        days = seconds / _DAY
        if days < 365.25:
            return f"{days:.0f} days"
        years = days / 365.25
        return f"{years:.1f} years" if years < 10 else f"{years:,.0f} years"
    if seconds < 60:
        return f"{seconds:.1f} s" if round(seconds, 1) < 10 else f"{seconds:.0f} s"  # 9.97: `10 s`, not `10.0 s`
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d} min" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d} h"


def copies_text(n: int) -> str:
    """`1 copy`, `3 copies`."""
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def held_out_text(figures: HeldOutFigures | None) -> str:
    """`test (not used for selection): 0.70 ± 0.02 [0.68, 0.72] (2 seeds)`, or why there is none."""
    return f"test ({NOT_USED}): {held_out_value_text(figures)}"


def held_out_value_text(figures: HeldOutFigures | None) -> str:
    """`0.70 ± 0.02 [0.68, 0.72] (2 seeds)`: a design's test figures (`estimate_text`), or why it has none."""
    if figures is None:
        return "not measured (the search has not ended, or ended before its final test)"
    if not figures.accuracy:
        return figures.note or "none"
    text = estimate_text(estimate(tuple(figures.accuracy), OBJECTIVES["accuracy"].bounds))
    return f"{text}, {UNCHECKED}" if figures.unchecked else text


def objective_values_text(summary: StudySummary, row: TrialRow, equals: str = "=") -> str:
    """A row's objective values, `accuracy=0.720 ± 0.031 [0.689, 0.751] (2 seeds), params=3.2e+05`: the
    accuracy with its interval over the paired seeds (`estimate_text`)."""
    seeds = summary.accuracy_estimate(row)
    return ", ".join(
        f"{o.name}{equals}{estimate_text(seeds) if o.name == 'accuracy' and seeds else f'{v:.4g}'}"
        for o, v in zip(summary.objectives, row.values or (), strict=False)
    )


def ties_text(summary: StudySummary) -> str | None:
    """`tied within the noise: trial 2 (0.71 ± 0.05), trial 5 (0.70 ± 0.08)` (or `none`); None where ties do not
    apply (several objectives, or one seed: then nothing can be told from noise, which the line says)."""
    if not summary.ties_apply:
        return None
    if len(summary.best[0].seed_values) < 2:
        return "tied within the noise: not told with 1 seed (--seeds 2 or more)"
    # each tie's mean over every seed it was measured on (pooled over its race's trials), as the best's is
    tied = ", ".join(
        f"trial {row.number} ({mean_text(found, interval=True)})"
        for row in summary.ties
        if (found := summary.accuracy_estimate(row)) is not None
    )
    return f"tied within the noise: {tied or 'none'}"


def step_layout(summary: StudySummary, step: RecordedStep) -> str:
    """The layout of a build-up verdict's design (from its row at the budget it settled at, else any of its rows);
    "" where no row names one."""
    row = summary.row_of(step.key) or next((r for r in summary.rows if r.digest == step.digest), None)
    return row.layout if row is not None and row.layout else ""


def step_value_text(summary: StudySummary, step: RecordedStep, *, interval: bool = True) -> str:
    """A verdict's value at its budget: the design's mean over its paired seeds there with its interval
    (`estimate_text`; without `interval`, `0.705 ± 0.064`: `mean_text`), or its state where it has none
    (`pruned`)."""
    if step.value is None:
        return "failed" if step.state == "FAIL" else step.state.lower()
    row = summary.row_of(step.key)
    found = summary.accuracy_estimate(row) if row is not None else None
    if found is None:
        return f"{step.value:.4g}"
    if interval:
        return estimate_text(found)
    return mean_text(found, interval=True)


def standings_text(summary: StudySummary, step: RecordedStep) -> str:
    """`tied at 1 epoch, better at 2 epochs`: where a verdict's design stood against the incumbent at each budget."""
    return ", ".join(f"{where} at {summary.budget_label(rung)}" for rung, where in step.standings)


def verdict_text(step: RecordedStep) -> str:
    """`kept` or `rejected`."""
    return "kept" if step.accepted else "rejected"


def moving_steps(summary: StudySummary) -> tuple[RecordedStep, ...]:
    """The verdicts still moving at the top of the ladder: their designs need more training to be sure."""
    return tuple(step for step in summary.steps if step.moving)
