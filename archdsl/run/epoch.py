"""One epoch of training: its optimiser steps (`train_step` each), the running figures on the progress
bar, and the epoch's `EpochMetrics` once the model is scored (archdsl.run.epoch_metrics).

Everything random in an epoch (shuffle, augmentation, Mixup, drop path) starts from (seed, epoch):
that is what makes a resumed run identical to an uninterrupted one (archdsl.run.train).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from archdsl.run import distributed
from archdsl.run._trainer import Trainer
from archdsl.run.device import autocast
from archdsl.run.epoch_metrics import EpochMetrics, score_epoch, scored_top1
from archdsl.run.loader import derive_seed, make_loader, seed_everything
from archdsl.run.recipe import TrainConfig

__all__ = ["StepRecord", "run_epoch", "train_step"]


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step, for `train(on_step=...)`: its number, epoch, learning rate and loss."""

    step: int  # 0-based over the whole run
    epoch: int  # 0-based
    lr: float  # the rate the step ran with
    loss: float  # the training objective of the batch, before the step


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
        **score_epoch(trainer, epoch),  # the test and validation figures
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
