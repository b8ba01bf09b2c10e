"""`archdsl.search.load_saved_study` and `report_study`: what `archdsl report` does, called from Python."""

from __future__ import annotations

import _search_support as support
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from archdsl.errors import UsageError, UserError
from archdsl.search import load_saved_study, report_study, summarize_study, trials_csv
from archdsl.search.runner import open_study
from archdsl.search.studies.record import DIGEST_ATTR, SPEC_ATTR


def _saved(out, name: str = "saved", values=(0.4, 0.8, 0.6)) -> optuna.Study:
    """A study in its journal under `out`, as `archdsl search --out OUT --study-name NAME` leaves it."""
    study = open_study(support.plan_for(out, name, strategy="tpe"))
    for number, value in enumerate(values):
        study.add_trial(
            optuna.create_trial(
                state=TrialState.COMPLETE,
                value=value,
                params={"k_c1": number},
                distributions={"k_c1": IntDistribution(0, 2)},
                user_attrs={
                    DIGEST_ATTR: f"digest{number}",
                    "short_id": f"id{number}",
                    SPEC_ATTR: f"arch t{number} {{}}\n",
                },
            )
        )
    return study


def test_a_saved_study_reads_back_from_its_journal(tmp_path):
    written = _saved(tmp_path)
    loaded = load_saved_study("saved", out=tmp_path)
    assert [t.value for t in loaded.trials] == [t.value for t in written.trials]
    assert trials_csv(summarize_study(loaded)) == trials_csv(summarize_study(written))
    assert not (tmp_path / "saved" / "report").exists()  # reading writes nothing


def test_a_saved_study_reads_back_from_a_storage_url(tmp_path):
    _saved(tmp_path)
    journal = tmp_path / "saved" / "study.journal"
    loaded = load_saved_study("saved", storage=f"journal:{journal}", out=tmp_path / "elsewhere")
    assert len(loaded.trials) == 3


def test_report_study_writes_the_report_and_the_best_design(tmp_path):
    _saved(tmp_path)
    paths = report_study("saved", out=tmp_path)
    assert paths.report == tmp_path / "saved" / "report" / "report.md" and paths.report.exists()
    assert list(paths.best) == [1]  # the best trial, value 0.8
    assert paths.best[1].read_text().endswith("\narch t1 {}\n")  # after its header comment (test_search_final_test)


def test_a_missing_study_is_a_user_error_and_creates_nothing(tmp_path):
    with pytest.raises(UserError, match="no study 'absent' under") as info:
        load_saved_study("absent", out=tmp_path)
    assert "--out" in info.value.hint
    assert list(tmp_path.iterdir()) == []


def test_another_name_in_an_existing_storage_names_the_known_studies(tmp_path):
    _saved(tmp_path)
    journal = tmp_path / "saved" / "study.journal"
    with pytest.raises(UserError, match="no study named 'other'") as info:
        load_saved_study("other", storage=f"journal:{journal}", out=tmp_path)
    assert "saved" in info.value.hint


def test_a_path_as_study_name_is_refused(tmp_path):
    with pytest.raises(UsageError, match="bad study name"):
        load_saved_study("runs/saved", out=tmp_path)


def test_a_mistyped_journal_url_is_a_user_error_and_creates_nothing(tmp_path):
    journal = tmp_path / "typo" / "study.jornal"
    with pytest.raises(UserError, match="no study journal at .*study.jornal"):
        load_saved_study("saved", storage=f"journal:{journal}", out=tmp_path)
    assert list(tmp_path.iterdir()) == []
