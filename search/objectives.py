"""What a search can optimise: each objective's name, direction and cost.

An objective's *cost* drives the staging of a trial: cheap measures (from the IR or one
timed forward pass) come first, training next, and the expensive analyses (Hessian
spectrum, corruption robustness) run only for candidates the cheap measures do not
already rule out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from archdsl.errors import UsageError


class Cost(IntEnum):
    """How much work a value takes, in order: known from the IR, after building, after training, after an analysis."""

    STATIC = 0  # from the IR alone (params, FLOPs): free, known before training
    FORWARD = 1  # needs a built model, not a trained one (latency)
    TRAINED = 2  # needs training (accuracy)
    ANALYSIS = 3  # needs training and an expensive analysis (Hessian, CIFAR-C)


@dataclass(frozen=True)
class Objective:
    """A value a search can optimise: its name, direction, cost, unit and what it means."""

    name: str
    direction: Literal["maximize", "minimize"]
    cost: Cost
    unit: str
    description: str
    # The values it can take, where it has a range (a fraction: [0, 1]): an interval is clipped to it.
    bounds: tuple[float, float] | None = None

    def better(self, a: float, b: float) -> bool:
        """Whether value `a` is strictly better than `b`."""
        return a > b if self.direction == "maximize" else a < b


FRACTION = (0.0, 1.0)  # the range of a top-1 or a share

OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        Objective(
            "accuracy",
            "maximize",
            Cost.TRAINED,
            "",
            "validation top-1 (a fraction) after the trial's training",
            FRACTION,
        ),
        Objective(
            "robustness",
            "maximize",
            Cost.ANALYSIS,
            "",
            "mean top-1 (a fraction), corrupted validation images",
            FRACTION,
        ),
        Objective("nep", "minimize", Cost.ANALYSIS, "", "share of negative Hessian max-eigenvalues", FRACTION),
        Objective("ape", "minimize", Cost.ANALYSIS, "", "mean positive Hessian max-eigenvalue"),
        Objective("params", "minimize", Cost.STATIC, "", "parameter count"),
        Objective("flops", "minimize", Cost.STATIC, "", "FLOPs per image (2 x MACs)"),
        Objective("latency", "minimize", Cost.FORWARD, "ms", "inference time per image on the search device"),
    )
}


def parse_objectives(text: str) -> tuple[Objective, ...]:
    """`"accuracy,params"` -> the objectives, in order (the first one leads the build-up strategy)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--objectives is empty", hint=f"choose from {', '.join(OBJECTIVES)}")
    unknown = [n for n in names if n not in OBJECTIVES]
    if unknown:
        raise UsageError(f"unknown objective {unknown[0]!r}", hint=f"choose from {', '.join(OBJECTIVES)}")
    if len(set(names)) != len(names):
        raise UsageError(f"--objectives names an objective twice: {text!r}")
    return tuple(OBJECTIVES[n] for n in names)


def dominates(a: dict[str, float], b: dict[str, float], objectives: tuple[Objective, ...]) -> bool:
    """Pareto dominance of value set `a` over `b` on `objectives` (no worse anywhere, better somewhere)."""
    no_worse = all(not o.better(b[o.name], a[o.name]) for o in objectives)
    return no_worse and any(o.better(a[o.name], b[o.name]) for o in objectives)
