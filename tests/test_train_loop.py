"""The training loop: learning, run directories, exact resumption, divergence, callbacks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _micro_arch import micro_arch

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.lang.spec import parse_spec
from archdsl.run import EpochMetrics, TrainConfig, TrainingDiverged
from archdsl.run.train import train


def colour_classes(n: int, seed: int, size: int = 16, classes: int = 10) -> ImageSet:
    """Each class a fixed colour plus heavy noise: learnable in a couple of epochs, not trivially."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    colours = np.random.default_rng(123).integers(0, 256, (classes, 3))
    images = rng.normal(0, 30, (n, size, size, 3)) + colours[labels][:, None, None, :]
    return ImageSet(
        "colours", np.clip(images, 0, 255).astype(np.uint8), labels.astype(np.int64), classes, (0.5,) * 3, (0.25,) * 3
    )


# A few conv blocks and one MSA, widths 16/32: the smallest design that has every kind of part.
MICRO = micro_arch("c1(width=16) { conv }", "c2(width=32, stride=2) { conv msa(2, 4, dim_head=16) }", size=16, stem=16)


@pytest.fixture(scope="module")
def arch():
    return parse_spec(MICRO)


def recorded_settings(run_dir: Path) -> dict:
    """A run's config.json less what it records beside the settings (the ranks that trained it)."""
    recorded = json.loads((run_dir / "config.json").read_text())
    del recorded["world_size"]
    return recorded


@pytest.fixture(scope="module")
def data():
    return colour_classes(256, 0), colour_classes(64, 1)


def test_checkpoints_keep_the_figures_of_the_split_that_scored_the_run(arch, tmp_path: Path) -> None:
    # A search's trial trains so: scored on validation images, with no test set. Its checkpoints record the
    # validation figures under their own names (they once recorded test figures only: none at all here).
    from archdsl.run.checkpoint import load_checkpoint

    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, device="cpu")
    scored = colour_classes(16, 7)
    result = train(arch, colour_classes(64, 6), None, config, val_set=scored, run_dir=tmp_path, progress=False)
    last = result.history[-1]
    for name in ("final", "last"):
        meta = load_checkpoint(tmp_path / f"{name}.safetensors").meta
        assert (meta["val_acc"], meta["val_loss"]) == (last.val_acc, last.val_loss)
        assert "test_acc" not in meta and "test_loss" not in meta
    both = tmp_path / "both"
    config = config.model_copy(update={"val_split": 16})
    result = train(arch, colour_classes(80, 6), scored, config, run_dir=both, progress=False)
    meta = load_checkpoint(both / "final.safetensors").meta
    assert [meta[k] for k in ("test_acc", "val_acc")] == [result.test_acc, result.val_acc]


@pytest.mark.slow
def test_fast_recipe_learns_and_keeps_a_run_directory(arch, data, tmp_path: Path) -> None:
    train_set, test_set = data
    seen: list[EpochMetrics] = []
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, lr=0.1, device="cpu")
    result = train(arch, train_set, test_set, config, run_dir=tmp_path, on_epoch=seen.append, progress=False)
    assert [m.epoch for m in result.history] == [1, 2] and seen == result.history
    assert result.test_acc > 0.3  # chance is 0.1
    assert result.history[-1].train_loss < result.history[0].train_loss
    assert all(m.img_per_s > 0 and m.seconds > 0 for m in result.history)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2] and rows[-1]["test_acc"] == result.test_acc
    assert (tmp_path / "metrics.csv").read_text().splitlines()[0].startswith("epoch,train_loss,train_acc")
    assert parse_spec((tmp_path / "spec.arch").read_text()) == arch
    recorded = json.loads((tmp_path / "config.json").read_text())
    assert recorded.pop("world_size") == 1  # one process trained it (torchrun runs record their ranks)
    assert TrainConfig.model_validate(recorded).epochs == 2
    from archdsl.run.checkpoint import load_checkpoint

    final = load_checkpoint(tmp_path / "final.safetensors")
    assert final.meta["epoch"] == 2 and final.meta["test_acc"] == result.test_acc
    assert final.meta["world_size"] == 1
    for key, value in result.model.state_dict().items():
        assert torch.equal(final.model.state_dict()[key], value)
    # A second run into the same directory must not silently overwrite the first.
    with pytest.raises(UserError, match="already holds a run"):
        train(
            arch,
            train_set,
            test_set,
            TrainConfig(recipe="fast", epochs=1, batch_size=32, device="cpu"),
            run_dir=tmp_path,
            progress=False,
        )


