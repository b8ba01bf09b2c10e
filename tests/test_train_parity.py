"""Step-for-step parity of `archdsl train` with the reference implementation's training loop.

The reference (xxxnell/how-do-vits-work, `ops/trains.py`, `ops/schedulers.py`; docs/training.md)
trains with one optimizer over `model.parameters()` (weight decay on every parameter); each step
is zero_grad, forward, loss, backward, `clip_grad_norm_(model.parameters(), max_norm)` when set,
`optimizer.step()`, then, during the warm-up epochs only, the warm-up scheduler's step (lr =
base_lr * step / warm-up steps, so the first step runs at 0); after each main epoch the main
scheduler (CosineAnnealingLR to 0, or MultiStepLR) steps. `reference_training` below is that loop,
written from this description with torch's own optimizers and schedulers.

With the same initial weights (archdsl's through `initial_checkpoint`), the same batches in the
same order and the random augmentations off, archdsl's losses and final weights must be the
reference's: in float64 to 1e-9, in float32 (the optimized training model) to 1e-5.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from _micro_arch import micro_arch
from torch import nn

from archdsl.cli import main
from archdsl.data.base import ImageSet
from archdsl.lang.printer import format_arch
from archdsl.lang.spec import parse_spec
from archdsl.nn.build import build
from archdsl.run.checkpoint import save_checkpoint
from archdsl.run.epoch_metrics import StepRecord
from archdsl.run.loader import derive_seed, make_loader
from archdsl.run.recipe import TrainConfig
from archdsl.run.schedule import LrSchedule
from archdsl.run.train import train

# A conv stage and an MSA stage with BatchNorm: every kind of parameter and buffer, and small.
MICRO = micro_arch("c1(width=8) { conv }", "c2(width=16, stride=2) { conv msa(2, 4, dim_head=8) }", size=16)
BATCH = 8
IMAGES = 24  # 3 steps per epoch
EPOCHS = 4  # 1 warm-up epoch, then 3 main epochs: 12 steps
# The reference's behaviour, with the random augmentations off. The learning rates are raised so that
# 12 steps move the weights; deit's clip is lowered so that clipping happens; weak's milestones are
# moved into the run (the reference's 60/120/160 would never be reached in 3 main epochs).
NO_AUGMENTATION = dict(mixup=0.0, cutmix=0.0, mixup_prob=0.0, randaugment=None, crop_padding=0, hflip=0.0)
RECIPES = {
    "deit": dict(lr=2e-3, clip_grad=0.5, drop_path=0.0, warmup_epochs=1),
    "weak": dict(lr=0.05, decay_milestones=(1, 2), warmup_epochs=1),
}


def images(n: int, seed: int) -> ImageSet:
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 10
    colours = np.random.default_rng(7).integers(0, 256, (10, 3))
    pixels = np.clip(rng.normal(0, 40, (n, 16, 16, 3)) + colours[labels][:, None, None, :], 0, 255).astype(np.uint8)
    return ImageSet("parity", pixels, labels.astype(np.int64), 10, (0.5, 0.45, 0.4), (0.25, 0.25, 0.3))


@pytest.fixture(scope="module")
def arch():
    return parse_spec(MICRO)


@pytest.fixture(scope="module")
def data():
    return images(IMAGES, 0), images(16, 1)


def config_of(recipe: str, dtype: str, start: Path, **extra) -> TrainConfig:
    return TrainConfig(
        recipe=recipe, epochs=EPOCHS, batch_size=BATCH, device="cpu", model_dtype=dtype,
        initial_checkpoint=str(start), **NO_AUGMENTATION, **RECIPES[recipe], **extra,
    )  # fmt: skip


def initial_file(arch, path: Path) -> Path:
    """Weights that are not archdsl's fresh ones (seed 123), saved as an archdsl checkpoint."""
    save_checkpoint(path, build(arch, seed=123), arch, {})
    return path


