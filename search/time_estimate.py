"""What a search will take: `--dry-run`'s range and the progress line's ETA, from one arithmetic (`Workload`).

A trial trains each paired seed `epochs` passes over its budget's images, scores the validation images after each
epoch, and scores the test images once (sealed for the final test). The dry run prices that work with two short
timings, one training step and one scoring pass per image, of the cheapest design the strategy reaches (the base)
and of the dearest (the space's design with the most MSAs): the low end is the shortest walk at the base's price,
the high end the longest walk at the dearest design's price with every raise the ladder allows, the settle stage at
every budget and a stand-in seed for one that fails to learn. Before this (issue 58), the estimate priced the base's
training alone: the main job's dry run said 2:21-2:38 min of one core where its searches used 3:12-4:40 of CPU.

The progress line cannot time anything: it prices the same work in image-steps (`SCORE_SHARE` of a step to score an
image) and converts them at the pace of the study's finished trials, so a raised budget costs what it trains.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archdsl.search.fidelity.budget import Budget
from archdsl.search.walk.buildup import SHORTLIST

# A scoring pass (forward, no gradient) costs about a third of a training step (forward, backward, update) per image:
# what the progress line counts a validation or test image as, where it has no timing of its own.
SCORE_SHARE = 1 / 3


@dataclass(frozen=True)
class StepSeconds:
    """Seconds per image of one design on one thread: a training step, and a scoring pass."""

    train: float
    score: float


UNIT_STEP = StepSeconds(train=1.0, score=SCORE_SHARE)  # image-steps: the progress line's currency


@dataclass(frozen=True)
class Workload:
    """What each trial of a study trains and scores: the ladder's budgets and the settle stage's, the paired seeds,
    and the images (training less validation, validation scored each epoch, test scored once)."""

    rungs: tuple[Budget, ...]
    settles: tuple[Budget, ...]
    seeds: int
    train_images: int
    validation_images: int
    test_images: int
    stand_ins: bool = True  # a seed that fails to learn is replaced (the build-up walk): one seed more at most
    shortlist: int = SHORTLIST  # the designs the settle stage re-measures at most (`buildup.settle_size`)

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Every budget a trial may train at: the ladder's, then the settle stage's (a trial's rung indexes it)."""
        return (*self.rungs, *self.settles)

    def trial_seconds(self, budget: Budget, step: StepSeconds, seeds: int | None = None) -> float:
        """One trial at `budget` on `seeds` paired seeds (the study's by default) at `step`'s prices."""
        per_seed = (
            budget.epochs * (budget.images(self.train_images) * step.train + self.validation_images * step.score)
            + self.test_images * step.score
        )
        return (self.seeds if seeds is None else seeds) * per_seed

    def design_seconds(self, step: StepSeconds, rungs: int) -> float:
        """A design measured at the ladder's first `rungs` budgets."""
        return sum(self.trial_seconds(budget, step) for budget in self.rungs[:rungs])

    def settle_seconds(self, step: StepSeconds, budgets: int) -> float:
        """The settle stage's shortlist at its first `budgets` budgets."""
        return self.shortlist * sum(self.trial_seconds(budget, step) for budget in self.settles[:budgets])

    def least_rungs(self) -> int:
        """The budgets every design is measured at, at least: two on a ladder (a verdict is not final at its first
        budget: the walk calls no verdict between designs at chance there), else one."""
        return min(2, len(self.rungs))

    def low(self, designs: int, step: StepSeconds) -> float:
        """The shortest search: `designs` at the least rungs, the settle stage decided at its first budget."""
        return designs * self.design_seconds(step, self.least_rungs()) + self.settle_seconds(step, 1)

    def high(self, designs: int, step: StepSeconds) -> float:
        """The longest: `designs` at every rung, the settle stage at every budget, and every comparison on one seed
        more where `stand_ins` (a seed that fails to learn is replaced by a stand-in in every later comparison)."""
        spent = designs * self.design_seconds(step, len(self.rungs)) + self.settle_seconds(step, len(self.settles))
        return spent * self.stand_in_share()

    def stand_in_share(self) -> float:
        """What a stand-in seed adds at most: (seeds + 1) / seeds where the walk replaces a failed seed, else 1."""
        return (self.seeds + 1) / self.seeds if self.stand_ins else 1.0


