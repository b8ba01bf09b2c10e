"""Not speed: how often the build-up walk's acceptance rule, with racing, keeps a true improvement and a
null one, on generated paired seeds with known noise.

Each race compares a candidate with the incumbent through the walk's own rule
(`archdsl.search.seed_stats.race_decision`): seed index s gives both designs a shared effect (common
random numbers, cancelled by the pairing) plus each design's own noise; the race looks at --seeds seeds
first and measures one more on both (up to --max-seeds) while the paired test cannot decide, each look
at 5 % / (number of looks) (Bonferroni). Reported per (seeds, max-seeds): the share of races that keep
a candidate whose true gain is +0.03 and one whose gain is 0 (the error rate), and the mean number of
seeds a design was measured on.

    python benchmarks/racing_rates.py                  # 4,000 races per cell (the docs' numbers)
    python benchmarks/racing_rates.py --races 400      # quick

The default noise is today's tables': a design's own seed-to-seed std of 0.014 (1.4 points at the
default fidelity, docs/results.md) over a shared seed effect of std 0.01.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

from archdsl.search.objectives import OBJECTIVES
from archdsl.search.seed_stats import Racing, race_decision

CELLS = ((2, 2), (2, 4), (2, 6), (3, 6))  # (--seeds, --max-seeds)
GAIN = 0.03  # a true improvement
NOISE = 0.014  # a design's own seed-to-seed std
SHARED = 0.01  # the std of what seed index s does to every design alike


@dataclass(frozen=True)
class Rates:
    keep: float  # share of races that kept the candidate
    mean_seeds: float  # seeds measured per design, on average


def keep_rate(
    seeds: int, max_seeds: int, gain: float, *, races: int, seed: int = 0, noise: float = NOISE, shared: float = SHARED
) -> Rates:
    """Race `races` candidates of true gain `gain` against an incumbent, as the walk does."""
    rng = random.Random(seed)
    lead, racing = OBJECTIVES["accuracy"], Racing(seeds, max_seeds)
    kept = measured = 0
    for _ in range(races):
        effects = [rng.gauss(0, shared) for _ in range(max_seeds)]
        means = (0.7 + gain, 0.7)  # the candidate's, the incumbent's
        pair: tuple[dict[int, float], dict[int, float]] = ({}, {})  # their values by seed index
        wanted = [(which, index) for which in (0, 1) for index in range(seeds)]
        while True:
            for which, index in wanted:
                pair[which][index] = means[which] + effects[index] + rng.gauss(0, noise)
            decision = race_decision(pair[0], pair[1], lead, racing)
            if isinstance(decision, bool):
                break
            wanted = [decision]
        kept += decision
        measured += len(pair[0]) + len(pair[1])
    return Rates(keep=kept / races, mean_seeds=measured / (2 * races))


def markdown(races: int, seed: int = 0) -> str:
    lines = [
        "| --seeds | --max-seeds | keeps a +0.03 gain | keeps a null one | seeds per design (gain / null) |",
        "|---|---|---|---|---|",
    ]
    for seeds, most in CELLS:
        real, null = (keep_rate(seeds, most, g, races=races, seed=seed) for g in (GAIN, 0.0))
        lines.append(
            f"| {seeds} | {most} | {real.keep:.1%} | {null.keep:.1%} | {real.mean_seeds:.2f} / {null.mean_seeds:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=4000, help="races per cell and gain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(markdown(args.races, args.seed))


if __name__ == "__main__":
    main()
