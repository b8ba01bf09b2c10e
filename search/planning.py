"""`archdsl.search(...)`: search where the MSAs go and return the Optuna study and its best designs;
`archdsl search` prints what this plans and returns.

Steps, so that a caller can say what will happen before it happens: `plan_space` reads the settings
once into the study's one `plan.SearchPlan`, with the base picked and fitted and the space made (what
`--dry-run` shows); `plan_search` adds the data and the open study, checking everything a trial would
otherwise fail on; `run_planned` runs this worker's share of the study (`runner.run_search`, whose
trials read their settings from the same plan). `search` does all three. Every refusal is a
`UserError`, raised before the first trial.

Under torchrun, the group is one worker of the study (`archdsl.search.fidelity.distributed`): `plan_search`
joins the process group; rank 0 opens the study and runs the search, and `run_planned` on the
other ranks trains each design rank 0 sends (their `SearchResult` says `follower`). The group
stays open for the caller (`archdsl search` closes it).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from archdsl.errors import ArchdslWarning, UsageError
from archdsl.ir import Arch
from archdsl.search.plan import SearchPlan
from archdsl.search.settings import SearchSettings, default_base

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from archdsl.data import DatasetInfo
    from archdsl.search.fidelity.batch import BatchChoice
    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.fidelity.measures import DataContext, Fidelity
    from archdsl.search.fidelity.replay import Replay
    from archdsl.search.report import TrialRow
    from archdsl.search.runner import SearchOutcome
    from archdsl.search.time_estimate import TimeEstimate

__all__ = [
    "SearchResult",
    "describe_space",
    "dry_run_check",
    "load_checked_data",
    "fidelity_for",
    "plan_search",
    "plan_space",
    "run_planned",
    "search",
]


def plan_space(settings: SearchSettings, fidelity: Fidelity | Mapping[str, object] | None = None) -> SearchPlan:
    """The study `settings` (and `fidelity`, see `fidelity_for`) describe, without loading any data: the base
    fitted to the dataset's description and the space (a bad dataset name fails here)."""
    from archdsl.data import describe, sized_name
    from archdsl.run.device import select_device
    from archdsl.search.fidelity import measures as measure
    from archdsl.search.fidelity.budget import ladder
    from archdsl.search.fidelity.replay import is_replay
    from archdsl.search.objectives import parse_objectives
    from archdsl.search.space import make_space, parse_searched
    from archdsl.search.studies.naming import check_study_name, default_study_name
    from archdsl.search.walk.registry import strategy_named

    if settings.image_size is not None:  # the dataset read at that size: the base is fitted to it below
        dataset = sized_name(settings.dataset, settings.image_size, settings.data_root)
        settings = settings.model_copy(update={"dataset": dataset, "image_size": None})
    objectives = parse_objectives(settings.objectives)
    searched = parse_searched(settings.search)
    device = select_device(settings.device)  # a device this machine lacks: refused now, not by the first trial
    info = describe(settings.dataset, settings.data_root)  # a bad dataset name fails now, before anything loads
    base_name, why = (settings.base, None) if settings.base else default_base(info, device.type != "cpu")
    study_name = check_study_name(
        settings.study_name
        or default_study_name(
            base_name, settings.dataset, settings.strategy, replayed=is_replay(settings.fidelity_source)
        )
    )
    resolved = fidelity_for(settings, fidelity, info)
    if settings.max_seeds is not None and settings.max_seeds < resolved.seeds:
        raise UsageError(
            f"--max-seeds {settings.max_seeds} is below --seeds {resolved.seeds}",
            hint="racing measures more seeds than --seeds, never fewer: give --max-seeds >= --seeds",
        )
    strategy = strategy_named(settings.strategy)
    if settings.keep == "mean" and "keep" not in strategy.flags:
        raise UsageError(f"--keep mean is the build-up walk's rule; --strategy {settings.strategy} does not walk",
                         hint="--strategy buildup --keep mean, or leave --keep out")  # fmt: skip
    if settings.knobs is not None and "knobs" not in strategy.flags:
        raise UsageError(f"--knobs is the build-up walk's rule; --strategy {settings.strategy} draws every knob itself",
                         hint="--strategy buildup --knobs ..., or leave --knobs out")  # fmt: skip
    if settings.keep == "mean" and (settings.max_seeds or resolved.seeds) > resolved.seeds:
        raise UsageError("--keep mean compares means, so there is no test to race: --max-seeds has nothing to do",
                         hint="leave --max-seeds out, or race the paired test: --keep beyond-noise")  # fmt: skip
    # the same for a dry run and a run
    fitted = measure.fit_to_data(measure.load_base(base_name), info.image_shape, info.num_classes)
    images = train_images(info, resolved.val_split)
    given_whole = isinstance(fidelity, measure.Fidelity)  # a caller's whole Fidelity: its batch size is as given
    batch = None if given_whole or is_replay(settings.fidelity_source) else batch_from_data(resolved, images)
    if batch is not None:
        chosen = {**dict(resolved.train_settings), "batch_size": batch.chosen}
        resolved = resolved.model_copy(update={"train_settings": tuple(sorted(chosen.items()))})
    walked = strategy.walks and not is_replay(settings.fidelity_source)
    if walked:
        check_ladder_trainable(resolved)
    return SearchPlan(
        settings=settings, fidelity=resolved, space=make_space(fitted, searched),
        objectives=objectives, study_name=study_name, base_name=base_name, why=why,
        budgets=(rungs := ladder(resolved, images, info.num_classes) if walked else ()), train_images=images,
        validation_images=scored_validation_images(info, resolved), test_images=int(info.split_sizes.get("test", 0)),
        settles=settle_budgets(rungs[-1], resolved.settle_steps) if walked and "settle_steps" in strategy.flags else (),
        classes=info.num_classes, batch=batch,
    )  # fmt: skip


