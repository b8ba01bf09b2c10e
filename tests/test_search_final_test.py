"""The test set's figures choose nothing: each trial that completes scores each of its seeds' models once on
the test split as it trains them and seals the figures on the study; when the search has ended, the report's
chosen designs have their seals opened (no design trained twice), stored on the study, labelled as not used
for selection. A replayed trial seals its table runs' test figures. And `--seeds` is 3 unless told."""

from __future__ import annotations

import csv
import dataclasses
import io
import shlex
from pathlib import Path

import _replay_support as replay_support
import _search_support as support
import numpy as np
import pytest
from optuna.trial import TrialState

import archdsl.data as data_module
from archdsl.cli import main
from archdsl.search.fidelity import measures as measure
from archdsl.search.fidelity import seeds_aside
from archdsl.search.fidelity.replay import TableRun, load_replay
from archdsl.search.report._summary import summarize_study
from archdsl.search.studies.record import (
    DIGEST_ATTR,
    METRICS_ATTR,
    NO_TABLE_FIGURES,
    NOT_USED,
    SEALED_ATTR_PREFIX,
    TEST_ATTR_PREFIX,
    read_held_out,
    trials,
)

LABEL = f"test ({NOT_USED})"


@pytest.fixture
def events(monkeypatch) -> list[tuple]:
    """What a search does, in order: each split it loads, each seed it trains and each model it scores on the test
    split."""
    found: list[tuple] = []
    load_split, train_candidate, test_accuracy = data_module.load_split, measure.train_candidate, measure.test_accuracy

    def loading(name, split, *args, **kwargs):
        found.append(("load", split))
        return load_split(name, split, *args, **kwargs)

    def training(arch, *args, seed, **kwargs):
        found.append(("train", arch.digest(), seed))
        return train_candidate(arch, *args, seed=seed, **kwargs)

    def testing(model, *args, **kwargs):
        found.append(("test",))
        return test_accuracy(model, *args, **kwargs)

    monkeypatch.setattr(data_module, "load_split", loading)
    monkeypatch.setattr(measure, "train_candidate", training)
    monkeypatch.setattr(measure, "test_accuracy", testing)
    # the calls are counted in this process: the seeds in turn (trained aside they are the same: test_seeds_aside.py)
    monkeypatch.setattr(seeds_aside, "can_train_aside", lambda *args, **kwargs: False)
    return found


def _sealed(study) -> dict[int, dict]:
    return {
        int(k[len(SEALED_ATTR_PREFIX) :]): v for k, v in study.user_attrs.items() if k.startswith(SEALED_ATTR_PREFIX)
    }


def test_no_design_is_trained_twice_and_the_chosen_designs_open_what_their_trials_sealed(tmp_path, events, capsys):
    args = support.search_args(tmp_path, "final", "--strategy", "random", "--n-trials", "3", "--seeds", "2")
    assert main([*args, "--pruner", "none", "--seed", "4"]) == 0
    assert [e for e in events if e[0] == "load"] == [("load", "train"), ("load", "test")]  # before any training
    trained = [e for e in events if e[0] == "train"]
    assert len(trained) == len(set(trained)) == 3 * 2  # three designs on two seeds, each once
    assert events.count(("test",)) == len(trained)  # each seed's model scored once on the test split
    study = support.load(tmp_path, "final")
    summary = summarize_study(study)
    chosen = [*summary.best, *summary.ties]
    complete = [t for t in trials(study) if t.state == TrialState.COMPLETE]
    sealed = _sealed(study)
    assert set(sealed) == {t.number for t in complete}  # every complete trial sealed its figures
    # ... on the study: no trial's attrs or metrics, which the samplers, the walk and the report read, hold one
    assert not [key for t in complete for key in (*t.user_attrs, *t.user_attrs[METRICS_ATTR]) if "test" in key]
    held_out = read_held_out(study)
    assert set(held_out) == {row.number for row in chosen}
    for row in chosen:  # opened as sealed: the trial's two paired seeds
        figures = held_out[row.number]
        assert figures.seeds == [4, 5] and figures.indices == [0, 1] and figures.source == "trained"
        assert figures.accuracy == sealed[row.number]["accuracy"] and len(figures.accuracy) == 2
    printed = capsys.readouterr()
    assert "final test: trial" in printed.err and LABEL in printed.out
    best = summary.best[0]
    mean = sum(held_out[best.number].accuracy) / 2
    folder = tmp_path / "runs" / "final"
    assert f"{LABEL}: {mean:.4g}" in (folder / "report" / "report.md").read_text().lower()
    [arch_file] = (folder / "best").glob("*.arch")
    assert f"# {LABEL}: {mean:.4g}" in arch_file.read_text()
    rows = {r["trial"]: r for r in csv.DictReader(io.StringIO((folder / "report" / "trials.csv").read_text()))}
    assert float(rows[str(best.number)]["test_accuracy"]) == pytest.approx(mean)

    events.clear()  # the same command again: the study is done, its chosen designs have their figures
    assert main([*args, "--pruner", "none", "--seed", "4"]) == 0
    assert not [e for e in events if e[0] in ("train", "test")] and read_held_out(study) == held_out


