"""docs/tutorials.md's "Search on your own images" runs as written: its first Python block writes a folder of
Fashion-MNIST PNGs (the Debian package), then each `$ ` line runs as its own process in the same
working folder, and every line shown under it must be printed (numbers masked, tests/_doc_files.py).
Its second block saves a Hugging Face dataset of the same images, and the same commands take both
through train, analyze (robustness included) and search: issue 29's "done when"."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _doc_files import console_steps, mask_numbers, section

from archdsl.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "tutorials.md"  # (these sections were the README's)
TITLE = "Search on your own images"
DEBIAN_FOLDER = Path("/usr/share/datasets/fashion-mnist")  # the package dataset-fashion-mnist; CI installs it
PYTHON = re.compile(r"^```python[ \t]*\n(.*?)^```", re.M | re.S)
TIMEOUT = 900  # seconds per command


def _text() -> str:
    return section(DOC.read_text(encoding="utf-8"), TITLE)


def _steps() -> list[tuple[str, list[str]]]:
    return console_steps(_text())


def test_the_section_writes_a_folder_then_trains_analyzes_and_searches_it():
    assert len(PYTHON.findall(_text())) == 2
    commands = [shlex.split(command)[:2] for command, _ in _steps()]
    assert commands == [["archdsl", "data"], ["archdsl", "train"], ["archdsl", "analyze"], ["archdsl", "search"]]
    assert all("folder:clothes" in command for command, _ in _steps() if "analyze" not in command)
    assert "robustness" in _steps()[2][0]


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN_FOLDER.is_dir(), reason="needs Fashion-MNIST: apt-get install dataset-fashion-mnist")
def test_search_on_your_own_images_runs_as_the_tutorial_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer, _ = PYTHON.findall(_text())
    exec(compile(writer, "tutorials.md[own images]", "exec"), {"__name__": "__readme__"})
    assert len(list((tmp_path / "clothes" / "train").glob("*/*.png"))) == 300
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for command, shown in _steps():
        argv = shlex.split(command)
        done = subprocess.run(
            [sys.executable, "-m", "archdsl", *argv[1:]], cwd=tmp_path, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT,
        )  # fmt: skip
        assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stdout}"
        printed = {mask_numbers(line) for line in done.stdout.splitlines()}
        for line in shown:
            assert mask_numbers(line) in printed, f"`{command}` no longer prints {line!r}:\n{done.stdout}"


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN_FOLDER.is_dir(), reason="needs Fashion-MNIST: apt-get install dataset-fashion-mnist")
@pytest.mark.parametrize("kind", ["folder", pytest.param("hf", marks=pytest.mark.extras)])
def test_a_folder_and_a_saved_hugging_face_dataset_go_through_train_analyze_and_search(tmp_path, monkeypatch, kind):
    """The section's commands on its folder, or with `hf:clothes-hf` for it, at tiny settings
    (100 training and 50 test images, one seed): each command succeeds and leaves what it promises."""
    monkeypatch.chdir(tmp_path)
    writer, saver = PYTHON.findall(_text())
    exec(compile(writer, "tutorials.md[own images]", "exec"), {"__name__": "__readme__"})
    if kind == "hf":
        datasets = pytest.importorskip("datasets")
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")  # not the user's cache
        exec(compile(saver, "tutorials.md[hugging face]", "exec"), {"__name__": "__readme__"})
    for command, _ in _steps():
        argv = shlex.split(command)[1:]
        if "--dataset" in argv:
            at = argv.index("--dataset") + 1
            name = argv[at].replace("folder:clothes", "hf:clothes-hf") if kind == "hf" else argv[at]
            argv[at] = f"{name},train=100,test=50"
        if argv[0] == "search":
            argv += ["--seeds", "1"]
        assert main(argv) == 0, command
    assert (tmp_path / "runs" / "clothes" / "final.safetensors").is_file()
    measured = json.loads((tmp_path / "runs" / "clothes" / "final-analysis" / "metrics.json").read_text())
    assert measured["dataset"].startswith(f"{kind}:clothes") and len(measured["robustness"]["cells"]) == 9, measured
    assert (tmp_path / "runs" / "clothes" / "report" / "report.md").is_file()
