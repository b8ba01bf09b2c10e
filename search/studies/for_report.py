"""What a search writes on its study for the report, beside its trials: the report reads the study's storage alone,
so the runner records there what only the running search knows. At the start, how every trial is trained and
scored (`record.Protocol`: seeds, splits, budgets, recipe); at the end, the build-up walk's verdicts and its answer
at its budget, and for a replayed study what a random pick in the same CPU would score (`record.RandomPick`).
Every worker writes the same values, computed from the same plan or the whole study."""

from __future__ import annotations

from typing import TYPE_CHECKING

import optuna

from archdsl.search.fidelity.budget import Budget
from archdsl.search.studies.record import (
    PROTOCOL_ATTR,
    RANDOM_PICK_ATTR,
    WALK_CHOICES_ATTR,
    WALK_END_ATTR,
    WALK_FAILED_ATTR,
    WALK_SETTLE_ATTR,
    WALK_STEPS_ATTR,
    Protocol,
    RecordedChoice,
    RecordedFailedSeed,
    RecordedSettle,
    RecordedStep,
    cpu_seconds,
    trials,
)

if TYPE_CHECKING:
    from archdsl.search.plan import SearchPlan
    from archdsl.search.space import ParamValue, Space
    from archdsl.search.walk.buildup import Walk


def protocol(plan: SearchPlan) -> Protocol:
    """How the study of `plan` trains and scores its trials (the data's counts from its loaded splits)."""
    s, fidelity, data = plan.settings, plan.fidelity, plan.data
    counts: dict[str, int | None] = {}
    if data is not None:
        counts = {
            "train_images": len(data.train_set),
            "held_out": len(data.train_split) - len(data.train_set) if data.train_split is not None else None,
            "validation_images": len(data.validation),
            "test_images": len(data.test) if data.test is not None else None,
        }
    trained = Protocol(
        dataset=s.dataset, data_root=_absolute(s.data_root), seed=s.seed, seeds=fidelity.seeds,
        max_seeds=plan.max_seeds, keep=plan.keep, knobs=plan.knobs,
        training_seeds=training_seeds(plan), budgets=[*plan.rungs, *plan.settles], settle_steps=len(plan.settles),
        recipe=fidelity.recipe,
        train_settings=dict(fidelity.train_settings), device=s.device, optimize=fidelity.optimize,
        batch_chosen=plan.batch.text() if plan.batch is not None else None,
    ).model_copy(update=counts)  # fmt: skip
    if plan.replay is None:
        return trained.model_copy(update={"threads": training_threads(plan)})
    table = plan.replay.table  # its runs were trained as its own fidelity says, on its machine
    made = table.fidelity
    return trained.model_copy(
        update={
            "table": plan.replay.source, "device": table.machine or "the table's machine",
            "budgets": [Budget(plan.replay.epochs, float(made.get("subset", fidelity.subset)))],
            "recipe": str(made.get("recipe", fidelity.recipe)), "train_settings": dict(made.get("train_settings", {})),
        }
    )  # fmt: skip


def _absolute(folder: str | None) -> str | None:
    """`folder` from the root, so that the retrain commands (which name it) run from any folder."""
    from pathlib import Path

    return None if folder is None else str(Path(folder).absolute())


def training_threads(plan: SearchPlan) -> int | None:
    """The intra-op threads paired seed index 0 trains with on a CPU (`seeds_aside`: its share of the cores where
    the later seeds train beside it; else torch's count); None on an accelerator."""
    import torch

    from archdsl.run.device import select_device
    from archdsl.run.distributed import current
    from archdsl.search.fidelity import seeds_aside

    device, seeds = select_device(plan.settings.device).type, plan.fidelity.seeds
    if device != "cpu":
        return None
    if seeds_aside.can_train_aside(device, seeds, distributed=current() is not None):
        return seeds_aside.threads_each(seeds)
    return torch.get_num_threads()


def training_seeds(plan: SearchPlan) -> list[int]:
    """The seed each paired seed index trains with (`measures.seed_of`); a replayed study's: the seed of the table
    run that answers it (the same for every design), none where each trial draws a run (one seed, no racing)."""
    from archdsl.search.fidelity.measures import seed_of

    indices = range(plan.max_seeds)
    if plan.replay is None:
        return [seed_of(plan.settings.seed, index) for index in indices]
    if plan.max_seeds == 1:
        return []
    from archdsl.search.fidelity.replay import paired_runs

    return [run.seed for run in paired_runs(plan.replay.table.designs[0], plan.settings.seed, indices)]


def record_protocol(study: optuna.Study, plan: SearchPlan) -> None:
    study.set_user_attr(PROTOCOL_ATTR, protocol(plan).model_dump(mode="json"))


def record_walk(study: optuna.Study, space: Space, walk: Walk) -> None:
    """The walk's verdicts, and its answer (`WALK_END_ATTR`) at the budget its last verdict settled at."""
    steps = [
        RecordedStep(
            step=s.label, digest=space.arch_from_params(s.params).digest(), value=s.value, accepted=s.accepted,
            state=s.state, rung=s.rung, standings=list(s.standings), moving=s.moving,
        ).model_dump(mode="json")
        for s in walk.steps
    ]  # fmt: skip
    study.set_user_attr(WALK_STEPS_ATTR, steps)

    def digest(params: dict[str, ParamValue]) -> str:
        return space.arch_from_params(params).digest()

    failed = [
        RecordedFailedSeed(
            digest=digest(f.params), rung=f.rung, index=f.index, value=f.value, typical=f.typical,
            replacement=f.replacement,
        ).model_dump(mode="json")
        for f in walk.failed
    ]  # fmt: skip
    study.set_user_attr(WALK_FAILED_ATTR, failed)
    settle = [
        RecordedSettle(
            rung=s.rung, values=[(digest(p), v) for p, v in s.values], best=digest(s.best), called=s.called
        ).model_dump(mode="json")
        for s in walk.settled
    ]
    study.set_user_attr(WALK_SETTLE_ATTR, settle)
    choices = [
        RecordedChoice(stage=c.stage, knob=c.knob, rung=c.rung, values=list(c.values), chosen=c.chosen).model_dump(
            mode="json"
        )
        for c in walk.choices
    ]
    study.set_user_attr(WALK_CHOICES_ATTR, choices)
    if walk.answer is not None:
        end = digest(walk.answer)
        study.set_user_attr(WALK_END_ATTR, end if walk.answer_rung == 0 else f"{end}@{walk.answer_rung}")


def record_random_pick(study: optuna.Study, plan: SearchPlan) -> None:
    """A replayed accuracy study's random pick within the CPU its trials took (where its table records CPU)."""
    if plan.replay is None or [o.name for o in plan.objectives] != ["accuracy"]:
        return
    spent, unknown = cpu_seconds(trials(study))
    if unknown or spent <= 0:
        return
    from archdsl.search.fidelity.random_pick import random_pick

    pick = random_pick(plan.replay, plan.settings.seed, plan.fidelity.seeds, spent)
    if pick is not None:
        study.set_user_attr(RANDOM_PICK_ATTR, pick.model_dump(mode="json"))
