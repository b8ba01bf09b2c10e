"""Sealed test figures are checked when they are read (hostile inputs, round 6).

A seal is an ordinary study attr (`sealed:N`), as is a chosen design's opened figures (`test:N`): anyone who
can write the storage can write them. A seal says whose it is (its trial, its design's digest, its seeds) and
is checked when the final test opens it, the opened figures when the report reads them: finite, fractions in
[0, 1], as many figures as seeds and seed indices, its own trial and design. One that fails is named as
damaged, in one line naming the trial, never shown as a figure, and the study stays reportable.
"""

from __future__ import annotations

import copy
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import _search_support as support
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search.report._summary import summarize_study
from archdsl.search.studies.record import (
    NOT_USED,
    SEALED_ATTR_PREFIX,
    TEST_ATTR_PREFIX,
    open_test,
    read_held_out,
    trials,
)

STUDY = "seals"
LABEL = f"test ({NOT_USED})"


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    """One finished search (three designs on two paired seeds), its folder; each test tampers with a copy."""
    folder = tmp_path_factory.mktemp("searched")
    args = support.search_args(folder, STUDY, "--strategy", "random", "--n-trials", "3", "--pruner", "none")
    assert main([*args, "--seeds", "2"]) == 0
    return folder


@pytest.fixture
def folder(searched, tmp_path) -> Path:
    shutil.copytree(searched / "runs", tmp_path / "runs")
    return tmp_path


def _search_again(folder: Path) -> list[str]:
    """The same command again: the study has its designs, so it trains nothing; the final test opens the seals
    of the chosen designs (whose opened figures were cleared) and the report is written."""
    args = support.search_args(folder, STUDY, "--strategy", "random", "--n-trials", "3", "--pruner", "none")
    return [*args, "--seeds", "2"]


def _best(study) -> int:
    return summarize_study(study).best[0].number


def _reopen(study, tamper: Callable[[dict], object]) -> int:
    """Clear every opened figure and replace the best trial's seal with `tamper(seal)`; the best's number."""
    best = _best(study)
    for key in list(study.user_attrs):
        if key.startswith(TEST_ATTR_PREFIX):
            study.set_user_attr(key, None)  # as if the final test had not run yet
    key = f"{SEALED_ATTR_PREFIX}{best}"
    study.set_user_attr(key, tamper(dict(study.user_attrs[key])))
    return best


def _other_trial(study, number: int) -> int:
    return next(t.number for t in trials(study, (TrialState.COMPLETE,)) if t.number != number)


TAMPERED = {
    "nan": (lambda seal: {**seal, "accuracy": [math.nan, math.nan]}, "an accuracy of nan, not a fraction in [0, 1]"),
    "out-of-range": (lambda seal: {**seal, "accuracy": [7.5, -3.0]}, "an accuracy of 7.5, not a fraction in [0, 1]"),
    "lengths": (lambda seal: {**seal, "indices": [0, 1, 2]}, "2 seeds but 3 seed indices"),  # was an IndexError
    "figures-for-fewer-seeds": (lambda seal: {**seal, "accuracy": [0.5]}, "1 figure for 2 seeds"),
    "another-design": (lambda seal: {**seal, "digest": "0" * 64}, "they name another design"),
    "unreadable": (lambda seal: "seal", "not a record of test figures"),
}


@pytest.mark.parametrize("case", TAMPERED, ids=list(TAMPERED))
def test_a_damaged_seal_is_named_in_one_line_never_a_figure_and_the_study_stays_reportable(folder, capsys, case):
    tamper, why = TAMPERED[case]
    study = support.load(folder, STUDY)
    best = _reopen(study, tamper)
    capsys.readouterr()
    assert main(_search_again(folder)) == 0
    printed = capsys.readouterr()
    said = f"{LABEL}: the sealed test figures of trial {best} are damaged ({why}): none shown"
    assert said in printed.out, printed.out
    assert "Traceback" not in printed.out + printed.err
    figures = read_held_out(study)[best]
    assert figures.accuracy == [] and f"trial {best} are damaged" in figures.note
    report = (folder / "runs" / STUDY / "report" / "report.md").read_text()
    assert f"{said[0].upper()}{said[1:]}." in report
    # ... and every later report reads it the same way
    assert main(["report", STUDY, "--out", str(folder / "runs")]) == 0
    assert said in capsys.readouterr().out


def _unowned(figures: dict) -> dict:
    """Figures as an earlier archdsl wrote them: naming no trial, nor design."""
    return {k: v for k, v in figures.items() if k not in ("trial", "digest")}


