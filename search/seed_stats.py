"""Seed statistics, the search's one home of arithmetic on paired seeds: a mean with its standard error and
95 % t-interval, the build-up walk's paired test (`improves_beyond_noise`), which the report's ties use too
(`tied_with`), its sequential looks when it races more seeds (`Racing`, `race_decision`), whether a gap between
two designs moved between two budgets (`gap_moved`), and whether a measured table tells its designs apart
(`seed_statistics`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from archdsl.search.objectives import Cost, Objective

INTERVAL_LEVEL = 0.95  # two-sided coverage of the report's intervals and error bars
KEEP_LEVEL = 0.05  # one-sided level of the walk's paired test: how often it keeps an MSA that does not help

Key = TypeVar("Key")


def mean_and_stderr(values: tuple[float, ...]) -> tuple[float, float]:
    """The mean of `values` and its standard error (sample standard deviation / sqrt(n); 0 for one value).
    `statistics` sums the floats exactly: equal values have their own value as mean and no spread at all
    (a float sum made three seeds at 0.1 "0.1 ± 4.2e-17")."""
    n = len(values)
    mean = statistics.mean(values)
    if n < 2:
        return mean, 0.0
    return mean, statistics.stdev(values, mean) / math.sqrt(n)


@dataclass(frozen=True)
class SeedEstimate:
    """A design's value over its paired seeds: the mean and its interval (None with one seed)."""

    values: tuple[float, ...]  # one per paired seed, in seed-index order
    mean: float
    half_width: float | None  # t x standard error, before clipping; None with one seed
    low: float | None  # the interval, clipped to the objective's range
    high: float | None

    @property
    def seeds(self) -> int:
        return len(self.values)


def estimate(
    values: tuple[float, ...], bounds: tuple[float, float] | None = None, level: float = INTERVAL_LEVEL
) -> SeedEstimate:
    """The mean of `values` (one per seed) and its two-sided `level` t-interval, clipped to `bounds`."""
    from scipy.stats import t as student_t

    mean, stderr = mean_and_stderr(values)
    if len(values) < 2:
        return SeedEstimate(values=values, mean=mean, half_width=None, low=None, high=None)
    half = float(student_t.ppf(0.5 + level / 2, len(values) - 1)) * stderr
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return SeedEstimate(values=values, mean=mean, half_width=half, low=low, high=high)


def improves_beyond_noise(
    candidate: tuple[float, ...], incumbent: tuple[float, ...], lead: Objective, level: float = KEEP_LEVEL
) -> bool:
    """Whether `candidate` beats `incumbent` on paired seeds (index s of each: the same seed) beyond
    their noise: a one-sided paired t-test at `level` on the per-seed differences (mean difference >
    t(1 - level, n - 1) x its standard error). A null improvement is kept at rate `level`; two seeds
    or more are needed (with one, the plain comparison of values decides)."""
    from scipy.stats import t as student_t

    sign = 1.0 if lead.direction == "maximize" else -1.0
    mean, stderr = mean_and_stderr(tuple(sign * (c - i) for c, i in zip(candidate, incumbent, strict=True)))
    if stderr == 0:
        return mean > 0
    return bool(mean > student_t.ppf(1 - level, len(candidate) - 1) * stderr)


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

    @property
    def races(self) -> bool:
        return self.max_seeds > 1


def race_decision(
    candidate: Mapping[int, float],
    incumbent: Mapping[int, float],
    lead: Objective,
    racing: Racing,
    lost: tuple[set[int], set[int]] = (set(), set()),
) -> bool | tuple[int, int]:
    """The walk's paired test between two designs' per-seed values, look by look (n = racing.first ..
    racing.max_seeds seeds, each at `racing.level`): True to keep the candidate, False to reject it
    (not beyond the noise at the last look, or worse beyond it), or (which, seed index) to measure next
    (0: the candidate, 1: the incumbent) when a look cannot decide. A seed a race could not measure
    (`lost`: the candidate's and the incumbent's; its trial failed or was pruned) ends the race: the
    candidate is not kept."""
    for n in range(racing.first, max(racing.first, racing.max_seeds) + 1):
        for which, values in enumerate((candidate, incumbent)):
            missing = [s for s in range(n) if s not in values]
            if missing:
                return False if missing[0] in lost[which] else (which, missing[0])
        c, i = tuple(candidate[s] for s in range(n)), tuple(incumbent[s] for s in range(n))
        if improves_beyond_noise(c, i, lead, racing.level):
            return True
        if n >= racing.max_seeds or improves_beyond_noise(i, c, lead, racing.level):
            return False
    return False


Standing = Literal["better", "worse", "tied"]


def standing(candidate: tuple[float, ...], incumbent: tuple[float, ...], lead: Objective) -> Standing:
    """Where `candidate` stands against `incumbent` on paired seeds: better or worse beyond the noise (the
    walk's paired test, both ways), else tied."""
    if improves_beyond_noise(candidate, incumbent, lead):
        return "better"
    return "worse" if improves_beyond_noise(incumbent, candidate, lead) else "tied"


