"""optuna-dashboard opens a search's journal file as it is, and names its objectives and layouts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import _search_support as support
import optuna
import pytest
from optuna.distributions import IntDistribution

from archdsl.search.runner import open_study
from archdsl.search.studies.record import BUILDUP_STEP_ATTR, LAYOUT_ATTR
from archdsl.search.studies.storage import journal_path

pytest.importorskip("optuna_dashboard")  # the `distributed` extra
# Marked so .ci/run's second step (`-m "distributed or postgres"`, with the extra) runs it: the
# README's [dev] install skips it, and without the mark no CI run would.
pytestmark = pytest.mark.distributed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, deadline: float) -> dict:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_optuna_dashboard_opens_the_journal_and_shows_objective_names(tmp_path: Path) -> None:
    study = open_study(support.plan_for(tmp_path, "dash", "accuracy,params", strategy="buildup"))
    study.add_trial(
        optuna.create_trial(
            values=[0.5, 1000.0],
            params={"k_c1": 1},
            distributions={"k_c1": IntDistribution(0, 1)},
            user_attrs={LAYOUT_ATTR: "c1:CM c2:CC", BUILDUP_STEP_ATTR: "+1 MSA in c1"},
        )
    )
    port = _free_port()
    # What docs/report.md tells users to run, `optuna-dashboard runs/STUDY/study.journal`
    # (through the function its console script calls).
    command = "import sys; from optuna_dashboard._cli import main; sys.exit(main())"
    dashboard = subprocess.Popen(
        [sys.executable, "-c", command, str(journal_path(tmp_path, "dash")), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        [summary] = _get(f"http://127.0.0.1:{port}/api/studies", deadline)["study_summaries"]
        assert summary["study_name"] == "dash"
        detail = _get(f"http://127.0.0.1:{port}/api/studies/{summary['study_id']}?after=0", deadline)
    finally:
        dashboard.terminate()
        dashboard.wait(timeout=30)
    assert detail["objective_names"] == ["accuracy", "params"]  # not "Objective 0"
    [trial] = detail["trials"]
    assert {a["key"]: a["value"] for a in trial["user_attrs"]} == {
        LAYOUT_ATTR: "c1:CM c2:CC",
        BUILDUP_STEP_ATTR: "+1 MSA in c1",
    }
