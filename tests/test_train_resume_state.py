"""`train --resume` checks the training state it goes on from: a checkpoint is a file anyone can
edit, so a damaged or edited state (the epoch, the history, the saved config, the start loss, the
optimizer's tensors) is one clear error naming the file, never a traceback, and never a run that
"trains epoch -4" or exits 0 having trained nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _micro_arch import micro_arch
from safetensors import safe_open
from safetensors.torch import save_file

from archdsl.cli import main

MICRO = micro_arch("c1(width=8) { conv msa(2, 4, dim_head=4) }")
DATASET = "synthetic:train=40,test=20"
STATE = "archdsl.train_state"


def _argv(spec: Path, out: Path) -> list[str]:
    flags = ["--recipe", "weak", "--batch-size", "20", "--epochs", "2", "--no-progress"]
    return ["train", str(spec), "--dataset", DATASET, "--out", str(out), *flags]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """(spec, run directory) of a finished two-epoch run."""
    import torch

    folder = tmp_path_factory.mktemp("resume")
    spec = folder / "micro.arch"
    spec.write_text(MICRO)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(_argv(spec, folder / "run")) == 0
    finally:
        torch.set_num_threads(threads)
    return spec, folder / "run"


def _edited(run: Path, target: Path, edit: Callable[[dict[str, Any], dict[str, Any]], None]) -> Path:
    """A copy of `run` whose last checkpoint's training state (JSON info, tensors) `edit` changed."""
    shutil.copytree(run, target)
    path = target / "last.safetensors"
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (not a dict)
    info = json.loads(metadata[STATE])
    edit(info, tensors)
    metadata[STATE] = json.dumps(info)
    save_file(tensors, str(path), metadata=metadata)
    return target


def _set(key: str, value: Any) -> Callable[[dict, dict], None]:
    def edit(info: dict, tensors: dict) -> None:
        info[key] = value

    return edit


def _planned(epochs: int) -> Callable[[dict, dict], None]:
    def edit(info: dict, tensors: dict) -> None:
        info["config"]["epochs"] = epochs

    return edit


def _without_history(info: dict, tensors: dict) -> None:
    del info["history"]


def _without_optimizer_tensors(info: dict, tensors: dict) -> None:
    for key in [k for k in tensors if k.startswith("train_state/optimizer/")]:
        del tensors[key]


def _one_parameter_without_momentum(info: dict, tensors: dict) -> None:
    """The tensor and its reference gone from one parameter's state: the others keep theirs."""
    first_entry = info["state_dicts"]["optimizer"]["state"]["$dict"][0][1]  # SGD's: {"momentum_buffer": tensor}
    del tensors["train_state/" + first_entry.pop("momentum_buffer")["$tensor"]]


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize(
    "edit, problem",
    [
        (_set("epoch", "abc"), "epoch: Input should be a valid integer"),
        (_set("epoch", -5), "epoch: Input should be greater than or equal to 1"),
        (_set("epoch", 1e9), "epoch: Input should be a valid integer"),
        (_set("epoch", 10**9), "epoch 1000000000 is past the 2 epoch(s) the run was planned for"),
        (_set("epoch", 1), "the history does not list epochs 1 to 1"),
        (_without_history, "history: Field required"),
        (_planned(-3), "config.epochs: Input should be greater than 0"),
        (_set("start_loss", "big"), "start_loss: Input should be a valid number"),
        (_set("start_loss", float("nan")), "start_loss: Input should be a finite number"),
        (_set("data", {"train": {"name": "x"}}), "the data record lacks the training or the test set"),
        (_without_optimizer_tensors, "the optimizer's state is incomplete"),
        (_one_parameter_without_momentum, "the optimizer's state is incomplete"),
    ],
)
def test_a_damaged_training_state_is_refused_naming_the_file(finished, tmp_path, capsys, edit, problem):
    spec, run = finished
    copy = _edited(run, tmp_path / "run", edit)
    before = (copy / "metrics.csv").read_text()
    assert main([*_argv(spec, copy), "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"archdsl: error: {copy / 'last.safetensors'}: the training state is damaged"), err
    assert problem in err.splitlines()[0], err
    assert "Traceback" not in err and "resuming" not in err  # refused before anything is printed or trained
    assert (copy / "metrics.csv").read_text() == before  # the finished work is untouched


@pytest.mark.usefixtures("one_thread")
def test_an_intact_finished_run_resumes_to_the_same_end(finished, tmp_path, capsys):
    spec, run = finished
    copy = _edited(run, tmp_path / "run", lambda info, tensors: None)
    assert main([*_argv(spec, copy), "--resume"]) == 0
    assert "resuming" in capsys.readouterr().err