def gap_moved(before: tuple[float, ...], after: tuple[float, ...], level: float = KEEP_LEVEL) -> bool:
    """Whether the gap between two designs (per paired seed, the candidate's value less the incumbent's in the
    objective's direction) closed toward zero from one budget (`before`) to the next (`after`) beyond the noise:
    a one-sided paired t-test at `level` on the per-seed change of the gap, against the gap's sign before. With
    fewer than two seeds no change can be told from noise, and none is called."""
    if len(before) < 2:
        return False
    sign = 1.0 if statistics.fmean(before) >= 0 else -1.0
    # Closing is the gap before beating the gap after along the gap's own sign (the paired test of the walk).
    along = Objective("gap", "maximize", Cost.TRAINED, "", "a gap between two designs, along its sign")
    return improves_beyond_noise(tuple(sign * b for b in before), tuple(sign * a for a in after), along, level)


def tied_with(
    best: tuple[float, ...], others: Mapping[Key, tuple[float, ...]], lead: Objective, level: float = KEEP_LEVEL
) -> list[Key]:
    """The keys of `others` that `best` does not beat beyond the noise on paired seeds (the same number of
    them, two or more: with one seed nothing can be told from noise, and nothing is called tied)."""
    if len(best) < 2:
        return []
    return [
        key
        for key, values in others.items()
        if len(values) == len(best) and not improves_beyond_noise(best, values, lead, level)
    ]


class SeedStatistics(BaseModel):
    """The statistics over the designs that have a run of every seed (accuracies are fractions)."""

    model_config = ConfigDict(frozen=True)
    designs_with_every_seed: int
    seeds: list[int]
    seed_std: float  # a design's std of val top-1 over the seeds, averaged over the designs
    seed_std_max: float
    design_mean_std: float  # the std of the designs' mean val top-1
    # seed_std / design_mean_std: at most 1/3 separates designs (docs/results-search.md, "Three seeds")
    seed_std_ratio: float
    spearman_between_seeds: list[float]  # one per pair of seeds, in seed order
    kendall_between_seeds: list[float]
    val_test_spearman: float  # between the designs' mean val and mean test top-1
    val_test_mean_gap: float  # mean over designs of (mean val - mean test) top-1
    best_on_val: str  # the layout of the design with the best mean val top-1
    best_on_val_test_regret: float  # the best mean test top-1 less the val-best design's


class SeedRun(Protocol):
    """One training of a design with one seed, as a measured table holds it (`replay.TableRun`)."""

    @property
    def seed(self) -> int: ...
    @property
    def val_acc(self) -> float: ...
    @property
    def test_acc(self) -> float: ...


class SeededDesign(Protocol):
    """A design and its runs, as a measured table holds them (`replay.TableDesign`; the table's module imports
    this one, so the type is named by what it offers)."""

    @property
    def layout(self) -> str: ...
    @property
    def runs(self) -> Sequence[SeedRun]: ...


def seed_statistics(designs: Sequence[SeededDesign]) -> SeedStatistics | None:
    """The table's seed statistics, or None with fewer than 3 designs or 2 seeds measured throughout."""
    from scipy.stats import kendalltau, spearmanr

    seeds = sorted({r.seed for d in designs for r in d.runs})
    complete = [d for d in designs if {r.seed for r in d.runs} == set(seeds)]
    if len(complete) < 3 or len(seeds) < 2:
        return None
    val = [[r.val_acc for r in sorted(d.runs, key=lambda r: r.seed)] for d in complete]
    test = [statistics.fmean(r.test_acc for r in d.runs) for d in complete]
    means = [statistics.fmean(v) for v in val]
    stds = [statistics.stdev(v) for v in val]
    pairs = list(itertools.combinations(range(len(seeds)), 2))
    by_seed = [[v[i] for v in val] for i in range(len(seeds))]
    best = max(range(len(complete)), key=means.__getitem__)
    seed_std, design_std = statistics.fmean(stds), statistics.stdev(means)
    return SeedStatistics(
        designs_with_every_seed=len(complete),
        seeds=seeds,
        seed_std=seed_std,
        seed_std_max=max(stds),
        design_mean_std=design_std,
        seed_std_ratio=seed_std / design_std if design_std > 0 else float("inf"),
        spearman_between_seeds=[float(spearmanr(by_seed[a], by_seed[b]).statistic) for a, b in pairs],
        kendall_between_seeds=[float(kendalltau(by_seed[a], by_seed[b]).statistic) for a, b in pairs],
        val_test_spearman=float(spearmanr(means, test).statistic),
        val_test_mean_gap=statistics.fmean(m - t for m, t in zip(means, test, strict=True)),
        best_on_val=complete[best].layout,
        best_on_val_test_regret=max(test) - test[best],
    )
