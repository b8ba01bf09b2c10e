"""`--dry-run` checks what the search checks before it plans (issue 57): data the search refuses (too few images, a
corrupted set as the training set, a folder whose later images are damaged, one class) ends the dry run as it ends
the search, with the same one-line message and a non-zero exit, before any plan; data that is not here yet is
planned (a preview of the study) but never timed: no model is built for data the machine has not got."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_data_folder import CLASSES, write_tree

from archdsl.cli import main
from archdsl.search.fidelity import measures


def _said(capsys, argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    printed = capsys.readouterr()
    return status, printed.out, printed.err


def _both_refuse_alike(capsys, tmp_path: Path, *argv: str) -> str:
    """The search's refusal and the dry run's: the same message, exit 1, no plan and no traceback."""
    common = ["search", *argv, "--device", "cpu", "--no-progress", "--out", str(tmp_path / "runs")]
    status, out, search_err = _said(capsys, common)
    assert status == 1 and search_err.startswith("archdsl: error: "), search_err
    status, out, dry_err = _said(capsys, [*common, "--dry-run"])
    assert (status, out) == (1, "") and dry_err == search_err and "Traceback" not in dry_err
    return dry_err


def test_too_few_images_are_refused_by_the_dry_run_as_by_the_search(tmp_path, capsys):
    root = write_tree(tmp_path / "small", {"train": 2, "test": 1})
    err = _both_refuse_alike(capsys, tmp_path, "--dataset", f"folder:{root},size=16")
    assert "fewer than one batch" in err


def test_a_corrupted_set_as_the_training_set_is_refused_by_the_dry_run(tmp_path, capsys):
    err = _both_refuse_alike(capsys, tmp_path, "--dataset", "synthetic-c")
    assert "has no train split" in err


def test_a_folder_whose_later_images_are_damaged_is_refused_by_the_dry_run(tmp_path, capsys):
    root = write_tree(tmp_path / "damaged", {"train": 12, "test": 2})
    last = sorted((root / "train" / CLASSES[-1]).glob("*.png"))[-1]
    last.write_bytes(b"not a png")  # after the images `describe` reads
    err = _both_refuse_alike(capsys, tmp_path, "--dataset", f"folder:{root},size=16", "--batch-size", "8")
    assert f"{last}: not an image" in err


@pytest.mark.parametrize("per_class", [40, 1])
def test_one_class_or_one_image_a_class_is_refused_in_one_line(tmp_path, capsys, per_class):
    root = write_tree(tmp_path / "few", {"train": per_class, "test": 2})
    if per_class > 1:  # one class: every design would score 100 %
        for name in CLASSES[1:]:
            shutil.rmtree(root / "train" / name)
            shutil.rmtree(root / "val" / name)
    err = _both_refuse_alike(capsys, tmp_path, "--dataset", f"folder:{root},size=16", "--batch-size", "8")
    assert len(err.strip().splitlines()) <= 2
    assert ("holds one class" if per_class > 1 else "leaves no training images") in err, err


# (not Fashion-MNIST: where CI installs the Debian package, it answers for any --data-root)
@pytest.mark.parametrize("dataset", ["cifar100", "imagenet"])
def test_data_not_here_is_planned_but_never_timed(tmp_path, capsys, monkeypatch, dataset):
    def no_model(*args, **kwargs):
        raise AssertionError("a training step was timed for data that is not here")

    monkeypatch.setattr(measures, "step_seconds_per_image", no_model)
    status, out, err = _said(capsys, ["search", "--dataset", dataset, "--data-root", str(tmp_path), "--dry-run"])
    assert status == 0 and out.startswith("base ")
    assert err.startswith("time: not estimated: ") and "the search refuses it until it is there" in err, err


def test_imagenet_to_download_is_refused_as_the_search_refuses_it(tmp_path, capsys):
    argv = ["search", "--dataset", "imagenet", "--data-root", str(tmp_path), "--download", "--dry-run"]
    status, out, err = _said(capsys, argv)
    assert (status, out) == (1, "") and "imagenet cannot be downloaded by archdsl" in err
