"""Beside each best design, the `archdsl train` command that retrains it exactly as its trial was trained: the
same data and validation images, recipe and settings, budget and seed. Run as printed, it gives the trial's own
validation figure (CPU training is deterministic)."""

from __future__ import annotations

import csv
import shlex
from pathlib import Path

import _search_support as support
import pytest
import torch

from archdsl.cli import main
from archdsl.search import summarize_study
from archdsl.search.fidelity.budget import Budget
from archdsl.search.report._retrain import retrain_command
from archdsl.search.studies.record import Protocol, seed_values

PROTOCOL = Protocol(
    dataset="odd-one-out", data_root="/data", seed=4, seeds=3, max_seeds=3, training_seeds=[4, 5, 6],
    budgets=[Budget(12, 1.0), Budget(24, 0.5)], train_images=1500, held_out=500, validation_images=500,
    test_images=1000, recipe="fast", train_settings={"batch_size": 64, "crop_padding": 0, "optimizer": "adamw"},
    device="cpu", optimize=False,
)  # fmt: skip


def test_the_command_spells_the_data_the_recipe_the_budget_and_the_seed():
    words = shlex.split(retrain_command(PROTOCOL, 1, "runs/s/best/1-trial3-ab.arch") or "")
    assert words[:3] == ["archdsl", "train", "runs/s/best/1-trial3-ab.arch"]
    flags = dict(zip(words[3::2], words[4::2], strict=False))
    assert flags["--dataset"] == "odd-one-out" and flags["--data-root"] == "/data"
    assert (flags["--recipe"], flags["--batch-size"], flags["--crop-padding"], flags["--opt"]) == (
        "fast",
        "64",
        "0",
        "adamw",
    )
    assert (flags["--epochs"], flags["--subset"], flags["--val-split"], flags["--seed"]) == ("24", "0.5", "500", "4")
    assert flags["--device"] == "cpu" and words[-1] == "--no-optimize"


def test_on_a_cpu_the_command_sets_the_threads_its_trial_trained_with():
    words = shlex.split(retrain_command(PROTOCOL.model_copy(update={"threads": 1}), 0, "x.arch") or "")
    assert words[:3] == ["OMP_NUM_THREADS=1", "archdsl", "train"]  # CPU figures depend on the thread count


def test_a_replayed_study_has_no_command():
    assert retrain_command(PROTOCOL.model_copy(update={"table": "fashion-mnist-k"}), 0, "x.arch") is None


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_the_printed_command_gives_the_trials_own_validation_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["--seeds", "2", "--budget-steps", "1", "--n-trials", "3", "--val-split", "40", "--seed", "7"]
    assert main(support.search_args(tmp_path, "again", *args)) == 0
    [line] = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("retrain: ")]
    command = line[len("retrain: ") :]
    study = support.load(tmp_path, "again")
    [best] = summarize_study(study).best
    assert best.rung == 1 and " --epochs 2 " in command and " --seed 7 " in command  # the answer's budget
    assert f"`{command}`" in (tmp_path / "runs" / "again" / "report" / "report.md").read_text()
    words = shlex.split(command)
    threads = words.pop(0)
    assert threads == f"OMP_NUM_THREADS={study.user_attrs['protocol']['threads']}"  # the CPU's, recorded
    torch.set_num_threads(int(threads.partition("=")[2]))  # as the variable sets it in a new process
    assert words[:2] == ["archdsl", "train"]
    assert main(words[1:]) == 0  # as printed, from the folder the search ran in
    [run_dir] = [line.split()[2] for line in capsys.readouterr().out.splitlines() if "run directory" in line]
    with (Path(run_dir) / "metrics.csv").open() as file:
        last = list(csv.DictReader(file))[-1]
    assert float(last["val_acc"]) == seed_values(study.trials[best.number])[0]  # exactly: seed index 0's


def test_the_printed_command_names_absolute_paths_so_it_runs_from_any_folder(tmp_path, monkeypatch, capsys):
    """With a relative --out and --data-root, the command named the spec (and the data) relative to the folder the
    search ran in: from any other folder `archdsl train` found no spec file (issue 57)."""
    monkeypatch.chdir(tmp_path)
    extra = ("--n-trials", "1", "--out", "runs", "--data-root", "data")
    assert main(support.search_args(tmp_path, "here", *extra)) == 0
    out = capsys.readouterr().out
    [line] = [line.strip() for line in out.splitlines() if line.strip().startswith("retrain: ")]
    words = shlex.split(line[len("retrain: ") :])
    spec = words[words.index("train") + 1]
    assert Path(spec).is_absolute() and Path(spec).is_file(), spec
    assert words[words.index("--data-root") + 1] == str(tmp_path / "data")
    report = (tmp_path / "runs" / "here" / "report" / "report.md").read_text(encoding="utf-8")
    assert f"train {shlex.quote(spec)} " in report