def test_a_seal_of_an_earlier_archdsl_is_shown_as_unchecked_not_damaged(folder, capsys):
    """A seal that names no trial was written by an archdsl before seals said whose they are (or edited): its
    figures are shown, marked unchecked, with the way to checked ones (issue 57: they were called damaged)."""
    study = support.load(folder, STUDY)
    best = _reopen(study, _unowned)
    seal = study.user_attrs[f"{SEALED_ATTR_PREFIX}{best}"]
    assert main(_search_again(folder)) == 0
    out = capsys.readouterr().out
    assert "damaged" not in out, out
    line = next(line for line in out.splitlines() if LABEL in line)  # the best design's
    assert f"{LABEL}: {seal['accuracy'][0]:.4g}"[:20] in line or "±" in line, line
    assert "unchecked (sealed by an earlier archdsl: they name no trial" in line and "--study-name" in line, line
    figures = read_held_out(study)[best]
    assert figures.accuracy == seal["accuracy"] and figures.unchecked
    assert "unchecked" in (folder / "runs" / STUDY / "report" / "report.md").read_text()


def test_opened_figures_of_an_earlier_archdsl_are_shown_as_unchecked(folder, capsys):
    study = support.load(folder, STUDY)
    best = _best(study)
    key = f"{TEST_ATTR_PREFIX}{best}"
    study.set_user_attr(key, _unowned(study.user_attrs[key]))
    capsys.readouterr()
    assert main(["report", STUDY, "--out", str(folder / "runs")]) == 0
    out = capsys.readouterr().out
    line = out.split(LABEL)[1].splitlines()[0]
    assert "damaged" not in line and "±" in line and "unchecked" in line, line


def test_a_seal_copied_from_another_trial_is_named_as_that_trials(folder, capsys):
    study = support.load(folder, STUDY)
    best = _best(study)
    other = _other_trial(study, best)
    _reopen(study, lambda seal: study.user_attrs[f"{SEALED_ATTR_PREFIX}{other}"])
    assert main(_search_again(folder)) == 0
    out = capsys.readouterr().out
    assert f"the sealed test figures of trial {best} are damaged (they are trial {other}'s): none shown" in out


def test_a_deleted_seal_is_said_to_be_missing_not_older_than_seals(folder, capsys):
    study = support.load(folder, STUDY)
    best = _reopen(study, lambda seal: None)
    assert main(_search_again(folder)) == 0
    out = capsys.readouterr().out
    assert f"{LABEL}: the seal of trial {best} is missing (removed from the study): none shown" in out, out
    assert "before trials sealed them" not in out


@pytest.mark.parametrize(
    "opened, why",
    [
        ({"seeds": [4, 5], "accuracy": [math.nan, 0.5], "indices": [0, 1]}, "an accuracy of nan"),
        ({"seeds": [4, 5], "accuracy": [7.5, -3.0], "indices": [0, 1]}, "an accuracy of 7.5"),
        ({"seeds": [4], "accuracy": [0.5, 0.5], "indices": [0, 1]}, "1 seed but 2 seed indices"),
    ],
    ids=["nan", "out-of-range", "lengths"],
)
def test_damaged_opened_figures_are_named_and_every_report_still_reads(folder, capsys, opened, why):
    """Figures already opened (`test:N`) that are damaged, by an edit or by an archdsl that opened a NaN seal:
    every report used to end in a traceback; now it names them."""
    study = support.load(folder, STUDY)
    best = _best(study)
    digest = summarize_study(study).best[0].digest
    study.set_user_attr(f"{TEST_ATTR_PREFIX}{best}", {**opened, "trial": best, "digest": digest})
    capsys.readouterr()
    assert main(["report", STUDY, "--out", str(folder / "runs")]) == 0
    out = capsys.readouterr().out
    assert f"{LABEL}: the test figures opened for trial {best} are damaged ({why}" in out, out
    assert "±" not in out.split(LABEL)[1].splitlines()[0]


def test_a_seals_note_reaches_neither_the_terminal_nor_report_md_raw(folder, capsys):
    study = support.load(folder, STUDY)
    best = _reopen(study, lambda seal: {**seal, "accuracy": [], "note": "none\x1b[2J\x1b[31m"})
    assert main(_search_again(folder)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "none\\x1b[2J\\x1b[31m" in out
    report = (folder / "runs" / STUDY / "report" / "report.md").read_text()
    assert "\x1b" not in report and "none\\x1b[2J\\x1b[31m" in report
    assert read_held_out(study)[best].accuracy == []


def test_a_seal_says_whose_it_is(folder):
    study = support.load(folder, STUDY)
    for t in trials(study, (TrialState.COMPLETE,)):
        seal = study.user_attrs[f"{SEALED_ATTR_PREFIX}{t.number}"]
        assert seal["trial"] == t.number and seal["digest"] == t.user_attrs["digest"] and len(seal["seeds"]) == 2


def test_open_test_of_a_design_without_seals_still_says_why(folder):
    """A trial that ran before trials sealed their figures: no seal, and no mark that it wrote one."""
    study = support.load(folder, STUDY)
    best = _best(study)
    unsealed = copy.deepcopy(next(t for t in trials(study) if t.number == best))
    unsealed.system_attrs = {}
    study.set_user_attr(f"{SEALED_ATTR_PREFIX}{best}", None)
    figures = open_test(study, best, [unsealed])
    assert figures.accuracy == []
    assert figures.note == "no sealed test figures (its trials ran before trials sealed them)"
