"""Training an IR on an ImageSet with one of the recipes (archdsl.run.recipe), resumably.

`train(arch, train_set, test_set, config)` builds the model, runs the epochs and returns
a `TrainResult`. With a `run_dir` it also keeps a run directory:

    spec.arch            the design (canonical text)
    config.json          the full TrainConfig
    metrics.jsonl/.csv   one row per finished epoch
    last.safetensors     weights + optimizer state after the latest epoch (for --resume)
    final.safetensors    weights only, written when the run completes
    tensorboard/         event files, with `--log tensorboard` (archdsl.run.tensorboard)

Exact resumption: every epoch reseeds all generators from (seed, epoch) before drawing
anything, and checkpoints are written only between epochs. So a run resumed from
`last.safetensors` computes bit for bit what the uninterrupted run would have (on the
CPU; GPU kernels need not be deterministic), without storing RNG states. A resumed run
given more epochs than planned is extended: from there on the learning rate follows the
longer run's schedule, and `config.extended_at` records where (timm's train.py resumes so).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator
from torch import nn

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.files import atomic_writer, write_text
from archdsl.ir import Arch
from archdsl.lang.printer import format_arch
from archdsl.progress import log_line, progress_bar
from archdsl.run.checkpoint import TrainState, load_checkpoint, save_checkpoint
from archdsl.run.device import autocast, select_device
from archdsl.run.divergence import DivergenceGuard, TrainingDiverged
from archdsl.run.evaluate import predict_logits, score_logits
from archdsl.run.loader import ResidentLoader, derive_seed, make_loader, seed_everything
from archdsl.run.optimize import applied_plan, optimize_model
from archdsl.run.recipe import TrainConfig, filled, make_loss, make_mixup, make_optimizer
from archdsl.run.schedule import LrSchedule

__all__ = ["EpochMetrics", "StepRecord", "TrainConfig", "TrainResult", "TrainingDiverged", "train"]

# What a run directory holds.
SPEC_FILE = "spec.arch"
CONFIG_FILE = "config.json"
METRICS_JSONL = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
LAST_CHECKPOINT = "last.safetensors"
FINAL_CHECKPOINT = "final.safetensors"
RUN_FILES = (SPEC_FILE, CONFIG_FILE, METRICS_JSONL, METRICS_CSV, LAST_CHECKPOINT, FINAL_CHECKPOINT)
TENSORBOARD_DIR = "tensorboard"  # event files of `--log tensorboard` (archdsl.run.tensorboard)
# Weights after epoch N, kept with `save_every` (for measures over training, e.g. the Hessian spectrum).
EPOCH_CHECKPOINT = re.compile(r"epoch-(\d+)\.safetensors")


def epoch_checkpoint_name(epoch: int) -> str:
    """The file name of the weights kept after `epoch` (`epoch-0005.safetensors`)."""
    return f"epoch-{epoch:04d}.safetensors"


def is_run_file(name: str) -> bool:
    """Whether a file of this name belongs to a run directory (what `archdsl train` writes there)."""
    return name in RUN_FILES or name == TENSORBOARD_DIR or EPOCH_CHECKPOINT.fullmatch(name) is not None


def saved_epochs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(epoch, path) of the checkpoints a run kept along the way, by epoch; the final weights count
    as the last epoch's when no intermediate checkpoint of that epoch exists."""
    run_dir = Path(run_dir)
    found = {}
    for path in run_dir.glob("epoch-*.safetensors"):
        match = EPOCH_CHECKPOINT.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = path
    final = run_dir / FINAL_CHECKPOINT
    if final.is_file():
        from archdsl.run.checkpoint import read_checkpoint_file

        _, metadata = read_checkpoint_file(final)
        epoch = json.loads(metadata.get("archdsl.meta", "{}")).get("epoch")
        if isinstance(epoch, int) and epoch not in found:
            found[epoch] = final
    return sorted(found.items())


@dataclass(frozen=True)
class EpochMetrics:
    """One finished epoch: losses and top-1 (fractions) on train and test, the learning rate, speed and time."""

    epoch: int  # 1-based: the number of epochs finished
    train_loss: float  # the training objective (with Mixup/label smoothing if the recipe has them)
    train_acc: float  # top-1 against the un-mixed labels
    test_loss: float  # plain cross-entropy (NLL)
    test_acc: float
    lr: float  # at the end of the epoch
    img_per_s: float  # training images per second (evaluation excluded)
    seconds: float  # wall time of the whole epoch


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

    @property
    def test_acc(self) -> float:
        """Final test top-1 (fraction); NaN if no epoch ran."""
        return self.history[-1].test_acc if self.history else math.nan


