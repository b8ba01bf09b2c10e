"""The search report from a study's storage alone: files written, and no global state touched."""

from __future__ import annotations

import csv
import datetime
import io
import threading

import _search_support as support
import matplotlib
import matplotlib.pyplot as plt
import optuna
import pytest
from matplotlib.collections import QuadMesh
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.files import held_lock
from archdsl.search import summarize_study, trials_csv
from archdsl.search.report._figures import MIN_TRIALS_FOR_IMPORTANCE, make_figures
from archdsl.search.report._markdown import markdown
from archdsl.search.report._summary import PRUNED_MARK
from archdsl.search.report.write import REPORT_LOCK, write_report
from archdsl.search.runner import open_study
from archdsl.search.studies.record import DIGEST_ATTR, LAYOUT_ATTR, SPEC_ATTR


def _study(values: list[float], short_ids: dict[int, str] | None = None) -> optuna.Study:
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
                    "short_id": (short_ids or {}).get(number, f"id{number}"),
                    "n_msa": number % 2 + number % 3,
                    SPEC_ATTR: f"arch trial{number} {{}}\n",
                    LAYOUT_ATTR: f"c1:{'CM' if number % 2 else 'CC'} c2:{'CM' * (number % 3) or 'CC'}",
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
    style_before = dict(matplotlib.rcParams)
    paths = write_report(study, tmp_path / "made-by-hand")
    assert matplotlib.get_backend() == "pdf"  # a library call must not switch the process's backend
    assert plt.get_fignums() == open_before  # nor leave figures registered in pyplot
    assert dict(matplotlib.rcParams) == style_before  # nor keep Optuna's ggplot style
    assert paths.report.read_text().startswith("# Search report: made-by-hand")
    assert {"history", "msa"} <= set(paths.figures)
    assert all(path.stat().st_size > 0 for path in paths.figures.values())
    [(number, best)] = paths.best.items()
    header, spec = best.read_text().split("\narch ", 1)
    assert number == 4 and spec == "trial4 {}\n"
    assert header.startswith("# trial 4 of study made-by-hand") and "# test (not used for selection)" in header
    assert "best: trial 4" in paths.summary_text


def test_a_shrinking_front_removes_old_winners(tmp_path):
    folder = tmp_path / "made-by-hand"
    first = write_report(_study([0.2, 0.9]), folder)
    second = write_report(_study([0.7, 0.2]), folder)
    assert not next(iter(first.best.values())).exists()
    assert sorted(p.name for p in (folder / "best").iterdir()) == [p.name for p in second.best.values()]
    assert summarize_study(_study([0.7, 0.2])).best[0].number == 0


def test_a_report_leaves_the_files_another_writer_has_in_progress(tmp_path):
    """Two workers of a study that finish together both write its report: neither may remove the
    other's temporary files (their rename would fail: 'No such file or directory')."""
    folder = tmp_path / "made-by-hand"
    (folder / "report").mkdir(parents=True)
    (folder / "best").mkdir()
    in_progress = [folder / "report" / ".history.k2x9q1.tmp.png", folder / "best" / ".1-trial4-id4.w8e3.tmp.arch"]
    for path in in_progress:
        path.write_bytes(b"half written")
    write_report(_study([0.2, 0.9]), folder)
    assert all(path.read_bytes() == b"half written" for path in in_progress)


def test_two_writers_of_one_report_take_turns(tmp_path):
    """While one process holds the study's report lock, another's write_report waits for it."""
    folder = tmp_path / "made-by-hand"
    done = threading.Event()
    writer = threading.Thread(target=lambda: (write_report(_study([0.2, 0.9]), folder), done.set()))
    with held_lock(folder / REPORT_LOCK):  # a second open file: flock makes even a thread of this process wait
        writer.start()
        assert not done.wait(timeout=1.0), "write_report did not wait for the lock"
        assert not (folder / "report" / "report.md").exists()
    writer.join(timeout=60)
    assert done.is_set() and (folder / "report" / "report.md").is_file()