@pytest.mark.slow
def test_a_small_hybrid_learns_the_synthetic_set(tmp_path: Path) -> None:
    from archdsl.data import load_split

    arch = parse_spec(MICRO.replace("3x16x16", "3x32x32"))
    name = "synthetic:train=800,test=200"
    train_set, test_set = load_split(name, "train"), load_split(name, "test")
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, lr=0.3, device="cpu", resident=True)
    result = train(arch, train_set, test_set, config, progress=False)
    assert result.test_acc > 0.3  # 10 classes: chance is 0.1


class Stop(Exception):
    pass


def _stop(metrics: EpochMetrics) -> None:
    raise Stop


@pytest.mark.slow
@pytest.mark.parametrize("recipe, resident", [("deit", False), ("weak", False), ("fast", True)])
def test_resumed_run_equals_an_uninterrupted_one(arch, tmp_path: Path, recipe: str, resident: bool) -> None:
    # The deit recipe exercises Mixup/CutMix, RandAugment, drop path, warm-up and AdamW state.
    train_set, test_set = colour_classes(64, 2), colour_classes(16, 3)
    config = TrainConfig(recipe=recipe, epochs=2, batch_size=32, warmup_epochs=1, device="cpu", resident=resident)
    full = train(arch, train_set, test_set, config, run_dir=tmp_path / "full", progress=False)
    with pytest.raises(Stop):  # killed after the first epoch
        train(arch, train_set, test_set, config, run_dir=tmp_path / "cut", on_epoch=_stop, progress=False)
    resumed = train(arch, train_set, test_set, config, run_dir=tmp_path / "cut", resume=True, progress=False)
    assert [m.epoch for m in resumed.history] == [1, 2]
    expected = full.model.state_dict()
    for key, value in resumed.model.state_dict().items():
        assert torch.equal(value, expected[key]), key
    assert resumed.history[-1].test_loss == full.history[-1].test_loss


def test_resume_needs_a_checkpoint_and_the_same_settings(arch, tmp_path: Path) -> None:
    train_set, test_set = colour_classes(64, 4), colour_classes(16, 5)
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, device="cpu")
    with pytest.raises(UserError, match="nothing to resume"):
        train(arch, train_set, test_set, config, run_dir=tmp_path, resume=True, progress=False)
    with pytest.raises(Stop):
        train(arch, train_set, test_set, config, run_dir=tmp_path, on_epoch=_stop, progress=False)
    changed = config.model_copy(update={"lr": 0.01})
    with pytest.raises(UserError, match="different settings: lr"):
        train(arch, train_set, test_set, changed, run_dir=tmp_path, resume=True, progress=False)


def _learning_rate(run_dir: Path) -> float:
    """The learning rate recorded after the run's last finished epoch (the next step's)."""
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["lr"]


def _scheduled_rate(config: TrainConfig, step: int, steps_per_epoch: int) -> float:
    """What `config`'s schedule gives at `step` (of `steps_per_epoch`-step epochs)."""
    from archdsl.run.schedule import LrSchedule

    return LrSchedule.of(config, steps_per_epoch).lr_at(step)