@dataclass(frozen=True)
class TimeEstimate:
    """What a search will take on this machine, in seconds of one core: the shortest walk (or `n_trials` designs for a
    sampler) at the cheapest design's price, and the longest at the dearest's."""

    low: float
    high: float
    cheapest: StepSeconds  # the base's
    dearest: StepSeconds  # the design with the most MSAs the strategy reaches
    designs: tuple[int, int]  # the fewest and the most designs measured

    def text(self) -> str:
        from archdsl.search.report import duration_text

        low, high = duration_text(self.low), duration_text(self.high)
        few, most = self.designs
        count = f"{few}" if few == most else f"{few} to {most}"
        ms = f"{1000 * self.cheapest.train:.2g}"
        if self.dearest != self.cheapest:
            ms += f" to {1000 * self.dearest.train:.2g}"
        return (
            f"time: about {low if low == high else f'{low} to {high}'} of one core for {count} designs, with every "
            f"raise, settle step and scoring pass ({ms} ms a training image on one thread, the base to the design "
            "with the most MSAs, timed now; more cores take less wall time, analyses and pruning move it)"
        )


def estimate(work: Workload, designs: tuple[int, int], cheapest: StepSeconds, dearest: StepSeconds) -> TimeEstimate:
    """The range of `work` over the fewest to the most `designs`, at the two designs' prices."""
    few, most = designs
    return TimeEstimate(work.low(few, cheapest), work.high(most, dearest), cheapest, dearest, designs)


@dataclass(frozen=True)
class FinishedTrial:
    """What the progress line reads of a finished trial: its budget (index into `Workload.budgets`), its paired
    seeds and its seconds."""

    rung: int
    seeds: int
    seconds: float


def remaining_seconds(
    work: Workload, finished: Sequence[FinishedTrial], designs_left: tuple[int, int]
) -> tuple[float, float] | None:
    """The seconds left (low, high) at the pace of the `finished` trials: the designs left (the fewest and the most)
    priced as `Workload.low` and `high` price them, the raises left to the last trial's verdict, and the settle
    trials not run yet; None before any trial took measurable time."""
    budgets = work.budgets
    done = [t for t in finished if 0 <= t.rung < len(budgets)]
    steps = sum(work.trial_seconds(budgets[t.rung], UNIT_STEP, t.seeds) for t in done)
    seconds = sum(t.seconds for t in done)
    if steps <= 0 or seconds <= 0:
        return None
    pace = seconds / steps  # seconds per image-step here, now
    settled = [t.rung - len(work.rungs) for t in done if t.rung >= len(work.rungs)]
    few, most = designs_left if not settled else (0, 0)  # the settle stage runs once the walk is over
    settle_low = _settle_left(work, settled, 1)
    settle_high = _settle_left(work, settled, len(work.settles))
    walk_rungs = [t.rung for t in done if t.rung < len(work.rungs)]
    last = walk_rungs[-1] if walk_rungs and not settled else len(work.rungs) - 1
    # the last verdict may still go up: both its designs at each budget above the last one measured
    raises = 2 * sum(work.trial_seconds(b, UNIT_STEP) for b in work.rungs[last + 1 :])
    low = few * work.design_seconds(UNIT_STEP, work.least_rungs()) + settle_low
    high = (most * work.design_seconds(UNIT_STEP, len(work.rungs)) + raises + settle_high) * work.stand_in_share()
    return pace * low, pace * high


def _settle_left(work: Workload, settled: Iterable[int], budgets: int) -> float:
    """The settle trials at its first `budgets` budgets not run yet (`settled`: the settle budget of each one run)."""
    runs = list(settled)
    return sum(
        max(0, work.shortlist - runs.count(index)) * work.trial_seconds(budget, UNIT_STEP)
        for index, budget in enumerate(work.settles[:budgets])
    )