def batch_from_data(fidelity: Fidelity, images: int) -> BatchChoice | None:
    """The batch size chosen from the data (`fidelity.batch`) where no batch size was given (on the command line, in
    a --config file or by the dataset's card) and the recipe's gives the first budget too few optimizer steps."""
    from archdsl.search.fidelity.batch import choose_batch
    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.fidelity.measures import train_config

    if "batch_size" in dict(fidelity.train_settings) or images <= 0:
        return None
    first = Budget(fidelity.epochs, fidelity.subset)  # the ladder's first rung (`budget.ladder`)
    default = train_config(fidelity, device="cpu", seed=0).batch_size
    return choose_batch(first.images(images), first.epochs, default)


def settle_budgets(last: Budget, steps: int) -> tuple[Budget, ...]:
    """The settle stage's budgets above the ladder's `last`: its epochs times each of the first `steps`
    `SETTLE_FACTORS`, on its images."""
    from archdsl.search.fidelity.budget import Budget
    from archdsl.search.fidelity.measures import SETTLE_FACTORS

    return tuple(Budget(last.epochs * factor, last.subset) for factor in SETTLE_FACTORS[:steps])


def check_ladder_trainable(fidelity: Fidelity) -> None:
    """A `UsageError` where the ladder's top rung (each budget step doubles the epochs) would train longer than a
    training run may (`MAX_EPOCHS`): its trials would fail there, after hours on the rungs below."""
    from archdsl.common_settings import MAX_EPOCHS

    steps, epochs = fidelity.budget_steps, fidelity.epochs
    if epochs * 2**steps <= MAX_EPOCHS:
        return
    fitting = max(0, math.floor(math.log2(MAX_EPOCHS / epochs)))
    raise UsageError(
        f"--budget-steps {steps} from --epochs {epochs} climbs to {epochs * 2**steps:,} epochs, past the "
        f"{MAX_EPOCHS:,} a candidate may train",
        hint=f"give --budget-steps {fitting} or fewer, or fewer --epochs",
    )