def the_batches(
    train_set: ImageSet, config: TrainConfig, epoch: int, dtype: torch.dtype = torch.float32
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The batches archdsl's loader gives in `epoch` (its shuffle), normalised in `dtype` (as the
    run of that dtype normalises them), checked to be un-augmented images."""
    seed = derive_seed(config.seed, epoch, 1)
    batches = list(make_loader(train_set, BATCH, augment=True, recipe=config, seed=seed, dtype=dtype))
    mean = torch.tensor(train_set.mean, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(train_set.std, dtype=dtype).view(1, 3, 1, 1)
    raw = (torch.from_numpy(train_set.images).permute(0, 3, 1, 2).to(dtype) / 255 - mean) / std
    seen = []
    for batch, labels in batches:
        for image, label in zip(batch, labels, strict=True):
            index = int(torch.argmin((raw - image).flatten(1).abs().amax(1)))
            assert torch.allclose(raw[index], image, atol=1e-6) and train_set.labels[index] == label
            seen.append(index)
    assert sorted(seen) == list(range(len(train_set)))  # each image once: no crop, no flip
    return batches


def reference_training(model: nn.Module, config: TrainConfig, train_set: ImageSet, dtype: torch.dtype):
    """The reference's loop: (per-step losses, per-step learning rates)."""
    from timm.loss import LabelSmoothingCrossEntropy

    warmup, main_epochs = 1, EPOCHS - 1
    params = model.parameters()
    if config.optimizer == "adamw":
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    else:
        optimizer = torch.optim.SGD(params, lr=config.lr, momentum=0.9, weight_decay=config.weight_decay)
    if config.sched == "cosine":
        # A cut recipe ends annealed (archdsl.run.schedule): the reference's scheduler, its horizon the last main epoch.
        main_scheduler: torch.optim.lr_scheduler.LRScheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=main_epochs - 1, eta_min=0
        )
    else:
        main_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1, 2], gamma=0.2)
    warmup_steps = warmup * (IMAGES // BATCH)
    warmup_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / warmup_steps)
    loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1) if config.label_smoothing else nn.CrossEntropyLoss()
    losses, rates = [], []
    model.train()
    for epoch in range(EPOCHS):
        for batch, labels in the_batches(train_set, config, epoch, dtype):
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.zero_grad()
            loss = loss_fn(model(batch.to(dtype)), labels)
            loss.backward()
            if config.clip_grad:
                nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad)
            optimizer.step()
            losses.append(loss.item())
            if epoch < warmup:
                warmup_scheduler.step()
        if epoch >= warmup:
            main_scheduler.step()
    return losses, rates


def relative_difference(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor], *, per_tensor: bool) -> float:
    """||a - b|| / ||b|| of the floating tensors (parameters and BN statistics): the largest over the
    tensors, or (`per_tensor=False`) of all of them together."""
    worst, difference, norm = 0.0, 0.0, 0.0
    for key, value in theirs.items():
        if not value.is_floating_point():
            assert torch.equal(ours[key], value), key  # num_batches_tracked
            continue
        other = ours[key].to(value.dtype)
        worst = max(worst, float((other - value).norm() / value.norm().clamp_min(1e-30)))
        difference += float((other - value).norm()) ** 2
        norm += float(value.norm()) ** 2
    return worst if per_tensor else math.sqrt(difference / norm)


@pytest.mark.parametrize(
    "recipe, dtype, optimize, tolerance",
    [
        ("deit", "float64", False, 1e-9),
        ("weak", "float64", False, 1e-9),
        ("deit", "float32", False, 1e-5),
        ("weak", "float32", False, 1e-5),
        ("weak", "float32", True, 1e-5),
    ],
)
def test_training_steps_equal_the_reference_loops(
    arch, data, tmp_path: Path, recipe: str, dtype: str, optimize: bool, tolerance: float
) -> None:
    train_set, test_set = data
    start = initial_file(arch, tmp_path / "start.safetensors")
    config = config_of(recipe, dtype, start, optimize=optimize)
    steps: list[StepRecord] = []
    result = train(arch, train_set, test_set, config, progress=False, on_step=steps.append)

    torch_dtype = getattr(torch, dtype)
    reference = build(arch, seed=0)
    reference.load_state_dict(build(arch, seed=123).state_dict())
    reference.to(torch_dtype)
    losses, rates = reference_training(reference, config, train_set, torch_dtype)

    assert [s.step for s in steps] == list(range(12))
    assert [s.epoch for s in steps] == [e for e in range(EPOCHS) for _ in range(3)]
    assert rates[0] == 0 and rates[3] == config.lr  # warm-up from 0, at the peak when it ends
    assert len(set(rates)) >= 4  # the schedule moved: warm-up steps, then main epochs that differ
    assert [s.lr for s in steps] == pytest.approx(rates, rel=1e-12, abs=1e-15)
    assert [s.loss for s in steps] == pytest.approx(losses, rel=tolerance)
    # The optimized model (channels_last on the CPU) rounds differently, and the biases right before a
    # BatchNorm (the MSA's output projection) have an exact gradient of 0: what they get is rounding
    # noise, different noise in the other memory layout. So it is held to the whole model's norm.
    difference = relative_difference(result.model.state_dict(), reference.state_dict(), per_tensor=not optimize)
    assert difference <= tolerance