def test_a_finished_run_is_extended_on_the_longer_runs_schedule(arch, tmp_path: Path) -> None:
    train_set, test_set = colour_classes(64, 4), colour_classes(16, 5)
    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, lr=0.1, device="cpu")
    train(arch, train_set, test_set, config, run_dir=tmp_path, progress=False)
    assert _learning_rate(tmp_path) == pytest.approx(1e-6)  # the end of a one-epoch cosine

    # Three epochs now (the third stopped by a kill): the added ones follow a 3-epoch plan from epoch 2 on.
    longer = config.model_copy(update={"epochs": 3})
    stop_at_2 = lambda m: _stop(m) if m.epoch == 2 else None  # noqa: E731
    with pytest.raises(Stop):
        train(arch, train_set, test_set, longer, run_dir=tmp_path, resume=True, on_epoch=stop_at_2, progress=False)
    assert _learning_rate(tmp_path) == pytest.approx(_scheduled_rate(longer, 2 * 2, steps_per_epoch=2))
    assert _learning_rate(tmp_path) > 1e-3  # not the finished one-epoch schedule's 1e-6
    saved = TrainConfig.model_validate(recorded_settings(tmp_path))
    assert (saved.epochs, saved.extended_at) == (3, (1,))

    # Resumed without new settings, the extended run goes on with its record and ends at epoch 3.
    done = train(arch, train_set, test_set, longer, run_dir=tmp_path, resume=True, progress=False)
    assert [m.epoch for m in done.history] == [1, 2, 3]
    assert done.config.extended_at == (1,)
    assert len((tmp_path / "metrics.csv").read_text().splitlines()) == 4  # header + 3 epochs

    with pytest.raises(UserError, match="cannot shorten"):
        train(arch, train_set, test_set, config, run_dir=tmp_path, resume=True, progress=False)


def test_a_diverging_loss_raises_training_diverged(arch) -> None:
    train_set, test_set = colour_classes(64, 6), colour_classes(16, 7)
    # 1e20: NaN by the second step in either memory layout (at 1e12 the channels_last
    # convolutions of the optimized model still give a finite 1.5e21 loss).
    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, lr=1e20, device="cpu")
    with pytest.raises(TrainingDiverged, match="diverged") as caught:
        train(arch, train_set, test_set, config, progress=False)
    assert isinstance(caught.value, UserError) and caught.value.epoch == 0


def test_a_loss_exploding_far_above_its_start_is_divergence_even_when_finite(arch) -> None:
    # lr 1e3: the second step's loss is ~4e3 (the start is ~2.3) and the test loss NaN, on
    # every CPU kernel; before, the run ended "successfully" with that model.
    train_set, test_set = colour_classes(64, 6), colour_classes(16, 7)
    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, lr=1e3, device="cpu")
    with pytest.raises(TrainingDiverged, match="training diverged"):
        train(arch, train_set, test_set, config, progress=False)


def test_divergence_does_not_depend_on_the_cpu_kernels(tmp_path: Path) -> None:
    # Whether lr 1e12 overflows to NaN in two steps or stays finite (~1.5e21) depends on the
    # CPU's vector kernels and the thread count: with AVX-512 it is NaN, with AVX2 or the
    # plain kernels on one thread it is finite. The plain kernels stand for such a machine.
    script = tmp_path / "diverge.py"
    script.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "torch.set_num_threads(1)\n"
        "from test_train_loop import MICRO, colour_classes\n"
        "from archdsl.lang.spec import parse_spec\n"
        "from archdsl.run import TrainingDiverged\n"
        "from archdsl.run.train import TrainConfig, train\n"
        "config = TrainConfig(recipe='fast', epochs=1, batch_size=32, lr=1e12, device='cpu')\n"
        "try:\n"
        "    result = train(parse_spec(MICRO), colour_classes(64, 6), colour_classes(16, 7), config, progress=False)\n"
        "except TrainingDiverged as err:\n"
        "    sys.exit(f'diverged: {err.message}')\n"
        "print('finished', result.history)\n"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "diverged: training diverged" in done.stderr, done.stdout + done.stderr


def test_an_exploding_test_loss_is_recorded_and_shown_but_does_not_stop_training(
    arch, tmp_path: Path, monkeypatch
) -> None:
    # BatchNorm's running statistics after one high-learning-rate epoch can give a test loss of
    # 450 while training is sound (issue 28): the test images are evaluated with confidently
    # wrong logits here (negated, x1e4), the training loss is untouched.
    from archdsl.errors import ArchdslWarning
    from archdsl.run import epoch_metrics

    real = epoch_metrics.predict_logits
    monkeypatch.setattr(epoch_metrics, "predict_logits", lambda *a, **k: -1e4 * real(*a, **k))
    train_set, test_set = colour_classes(64, 6), colour_classes(16, 7)
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, device="cpu")
    with pytest.warns(ArchdslWarning, match="the test loss is .* in epoch [12], .*training not stopped"):
        done = train(arch, train_set, test_set, config, run_dir=tmp_path, progress=False)
    assert [m.epoch for m in done.history] == [1, 2] and (tmp_path / "final.safetensors").exists()
    assert all(m.test_loss > 1000 and m.test_loss_spike for m in done.history)
    assert "test_loss_spike" in (tmp_path / "metrics.csv").read_text().splitlines()[0]