def train_images(info: DatasetInfo, val_split: str | None) -> int:
    """The training images a study's trials draw their subsets from: the training split less the validation
    images (as described; 0 where the description has no count)."""
    from archdsl.data.validation import held_out_count, parse_val_split

    total = int(info.split_sizes.get("train", 0))
    if total <= 0:
        return 0
    size = None if val_split is None else parse_val_split(val_split)
    return max(0, total - held_out_count(total, info.num_classes, size))


def scored_validation_images(info: DatasetInfo, fidelity: Fidelity) -> int:
    """The validation images each epoch scores: those held out (--val-split), the --val-subset share of them (as
    described; 0 where the description has no count)."""
    from archdsl.data.validation import held_out_count, parse_val_split

    total = int(info.split_sizes.get("train", 0))
    if total <= 0:
        return 0
    size = None if fidelity.val_split is None else parse_val_split(fidelity.val_split)
    return max(1, round(held_out_count(total, info.num_classes, size) * fidelity.val_subset))


def fidelity_for(
    settings: SearchSettings, fidelity: Fidelity | Mapping[str, object] | None = None, info: DatasetInfo | None = None
) -> Fidelity:
    """The `Fidelity` a study trains and measures with: `fidelity` whole when it is one; otherwise its fields (a
    mapping) over the dataset's card (archdsl.data.cards: epochs, subset, validation images, budget steps; the
    subset no lower than trains, `budget.floored_subset`, where `info` describes the data), the validation subset
    the training one (every validation image on small data, and enough held out to call a 5-point difference where
    a fifth of the data holds them: `validation_power`), and the card's training defaults under the train_settings,
    unless given."""
    from archdsl.data.cards import card_for
    from archdsl.data.validation import held_out_count
    from archdsl.search.fidelity.budget import floored_subset
    from archdsl.search.fidelity.measures import Fidelity
    from archdsl.search.fidelity.validation_power import held_out_for_target, is_small

    if isinstance(fidelity, Fidelity):
        return fidelity
    card = card_for(settings.dataset)
    given = dict(fidelity or {})
    train_settings = given.get("train_settings")
    if isinstance(train_settings, Mapping):  # TrainConfig fields, as a Python caller gives them
        given["train_settings"] = tuple(sorted(train_settings.items()))
    defaults = card.search
    chosen = {
        "epochs": defaults.epochs, "subset": defaults.subset, "val_split": defaults.val_split,
        "budget_steps": defaults.budget_steps, **{k: v for k, v in given.items() if v is not None},
    }  # fmt: skip
    # small data's validation, sized to call a difference (`validation_power`); a measured budget keeps its own
    small = (
        not defaults.measured and info is not None and is_small(int(info.split_sizes.get("train", 0)), info.num_classes)
    )
    if info is not None and small and chosen["val_split"] is None:  # sized to call a difference, where it can
        total = int(info.split_sizes.get("train", 0))
        raised = held_out_for_target(total, held_out_count(total, info.num_classes, None))
        chosen["val_split"] = str(raised) if raised is not None else None
    if info is not None and given.get("subset") is None:
        images = train_images(info, chosen["val_split"])  # type: ignore[arg-type]
        chosen["subset"] = floored_subset(float(chosen["subset"]), images, info.num_classes)  # type: ignore[arg-type]
    if chosen.get("val_subset") is None:  # small data: every validation image scores (validation_power says why)
        chosen["val_subset"] = 1.0 if small else chosen["subset"]
    resolved = Fidelity.model_validate(chosen)
    training = {**card.training, **dict(resolved.train_settings)}  # the card's (odd-one-out: no crop), unless given
    return resolved.model_copy(update={"train_settings": tuple(sorted(training.items()))})


