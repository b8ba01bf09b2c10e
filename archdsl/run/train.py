"""Training an IR on an ImageSet with one of the recipes (archdsl.run.recipe), resumably.

`train(arch, train_set, test_set, config)` builds the model, runs the epochs and returns
a `TrainResult`; each epoch is scored on the test set and on validation images (`--val-split`, or
`val_set=`: a search's trials are scored on validation images alone, with no test set). With a
`run_dir` it also keeps a run directory (its files and the resume policy are archdsl.run._run_dir's).

Exact resumption: every epoch reseeds all generators from (seed, epoch) before drawing
anything, and checkpoints are written only between epochs. So a run resumed from
`last.safetensors` computes bit for bit what the uninterrupted run would have (on the
CPU; GPU kernels need not be deterministic), without storing RNG states. A resumed run
given more epochs than planned is extended: from there on the learning rate follows the
longer run's schedule, and `config.extended_at` records where (timm's train.py resumes so).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from archdsl.data.base import ImageSet
from archdsl.data.image_size import is_resizable
from archdsl.data.validation import split_validation
from archdsl.errors import ArchdslWarning, UserError
from archdsl.ir import Arch
from archdsl.progress import log_line, progress_bar
from archdsl.run import distributed
from archdsl.run._run_dir import (
    FINAL_CHECKPOINT,
    LAST_CHECKPOINT,
    EpochMetrics,
    ResumeInfo,
    check_run_files,
    data_record,
    epoch_checkpoint_name,
    load_resumed,
    refuse_new_run_over,
    resume_state,
    write_design,
    write_metrics,
)
from archdsl.run.checkpoint import TrainState, save_checkpoint
from archdsl.run.device import autocast, select_device
from archdsl.run.divergence import DivergenceGuard
from archdsl.run.evaluate import Evaluation, predict_logits, score_logits
from archdsl.run.loader import ResidentLoader, derive_seed, make_loader, seed_everything
from archdsl.run.optimize import applied_plan, optimize_model
from archdsl.run.recipe import TrainConfig, make_loss, make_mixup, make_optimizer
from archdsl.run.schedule import LrSchedule, milestones_beyond

__all__ = ["StepRecord", "TrainResult", "train"]


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step, for `train(on_step=...)`: its number, epoch, learning rate and loss."""

    step: int  # 0-based over the whole run
    epoch: int  # 0-based
    lr: float  # the rate the step ran with
    loss: float  # the training objective of the batch, before the step


@dataclass
class TrainResult:
    """What `train` returns: the trained model (eval mode), the design, the config and one `EpochMetrics` per epoch."""

    model: nn.Module  # trained, in eval mode, on the training device
    arch: Arch
    config: TrainConfig
    history: list[EpochMetrics] = field(default_factory=list)
    run_dir: Path | None = None
    rank_digests: tuple[str, ...] = ()  # under torchrun: the digest of the design each rank trained, by rank

    @property
    def test_acc(self) -> float:
        """Final test top-1 (fraction); NaN if no epoch ran, or the run has no test set."""
        last = self.history[-1].test_acc if self.history else None
        return math.nan if last is None else last

    @property
    def val_acc(self) -> float:
        """Final validation top-1 (fraction); NaN if no epoch ran, or the run has no validation images."""
        last = self.history[-1].val_acc if self.history else None
        return math.nan if last is None else last


def check_compatible(arch: Arch, image_set: ImageSet) -> None:
    """A UserError unless `image_set` has the input shape and class count of `arch`."""
    shape = (arch.input.channels, arch.input.height, arch.input.width)
    if image_set.image_shape != shape:
        resizable = is_resizable(image_set.name)
        raise UserError(
            f"design {arch.name!r} takes {shape[0]}x{shape[1]}x{shape[2]} inputs, "
            f"but {image_set.name!r} has {'x'.join(map(str, image_set.image_shape))} images",
            hint="leave out size= to read it at the design's input size, or pass --image-size N to give both N"
            if resizable
            else None,
        )
    if arch.classes != image_set.num_classes:
        raise UserError(
            f"design {arch.name!r} has {arch.classes} classes, but {image_set.name!r} has {image_set.num_classes}",
            hint="set `classes` in the spec to match the dataset",
        )


