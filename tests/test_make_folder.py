"""benchmarks/make_folder.py writes the seeded folder the own-data measurements searched (docs/results-own-data.md)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from archdsl.data import describe

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _script():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("make_folder")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_it_writes_an_image_folder_of_ten_classes_the_same_every_time(tmp_path):
    make_folder = _script()
    assert make_folder.main([str(tmp_path / "a"), "--per-class", "2", "--test-per-class", "1"]) == 0
    assert make_folder.main([str(tmp_path / "b"), "--per-class", "2", "--test-per-class", "1"]) == 0
    info = describe(f"folder:{tmp_path / 'a'}")
    assert info.num_classes == 10 and info.split_sizes == {"train": 20, "test": 10}
    first = sorted((tmp_path / "a").rglob("*.png"))
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in sorted((tmp_path / "b").rglob("*.png"))]


def test_an_output_under_a_file_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert _script().main([str(tmp_path / "file" / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error:") and len(err.strip().splitlines()) <= 2