def test_a_resumed_float64_run_ends_with_the_same_weights(arch, data, tmp_path: Path) -> None:
    train_set, test_set = data
    start = initial_file(arch, tmp_path / "start.safetensors")
    config = config_of("weak", "float64", start, optimize=False)
    full = train(arch, train_set, test_set, config, run_dir=tmp_path / "full", progress=False)

    def stop_after_2(metrics) -> None:
        if metrics.epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(arch, train_set, test_set, config, run_dir=tmp_path / "cut", progress=False, on_epoch=stop_after_2)
    resumed = train(arch, train_set, test_set, config, run_dir=tmp_path / "cut", resume=True, progress=False)
    for key, value in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[key], value), key
    recorded = json.loads((tmp_path / "cut" / "config.json").read_text())
    assert recorded["model_dtype"] == "float64" and recorded["initial_checkpoint"] == str(start)


# -- the schedules, step by step ---------------------------------------------------------------


def torch_schedule(recipe: str, steps_per_epoch: int, warmup: int, epochs: int, lr: float) -> list[float]:
    """The rate of every step as the reference's schedulers set it (the per-epoch main scheduler)."""
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
    if recipe == "deit":
        main: torch.optim.lr_scheduler.LRScheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=epochs - warmup, eta_min=0
        )
    else:
        main = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[60, 120, 160], gamma=0.2)
    warm = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / (warmup * steps_per_epoch))
    rates = []
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            if epoch < warmup:
                warm.step()
        if epoch >= warmup:
            main.step()
    return rates


@pytest.mark.parametrize("recipe", ["deit", "weak"])
def test_the_recipes_schedules_are_the_reference_schedulers(recipe: str) -> None:
    config = TrainConfig(recipe=recipe)  # the whole run: 305 (deit) or 201 (weak) epochs
    steps_per_epoch = 3
    schedule = LrSchedule.of(config, steps_per_epoch)
    expected = torch_schedule(recipe, steps_per_epoch, config.warmup_epochs or 0, config.epochs, config.lr or 0)
    ours = [schedule.lr_at(step) for step in range(config.epochs * steps_per_epoch)]
    assert ours == pytest.approx(expected, rel=1e-9, abs=1e-18)
    assert ours[0] == 0.0 and ours[steps_per_epoch * (config.warmup_epochs or 0)] == config.lr


def test_the_reference_formulas_by_hand() -> None:
    deit = LrSchedule.of(TrainConfig(recipe="deit"), steps_per_epoch=10)
    base = 1.25e-4
    assert (
        deit.lr_at(0) == 0
        and deit.lr_at(1) == pytest.approx(base / 50)
        and deit.lr_at(49) == pytest.approx(base * 49 / 50)
    )
    # Main epoch e (0-based) runs at base * (1 + cos(pi e / 300)) / 2, the same for its 10 steps.
    for e in (0, 1, 150, 299):
        rates = [deit.lr_at(50 + 10 * e + i) for i in range(10)]
        assert rates == pytest.approx([base * (1 + math.cos(math.pi * e / 300)) / 2] * 10)
    weak = LrSchedule.of(TrainConfig(recipe="weak"), steps_per_epoch=10)
    assert [weak.lr_at(10 + 10 * e) for e in (0, 59, 60, 119, 120, 160, 199)] == pytest.approx(
        [0.1, 0.1, 0.02, 0.02, 0.004, 0.1 * 0.2**3, 0.1 * 0.2**3]
    )


