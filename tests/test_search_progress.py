"""A search's progress: every trial line says `[i/N, ETA ...]`, counted over the whole study."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import _search_support as support
import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from archdsl.cli import main
from archdsl.lang.spec import parse_spec
from archdsl.search import progress_text
from archdsl.search.runner import study_progress, target_trials
from archdsl.search.space import make_space

PROGRESS = re.compile(r"\[(\d+)/(\d+)(?:, ETA [^\]]+)?\]$")


def trial_progress(err: str) -> list[tuple[int, int]]:
    """(i, N) of every counted trial line, in order."""
    found = [PROGRESS.search(line) for line in err.splitlines() if line.startswith("trial ")]
    return [(int(m[1]), int(m[2])) for m in found if m]


def test_trial_lines_count_the_whole_study_towards_n_trials(tmp_path, capsys, one_thread):
    # `params` needs no training: trials take milliseconds.
    first = support.search_args(tmp_path, "count", "--strategy", "random", "--objectives", "params", "--n-trials", "2")
    assert main(first) == 0
    err = capsys.readouterr().err
    assert trial_progress(err) == [(1, 2), (2, 2)]
    assert re.search(r"\[1/2, ETA \d", err) and err.count("[2/2]") == 1  # nothing left: no ETA
    more = support.search_args(tmp_path, "count", "--strategy", "random", "--objectives", "params", "--n-trials", "4")
    assert main(more) == 0
    assert trial_progress(capsys.readouterr().err) == [(3, 4), (4, 4)]  # the study's count, not this run's


def test_n_is_what_the_space_and_the_build_up_walk_can_reach():
    space = make_space(parse_spec(support.TINY_BASE), ("k",))  # 8 designs; stages of 2 blocks take 1 MSA each

    def plan(strategy: str, n_trials: int):
        return support.plan_for(Path("unused"), "s", "params", space=space, strategy=strategy, n_trials=n_trials)

    assert target_trials(plan("random", 20)) == space.n_designs() == 8
    assert target_trials(plan("random", 5)) == 5
    assert target_trials(plan("buildup", 20)) == 1 + 3  # the base, then at most one MSA per stage


def _measured(study: optuna.Study, digest: str, seconds: float) -> None:
    start = datetime.datetime(2026, 1, 1)
    study.add_trial(
        FrozenTrial(
            number=0,  # the storage numbers it
            trial_id=0,
            state=TrialState.COMPLETE,
            value=1.0,
            datetime_start=start,
            datetime_complete=start + datetime.timedelta(seconds=seconds),
            params={},
            distributions={},
            user_attrs={"digest": digest},
            system_attrs={},
            intermediate_values={},
        )
    )


def test_the_eta_is_the_mean_trial_time_for_the_designs_left_shared_by_the_workers_at_work():
    study = optuna.create_study()
    _measured(study, "a", 10.0)
    _measured(study, "b", 20.0)
    _measured(study, "b", 30.0)  # a design measured twice (two workers at once) counts once
    progress = study_progress(study, 5)
    assert (progress.done, progress.total) == (2, 5)
    assert progress.eta_seconds == pytest.approx(20.0 * 3)
    study.ask()  # another worker's trial, running now: two workers share what is left
    assert study_progress(study, 5).eta_seconds == pytest.approx(20.0 * 3 / 2)
    finished = study_progress(study, 2)
    assert (finished.done, finished.total, finished.eta_seconds) == (2, 2, None)
    assert progress_text(finished) == "[2/2]"
    assert progress_text(progress) == "[2/5, ETA 1:00 min]"
    assert study_progress(study, 1).total == 2  # several workers may go past N: never "2/1"