def check_trainable(
    arch: Arch, train_set: ImageSet, test_set: ImageSet | None, config: TrainConfig, val_set: ImageSet | None = None
) -> None:
    """The `UserError` that `train` would raise before its first step, from the inputs alone: data
    that does not fit the design, a device this machine lacks, a batch larger than the (subset)
    training set, an odd batch for Mixup. Cheap: commands call it before they print anything."""
    for given in (train_set, test_set, val_set):
        if given is not None:
            check_compatible(arch, given)
    if config.val_split is not None:  # a bad --val-split for this dataset, before anything is trained
        train_set, _ = split_validation(train_set, config.val_split)
    distributed.check_rank_device(config.device)
    select_device(config.device)
    batch_size = config.batch_size
    images = train_set.subset_size(config.subset)
    if images < batch_size:
        raise UserError(
            f"the training set has {images} images, fewer than one batch of {batch_size}",
            hint="use a smaller --batch-size or a larger --subset",
        )
    ranks = distributed.current()
    if ranks is not None:
        batch_size = distributed.per_rank_batch(batch_size, ranks)
        if config.resident:
            raise UserError("--resident cannot be used under torchrun", hint="leave out --resident")
        if config.sync_bn:
            distributed.sync_batchnorm(torch.nn.Identity(), select_device(config.device))  # CUDA only
    if config.uses_mixup and batch_size % 2:
        what = "batch size" if ranks is None else f"batch size on each rank (here {ranks.world_size} ranks)"
        raise UserError(f"Mixup/CutMix need an even {what}, got {batch_size}")


