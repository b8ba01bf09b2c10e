"""A study read back: its trials as typed rows and the winners (the best trial, or the Pareto
front), and the few words every rendering of them shares (a design in one line, a duration).

Everything here reads the study's storage only (designs are stored as `.arch` text in each
trial), so any machine that reaches the storage can report on a study that ran elsewhere.
The renderings are beside it: `_report_lines` (the terminal), `_report_csv`, `_report_figures`,
`_report_markdown`; `report.write_report` writes them all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.search.held_out import NOT_USED, HeldOutFigures, read_held_out
from archdsl.search.objectives import OBJECTIVES, Objective
from archdsl.search.optuna_private import retried_trial
from archdsl.search.replay import SIM_SECONDS_ATTR
from archdsl.search.runner import COMMAND_ATTR, WALK_END_ATTR
from archdsl.search.seed_stats import SeedEstimate, estimate, tied_with
from archdsl.search.seeds import is_extra_seed, seed_values_by_design
from archdsl.search.space import layout_text, msa_per_stage
from archdsl.search.storage import FAIL_REASON_ATTR, is_copy
from archdsl.search.strategies import BUILDUP_STEP_ATTR
from archdsl.search.trial import (
    DIGEST_ATTR,
    LAYOUT_ATTR,
    METRICS_ATTR,
    PRUNED_REASON_ATTR,
    SEED_VALUES_KEY,
    SPEC_ATTR,
)

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
    simulated: bool = False  # `seconds` is a replayed trial's simulated time (archdsl.search.replay)
    step: str | None = None  # a build-up trial's step: `base`, `+1 MSA in c3`
    digest: str | None = None  # the design's (Arch.digest)
    # A design's first trial: its values on every seed index measured, its own and a race's extra-seed
    # trials' (archdsl.search.seeds), by index; None: the trial's own values.
    pooled_seeds: tuple[float, ...] | None = None

    @property
    def msa_per_stage(self) -> dict[str, int]:
        return msa_per_stage(self.layout) if self.layout else {}

    @property
    def design_key(self) -> str:
        """One key per design: its digest (a trial recorded without one is a design of its own)."""
        return self.digest or f"trial {self.number}"

    @property
    def seed_values(self) -> tuple[float, ...]:
        """The accuracy on each paired seed (one value with --seeds 1), pooled over the design's trials for
        its first one; () without an accuracy."""
        if self.pooled_seeds is not None:
            return self.pooled_seeds
        values = self.metrics.get(SEED_VALUES_KEY) or ([self.metrics["accuracy"]] if "accuracy" in self.metrics else [])
        return tuple(float(v) for v in values)


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
    # Trial number -> its design's test figures, measured after the search (archdsl.search.final_test):
    # for the report only; nothing above was chosen with them.
    held_out: dict[int, HeldOutFigures] = field(default_factory=dict)

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
    names = str(study.user_attrs.get("objectives", "")).split(",")
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
    trials = study.get_trials(deepcopy=False)
    rows = _pooled(tuple(trial_row(t) for t in trials if not is_copy(t)), trials)
    extra = {t.number for t in trials if is_extra_seed(t)}
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.number not in extra]
    best_numbers: list[int] = []
    if complete:
        best_trials = _best_trials(study, objectives, rows, extra)
        # One row per design (two workers may have measured one design at the same moment).
        seen: set[str] = set()
        for t in sorted(best_trials, key=lambda t: t.number):
            digest = t.user_attrs.get(DIGEST_ATTR, str(t.number))
            if digest not in seen:
                seen.add(digest)
                best_numbers.append(t.number)
    by_number = {r.number: r for r in rows}
    summary = StudySummary(
        name=study.study_name,
        objectives=objectives,
        strategy=str(study.user_attrs.get("strategy", "?")),
        rows=rows,
        best=tuple(by_number[n] for n in best_numbers),
        command=study.user_attrs.get(COMMAND_ATTR),
        copies=len(trials) - len(rows),
        held_out=read_held_out(study),
    )
    return dataclasses.replace(summary, ties=_ties(summary))


def _pooled(rows: tuple[TrialRow, ...], trials: list[FrozenTrial]) -> tuple[TrialRow, ...]:
    """The rows with each design's first complete trial holding the design's values on every seed index
    measured (a race adds extra-seed trials of the design: `archdsl.search.seeds`)."""
    by_design = seed_values_by_design(trials)
    firsts: set[int] = set()
    seen: set[str] = set()
    for t in sorted(trials, key=lambda t: t.number):
        digest = t.user_attrs.get(DIGEST_ATTR)
        if t.state == TrialState.COMPLETE and digest is not None and not is_extra_seed(t) and digest not in seen:
            seen.add(digest)
            firsts.add(t.number)
    return tuple(
        dataclasses.replace(r, pooled_seeds=tuple(v for _, v in sorted(by_design[r.digest].items())))
        if r.number in firsts and r.digest in by_design
        else r
        for r in rows
    )


def _best_trials(
    study: optuna.Study, objectives: tuple[Objective, ...], rows: tuple[TrialRow, ...], extra: set[int]
) -> list[FrozenTrial]:
    """The best trial (one objective) or the Pareto front, never a race's extra seed. A build-up walk's
    best is the design it kept last (it keeps an MSA only beyond the noise); otherwise an accuracy is
    judged on the design's mean over every seed it was measured on, not on the seeds of its first trial."""
    if len(objectives) > 1:
        return [t for t in study.best_trials if t.number not in extra]
    # (the walk's answer only while the study is a walk's: one resumed by a sampler is judged by its means)
    walk_end = study.user_attrs.get(WALK_END_ATTR) if study.user_attrs.get("strategy") == "buildup" else None
    ended = [r for r in rows if r.state == "COMPLETE" and r.number not in extra and r.design_key == walk_end]
    if ended:
        return [t for t in study.get_trials(deepcopy=False) if t.number == ended[0].number]
    if objectives[0].name == "accuracy":
        pooled = [r for r in rows if r.pooled_seeds]
        if pooled:
            best = max(pooled, key=lambda r: (sum(r.seed_values) / len(r.seed_values), -r.number))
            return [t for t in study.get_trials(deepcopy=False) if t.number == best.number]
    return [study.best_trial]