def test_the_fast_recipe_keeps_timms_per_iteration_cosine() -> None:
    """Cut to 4 epochs, the horizon is the last step (t_initial one short of the 15 main steps): it ends at lr_min."""
    from timm.scheduler import CosineLRScheduler

    config = TrainConfig(recipe="fast", epochs=4, warmup_epochs=1)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=config.lr or 0)
    timm_schedule = CosineLRScheduler(
        optimizer, t_initial=3 * 5 - 1, warmup_t=5, warmup_lr_init=1e-6, warmup_prefix=True, lr_min=1e-6,
        t_in_epochs=False,
    )  # fmt: skip
    ours = LrSchedule.of(config, steps_per_epoch=5)
    for step in range(4 * 5):
        timm_schedule.step_update(step)
        assert ours.lr_at(step) == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-12)


# -- --initial-checkpoint from the command line --------------------------------------------------


def reference_file(arch, path: Path) -> Path:
    """build(arch, seed=123)'s weights in the reference implementation's layout, as its .pth.tar holds them."""
    from archdsl.nn.convert.reference import reference_layout

    ours = build(arch, seed=123).state_dict()
    state = {theirs: ours[part.key].reshape(part.reference_shape) for theirs, part in reference_layout(arch).items()}
    torch.save({"state_dict": state, "epoch": 300}, path)
    return path


def test_train_starts_from_a_reference_file(tmp_path: Path, capsys) -> None:
    arch = parse_spec(MICRO.replace("3x16x16", "3x32x32"))  # the synthetic images' size
    spec = tmp_path / "micro.arch"
    spec.write_text(format_arch(arch))
    source = reference_file(arch, tmp_path / "alternet.pth.tar")
    flags = ["--recipe", "weak", "--epochs", str(EPOCHS), "--batch-size", str(BATCH), "--lr", "0.05"]
    flags += ["--decay-milestones", "1,2", "--crop-padding", "0", "--hflip", "0", "--device", "cpu", "--no-progress"]
    dataset = "synthetic:train=24,test=16"
    out = tmp_path / "run"
    assert (
        main(["train", str(spec), "--dataset", dataset, *flags, "--initial-checkpoint", str(source), "--out", str(out)])
        == 0
    )
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["initial_checkpoint"] == str(source) and recorded["recipe"] == "weak"
    assert recorded["decay_milestones"] == [1, 2] and recorded["hflip"] == 0

    # The same run in Python from an archdsl checkpoint of the same weights: the same weights at the end.
    from archdsl.data import load_split
    from archdsl.run.checkpoint import load_checkpoint

    assert recorded.pop("world_size") == 1  # recorded beside the settings
    config = TrainConfig.model_validate(recorded).model_copy(
        update={"initial_checkpoint": str(initial_file(arch, tmp_path / "start.safetensors"))}
    )
    again = train(arch, load_split(dataset, "train"), load_split(dataset, "test"), config, progress=False)
    final = load_checkpoint(out / "final.safetensors").model.state_dict()
    for key, value in again.model.state_dict().items():
        assert torch.equal(final[key], value), key

    # Not with --resume from other weights than the run started from; a spec the weights do not fit:
    # named keys, exit 1, no run folder left.
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                str(spec),
                "--dataset",
                dataset,
                *flags,
                "--initial-checkpoint",
                str(tmp_path / "start.safetensors"),
                "--out",
                str(out),
                "--resume",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "cannot be combined with --resume" in err and f"the run started from {source}" in err
    wider = tmp_path / "wider.arch"
    wider.write_text(format_arch(arch).replace("width=16", "width=24"))
    assert (
        main(
            [
                "train",
                str(wider),
                "--dataset",
                dataset,
                *flags,
                "--initial-checkpoint",
                str(source),
                "--out",
                str(tmp_path / "w"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"--initial-checkpoint {source}: the weights do not fit" in err and "of the wrong shape: " in err
    assert not (tmp_path / "w").exists()
