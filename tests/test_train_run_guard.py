"""A new run never writes over another run's finished work; `--resume` with the command that
started the run (its --initial-checkpoint included) goes on with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _micro_arch import micro_arch

from archdsl.errors import UserError
from archdsl.run.session import TrainSettings, plan_training

MICRO = micro_arch("c1(width=8) { conv }")
DATASET = "synthetic:train=40,test=20"


@pytest.mark.parametrize("kept", ["final.safetensors", "metrics.jsonl", "metrics.csv", "epoch-0002.safetensors"])
def test_a_finished_run_without_its_last_checkpoint_is_not_overwritten(
    micro_spec: Path, tmp_path: Path, kept: str
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("spec.arch", "config.json", kept):  # the user deleted last.safetensors
        (run_dir / name).write_text("finished work")
    settings = TrainSettings(dataset=DATASET, out=str(run_dir), progress=False)
    with pytest.raises(UserError, match="already holds a run") as refused:
        plan_training(micro_spec, settings, {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8})
    assert kept in str(refused.value) and "another --out" in str(refused.value.hint)
    assert "--resume" not in str(refused.value.hint)  # nothing to resume from
    assert all((run_dir / name).read_text() == "finished work" for name in ("spec.arch", "config.json", kept))


def test_a_first_epoch_that_never_finished_leaves_a_folder_a_new_run_may_reuse(
    micro_spec: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "spec.arch").write_text(MICRO)
    (run_dir / "config.json").write_text("{}")
    settings = TrainSettings(dataset=DATASET, out=str(run_dir), progress=False)
    plan = plan_training(micro_spec, settings, {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8})
    assert plan.run_dir == run_dir


def test_resume_accepts_the_initial_checkpoint_the_run_started_from_and_refuses_another(
    micro_spec: Path, tmp_path: Path
) -> None:
    from archdsl.errors import UsageError
    from archdsl.run.session import run_training

    recipe = {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8}
    first = tmp_path / "first"
    run_training(plan_training(micro_spec, TrainSettings(dataset=DATASET, out=str(first), progress=False), recipe))
    start = str(first / "final.safetensors")
    run_dir = tmp_path / "run"
    started = {**recipe, "initial_checkpoint": start}
    run_training(plan_training(micro_spec, TrainSettings(dataset=DATASET, out=str(run_dir), progress=False), started))

    # The command that started the run, with --resume and more epochs: it goes on.
    resume = TrainSettings(dataset=DATASET, out=str(run_dir), resume=True, progress=False)
    plan = plan_training(micro_spec, resume, {**started, "epochs": 2})
    assert plan.finished == 1 and plan.config.initial_checkpoint == start
    with pytest.raises(UsageError, match="cannot be combined with --resume") as refused:
        plan_training(
            micro_spec, resume, {**recipe, "epochs": 2, "initial_checkpoint": str(first / "last.safetensors")}
        )
    assert f"started from {start}" in str(refused.value)
    with pytest.raises(UsageError, match="started from a fresh model"):
        plan_training(micro_spec, TrainSettings(dataset=DATASET, out=str(first), resume=True, progress=False), started)


@pytest.mark.parametrize(("make", "said"), [("folder", "a folder, not a file"), ("fifo", "a FIFO, not a regular file")])
def test_an_initial_checkpoint_that_is_no_file_says_what_it_is(micro_spec: Path, tmp_path: Path, make, said) -> None:
    import os

    from archdsl.errors import UsageError

    start = tmp_path / "start"
    start.mkdir() if make == "folder" else os.mkfifo(start)
    settings = TrainSettings(dataset=DATASET, out=str(tmp_path / "run"), progress=False)
    with pytest.raises(UsageError, match=f"--initial-checkpoint {start}: {said}"):
        plan_training(micro_spec, settings, {"recipe": "fast", "epochs": 1, "initial_checkpoint": str(start)})


def test_a_last_checkpoint_from_another_run_is_named_as_such(micro_spec: Path, tmp_path: Path) -> None:
    import shutil

    from archdsl.run.session import run_training

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    recipe = {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8}
    run_training(plan_training(micro_spec, TrainSettings(dataset=DATASET, out=str(ours), progress=False), recipe))
    other = {**recipe, "batch_size": 10}
    run_training(plan_training(micro_spec, TrainSettings(dataset=DATASET, out=str(theirs), progress=False), other))
    shutil.copy(theirs / "last.safetensors", ours / "last.safetensors")

    resumed = TrainSettings(dataset=DATASET, out=str(ours), progress=False, resume=True)
    with pytest.raises(UserError, match="does not belong to this run") as refused:
        run_training(plan_training(micro_spec, resumed, {**recipe, "epochs": 2}))
    assert "batch_size=10" in str(refused.value) and "config.json records batch_size=8" in str(refused.value)
