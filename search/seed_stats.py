"""Seed statistics, the search's one home of arithmetic on paired seeds: a mean with its standard error and
95 % t-interval, the build-up walk's paired test (`improves_beyond_noise`), which the report's ties use too
(`tied_with`), and whether a measured table tells its designs apart (`seed_statistics`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict

from archdsl.search.objectives import Objective

if TYPE_CHECKING:
    from archdsl.search.fidelity.replay import TableDesign

INTERVAL_LEVEL = 0.95  # two-sided coverage of the report's intervals and error bars
KEEP_LEVEL = 0.05  # one-sided level of the walk's paired test: how often it keeps an MSA that does not help
# The aims of issue 28 (docs/search.md): a table whose noise is below these separates designs.
SEED_STD_AIM = 1 / 3  # seed std / std of the designs' means, at most
SPEARMAN_AIM = 0.8  # between two seeds' rankings, at least

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
    seed_std_ratio: float  # seed_std / design_mean_std: the aim is at most SEED_STD_AIM
    spearman_between_seeds: list[float]  # one per pair of seeds, in seed order
    kendall_between_seeds: list[float]
    val_test_spearman: float  # between the designs' mean val and mean test top-1
    val_test_mean_gap: float  # mean over designs of (mean val - mean test) top-1
    best_on_val: str  # the layout of the design with the best mean val top-1
    best_on_val_test_regret: float  # the best mean test top-1 less the val-best design's


def seed_statistics(designs: list[TableDesign]) -> SeedStatistics | None:
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
