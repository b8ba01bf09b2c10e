"""CIFAR-C files (released layout, memory-mapped), write_corrupted, synthetic-c."""

from __future__ import annotations

import numpy as np
import pytest

from archdsl.data import load_corrupted, load_split, write_corrupted
from archdsl.data.corruptions import CORRUPTIONS
from archdsl.errors import UserError

PER_SEVERITY = 4


def write_cifar100_c(root, corruptions=("fog", "snow"), per_severity=PER_SEVERITY):
    folder = root / "CIFAR-100-C"
    folder.mkdir(parents=True)
    rows = 5 * per_severity
    labels = np.tile(np.arange(per_severity, dtype=np.uint8) * 7, 5)  # uint8, as released
    np.save(folder / "labels.npy", labels)
    for index, name in enumerate(corruptions):
        # each severity block filled with its severity number, so slicing is checkable
        images = np.repeat(np.arange(1, 6, dtype=np.uint8), per_severity)[:, None, None, None] * np.uint8(10 + index)
        np.save(folder / f"{name}.npy", np.broadcast_to(images, (rows, 32, 32, 3)).copy())
    return folder


def test_severity_s_is_rows_n_s_minus_1_to_n_s(tmp_path):
    write_cifar100_c(tmp_path)
    sets = load_corrupted("cifar100-c", root=tmp_path, corruptions=["snow", "fog"], severities=[5, 2])
    assert [(s.corruption, s.severity) for s in sets] == [("snow", 5), ("snow", 2), ("fog", 5), ("fog", 2)]
    snow5 = sets[0].images
    assert len(snow5) == PER_SEVERITY and np.all(snow5.images == 5 * 11)
    assert np.all(sets[3].images.images == 2 * 10)
    assert snow5.labels.dtype == np.int64 and snow5.labels.tolist() == [0, 7, 14, 21]
    assert snow5.num_classes == 100 and snow5.mean == pytest.approx((0.5071, 0.4867, 0.4408))
    assert isinstance(snow5.images, np.memmap)  # memory-mapped, not read into memory


def test_clean_name_maps_to_its_corrupted_set(tmp_path):
    write_cifar100_c(tmp_path)
    assert len(load_corrupted("cifar100", root=tmp_path, corruptions=["fog"])) == 5


def test_load_split_picks_one_set_by_name(tmp_path):
    write_cifar100_c(tmp_path)
    fog3 = load_split("cifar100-c:corruption=fog,severity=3", "test", root=tmp_path)
    assert np.all(fog3.images == 30)
    with pytest.raises(UserError, match="name one"):
        load_split("cifar100-c", "test", root=tmp_path)
    with pytest.raises(UserError, match="no train split"):
        load_split("cifar100-c:corruption=fog,severity=3", "train", root=tmp_path)


def test_missing_folder_says_where_and_how(tmp_path):
    with pytest.raises(UserError) as caught:
        load_corrupted("cifar10-c", root=tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "CIFAR-10-C" / "labels.npy") in message and "archdsl data corrupt" in message


def test_missing_corruption_lists_what_is_there(tmp_path):
    write_cifar100_c(tmp_path)
    with pytest.raises(UserError, match="frost.npy is missing[\\s\\S]*fog, snow"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["frost"])


def test_wrong_shape_is_described(tmp_path):
    folder = write_cifar100_c(tmp_path)
    np.save(folder / "fog.npy", np.zeros((20, 32, 32), dtype=np.uint8))
    with pytest.raises(UserError, match=r"fog.npy: expected uint8 images of shape \(20, 32, 32, 3\).*\(20, 32, 32\)"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["fog"])
    np.save(folder / "labels.npy", np.zeros(7, dtype=np.int64))
    with pytest.raises(UserError, match="labels.npy: expected integer labels of shape"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["snow"])


def test_truncated_and_pickled_files_are_refused(tmp_path):
    folder = write_cifar100_c(tmp_path)
    data = (folder / "fog.npy").read_bytes()
    (folder / "fog.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["fog"])
    np.save(folder / "snow.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserError, match="snow.npy"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["snow"])


def test_bad_selection_is_a_user_error(tmp_path):
    write_cifar100_c(tmp_path)
    with pytest.raises(UserError, match="did you mean `snow`"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["snw"])
    with pytest.raises(UserError, match="severity"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["fog"], severities=[0])


def test_write_then_read_round_trip(tmp_path):
    clean = load_split("synthetic:test=30", "test")
    folder = tmp_path / "CIFAR-10-C"
    written = write_corrupted(folder, clean, ["fog", "contrast"], seed=3, progress=False, chunk_size=16)
    assert sorted(p.name for p in written) == ["contrast.npy", "fog.npy", "labels.npy"]
    fog = np.load(folder / "fog.npy")
    assert fog.shape == (150, 32, 32, 3) and fog.dtype == np.uint8
    assert not list(folder.glob(".*"))  # no temporary files left
    sets = load_corrupted("cifar10-c", root=tmp_path, corruptions=["contrast"], severities=[4])
    assert np.array_equal(sets[0].images.labels, clean.labels)
    again = write_corrupted(tmp_path / "again", clean, ["fog"], seed=3, progress=False, chunk_size=16)
    assert np.array_equal(np.load(again[0]), fog)
    with pytest.raises(UserError, match="all five severities"):
        write_corrupted(tmp_path / "x", clean, ["fog"], severities=[1, 2], progress=False)


def test_synthetic_c_is_generated_deterministic_and_cached():
    sets = load_corrupted("synthetic-c:test=40", corruptions=["fog", "jpeg_compression"], severities=[1, 5])
    assert [(s.corruption, s.severity) for s in sets] == [
        ("fog", 1),
        ("fog", 5),
        ("jpeg_compression", 1),
        ("jpeg_compression", 5),
    ]
    clean = load_split("synthetic:test=40", "test")
    fog1 = sets[0].images
    assert fog1.images.shape == clean.images.shape and np.array_equal(fog1.labels, clean.labels)
    assert not np.array_equal(fog1.images, clean.images)
    assert fog1.mean == clean.mean
    again = load_corrupted("synthetic:test=40", corruptions=["fog"], severities=[1])[0].images
    assert again is fog1  # cached in memory
    from archdsl.data import registry

    registry._generated_corrupted_set.cache_clear()
    regenerated = load_corrupted("synthetic-c:test=40", corruptions=["fog"], severities=[1])[0].images
    assert np.array_equal(regenerated.images, fog1.images)


def test_default_selection_is_the_fifteen_by_five():
    sets = load_corrupted("synthetic-c:test=10,train=10")
    assert len(sets) == 75 and sets[0].corruption == CORRUPTIONS[0] and sets[-1].severity == 5


def test_an_empty_corrupted_set_is_refused_not_scored_as_nan(tmp_path, capsys):
    folder = write_cifar100_c(tmp_path, per_severity=0)  # labels.npy and fog.npy hold nothing
    with pytest.raises(UserError, match="labels.npy holds no labels"):
        load_corrupted("cifar100-c", root=tmp_path, corruptions=["fog"])
    # `eval` on it: a clear error and exit 1 (before: "top-1 nan" and exit 0).
    from archdsl.cli import main

    checkpoint = tmp_path / "m.safetensors"
    assert main(["compile", "tiny", "--classes", "100", "--export", str(checkpoint)]) == 0
    status = main(["eval", str(checkpoint), "--dataset", "cifar100-c", "--data-root", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 1 and "holds no labels" in err and "Traceback" not in err
    assert folder.is_dir()