def describe_space(plan: SearchPlan) -> str:
    """What `--dry-run` prints: the base, the space, its size and endpoints."""
    from archdsl.search.fidelity.validation_power import difference_text
    from archdsl.search.space import STAGE_KNOBS, layout_text

    space = plan.space
    shape = space.base.input
    lines = [f"base {plan.base_text}: {len(space.stages)} stages, searching {','.join(space.searched)}"]
    lines.append(
        f"fitted to {plan.settings.dataset}: {shape.channels}x{shape.height}x{shape.width}, "
        f"{space.base.classes} classes"
    )
    for s in space.stages:
        n = next(len(st.blocks) for st in space.base.stages if st.name == s.name)
        extra = "".join(f"  {knob} {list(s.options(knob))}" for knob in STAGE_KNOBS if knob in space.searched)
        lines.append(f"  {s.name}: {n} blocks, k in 0..{s.max_k}{extra}")
    if "init" in space.searched:
        lines.append(f"  init: {', '.join(map(str, space.choices()['init']))} (base: {space.base.init})")
    lines.append(f"size: {space.size()} points, {space.n_designs()} distinct designs")
    reach, rule = plan.strategy.reach_text(plan), plan.strategy.rule_text(plan)
    if reach:
        lines.append(reach)
    lines.append(budget_text(plan))
    if plan.batch is not None:
        lines.append(plan.batch.text())
    steps = first_steps_text(plan)
    if steps:
        lines.append(steps)
    if plan.validation_images and plan.replay is None and plan.settings.fidelity_source == "train":
        lines.append(difference_text(plan.validation_images, plan.fidelity.seeds))
    if rule:
        lines.append(rule)
    lines.append("endpoints:")
    for e in space.endpoints():
        arch = space.arch_from_params(e.params)
        layout = layout_text(arch)
        ks = ",".join(str(e.params.get(f"k_{s.name}", 0)) for s in space.stages)
        lines.append(f"  {e.name:<10} k=({ks})  {layout}  {arch.n_msa} MSA")
    return "\n".join(lines)


def budget_text(plan: SearchPlan) -> str:
    """The budget rule in one line: the budget each candidate trains at, and where the build-up walk raises it
    (the ladder), as `--dry-run` and the report say it."""
    from archdsl.data.cards import card_for

    rungs, images, fidelity = plan.rungs, plan.train_images, plan.fidelity
    first = rungs[0].text(images)
    seeds = f"{fidelity.seeds} paired seed{'s' if fidelity.seeds > 1 else ''}"
    if len(rungs) > 1:
        if all(rung.subset == rungs[0].subset for rung in rungs):
            up = ", ".join(str(rung.epochs) for rung in rungs[1:]) + " epochs on the same images"
        else:
            up = ", ".join(rung.text(images) for rung in rungs[1:])
        how = "each verdict on its own" if fidelity.budgeting == "per-verdict" else "the first verdict's for the rest"
        return (
            f"budget: {first} first, on {seeds}; a verdict still moving goes up to {up} (at most "
            f"{len(rungs) - 1} steps, {how}; docs/search.md, 'The budget the search finds')"
        )
    measured = card_for(plan.settings.dataset).search.measured
    if plan.replay is not None or plan.settings.fidelity_source != "train":
        where = "replayed from its table"
    elif not plan.strategy.walks:
        where = "the samplers train at one budget (--strategy buildup raises it where no budget is measured)"
    elif measured and fidelity.budget_steps == 0:
        where = f"measured for this data ({measured})"
    else:
        where = "one budget (--budget-steps 0)"
    return f"budget: {first}, on {seeds}: {where}"


