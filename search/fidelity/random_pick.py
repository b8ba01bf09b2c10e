"""What a random pick of designs would have scored in a replayed study's CPU time, from its table: the baseline
the field asks a search to beat (Lindauer and Hutter, "Best practices for scientific research on neural
architecture search", JMLR 2020: compare with random search at the same cost).

Random designs are drawn without repeats, each measured as the study measures one (its paired seeds' runs, at the
table's epochs, each scored once on the test split: `TableRun.cpu_seconds`), until the next would pass the CPU the
study spent; the pick is the best of them by its mean validation top-1. Its expectation over many random orders
(a fixed seed: the same figure on every machine) is what the report sets beside the search's answer.
"""

from __future__ import annotations

import random
from statistics import fmean

from archdsl.search.fidelity.replay import Replay, paired_runs
from archdsl.search.studies.record import RandomPick

DRAWS = 4000  # random orders: the expectation's standard error is under a thousandth of the designs' spread
DRAW_SEED = 0


def random_pick(replay: Replay, seed: int, seeds: int, cpu_seconds: float, draws: int = DRAWS) -> RandomPick | None:
    """The expected best mean validation top-1 of random designs measured within `cpu_seconds` (each on the
    `seeds` paired seeds a study with `--seed seed` measures it on); None where the table lacks a run's CPU."""
    designs = []  # (its mean validation top-1, its CPU)
    for design in replay.table.designs:
        runs = paired_runs(design, seed, range(seeds))
        costs = [run.cpu_seconds(replay.epochs) for run in runs]
        if any(cost is None for cost in costs):
            return None
        designs.append((fmean(run.accuracy_after(replay.epochs) for run in runs), sum(c or 0.0 for c in costs)))
    rng = random.Random(DRAW_SEED)
    best, counts = [], []
    for _ in range(draws):
        order = rng.sample(designs, len(designs))
        measured, spent = [order[0]], order[0][1]  # a pick measures one design at least
        for value, cost in order[1:]:
            if spent + cost > cpu_seconds:
                break
            measured.append((value, cost))
            spent += cost
        best.append(max(value for value, _ in measured))
        counts.append(len(measured))
    return RandomPick(cpu_seconds=cpu_seconds, expected_best=fmean(best), designs=fmean(counts), draws=draws)
