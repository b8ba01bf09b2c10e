"""`archdsl train` and `archdsl eval` on the command line: flags, errors, a run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archdsl.cli import main

# specs/tiny.arch takes seconds per step on a busy 2-core machine; this one is a few times smaller.
MICRO = """
arch micro {
    input   3x32x32
    classes 10
    stem    conv3x3(8)
    conv  = basic
    stage c1(width=8)            { conv }
    stage c2(width=16, stride=2) { conv msa(2, 4, dim_head=8) }
}
"""
DATASET = "synthetic:train=160,test=60"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "micro.arch"
    path.write_text(MICRO)
    return path


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's own usage errors
        return int(stop.code)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--epochs", "-1"], "positive integer"),
        (["--epochs", "0"], "positive integer"),
        (["--recipe", "sgd"], "invalid choice"),
        (["--device", "tpu"], "unknown device"),
        (["--subset", "2"], "fraction"),
        (["--lr", "abc"], "positive number"),
    ],
)
def test_bad_flags_exit_2_with_a_message(spec: Path, flags: list[str], message: str, capsys) -> None:
    assert exit_code(["train", str(spec), "--dataset", "synthetic", *flags]) == 2
    assert message in capsys.readouterr().err


def test_missing_or_unknown_dataset_is_an_error(spec: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert exit_code(["train", str(spec), "--dataset", "cifar10", "--data-root", str(tmp_path / "none"),
                      "--out", str(out)]) == 1
    assert "cifar" in capsys.readouterr().err.lower()
    assert exit_code(["train", str(spec), "--dataset", "imagenet", "--out", str(out)]) == 1
    assert "imagenet" in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_an_error(spec: Path, tmp_path: Path, capsys) -> None:
    assert exit_code(["train", str(spec), "--dataset", DATASET, "--out", str(tmp_path / "r"), "--resume"]) == 1
    assert "nothing to resume" in capsys.readouterr().err


def test_eval_of_a_non_checkpoint_is_an_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 10)
    assert exit_code(["eval", str(bad), "--dataset", "synthetic"]) == 1
    assert "not a readable safetensors" in capsys.readouterr().err


@pytest.mark.slow
def test_train_then_eval_end_to_end(spec: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    common = ["train", str(spec), "--dataset", DATASET, "--recipe", "weak", "--batch-size", "32",
              "--out", str(out), "--no-progress"]
    assert exit_code([*common, "--epochs", "1", "--device", "cpu"]) == 0
    summary = capsys.readouterr().out
    assert "final test top-1" in summary and str(out) in summary
    assert (out / "final.safetensors").is_file() and (out / "metrics.csv").is_file()

    # Running again into the same directory needs --resume; resuming a finished run changes nothing.
    assert exit_code([*common, "--epochs", "1"]) == 1
    assert "--resume" in capsys.readouterr().err
    assert exit_code([*common[:2], "--dataset", DATASET, "--out", str(out), "--resume", "--no-progress"]) == 0
    assert exit_code([*common, "--epochs", "3", "--resume"]) == 1
    assert "different settings: epochs" in capsys.readouterr().err

    # eval defaults to the dataset the checkpoint was trained on.
    assert exit_code(["eval", str(out / "final.safetensors"), "--json", "--no-progress"]) == 0
    clean = json.loads(capsys.readouterr().out)
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert clean["images"] == 60 and clean["top1"] == pytest.approx(history[-1]["test_acc"])

    assert exit_code(["eval", str(out / "final.safetensors"), "--dataset", "synthetic-c:test=60",
                      "--corruptions", "fog", "contrast", "--severities", "1", "5", "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "fog" in table and "contrast" in table and table.splitlines()[-1].startswith("mean")
    assert len(table.splitlines()) == 5  # title, header, two corruptions, mean