def test_a_run_that_diverges_keeps_its_last_good_checkpoint(arch, tmp_path: Path) -> None:
    # One step per epoch; the first (warm-up) step has lr 1e-6, the next ones 1e3: epoch 1
    # is sound, the weights blow up in the step of epoch 2.
    train_set, test_set = colour_classes(32, 6), colour_classes(16, 7)
    config = TrainConfig(recipe="fast", epochs=3, warmup_epochs=1, batch_size=32, lr=1e3, device="cpu")
    with pytest.raises(TrainingDiverged) as caught:
        train(arch, train_set, test_set, config, run_dir=tmp_path, progress=False)
    from archdsl.run.checkpoint import load_checkpoint

    last = load_checkpoint(tmp_path / "last.safetensors")
    assert 1 <= last.meta["epoch"] <= caught.value.epoch
    assert all(torch.isfinite(value).all() for value in last.model.state_dict().values())
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == list(range(1, last.meta["epoch"] + 1))
    assert all(math.isfinite(r["train_loss"]) and math.isfinite(r["test_loss"]) for r in rows)
    assert not (tmp_path / "final.safetensors").exists()


def test_mismatched_data_and_tiny_sets_are_user_errors(arch) -> None:
    config = TrainConfig(recipe="fast", epochs=1, batch_size=32, device="cpu")
    wrong_size = colour_classes(64, 0, size=8)
    with pytest.raises(UserError, match="inputs"):
        train(arch, wrong_size, wrong_size, config, progress=False)
    wrong_classes = colour_classes(64, 0, classes=4)
    with pytest.raises(UserError, match="classes"):
        train(arch, wrong_classes, wrong_classes, config, progress=False)
    small = colour_classes(16, 0)
    with pytest.raises(UserError, match="fewer than one batch"):
        train(arch, small, small, config, progress=False)


def test_the_divergence_rule_allows_a_noisy_start_and_stops_nan_and_explosions() -> None:
    from archdsl.errors import ArchdslWarning
    from archdsl.run.divergence import EXPLOSION_FACTOR, DivergenceGuard

    guard = DivergenceGuard(classes=10)
    guard.start(2.3, epoch=0)
    for loss in (2.3, 11.0, 40.0, 3.0):  # a high learning rate's first steps: rough, not diverged
        guard.check_loss("the training loss", loss, epoch=0, step=20)
    for bad in (float("nan"), float("inf"), EXPLOSION_FACTOR * 2.3 * 1.01):
        with pytest.raises(TrainingDiverged, match="training diverged: the training loss"):
            guard.check_loss("the training loss", bad, epoch=1)
    # An evaluated loss diverges only when it is not finite; an explosion is a spike, reported.
    for bad in (float("nan"), float("inf")):
        with pytest.raises(TrainingDiverged, match="training diverged: the test loss"):
            guard.check_evaluated_loss("the test loss", bad, epoch=1)
    with pytest.warns(ArchdslWarning, match="the test loss is 232.3 in epoch 2"):
        assert guard.check_evaluated_loss("the test loss", EXPLOSION_FACTOR * 2.3 * 1.01, epoch=1)
    assert not guard.check_evaluated_loss("the test loss", 40.0, epoch=1)
    with pytest.raises(TrainingDiverged, match="the test accuracy is nan in epoch 3"):
        guard.check_metric("the test accuracy", float("nan"), epoch=2)
    # A run resumed from good weights (tiny loss) is judged against ln(classes), not 1e-3.
    resumed = DivergenceGuard(classes=10, start_loss=1e-3)
    resumed.check_loss("the training loss", 5.0, epoch=7)
    with pytest.raises(TrainingDiverged):
        DivergenceGuard(classes=10).start(float("nan"), epoch=0)