def check_compatible(arch: Arch, image_set: ImageSet) -> None:
    """A UserError unless `image_set` has the input shape and class count of `arch`."""
    shape = (arch.input.channels, arch.input.height, arch.input.width)
    if image_set.image_shape != shape:
        raise UserError(
            f"design {arch.name!r} takes {shape[0]}x{shape[1]}x{shape[2]} inputs, "
            f"but {image_set.name!r} has {'x'.join(map(str, image_set.image_shape))} images"
        )
    if arch.classes != image_set.num_classes:
        raise UserError(
            f"design {arch.name!r} has {arch.classes} classes, but {image_set.name!r} has {image_set.num_classes}",
            hint="set `classes` in the spec to match the dataset",
        )


def check_run_files(run_dir: Path) -> None:
    """A UserError unless the run's files can be written into `run_dir`: checked before anything is
    trained, so that no epoch is trained that cannot be recorded (a folder where metrics.csv goes
    once stopped a resumed run after its checkpoint, with `last` and `final` at different epochs)."""
    for name in RUN_FILES:
        path = run_dir / name
        if path.exists() and not path.is_file():
            what = "a folder" if path.is_dir() else "not a regular file"
            raise UserError(
                f"cannot write the run's {name}: {path} is {what}",
                hint=f"move it out of {run_dir}: archdsl writes its own {name} there",
            )
    if run_dir.is_dir() and not os.access(run_dir, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into the run directory {run_dir}: permission denied")


def _write_run_files(run_dir: Path, history: list[EpochMetrics]) -> None:
    names = [f.name for f in fields(EpochMetrics)]
    write_text(run_dir / METRICS_JSONL, "".join(json.dumps(asdict(row)) + "\n" for row in history))
    with atomic_writer(run_dir / METRICS_CSV) as out:
        writer = csv.DictWriter(out, fieldnames=names)
        writer.writeheader()
        writer.writerows(asdict(row) for row in history)


def _data_record(train_set: ImageSet, test_set: ImageSet) -> dict[str, dict[str, str]]:
    """What a run was trained and tested on, for the resume check: names and fingerprints."""
    return {
        "train": {"name": train_set.name, "fingerprint": train_set.fingerprint()},
        "test": {"name": test_set.name, "fingerprint": test_set.fingerprint()},
    }


def _check_same_data(run_dir: Path, saved: dict | None, given: dict) -> None:
    if saved is None:  # written before runs recorded their data
        return
    for split, what in (("train", "the training set"), ("test", "the test set")):
        before, now = saved[split], given[split]
        if before == now:
            continue
        why = "other images" if before["name"] == now["name"] else f"was {before['name']!r}"
        raise UserError(
            f"cannot resume {run_dir} with different data: {what} {now['name']!r} ({why})",
            hint="resume with the --dataset (and options) the run was started with (see its config.json)",
        )


class ResumeInfo(BaseModel):
    """The JSON part of a checkpoint's training state, as `--resume` goes on from it: a file can be
    edited, so all of it is checked (types, bounds, agreement) before any of it is used."""

    model_config = ConfigDict(strict=True, extra="ignore")  # the state dicts are checked as they load

    epoch: StrictInt = Field(ge=1)  # epochs finished
    config: TrainConfig
    history: list[EpochMetrics]
    start_loss: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    data: dict[Literal["train", "test"], dict[Literal["name", "fingerprint"], str]] | None = None

    @model_validator(mode="after")
    def _agrees(self) -> ResumeInfo:
        if self.epoch > self.config.epochs:
            raise ValueError(f"epoch {self.epoch} is past the {self.config.epochs} epoch(s) the run was planned for")
        if [row.epoch for row in self.history] != list(range(1, self.epoch + 1)):
            raise ValueError(f"the history does not list epochs 1 to {self.epoch}")
        if self.data is not None and any(len(self.data.get(split, {})) != 2 for split in ("train", "test")):
            raise ValueError("the data record lacks the training or the test set")
        return self


def resume_info(info: dict, path: Path) -> ResumeInfo:
    """`info` (a checkpoint's training state) checked whole; a `UserError` naming `path` otherwise."""
    try:
        return ResumeInfo.model_validate_json(json.dumps(info))  # JSON mode: strict, yet lists are tuples
    except ValidationError as err:
        first = err.errors()[0]
        place = ".".join(map(str, first["loc"]))
        raise UserError(
            f"{path}: the training state is damaged: {place + ': ' if place else ''}{first['msg']}",
            hint="resume from an intact copy of the run, or start it again without --resume",
        ) from None


def _resume_state(run_dir: Path, arch: Arch, config: TrainConfig, data: dict):
    """The weights, training state (checked) and state dicts to resume from, and the config to go on
    with: the given one, or, when it asks for more epochs than planned, the extension of the saved one."""
    path = run_dir / LAST_CHECKPOINT
    if not path.is_file():
        raise UserError(f"nothing to resume: {path} does not exist", hint="start the run without --resume")
    checkpoint = load_checkpoint(path, with_train_state=True)
    state = checkpoint.train_state
    if state is None:
        raise UserError(f"{path} holds no training state (was it written by `archdsl train`?)")
    # The init scheme only draws step 0's weights, which the checkpoint replaces: a run from before its
    # spec named a scheme (read as `torch`; vit-ti and swin-ti now say `timm`) is the same run.
    if checkpoint.arch.model_copy(update={"init": arch.init}).digest() != arch.digest():
        raise UserError(f"{path} was trained from a different design than the one given")
    info, state_dicts = checked_resume(state, path)
    _check_same_data(run_dir, info.data, data)
    config = resumed_config(run_dir, info.config, config, finished=info.epoch)
    return checkpoint.model.state_dict(), info, state_dicts, config


def checked_resume(state: TrainState, path: Path) -> tuple[ResumeInfo, dict[str, Any]]:
    """A checkpoint's training state checked whole: its JSON (`resume_info`) and the optimizer's (and,
    when stored, the scheduler's) state dict, complete; a `UserError` naming `path` otherwise."""
    return resume_info(state.info, path), _state_dicts(state, path)


def _state_dicts(state: TrainState, path: Path) -> dict[str, Any]:
    try:
        found = {name: state.unpack(name) for name in ("optimizer", "scheduler") if state.has(name)}
        entries = list(found["optimizer"]["state"].values())
        if any(set(entry) != set(entries[0]) for entry in entries):  # a tensor taken out of one parameter's state
            raise KeyError("a parameter's state")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise UserError(
            f"{path}: the training state is damaged: the optimizer's state is incomplete ({err})",
            hint="resume from an intact copy of the run, or start it again without --resume",
        ) from None
    return found


def _loaded(path: Path, target: Any, state: dict[str, Any]) -> None:
    """`target.load_state_dict(state)` (an optimizer, a scheduler); `UserError` naming `path` when it does not fit."""
    try:
        target.load_state_dict(state)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise UserError(f"{path}: the training state does not fit the run: {err}") from None


def resumed_config(run_dir: Path, saved: TrainConfig, given: TrainConfig, *, finished: int) -> TrainConfig:
    """The config a run saved with `saved` (after `finished` epochs) goes on with when resumed with
    `given`: the same, or extended when `given` asks for more epochs (recorded in `extended_at`).
    A `UserError` for anything else that would change the result, or fewer epochs."""
    # The length may grow; nothing else that changes the result may.
    planned = {"epochs", "extended_at"}
    changed = sorted(
        k for k, v in given.result_fields().items() if k not in planned and saved.result_fields().get(k) != v
    )
    if changed:
        raise UserError(
            f"cannot resume {run_dir} with different settings: {', '.join(changed)}",
            hint="resume with the settings of the original run (see its config.json)",
        )
    if given.epochs < saved.epochs:
        raise UserError(
            f"cannot shorten {run_dir} to {given.epochs} epoch(s): it was planned for {saved.epochs} "
            f"and has finished {finished}",
            hint=f"resume with --epochs {saved.epochs} or more",
        )
    extended_at = saved.extended_at + ((finished,) if given.epochs > saved.epochs else ())
    return given.model_copy(update={"extended_at": extended_at})


def check_trainable(arch: Arch, train_set: ImageSet, test_set: ImageSet, config: TrainConfig) -> None:
    """The `UserError` that `train` would raise before its first step, from the inputs alone: data
    that does not fit the design, a device this machine lacks, a batch larger than the (subset)
    training set, an odd batch for Mixup. Cheap: commands call it before they print anything."""
    check_compatible(arch, train_set)
    check_compatible(arch, test_set)
    select_device(config.device)
    batch_size = filled(config.batch_size)
    images = train_set.subset_size(config.subset)
    if images < batch_size:
        raise UserError(
            f"the training set has {images} images, fewer than one batch of {batch_size}",
            hint="use a smaller --batch-size or a larger --subset",
        )
    if config.uses_mixup and batch_size % 2:
        raise UserError(f"Mixup/CutMix need an even batch size, got {batch_size}")


def train(
    arch: Arch,
    train_set: ImageSet,
    test_set: ImageSet,
    config: TrainConfig,
    *,
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
    A fresh run starts from `config.initial_checkpoint`'s weights when it names a file.
    """
    from archdsl.nn.build import build

    check_trainable(arch, train_set, test_set, config)
    run_dir = Path(run_dir) if run_dir is not None else None
    if resume and run_dir is None:
        raise UserError("resume needs the run directory of the run to continue")
    if run_dir is not None and not resume and (run_dir / LAST_CHECKPOINT).exists():
        raise UserError(f"{run_dir} already holds a run", hint="resume it, or choose another directory")
    if run_dir is not None:
        check_run_files(run_dir)

    device = select_device(config.device)
    # bf16 autocast would round a float64 model's products: off unless asked for.
    amp = device.type == "cuda" and config.model_dtype == "float32" if config.amp is None else config.amp

    data = _data_record(train_set, test_set) if run_dir is not None else {}  # the whole sets, before --subset
    if config.subset < 1:
        train_set = train_set.subset(config.subset, seed=config.seed)
    batch_size = filled(config.batch_size)
    steps_per_epoch = len(train_set) // batch_size

    dtype = getattr(torch, config.model_dtype)
    # In the run's dtype before any weights are loaded (float64 ones must not pass through float32).
    model = build(arch, drop_path=filled(config.drop_path), seed=config.seed).to(dtype)
    if config.initial_checkpoint is not None and not resume:
        from archdsl.run.initial import initial_weights

        model.load_state_dict(initial_weights(config.initial_checkpoint, arch))
    history: list[EpochMetrics] = []
    start_epoch = 0
    resumed: ResumeInfo | None = None
    state_dicts: dict[str, Any] = {}
    guard = DivergenceGuard(arch.classes)
    if resume and run_dir is not None:  # (resume without a run_dir was refused above)
        weights, resumed, state_dicts, config = _resume_state(run_dir, arch, config, data)
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

    optimizer = make_optimizer(model, config)
    # A function of the step alone: a resumed or extended run needs no scheduler state (the timm
    # scheduler state that older checkpoints hold is not read).
    schedule = LrSchedule.of(config, steps_per_epoch)
    if resumed is not None and run_dir is not None:
        _loaded(run_dir / LAST_CHECKPOINT, optimizer, state_dicts["optimizer"])
    loss_fn = make_loss(config)
    mixup = make_mixup(config, arch.classes)
    resident = None
    if config.resident:
        resident = ResidentLoader(
            train_set, batch_size, device=device, padding=filled(config.crop_padding), hflip=filled(config.hflip)
        )

    if run_dir is not None:
        write_text(run_dir / SPEC_FILE, format_arch(arch))
        write_text(run_dir / CONFIG_FILE, config.model_dump_json(indent=2) + "\n")

    bar = progress_bar(
        total=config.epochs * steps_per_epoch,
        initial=start_epoch * steps_per_epoch,
        show=progress,
        unit="step",
        desc=f"epoch {start_epoch + 1}/{config.epochs}",
    )
    try:
        for epoch in range(start_epoch, config.epochs):
            bar.set_postfix_str("", refresh=False)  # the last epoch's values do not belong to this one
            bar.set_description(f"epoch {epoch + 1}/{config.epochs}")
            metrics = _run_epoch(
                model,
                train_set,
                test_set,
                config,
                epoch,
                optimizer,
                schedule,
                loss_fn,
                mixup,
                device=device,
                dtype=dtype,
                amp=amp,
                memory_format=memory_format,
                steps_per_epoch=steps_per_epoch,
                bar=bar,
                resident=resident,
                guard=guard,
                on_step=on_step,
            )
            history.append(metrics)
            log_line(epoch_line(metrics, config.epochs), show=progress)  # the bar's values, in a log
            if run_dir is not None:
                state = TrainState.pack(
                    {"optimizer": optimizer.state_dict()},
                    epoch=epoch + 1,
                    history=[asdict(m) for m in history],
                    config=config.model_dump(mode="json"),
                    start_loss=guard.start_loss,
                    data=data,
                )
                save_checkpoint(
                    run_dir / LAST_CHECKPOINT, model, arch, _meta(train_set, config, metrics), train_state=state
                )
                if save_every and (epoch + 1) % save_every == 0:
                    path = run_dir / epoch_checkpoint_name(epoch + 1)
                    save_checkpoint(path, model, arch, _meta(train_set, config, metrics))
                _write_run_files(run_dir, history)
            if on_epoch is not None:
                on_epoch(metrics)
    finally:
        bar.close()

    if run_dir is not None and history:
        save_checkpoint(run_dir / FINAL_CHECKPOINT, model, arch, _meta(train_set, config, history[-1]))
    model.eval()
    return TrainResult(model=model, arch=arch, config=config, history=history, run_dir=run_dir)


def epoch_line(metrics: EpochMetrics, epochs: int) -> str:
    """One finished epoch as a plain line, with the names the bar shows them by."""
    return (
        f"epoch {metrics.epoch}/{epochs}  loss={metrics.train_loss:.3f} acc={metrics.train_acc:.3f} "
        f"test_acc={metrics.test_acc:.3f}  ({metrics.seconds:.1f} s, {metrics.img_per_s:.0f} img/s)"
    )


def _meta(train_set: ImageSet, config: TrainConfig, metrics: EpochMetrics) -> dict:
    return {
        "dataset": train_set.name.split("[")[0],
        "epoch": metrics.epoch,
        "test_acc": metrics.test_acc,
        "test_loss": metrics.test_loss,
        "mean": list(train_set.mean),
        "std": list(train_set.std),
        "config": config.model_dump(mode="json"),
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


def _run_epoch(
    model,
    train_set,
    test_set,
    config: TrainConfig,
    epoch: int,
    optimizer,
    schedule: LrSchedule,
    loss_fn,
    mixup,
    *,
    device,
    dtype: torch.dtype,
    amp,
    memory_format,
    steps_per_epoch: int,
    bar,
    resident: ResidentLoader | None,
    guard: DivergenceGuard,
    on_step: Callable[[StepRecord], None] | None = None,
) -> EpochMetrics:
    started = time.perf_counter()
    # Everything random in this epoch (shuffle, augmentation, Mixup, drop path) starts from
    # (seed, epoch): that is what makes a resumed run identical to an uninterrupted one.
    seed_everything(derive_seed(config.seed, epoch))
    loader_seed = derive_seed(config.seed, epoch, 1)
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]]
    if resident is not None:
        loader = resident.reseed(loader_seed)
    else:
        loader = make_loader(
            train_set,
            filled(config.batch_size),
            augment=True,
            recipe=config,
            seed=loader_seed,
            workers=config.workers,
            pin_memory=device.type == "cuda",
        )
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    seen = 0
    step_base = epoch * steps_per_epoch
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, dtype=dtype, non_blocking=True).contiguous(memory_format=memory_format)
        labels = labels.to(device, non_blocking=True)
        lr = schedule.lr_at(step_base + step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, logits = train_step(model, images, labels, optimizer, loss_fn, mixup, config, amp=amp)
        if on_step is not None:
            on_step(StepRecord(step=step_base + step, epoch=epoch, lr=lr, loss=loss.item()))
        if guard.start_loss is None:  # the run's first step: the reference for an exploding loss
            guard.start(loss.item(), epoch)

        loss_sum += loss.float() * len(labels)
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
        bar.update(1)
        # Reading the loss back syncs the GPU, so only every few steps.
        if (step + 1) % 20 == 0 or step + 1 == steps_per_epoch:
            mean_loss = loss_sum.item() / seen
            guard.check_loss("the training loss", mean_loss, epoch, step + 1)
            elapsed = time.perf_counter() - started
            bar.set_postfix(loss=f"{mean_loss:.3f}", acc=f"{correct.item() / seen:.3f}", img_s=f"{seen / elapsed:.0f}")
    train_seconds = time.perf_counter() - started
    train_loss = loss_sum.item() / max(seen, 1)
    guard.check_loss("the training loss", train_loss, epoch, steps_per_epoch)

    logits = predict_logits(
        model, test_set, batch_size=config.eval_batch_size, amp=amp, workers=config.workers, optimize=config.optimize
    )
    test = score_logits(logits, test_set.labels)
    # Checked before the epoch is saved: a diverged epoch never replaces the last good checkpoint.
    guard.check_loss("the test loss", test.nll, epoch)
    guard.check_metric("the test accuracy", test.top1, epoch)
    bar.set_postfix(loss=f"{train_loss:.3f}", acc=f"{correct.item() / seen:.3f}", test_acc=f"{test.top1:.3f}")
    return EpochMetrics(
        epoch=epoch + 1,
        train_loss=train_loss,
        train_acc=correct.item() / max(seen, 1),
        test_loss=test.nll,
        test_acc=test.top1,
        lr=schedule.lr_at(step_base + steps_per_epoch),  # what the next step runs with
        img_per_s=seen / train_seconds if train_seconds > 0 else 0.0,
        seconds=time.perf_counter() - started,
    )
