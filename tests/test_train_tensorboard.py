"""`archdsl train --log tensorboard`: each finished epoch's metrics as TensorBoard scalars (an extra)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _micro_arch import micro_arch

from archdsl.cli import main

MICRO = micro_arch("c1(width=8) { conv msa(2, 4, dim_head=4) }")
DATASET = "synthetic:train=40,test=20"


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's own usage errors
        return int(stop.code)


@pytest.fixture
def argv(tmp_path: Path) -> list[str]:
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    options = ["--recipe", "fast", "--batch-size", "20", "--no-progress", "--log", "tensorboard"]
    return ["train", str(spec), "--dataset", DATASET, "--out", str(tmp_path / "run"), *options]


def test_without_the_extra_log_tensorboard_names_the_install_and_starts_nothing(
    argv: list[str], tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # `import tensorboard` now fails, as without the extra
    assert exit_code([*argv, "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "--log tensorboard needs the tensorboard package" in err and "archdsl[tensorboard]" in err
    assert "pip install -e '.[tensorboard]'" in err  # the README's install is an editable one from a clone
    assert "Traceback" not in err and "training micro" not in err  # refused before the header line
    assert not (tmp_path / "run").exists()


def test_an_unknown_logger_is_a_usage_error(argv: list[str], capsys) -> None:
    assert exit_code([*argv[:-1], "wandb"]) == 2
    assert "invalid choice: 'wandb'" in capsys.readouterr().err


@pytest.mark.extras
def test_each_epoch_is_a_scalar_step_and_a_resumed_run_goes_on(argv: list[str], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert exit_code([*argv, "--epochs", "1"]) == 0
    assert exit_code([*argv, "--epochs", "2", "--resume"]) == 0  # extended: a second epoch, one more step
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert {"loss/train", "loss/test", "top1/train", "top1/test", "lr", "img_per_s"} <= set(events.Tags()["scalars"])
    with open(tmp_path / "run" / "metrics.csv") as rows:
        expected = [float(row["test_loss"]) for row in csv.DictReader(rows)]
    logged = events.Scalars("loss/test")
    assert [e.step for e in logged] == [1, 2]
    assert [e.value for e in logged] == pytest.approx(expected, rel=1e-6)


def test_a_run_with_a_validation_split_logs_its_validation_curves(argv: list[str], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert exit_code([*argv, "--epochs", "2", "--val-split", "10"]) == 0
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    with open(tmp_path / "run" / "metrics.csv") as rows:
        recorded = list(csv.DictReader(rows))
    for tag, column in (("loss/val", "val_loss"), ("top1/val", "val_acc")):
        assert [e.value for e in events.Scalars(tag)] == pytest.approx([float(r[column]) for r in recorded], rel=1e-6)


def test_a_run_without_a_validation_split_logs_no_validation_curves(argv: list[str], tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert exit_code([*argv, "--epochs", "1"]) == 0
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert not {"loss/val", "top1/val"} & set(events.Tags()["scalars"])


@pytest.mark.parametrize(
    "package, problem",
    [
        ("raise ImportError('cannot import name X from tensorboard.compat')\n", "cannot import name X"),
        ("__version__ = '1.14.0'\n", "TensorBoard logging requires TensorBoard version 1.15 or above"),
    ],
)
def test_a_broken_tensorboard_is_a_usage_error_before_anything_starts(
    argv: list[str], tmp_path: Path, package: str, problem: str
) -> None:
    """An installed tensorboard that fails to import, or is too old for torch: refused as a
    missing one is, before the header and the run folder."""
    fake = tmp_path / "site" / "tensorboard"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(package)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "archdsl", *argv, "--epochs", "1"], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        f"archdsl: error: --log tensorboard: the installed tensorboard package cannot be used ({problem}"
    ), result.stderr
    assert "Traceback" not in result.stderr and "training micro" not in result.stderr
    assert not (tmp_path / "run").exists()