def test_a_writer_that_waited_for_its_turn_reports_the_study_as_it_is_then(tmp_path):
    """A worker that reads the study before it waits would, writing last, replace a newer report
    with an older one: the trials finished meanwhile are in the report all the same."""
    folder = tmp_path / "made-by-hand"
    study = _study([0.2, 0.5])
    done = threading.Event()
    writer = threading.Thread(target=lambda: (write_report(study, folder), done.set()))
    with held_lock(folder / REPORT_LOCK):
        writer.start()
        assert not done.wait(timeout=1.0)
        finished = _study([0.2, 0.5, 0.9]).trials[-1]  # a trial another worker finished meanwhile
        study.add_trial(finished)
    writer.join(timeout=60)
    rows = list(csv.DictReader(io.StringIO((folder / "report" / "trials.csv").read_text())))
    assert len(rows) == 3
    assert [p.name for p in (folder / "best").iterdir()] == ["1-trial2-id2.arch"]


STAGES = {"c1": 2, "c2": 4}  # blocks per stage of the made-up base


def _layout(k1: int, k2: int) -> str:
    return f"c1:{'C' * (2 - 2 * k1)}{'CM' * k1} c2:{'C' * (4 - 2 * k2)}{'CM' * k2}"


def _two_objective_study(n: int, *, pruned: tuple[int, ...] = (), failed: tuple[int, ...] = ()) -> optuna.Study:
    """accuracy (max) and params (min) over k_c1 in 0..1, k_c2 in 0..2, with pruned and failed trials."""
    study = optuna.create_study(directions=["maximize", "minimize"], study_name="two")
    study.set_user_attr("objectives", "accuracy,params")
    study.set_user_attr("strategy", "nsga2")
    study.set_user_attr("command", "archdsl search --objectives accuracy,params --n-trials 9")
    start = datetime.datetime(2026, 1, 1)
    for number in range(n):
        k1, k2 = number % 2, number % 3
        state = TrialState.PRUNED if number in pruned else TrialState.FAIL if number in failed else TrialState.COMPLETE
        trial = optuna.create_trial(
            state=state,
            values=[0.5 + 0.05 * k2 - 0.01 * number, 1000.0 + 100 * (k1 + k2)]
            if state == TrialState.COMPLETE
            else None,
            params={"k_c1": k1, "k_c2": k2},
            distributions={"k_c1": IntDistribution(0, 1), "k_c2": IntDistribution(0, 2)},
            user_attrs={
                DIGEST_ATTR: f"d{number}",
                "short_id": f"id{number}",
                "n_msa": k1 + k2,
                LAYOUT_ATTR: _layout(k1, k2),
            },
        )
        trial.datetime_start = start + datetime.timedelta(minutes=number)
        trial.datetime_complete = trial.datetime_start + datetime.timedelta(seconds=30 + number)
        study.add_trial(trial)
    return study


