"""Training an IR on an ImageSet with one of the recipes (archdsl.run.recipe), resumably: the training loop,
read top to bottom as timm's train.py: `train` checks its inputs, prepares the model, its optimiser and data (a
`Trainer`, archdsl.run._trainer), then for each epoch runs its optimiser steps (`run_epoch`, `train_step`),
scores the model (archdsl.run.epoch_metrics), saves the run directory (archdsl.run._run_dir) and reports.

`train(arch, train_set, test_set, config)` returns a `TrainResult`; each epoch is scored on the test set and on
validation images (`--val-split`, or `val_set=`: a search's trials are scored on validation images alone, with no
test set). With a `run_dir` it also keeps a run directory (its files and the resume policy are
archdsl.run._run_dir's).

Exact resumption: every epoch reseeds all generators from (seed, epoch) before drawing anything (shuffle,
augmentation, Mixup, drop path), and checkpoints are written only between epochs. So a run resumed from
`last.safetensors` computes bit for bit what the uninterrupted run would have (on the CPU; GPU kernels need not be
deterministic), without storing RNG states. A resumed run given more epochs than planned is extended: from there
on the learning rate follows the longer run's schedule, and `config.extended_at` records where (timm's train.py
resumes so).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from archdsl.data.base import ImageSet
from archdsl.data.image_size import is_resizable
from archdsl.data.validation import split_validation
from archdsl.errors import UserError
from archdsl.ir import Arch
from archdsl.progress import log_line, progress_bar
from archdsl.run import distributed
from archdsl.run._run_dir import (
    FINAL_CHECKPOINT,
    LAST_CHECKPOINT,
    check_run_files,
    epoch_checkpoint_name,
    refuse_new_run_over,
    write_design,
    write_metrics,
)
from archdsl.run._trainer import Trainer, prepare_trainer
from archdsl.run.checkpoint import TrainState, save_checkpoint
from archdsl.run.device import autocast, select_device
from archdsl.run.epoch_metrics import EpochMetrics, StepRecord, epoch_line, kept_figures, score_epoch, scored_top1
from archdsl.run.loader import derive_seed, make_loader, seed_everything
from archdsl.run.recipe import TrainConfig

__all__ = ["TrainResult", "check_compatible", "check_trainable", "run_epoch", "train", "train_step"]


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

    def best_on_validation(self) -> EpochMetrics | None:
        """The epoch with the best validation top-1 (the first of equals); None without validation images.
        An epoch is chosen on validation images only: one chosen on test images would be scored on what chose it."""
        scored = [m for m in self.history if m.val_acc is not None]
        return max(scored, key=lambda m: m.val_acc or 0.0) if scored else None


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
    scored_last_only: bool = False,
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
    `scored_last_only`: score them after the last epoch alone (a search's later paired seeds, whose curves nothing
    reads; the training is the same, as scoring draws nothing).
    """
    if val_set is not None and config.val_split is not None:
        raise ValueError("give val_set or config.val_split, not both")
    check_trainable(arch, train_set, test_set, config, val_set)
    run_dir = _checked_run_dir(run_dir, resume)
    trainer = prepare_trainer(
        arch, train_set, test_set, config, val_set=val_set, run_dir=run_dir, resume=resume, on_step=on_step
    )
    trainer.scored_last_only = scored_last_only
    if trainer.ranks is not None and not trainer.ranks.leader:  # under torchrun, rank 0 alone draws and writes
        run_dir, progress = None, False
    if run_dir is not None:
        write_design(run_dir, arch, trainer.config, world_size=_world_size(trainer.ranks))
    stopped_by_leader = _run_epochs(trainer, run_dir, on_epoch, progress=progress, save_every=save_every)
    if run_dir is not None and trainer.history:
        meta = _meta(trainer, trainer.history[-1])
        save_checkpoint(run_dir / FINAL_CHECKPOINT, trainer.model, arch, meta, within=run_dir)
    trainer.model.eval()
    result = TrainResult(
        model=trainer.model, arch=arch, config=trainer.config, history=trainer.history, run_dir=run_dir
    )
    if trainer.ranks is not None and not stopped_by_leader:  # (rank 0 left by an exception: nothing to gather)
        result.rank_digests = tuple(distributed.gathered(arch.digest()))
        if len(set(result.rank_digests)) != 1:
            raise RuntimeError(f"the ranks trained different designs: {result.rank_digests}")
    return result


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


