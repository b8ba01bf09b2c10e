"""`--corrupted folder:PATH`: released corrupted sets in ImageNet-C's layout, <corruption>/<severity>/<class>/*,
read as the clean dataset's test split (its size, classes and normalisation), on tiny trees of PNG files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _micro_arch import micro_arch
from PIL import Image
from test_data_folder import write_imagenet, write_tree

from archdsl.cli import main
from archdsl.data import load_corrupted, load_split
from archdsl.data.corrupted_folder import is_corrupted_folder, read_corrupted_folder
from archdsl.errors import UserError

# Class folders in the released set: the clean folder's (write_tree's) names, each a flat colour.
COLOURS = {"ant": 40, "bee": 140, "cat": 240}


def write_released(root: Path, levels: dict[str, tuple[int, ...]], classes: tuple[str, ...] = tuple(COLOURS)) -> Path:
    """ROOT/<corruption>/<severity>/<class>/k.png, two 24x24 images per class (ImageNet-C's layout)."""
    for corruption, severities in levels.items():
        for severity in severities:
            for name in classes:
                folder = root / corruption / str(severity) / name
                folder.mkdir(parents=True)
                for k in range(2):
                    pixels = np.full((24, 24, 3), COLOURS.get(name, 90) - 10 * k, dtype=np.uint8)
                    Image.fromarray(pixels).save(folder / f"{k}.png")
    return root


def test_a_released_folder_is_told_from_a_clean_one(tmp_path):
    clean = write_tree(tmp_path / "pets", {"train": 1, "test": 1})
    released = write_released(tmp_path / "pets-c", {"fog": (1,)})
    assert is_corrupted_folder(f"folder:{released}") and not is_corrupted_folder(f"folder:{clean}")
    assert not is_corrupted_folder("cifar10-c") and not is_corrupted_folder(f"folder:{tmp_path / 'nowhere'}")


def test_sets_are_read_at_the_clean_size_with_its_labels_and_statistics(tmp_path):
    clean_name = f"folder:{write_tree(tmp_path / 'pets', {'train': 2, 'test': 1})},size=16"
    released = write_released(tmp_path / "pets-c", {"fog": (1, 3), "gaussian_noise": (1, 3)})
    sets = load_corrupted(
        f"folder:{released}", corruptions=["fog", "gaussian_noise"], severities=[1, 3], clean=clean_name
    )
    assert [(s.corruption, s.severity) for s in sets[:2]] == [("fog", 1), ("fog", 3)]
    clean = load_split(clean_name, "test")
    fog = sets[0].images
    assert fog.images.shape == (6, 16, 16, 3) and fog.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert (fog.mean, fog.std, fog.class_names) == (clean.mean, clean.std, clean.class_names)
    assert np.asarray(fog.images)[2, 0, 0, 0] == COLOURS["bee"]  # the file's pixels, resized
    with pytest.raises(UserError, match=r"gaussian_noise/2: no such folder"):  # severity 2 was not released
        load_corrupted(f"folder:{released}", corruptions=["gaussian_noise"], severities=[2], clean=clean_name)
    with pytest.raises(UserError, match="name the dataset they corrupt"):
        load_corrupted(f"folder:{released}")


def test_labels_follow_the_clean_datasets_class_order_by_name(tmp_path):
    clean = load_split(f"folder:{write_tree(tmp_path / 'pets', {'train': 1, 'test': 1})},size=16", "test")
    reordered = replace(clean, class_names=("cat", "ant", "bee"))  # e.g. a Hugging Face ClassLabel's order
    released = write_released(tmp_path / "pets-c", {"fog": (1,)})
    [fog] = read_corrupted_folder(f"folder:{released}", reordered, ["fog"], [1])
    assert fog.images.labels.tolist() == [1, 1, 2, 2, 0, 0]  # ant, bee, cat folders -> their clean labels


def test_a_class_the_clean_dataset_lacks_is_refused_naming_the_folder(tmp_path, capsys):
    clean_name = f"folder:{write_tree(tmp_path / 'pets', {'train': 4, 'test': 2})},size=16"
    released = write_released(tmp_path / "pets-c", {"fog": (1,)}, classes=("ant", "bee", "cow"))
    with pytest.raises(UserError, match=r"fog/1: class folders that folder:.* does not have \(cow\)"):
        load_corrupted(f"folder:{released}", corruptions=["fog"], severities=[1], clean=clean_name)


def test_eval_and_analyze_measure_a_released_folder(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    released = write_released(tmp_path / "pets-c", {"fog": (1, 2), "contrast": (1, 2)})
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=16, classes=3))
    run = tmp_path / "run"
    flags = ["--epochs", "1", "--batch-size", "4", "--no-progress", "--device", "cpu"]
    assert main(["train", str(spec), "--dataset", f"folder:{root}", *flags, "--out", str(run)]) == 0
    checkpoint = str(run / "final.safetensors")
    picked = ["--corruptions", "fog,contrast", "--severities", "1,2", "--no-progress", "--device", "cpu"]
    capsys.readouterr()
    assert main(["eval", checkpoint, "--corrupted", f"folder:{released}", *picked, "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert [(s["corruption"], s["severity"]) for s in measured["sets"]] == [
        ("fog", 1), ("fog", 2), ("contrast", 1), ("contrast", 2)
    ]  # fmt: skip
    assert main(["eval", checkpoint, "--dataset", f"folder:{released}", *picked, "--json"]) == 0  # told by its layout
    assert json.loads(capsys.readouterr().out)["sets"] == measured["sets"]
    out = tmp_path / "analysis"
    argv = ["analyze", checkpoint, "--metrics", "robustness", "--corrupted", f"folder:{released}", *picked]
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "metrics.json").is_file()


