"""`archdsl data list | info | corrupt` through the real command line entry point."""

from __future__ import annotations

import numpy as np

from archdsl.cli import main


def test_list_names_every_dataset(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("cifar10", "cifar100", "cifar10-c", "cifar100-c", "synthetic", "synthetic-c"):
        assert f"\n{name} " in "\n" + out


def test_info_synthetic_offline(capsys):
    assert main(["data", "info", "--dataset", "synthetic:classes=4,test=12"]) == 0
    out = capsys.readouterr().out
    assert "classes:  4" in out and "test 12" in out and "generated in memory" in out


def test_info_reports_missing_files(tmp_path, capsys):
    assert main(["data", "info", "--dataset", "cifar100", "--data-root", str(tmp_path)]) == 0
    assert f"{tmp_path / 'cifar-100-python'}  (not found)" in capsys.readouterr().out


def test_corrupt_writes_the_released_layout(tmp_path, capsys):
    out = tmp_path / "SYN-C"
    code = main(["data", "corrupt", "--dataset", "synthetic:test=20", "--out", str(out),
                 "--corruptions", "fog,pixelate", "--seed", "1", "--no-progress"])
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
