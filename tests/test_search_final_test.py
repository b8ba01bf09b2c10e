"""The test set is read once, at the end of a search, for the report's chosen designs only: trained
again as their trials were (or read from a replayed study's table), stored on the study, labelled as
not used for selection, and read by nothing that chooses. And `--seeds` is 2 unless told."""

from __future__ import annotations

import csv
import io
import shlex
from pathlib import Path

import _replay_support as replay_support
import _search_support as support
import pytest
from optuna.trial import TrialState

import archdsl.data as data_module
from archdsl.cli import main
from archdsl.search import measures as measure
from archdsl.search._study_summary import summarize_study
from archdsl.search.held_out import NO_TABLE_FIGURES, NOT_USED, final_test_attr, read_held_out
from archdsl.search.record import DIGEST_ATTR
from archdsl.search.replay import TableRun, load_replay

LABEL = f"test ({NOT_USED})"


@pytest.fixture
def events(monkeypatch) -> list[tuple]:
    """What a search does, in order: each split it loads, each trial's training and each final test."""
    found: list[tuple] = []
    load_split, train_candidate, held_out = data_module.load_split, measure.train_candidate, measure.held_out_accuracy

    def loading(name, split, *args, **kwargs):
        found.append(("load", split))
        return load_split(name, split, *args, **kwargs)

    def training(arch, *args, seed, **kwargs):
        found.append(("train", arch.digest(), seed))
        return train_candidate(arch, *args, seed=seed, **kwargs)

    def testing(arch, *args, seed, **kwargs):
        found.append(("final test", arch.digest(), seed))
        return held_out(arch, *args, seed=seed, **kwargs)

    monkeypatch.setattr(data_module, "load_split", loading)
    monkeypatch.setattr(measure, "train_candidate", training)
    monkeypatch.setattr(measure, "held_out_accuracy", testing)
    return found


def test_the_test_set_is_read_once_after_every_trial_for_the_best_and_its_ties(tmp_path, events, capsys):
    args = support.search_args(tmp_path, "final", "--strategy", "random", "--n-trials", "3", "--seeds", "2")
    assert main([*args, "--pruner", "none", "--seed", "4"]) == 0
    loads = [e for e in events if e[0] == "load"]
    assert loads == [("load", "train"), ("load", "test")]
    first_test = events.index(("load", "test"))
    trials = [e for e in events[:first_test] if e[0] == "train"]
    tests = [e for e in events[first_test:] if e[0] == "final test"]
    study = support.load(tmp_path, "final")
    summary = summarize_study(study)
    chosen = [*summary.best, *summary.ties]
    assert len(trials) == 3 * 2  # three designs on two seeds, then only the final test's own trainings:
    assert not [e for e in events[first_test:] if e[0] == "train" and e not in _retrains(tests)]
    # each chosen design once, on its trial's two paired seeds, after the last trial
    assert sorted(tests) == sorted(("final test", row.digest, seed) for row in chosen for seed in (4, 5))
    held_out = read_held_out(study)
    assert set(held_out) == {row.number for row in chosen}
    for row in chosen:
        figures = held_out[row.number]
        assert figures.seeds == [4, 5] and len(figures.accuracy) == 2 and figures.source == "trained"
        # trained again as its trial was: the same validation accuracy on each seed
        assert figures.validation == pytest.approx(list(row.seed_values))
    printed = capsys.readouterr()
    assert "final test: trial" in printed.err and LABEL in printed.out
    best = summary.best[0]
    mean = sum(held_out[best.number].accuracy) / 2
    folder = tmp_path / "runs" / "final"
    assert f"{LABEL}: {mean:.4g}" in (folder / "report" / "report.md").read_text().lower()
    [arch_file] = (folder / "best").glob("*.arch")
    assert f"# {LABEL}: {mean:.4g}" in arch_file.read_text()
    rows = {r["trial"]: r for r in csv.DictReader(io.StringIO((folder / "report" / "trials.csv").read_text()))}
    assert float(rows[str(best.number)][f"test_accuracy ({NOT_USED})"]) == pytest.approx(mean)

    events.clear()  # the same command again: the study is done, its chosen designs have their figures
    assert main([*args, "--pruner", "none", "--seed", "4"]) == 0
    assert ("load", "test") not in events and not [e for e in events if e[0] == "final test"]


def _retrains(tests: list[tuple]) -> list[tuple]:
    """The trainings a final test does itself (one per design and seed)."""
    return [("train", digest, seed) for _, digest, seed in tests]


def test_a_worker_that_is_not_the_last_one_out_leaves_the_final_test_to_it(tmp_path, events):
    """A trial of the study still running elsewhere: the search has not ended, and nothing reads the test set."""
    from archdsl.search.final_test import run_final_test

    args = support.search_args(tmp_path, "early", "--strategy", "random", "--n-trials", "2", "--pruner", "none")
    assert main([*args, "--seeds", "2"]) == 0
    study = support.load(tmp_path, "early")
    for key in list(study.user_attrs):
        if key.startswith("test:"):
            study.set_user_attr(key, None)  # as if this study had not had its final test
    study.enqueue_trial({})  # another worker's trial, waiting to run
    events.clear()
    plan = support.plan_for(tmp_path, "early")
    assert run_final_test(plan, study) == {}
    assert not events


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
    assert read_held_out(study) and final_test_attr(summary.best[0].number) in study.user_attrs


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
        if key.startswith("test:"):
            study.set_user_attr(key, None)  # a record that does not read is left out
    without = summarize_study(study)
    assert not without.held_out
    assert [r.number for r in with_figures.best] == [r.number for r in without.best]
    assert [r.number for r in with_figures.ties] == [r.number for r in without.ties]
    assert study.best_trial.number == with_figures.best[0].number
    assert all(t.state == TrialState.COMPLETE for t in study.trials)


def test_seeds_is_3_unless_told_and_the_command_line_always_says_how_many():
    from archdsl.search.session import SearchSettings, plan_space, reproduce_command

    assert measure.Fidelity().seeds == 3
    settings = SearchSettings(study_name="s")
    for given, said in (({}, "3"), ({"seeds": 1}, "1"), ({"seeds": 2}, "2")):
        words = shlex.split(reproduce_command(plan_space(settings, given)))
        assert words[words.index("--seeds") + 1] == said
