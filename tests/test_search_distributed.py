"""A torchrun group as one search worker (archdsl.search.fidelity.distributed): two groups of two CPU ranks
(gloo) share one study; each design is measured once, and every rank of a group trained it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import _search_support as support
import optuna
import pytest
from optuna.trial import TrialState

POSTGRES_URL = os.environ.get("ARCHDSL_TEST_POSTGRES_URL")


def torchrun_worker(args: list[str]) -> subprocess.Popen:
    """`torchrun --standalone --nproc-per-node 2 -m archdsl ARGS`: one worker of two ranks."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "archdsl"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.Popen([*command, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _storages():
    postgres = pytest.param(
        POSTGRES_URL,
        id="postgresql",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database"),
        ],
    )
    return [pytest.param(None, id="journal"), postgres]


@pytest.mark.slow
@pytest.mark.parametrize("url", _storages())
def test_two_torchrun_groups_share_a_study_and_every_rank_trains_the_trials_design(tmp_path: Path, url) -> None:
    study_name = f"ddp-{uuid.uuid4().hex[:8]}"
    storage = ["--storage", url] if url else []
    args = support.search_args(tmp_path, study_name, "--strategy", "random", "--n-trials", "3", *storage)
    try:
        groups = [torchrun_worker([*args, "--dist-timeout", "120"]) for _ in range(2)]
        outputs = [group.communicate(timeout=600)[0] for group in groups]
        assert [group.returncode for group in groups] == [0, 0], support.both_outputs(outputs)
        for output in outputs:  # rank 0 alone speaks for its group
            assert output.count(f"search {study_name}:") == 1, output
        trials = support.load(tmp_path, study_name, url).trials
        copies = [t for t in trials if "copy_of" in t.user_attrs]
        measured = [t for t in trials if t not in copies]
        assert all(t.state == TrialState.COMPLETE for t in measured)
        digests = [t.user_attrs["digest"] for t in measured]
        assert len(set(digests)) == len(digests) >= 3, "a design was measured twice"
        for trial in measured:  # both ranks of the group built the design the trial drew
            assert trial.user_attrs["rank_digests"] == [trial.user_attrs["digest"]] * 2
    finally:
        if url:
            from archdsl.search.studies.storage import StorageOptions, open_storage

            opened = open_storage(StorageOptions(url=url), tmp_path, study_name)
            optuna.delete_study(study_name=study_name, storage=opened)


@pytest.mark.slow
def test_a_torchrun_group_trains_the_walks_raised_budgets_and_later_seeds_on_every_rank(tmp_path: Path) -> None:
    """Rank 0 sends each design with the budget it trains at and whether it scores every epoch: the other rank
    trains the same epochs (a mismatch would leave the group waiting on each other until the timeout)."""
    args = support.search_args(tmp_path, "ddp-ladder", "--seeds", "2", "--budget-steps", "1", "--n-trials", "2")
    group = torchrun_worker([*args, "--dist-timeout", "60"])
    output = group.communicate(timeout=600)[0]
    assert group.returncode == 0, output
    trials = [t for t in support.load(tmp_path, "ddp-ladder").trials if "copy_of" not in t.user_attrs]
    assert {int(t.user_attrs.get("rung", 0)) for t in trials} == {0, 1}
    for trial in trials:
        assert trial.user_attrs["rank_digests"] == [trial.user_attrs["digest"]] * 2