def test_the_trials_table_has_one_column_per_objective_a_design_and_a_time():
    summary = summarize_study(_two_objective_study(4))
    text = markdown(summary, {}, {})
    header = next(line for line in text.splitlines() if line.startswith("| trial"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells == ["trial", "state", "MSA", "design", "accuracy", "params", "time", "note"]  # params once
    row = next(line for line in text.splitlines() if line.startswith("| 3 |"))
    assert "`c1:CM c2:CCCC`" in row and "33 s" in row  # trial 3: k = (1, 0), 30 + 3 seconds
    assert "- reproduce: `archdsl search --objectives accuracy,params --n-trials 9`" in text


def test_a_pruned_trial_value_carries_a_marker_that_the_report_explains():
    study = optuna.create_study(direction="maximize", study_name="one")
    study.set_user_attr("objectives", "accuracy")
    for number, state in enumerate([TrialState.COMPLETE, TrialState.PRUNED]):
        study.add_trial(
            optuna.create_trial(
                state=state,
                value=0.4 if state == TrialState.COMPLETE else 0.25,  # Optuna keeps a pruned trial's last value
                intermediate_values={0: 0.25} if state == TrialState.PRUNED else {},
                params={"k_c1": number},
                distributions={"k_c1": IntDistribution(0, 1)},
                user_attrs={LAYOUT_ATTR: f"c1:{'CM' if number else 'CC'}"},
            )
        )
    summary = summarize_study(study)
    text = markdown(summary, {}, {})
    pruned = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert "PRUNED" in pruned and f"0.25 {PRUNED_MARK}" in pruned
    assert f"{PRUNED_MARK} pruned: the last value" in text
    assert f"0.4 {PRUNED_MARK}" not in text


def test_trials_csv_reads_back_with_a_column_per_objective_and_parameter():
    rows = list(csv.DictReader(io.StringIO(trials_csv(summarize_study(_two_objective_study(5, failed=(4,)))))))
    assert list(rows[0]) == [
        "trial", "state", "accuracy", "params", "msa", "layout", "k_c1", "k_c2", "step", "seconds", "note",
    ]  # fmt: skip
    assert [r["state"] for r in rows] == ["COMPLETE"] * 4 + ["FAIL"]
    assert float(rows[2]["params"]) == 1200.0 and rows[2]["layout"] == "c1:CC c2:CMCM"
    assert rows[4]["accuracy"] == "" and float(rows[4]["seconds"]) == 34.0


def test_msa_figure_shows_where_every_trial_put_its_msas_pruned_ones_included():
    study = _two_objective_study(6, pruned=(2,), failed=(5,))
    figures = make_figures(study, summarize_study(study))
    bottom = figures["msa"].axes[1]
    [mesh] = [c for c in bottom.collections if isinstance(c, QuadMesh)]
    counts = mesh.get_array().reshape(2, 6)  # stages x trials, the pruned and failed ones too
    assert counts[:, 2].tolist() == [0, 2] and counts[:, 3].tolist() == [1, 0]
    assert [t.get_text() for t in bottom.get_yticklabels()] == ["c1", "c2"]


def test_history_ticks_are_whole_trials_and_pareto_points_say_their_layout():
    study = _two_objective_study(5)
    figures = make_figures(study, summarize_study(study))
    history = figures["history"].axes[0]
    figures["history"].canvas.draw()
    ticks = [t for t in history.get_xticks() if history.get_xlim()[0] <= t <= history.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    labels = {t.get_text() for t in figures["pareto"].axes[0].texts}
    front = summarize_study(study).best
    assert {"(" + ",".join(str(k) for k in r.msa_per_stage.values()) + ")" for r in front} <= labels


def test_no_importance_plot_below_the_minimum_and_the_report_says_why(tmp_path):
    few = _study([0.1 * i for i in range(MIN_TRIALS_FOR_IMPORTANCE - 1)])
    paths = write_report(few, tmp_path / "few")
    assert "importance" not in paths.figures
    assert f"it needs {MIN_TRIALS_FOR_IMPORTANCE}" in paths.report.read_text()
    enough = _study([0.1 * (i % 4) for i in range(MIN_TRIALS_FOR_IMPORTANCE)])
    paths = write_report(enough, tmp_path / "enough")
    assert "importance" in paths.figures and "a rough guide" in paths.report.read_text()


def test_archdsl_studies_name_their_objectives_for_the_dashboard(tmp_path):
    study = open_study(support.plan_for(tmp_path, "named", "accuracy,params", strategy="tpe"))
    assert study.metric_names == ["accuracy", "params"]


def test_report_csv_prints_the_table_and_writes_nothing(tmp_path, capsys):
    study = open_study(support.plan_for(tmp_path / "runs", "table", "accuracy,params", strategy="tpe"))
    for trial in _two_objective_study(3).trials:
        study.add_trial(trial)
    assert main(["report", "table", "--out", str(tmp_path / "runs"), "--csv"]) == 0
    printed = capsys.readouterr().out
    assert printed == trials_csv(summarize_study(study))
    assert not (tmp_path / "runs" / "table" / "report").exists()


@pytest.mark.parametrize("short_id", ["../../../escaped", "/tmp/abs", "a/b\x1b[2J", "..", "x" * 500])
def test_a_name_read_from_storage_never_leaves_the_best_folder(tmp_path, short_id):
    paths = write_report(_study([0.2, 0.9], {1: short_id}), tmp_path / "study")
    (best,) = paths.best.values()
    assert best.parent == tmp_path / "study" / "best" and best.name.startswith("1-trial1-")
    assert len(best.name) < 100 and "/" not in best.name[len("1-trial1-") :] and "\x1b" not in best.name
    assert sorted(p.name for p in tmp_path.rglob("*.arch")) == [best.name]


@pytest.mark.parametrize("name", ["study\n", "ok\nrm -rf", "../up", "a/b", "x" * 200])
def test_a_study_name_is_checked_in_full(tmp_path, capsys, name):
    assert main(["report", name, "--out", str(tmp_path)]) == 2
    assert "bad study name" in capsys.readouterr().err


def test_one_copy_is_one_copy_and_running_trials_are_counted_in_the_summary():
    from archdsl.search.report._lines import summary_text
    from archdsl.search.studies.record import COPY_ATTR

    study = _study([0.5, 0.6])
    study.add_trial(optuna.create_trial(state=TrialState.FAIL, user_attrs={COPY_ATTR: 0}))
    study.enqueue_trial({"k_c1": 1, "k_c2": 1})
    study.ask()  # the queued design, now running on some worker
    summary = summarize_study(study)
    text = summary_text(summary)
    assert "1 copy drawn again" in text and "copies" not in text
    assert "3 trials (2 complete, 0 pruned, 0 failed, 1 running)" in text
    assert "1 copy drawn again (not counted)" in markdown(summary, {}, {})


def test_a_retried_design_is_marked_as_a_retry_of_the_trial_it_repeats():
    from archdsl.search import trial_line
    from archdsl.search._optuna_private import FAILED_TRIAL_ATTR, RETRY_HISTORY_ATTR

    study = _study([0.5])
    killed = optuna.create_trial(
        state=TrialState.FAIL, params={"k_c1": 1, "k_c2": 2},
        distributions={"k_c1": IntDistribution(0, 1), "k_c2": IntDistribution(0, 2)},
    )  # fmt: skip
    study.add_trial(killed)
    killed = study.get_trials()[-1]
    retry = optuna.create_trial(
        state=TrialState.COMPLETE, value=0.7, params=killed.params, distributions=killed.distributions,
        system_attrs={FAILED_TRIAL_ATTR: killed.number, RETRY_HISTORY_ATTR: [killed.number]},  # as Optuna writes them
        user_attrs={DIGEST_ATTR: "digest-retried"},
    )  # fmt: skip
    study.add_trial(retry)
    rows = {row.number: row for row in summarize_study(study).rows}
    assert "retry of trial 1" in rows[2].note and "retry" not in rows[0].note
    assert "retry of trial 1" in trial_line(study, study.trials[2])
    assert "| retry of trial 1 |" in markdown(summarize_study(study), {}, {})


def test_a_note_with_a_bar_or_a_line_break_stays_in_its_cell_escaped_as_every_table_escapes_it():
    # The trials table wrote a `|` of a note as `/`, where the docs' tables write `\|`: one rule now (archdsl.markdown).
    study = _study([0.5])
    study.add_trial(
        optuna.create_trial(
            state=TrialState.FAIL,
            params={"k_c1": 1, "k_c2": 2},
            distributions={"k_c1": IntDistribution(0, 1), "k_c2": IntDistribution(0, 2)},
            user_attrs={"fail_reason": "out of memory | at batch 3\nsee the log"},
        )
    )
    row = next(line for line in markdown(summarize_study(study), {}, {}).splitlines() if line.startswith("| 1 |"))
    assert row.endswith("| out of memory \\| at batch 3 see the log |")