def _ties(summary: StudySummary) -> tuple[TrialRow, ...]:
    """The designs tied with the one best design within the noise, each by its first complete trial."""
    if not summary.ties_apply:
        return ()
    best = summary.best[0]
    first_of_design: dict[str, TrialRow] = {}
    for row in summary.rows:  # in trial order; copies are no rows
        if row.state == "COMPLETE":
            first_of_design.setdefault(row.design_key, row)
    others = {row.number: row.seed_values for row in first_of_design.values() if row.design_key != best.design_key}
    by_number = {row.number: row for row in first_of_design.values()}
    return tuple(by_number[n] for n in tied_with(best.seed_values, others, summary.objectives[0]))


def trial_row(t: FrozenTrial) -> TrialRow:
    """One trial as a `TrialRow`: its note says why it failed, was pruned or was retried."""
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
    seconds = None
    if t.datetime_start is not None and t.datetime_complete is not None:
        seconds = (t.datetime_complete - t.datetime_start).total_seconds()
    simulated = SIM_SECONDS_ATTR in attrs
    if simulated:  # replayed: the time the trial would have taken, not the milliseconds its replay took
        seconds = float(attrs[SIM_SECONDS_ATTR])
    return TrialRow(
        number=t.number,
        state=t.state.name,
        params=dict(t.params),
        values=tuple(t.values) if t.values is not None else None,
        metrics=dict(attrs.get(METRICS_ATTR, {})),
        n_msa=attrs.get("n_msa"),
        short_id=attrs.get("short_id"),
        spec=spec,
        note=note,
        layout=attrs.get(LAYOUT_ATTR) or layout_of(spec),
        seconds=seconds,
        step=attrs.get(BUILDUP_STEP_ATTR),
        simulated=simulated,
        digest=attrs.get(DIGEST_ATTR),
    )