def test_the_search_chooses_the_same_whatever_the_test_labels_say(tmp_path, monkeypatch):
    """Trials score their models on the test split: a search on the same data with the test split's labels
    changed takes the same trials, values, best design and ties; only the sealed test figures differ."""
    load_split = data_module.load_split

    def relabelled(name, split, *args, **kwargs):
        found = load_split(name, split, *args, **kwargs)
        if split != "test":
            return found
        labels = (np.asarray(found.labels) + 1) % found.num_classes  # every test image another class
        return dataclasses.replace(found, labels=labels.astype(np.int64))

    outcomes, figures = [], []
    for run in ("plain", "relabelled"):
        if run == "relabelled":
            monkeypatch.setattr(data_module, "load_split", relabelled)
        (tmp_path / run).mkdir()
        args = support.search_args(tmp_path / run, "same", "--strategy", "tpe", "--n-trials", "4", "--seeds", "2")
        assert main([*args, "--seed", "1"]) == 0
        study = support.load(tmp_path / run, "same")
        summary = summarize_study(study)
        found = [(t.number, t.state, t.user_attrs.get(DIGEST_ATTR), t.values, t.params) for t in trials(study)]
        outcomes.append((found, [r.number for r in summary.best], [r.number for r in summary.ties]))
        figures.append({n: f.accuracy for n, f in read_held_out(study).items()})
    assert outcomes[0] == outcomes[1]
    assert figures[0].keys() == figures[1].keys() and figures[0] != figures[1]


def test_a_worker_that_is_not_the_last_one_out_leaves_the_final_test_to_it(tmp_path):
    """A trial of the study still running elsewhere: the search has not ended, and no seal is opened."""
    from archdsl.search.report.final_test import run_final_test

    args = support.search_args(tmp_path, "early", "--strategy", "random", "--n-trials", "2", "--pruner", "none")
    assert main([*args, "--seeds", "2"]) == 0
    study = support.load(tmp_path, "early")
    for key in list(study.user_attrs):
        if key.startswith(TEST_ATTR_PREFIX):
            study.set_user_attr(key, None)  # as if this study had not had its final test
    study.enqueue_trial({})  # another worker's trial, waiting to run
    assert run_final_test(study) == {} and not read_held_out(study)