def test_resume_refuses_another_dataset_and_names_it(arch, tmp_path: Path) -> None:
    train_set, test_set = colour_classes(64, 4), colour_classes(16, 5)
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, device="cpu")
    with pytest.raises(Stop):
        train(arch, train_set, test_set, config, run_dir=tmp_path, on_epoch=_stop, progress=False)
    other = ImageSet("other", train_set.images, train_set.labels, 10, (0.5,) * 3, (0.25,) * 3)
    with pytest.raises(UserError, match="different data: the training set 'other'.*was 'colours'"):
        train(arch, other, test_set, config, run_dir=tmp_path, resume=True, progress=False)
    # Same name, other images (another seed, other options): refused all the same.
    with pytest.raises(UserError, match="different data: the training set 'colours' .*other images"):
        train(arch, colour_classes(64, 9), test_set, config, run_dir=tmp_path, resume=True, progress=False)
    with pytest.raises(UserError, match="different data: the test set"):
        train(arch, train_set, colour_classes(16, 9), config, run_dir=tmp_path, resume=True, progress=False)
    resumed = train(arch, train_set, test_set, config, run_dir=tmp_path, resume=True, progress=False)
    assert [m.epoch for m in resumed.history] == [1, 2]


def _as_recorded_before_fast(config: dict) -> dict:
    """A config as archdsl recorded it before `fast` was split from `weak` (and the schedule fields existed)."""
    old = {k: v for k, v in config.items() if k not in ("weight_decay_params", "sched", "sched_on_updates")}
    old = {k: v for k, v in old.items() if k not in ("decay_milestones", "decay_rate", "warmup_lr", "min_lr")}
    old = {k: v for k, v in old.items() if k not in ("model_dtype", "initial_checkpoint")}
    return {**old, "recipe": "weak", "hflip": True, "clip_grad": None}


def test_a_run_recorded_by_an_older_archdsl_is_refused_not_resumed_under_todays_recipe(arch, tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    train_set, test_set = colour_classes(64, 4), colour_classes(16, 5)
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, device="cpu")
    with pytest.raises(Stop):
        train(arch, train_set, test_set, config, run_dir=tmp_path, on_epoch=_stop, progress=False)
    # Rewrite the stopped run as the old archdsl wrote it: filled in with today's defaults, its
    # `weak` (today's `fast`) would resume on another schedule.
    path = tmp_path / "last.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        metadata = dict(handle.metadata())
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    state = json.loads(metadata["archdsl.train_state"])
    state["config"] = _as_recorded_before_fast(state["config"])
    del state["data"]
    metadata["archdsl.train_state"] = json.dumps(state)
    save_file(tensors, str(path), metadata=metadata)
    before = path.read_bytes()
    weak = config.model_copy(update={"recipe": "weak"})
    with pytest.raises(UserError, match="written by an older archdsl: its training state does not record data, "):
        train(arch, train_set, test_set, weak, run_dir=tmp_path, resume=True, progress=False)
    assert path.read_bytes() == before  # the finished epoch is kept


def test_a_run_resumes_only_with_the_design_it_was_trained_from(arch, tmp_path: Path) -> None:
    train_set, test_set = colour_classes(64, 4), colour_classes(16, 5)
    config = TrainConfig(recipe="fast", epochs=2, batch_size=32, device="cpu")
    with pytest.raises(Stop):
        train(arch, train_set, test_set, config, run_dir=tmp_path, on_epoch=_stop, progress=False)
    first = arch.stages[0]
    wider = arch.model_copy(update={"stages": (first.model_copy(update={"width": first.width + 1}), *arch.stages[1:])})
    renamed = arch.model_copy(update={"init": "timm" if arch.init == "torch" else "torch"})
    for other in (wider, renamed):  # the init scheme is part of the design too
        with pytest.raises(UserError, match="different design"):
            train(other, train_set, test_set, config, run_dir=tmp_path, resume=True, progress=False)
    resumed = train(arch, train_set, test_set, config, run_dir=tmp_path, resume=True, progress=False)
    assert [m.epoch for m in resumed.history] == [1, 2]


def test_a_users_milestone_beyond_the_run_is_warned_about(arch) -> None:
    from archdsl.errors import ArchdslWarning

    train_set, test_set = colour_classes(64, 6), colour_classes(16, 7)
    config = TrainConfig(recipe="weak", epochs=2, batch_size=32, decay_milestones=(5,), device="cpu")
    with pytest.warns(ArchdslWarning, match="--decay-milestones 5 lie beyond this run's 1 main epochs"):
        train(arch, train_set, test_set, config, progress=False)
