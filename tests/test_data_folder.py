"""`folder:PATH`: your own images in the torchvision/timm layout, on tiny trees of real image files."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from _micro_arch import micro_arch
from PIL import Image

from archdsl.cli import main
from archdsl.data import describe, load_corrupted, load_split
from archdsl.errors import UserError

CLASSES = ("cat", "ant", "bee")  # not in sorted order: labels follow the sorted folder names


def write_tree(root: Path, per_class: dict[str, int], grey: bool = False, test_folder: str = "val") -> Path:
    """PATH/train/<class>/*.png and PATH/<test_folder>/<class>/*.png; each class a distinct flat colour
    plus noise, each image a different size (the loader resizes and crops)."""
    rng = np.random.default_rng(0)
    for split, count in per_class.items():
        for index, name in enumerate(CLASSES):
            folder = root / (test_folder if split == "test" else split) / name
            folder.mkdir(parents=True)
            for k in range(count):
                height, width = 20 + 3 * k, 24 + 5 * k
                base = np.array([60 * index + 40, 200 - 50 * index, 90])
                pixels = np.clip(base + rng.integers(-10, 10, (height, width, 3)), 0, 255).astype(np.uint8)
                image = Image.fromarray(pixels)
                (image.convert("L") if grey else image).save(folder / f"{k}.png")
    return root


def test_loads_both_splits_with_sorted_classes_and_train_statistics(tmp_path):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    train = load_split(f"folder:{root},size=16", "train")
    test = load_split(f"folder:{root},size=16", "test")
    assert train.class_names == test.class_names == ("ant", "bee", "cat")
    assert train.images.shape == (12, 16, 16, 3) and test.images.shape == (6, 16, 16, 3)
    assert train.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4 and train.num_classes == 3
    # "ant" is CLASSES[1]: its red channel is about 100
    assert abs(float(train.images[train.labels == 0][..., 0].mean()) - 100) < 6
    assert test.mean == train.mean and test.std == train.std  # normalisation from the train split only
    assert abs(train.mean[0] - float(train.images[..., 0].mean()) / 255) < 1e-6


def test_test_folder_grey_images_and_limits(tmp_path):
    root = write_tree(tmp_path / "g", {"train": 4, "test": 2}, grey=True, test_folder="test")
    train = load_split(f"folder:{root},train=6", "train")
    assert train.images.shape == (6, 32, 32, 1) and sorted(np.bincount(train.labels)) == [2, 2, 2]
    assert len(load_split(f"folder:{root}", "test")) == 6


def test_data_info_counts_the_files(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 3, "test": 2})
    assert main(["data", "info", "--dataset", f"folder:{root},size=24"]) == 0
    out = capsys.readouterr().out
    assert "classes:  3" in out and "images:   3x24x24" in out and "train 9, test 6" in out
    assert describe(f"folder:{root},test=4").split_sizes == {"train": 9, "test": 4}


def test_corrupted_sets_are_generated_from_the_test_split(tmp_path):
    root = write_tree(tmp_path / "pets", {"train": 2, "test": 2})
    clean = load_split(f"folder:{root},size=16", "test")
    [fog] = load_corrupted(f"folder:{root},size=16", corruptions=["gaussian_noise"], severities=[5])
    assert (fog.corruption, fog.severity) == ("gaussian_noise", 5)
    assert fog.images.images.shape == clean.images.shape and not np.array_equal(fog.images.images, clean.images)
    assert fog.images.labels.tolist() == clean.labels.tolist()


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG that claims width x height pixels (no pixel data): Pillow checks the size when it opens it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b""))


def _not_an_image(root: Path) -> str:
    bad = root / "train" / "bee" / "broken.png"
    bad.write_bytes(b"this is not a png")
    return str(bad)


def _truncated(root: Path) -> str:
    bad = root / "val" / "cat" / "0.png"
    bad.write_bytes(bad.read_bytes()[:60])
    return str(bad)


def _bomb(root: Path) -> str:
    bad = root / "train" / "ant" / "huge.png"
    _png_header_only(bad, 20_000, 20_000)
    return str(bad)


def _empty_class(root: Path) -> str:
    (root / "val" / "dog").mkdir()
    (root / "train" / "dog").mkdir()
    return str(root / "train" / "dog")


def _classes_differ(root: Path) -> str:
    (root / "val" / "cat").rename(root / "val" / "cow")
    return "only in train/: cat; only in val/: cow"


def _no_images(root: Path) -> str:
    for image in (root / "train" / "ant").iterdir():
        image.rename(image.with_suffix(".txt"))
    return str(root / "train" / "ant")


def _symlink_loop(root: Path) -> str:
    (root / "train" / "bee" / "again").symlink_to(root / "train" / "bee", target_is_directory=True)
    return "symbolic link loop"


def _no_split_folders(root: Path) -> str:
    (root / "val").rename(root / "holdout")
    return "expected the folders train/ and val/"


@pytest.mark.parametrize(
    "break_tree",
    [_not_an_image, _truncated, _bomb, _empty_class, _classes_differ, _no_images, _symlink_loop, _no_split_folders],
)
def test_a_bad_tree_is_one_line_naming_the_file_and_writes_nothing(tmp_path, capsys, break_tree):
    root = write_tree(tmp_path / "pets", {"train": 2, "test": 2})
    named = break_tree(root)
    out = tmp_path / "run"
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=16, classes=3))
    code = main(["train", str(spec), "--dataset", f"folder:{root},size=16", "--epochs", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and named in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if not line.lstrip().startswith("hint:")]) == 1, err
    assert not out.exists()


def test_a_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such folder"):
        load_split(f"folder:{tmp_path / 'nowhere'}", "train")
    with pytest.raises(UserError, match="must be positive"):
        load_split(f"folder:{tmp_path},size=0", "train")


def test_train_and_eval_on_a_folder(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=16, classes=3))
    dataset = f"folder:{root},size=16"
    out = tmp_path / "run"
    flags = ["--epochs", "1", "--batch-size", "4", "--no-progress", "--device", "cpu"]
    assert main(["train", str(spec), "--dataset", dataset, *flags, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out / "final.safetensors"), "--dataset", dataset, "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["images"] == 6  # measured on the 6 images of val/


def write_imagenet(root: Path) -> Path:
    """A fake ILSVRC-2012 tree: two wnid folders per split, real JPEG photos of different sizes."""
    rng = np.random.default_rng(1)
    for split, count in (("train", 3), ("val", 1)):
        for index, wnid in enumerate(("n01440764", "n01443537")):
            folder = root / split / wnid
            folder.mkdir(parents=True)
            for k in range(count):
                pixels = rng.integers(0, 256, (300 + 7 * k, 400, 3), dtype=np.uint8)
                pixels[..., index] = 255  # class 0 red, class 1 green
                Image.fromarray(pixels).save(folder / f"{wnid}_{k}.JPEG", quality=90)
    return root


def test_imagenet_uses_the_folder_loader_with_timms_transform(tmp_path):
    from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD, create_transform, resolve_data_config

    root = write_imagenet(tmp_path / "ilsvrc")
    train = load_split("imagenet", "train", root=root)
    val = load_split("imagenet", "test", root=root)
    assert train.images.shape == (6, 224, 224, 3) and val.images.shape == (2, 224, 224, 3)
    assert train.class_names == ("n01440764", "n01443537") and val.labels.tolist() == [0, 1]
    assert (train.mean, train.std) == (tuple(IMAGENET_DEFAULT_MEAN), tuple(IMAGENET_DEFAULT_STD))
    # timm's own evaluation transform of the same file, before its normalisation, gives the same pixels
    config = resolve_data_config({"input_size": (3, 224, 224)})  # the rest: timm's ImageNet defaults
    assert (config["input_size"], config["interpolation"], config["crop_pct"]) == ((3, 224, 224), "bicubic", 0.875)
    transform = create_transform(**{**config, "mean": (0, 0, 0), "std": (1, 1, 1)})
    with Image.open(root / "val" / "n01443537" / "n01443537_0.JPEG") as photo:
        timm_pixels = (transform(photo.convert("RGB")).permute(1, 2, 0).numpy() * 255).round()
    assert np.abs(timm_pixels - val.images[1].astype(np.float64)).max() <= 1


def test_imagenet_without_its_folders_names_the_layout(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "imagenet", "--data-root", str(tmp_path)]) == 1
    assert "expected train/<wnid>/ and val/<wnid>/" in capsys.readouterr().out
    root = write_imagenet(tmp_path / "ilsvrc")
    assert main(["data", "info", "--dataset", "imagenet:train=2", "--data-root", str(root)]) == 0
    assert "splits:   train 2, test 2" in capsys.readouterr().out


def test_imagenet_cannot_be_downloaded_and_says_so_in_one_line(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "imagenet", "--data-root", str(tmp_path), "--download"]) == 1
    err = capsys.readouterr().err
    assert "imagenet cannot be downloaded by archdsl" in err and "Traceback" not in err
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=16, classes=2))
    out = tmp_path / "run"
    argv = ["train", str(spec), "--dataset", "imagenet", "--data-root", str(tmp_path), "--download", "--out", str(out)]
    assert main(argv) == 1
    assert "imagenet cannot be downloaded by archdsl" in capsys.readouterr().err and not out.exists()
    root = write_imagenet(tmp_path / "ilsvrc")  # there already: --download has nothing to do
    assert main(["data", "info", "--dataset", "imagenet", "--data-root", str(root), "--download"]) == 0


def test_describing_a_missing_folder_is_an_error_not_zero_classes(tmp_path, capsys):
    assert main(["data", "info", "--dataset", f"folder:{tmp_path / 'nowhere'}"]) == 1
    assert f"{tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err
    assert main(["search", "--dataset", f"folder:{tmp_path / 'nowhere'}", "--dry-run"]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_search_fits_its_base_to_the_folder(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 12, "test": 1})  # enough for a batch: the dry run checks the data
    assert main(["search", "--dataset", f"folder:{root},size=16", "--batch-size", "8", "--dry-run"]) == 0
    assert f"fitted to folder:{root},size=16: 3x16x16, 3 classes" in capsys.readouterr().out
