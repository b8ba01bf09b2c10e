"""A study journal's lock link left behind (a study folder moved while a worker held it): named with the way to
clear it, never an endless wait at 100 % CPU inside Optuna's lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from _search_support import search_args

from archdsl.errors import UserError
from archdsl.search.studies._journal_lock import JournalLock
from archdsl.search.studies.storage import StorageOptions, open_storage

HOUR = 3600


def _leave_dangling_lock(journal: Path, *, age_s: float) -> Path:
    """A lock link as a worker leaves it when its study folder is moved away while it writes."""
    link = Path(f"{journal}.lock")
    os.symlink("/moved-away/runs/s/study.journal", link)
    then = time.time() - age_s
    os.utime(link, (then, then), follow_symlinks=False)
    return link


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "archdsl", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def _assert_one_clear_line(result: subprocess.CompletedProcess[str], link: Path) -> None:
    assert result.returncode in (1, 2), result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("archdsl: error:")]
    assert len(errors) == 1, result.stderr
    assert str(link) in errors[0] and "does not exist" in errors[0]
    assert f"rm {link}" in result.stderr


def test_study_repair_names_a_dangling_lock_left_long_ago(tmp_path):
    journal = tmp_path / "study.journal"
    storage = open_storage(StorageOptions(url=f"journal:{journal}"), tmp_path, "s")
    optuna.create_study(storage=storage, study_name="s").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    lines = journal.read_bytes().split(b"\n")
    lines[3] = lines[3][: len(lines[3]) // 2]  # a damaged line: the repair rewrites the journal under its lock
    journal.write_bytes(b"\n".join(lines))
    link = _leave_dangling_lock(journal, age_s=HOUR)

    result = _run(["study", "repair", str(journal)], timeout=60)

    _assert_one_clear_line(result, link)
    assert not Path(f"{journal}.damaged").exists()  # nothing was rewritten
    assert os.path.islink(link)  # left for the user to judge (a worker elsewhere may hold it)


def test_search_names_a_dangling_lock_left_long_ago(tmp_path):
    journal = tmp_path / "runs" / "s" / "study.journal"
    journal.parent.mkdir(parents=True)
    link = _leave_dangling_lock(journal, age_s=HOUR)

    result = _run(search_args(tmp_path, "s", "--strategy", "random", "--objectives", "params"), timeout=120)

    _assert_one_clear_line(result, link)


def test_a_fresh_dangling_lock_is_waited_for_the_grace_period_without_spinning(tmp_path):
    journal = tmp_path / "study.journal"
    journal.touch()
    _leave_dangling_lock(journal, age_s=0)
    lock = JournalLock(journal, grace_period=2)
    started, cpu = time.monotonic(), time.process_time()
    with pytest.raises(UserError, match="has been held for 2 s"):
        lock.acquire()
    assert time.monotonic() - started >= 2
    assert time.process_time() - cpu < 0.5  # Optuna's lock spins here: a full core


def test_a_released_lock_is_taken(tmp_path):
    journal = tmp_path / "study.journal"
    journal.touch()
    lock = JournalLock(journal)
    assert lock.acquire()
    assert os.path.islink(f"{journal}.lock")
    lock.release()
    assert not os.path.lexists(f"{journal}.lock")
