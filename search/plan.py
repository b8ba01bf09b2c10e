"""The study's one plan (`SearchPlan`): its settings read once, and what was worked out from them, which the runner,
every trial and the strategy read; and the command line that runs the study again (`reproduce_command`).

Plain data, below what reads it: the planning (`planning.plan_space` and `plan_search` make it), the runner, the
trials and the report import it; it imports the settings and, for the checker only or inside a property, the
types and rules its fields hold, none of which imports it back (tests/test_layering.py checks there is no cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archdsl.search.settings import SearchSettings, flag_number
from archdsl.search.walk.keep_rules import DEFAULT_KEEP, DEFAULT_KNOBS, Keep, Knobs

if TYPE_CHECKING:
    import optuna

    from archdsl.run.distributed import Ranks
    from archdsl.search.fidelity.batch import BatchChoice
    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.fidelity.measures import DataContext, Fidelity
    from archdsl.search.fidelity.replay import Replay
    from archdsl.search.objectives import Objective
    from archdsl.search.space import Space
    from archdsl.search.studies.storage import StorageOptions
    from archdsl.search.time_estimate import Workload
    from archdsl.search.walk.buildup import Rules
    from archdsl.search.walk.strategy import Strategy

__all__ = ["NOT_RECORDED", "SearchPlan", "reproduce_command"]


@dataclass(frozen=True)
class SearchPlan:
    """One study, its settings read once: the one object the runner (`runner.run_search`) and every
    trial (`trial.TrialObjective`, its `Measurer`) read their settings from.

    `plan_space` makes it without loading anything (what `--dry-run` shows); `plan_search` adds the
    data (or the replay table) and the open study (what `run_planned` runs). The flags' values stay in
    `settings` and `fidelity`; the fields beside them are what was worked out from them once.
    """

    settings: SearchSettings
    fidelity: Fidelity  # resolved: the dataset's subsets (fidelity_for); a replayed study's, the table's epochs
    space: Space  # the build-up space of the base fitted to the data (`space.base`)
    objectives: tuple[Objective, ...]
    study_name: str
    base_name: str  # as --base gave it (a path or a built-in name), or the default base's name
    why: str | None = None  # why the base was chosen, when --base did not name it
    data: DataContext | None = None  # a trained study's, once planned; None while a dry run or a table answers
    replay: Replay | None = None  # the table of `--fidelity table:...`
    study: optuna.Study | None = None  # once planned; None on a follower rank (the study is rank 0's)
    ranks: Ranks | None = None  # under torchrun: this process's place in the group
    keep_files: bool = True  # each trial's folder under OUT/STUDY/trials (False: an in-memory study, e.g. a benchmark)
    # The ladder the build-up walk climbs (fidelity.budget; its first rung is `fidelity`'s epochs and subset); one
    # rung where the budget was measured, for a replayed study, and for the samplers.
    budgets: tuple[Budget, ...] = ()
    # The settle stage's budgets, above the ladder (`settle_budgets`): the walk's shortlist is measured there last.
    settles: tuple[Budget, ...] = ()
    classes: int | None = None  # the data's classes (a guess scores 1 / classes: what a seed that failed stays near)
    train_images: int | None = None  # the training images left once the validation ones are held out (described)
    validation_images: int | None = None  # the validation images each epoch scores (--val-split, --val-subset)
    test_images: int | None = None  # the test images each paired seed scores once (sealed for the final test)
    batch: BatchChoice | None = None  # the batch size chosen from the data, where none was given (in the fidelity)

    @property
    def base_text(self) -> str:
        name = self.space.base.name
        return f"{name} ({self.why})" if self.why else name

    @property
    def out(self) -> Path:
        return Path(self.settings.out)

    @property
    def trial_root(self) -> Path | None:
        """The study's folder, where each trial's files go (under trials/); None when they are not kept."""
        return self.out / self.study_name if self.keep_files else None

    @property
    def storage(self) -> StorageOptions:
        """Where the study lives and how its dead workers are found (--storage, --heartbeat, --grace-period,
        --max-retry)."""
        from archdsl.search.studies.storage import StorageOptions

        s = self.settings
        return StorageOptions(
            url=s.storage, heartbeat_interval=s.heartbeat, grace_period=s.grace_period or 3 * s.heartbeat,
            max_retry=s.max_retry,
        )  # fmt: skip

    @property
    def max_seeds(self) -> int:
        """The most paired seeds a design is measured on (--max-seeds; --seeds when not given: no racing)."""
        return self.settings.max_seeds or self.fidelity.seeds

    @property
    def pruner(self) -> str:
        """The pruner the study runs with: --pruner, `auto` resolved for the strategy, the epochs and the budgets."""
        return self.settings.chosen_pruner(self.fidelity.epochs, len(self.rungs) > 1)

    @property
    def rungs(self) -> tuple[Budget, ...]:
        """The budgets a trial may train at (`budgets`; the fidelity's alone when there is no ladder)."""
        from archdsl.search.fidelity.budget import Budget

        return self.budgets or (Budget(self.fidelity.epochs, self.fidelity.subset),)

    @property
    def workload(self) -> Workload:
        """What each trial trains and scores (`time_estimate`: the dry run's range, the progress line's ETA)."""
        from archdsl.search.time_estimate import Workload
        from archdsl.search.walk.buildup import settle_size

        return Workload(
            rungs=self.rungs, settles=self.settles, seeds=self.fidelity.seeds, train_images=self.train_images or 0,
            validation_images=self.validation_images or 0, test_images=self.test_images or 0,
            stand_ins=self.strategy.walks, shortlist=settle_size(self.space, self.knobs),
        )  # fmt: skip

    def fidelity_at(self, rung: int) -> Fidelity:
        """The fidelity of budget rung `rung`: the study's, with that rung's epochs and training subset."""
        if rung == 0:
            return self.fidelity
        budget = (*self.rungs, *self.settles)[rung]
        return self.fidelity.model_copy(update={"epochs": budget.epochs, "subset": budget.subset})

    @property
    def walk_rules(self) -> Rules:
        """How the build-up walk decides: the paired seeds and racing, the ladder of budgets, and how it keeps."""
        from archdsl.search.seed_stats import Racing
        from archdsl.search.walk.buildup import Rules

        racing = Racing(self.fidelity.seeds, self.max_seeds)
        accuracy = [o.name for o in self.objectives][:1] == ["accuracy"]
        return Rules(
            racing=racing, rungs=len(self.rungs), budgeting=self.fidelity.budgeting, keep=self.keep,
            chance=1 / self.classes if self.classes and accuracy else None, settle=len(self.settles),
            knobs=self.knobs,
        )  # fmt: skip

    @property
    def keep(self) -> Keep:
        """How the walk keeps an MSA: --keep, or the default rule (racing, --max-seeds, races the paired test)."""
        return self.settings.keep or ("beyond-noise" if self.max_seeds > self.fidelity.seeds else DEFAULT_KEEP)

    @property
    def knobs(self) -> Knobs:
        """What the walk gives a new MSA's searched heads, window and head width: --knobs, or the default."""
        return self.settings.knobs or DEFAULT_KNOBS

    @property
    def command(self) -> str:
        """The command line that runs this study again (kept in the study for its report)."""
        return reproduce_command(self)

    @property
    def strategy(self) -> Strategy:
        """How the designs are chosen (--strategy, from `walk.registry`)."""
        from archdsl.search.walk.registry import strategy_named

        return strategy_named(self.settings.strategy)

    @property
    def follower(self) -> bool:
        """A rank after the first of a torchrun group: it trains what rank 0 sends."""
        return self.ranks is not None and not self.ranks.leader

    def describe(self) -> str:
        """The line the command prints before the first trial."""
        settings = self.settings
        replayed = f", replayed from the table {self.replay.source}" if self.replay is not None else ""
        reach = self.strategy.reach_text(self)
        return (
            f"search {self.study_name}: {settings.strategy} over {self.space.size()} points of {self.base_text} on "
            f"{settings.dataset}, objectives {','.join(o.name for o in self.objectives)}{replayed}"
            + (f"\n{reach}" if reach else "")
        )


# Settings that do not change what a study measures, left out of its command line: how the data is fetched,
# how workers report, wait for each other and find the dead ones, and the fast copy of each model (which
# computes the same numbers).
NOT_RECORDED = ("download", "progress", "dist_timeout", "heartbeat", "grace_period", "max_retry", "optimize")


def reproduce_command(plan: SearchPlan) -> str:
    """The `archdsl search` line that runs this study again, kept in the study for its report: every flag of
    `SearchSettings` and `measures.Fidelity` (`NOT_RECORDED` aside) with the value the study runs with,
    defaults included (a later change of a default must not change what the line does), the recipe's given
    settings after `--recipe`; the Hessian's and robustness's flags only when an objective reads them
    (`json_schema_extra["objectives"]`). A database URL's password is left out."""
    import shlex

    from archdsl.run.recipe import recipe_command_words, recipe_flags
    from archdsl.search.studies.storage import without_password

    s, fidelity = plan.settings, plan.fidelity
    resolved = {
        "base": plan.base_name,
        "objectives": ",".join(o.name for o in plan.objectives),
        "pruner": plan.pruner,
        "keep": plan.keep if "keep" in plan.strategy.flags else None,
        "knobs": plan.knobs if "knobs" in plan.strategy.flags and plan.space.searched != ("k",) else None,
        "max_seeds": plan.max_seeds if plan.max_seeds > fidelity.seeds else None,
        "study_name": plan.study_name,
        "storage": None if s.storage is None else without_password(s.storage),
    }
    names = {o.name for o in plan.objectives}
    words = ["archdsl", "search"]
    for settings in (s, fidelity):
        for field, info in type(settings).model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            read_by = extra.get("objectives")  # the objectives that read it, where only some do
            if "flag" not in extra or field in NOT_RECORDED or (isinstance(read_by, tuple) and not names & {*read_by}):
                continue
            words += _flag_words(str(extra["flag"]), resolved.get(field, getattr(settings, field)))
            if field == "recipe":
                given = dict(fidelity.train_settings)
                words += recipe_command_words({name: given[name] for name in recipe_flags() if name in given})
    return shlex.join(words)


def _flag_words(flag: str, value: Any) -> list[str]:
    """A flag with its value as the command line takes it back: a switch on or off, a list comma-separated."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [flag if value else f"--no-{flag[2:]}"]
    if isinstance(value, tuple):
        return [flag, ",".join(map(str, value))]
    return [flag, flag_number(value) if isinstance(value, float) else str(value)]
