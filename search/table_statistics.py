"""Can a search table tell its designs apart? Its seed statistics, computed from its runs.

A table is worth replaying only if a design's seed-to-seed spread is small against the spread
between the designs' means (the aim: at most a third) and two seeds rank the designs alike
(the aim: Spearman >= 0.8). Both are measured on the validation top-1, what a search chooses
on; the agreement of validation and test says whether that choice carries to the test set.
`benchmarks/buildup_table.py --assemble` stores them in the table, and a test recomputes them.
"""

from __future__ import annotations

import itertools
import statistics
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from archdsl.search.replay import TableDesign

# The aims of issue 28 (docs/search.md): a table whose noise is below these separates designs.
SEED_STD_AIM = 1 / 3  # seed std / std of the designs' means, at most
SPEARMAN_AIM = 0.8  # between two seeds' rankings, at least


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