def layout_of(spec: str | None) -> str | None:
    """The layout of a trial recorded before trials kept one (from its .arch text)."""
    if not spec:
        return None
    from archdsl.errors import UserError
    from archdsl.lang.spec import parse_spec

    try:
        return layout_text(parse_spec(spec))
    except UserError:
        return None


def design_text(row: TrialRow) -> str:
    """A trial's design in one line: its layout, and the searched knobs other than k."""
    knobs = {k: v for k, v in row.params.items() if not k.startswith("k_")} if row.layout else row.params
    parts = [row.layout] if row.layout else []
    parts += [f"{k}={v}" for k, v in knobs.items()]
    return " ".join(parts)


def duration_text(seconds: float) -> str:
    """`9.5 s`, `14 s`, `1:20 min`, `2:05 h`."""
    if seconds < 60:
        return f"{seconds:.1f} s" if round(seconds, 1) < 10 else f"{seconds:.0f} s"  # 9.97: `10 s`, not `10.0 s`
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d} min" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d} h"


def copies_text(n: int) -> str:
    """`1 copy`, `3 copies`."""
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def estimate_text(value: SeedEstimate) -> str:
    """`0.72 ± 0.031 [0.689, 0.751] (2 seeds)`: the mean, the half-width of its 95 % t-interval and the
    interval clipped to the objective's range; `0.72 (1 seed: no interval)`."""
    if value.half_width is None or value.low is None or value.high is None:
        return f"{value.mean:.4g} ({value.seeds} seed: no interval)"
    return f"{value.mean:.4g} ± {value.half_width:.2g} [{value.low:.4g}, {value.high:.4g}] ({value.seeds} seeds)"


def held_out_text(figures: HeldOutFigures | None) -> str:
    """`test (not used for selection): 0.7 ± 0.02 [0.68, 0.72] (2 seeds)`, or why there is none."""
    return f"test ({NOT_USED}): {held_out_value_text(figures)}"


def held_out_value_text(figures: HeldOutFigures | None) -> str:
    """`0.7 ± 0.02 [0.68, 0.72] (2 seeds)`: a design's test figures, or why it has none."""
    if figures is None:
        return "not measured (the search has not ended, or ended before its final test)"
    if not figures.accuracy:
        return figures.note or "none"
    return estimate_text(estimate(tuple(figures.accuracy), OBJECTIVES["accuracy"].bounds))


def objective_values_text(summary: StudySummary, row: TrialRow, equals: str = "=") -> str:
    """A row's objective values, `accuracy=0.72 ± 0.031 [0.689, 0.751] (2 seeds), params=3.2e+05`: the
    accuracy with its interval over the paired seeds."""
    seeds = summary.accuracy_estimate(row)
    return ", ".join(
        f"{o.name}{equals}{estimate_text(seeds) if o.name == 'accuracy' and seeds else f'{v:.4g}'}"
        for o, v in zip(summary.objectives, row.values or (), strict=False)
    )


def ties_text(summary: StudySummary) -> str | None:
    """`tied within the noise: trial 2 (0.71), trial 5 (0.7)` (or `none`); None where ties do not apply
    (several objectives, or one seed: then nothing can be told from noise, which the line says)."""
    if not summary.ties_apply:
        return None
    if len(summary.best[0].seed_values) < 2:
        return "tied within the noise: not told with 1 seed (--seeds 2 or more)"
    # each tie's mean over every seed it was measured on (pooled over its race's trials), as the best's is
    tied = ", ".join(f"trial {row.number} ({fmean(row.seed_values):.4g})" for row in summary.ties if row.seed_values)
    return f"tied within the noise: {tied or 'none'}"