def _checked_run_dir(run_dir: str | Path | None, resume: bool) -> Path | None:
    """The run directory, checked before anything is built: a new run never writes over another's
    finished work, and the run's files can be written there."""
    run_dir = Path(run_dir) if run_dir is not None else None
    if resume and run_dir is None:
        raise UserError("resume needs the run directory of the run to continue")
    if run_dir is not None and not resume:
        refuse_new_run_over(run_dir, directory="choose another directory")
    if run_dir is not None:
        check_run_files(run_dir)
    return run_dir


def _run_epochs(
    trainer: Trainer,
    run_dir: Path | None,
    on_epoch: Callable[[EpochMetrics], None] | None,
    *,
    progress: bool,
    save_every: int | None,
) -> bool:
    """The epochs from `trainer.start_epoch` on, each saved and reported; whether rank 0's `on_epoch`
    stopped the run early under torchrun (a pruned trial)."""
    epochs, per_epoch, first = trainer.config.epochs, trainer.steps_per_epoch, trainer.start_epoch
    trainer.bar = progress_bar(
        total=epochs * per_epoch,
        initial=first * per_epoch,
        show=progress,
        unit="step",
        desc=f"epoch {first + 1}/{epochs}",
    )
    try:
        for epoch in range(first, epochs):
            trainer.bar.set_postfix_str("", refresh=False)  # the last epoch's values do not belong to this one
            trainer.bar.set_description(f"epoch {epoch + 1}/{epochs}")
            metrics = run_epoch(trainer, epoch)
            trainer.history.append(metrics)
            log_line(epoch_line(metrics, epochs), show=progress)  # the bar's values, in a log
            if run_dir is not None:
                _save_epoch(trainer, run_dir, metrics, save_every)
            if not _after_epoch(on_epoch, metrics, trainer.ranks):
                return True
    except RuntimeError as err:  # torch's distributed errors are RuntimeErrors
        if trainer.ranks is not None and distributed.is_lost_rank(err):
            raise distributed.RankLost(err, run_dir) from err
        raise
    finally:
        trainer.bar.close()
    return False


def run_epoch(trainer: Trainer, epoch: int) -> EpochMetrics:
    """Train epoch `epoch` (0-based), then score the model: the epoch's `EpochMetrics`. A diverged loss
    raises `TrainingDiverged` before the caller saves anything."""
    started = time.perf_counter()
    loss_sum, correct, seen = _train_steps(trainer, epoch, started)
    train_seconds = time.perf_counter() - started
    total_loss, total_correct, total_seen = _totals(trainer.ranks, loss_sum.item(), int(correct.item()), seen)
    train_loss = total_loss / max(total_seen, 1)
    trainer.guard.check_loss("the training loss", train_loss, epoch, trainer.steps_per_epoch)
    if trainer.ranks is not None:  # BatchNorm's running statistics as rank 0 has them, so that all ranks evaluate alike
        distributed.same_buffers(trainer.model)
    metrics = EpochMetrics(
        epoch=epoch + 1,
        train_loss=train_loss,
        train_acc=total_correct / max(total_seen, 1),
        lr=trainer.schedule.lr_at((epoch + 1) * trainer.steps_per_epoch),  # what the next step runs with
        img_per_s=total_seen / train_seconds if train_seconds > 0 else 0.0,
        # the test and validation figures (scoring reads the model and draws nothing: skipping it where the
        # trainer scores only the last epoch changes no later epoch's training)
        **score_epoch(
            trainer.model,
            trainer.test_set,
            trainer.val_set,
            trainer.guard,
            trainer.config,
            epoch=epoch,
            amp=trainer.amp,
            scored=not (trainer.scored_last_only and epoch + 1 < trainer.config.epochs),
        ),  # fmt: skip
        seconds=time.perf_counter() - started,  # (after the scoring: the whole epoch)
    )
    trainer.bar.set_postfix(
        loss=f"{train_loss:.3f}",
        acc=f"{metrics.train_acc:.3f}",
        **{name: f"{value:.3f}" for name, value in scored_top1(metrics).items()},
    )
    return metrics


