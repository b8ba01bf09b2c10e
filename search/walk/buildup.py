"""The paper's build-up walk (Sec. 4.1) as one pure function: from what a study has measured, what to measure
next, or the answer and its ties.

Start from the base CNN, add an MSA at the end of the last stage and keep adding there while the lead objective
improves beyond the noise of the paired seeds (or, with `Rules.keep` "mean", while its mean over them improves, the
paper's own rule); when an addition does not help (or the stage is full), try the end
of the stage before; stop after the first stage. Each comparison of a candidate with the design it would replace
(the incumbent) is a *verdict*. Where no budget was measured to give a long training's answer, a verdict is
measured on a ladder of budgets (`Rules.rungs`): it is not final at its first budget, and it settles once it holds
(a tie at two budgets in a row, a standing beyond the noise at three, and a gap not closing beyond the noise at
the last step: `_held`) or at the top of the ladder, where a verdict still moving is marked (`Step.moving`: "train
longer to be sure"). docs/search.md ("The budget the search finds") says why and what it costs.

`walk` is the one place the rule lives: the sampler that runs it in a study (`planned.PlannedSampler`), the
runner's end of the study, the replays and the benchmarks all call it, with the measurements that
`archdsl.search.studies.record.measurements` reads off a study or a benchmark builds from a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from archdsl.search.objectives import Objective
from archdsl.search.seed_stats import Racing, Standing, gap_moved, improves_beyond_noise, race_decision, standing
from archdsl.search.settings import Keep
from archdsl.search.space import ParamValue, Space
from archdsl.search.studies.record import Measured, Measurements, State

Params = dict[str, ParamValue]
Paired = tuple[tuple[float, ...], tuple[float, ...]]


@dataclass(frozen=True)
class Rules:
    """How the walk decides: the paired seeds and racing (`racing`), the number of budgets on the ladder (`rungs`;
    1: one fixed budget), how the ladder is climbed (`budgeting`): `per-verdict`, every verdict settles on its
    own, from one rung below where the last one settled; `calibrate`, the first verdict settles on the ladder and
    every later one is measured at that budget alone; and when a candidate is kept (`keep`): `beyond-noise`, where
    the paired test calls it better; `mean`, where its mean over the paired seeds is better (no test, no race).
    docs/results-search.md ("Keeping on the mean") says what each costs."""

    racing: Racing = Racing()
    rungs: int = 1
    budgeting: Literal["per-verdict", "calibrate"] = "per-verdict"
    keep: Keep = "beyond-noise"


PLAIN = Rules()  # one seed, no racing, one budget


@dataclass(frozen=True)
class Ask:
    """What the walk measures next: a design at budget rung `rung`, on its first paired seeds (`seed_index` None)
    or on one more (a race's extra seed); `stage` is the stage whose MSA the design added (None for the base)."""

    params: Params
    stage: str | None
    rung: int = 0
    seed_index: int | None = None

    @property
    def label(self) -> str:
        return step_label(self.stage)


@dataclass(frozen=True)
class Step:
    """One verdict of the walk: the design tried, the stage given an MSA (None for the base), its value at the
    budget the verdict settled at (`rung`), whether it was kept, its state there, where it stood against the
    incumbent at each budget it was measured at (`standings`: (rung, better/tied/worse)), and whether the verdict
    was still moving at the top of the ladder (`moving`: its standing changed, or its gap closed beyond the noise,
    at the last step up: "train longer to be sure")."""

    params: Params
    stage: str | None
    value: float | None
    accepted: bool
    state: State = "COMPLETE"
    rung: int = 0
    standings: tuple[tuple[int, Standing], ...] = ()
    moving: bool = False

    @property
    def label(self) -> str:
        return step_label(self.stage)


@dataclass(frozen=True)
class Walk:
    """Where the walk stands: the verdicts so far, what to measure next (None: the walk is done), its answer (the
    design it kept last; None until the base is measured, or when everything failed), the budget rung of the
    answer's last verdict, and the walked designs the answer does not beat beyond the noise there."""

    steps: tuple[Step, ...]
    next: Ask | None
    answer: Params | None = None
    answer_rung: int = 0
    ties: tuple[Params, ...] = ()


def step_label(stage: str | None) -> str:
    """What a build-up step tries: `base`, or `+1 MSA in c3` (the stage that changed)."""
    return "base" if stage is None else f"+1 MSA in {stage}"


def longest_walk(space: Space) -> int:
    """The most designs a walk measures: the base, then one MSA added at a time until every stage is full (a walk
    stops sooner when an added MSA does not help)."""
    return 1 + sum(stage.max_k for stage in space.stages)


def walk(space: Space, measured: Measurements, lead: Objective, rules: Rules = PLAIN) -> Walk:
    """The build-up walk on `measured` (a pure function of it: a resumed study, or another worker, walks the same
    way): every verdict it can reach is a step; the first measurement it lacks is `next`."""
    return _Walker(space, measured, lead, rules).run()


@dataclass(frozen=True)
class _Side:
    """A design in a verdict, and the stage whose MSA it added (its step label)."""

    params: Params
    stage: str | None


class _Walker:
    def __init__(self, space: Space, measured: Measurements, lead: Objective, rules: Rules) -> None:
        self.space, self.measured, self.lead, self.rules = space, measured, lead, rules

    def at(self, params: Params, rung: int) -> Measured | None:
        return self.measured.get((self.space.arch_from_params(params).digest(), rung))

    def run(self) -> Walk:
        incumbent = _Side(dict(self.space.endpoints()[0].params), None)  # the ResNet end: default heads/windows
        base = self.at(incumbent.params, 0)
        if base is None:
            return Walk((), Ask(incumbent.params, None))
        steps = [Step(incumbent.params, None, base.value, base.value is not None, base.state)]
        answer = incumbent.params if base.value is not None else None
        start, top = 0, self.rules.rungs - 1
        for stage in reversed([s for s in self.space.stages if s.max_k > 0]):
            key = f"k_{stage.name}"
            while int(incumbent.params[key]) < stage.max_k:
                candidate = _Side(dict(incumbent.params, **{key: int(incumbent.params[key]) + 1}), stage.name)
                step = self.verdict(candidate, incumbent, start, top)
                if isinstance(step, Ask):
                    return Walk(tuple(steps), step, answer, steps[-1].rung)
                steps.append(step)
                if self.rules.budgeting == "calibrate":
                    start = top = step.rung  # the first verdict found the budget: every later one is measured there
                else:
                    start = max(0, step.rung - 1)  # the next verdict starts one budget below where this one settled
                if not step.accepted:
                    break  # rule 2: this MSA did not help; try the end of an earlier stage
                incumbent, answer = candidate, candidate.params
        rung = steps[-1].rung
        return Walk(tuple(steps), None, answer, rung, self.ties(answer, rung, steps))

    def verdict(self, candidate: _Side, incumbent: _Side, start: int, top: int) -> Step | Ask:
        """The candidate against the incumbent, from budget rung `start` up to `top` at most."""
        standings: list[tuple[int, Standing]] = []
        gaps: list[tuple[float, ...]] = []
        for rung in range(start, top + 1):
            for side in (incumbent, candidate):
                if self.at(side.params, rung) is None:
                    return Ask(side.params, side.stage, rung)
            c, i = self.at(candidate.params, rung), self.at(incumbent.params, rung)
            assert c is not None and i is not None
            if c.value is None or i.value is None:  # a design that failed: the candidate is kept only over a failure
                kept = c.value is not None
                return Step(candidate.params, candidate.stage, c.value, kept, c.state, rung, tuple(standings))
            decided = self.decide(candidate, incumbent, c, i, rung)
            if isinstance(decided, Ask):
                return decided
            paired = self.paired(c, i)
            where = standing(*paired, self.lead) if paired is not None else ("better" if decided else "tied")
            if decided != (where == "better"):  # a race's looks decide at their own level
                where = "better" if decided else "tied"
            standings.append((rung, where))
            gaps.append(self.gap(paired) if paired is not None else ())
            moving = len(standings) > 1 and (
                standings[-1][1] != standings[-2][1] or gap_moved(*_common(gaps[-2], gaps[-1]))
            )
            if rung == top or (_held(standings) and not moving):
                return Step(
                    candidate.params, candidate.stage, c.value, decided, c.state, rung, tuple(standings), moving
                )
        raise AssertionError("a verdict settles by the top of the ladder")

    def decide(self, candidate: _Side, incumbent: _Side, c: Measured, i: Measured, rung: int) -> bool | Ask:
        """Keep the candidate at this budget: the paired test, racing more seeds where it cannot tell (an Ask); with
        `keep` "mean", the better mean over the paired seeds."""
        if self.rules.keep == "mean":
            assert c.value is not None and i.value is not None
            return self.lead.better(c.value, i.value)
        if self.rules.racing.races and self.lead.name == "accuracy":
            decision = race_decision(c.seeds, i.seeds, self.lead, self.rules.racing, (set(c.lost), set(i.lost)))
            if isinstance(decision, bool):
                return decision
            which, index = decision
            side = candidate if which == 0 else incumbent
            return Ask(side.params, side.stage, rung, index)
        paired = self.paired(c, i)
        if paired is not None:
            return improves_beyond_noise(*paired, self.lead)  # --seeds N: paired, beyond the noise
        assert c.value is not None and i.value is not None
        return self.lead.better(c.value, i.value)

    def paired(self, c: Measured, i: Measured) -> Paired | None:
        """The two designs' values on their common paired seeds (two or more; the accuracy alone has them)."""
        common = sorted(set(c.seeds) & set(i.seeds))
        if self.lead.name != "accuracy" or len(common) < 2:
            return None
        return tuple(c.seeds[s] for s in common), tuple(i.seeds[s] for s in common)

    def gap(self, paired: Paired) -> tuple[float, ...]:
        """Per paired seed, the candidate's value less the incumbent's, in the lead objective's direction."""
        sign = 1.0 if self.lead.direction == "maximize" else -1.0
        return tuple(sign * (a - b) for a, b in zip(*paired, strict=True))

    def ties(self, answer: Params | None, rung: int, steps: list[Step]) -> tuple[Params, ...]:
        """The walked designs measured at budget `rung` that the answer does not beat beyond the noise there."""
        best = None if answer is None else self.at(answer, rung)
        if answer is None or best is None:
            return ()
        tied = []
        for step in steps:
            other = self.at(step.params, rung)
            if step.params == answer or other is None or other.value is None:
                continue
            paired = self.paired(best, other)
            if paired is not None and not improves_beyond_noise(*paired, self.lead):
                tied.append(step.params)
        return tuple(tied)


def _held(standings: list[tuple[int, Standing]]) -> bool:
    """Whether a verdict has held long enough to settle: a tie at two budgets in a row; a standing beyond the noise
    (better or worse) at three. Why three: on Fashion-MNIST an MSA in c3 stood worse beyond the noise at 2 and at 4
    epochs, its gap growing (1.3 to 1.7 points), and ties with the best at 12 epochs on a quarter of the split; a
    verdict that ranks one design behind another is the one a user acts on, so it takes one step more evidence."""
    last = standings[-1][1]
    needed = 2 if last == "tied" else 3
    return len(standings) >= needed and all(where == last for _, where in standings[-needed:])


def _common(before: tuple[float, ...], after: tuple[float, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The two gaps on the seeds both have (a race may have measured more at one budget)."""
    n = min(len(before), len(after))
    return before[:n], after[:n]