def first_steps_text(plan: SearchPlan) -> str | None:
    """Where the first budget gives a design fewer than `batch.FEW_FIRST_STEPS` optimizer steps even in the batch
    size given (or chosen from the data, down to `batch.SMALLEST_BATCH`), a line that says how many, and the
    power-of-two batch size that gives enough where a smaller one does; None otherwise. On a folder of 400 images the
    first budget was 4 steps (360 images in batches of 128 for 2 epochs), and every design scored at chance there
    (issue 58); where nobody gives a batch size, `batch_from_data` now chooses one."""
    from archdsl.search.fidelity.batch import FEW_FIRST_STEPS, batch_for_steps, optimizer_steps
    from archdsl.search.fidelity.measures import train_config

    if not plan.train_images or plan.replay is not None or plan.settings.fidelity_source != "train":
        return None
    first = plan.rungs[0]
    images = first.images(plan.train_images)
    batch = train_config(plan.fidelity, device="cpu", seed=0).batch_size
    steps = optimizer_steps(images, batch, first.epochs)
    if steps >= FEW_FIRST_STEPS:
        return None
    text = (
        f"steps: {steps} optimizer steps a design at the first budget ({images:,} images in batches of {batch} a "
        f"step, {first.epochs_text()}): too few for a design to leave chance on some data"
    )
    fitted = batch_for_steps(images, first.epochs, batch)
    if fitted < batch:
        text += f"; --batch-size {fitted} gives {optimizer_steps(images, fitted, first.epochs)} (the learning rate "
        text += "scales with it)"
    return text


def estimate_time(plan: SearchPlan) -> TimeEstimate:
    """How long the search of `plan` takes here (`--dry-run`), in seconds of one core: its `Workload` priced at a
    training step and a scoring pass per image of the base and of the dearest design the strategy reaches (the space's
    design with the most MSAs), each timed now on random images of its input shape (`time_estimate` says how)."""
    from archdsl.search.fidelity import measures as measure
    from archdsl.search.time_estimate import estimate

    fidelity, device = plan.fidelity, plan.settings.device
    cheapest = measure.step_seconds_per_image(plan.space.base, fidelity, device=device)
    dearest = measure.step_seconds_per_image(dearest_design(plan), fidelity, device=device)
    designs = (plan.strategy.fewest_trials(plan), plan.strategy.target_trials(plan))
    return estimate(plan.workload, designs, cheapest, dearest)


def dearest_design(plan: SearchPlan) -> Arch:
    """The design of the space with the most MSAs (its `swin-like` endpoint): the dearest to train of those the
    strategy reaches, as far as MSAs set the price."""
    space = plan.space
    return max((space.arch_from_params(e.params) for e in space.endpoints()), key=lambda arch: arch.n_msa)


def plan_search(plan: SearchPlan) -> SearchPlan:
    """`plan` (from `plan_space`) with everything a study needs, checked: its data loaded (or its replay
    table read and checked against the space), the fidelity checked against the data, and the study opened
    in its storage and checked against the space (a study of another space is refused)."""
    import logging

    import optuna

    from archdsl.outputs import output_dir
    from archdsl.run.distributed import join_if_launched
    from archdsl.search.runner import check_same_space, open_study

    settings, fidelity = plan.settings, plan.fidelity
    replay = replay_table(plan)  # None: trained
    data = None
    if replay is None:
        data = load_checked_data(plan)
    else:  # the table's runs are as long as they are
        if "epochs" in fidelity.model_fields_set and fidelity.epochs != replay.epochs:
            warnings.warn(
                f"--epochs {fidelity.epochs} does not apply to a replayed study: the table's runs are "
                f"{replay.epochs} epochs long, and each trial replays one whole",
                ArchdslWarning,
                stacklevel=2,
            )
        fidelity = fidelity.model_copy(update={"epochs": replay.epochs})
    plan = dataclasses.replace(plan, fidelity=fidelity, data=data, replay=replay)
    ranks = join_if_launched(settings.device, timeout_s=settings.dist_timeout)
    if ranks is not None and not ranks.leader:  # trains what rank 0 sends; the study is rank 0's
        return dataclasses.replace(plan, ranks=ranks)
    # Optuna's own log repeats every failure with a traceback; one line per trial says it all.
    optuna.logging.set_verbosity(logging.ERROR)
    # The storage, the study's objectives and its space are inputs too: checked before anything is
    # said, and a refusal leaves no empty `out` behind (made here, once the data was loaded).
    with output_dir(plan.out, "--out"):
        study = open_study(plan)
        check_same_space(study, plan.space)
    return dataclasses.replace(plan, study=study, ranks=ranks)