def train(
    arch: Arch,
    train_set: ImageSet,
    test_set: ImageSet | None,
    config: TrainConfig,
    *,
    val_set: ImageSet | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    on_epoch: Callable[[EpochMetrics], None] | None = None,
    progress: bool = True,
    save_every: int | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> TrainResult:
    """Train `arch` from scratch (or resume from `run_dir`) and evaluate it after every epoch.

    `on_epoch(metrics)` is called after each epoch (after its checkpoint is written); an
    exception it raises stops training and propagates (Optuna pruning). A NaN/inf or
    exploding loss raises `TrainingDiverged` (archdsl.run.divergence) before the epoch is
    saved, so `last.safetensors` keeps the last good epoch. With `save_every` N, the weights
    after every N-th epoch are also kept in the run directory (`epoch-NNNN.safetensors`).
    `on_step(StepRecord)` is called after every optimizer step (it reads the loss back: a GPU sync).
    A fresh run starts from `config.initial_checkpoint`'s weights when it names a file. `val_set`: the
    validation images scored after every epoch (else `config.val_split`'s); `test_set` None: no test set.
    """
    if val_set is not None and config.val_split is not None:
        raise ValueError("give val_set or config.val_split, not both")
    check_trainable(arch, train_set, test_set, config, val_set)
    run_dir = Path(run_dir) if run_dir is not None else None
    if resume and run_dir is None:
        raise UserError("resume needs the run directory of the run to continue")
    if run_dir is not None and not resume:
        refuse_new_run_over(run_dir, directory="choose another directory")
    if run_dir is not None:
        check_run_files(run_dir)

    trainer = _prepare(
        arch, train_set, test_set, config, val_set=val_set, run_dir=run_dir, resume=resume, on_step=on_step
    )
    config, history, ranks = trainer.config, trainer.history, trainer.ranks
    leader = ranks is None or ranks.leader
    progress = progress and leader  # under torchrun, rank 0 alone draws and writes
    if not leader:
        run_dir = None
    if run_dir is not None:
        write_design(run_dir, arch, config, world_size=_world_size(ranks))

    trainer.bar = progress_bar(
        total=config.epochs * trainer.steps_per_epoch,
        initial=trainer.start_epoch * trainer.steps_per_epoch,
        show=progress,
        unit="step",
        desc=f"epoch {trainer.start_epoch + 1}/{config.epochs}",
    )
    stopped_by_leader = False  # under torchrun: rank 0's on_epoch stopped the run (a pruned trial)
    try:
        for epoch in range(trainer.start_epoch, config.epochs):
            trainer.bar.set_postfix_str("", refresh=False)  # the last epoch's values do not belong to this one
            trainer.bar.set_description(f"epoch {epoch + 1}/{config.epochs}")
            metrics = _run_epoch(trainer, epoch)
            history.append(metrics)
            log_line(epoch_line(metrics, config.epochs), show=progress)  # the bar's values, in a log
            if run_dir is not None:
                _save_epoch(trainer, run_dir, metrics, save_every)
            if not _after_epoch(on_epoch, metrics, ranks):
                stopped_by_leader = True
                break
    except RuntimeError as err:  # torch's distributed errors are RuntimeErrors
        if ranks is not None and distributed.is_lost_rank(err):
            raise distributed.RankLost(err, run_dir) from err
        raise
    finally:
        trainer.bar.close()

    if run_dir is not None and history:
        save_checkpoint(run_dir / FINAL_CHECKPOINT, trainer.model, arch, _meta(trainer, history[-1]), within=run_dir)
    trainer.model.eval()
    result = TrainResult(model=trainer.model, arch=arch, config=config, history=history, run_dir=run_dir)
    if ranks is not None and not stopped_by_leader:  # (rank 0 left by an exception: nothing to gather)
        result.rank_digests = tuple(distributed.gathered(arch.digest()))
        if len(set(result.rank_digests)) != 1:
            raise RuntimeError(f"the ranks trained different designs: {result.rank_digests}")
    return result


def _after_epoch(on_epoch: Callable[[EpochMetrics], None] | None, metrics: EpochMetrics, ranks) -> bool:
    """`on_epoch(metrics)`; whether to go on. Under torchrun, rank 0's callback decides for all ranks: when
    it raises (a pruned trial), the other ranks stop after this epoch too, and return what they trained."""
    stop: BaseException | None = None
    if on_epoch is not None:
        try:
            on_epoch(metrics)
        except BaseException as err:  # noqa: BLE001  # re-raised below, after the ranks agree
            stop = err
    leader_stops = distributed.from_leader(stop is not None) if ranks is not None else stop is not None
    if stop is not None:
        raise stop
    return not leader_stops


@dataclass
class _Trainer:
    """Everything an epoch of training reads or updates: the model, its optimiser and schedule, the
    data and how batches reach the device, the divergence guard and the progress bar."""

    arch: Arch
    model: nn.Module
    train_set: ImageSet  # after --val-split and --subset
    test_set: ImageSet | None
    val_set: ImageSet | None  # with --val-split, or given
    config: TrainConfig  # as resumed or extended
    optimizer: torch.optim.Optimizer
    schedule: LrSchedule
    loss_fn: nn.Module
    mixup: Any
    device: torch.device
    dtype: torch.dtype
    amp: bool
    memory_format: torch.memory_format
    steps_per_epoch: int
    resident: ResidentLoader | None
    guard: DivergenceGuard
    data: dict  # the run's data record (archdsl.run._run_dir.data_record), for the resume check
    history: list[EpochMetrics] = field(default_factory=list)
    start_epoch: int = 0
    on_step: Callable[[StepRecord], None] | None = None
    bar: Any = None
    ranks: distributed.Ranks | None = None  # under torchrun: this process's place among the ranks
    network: nn.Module | None = None  # what the steps run: the model, or its DistributedDataParallel wrapper


def _prepare(
    arch: Arch,
    train_set: ImageSet,
    test_set: ImageSet | None,
    config: TrainConfig,
    *,
    val_set: ImageSet | None,
    run_dir: Path | None,
    resume: bool,
    on_step: Callable[[StepRecord], None] | None,
) -> _Trainer:
    """The model built (or resumed from `run_dir`), on its device, with its optimiser and data."""
    from archdsl.nn.build import build

    device = select_device(config.device)
    # bf16 autocast would round a float64 model's products: off unless asked for.
    amp = device.type == "cuda" and config.model_dtype == "float32" if config.amp is None else config.amp

    data = data_record(train_set, test_set) if run_dir is not None else {}  # the whole sets, before --subset
    if config.val_split is not None:  # held out before --subset: no subset holds a validation image
        train_set, val_set = split_validation(train_set, config.val_split)
    if config.subset < 1:
        train_set = train_set.subset(config.subset, seed=config.seed)
    batch_size = config.batch_size  # the global batch, under torchrun shared by the ranks
    steps_per_epoch = len(train_set) // batch_size
    ranks = distributed.current()

    dtype = getattr(torch, config.model_dtype)
    # In the run's dtype before any weights are loaded (float64 ones must not pass through float32).
    model = build(arch, drop_path=config.drop_path, seed=config.seed).to(dtype)
    if config.initial_checkpoint is not None and not resume:
        from archdsl.run.initial import initial_weights

        model.load_state_dict(initial_weights(config.initial_checkpoint, arch))
    history: list[EpochMetrics] = []
    start_epoch = 0
    resumed: ResumeInfo | None = None
    state_dicts: dict[str, Any] = {}
    guard = DivergenceGuard(arch.classes)
    if resume and run_dir is not None:  # (resume without a run_dir was refused by the caller)
        weights, resumed, state_dicts, config = resume_state(run_dir, arch, config, data)
        model.load_state_dict(weights)
        history = list(resumed.history)
        start_epoch = resumed.epoch
        guard.start_loss = resumed.start_loss
    model.to(device=device, dtype=dtype)
    if config.optimize:
        remaining = (config.epochs - start_epoch) * steps_per_epoch * batch_size
        plan = applied_plan(optimize_model(model, training=True, images=remaining, channels_last=config.channels_last))
        channels_last = plan is not None and plan.channels_last
    else:
        channels_last = bool(config.channels_last)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model.to(memory_format=memory_format)  # type: ignore[call-overload]  # torch's stubs miss this form

    trained: nn.Module = model
    if ranks is not None and config.sync_bn:
        trained = distributed.sync_batchnorm(model, device)  # the same parameters, in SyncBatchNorm layers
    optimizer = make_optimizer(trained, config)
    if resumed is not None and run_dir is not None:
        load_resumed(run_dir / LAST_CHECKPOINT, optimizer, state_dicts["optimizer"])
    resident = None
    if config.resident:
        resident = ResidentLoader(
            train_set,
            batch_size,
            device=device,
            padding=config.crop_padding,
            hflip=config.hflip,
            dtype=dtype,
        )
    _warn_unreached_milestones(config)
    return _Trainer(
        arch=arch,
        model=trained,
        train_set=train_set,
        test_set=test_set,
        val_set=val_set,
        config=config,
        optimizer=optimizer,
        # A function of the step alone: a resumed or extended run needs no scheduler state (the timm
        # scheduler state that older checkpoints hold is not read).
        schedule=LrSchedule.of(config, steps_per_epoch),
        loss_fn=make_loss(config),
        mixup=make_mixup(config, arch.classes),
        device=device,
        dtype=dtype,
        amp=amp,
        memory_format=memory_format,
        steps_per_epoch=steps_per_epoch,
        resident=resident,
        guard=guard,
        data=data,
        history=history,
        start_epoch=start_epoch,
        on_step=on_step,
        ranks=ranks,
        network=distributed.data_parallel(trained, device) if ranks is not None else trained,
    )


def _warn_unreached_milestones(config: TrainConfig) -> None:
    """A user's multistep milestone beyond the run never lowers the rate: the run would end at the
    peak, unannealed (the recipe's own milestones are scaled to the run instead, see schedule.py)."""
    beyond = milestones_beyond(config)
    if beyond:
        main = config.epochs - config.effective_warmup()
        warnings.warn(
            f"--decay-milestones {','.join(map(str, beyond))} lie beyond this run's {main} main epochs "
            "(epochs after the warm-up): the learning rate never drops there",
            ArchdslWarning,
            stacklevel=2,
        )


def _save_epoch(trainer: _Trainer, run_dir: Path, metrics: EpochMetrics, save_every: int | None) -> None:
    """The run directory after a finished epoch: `last` with the training state, the kept weights, the metrics."""
    state = TrainState.pack(
        {"optimizer": trainer.optimizer.state_dict()},
        epoch=metrics.epoch,
        history=[asdict(m) for m in trainer.history],
        config=trainer.config.model_dump(mode="json"),
        start_loss=trainer.guard.start_loss,
        data=trainer.data,
    )
    meta = _meta(trainer, metrics)
    save_checkpoint(run_dir / LAST_CHECKPOINT, trainer.model, trainer.arch, meta, train_state=state, within=run_dir)
    if save_every and metrics.epoch % save_every == 0:
        save_checkpoint(
            run_dir / epoch_checkpoint_name(metrics.epoch), trainer.model, trainer.arch, meta, within=run_dir
        )
    write_metrics(run_dir, trainer.history)


def epoch_line(metrics: EpochMetrics, epochs: int) -> str:
    """One finished epoch as a plain line, with the names the bar shows them by."""
    return (
        f"epoch {metrics.epoch}/{epochs}  loss={metrics.train_loss:.3f} acc={metrics.train_acc:.3f} "
        + "".join(f"{name}={value:.3f} " for name, value in _scored(metrics).items())
        + f" ({metrics.seconds:.1f} s, {metrics.img_per_s:.0f} img/s)"
    )


def _scored(metrics: EpochMetrics) -> dict[str, float]:
    """The epoch's top-1 on the images it was scored on: `val_acc` (validation), `test_acc` (test)."""
    found = {"val_acc": metrics.val_acc, "test_acc": metrics.test_acc}
    return {name: value for name, value in found.items() if value is not None}


def _world_size(ranks: distributed.Ranks | None) -> int:
    """The number of processes that train the run (BatchNorm's statistics depend on it)."""
    return 1 if ranks is None else ranks.world_size


def _meta(trainer: _Trainer, metrics: EpochMetrics) -> dict:
    train_set = trainer.train_set
    return {
        "world_size": _world_size(trainer.ranks),
        "dataset": train_set.name.split("[")[0],
        "epoch": metrics.epoch,
        **{name: getattr(metrics, name) for name in ("test_acc", "test_loss") if getattr(metrics, name) is not None},
        "mean": list(train_set.mean),
        "std": list(train_set.std),
        "config": trainer.config.model_dump(mode="json"),
    }


def train_step(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    mixup,
    config: TrainConfig,
    *,
    amp: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step on a batch already on the model's device: (loss, logits), detached.

    Mixup/CutMix (if the recipe has them) act here on the whole batch; the gradient is
    clipped to `config.clip_grad`. The learning-rate schedule is the caller's.
    """
    targets = labels
    if mixup is not None:
        images, targets = mixup(images, labels)
    with autocast(images.device, amp):
        logits = model(images)
        loss = loss_fn(logits, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.clip_grad:
        nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad)
    optimizer.step()
    return loss.detach(), logits.detach()


def _batches(trainer: _Trainer, seed: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """The epoch's training batches, shuffled and augmented from `seed`."""
    config, ranks = trainer.config, trainer.ranks
    if trainer.resident is not None:
        return trainer.resident.reseed(seed)
    batch_size = config.batch_size
    sampler = None
    if ranks is not None:  # this rank's share of each global batch
        sampler = distributed.ShardSampler(len(trainer.train_set), ranks, batch_size, seed)
        batch_size = distributed.per_rank_batch(batch_size, ranks)
    return make_loader(
        trainer.train_set,
        batch_size,
        augment=True,
        recipe=config,
        seed=seed,
        workers=config.workers,
        pin_memory=trainer.device.type == "cuda",
        sampler=sampler,
        dtype=trainer.dtype,
    )


def _run_epoch(trainer: _Trainer, epoch: int) -> EpochMetrics:
    config, device, bar, guard, ranks = trainer.config, trainer.device, trainer.bar, trainer.guard, trainer.ranks
    started = time.perf_counter()
    # Everything random in this epoch (shuffle, augmentation, Mixup, drop path) starts from
    # (seed, epoch): that is what makes a resumed run identical to an uninterrupted one. Under
    # torchrun, ranks after the first draw their own augmentation (the shuffle is shared).
    own = () if ranks is None or ranks.leader else (2, ranks.rank)
    seed_everything(derive_seed(config.seed, epoch, *own))
    loader = _batches(trainer, derive_seed(config.seed, epoch, 1))
    model = trainer.network or trainer.model
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    seen = 0
    steps_per_epoch = trainer.steps_per_epoch
    step_base = epoch * steps_per_epoch
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, dtype=trainer.dtype, non_blocking=True).contiguous(
            memory_format=trainer.memory_format
        )
        labels = labels.to(device, non_blocking=True)
        lr = trainer.schedule.lr_at(step_base + step)
        for group in trainer.optimizer.param_groups:
            group["lr"] = lr
        loss, logits = train_step(
            model, images, labels, trainer.optimizer, trainer.loss_fn, trainer.mixup, config, amp=trainer.amp
        )
        if trainer.on_step is not None:
            trainer.on_step(StepRecord(step=step_base + step, epoch=epoch, lr=lr, loss=loss.item()))
        if guard.start_loss is None:  # the run's first step: the reference for an exploding loss
            guard.start(_global_mean(ranks, loss.item()), epoch)

        loss_sum += loss.float() * len(labels)
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
        bar.update(1)
        # Reading the loss back syncs the GPU, so only every few steps.
        if (step + 1) % 20 == 0 or step + 1 == steps_per_epoch:
            total_loss, total_correct, total_seen = _totals(ranks, loss_sum.item(), int(correct.item()), seen)
            mean_loss = total_loss / total_seen
            guard.check_loss("the training loss", mean_loss, epoch, step + 1)
            elapsed = time.perf_counter() - started
            bar.set_postfix(
                loss=f"{mean_loss:.3f}", acc=f"{total_correct / total_seen:.3f}", img_s=f"{total_seen / elapsed:.0f}"
            )
    train_seconds = time.perf_counter() - started
    total_loss, total_correct, total_seen = _totals(ranks, loss_sum.item(), int(correct.item()), seen)
    train_loss = total_loss / max(total_seen, 1)
    guard.check_loss("the training loss", train_loss, epoch, steps_per_epoch)
    if ranks is not None:  # BatchNorm's running statistics as rank 0 has them, so that all ranks evaluate alike
        distributed.same_buffers(trainer.model)

    # Checked before the epoch is saved: a diverged epoch never replaces the last good checkpoint.
    test, test_loss_spike = _scored_on(trainer, trainer.test_set, "test", epoch)
    val, val_loss_spike = _scored_on(trainer, trainer.val_set, "validation", epoch)
    train_acc = total_correct / max(total_seen, 1)
    metrics = EpochMetrics(
        epoch=epoch + 1,
        train_loss=train_loss,
        train_acc=train_acc,
        test_loss=test.nll if test is not None else None,
        test_acc=test.top1 if test is not None else None,
        test_loss_spike=test_loss_spike,
        val_loss=val.nll if val is not None else None,
        val_acc=val.top1 if val is not None else None,
        val_loss_spike=val_loss_spike,
        lr=trainer.schedule.lr_at(step_base + steps_per_epoch),  # what the next step runs with
        img_per_s=total_seen / train_seconds if train_seconds > 0 else 0.0,
        seconds=time.perf_counter() - started,
    )
    bar.set_postfix(
        loss=f"{train_loss:.3f}", acc=f"{train_acc:.3f}", **{k: f"{v:.3f}" for k, v in _scored(metrics).items()}
    )
    return metrics


def _scored_on(
    trainer: _Trainer, images: ImageSet | None, what: str, epoch: int
) -> tuple[Evaluation | None, bool | None]:
    """The model's loss and top-1 on `images` (the `what` set: test, validation), checked by the divergence
    guard, and whether its loss spiked; (None, None) without the set."""
    if images is None:
        return None, None
    scored = _evaluate(trainer, images)
    spiked = trainer.guard.check_evaluated_loss(f"the {what} loss", scored.nll, epoch)
    trainer.guard.check_metric(f"the {what} accuracy", scored.top1, epoch)
    return scored, spiked


def _evaluate(trainer: _Trainer, images: ImageSet) -> Evaluation:
    """Loss and top-1 of the model on `images` (the test or the validation set)."""
    config = trainer.config
    logits = predict_logits(
        trainer.model,
        images,
        batch_size=config.eval_batch_size,
        amp=trainer.amp,
        workers=config.workers,
        optimize=config.optimize,
    )
    return score_logits(logits, images.labels)


def _totals(ranks: distributed.Ranks | None, loss_sum: float, correct: int, seen: int) -> tuple[float, int, int]:
    """The epoch's summed loss, correct count and images so far, over all ranks under torchrun."""
    if ranks is None:
        return loss_sum, correct, seen
    total_loss, total_correct, total_seen = distributed.sum_over_ranks([loss_sum, correct, seen])
    return total_loss, round(total_correct), round(total_seen)


def _global_mean(ranks: distributed.Ranks | None, value: float) -> float:
    return value if ranks is None else distributed.mean_over_ranks([value])[0]
