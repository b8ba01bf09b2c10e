"""`--strategy buildup`: the paper's build-up walk (`buildup.walk`, with its ladder of budgets and its settle
stage) as a `Strategy`, run in a study by `planned.PlannedSampler`."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, ClassVar

from archdsl.search.walk.strategy import PlanView, Strategy

if TYPE_CHECKING:
    from archdsl.search.walk.planned import PlannedSampler


class BuildUp(Strategy):
    """From the base, add an MSA at the end of the last stage while it helps, then the stage before; the runner's
    stop rule ends the study when the walk is done."""

    name = "buildup"  # also the `strategy` its trials record (planned.PlannedSampler)
    help = "the paper's rule: add an MSA at the end of the last stage while it helps, then the stage before"
    walks = True
    flags: ClassVar[frozenset[str]] = frozenset({"keep", "settle_steps"})

    def sampler(self, plan: PlanView) -> PlannedSampler:
        """The walk's sampler, failing dead workers' trials while it waits for another worker's verdict, and
        taking a design anyway past --timeout."""
        from archdsl.search.studies.storage import fail_stale_trials
        from archdsl.search.walk.planned import PlannedSampler

        deadline = None if plan.settings.timeout is None else time.monotonic() + plan.settings.timeout
        return PlannedSampler(
            plan.space, plan.objectives[0], 0, plan.walk_rules, wait=lambda s: fail_stale_trials(s, plan.storage),
            deadline=deadline,
        )  # fmt: skip

    def target_trials(self, plan: PlanView) -> int:
        """`--n-trials`, fewer when the longest walk (or the space) holds fewer."""
        from archdsl.search.walk.buildup import longest_walk

        return min(super().target_trials(plan), longest_walk(plan.space))

    def fewest_trials(self, plan: PlanView) -> int:
        """The shortest walk: the base, then one MSA that does not help in each stage that takes one."""
        shortest = 1 + sum(1 for s in plan.space.stages if s.max_k > 0)
        return min(shortest, self.target_trials(plan))

    def auto_pruner(self, epochs: int, raised: bool) -> str:
        """None: a pruner stops a candidate on one seed's early epochs, a verdict the walk's own rule, on every
        paired seed at the end of training, would not call (the main job's c2 candidate at 0.14 after one
        epoch); and on a ladder, the very bias the ladder is there to see past."""
        return "none"

    def reach_text(self, plan: PlanView) -> str | None:
        """Where the study searches knobs besides k, what the walk leaves out: it keeps the base's heads, windows,
        head widths and init, so it reaches one design per k (docs/search.md, "A space where right answers are a
        minority", measured what that costs); None where it reaches the whole space."""
        space = plan.space
        others = [knob for knob in space.searched if knob != "k"]
        if not others:
            return None
        on_path = math.prod(stage.max_k + 1 for stage in space.stages)
        knobs = " and ".join([", ".join(others[:-1]), others[-1]] if len(others) > 1 else others)
        return (
            f"walk: the build-up walk keeps the base's {knobs} ({on_path} of the {space.n_designs()} "
            f"designs are within its reach); --strategy tpe or random searches {knobs} too"
        )

    def rule_text(self, plan: PlanView) -> str:
        """How the walk keeps an MSA and settles its answer."""
        rule = (
            "an MSA whose mean over the paired seeds is higher"
            if plan.keep == "mean"
            else "an MSA the paired seeds' t-test calls better"
        )
        settle = (
            "then the shortlist re-measured on fresh seeds at " + " and ".join(b.epochs_text() for b in plan.settles)
            if plan.settles
            else "no settle stage (--settle-steps 0)"
        )
        return f"keep: {rule} (--keep {plan.keep}), a seed that fails to learn replaced by a fresh one; {settle}"