def load_checked_data(plan: SearchPlan) -> DataContext:
    """The data of a trained study, loaded (downloaded where --download asks) and checked as every trial would meet
    it: the files are what the description said, the fidelity fits them (a batch larger than the training set, a
    device this machine lacks), and there is a choice to make (two classes or more). What the search and
    `--dry-run` both check, so that a dry run never plans what the search refuses."""
    from archdsl.errors import UserError
    from archdsl.search.fidelity import measures as measure

    settings, fidelity = plan.settings, plan.fidelity
    data = measure.load_data(
        settings.dataset,
        Path(settings.data_root) if settings.data_root else None,
        seed=settings.seed,
        val_subset=fidelity.val_subset,
        val_split=fidelity.val_split,
        download=settings.download,
    )
    input_shape = plan.space.base.input
    image_shape = (input_shape.channels, input_shape.height, input_shape.width)
    measure.check_described(data, image_shape, plan.space.base.classes)
    if data.train_set.num_classes < 2:  # every design scores 100 %: nothing to choose between
        raise UserError(
            f"dataset {settings.dataset} holds one class: every design would score 100 %, so the search has "
            "nothing to choose between; give a dataset of two classes or more"
        )
    # not each trial's error
    measure.check_fidelity(plan.space.base, data, fidelity, device=settings.device, seed=settings.seed)
    return data


def dry_run_check(plan: SearchPlan) -> str | None:
    """What `--dry-run` checks before it plans: the data a trained study would load, loaded and checked as the
    search checks it (`load_checked_data`: its refusal, a `UserError`, is the dry run's); a replayed study's
    table. None when the plan can be timed; else why it cannot: the data is not here (the search's own message,
    or that --download would fetch it), so no model is timed for data the machine has not got."""
    from archdsl.search.fidelity import measures as measure

    if plan.settings.fidelity_source != "train":
        replay_table(plan)
        return None
    settings = plan.settings
    missing = measure.data_not_here(settings.dataset, settings.data_root, download=settings.download)
    if missing is not None:
        return missing
    load_checked_data(dataclasses.replace(plan, settings=settings.model_copy(update={"download": False})))
    return None


def replay_table(plan: SearchPlan) -> Replay | None:
    """The table of `fidelity_source="table:..."` (SearchSettings checked it is one), checked against the search
    (None for `train`)."""
    from archdsl.search.fidelity.replay import check_replay, load_replay

    source = plan.settings.fidelity_source
    if source == "train":
        return None
    replay = load_replay(source)
    check_replay(replay, plan.space, plan.settings.dataset, plan.objectives, plan.fidelity.seeds, plan.max_seeds)
    return replay


@dataclass(frozen=True)
class SearchResult:
    """What a search did: the Optuna study, its best designs (the best trial's, or the Pareto
    front's), this worker's outcome, and why it measured fewer designs than asked, if it did.
    On a follower rank of a torchrun group (`follower`), study and outcome are None: they are rank 0's."""

    study: optuna.Study | None
    best: tuple[Arch, ...]
    outcome: SearchOutcome | None
    remarks: tuple[str, ...] = field(default=())  # why the search ended short, re-queued trials
    simulated_seconds: float | None = None  # a replayed study's trials' simulated time, one worker
    follower: bool = False