def test_the_chosen_designs_are_the_same_whatever_the_test_figures_say(tmp_path, space):
    """Replayed twice on one table with opposite test figures (and on the table without them, where the
    schema allows): the same trials, values and best design; only the report's test figures differ."""
    table = replay_support.make_table(space, noise=0.002)
    data = table.model_dump(by_alias=True)

    def with_test(value_of) -> Path:
        changed = {**data, "designs": [dict(d) for d in data["designs"]]}
        for design in changed["designs"]:
            design["runs"] = [{**run, "test_acc": value_of(run)} for run in design["runs"]]
        path = tmp_path / f"table-{len(list(tmp_path.glob('table-*')))}.json"
        return replay_support.write_table(path, type(table).model_validate(changed))

    def accuracy(run: dict) -> float:
        return float(run.get("val_acc", run.get("accuracy")))

    tables = [with_test(lambda run: accuracy(run) - 0.05), with_test(lambda run: 1.0 - accuracy(run))]
    if not TableRun.model_fields.get("test_acc") or not TableRun.model_fields["test_acc"].is_required():
        stripped = {**data, "designs": [dict(d) for d in data["designs"]]}
        for design in stripped["designs"]:
            design["runs"] = [{k: v for k, v in run.items() if k != "test_acc"} for run in design["runs"]]
        tables.append(replay_support.write_table(tmp_path / "table-none.json", type(table).model_validate(stripped)))
    outcomes = []
    for index, path in enumerate(tables):
        out = tmp_path / f"runs{index}"
        argv = ["search", "--dataset", replay_support.DATASET, "--base", replay_support.BASE, "--search",
                ",".join(replay_support.SEARCHED), "--fidelity", f"table:{path}", "--study-name", "same",
                "--out", str(out), "--no-progress", "--strategy", "tpe", "--n-trials", "8", "--seeds", "2"]  # fmt: skip
        assert main(argv) == 0
        study = support.load(tmp_path / f"runs{index}" / "..", "same", url=f"journal:{out / 'same' / 'study.journal'}")
        summary = summarize_study(study)
        trials = [(t.number, t.user_attrs.get(DIGEST_ATTR), t.values) for t in study.trials]
        outcomes.append((trials, [r.number for r in summary.best], [r.number for r in summary.ties]))
        held_out = read_held_out(study)
        assert set(held_out) == {r.number for r in (*summary.best, *summary.ties)}
        figures = held_out[summary.best[0].number]
        assert figures.source == "table" and figures.seeds == [0, 1]
        if path.name == "table-none.json":
            assert figures.accuracy == [] and figures.note == NO_TABLE_FIGURES
            assert f"{LABEL}: {NO_TABLE_FIGURES}" in (out / "same" / "report" / "report.md").read_text().lower()
        else:  # the table's own test figures of the runs that answered the trial: seed indices 0 and 1
            design = load_replay(f"table:{path}").by_digest[str(summary.best[0].digest)]
            runs = sorted(design.runs, key=lambda r: r.seed)
            # a field of schema /2, an extra key of /1 (where the type checker does not know it)
            assert figures.accuracy == [getattr(run, "test_acc") for run in runs[:2]]  # noqa: B009
    assert all(outcome == outcomes[0] for outcome in outcomes[1:])
    assert read_held_out(study) and f"{TEST_ATTR_PREFIX}{summary.best[0].number}" in study.user_attrs


@pytest.fixture(scope="module")
def space():
    return replay_support.the_space()


def test_the_summary_chooses_the_same_with_or_without_test_figures(tmp_path):
    args = support.search_args(tmp_path, "attrs", "--strategy", "random", "--n-trials", "3", "--pruner", "none")
    assert main([*args, "--seeds", "2"]) == 0
    study = support.load(tmp_path, "attrs")
    with_figures = summarize_study(study)
    assert with_figures.held_out
    for key in list(study.user_attrs):
        if key.startswith((TEST_ATTR_PREFIX, SEALED_ATTR_PREFIX)):
            study.set_user_attr(key, None)  # a record that does not read is left out
    without = summarize_study(study)
    assert not without.held_out
    assert [r.number for r in with_figures.best] == [r.number for r in without.best]
    assert [r.number for r in with_figures.ties] == [r.number for r in without.ties]
    assert study.best_trial.number == with_figures.best[0].number
    assert all(t.state == TrialState.COMPLETE for t in study.trials)


def test_seeds_is_3_unless_told_and_the_command_line_always_says_how_many():
    from archdsl.search.plan import reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    assert measure.Fidelity().seeds == 3
    settings = SearchSettings(study_name="s")
    for given, said in (({}, "3"), ({"seeds": 1}, "1"), ({"seeds": 2}, "2")):
        words = shlex.split(reproduce_command(plan_space(settings, given)))
        assert words[words.index("--seeds") + 1] == said