def _train_steps(trainer: Trainer, epoch: int, started: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The epoch's optimiser steps: the summed training loss, the correct count and the images seen (on
    this rank). Under torchrun, ranks after the first draw their own augmentation (the shuffle is shared)."""
    config, device, ranks = trainer.config, trainer.device, trainer.ranks
    own = () if ranks is None or ranks.leader else (2, ranks.rank)
    seed_everything(derive_seed(config.seed, epoch, *own))
    loader = _batches(trainer, derive_seed(config.seed, epoch, 1))
    model = trainer.network or trainer.model
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    seen = 0
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, dtype=trainer.dtype, non_blocking=True).contiguous(
            memory_format=trainer.memory_format
        )
        labels = labels.to(device, non_blocking=True)
        loss, logits = _step(trainer, model, images, labels, epoch, step)
        loss_sum += loss.float() * len(labels)
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
        trainer.bar.update(1)
        # Reading the loss back syncs the GPU, so only every few steps.
        if (step + 1) % 20 == 0 or step + 1 == trainer.steps_per_epoch:
            total_loss, total_correct, total_seen = _totals(ranks, loss_sum.item(), int(correct.item()), seen)
            mean_loss = total_loss / total_seen
            trainer.guard.check_loss("the training loss", mean_loss, epoch, step + 1)
            elapsed = time.perf_counter() - started
            trainer.bar.set_postfix(
                loss=f"{mean_loss:.3f}", acc=f"{total_correct / total_seen:.3f}", img_s=f"{total_seen / elapsed:.0f}"
            )
    return loss_sum, correct, seen


def _step(
    trainer: Trainer, model: nn.Module, images: torch.Tensor, labels: torch.Tensor, epoch: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step` of epoch `epoch` at the schedule's learning rate: (loss, logits); the run's first
    step sets the divergence guard's reference loss."""
    number = epoch * trainer.steps_per_epoch + step  # over the whole run
    lr = trainer.schedule.lr_at(number)
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    loss, logits = train_step(
        model, images, labels, trainer.optimizer, trainer.loss_fn, trainer.mixup, trainer.config, amp=trainer.amp
    )
    if trainer.on_step is not None:
        trainer.on_step(StepRecord(step=number, epoch=epoch, lr=lr, loss=loss.item()))
    if trainer.guard.start_loss is None:  # the run's first step: the reference for an exploding loss
        trainer.guard.start(_global_mean(trainer.ranks, loss.item()), epoch)
    return loss, logits


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


def _batches(trainer: Trainer, seed: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
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


def _totals(ranks: distributed.Ranks | None, loss_sum: float, correct: int, seen: int) -> tuple[float, int, int]:
    """The epoch's summed loss, correct count and images so far, over all ranks under torchrun."""
    if ranks is None:
        return loss_sum, correct, seen
    total_loss, total_correct, total_seen = distributed.sum_over_ranks([loss_sum, correct, seen])
    return total_loss, round(total_correct), round(total_seen)


def _global_mean(ranks: distributed.Ranks | None, value: float) -> float:
    return value if ranks is None else distributed.mean_over_ranks([value])[0]


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


def _save_epoch(trainer: Trainer, run_dir: Path, metrics: EpochMetrics, save_every: int | None) -> None:
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


def _meta(trainer: Trainer, metrics: EpochMetrics) -> dict:
    """A checkpoint's metadata: what the run trained on, the epoch and its scored figures (named by their
    split), the normalisation and the config."""
    train_set = trainer.train_set
    return {
        "world_size": _world_size(trainer.ranks),
        "dataset": train_set.name.split("[")[0],
        "epoch": metrics.epoch,
        **kept_figures(metrics),
        "mean": list(train_set.mean),
        "std": list(train_set.std),
        "config": trainer.config.model_dump(mode="json"),
    }


def _world_size(ranks: distributed.Ranks | None) -> int:
    """The number of processes that train the run (BatchNorm's statistics depend on it)."""
    return 1 if ranks is None else ranks.world_size