def run_planned(
    plan: SearchPlan,
    *,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    on_final_test: Callable[[tuple[TrialRow, ...]], None] | None = None,
) -> SearchResult:
    """Run this worker's share of the planned study (`plan_search`'s); `on_trial(study, trial)` after each
    finished trial. The worker that ends the study then opens its chosen designs' sealed test figures
    (`final_test.run_final_test`; `on_final_test(designs)` before it starts)."""
    from archdsl.search.fidelity.distributed import follow_leader, leading
    from archdsl.search.report.final_test import run_final_test
    from archdsl.search.runner import run_search, study_progress, target_trials

    settings = plan.settings
    if plan.follower:
        assert plan.data is not None, "a follower rank trains: its plan has the data"
        follow_leader(plan.data, plan.fidelity, device=settings.device, seed=settings.seed)
        return SearchResult(study=None, best=(), outcome=None, follower=True)
    total = target_trials(plan)
    started = time.monotonic()
    with leading(plan.ranks):
        outcome = run_search(plan, on_trial=on_trial)
        run_final_test(outcome.study, on_start=on_final_test)  # after every trial: chosen on validation
    remarks = []
    if outcome.exhausted is not None:
        remarks.append(
            f"search space exhausted: all {outcome.exhausted} designs are measured (or being measured); "
            f"--n-trials {settings.n_trials} asks for more"
        )
    else:
        timed_out = settings.timeout is not None and time.monotonic() - started >= settings.timeout
        ended = _why_short(outcome, settings, total, study_progress(outcome.study, total).done, timed_out)
        if ended:
            remarks.append(ended)
    if outcome.stale_failed:
        remarks.append(f"failed and re-queued trials of stopped workers: {outcome.stale_failed}")
    simulated = None
    if plan.replay is not None:
        from archdsl.search.fidelity.replay import simulated_seconds
        from archdsl.search.studies.record import trials

        simulated = simulated_seconds(trials(outcome.study))
    return SearchResult(
        study=outcome.study, best=best_designs(outcome.study), outcome=outcome, remarks=tuple(remarks),
        simulated_seconds=simulated,
    )  # fmt: skip


def search(
    settings: SearchSettings | None = None,
    fidelity: Fidelity | Mapping[str, object] | None = None,
    *,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    **fields: object,
) -> SearchResult:
    """Run a study as `settings` say (or keyword arguments naming `SearchSettings` fields:
    `dataset="synthetic"`) at `fidelity` (a `Fidelity`, or its fields to set:
    `{"epochs": 1}`); the `SearchResult` holds the Optuna study and its best designs.
    The study lives in `settings.storage` (default: a journal under `out`), so calling again resumes it.

        >>> result = archdsl.search(n_trials=4, fidelity={"epochs": 1})
        >>> result.study.best_trial.values, result.best[0].name
    """
    settings = SearchSettings.model_validate({**(settings.model_dump() if settings else {}), **fields})
    return run_planned(plan_search(plan_space(settings, fidelity)), on_trial=on_trial)


def best_designs(study: optuna.Study) -> tuple[Arch, ...]:
    """The designs of a study's best trials (one per design), as the report lists them."""
    from archdsl.lang.spec import parse_spec
    from archdsl.search.report import summarize_study

    return tuple(parse_spec(row.spec) for row in summarize_study(study).best if row.spec)


def _why_short(
    outcome: SearchOutcome, settings: SearchSettings, total: int, measured: int, timed_out: bool
) -> str | None:
    """Why a search that measured fewer designs than n_trials stopped (the space's end is said apart)."""
    if measured >= settings.n_trials:
        return None
    if timed_out:
        return (
            f"search stopped: --timeout {settings.timeout or 0:g} s passed; {measured} of {settings.n_trials} designs"
        )
    if outcome.buildup is not None:
        if measured < total:
            why = "an MSA that did not help ends its stage's additions, so the walk is shorter than the longest"
        else:
            why = "every stage is full"
        return (
            f"search ended: the build-up walk is done after {measured} designs ({why}, {total}); "
            f"--n-trials {settings.n_trials} is an upper bound, or use --strategy tpe to measure more"
        )
    return None
