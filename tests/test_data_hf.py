"""`hf:NAME`: Hugging Face datasets written offline with `Dataset.from_dict(...).save_to_disk(...)`."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from archdsl.cli import main
from archdsl.data import load_corrupted, load_split
from archdsl.errors import UserError

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.extras


def _images(count: int, seed: int, grey: bool = False) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    made = [Image.fromarray(rng.integers(0, 256, (20 + k, 24, 3), dtype=np.uint8)) for k in range(count)]
    return [image.convert("L") for image in made] if grey else made


def write_hf(path, labels=None, label_feature=None, test_split="validation", **columns):
    features = datasets.Features(
        {"img": datasets.Image(), "fine_label": label_feature or datasets.ClassLabel(names=["ant", "bee", "cat"])}
    )
    splits = {}
    for split, count, seed in (("train", 6, 0), (test_split, 3, 1)):
        rows = {"img": _images(count, seed), "fine_label": (labels or [0, 1, 2, 0, 1, 2])[:count]}
        splits[split] = datasets.Dataset.from_dict(rows, features=features)
    datasets.DatasetDict(splits).save_to_disk(str(path))
    return path


def test_loads_train_and_validation_with_class_names(tmp_path):
    path = write_hf(tmp_path / "small")
    train = load_split(f"hf:{path},size=16", "train")
    test = load_split(f"hf:{path},size=16", "test")
    assert train.images.shape == (6, 16, 16, 3) and test.images.shape == (3, 16, 16, 3)
    assert train.class_names == ("ant", "bee", "cat") and test.labels.tolist() == [0, 1, 2]
    assert test.mean == train.mean


def test_named_columns_integer_labels_and_a_test_split(tmp_path):
    path = write_hf(tmp_path / "ints", label_feature=datasets.Value("int64"), test_split="test")
    train = load_split(f"hf:{path},image=img,label=fine_label", "train")
    assert train.num_classes == 3 and train.class_names == ("0", "1", "2")
    assert len(load_split(f"hf:{path},label=fine_label", "test")) == 3
    with pytest.raises(UserError, match="no label column found"):  # neither a ClassLabel nor a column 'label'
        load_split(f"hf:{path}", "train")


def test_a_label_column_that_is_not_integer_classes_is_one_line(tmp_path, capsys):
    path = write_hf(tmp_path / "f", labels=[0.5] * 6, label_feature=datasets.Value("float32"))
    capsys.readouterr()  # datasets' own progress while saving
    assert main(["data", "info", "--dataset", f"hf:{path},label=fine_label"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and len(err.splitlines()) == 1, err
    assert "label column 'fine_label'" in err and "not integer classes" in err


def test_unknown_column_and_missing_dataset_are_user_errors(tmp_path):
    path = write_hf(tmp_path / "small")
    with pytest.raises(UserError, match="no column 'picture'"):
        load_split(f"hf:{path},image=picture", "train")
    with pytest.raises(UserError, match="cannot read"):
        load_split("hf:archdsl-no-such-dataset-here", "train")


def test_info_and_generated_corrupted_sets(tmp_path, capsys):
    path = write_hf(tmp_path / "small")
    assert main(["data", "info", "--dataset", f"hf:{path},size=16"]) == 0
    assert "splits:   train 6, test 3" in capsys.readouterr().out
    [noisy] = load_corrupted(f"hf:{path},size=16", corruptions=["gaussian_noise"], severities=[3])
    assert noisy.images.images.shape == (3, 16, 16, 3)


def test_import_archdsl_does_not_import_datasets():
    code = "import sys, archdsl, archdsl.data; print('datasets' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
