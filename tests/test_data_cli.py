"""`archdsl data list | info | corrupt` through the real command line entry point."""

from __future__ import annotations

import numpy as np
import pytest

from archdsl.cli import main
from archdsl.errors import UserError


def test_list_names_every_dataset(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("cifar10", "cifar100", "cifar10-c", "cifar100-c", "synthetic", "synthetic-c"):
        assert f"\n{name} " in "\n" + out


def test_list_imports_no_torch():
    """`data list` prints names: it took 8 s when it looked for files through torchvision."""
    import subprocess
    import sys

    code = (
        "import sys; from archdsl.cli import main; main(['data', 'list']); "
        "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "fashion-mnist-c" in out and out.splitlines()[-1] == "[]"


def test_info_synthetic_offline(capsys):
    assert main(["data", "info", "--dataset", "synthetic:classes=4,test=12"]) == 0
    out = capsys.readouterr().out
    assert "classes:  4" in out and "test 12" in out and "generated in memory" in out


def test_info_reports_missing_files_and_exits_non_zero(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "cifar100", "--data-root", str(tmp_path)]) == 1
    assert f"{tmp_path / 'cifar-100-python'}  (not found)" in capsys.readouterr().out


def test_corrupt_writes_the_released_layout(tmp_path, capsys):
    out = tmp_path / "SYN-C"
    code = main(
        [
            "data",
            "corrupt",
            "--dataset",
            "synthetic:test=20",
            "--out",
            str(out),
            "--corruptions",
            "fog,pixelate",
            "--seed",
            "1",
            "--no-progress",
        ]
    )
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["fog.npy", "labels.npy", "pixelate.npy"]
    assert np.load(out / "fog.npy", mmap_mode="r").shape == (100, 32, 32, 3)
    assert "wrote 3 files" in capsys.readouterr().out


def test_user_mistakes_exit_with_a_message(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "cifr100"]) == 1
    assert "did you mean `cifar100`" in capsys.readouterr().err
    assert main(["data", "corrupt", "--dataset", "synthetic", "--out", str(tmp_path), "--corruptions", "fgo"]) == 1
    assert "did you mean `fog`" in capsys.readouterr().err
    assert main(["data", "corrupt", "--dataset", "cifar10", "--data-root", str(tmp_path), "--out", str(tmp_path)]) == 1
    assert "CIFAR-10 not found" in capsys.readouterr().err
    assert main(["data"]) == 2


@pytest.mark.parametrize("names,message", [("fogg", "unknown corruption 'fogg'"), ("all,fog", "'all' stands alone")])
def test_corruption_names_are_checked_before_the_dataset_is_read(tmp_path, capsys, names, message):
    """A typo must not wait behind a missing dataset (or, with --download, behind its download)."""
    argv = ["data", "corrupt", "--dataset", "cifar10", "--data-root", str(tmp_path / "none"), "--out", str(tmp_path)]
    assert main([*argv, "--corruptions", names]) == 1
    err = capsys.readouterr().err
    assert message in err and "not found" not in err


