"""What a design's paired seeds say in a report: its mean with a 95 % t-interval, and the designs tied
with the best within the noise.

A trial trained on `--seeds N` keeps each seed's value (`trial.SEED_VALUES_KEY`). The interval is
Student's: mean +- t(0.975, N - 1) x the standard error of the mean (`measures.mean_and_stderr`),
clipped to the objective's range where it has one (an accuracy stays in [0, 1]); one seed gives no
interval. A design is *tied* with the best when the best does not beat it beyond the noise by the
build-up walk's own rule (`strategies.improves_beyond_noise`, a one-sided paired t-test at its
level), so the report calls noise what the walk calls noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from archdsl.search.measures import mean_and_stderr
from archdsl.search.objectives import Objective
from archdsl.search.strategies import KEEP_LEVEL, improves_beyond_noise

INTERVAL_LEVEL = 0.95  # two-sided coverage of the report's intervals and error bars

Key = TypeVar("Key")


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
