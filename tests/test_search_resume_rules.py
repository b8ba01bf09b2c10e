"""A resumed study keeps the rules it began with: another ladder of budgets (fewer --budget-steps ended in an
IndexError in `fidelity_at`) or another --keep (accepted silently, it flipped the study's answer) is refused in
one line that names the study's value and a new --study-name as the ways on (issue 57)."""

from __future__ import annotations

from pathlib import Path

import _search_support as support

from archdsl.cli import main

TABLE = Path(__file__).resolve().parent.parent / "search/tables/odd-one-out-k-8.json"


def _refusal(capsys) -> str:
    out, err = capsys.readouterr()
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert err.startswith("archdsl: error: "), err
    return err


def test_a_resume_with_another_keep_is_refused(tmp_path, capsys):
    argv = ["search", "--fidelity", f"table:{TABLE}", "--seeds", "3", "--out", str(tmp_path), "--study-name", "s"]
    assert main([*argv, "--n-trials", "2", "--no-progress"]) == 0  # the default rule: the mean
    capsys.readouterr()
    assert main([*argv, "--keep", "beyond-noise", "--no-progress"]) == 1
    err = _refusal(capsys)
    assert "keeps an MSA by mean, not beyond-noise" in err
    assert "--keep mean" in err and "--study-name" in err
    assert main([*argv, "--keep", "mean", "--no-progress"]) == 0  # the study's own rule resumes


def test_a_resume_with_fewer_budget_steps_is_refused(tmp_path, capsys):
    args = support.search_args(tmp_path, "ladder", "--budget-steps", "2", "--n-trials", "1")
    assert main(args) == 0
    capsys.readouterr()
    fewer = support.search_args(tmp_path, "ladder", "--budget-steps", "1", "--n-trials", "3")
    assert main(fewer) == 1
    err = _refusal(capsys)
    assert "climbs the budgets 1, 2, 4 epochs" in err and "not 1, 2 epochs" in err
    assert "--epochs 1 --subset 1 --budget-steps 2" in err and "--study-name" in err
