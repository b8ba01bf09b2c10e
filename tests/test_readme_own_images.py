"""The README's "Search on your own images" runs as written: its Python block writes a folder of
Fashion-MNIST PNGs (the Debian package), then each `$ ` line runs as its own process in the same
working folder, and every line shown under it must be printed (numbers masked, tests/_doc_files.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _doc_files import console_steps, mask_numbers, section

README = Path(__file__).resolve().parent.parent / "README.md"
TITLE = "Search on your own images"
DEBIAN_FOLDER = Path("/usr/share/datasets/fashion-mnist")  # the package dataset-fashion-mnist; CI installs it
PYTHON = re.compile(r"^```python[ \t]*\n(.*?)^```", re.M | re.S)
TIMEOUT = 900  # seconds per command


def _text() -> str:
    return section(README.read_text(encoding="utf-8"), TITLE)


def _steps() -> list[tuple[str, list[str]]]:
    return console_steps(_text())


def test_the_section_writes_a_folder_and_searches_it():
    assert len(PYTHON.findall(_text())) == 1
    commands = [shlex.split(command)[:2] for command, _ in _steps()]
    assert commands == [["archdsl", "data"], ["archdsl", "search"]]
    assert all("folder:clothes" in command for command, _ in _steps())


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN_FOLDER.is_dir(), reason="needs Fashion-MNIST: apt-get install dataset-fashion-mnist")
def test_search_on_your_own_images_runs_as_the_readme_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [writer] = PYTHON.findall(_text())
    exec(compile(writer, "README.md[own images]", "exec"), {"__name__": "__readme__"})
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
