"""A design's value on each paired seed index, pooled over its trials.

A design's first trial trains seed indices 0..--seeds-1 (`accuracy_seeds` in its metrics, or its one
accuracy with --seeds 1); a race (`--max-seeds`, `archdsl.search.strategies`) adds extra-seed trials of
the same design, each naming the seed indices it trained (`seed_indices`). Seed index s is one training
seed for every design, so two designs' values at the same index are a pair.
"""

from __future__ import annotations

from collections.abc import Iterable

from optuna.trial import FrozenTrial, TrialState

from archdsl.search.trial import DIGEST_ATTR, METRICS_ATTR, SEED_INDICES_ATTR, SEED_VALUES_KEY


def seed_values_by_design(trials: Iterable[FrozenTrial]) -> dict[str, dict[int, float]]:
    """Digest -> seed index -> the design's accuracy there, from the completed trials of each design
    (the first trial of an index counts: a design is measured once per index)."""
    values: dict[str, dict[int, float]] = {}
    for t in sorted(trials, key=lambda t: t.number):
        digest = t.user_attrs.get(DIGEST_ATTR)
        if t.state != TrialState.COMPLETE or digest is None:
            continue
        metrics = t.user_attrs.get(METRICS_ATTR, {})
        per_seed = metrics.get(SEED_VALUES_KEY) or ([metrics["accuracy"]] if "accuracy" in metrics else [])
        indices = t.user_attrs.get(SEED_INDICES_ATTR) or range(len(per_seed))
        for index, value in zip(indices, per_seed, strict=False):
            values.setdefault(str(digest), {}).setdefault(int(index), float(value))
    return values


def design_seed_values(trials: Iterable[FrozenTrial], digest: str) -> dict[int, float]:
    """Seed index -> design `digest`'s accuracy there (`seed_values_by_design` of that one design)."""
    return seed_values_by_design(t for t in trials if t.user_attrs.get(DIGEST_ATTR) == digest).get(digest, {})


def is_extra_seed(trial: FrozenTrial) -> bool:
    """A race's trial of a design already measured: more seeds of it, not another design."""
    return SEED_INDICES_ATTR in trial.user_attrs
