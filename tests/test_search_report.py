"""The search report from a study's storage alone: files written, and no global state touched."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from archdsl.search.report import summarize_study, write_report
from archdsl.search.trial import DIGEST_ATTR, SPEC_ATTR


def _study(values: list[float]) -> optuna.Study:
    study = optuna.create_study(direction="maximize", study_name="made-by-hand")
    study.set_user_attr("objectives", "accuracy")
    study.set_user_attr("strategy", "tpe")
    for number, value in enumerate(values):
        study.add_trial(
            optuna.create_trial(
                state=TrialState.COMPLETE,
                value=value,
                params={"k_c1": number % 2, "k_c2": number % 3},
                distributions={"k_c1": IntDistribution(0, 1), "k_c2": IntDistribution(0, 2)},
                user_attrs={
                    DIGEST_ATTR: f"digest{number}",
                    "short_id": f"id{number}",
                    "n_msa": number % 2 + number % 3,
                    SPEC_ATTR: f"arch trial{number} {{}}\n",
                },
            )
        )
    return study


@pytest.fixture
def pdf_backend():
    """A backend other than the Agg that a library call might force, restored afterwards."""
    before = matplotlib.get_backend()
    plt.switch_backend("pdf")
    yield
    plt.switch_backend(before)


def test_write_report_leaves_the_backend_and_pyplot_alone(tmp_path, pdf_backend):
    study = _study([0.2, 0.5, 0.4, 0.3, 0.6])
    open_before = plt.get_fignums()
    paths = write_report(study, tmp_path / "made-by-hand")
    assert matplotlib.get_backend() == "pdf"  # a library call must not switch the process's backend
    assert plt.get_fignums() == open_before  # nor leave figures registered in pyplot
    assert paths.report.read_text().startswith("# Search report: made-by-hand")
    assert {"history", "msa"} <= set(paths.figures)
    assert all(path.stat().st_size > 0 for path in paths.figures.values())
    [(number, best)] = paths.best.items()
    assert number == 4 and best.read_text() == "arch trial4 {}\n"
    assert "best: trial 4" in paths.summary_text


def test_a_shrinking_front_removes_old_winners(tmp_path):
    folder = tmp_path / "made-by-hand"
    first = write_report(_study([0.2, 0.9]), folder)
    second = write_report(_study([0.7, 0.2]), folder)
    assert not next(iter(first.best.values())).exists()
    assert sorted(p.name for p in (folder / "best").iterdir()) == [p.name for p in second.best.values()]
    assert summarize_study(_study([0.7, 0.2])).best[0].number == 0
