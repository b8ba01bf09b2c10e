"""What an epoch of training reads and updates (`Trainer`), and its preparation: the data a run trains
and is scored on, the model built or resumed and placed on its device, its optimiser, schedule, loss
and Mixup. The training loop (archdsl.run.train) builds one and runs the epochs on it; this module knows
nothing of the loop."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from archdsl.data.base import ImageSet
from archdsl.data.validation import split_validation
from archdsl.errors import ArchdslWarning
from archdsl.ir import Arch
from archdsl.run import distributed
from archdsl.run._run_dir import LAST_CHECKPOINT, data_record, load_resumed, resume_state
from archdsl.run.device import select_device
from archdsl.run.divergence import DivergenceGuard
from archdsl.run.loader import ResidentLoader
from archdsl.run.optimize import applied_plan, optimize_model
from archdsl.run.recipe import TrainConfig, make_loss, make_mixup, make_optimizer
from archdsl.run.schedule import LrSchedule, milestones_beyond

if TYPE_CHECKING:
    from archdsl.run.epoch_metrics import EpochMetrics, StepRecord


@dataclass
class Trainer:
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
    scored_last_only: bool = False  # the test and validation images scored after the last epoch alone


def prepare_trainer(
    arch: Arch,
    train_set: ImageSet,
    test_set: ImageSet | None,
    config: TrainConfig,
    *,
    val_set: ImageSet | None,
    run_dir: Path | None,
    resume: bool,
    on_step: Callable[[StepRecord], None] | None,
) -> Trainer:
    """The model built (or resumed from `run_dir`), on its device, with its optimiser and data."""
    device = select_device(config.device)
    # bf16 autocast would round a float64 model's products: off unless asked for.
    amp = device.type == "cuda" and config.model_dtype == "float32" if config.amp is None else config.amp
    data = data_record(train_set, test_set) if run_dir is not None else {}  # the whole sets, before --subset
    train_set, val_set = _training_images(train_set, val_set, config)
    steps_per_epoch = len(train_set) // config.batch_size  # the global batch, under torchrun shared by the ranks
    ranks = distributed.current()
    dtype = getattr(torch, config.model_dtype)
    model = _new_model(arch, config, dtype, fresh=not resume)
    guard = DivergenceGuard(arch.classes)
    history: list[EpochMetrics] = []
    state_dicts: dict[str, Any] = {}
    if resume and run_dir is not None:  # (resume without a run_dir was refused by the caller)
        weights, resumed, state_dicts, config = resume_state(run_dir, arch, config, data)
        model.load_state_dict(weights)
        history, guard.start_loss = list(resumed.history), resumed.start_loss  # epochs 1 to resumed.epoch
    model.to(device=device, dtype=dtype)
    remaining = (config.epochs - len(history)) * steps_per_epoch * config.batch_size
    memory_format = _laid_out(model, config, images=remaining)
    trained = distributed.sync_batchnorm(model, device) if ranks is not None and config.sync_bn else model
    optimizer = make_optimizer(trained, config)  # (SyncBatchNorm layers hold the same parameters)
    if resume and run_dir is not None:
        load_resumed(run_dir / LAST_CHECKPOINT, optimizer, state_dicts["optimizer"])
    resident = None
    if config.resident:
        resident = ResidentLoader(
            train_set, config.batch_size, device=device, padding=config.crop_padding, hflip=config.hflip, dtype=dtype
        )
    _warn_unreached_milestones(config)
    return Trainer(
        arch=arch, model=trained, train_set=train_set, test_set=test_set, val_set=val_set, config=config,
        optimizer=optimizer,
        # A function of the step alone: a resumed or extended run needs no scheduler state (the timm
        # scheduler state that older checkpoints hold is not read).
        schedule=LrSchedule.of(config, steps_per_epoch),
        loss_fn=make_loss(config), mixup=make_mixup(config, arch.classes), device=device, dtype=dtype, amp=amp,
        memory_format=memory_format, steps_per_epoch=steps_per_epoch, resident=resident, guard=guard, data=data,
        history=history, start_epoch=len(history), on_step=on_step, ranks=ranks,
        network=distributed.data_parallel(trained, device) if ranks is not None else trained,
    )  # fmt: skip


def _training_images(
    train_set: ImageSet, val_set: ImageSet | None, config: TrainConfig
) -> tuple[ImageSet, ImageSet | None]:
    """The images the run trains on (less `--val-split`'s, then its `--subset`) and those that validate it."""
    if config.val_split is not None:  # held out before --subset: no subset holds a validation image
        train_set, val_set = split_validation(train_set, config.val_split)
    if config.subset < 1:
        train_set = train_set.subset(config.subset, seed=config.seed)
    return train_set, val_set


def _new_model(arch: Arch, config: TrainConfig, dtype: torch.dtype, *, fresh: bool) -> nn.Module:
    """The model built from `config.seed`, in the run's dtype before any weights are loaded (float64 ones
    must not pass through float32), with `config.initial_checkpoint`'s weights in a fresh run."""
    from archdsl.nn.build import build

    model = build(arch, drop_path=config.drop_path, seed=config.seed).to(dtype)
    if config.initial_checkpoint is not None and fresh:
        from archdsl.run.initial import initial_weights

        model.load_state_dict(initial_weights(config.initial_checkpoint, arch))
    return model


def _laid_out(model: nn.Module, config: TrainConfig, *, images: int) -> torch.memory_format:
    """`model`'s weights in the memory format the run trains in (as `optimize_model` decides for the
    `images` left to train, or as `config.channels_last` says), and that format."""
    if config.optimize:
        plan = applied_plan(optimize_model(model, training=True, images=images, channels_last=config.channels_last))
        channels_last = plan is not None and plan.channels_last
    else:
        channels_last = bool(config.channels_last)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model.to(memory_format=memory_format)  # type: ignore[call-overload]  # torch's stubs miss this form
    return memory_format


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
