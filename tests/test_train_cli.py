"""`archdsl train` and `archdsl eval` on the command line: flags, errors, a run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _micro_arch import micro_arch

from archdsl.cli import main

# specs/tiny.arch takes seconds per step on a busy 2-core machine; this one is a few times smaller.
MICRO = micro_arch("c1(width=8) { conv }", "c2(width=16, stride=2) { conv msa(2, 4, dim_head=8) }")
DATASET = "synthetic:train=160,test=60"


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's own usage errors
        return int(stop.code)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--epochs", "-1"], "expected a value greater than 0"),
        (["--epochs", "0"], "expected a value greater than 0"),
        (["--recipe", "sgd"], "invalid choice"),
        (["--device", "tpu"], "unknown device"),
        (["--subset", "2"], "fraction"),
        (["--lr", "abc"], "expected a valid number"),
        (["--val-split", "0"], "--val-split 0: a count of validation images must be at least 1"),
        (["--val-split", "-0.2"], "a fraction must lie strictly between 0 and 1"),
        (["--val-split", "ten"], "--val-split 'ten' is not a number"),
    ],
)
def test_bad_flags_exit_2_with_a_message(micro_spec: Path, flags: list[str], message: str, capsys) -> None:
    assert exit_code(["train", str(micro_spec), "--dataset", "synthetic", *flags]) == 2
    assert message in capsys.readouterr().err


def test_missing_or_unknown_dataset_is_an_error(micro_spec: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert (
        exit_code(
            ["train", str(micro_spec), "--dataset", "cifar10", "--data-root", str(tmp_path / "none"), "--out", str(out)]
        )
        == 1
    )
    assert "cifar" in capsys.readouterr().err.lower()
    assert exit_code(["train", str(micro_spec), "--dataset", "imagenet", "--out", str(out)]) == 1
    assert "imagenet" in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_an_error(micro_spec: Path, tmp_path: Path, capsys) -> None:
    assert exit_code(["train", str(micro_spec), "--dataset", DATASET, "--out", str(tmp_path / "r"), "--resume"]) == 1
    assert "nothing to resume" in capsys.readouterr().err


@pytest.mark.parametrize("severity", ["0", "6", "x"])
def test_eval_severities_outside_1_to_5_are_usage_errors(tmp_path: Path, severity: str, capsys) -> None:
    argv = ["eval", str(tmp_path / "c.safetensors"), "--dataset", "synthetic-c", "--severities", f"3,{severity}"]
    assert exit_code(argv) == 2
    assert "expected a severity from 1 to 5" in capsys.readouterr().err


def test_eval_of_a_non_checkpoint_is_an_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 10)
    assert exit_code(["eval", str(bad), "--dataset", "synthetic"]) == 1
    assert "not a readable safetensors" in capsys.readouterr().err


@pytest.mark.slow
def test_train_then_eval_end_to_end(micro_spec: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    common = [
        "train",
        str(micro_spec),
        "--dataset",
        DATASET,
        "--recipe",
        "fast",
        "--batch-size",
        "32",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert exit_code([*common, "--epochs", "1", "--device", "cpu"]) == 0
    summary = capsys.readouterr().out
    assert "final test top-1" in summary and str(out) in summary
    assert (out / "final.safetensors").is_file() and (out / "metrics.csv").is_file()

    # Running again into the same directory needs --resume; resuming a finished run changes nothing.
    assert exit_code([*common, "--epochs", "1"]) == 1
    assert "--resume" in capsys.readouterr().err
    assert exit_code([*common[:2], "--dataset", DATASET, "--out", str(out), "--resume", "--no-progress"]) == 0
    assert "resuming" in capsys.readouterr().err
    assert exit_code([*common, "--lr", "0.5", "--resume"]) == 1
    err = capsys.readouterr().err
    assert "different settings: lr" in err and "training micro" not in err
    # A larger --epochs extends the finished run (and says so); a smaller one is refused.
    assert exit_code([*common, "--epochs", "2", "--resume"]) == 0
    assert "extending" in capsys.readouterr().err and len((out / "metrics.csv").read_text().splitlines()) == 3
    assert exit_code([*common, "--epochs", "1", "--resume"]) == 1
    err = capsys.readouterr().err
    assert "cannot shorten" in err and "resuming" not in err and "training micro" not in err  # before the header

    # eval defaults to the dataset the checkpoint was trained on.
    assert exit_code(["eval", str(out / "final.safetensors"), "--json", "--no-progress"]) == 0
    clean = json.loads(capsys.readouterr().out)
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert clean["images"] == 60 and clean["top1"] == pytest.approx(history[-1]["test_acc"])
    # The model as built scores what its fast inference copy scored.
    assert exit_code(["eval", str(out / "final.safetensors"), "--json", "--no-progress", "--no-optimize"]) == 0
    as_built = json.loads(capsys.readouterr().out)
    assert as_built["top1"] == clean["top1"] and as_built["nll"] == pytest.approx(clean["nll"], rel=1e-4)

    assert (
        exit_code(
            [
                "eval",
                str(out / "final.safetensors"),
                "--dataset",
                "synthetic-c:test=60",
                "--corruptions",
                "fog,contrast",
                "--severities",
                "1,5",
                "--no-progress",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "fog" in table and "contrast" in table and table.splitlines()[-1].startswith("mean")
    assert len(table.splitlines()) == 5  # title, header, two corruptions, mean


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lr", "inf"], "expected a finite number"),
        (["--lr", "nan"], "expected a finite number"),
        (["--resident", "--recipe", "deit"], "--resident cannot be used with the deit recipe"),
        (["--workers", "100000"], "more than 4 per CPU core"),
    ],
)
def test_more_bad_flags_exit_2_with_a_message(
    micro_spec: Path, tmp_path: Path, flags: list[str], message: str, capsys
) -> None:
    assert exit_code(["train", str(micro_spec), "--dataset", DATASET, "--out", str(tmp_path / "r"), *flags]) == 2
    assert message in capsys.readouterr().err


def test_an_out_that_cannot_be_a_run_directory_fails_before_training(micro_spec: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep")
    for out in (a_file, a_file / "run"):
        assert exit_code(["train", str(micro_spec), "--dataset", DATASET, "--out", str(out), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert "--out" in err and "is a file" in err and "Traceback" not in err
    assert a_file.read_text() == "keep"


def test_a_new_run_never_writes_into_a_folder_of_other_files(micro_spec: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("keep")
    assert exit_code(["train", str(micro_spec), "--dataset", DATASET, "--out", str(tmp_path), "--no-progress"]) == 1
    assert "is not empty (micro.arch, notes.txt) and holds no run" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["micro.arch", "notes.txt"]


def test_eval_of_a_folder_or_a_spec_says_what_to_give(micro_spec: Path, tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "final.safetensors").write_bytes(b"")
    assert exit_code(["eval", str(run_dir), "--dataset", "synthetic"]) == 1
    assert f"give one of its checkpoints, e.g. {run_dir / 'final.safetensors'}" in capsys.readouterr().err
    assert exit_code(["eval", str(micro_spec), "--dataset", "synthetic"]) == 1
    assert "a spec, not a checkpoint" in capsys.readouterr().err


def test_ctrl_c_keeps_the_finished_epochs_and_resume_finishes_the_run(
    micro_spec: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    import archdsl.run.train as training

    real_epoch, calls = training.run_epoch, []

    def ctrl_c_in_the_second_epoch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_epoch(*args, **kwargs)

    out = tmp_path / "run"
    argv = [
        "train",
        str(micro_spec),
        "--dataset",
        DATASET,
        "--recipe",
        "fast",
        "--batch-size",
        "32",
        "--epochs",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    monkeypatch.setattr(training, "run_epoch", ctrl_c_in_the_second_epoch)
    assert exit_code(argv) == 130
    err = capsys.readouterr().err
    assert f"the last finished epoch is saved in {out / 'last.safetensors'}" in err and "--resume" in err
    monkeypatch.setattr(training, "run_epoch", real_epoch)
    assert exit_code(argv[:-1] + ["--no-progress"]) == 1  # without --resume: refused, the run is kept
    assert "already holds a run" in capsys.readouterr().err
    assert (
        exit_code(["train", str(micro_spec), "--dataset", DATASET, "--out", str(out), "--resume", "--no-progress"]) == 0
    )
    assert f"resuming {out} after epoch 1 of 2" in capsys.readouterr().err
    assert [row["epoch"] for row in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())] == [1, 2]


def test_a_diverged_run_says_which_epoch_it_kept(micro_spec: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    import archdsl.run.train as training
    from archdsl.run.divergence import TrainingDiverged

    real_epoch, calls = training.run_epoch, []

    def diverge_in_the_second_epoch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise TrainingDiverged("the training loss", float("nan"), 1, 3)
        return real_epoch(*args, **kwargs)

    monkeypatch.setattr(training, "run_epoch", diverge_in_the_second_epoch)
    out = tmp_path / "run"
    argv = ["train", str(micro_spec), "--dataset", DATASET, "--recipe", "fast", "--batch-size", "32", "--epochs", "2"]
    assert exit_code([*argv, "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "training diverged: the training loss is nan in epoch 2 (step 3)" in err and "Traceback" not in err
    assert f"the last good epoch (1) is kept in {out / 'last.safetensors'}" in err


def test_classes_overrides_the_spec_and_a_mismatch_names_the_flag(micro_spec: Path, tmp_path: Path, capsys) -> None:
    # micro has 10 classes; the 5-class dataset trains with --classes 5 and is refused without it.
    five = "synthetic:classes=5,train=40,test=20"
    common = ["--recipe", "fast", "--epochs", "1", "--batch-size", "20", "--no-progress"]
    assert exit_code(["train", str(micro_spec), "--dataset", five, "--out", str(tmp_path / "no"), *common]) == 1
    err = capsys.readouterr().err
    assert "has 10 classes" in err and "has 5 classes" in err and "--classes 5" in err
    assert not (tmp_path / "no").exists()  # refused before any run folder is left behind
    assert (
        exit_code(
            ["train", str(micro_spec), "--dataset", five, "--classes", "3", "--out", str(tmp_path / "x"), *common]
        )
        == 2
    )
    assert "--classes 3, but" in capsys.readouterr().err
    out = tmp_path / "five"
    assert exit_code(["train", str(micro_spec), "--dataset", five, "--classes", "5", "--out", str(out), *common]) == 0
    from archdsl.lang.spec import load_spec

    assert load_spec(str(out / "spec.arch")).classes == 5


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--batch-size", "200"], "fewer than one batch of 200"),
        (["--batch-size", "40", "--subset", "0.5"], "fewer than one batch of 40"),
        (["--device", "cuda:7"], "torch sees no CUDA GPU"),
    ],
)
def test_settings_the_data_or_machine_cannot_run_are_refused_before_the_header(
    micro_spec: Path, tmp_path: Path, capsys, flags: list[str], message: str
) -> None:
    out = tmp_path / "new" / "run"
    argv = ["train", str(micro_spec), "--dataset", "synthetic:train=40,test=20", "--recipe", "fast", "--epochs", "1"]
    assert exit_code([*argv, *flags, "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert message in err and "training micro" not in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()


def test_resume_refuses_a_run_file_replaced_by_a_folder_before_training(
    micro_spec: Path, tmp_path: Path, capsys
) -> None:
    # Before: epoch 2 was trained and saved in last.safetensors, then writing metrics.csv failed
    # with a message naming a temporary file, leaving `last` at epoch 2 and `final` at epoch 1.
    out = tmp_path / "run"
    common = ["train", str(micro_spec), "--dataset", DATASET, "--recipe", "weak", "--batch-size", "32"]
    common += ["--out", str(out), "--device", "cpu", "--no-progress"]
    assert exit_code([*common, "--epochs", "1"]) == 0
    (out / "metrics.csv").unlink()
    (out / "metrics.csv").mkdir()
    before = {name: (out / name).read_bytes() for name in ("last.safetensors", "final.safetensors", "config.json")}
    capsys.readouterr()
    assert exit_code([*common, "--epochs", "2", "--resume"]) == 1
    err = capsys.readouterr().err
    assert f"cannot write the run's metrics.csv: {out / 'metrics.csv'} is a folder" in err
    assert ".tmp" not in err and "extending" not in err  # refused before the header
    assert {name: (out / name).read_bytes() for name in before} == before  # nothing trained, nothing written


def test_the_resume_command_after_ctrl_c_names_the_data_and_settings_file_given(
    micro_spec: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    import shlex

    import archdsl.run

    def ctrl_c_after_the_first_epoch(plan, **kwargs):
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        (plan.run_dir / "last.safetensors").write_bytes(b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(archdsl.run, "run_training", ctrl_c_after_the_first_epoch)
    settings = tmp_path / "my run.yaml"
    settings.write_text(f"dataset: {DATASET}\nrecipe: fast\nbatch_size: 32\n")
    out, data = tmp_path / "run", tmp_path / "my data"
    argv = ["train", str(micro_spec), "--config", str(settings), "--data-root", str(data), "--classes", "10"]
    assert exit_code([*argv, "--out", str(out), "--no-progress"]) == 130
    line = capsys.readouterr().err.split("continue with: ", 1)[1].splitlines()[0]
    assert shlex.split(line) == [
        "archdsl", *argv[:4], "--dataset", DATASET, *argv[4:], "--out", str(out), "--resume"
    ]  # fmt: skip


def test_val_split_reports_validation_every_epoch_and_keeps_the_test_set(micro_spec: Path, tmp_path: Path, capsys):
    out = tmp_path / "run"
    argv = ["train", str(micro_spec), "--dataset", DATASET, "--recipe", "fast", "--epochs", "2", "--batch-size", "32"]
    assert exit_code([*argv, "--val-split", "0.25", "--out", str(out), "--no-progress", "--device", "cpu"]) == 0
    summary = capsys.readouterr().out
    assert "final val  top-1" in summary and "final test top-1" in summary
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(0 <= r["val_acc"] <= 1 and r["val_loss"] > 0 for r in rows)
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"val_loss", "val_acc", "test_loss", "test_acc"} <= set(header)
    assert json.loads((out / "config.json").read_text())["val_split"] == 0.25


def _history(figures: list[tuple[float, float | None]]):
    """Epochs whose (test top-1, validation top-1) are `figures`."""
    from archdsl.run import EpochMetrics

    return [
        EpochMetrics(epoch, 2.0, 0.5, 2.0, test, 0.1, 100.0, 1.0, val_loss=None if val is None else 2.0, val_acc=val)
        for epoch, (test, val) in enumerate(figures, start=1)
    ]


@pytest.mark.parametrize(
    "flags, figures, shown",
    [  # the test set's best epoch (the first) is never the one reported
        (
            ["--val-split", "0.25"],
            [(0.9, 0.2), (0.1, 0.8), (0.5, 0.4)],
            "best  val  top-1 80.00% (epoch 2; its test top-1 10.00%)",
        ),
        ([], [(0.9, None), (0.1, None), (0.5, None)], None),
    ],
)
def test_train_picks_an_epoch_on_validation_images_never_on_the_test_set(
    micro_spec: Path, tmp_path: Path, flags, figures, shown, capsys, monkeypatch
) -> None:
    import archdsl.run
    from archdsl.run import TrainResult

    def trained(plan, **_):
        return TrainResult(model=None, arch=plan.arch, config=plan.config, history=_history(figures))  # type: ignore[arg-type]

    monkeypatch.setattr(archdsl.run, "run_training", trained)
    argv = ["train", str(micro_spec), "--dataset", DATASET, "--recipe", "fast", "--batch-size", "32", "--epochs", "3"]
    assert exit_code([*argv, *flags, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    summary = capsys.readouterr().out.splitlines()
    assert "  final test top-1 50.00%  NLL 2.0000" in summary  # the last epoch's
    assert [line.strip() for line in summary if line.lstrip().startswith("best")] == ([shown] if shown else [])
    assert not [line for line in summary if "best" in line and "test top-1 90" in line]


@pytest.mark.parametrize("size, message", [("160", "leaves no training images"), ("3", "empty in the validation")])
def test_a_val_split_that_does_not_fit_the_dataset_is_one_line(micro_spec: Path, tmp_path: Path, size, message, capsys):
    out = tmp_path / "run"
    argv = ["train", str(micro_spec), "--dataset", DATASET, "--epochs", "1", "--val-split", size, "--out", str(out)]
    assert exit_code(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (out / "last.safetensors").exists()
