"""Fashion-MNIST and MNIST: IDX files (plain or gzip-ed) in torchvision's layout or the Debian package's
folder, MNIST's CSV files, their corrupted test sets, and 1x28x28 designs end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from _mnist_files import write_idx

from archdsl.data import describe, load_corrupted, load_split
from archdsl.data import mnist as mnist_module
from archdsl.data.corruptions import corrupt
from archdsl.data.registry import corrupt_any_channels
from archdsl.errors import UserError


@pytest.fixture(autouse=True)
def no_system_copy(monkeypatch, tmp_path):
    """Tests see only the files they write, not a Fashion-MNIST the machine may have installed."""
    use_spec(monkeypatch, "fashion-mnist", system_folder=tmp_path / "no-debian")
    use_spec(monkeypatch, "mnist", csv_package=None)
    mnist_module._read.cache_clear()


def use_spec(monkeypatch, name, **changes):
    monkeypatch.setitem(mnist_module.SPECS, name, dataclasses.replace(mnist_module.SPECS[name], **changes))


@pytest.mark.parametrize("packed", [False, True])
def test_idx_files_in_torchvisions_layout_are_read(tmp_path, packed):
    arrays = write_idx(tmp_path / "FashionMNIST" / "raw", packed=packed)
    train = load_split("fashion-mnist", "train", root=tmp_path)
    test = load_split("fashion-mnist", "test", root=tmp_path)
    assert train.images.shape == (40, 28, 28, 1) and test.images.shape == (20, 28, 28, 1)
    np.testing.assert_array_equal(train.images[..., 0], arrays["train"][0])
    np.testing.assert_array_equal(test.labels, arrays["t10k"][1])
    assert train.image_shape == (1, 28, 28) and train.num_classes == 10 and len(train.mean) == 1
    assert train.class_names[9] == "Ankle boot" and test.name == "fashion-mnist-test"


def test_the_debian_packages_folder_is_read(tmp_path, monkeypatch):
    write_idx(tmp_path / "debian", packed=True)
    use_spec(monkeypatch, "fashion-mnist", system_folder=tmp_path / "debian")
    assert len(load_split("fashion-mnist", "train", root=tmp_path / "empty")) == 40
    assert describe("fashion-mnist", root=tmp_path / "empty").source == str(tmp_path / "debian")


def test_mnist_csv_files_of_a_package_are_read(tmp_path, monkeypatch):
    package = tmp_path / "fake_mnist_csv"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    rng = np.random.default_rng(1)
    for split, n in (("train", 30), ("test", 10)):
        rows = np.column_stack([np.arange(n) % 10, rng.integers(0, 256, (n, 784))])
        header = "label," + ",".join(f"{r}x{c}" for r in range(1, 29) for c in range(1, 29))
        np.savetxt(package / "data" / f"mnist_{split}.csv", rows, fmt="%d", delimiter=",", header=header, comments="")
    monkeypatch.syspath_prepend(str(tmp_path))
    use_spec(monkeypatch, "mnist", csv_package="fake_mnist_csv")
    test = load_split("mnist", "test", root=tmp_path / "empty")
    assert test.images.shape == (10, 28, 28, 1) and list(test.labels[:3]) == [0, 1, 2]
    np.testing.assert_array_equal(test.images[1, 0, :, 0], rows[1, 1:29])  # row-major: the first image row


def test_a_missing_dataset_says_where_it_looked_and_how_to_get_it(tmp_path):
    with pytest.raises(UserError) as info:
        load_split("fashion-mnist", "train", root=tmp_path)
    assert str(tmp_path / "FashionMNIST" / "raw") in str(info.value)
    assert "apt-get install dataset-fashion-mnist" in info.value.hint


def test_a_truncated_idx_file_is_a_user_error(tmp_path):
    folder = tmp_path / "FashionMNIST" / "raw"
    write_idx(folder)
    data = (folder / "train-images-idx3-ubyte").read_bytes()
    (folder / "train-images-idx3-ubyte").write_bytes(data[:1000])
    with pytest.raises(UserError, match="truncated or not in the expected format"):
        load_split("fashion-mnist", "train", root=tmp_path)


def test_train_and_test_limits_keep_that_many_images(tmp_path):
    write_idx(tmp_path / "FashionMNIST" / "raw")
    train = load_split("fashion-mnist:train=12,test=5", "train", root=tmp_path)
    test = load_split("fashion-mnist:train=12,test=5", "test", root=tmp_path)
    assert (len(train), len(test)) == (12, 5)
    assert train.name == "fashion-mnist:test=5,train=12"


def test_grey_corruptions_are_the_rgb_generators_first_channel(tmp_path):
    write_idx(tmp_path / "FashionMNIST" / "raw")
    clean = load_split("fashion-mnist:test=20", "test", root=tmp_path)
    sets = load_corrupted("fashion-mnist:test=20", root=tmp_path, corruptions=["gaussian_noise", "fog"], severities=[3])
    assert [(s.corruption, s.severity) for s in sets] == [("gaussian_noise", 3), ("fog", 3)]
    for item in sets:
        assert item.images.images.shape == (20, 28, 28, 1)
        assert item.images.mean == clean.mean and (item.images.labels == clean.labels).all()
    rgb = corrupt(np.repeat(clean.images, 3, axis=-1), "gaussian_noise", 5, seed=7)
    np.testing.assert_array_equal(corrupt_any_channels(clean.images, "gaussian_noise", 5, 7), rgb[..., :1])
    # The noise keeps its strength: one channel of independent draws, not an average of three.
    flat = np.full((200, 28, 28, 1), 128, dtype=np.uint8)
    noisy = corrupt_any_channels(flat, "gaussian_noise", 5, 0).astype(np.float64) / 255
    assert noisy.std() == pytest.approx(0.10, rel=0.05)  # the CIFAR sigma at severity 5


@pytest.mark.parametrize("recipe", ["fast", "deit"])
def test_grey_images_go_through_the_training_augmentation(tmp_path, recipe):
    from archdsl.run.loader import make_loader

    write_idx(tmp_path / "FashionMNIST" / "raw")
    train = load_split("fashion-mnist", "train", root=tmp_path)
    images, labels = next(iter(make_loader(train, 8, augment=True, recipe=recipe)))
    assert images.shape == (8, 1, 28, 28) and images.dtype == torch.float32 and labels.shape == (8,)


GREY_SPEC = """
arch grey {
    input   1x28x28
    classes 10
    stem    conv3x3(4)
    conv  = basic
    stage c1(width=4)           { conv }
    stage c2(width=8, stride=2) { conv msa(heads=1, window=7, dim_head=4) }
}
"""


@pytest.mark.slow
def test_a_1x28x28_design_trains_and_is_analysed_end_to_end(tmp_path, one_thread):
    from archdsl.analysis.report import AnalysisReport
    from archdsl.cli import main

    write_idx(tmp_path / "data" / "FashionMNIST" / "raw", n_train=64, n_test=20)
    spec = tmp_path / "grey.arch"
    spec.write_text(GREY_SPEC)
    root = ["--data-root", str(tmp_path / "data")]
    run = tmp_path / "run"
    assert main(["train", str(spec), "--dataset", "fashion-mnist", *root, "--recipe", "fast", "--epochs", "1",
                 "--batch-size", "32", "--out", str(run), "--device", "cpu", "--no-progress"]) == 0  # fmt: skip
    out = tmp_path / "analysis"
    assert main(["analyze", str(run / "final.safetensors"), *root, "--metrics", "acc,robustness,fourier,lesion",
                 "--corruptions", "fog,gaussian_noise", "--severities", "2", "--images", "8", "--out", str(out),
                 "--device", "cpu", "--no-progress"]) == 0  # fmt: skip
    report = AnalysisReport.model_validate_json((out / "metrics.json").read_text())
    assert report.dataset == "fashion-mnist" and len(report.robustness.cells) == 2
    assert report.classification.count == 20 and len(report.lesion.blocks) == 3


@pytest.mark.slow
def test_the_real_fashion_mnist_when_it_is_installed(monkeypatch):
    use_spec(monkeypatch, "fashion-mnist", system_folder=mnist_module.DEBIAN_FASHION_MNIST)
    if mnist_module.locate(mnist_module.SPECS["fashion-mnist"], mnist_module.Path("data"), "train") is None:
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    train = load_split("fashion-mnist", "train")
    test = load_split("fashion-mnist", "test")
    assert (len(train), len(test)) == (60000, 10000)
    assert list(train.labels[:10]) == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    pixels = train.images.astype(np.float64) / 255
    assert (pixels.mean(), pixels.std()) == pytest.approx((train.mean[0], train.std[0]), abs=1e-4)
    assert np.bincount(test.labels).tolist() == [1000] * 10


@pytest.mark.parametrize(
    ("clean", "corrupted"),
    [
        ("fashion-mnist:train=12,test=5", "fashion-mnist-c:test=5"),  # train= is not the corrupted set's
        ("mnist:train=12", "mnist-c"),
        ("synthetic:train=200,test=100", "synthetic-c:test=100,train=200"),  # synthetic-c normalises by train
        ("cifar100", "cifar100-c"),
        ("fashion-mnist-c:test=5", "fashion-mnist-c:test=5"),  # already a corrupted set
    ],
)
def test_the_corrupted_sets_name_carries_only_the_options_it_takes(clean, corrupted):
    from archdsl.data import corrupted_name

    assert corrupted_name(clean) == corrupted
    describe(corrupted)  # a name the registry accepts


def test_analyze_finds_the_corrupted_sets_of_a_run_trained_with_a_training_limit(tmp_path):
    from archdsl.analysis.session import load_data
    from archdsl.analysis.sources import AnalysisSources
    from archdsl.lang.spec import parse_spec

    write_idx(tmp_path / "FashionMNIST" / "raw")
    sources = AnalysisSources(data_root=str(tmp_path), corruptions=("fog",), severities=(1,))
    data = load_data("fashion-mnist:train=12,test=5", sources, ("acc", "robustness"), parse_spec(GREY_SPEC))
    assert [len(s.images) for s in data.corrupted] == [5] and len(data.scored) == 5
    # load_corrupted derives the same name from the clean one (its sets are labelled by it)
    [picked] = load_corrupted("fashion-mnist:train=12,test=5", root=tmp_path, corruptions=["fog"], severities=[1])
    assert picked.images.name == "fashion-mnist-c:test=5/fog/1"


def test_train_and_test_limits_are_class_stratified_and_deterministic(tmp_path):
    from _mnist_files import idx_bytes

    folder = tmp_path / "FashionMNIST" / "raw"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 50), ("t10k", 30)):  # files sorted by class: the first N are one class
        (folder / f"{split}-images-idx3-ubyte").write_bytes(idx_bytes(rng.integers(0, 256, (n, 28, 28))))
        (folder / f"{split}-labels-idx1-ubyte").write_bytes(idx_bytes(np.repeat(np.arange(10), n // 10)))
    train = load_split("fashion-mnist:train=20,test=13", "train", root=tmp_path)
    test = load_split("fashion-mnist:train=20,test=13", "test", root=tmp_path)
    assert np.bincount(train.labels, minlength=10).tolist() == [2] * 10
    counts = np.bincount(test.labels, minlength=10)
    assert len(test) == 13 and counts.min() >= 1 and counts.max() <= 2  # as even as 13 of 10 classes can be
    again = load_split("fashion-mnist:test=13", "test", root=tmp_path)
    np.testing.assert_array_equal(again.images, test.images)  # the same images every time
    assert len(load_split("fashion-mnist:train=500", "train", root=tmp_path)) == 50  # more than there are: all
