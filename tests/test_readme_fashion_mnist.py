"""docs/tutorials.md's "A day on Fashion-MNIST" runs as written: train, the default analysis, a search by
two workers on one journal, and the report, on the real Fashion-MNIST of the Debian package.

Each command runs as its own process from the same working folder, as a user types them: a line
ending in ` &` starts in the background (the first search worker) and `wait` waits for it. A shown
output line must be printed by its command, numbers masked (tests/_doc_files.py), as in the
general runner (tests/test_docs_console.py), which leaves this section to this test.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _doc_files import console_steps, mask_numbers, section

DOC = Path(__file__).resolve().parent.parent / "docs" / "tutorials.md"  # (these sections were the README's)
TITLE = "A day on Fashion-MNIST"
DEBIAN_FOLDER = Path("/usr/share/datasets/fashion-mnist")  # the package dataset-fashion-mnist; CI installs it
TIMEOUT = 900  # seconds per command: a stuck worker fails the test instead of hanging it


def _steps() -> list[tuple[str, list[str]]]:
    """(command line, the lines shown under it) for every `$ ` line of the section, in order."""
    return console_steps(section(DOC.read_text(encoding="utf-8"), TITLE))


def test_the_section_is_there_and_runs_what_the_issue_asks():
    commands = [command for command, _ in _steps()]
    words = [shlex.split(c.removesuffix("&"))[:2] for c in commands if c != "wait"]
    assert [w[1] for w in words] == ["train", "analyze", "search", "search", "report"]
    assert "train=" in commands[0] and "test=" in commands[0]  # the dataset options analyze must carry
    assert "--metrics" not in commands[1]  # the default measures
    assert commands[2].endswith("&") and "--base" not in commands[2]  # two workers, a data-fitted base


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN_FOLDER.is_dir(), reason="needs Fashion-MNIST: apt-get install dataset-fashion-mnist")
def test_a_day_on_fashion_mnist_runs_as_the_tutorial_shows(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread per process: two workers share the cores
    background: list[tuple[str, list[str], subprocess.Popen]] = []

    def check(command: str, shown: list[str], status: int, output: str) -> None:
        assert status == 0, f"`{command}` exited {status}:\n{output}"
        printed = {mask_numbers(line) for line in output.splitlines()}
        for line in shown:
            assert mask_numbers(line) in printed, f"`{command}` no longer prints {line!r}:\n{output}"

    for command, shown in _steps():
        if command == "wait":
            for started, lines, process in background:
                output, _ = process.communicate(timeout=TIMEOUT)
                check(started, lines, process.returncode, output)
            background.clear()
            continue
        argv = shlex.split(command.removesuffix("&"))
        assert argv[0] == "archdsl", command
        process = subprocess.Popen(
            [sys.executable, "-m", "archdsl", *argv[1:]], cwd=tmp_path, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        if command.endswith("&"):
            background.append((command, shown, process))
            continue
        output, _ = process.communicate(timeout=TIMEOUT)
        check(command, shown, process.returncode, output)
    assert not background, "a worker started with & was never waited for"
    assert (tmp_path / "runs" / "fmnist-search" / "report" / "report.md").is_file()
