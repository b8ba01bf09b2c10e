"""Shared set-up of the search tests: a tiny base network and a cheap `archdsl search` line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import optuna

from archdsl.search.studies.storage import StorageOptions, open_storage

# Three stages of two basic blocks, 8-16 channels: one epoch on 96 images takes well under a second.
TINY_BASE = """\
arch tiny-search-base {
    input   3x32x32
    classes 4
    stem    conv3x3(8)
    conv  = basic

    stage c1(width=8)            { conv*2 }
    stage c2(width=16, stride=2) { conv*2 }
    stage c3(width=16, stride=2) { conv*2 }
}
"""
DATASET = "synthetic:classes=4,train=96,test=32"


def write_base(folder: Path) -> Path:
    path = folder / "tiny-search-base.arch"
    path.write_text(TINY_BASE)
    return path


def search_args(folder: Path, study: str, *extra: str) -> list[str]:
    """A complete, cheap `archdsl search` command line (without the program name)."""
    return [
        "search",
        "--dataset",
        DATASET,
        "--base",
        str(write_base(folder)),
        "--epochs",
        "1",
        "--subset",
        "1",
        "--batch-size",
        "32",
        "--device",
        "cpu",
        "--study-name",
        study,
        "--out",
        str(folder / "runs"),
        "--no-progress",
        "--seeds",  # one sample per design, for speed; a test of paired seeds gives --seeds again after this
        "1",
        "--settle-steps",  # no settle stage, for speed: tests/test_search_settle.py tries it
        "0",
        *extra,
    ]


def both_outputs(outputs: list[str]) -> str:
    """Two workers' whole outputs, one after the other: a failed assertion's message (a string, which
    pytest prints whole; a list it would cut to a line)."""
    return "".join(f"\n----- worker {n} -----\n{output}" for n, output in enumerate(outputs))


def load(folder: Path, study: str, url: str | None = None) -> optuna.Study:
    from archdsl.search.runner import load_study

    return load_study(study, open_storage(StorageOptions(url=url), folder / "runs", study))


def plan_for(
    out: Path, study: str, objectives: str = "accuracy", *, space=None, epochs: int = 2, seeds: int = 1, **settings
):
    """A study's `SearchPlan` made in Python, no dataset described: `space` (the tiny base's unless given),
    `settings` (SearchSettings fields) over the defaults, trials trained for `epochs` on `seeds` paired
    seeds. What `plan_space` makes, for a test of the runner, the trial or the study's storage."""
    from archdsl.lang.spec import parse_spec
    from archdsl.search.fidelity.measures import Fidelity
    from archdsl.search.objectives import parse_objectives
    from archdsl.search.plan import SearchPlan
    from archdsl.search.settings import SearchSettings
    from archdsl.search.space import make_space

    space = space if space is not None else make_space(parse_spec(TINY_BASE))
    return SearchPlan(
        settings=SearchSettings(out=str(out), study_name=study, objectives=objectives, **settings),
        fidelity=Fidelity(epochs=epochs, seeds=seeds),
        space=space,
        objectives=parse_objectives(objectives),
        study_name=study,
        base_name=space.base.name,
    )


def spawn(args: list[str], **kwargs) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.Popen(
        [sys.executable, "-m", "archdsl", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def read_line(process: subprocess.Popen, timeout: float = 120) -> str:
    """The next line `process` prints (its stdout, a text pipe), waiting at most `timeout` seconds: a
    process that hangs before it prints is killed and the test fails, instead of blocking the run."""
    assert process.stdout is not None
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        process.kill()  # the reader sees the pipe close and ends
        raise AssertionError(f"{process.args}: no line within {timeout:g} s")
    return found[0]
