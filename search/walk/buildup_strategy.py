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
    flags: ClassVar[frozenset[str]] = frozenset({"keep", "knobs", "settle_steps"})

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
        """The longest walk (`longest_walk`), or `--n-trials` where it is given and fewer: the default --n-trials
        (8) would cut short a walk that chooses its windows (10 designs on resnet-fmnist's k,window space)."""
        from archdsl.search.walk.buildup import longest_walk

        longest = longest_walk(plan.space, plan.knobs)
        given = "n_trials" in plan.settings.model_fields_set
        return min(super().target_trials(plan), longest) if given else min(longest, plan.space.n_designs())

    def fewest_trials(self, plan: PlanView) -> int:
        """The shortest walk: the base, then one MSA that does not help in each stage that takes one (with its
        knobs' other values, where it chooses them)."""
        from archdsl.search.walk.buildup import longest_walk

        shortest = longest_walk(plan.space, plan.knobs) - sum(s.max_k - 1 for s in plan.space.stages if s.max_k > 0)
        return min(shortest, self.target_trials(plan))

    def auto_pruner(self, epochs: int, raised: bool) -> str:
        """None: a pruner stops a candidate on one seed's early epochs, a verdict the walk's own rule, on every
        paired seed at the end of training, would not call (the main job's c2 candidate at 0.14 after one
        epoch); and on a ladder, the very bias the ladder is there to see past."""
        return "none"

    def reach_text(self, plan: PlanView) -> str | None:
        """Where the study searches knobs besides k, what the walk leaves out: with --knobs base it keeps the base's
        heads, windows, head widths and init, so it reaches one design per k (docs/search.md, "A space where right
        answers are a minority", measured what that costs); with --knobs choose it chooses each stage's knobs as the
        stage takes its first MSA, and leaves out init alone; None where it reaches the whole space."""
        from archdsl.search.walk.buildup import longest_walk

        space = plan.space
        others = [knob for knob in space.searched if knob != "k"]
        if not others:
            return None
        staged = [knob for knob in others if knob != "init"]
        if plan.knobs == "choose" and staged:
            from archdsl.ir import INIT_SCHEMES

            reach = space.n_designs() // (len(INIT_SCHEMES) if "init" in others else 1)
            left_out = " (and keeps the base's init)" if "init" in others else ""
            return (
                f"walk: the build-up walk chooses a stage's {_listed(staged)} as the stage takes its first MSA "
                f"(--knobs choose{left_out}; {reach} of the {space.n_designs()} designs are within its reach, "
                f"at most {longest_walk(space, 'choose')} measured)"
            )
        on_path = math.prod(stage.max_k + 1 for stage in space.stages)
        knobs = _listed(others)
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
        staged = [knob for knob in plan.space.searched if knob not in ("k", "init")]
        chosen = (
            f"; a stage's first MSA takes the {_listed(staged)} with the best mean (--knobs choose)"
            if staged and plan.knobs == "choose"
            else ""
        )
        return (
            f"keep: {rule} (--keep {plan.keep}){chosen}, a seed that fails to learn replaced by a fresh one; {settle}"
        )


def _listed(knobs: list[str]) -> str:
    """`heads and window`, `heads, window and init`."""
    return " and ".join([", ".join(knobs[:-1]), knobs[-1]] if len(knobs) > 1 else knobs)