def test_corrupt_refuses_an_out_that_is_a_file_before_any_work(tmp_path, capsys):
    target = tmp_path / "labels.npy"
    target.write_bytes(b"keep")
    assert main(["data", "corrupt", "--dataset", "synthetic:test=10", "--out", str(target), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err
    assert target.read_bytes() == b"keep"


def test_picking_corruptions_in_the_name_points_to_the_flags(capsys):
    from archdsl.data import load_corrupted
    from archdsl.errors import UserError

    with pytest.raises(UserError) as info:
        load_corrupted("synthetic-c:test=10,corruption=fog")
    assert "corruption=" in info.value.message and "--corruptions" in info.value.hint


@pytest.mark.parametrize("name, folder", [("cifar100", "cifar-100-python"), ("cifar10-c", "CIFAR-10-C")])
def test_info_of_a_missing_dataset_says_what_to_put_where(tmp_path, capsys, name, folder):
    assert main(["data", "info", "--dataset", name, "--data-root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "missing:" in out and "to fix:   " in out and f"{tmp_path / folder}/ holds" in out


def test_a_dataset_parameter_given_twice_is_an_error(capsys):
    assert main(["data", "info", "--dataset", "synthetic:train=50,train=60"]) == 1
    assert "'train' is given twice" in capsys.readouterr().err


def test_corrupt_never_replaces_files_out_already_holds_without_force(tmp_path, capsys):
    released = tmp_path / "fog.npy"
    np.save(released, np.zeros((5, 32, 32, 3), np.uint8))
    argv = [
        "data",
        "corrupt",
        "--dataset",
        "synthetic:test=4",
        "--corruptions",
        "fog",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(argv) == 1
    assert "already holds fog.npy" in capsys.readouterr().err
    assert np.load(released).shape == (5, 32, 32, 3)
    assert main([*argv, "--force"]) == 0
    assert np.load(released).shape == (20, 32, 32, 3)


@pytest.mark.parametrize("command", [["data", "info"], ["data", "corrupt"], ["train", "tiny"], ["eval"], ["search"]])
def test_a_missing_dataset_hint_names_only_flags_the_command_has(tmp_path, capsys, command):
    import re

    argv = [*command, "--dataset", "cifar100", "--data-root", str(tmp_path / "data")]
    if command == ["eval"]:
        argv.insert(1, str(_micro_checkpoint(tmp_path)))
    if command[0] in ("data", "train", "search") and command != ["data", "info"]:
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 1
    captured = capsys.readouterr()
    hint = captured.out + captured.err
    assert "CIFAR-100 not found" in hint and not (tmp_path / "out").exists()  # and no empty --out left
    with pytest.raises(SystemExit):
        main([*(command[:2] if command[0] == "data" else command[:1]), "--help"])
    usage = capsys.readouterr().out
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", hint))
    assert named and {flag for flag in named if flag not in usage} == set()


def _micro_checkpoint(folder):
    from archdsl.lang.spec import load_spec
    from archdsl.nn.build import build
    from archdsl.run.checkpoint import save_checkpoint

    arch = load_spec("tiny")
    path = folder / "tiny.safetensors"
    save_checkpoint(path, build(arch, seed=0), arch, {"dataset": "synthetic"})
    return path


def test_corrupt_dataset_is_the_command_as_a_function(tmp_path):
    from archdsl.data import corrupt_dataset, corruption_names
    from archdsl.data.corruptions import CORRUPTIONS, EXTRA_CORRUPTIONS

    written = corrupt_dataset("synthetic:test=6", tmp_path, ["fog"], seed=1, progress=False)
    assert written.corruptions == ("fog",) and written.images == 6
    assert sorted(p.name for p in written.files) == ["fog.npy", "labels.npy"]
    assert np.load(tmp_path / "fog.npy").shape == (30, 32, 32, 3)
    with pytest.raises(UserError, match="already holds fog.npy"):
        corrupt_dataset("synthetic:test=6", tmp_path, ["fog"], progress=False)
    again = corrupt_dataset("synthetic:test=6", tmp_path, ["fog"], seed=1, overwrite=True, progress=False)
    assert again.files == written.files

    assert corruption_names(None) == CORRUPTIONS
    assert corruption_names(["all"]) == CORRUPTIONS + EXTRA_CORRUPTIONS
    assert corruption_names(["fog", "snow"]) == ("fog", "snow")


def test_official_checksums_are_only_cifar_s(tmp_path):
    from archdsl.data import matches_official_release

    with pytest.raises(UserError, match="only CIFAR files have official checksums"):
        matches_official_release("synthetic", tmp_path)


def test_why_missing_says_what_loading_would(tmp_path):
    from archdsl.data import fetch_dataset, why_missing

    assert why_missing("synthetic:test=4") is None  # built in: always there
    fetch_dataset("synthetic:test=4", download=False)
    problem = why_missing("cifar10", tmp_path)
    assert isinstance(problem, UserError) and problem.hint  # where to put the files, or --download
    with pytest.raises(UserError) as info:
        fetch_dataset("cifar10-c", tmp_path, download=False)
    assert why_missing("cifar10-c", tmp_path).message == info.value.message


def test_data_help_names_every_dataset(capsys):
    from archdsl.data import dataset_names

    with pytest.raises(SystemExit):
        main(["data", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"Datasets: {', '.join(dataset_names())}." in out


def test_info_counts_the_images_a_data_root_holds(tmp_path, capsys):
    from test_data_cifar import write_cifar100

    write_cifar100(tmp_path, count=20)  # 20 training and 20 test images in the real format
    assert main(["data", "info", "--dataset", "cifar100", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "splits:   train 20, test 20, counted on disk (the full set: train 50,000, test 10,000)" in out, out
