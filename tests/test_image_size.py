"""`--image-size N` and the design's input size: what size a folder:, hf: or imagenet dataset is read at,
and the one-line refusals where a size cannot apply."""

from __future__ import annotations

import json

import pytest
from _micro_arch import micro_arch
from test_data_folder import write_tree

from archdsl.cli import main
from archdsl.data import sized_name
from archdsl.data.image_size import dataset_for_input
from archdsl.errors import UsageError
from archdsl.ir import InputShape

FLAGS = ["--epochs", "1", "--batch-size", "4", "--no-progress", "--device", "cpu"]


def test_a_size_replaces_the_names_own_and_keeps_its_other_options(tmp_path):
    assert sized_name("folder:/photos", 64) == "folder:/photos,size=64"
    assert sized_name("folder:/photos,size=16,train=9", 64) == "folder:/photos,train=9,size=64"
    assert sized_name("imagenet", 128) == "imagenet:size=128"
    assert sized_name("imagenet:test=50,size=224", 160) == "imagenet:test=50,size=160"
    assert sized_name("hf:cifar100:plain,label=fine_label,size=8", 40) == "hf:cifar100:plain,label=fine_label,size=40"
    assert sized_name("cifar10", 32) == "cifar10"  # a dataset's own size is no change
    # Without --image-size, a name without size= takes the design's input size; its own size= stays.
    assert (
        dataset_for_input("folder:/photos", InputShape(channels=3, height=224, width=224), None)
        == "folder:/photos,size=224"
    )
    assert (
        dataset_for_input("folder:/photos,size=16", InputShape(channels=3, height=224, width=224), None)
        == "folder:/photos,size=16"
    )
    assert (
        dataset_for_input("folder:/photos,size=16", InputShape(channels=3, height=224, width=224), 48)
        == "folder:/photos,size=48"
    )
    assert dataset_for_input("cifar10", InputShape(channels=3, height=64, width=64), None) == "cifar10"


@pytest.mark.parametrize("name", ["cifar10", "synthetic", "fashion-mnist:test=10"])
def test_a_dataset_of_fixed_size_images_refuses_another_size(name):
    with pytest.raises(UsageError, match=r"--image-size 64: the images of .* are \d+x\d+ and are not resized"):
        sized_name(name, 64)


def test_train_reads_a_folder_at_the_specs_input_size_and_eval_at_the_checkpoints(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=24, classes=3))
    out = tmp_path / "run"
    assert main(["train", str(spec), "--dataset", f"folder:{root}", *FLAGS, "--out", str(out)]) == 0
    assert f"on folder:{root},size=24: 1 epoch" in capsys.readouterr().out
    assert main(["eval", str(out / "final.safetensors"), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["dataset"] == f"folder:{root},size=24"


def test_image_size_resizes_the_spec_and_the_folder_in_train_eval_and_analyze(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 4, "test": 2})
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=32, classes=3))
    out = tmp_path / "run"
    argv = ["train", str(spec), "--dataset", f"folder:{root},size=32", "--image-size", "16", *FLAGS]
    assert main([*argv, "--out", str(out)]) == 0
    assert f"on folder:{root},size=16: 1 epoch" in capsys.readouterr().out
    assert "input   3x16x16" in (out / "spec.arch").read_text()  # the design trained, as a spec
    checkpoint = str(out / "final.safetensors")
    assert main(["eval", checkpoint, "--image-size", "24", "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["dataset"] == f"folder:{root},size=24"
    analysis = tmp_path / "analysis"
    argv = ["analyze", checkpoint, "--metrics", "acc", "--image-size", "24", "--out", str(analysis), "--no-progress"]
    assert main([*argv, "--device", "cpu"]) == 0
    assert (analysis / "metrics.json").is_file()


def test_search_and_data_info_read_the_folder_at_the_size(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 12, "test": 1})  # enough for a batch: the dry run checks the data
    assert main(["data", "info", "--dataset", f"folder:{root}", "--image-size", "20"]) == 0
    assert "images:   3x20x20" in capsys.readouterr().out
    argv = ["search", "--dataset", f"folder:{root},size=16", "--image-size", "20", "--batch-size", "8", "--dry-run"]
    assert main(argv) == 0
    assert f"fitted to folder:{root},size=20: 3x20x20, 3 classes" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["data", "info", "--dataset", "synthetic", "--image-size", "64"], "the images of synthetic are 32x32"),
        (["search", "--dataset", "synthetic", "--image-size", "64", "--dry-run"], "the images of synthetic are 32x32"),
        (["train", "tiny", "--dataset", "synthetic", "--image-size", "64"], "the images of synthetic are 32x32"),
        (["train", "tiny", "--dataset", "synthetic", "--image-size", "17"], "design 'tiny' cannot take 17x17 images"),
    ],
)
def test_a_size_that_cannot_apply_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if not line.lstrip().startswith("hint:")]) == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_size_option_that_does_not_fit_the_spec_says_how_to_fit_it(tmp_path, capsys):
    root = write_tree(tmp_path / "pets", {"train": 2, "test": 1})
    spec = tmp_path / "micro.arch"
    spec.write_text(micro_arch("c1(width=8) { conv }", size=32, classes=3))
    assert main(["train", str(spec), "--dataset", f"folder:{root},size=16", *FLAGS, "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "takes 3x32x32 inputs" in err and "leave out size=" in err and "--image-size" in err


def test_data_info_of_imagenet_not_on_disk_shows_the_size_it_would_be_read_at(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "imagenet", "--image-size", "64", "--data-root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "dataset:  imagenet:size=64" in out and "images:   3x64x64" in out and "(not found)" in out
