"""CIFAR-10/100 through torchvision on tiny files written in the official python format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from archdsl.data import describe, load_split
from archdsl.errors import UserError


def _batch(path: Path, count: int, classes: int, label_key: str, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (count, 3072), dtype=np.uint8)  # rows: 1024 R, 1024 G, 1024 B
    labels = [int(v) for v in rng.integers(0, classes, count)]
    with open(path, "wb") as stream:
        pickle.dump({"batch_label": path.name, label_key: labels, "data": data}, stream)
    return data, labels


def write_cifar10(root: Path, per_batch: int = 6) -> dict[str, tuple[np.ndarray, list[int]]]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = {}
    for index, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        written[name] = _batch(folder / name, per_batch, 10, "labels", index)
    with open(folder / "batches.meta", "wb") as stream:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)], "num_vis": 3072}, stream)
    return written


def write_cifar100(root: Path, count: int = 20) -> dict[str, tuple[np.ndarray, list[int]]]:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    written = {name: _batch(folder / name, count, 100, "fine_labels", i) for i, name in enumerate(["train", "test"])}
    with open(folder / "meta", "wb") as stream:
        pickle.dump({"fine_label_names": [f"c{i}" for i in range(100)], "coarse_label_names": []}, stream)
    return written


def test_cifar10_loads_all_train_batches_in_hwc(tmp_path):
    written = write_cifar10(tmp_path)
    train = load_split("cifar10", "train", root=tmp_path)
    test = load_split("cifar10", "test", root=tmp_path)
    assert train.images.shape == (30, 32, 32, 3) and train.images.dtype == np.uint8
    assert train.labels.dtype == np.int64 and train.num_classes == 10
    data, labels = written["data_batch_1"]
    # first image, red plane, is the first 1024 bytes of the row
    assert np.array_equal(train.images[0, :, :, 0], data[0, :1024].reshape(32, 32))
    assert train.labels[:6].tolist() == labels
    assert test.labels.tolist() == written["test_batch"][1]
    assert train.class_names[3] == "class3"
    assert train.mean == pytest.approx((0.4914, 0.4822, 0.4465))


def test_cifar100_uses_fine_labels_and_meta(tmp_path):
    written = write_cifar100(tmp_path)
    test = load_split("cifar100", "test", root=tmp_path)
    assert test.num_classes == 100 and len(test.class_names) == 100
    assert test.labels.tolist() == written["test"][1]


def test_root_from_environment(tmp_path, monkeypatch):
    write_cifar100(tmp_path)
    monkeypatch.setenv("ARCHDSL_DATA", str(tmp_path))
    assert len(load_split("cifar100", "train")) == 20
    assert describe("cifar100").available


def test_missing_files_say_what_to_put_where(tmp_path):
    with pytest.raises(UserError) as caught:
        load_split("cifar100", "train", root=tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "cifar-100-python" / "train") in message
    assert "--download" in message and "cifar-100-python.tar.gz" in message
    assert not describe("cifar100", root=tmp_path).available


def test_one_missing_file_is_named(tmp_path):
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(UserError, match="missing .*data_batch_3"):
        load_split("cifar10", "test", root=tmp_path)


def test_truncated_file_is_a_user_error(tmp_path):
    write_cifar100(tmp_path)
    path = tmp_path / "cifar-100-python" / "train"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(UserError, match="truncated"):
        load_split("cifar100", "train", root=tmp_path)


def test_garbage_file_is_a_user_error(tmp_path):
    write_cifar100(tmp_path)
    (tmp_path / "cifar-100-python" / "test").write_bytes(b"not a pickle at all")
    with pytest.raises(UserError, match="cifar-100-python"):
        load_split("cifar100", "test", root=tmp_path)


def test_wrong_shapes_and_labels_are_user_errors(tmp_path):
    folder = tmp_path / "cifar-100-python"
    write_cifar100(tmp_path)
    with open(folder / "test", "wb") as stream:
        pickle.dump({"data": np.zeros((4, 1000), dtype=np.uint8), "fine_labels": [0] * 4}, stream)
    with pytest.raises(UserError):
        load_split("cifar100", "test", root=tmp_path)
    with open(folder / "test", "wb") as stream:
        pickle.dump({"data": np.zeros((4, 3072), dtype=np.uint8), "fine_labels": [0, 1, 2, 100]}, stream)
    with pytest.raises(UserError, match="labels"):
        load_split("cifar100", "test", root=tmp_path)


def test_unknown_dataset_suggests_the_nearest(tmp_path):
    with pytest.raises(UserError, match="did you mean `cifar100`"):
        load_split("cifar-100", "train", root=tmp_path)
    with pytest.raises(UserError, match="no parameters"):
        load_split("cifar10:classes=3", "train", root=tmp_path)


def test_download_failure_is_a_user_error(tmp_path, monkeypatch):
    import torchvision.datasets.cifar as tv_cifar

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(tv_cifar, "download_and_extract_archive", offline)
    with pytest.raises(UserError, match="could not download CIFAR-10.*network unreachable"):
        load_split("cifar10", "train", root=tmp_path, download=True)


def test_small_files_in_the_cifar_format_are_not_the_official_release(tmp_path):
    from archdsl.data import matches_official_release

    write_cifar10(tmp_path)
    assert matches_official_release("cifar10", tmp_path) is False  # they load, but their MD5s differ