def test_data_info_describes_a_released_folder(tmp_path, capsys):
    released = write_released(tmp_path / "pets-c", {"fog": (1, 2), "contrast": (1,)})
    assert main(["data", "info", "--dataset", f"folder:{released}"]) == 0
    out = capsys.readouterr().out
    assert "released corrupted sets, 3 in 2 corruption folders (images counted in the first, contrast/1)" in out
    assert "splits:   test 6 per corruption and severity" in out and "corruptions: contrast, fog" in out
    assert main(["data", "info", "--dataset", f"folder:{released}", "--download"]) == 0  # nothing to fetch: there
    assert capsys.readouterr().out == out


def test_imagenet_c_is_read_as_imagenets_validation_split_without_a_second_crop(tmp_path):
    root = write_imagenet(tmp_path / "ilsvrc")
    released = tmp_path / "ImageNet-C"
    for index, wnid in enumerate(("n01443537", "n01440764")):  # written in another order than sorted
        folder = released / "fog" / "5" / wnid
        folder.mkdir(parents=True)
        pixels = np.zeros((224, 224, 3), dtype=np.uint8)
        pixels[:112, :, index] = 200  # the released crops are 224x224 already: kept whole
        Image.fromarray(pixels).save(folder / f"{wnid}_fog.JPEG", quality=95)
    [fog] = load_corrupted(f"folder:{released}", root=root, corruptions=["fog"], severities=[5], clean="imagenet")
    val = load_split("imagenet", "test", root=root)
    assert fog.images.images.shape == (2, 224, 224, 3) and fog.images.labels.tolist() == [0, 1]
    assert (fog.images.mean, fog.images.std) == (val.mean, val.std)
    decoded = np.asarray(fog.images.images)
    assert decoded[0, 100, 100, 1] > 150 and decoded[0, 124, 100, 1] < 50  # the band ends at row 112, not moved


def _trained_micro(tmp_path: Path, root: Path) -> str:
    """A 16x16 design trained one epoch on the folder `root`: its checkpoint."""
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=16, classes=3))
    run = tmp_path / "run"
    flags = ["--epochs", "1", "--batch-size", "4", "--no-progress", "--device", "cpu"]
    assert main(["train", str(spec), "--dataset", f"folder:{root}", *flags, "--out", str(run)]) == 0
    return str(run / "final.safetensors")


def test_a_damaged_image_in_a_released_set_is_one_line_naming_the_file(tmp_path, capsys):
    # released sets are decoded by the loader's worker processes: their error reaches the terminal as its own line
    checkpoint = _trained_micro(tmp_path, write_tree(tmp_path / "pets", {"train": 4, "test": 2}))
    released = write_released(tmp_path / "pets-c", {"fog": (1,)})
    (released / "fog" / "1" / "bee" / "1.png").write_bytes(b"not a png")
    capsys.readouterr()
    picked = ["--corruptions", "fog", "--severities", "1", "--no-progress", "--device", "cpu"]
    assert main(["eval", checkpoint, "--corrupted", f"folder:{released}", *picked]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "DataLoader" not in err, err
    assert err.startswith("archdsl: error: ") and "fog/1/bee/1.png: not an image" in err.splitlines()[0]


def test_generated_copies_of_a_clean_folder_are_made_at_the_designs_size(tmp_path, capsys, monkeypatch):
    # --corrupted folder:CLEAN (copies generated from its test split) is fitted to the checkpoint as --dataset is
    monkeypatch.setenv("ARCHDSL_CACHE", str(tmp_path / "cache"))
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    checkpoint = _trained_micro(tmp_path, root)
    picked = ["--corruptions", "fog", "--severities", "1", "--no-progress", "--device", "cpu", "--json"]
    capsys.readouterr()
    assert main(["eval", checkpoint, "--corrupted", f"folder:{root}", *picked]) == 0, capsys.readouterr().err
    [fog] = json.loads(capsys.readouterr().out)["sets"]
    assert (fog["corruption"], fog["severity"]) == ("fog", 1)
    argv = ["analyze", checkpoint, "--metrics", "robustness", "--corrupted", f"folder:{root}", *picked[:-1]]
    assert main([*argv, "--out", str(tmp_path / "analysis")]) == 0, capsys.readouterr().err
