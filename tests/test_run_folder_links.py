"""A run or study folder never writes outside itself: a symbolic link planted among its files (a
folder on shared scratch space, a file replaced by a link to another of the user's files) is
refused, naming the link, and its target is left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _micro_arch import micro_arch

from archdsl.errors import UserError
from archdsl.files import atomic_path, held_lock, write_text
from archdsl.run.session import TrainSettings, plan_training, run_training

MICRO = micro_arch("c1(width=8) { conv }")
DATASET = "synthetic:train=40,test=20"
RECIPE = {"recipe": "fast", "epochs": 1, "device": "cpu", "batch_size": 8}


def _train(spec: Path, run_dir: Path, *, epochs: int, resume: bool = False) -> None:
    settings = TrainSettings(dataset=DATASET, out=str(run_dir), progress=False, resume=resume)
    run_training(plan_training(spec, settings, {**RECIPE, "epochs": epochs}))


@pytest.mark.parametrize("name", ["config.json", "metrics.csv", "metrics.jsonl", "spec.arch", "last.safetensors"])
def test_resume_refuses_a_run_file_that_is_a_link_and_leaves_its_target_alone(
    micro_spec: Path, tmp_path: Path, name: str
) -> None:
    run_dir = tmp_path / "run"
    _train(micro_spec, run_dir, epochs=1)
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("the user's own file\n")
    if name == "last.safetensors":  # a link to a copy of the real checkpoint: resume could read it
        victim.write_bytes((run_dir / name).read_bytes())
    before = victim.read_bytes()
    (run_dir / name).unlink()
    (run_dir / name).symlink_to(victim)

    with pytest.raises(UserError, match="symbolic link") as refused:
        _train(micro_spec, run_dir, epochs=2, resume=True)
    assert str(run_dir / name) in str(refused.value)
    assert victim.read_bytes() == before
    assert (run_dir / name).is_symlink()  # nothing replaced, not even the link


def test_a_new_run_refuses_a_run_folder_whose_subfolder_links_outside(micro_spec: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "tensorboard").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError, match="symbolic link"):
        _train(micro_spec, run_dir, epochs=1)
    assert list(outside.iterdir()) == []


def test_writes_confined_to_a_folder_refuse_links_at_every_level(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    (folder / "report").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "trials.csv"
    victim.write_text("keep me")

    (folder / "report" / "trials.csv").symlink_to(victim)
    with pytest.raises(UserError, match=r"report/trials\.csv"):
        write_text(folder / "report" / "trials.csv", "x", within=folder)
    (folder / "best").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError, match="best"), atomic_path(folder / "best" / "trials.csv", within=folder):
        pass
    with pytest.raises(UserError, match=r"\.report\.lock"):
        (folder / ".report.lock").symlink_to(victim)
        with held_lock(folder / ".report.lock", within=folder):
            pass
    assert victim.read_text() == "keep me"
    assert sorted(os.listdir(outside)) == ["trials.csv"]


def test_the_folder_itself_may_be_a_link(tmp_path: Path) -> None:
    # --out pointing at a link to scratch space is the user's choice: the folder's own files are fine.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    folder = tmp_path / "runs"
    folder.symlink_to(scratch, target_is_directory=True)
    write_text(folder / "report.md", "ok", within=folder)
    assert (scratch / "report.md").read_text() == "ok"


def test_a_study_report_refuses_a_linked_report_file(tmp_path: Path) -> None:
    import optuna

    from archdsl.search.report.write import write_report

    study = optuna.create_study(study_name="s", directions=["maximize"])
    study_dir = tmp_path / "s"
    (study_dir / "report").mkdir(parents=True)
    victim = tmp_path / "elsewhere.md"
    victim.write_text("mine")
    (study_dir / "report" / "report.md").symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        write_report(study, study_dir)
    assert victim.read_text() == "mine"
