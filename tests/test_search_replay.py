"""Replayed searches (`--fidelity table:PATH`): the real search code, answered from a table in seconds.

The table is made in the test from the space and a known rule (`_replay_support.quality`), so a
test works out from the same rule what the search must do.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import _replay_support as support
import _search_support as search_support
import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search._optuna_private import fixed_params
from archdsl.search.fidelity.replay import TABLE_PREFIX, Replay, load_replay
from archdsl.search.runner import run_search
from archdsl.search.studies.record import (
    DIGEST_ATTR,
    SEALED_ATTR_PREFIX,
    SIM_SECONDS_ATTR,
    TABLE_SEED_ATTR,
    is_copy,
    is_verdict,
)
from archdsl.search.walk.planned import PlannedSampler


@pytest.fixture(scope="module")
def space():
    return support.the_space()


@pytest.fixture(scope="module")
def table_file(tmp_path_factory, space) -> Path:
    return support.write_table(tmp_path_factory.mktemp("table") / "table.json", support.make_table(space, noise=0.002))


def search_args(table: Path, out: Path, study: str, *extra: str) -> list[str]:
    return [
        "search",
        "--dataset",
        support.DATASET,
        "--base",
        support.BASE,
        "--search",
        ",".join(support.SEARCHED),
        "--fidelity",
        f"table:{table}",
        "--study-name",
        study,
        "--out",
        str(out),
        "--no-progress",
        "--seeds",  # a drawn run per trial (the tests below say which); a paired test gives --seeds again after this
        "1",
        *extra,
    ]


def replayed(
    replay: Replay,
    space,
    strategy: str,
    *,
    n_trials: int,
    pruner: str = "median",
    seed: int = 0,
    objectives: str = "accuracy",
    storage: str | None = None,
    out: Path | None = None,
) -> optuna.Study:
    """One replayed search through `run_search`, in memory unless a journal `storage` is given (no trial files)."""
    plan = search_support.plan_for(
        out or Path("unused"), "replay", objectives, space=space, epochs=replay.epochs, strategy=strategy,
        n_trials=n_trials, seed=seed, pruner=pruner, storage=storage, fidelity_source=f"{TABLE_PREFIX}{replay.source}",
    )  # fmt: skip
    study = None
    if storage is None:
        study = optuna.create_study(
            storage=optuna.storages.InMemoryStorage(),
            study_name="replay",
            directions=[o.direction for o in plan.objectives],
        )
    return run_search(dataclasses.replace(plan, replay=replay, study=study, keep_files=False)).study


def run_of(replay: Replay, trial):
    """The table's run that answered a trial."""
    runs = replay.by_digest[trial.user_attrs[DIGEST_ATTR]].runs
    return next(r for r in runs if r.seed == trial.user_attrs[TABLE_SEED_ATTR])


def verdicts(study: optuna.Study) -> list:
    return [t for t in study.get_trials(deepcopy=False) if is_verdict(t) and not is_copy(t)]


# -- what a replayed trial is --------------------------------------------------------------------


def test_a_replayed_search_answers_each_trial_from_a_run_of_its_design(tmp_path, table_file, capsys):
    out = tmp_path / "runs"
    args = search_args(table_file, out, "cli", "--strategy", "random", "--n-trials", "6", "--pruner", "none")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "replayed from the table" in err and "(simulated " in err
    table = load_replay(f"table:{table_file}")
    study = optuna.load_study(study_name="cli", storage=_journal(out / "cli" / "study.journal"))
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len({t.user_attrs[DIGEST_ATTR] for t in done}) == 6
    for t in done:
        design, run = table.by_digest[t.user_attrs[DIGEST_ATTR]], run_of(table, t)
        assert t.value == run.accuracy
        assert t.intermediate_values == {p.epoch: p.val_acc for p in run.curve}
        assert t.user_attrs[SIM_SECONDS_ATTR] == pytest.approx(run.train_time)  # accuracy only: no analysis
        assert t.user_attrs["metrics"]["params"] == design.n_params
    assert "simulated" in (out / "cli" / "report" / "report.md").read_text()


def test_an_epochs_flag_a_replay_cannot_honour_is_a_warning_not_silence(tmp_path, table_file, capsys):
    """The table's runs are as long as they are: a given --epochs of another length is said, not dropped."""
    length = load_replay(f"table:{table_file}").epochs
    for epochs, warned in ((length + 1, True), (length, False)):
        args = search_args(table_file, tmp_path / "runs", f"e{epochs}", "--strategy", "random", "--n-trials", "1")
        assert main([*args, "--epochs", str(epochs)]) == 0
        err = capsys.readouterr().err
        said = f"archdsl: warning: --epochs {epochs} does not apply to a replayed study: the table's runs are {length}"
        assert (said in err) == warned, err
        study = optuna.load_study(
            study_name=f"e{epochs}", storage=_journal(tmp_path / "runs" / f"e{epochs}" / "study.journal")
        )
        assert [len(t.intermediate_values) for t in study.trials] == [length]  # the table's length either way


def _journal(path: Path):
    from archdsl.search.studies.storage import StorageOptions, open_storage

    return open_storage(StorageOptions(url=f"journal:{path}"), path.parent, "x")


def test_the_seed_is_drawn_per_trial_from_the_search_seed(table_file, space):
    replay = load_replay(f"table:{table_file}")
    seeds = [[t.user_attrs[TABLE_SEED_ATTR] for t in verdicts(replayed(replay, space, "random", n_trials=12, seed=s))]
             for s in (0, 0, 1)]  # fmt: skip
    assert seeds[0] == seeds[1]  # reproducible
    assert len(set(seeds[0])) > 1  # several seeds answer one study
    assert seeds[0] != seeds[2]


def test_analysis_objectives_add_the_measuring_time_and_read_the_table(table_file, space):
    replay = load_replay(f"table:{table_file}")
    study = replayed(replay, space, "nsga2", n_trials=8, objectives="accuracy,robustness,latency,params")
    for t in (t for t in verdicts(study) if t.state == TrialState.COMPLETE):
        run = run_of(replay, t)
        assert t.values == [run.accuracy, run.robustness, run.latency, t.user_attrs["metrics"]["params"]]
        assert t.user_attrs[SIM_SECONDS_ATTR] == pytest.approx(run.train_time + run.measure_time)


# -- search behaviour at scale ---------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["tpe", "random", "nsga2", "grid", "buildup"])
def test_no_strategy_measures_a_design_twice(table_file, space, strategy):
    replay = load_replay(f"table:{table_file}")
    study = replayed(replay, space, strategy, n_trials=space.n_designs(), pruner="none")
    digests = [t.user_attrs[DIGEST_ATTR] for t in verdicts(study)]
    assert len(digests) == len(set(digests))
    if strategy != "buildup":
        assert len(digests) == space.n_designs()  # and it got to every design


def test_the_buildup_walk_follows_the_rule_on_a_known_table(tmp_path, space):
    """The walk's path, worked out from the fixture's rule: add at the end of the last stage while it helps."""
    replay = load_replay(f"table:{support.write_table(tmp_path / 't.json', support.make_table(space))}")
    study = replayed(replay, space, "buildup", n_trials=20, pruner="none")
    walked = [(t.user_attrs["buildup_step"], t.value) for t in sorted(verdicts(study), key=lambda t: t.number)]

    start = space.endpoints()[0].params
    current, best, expected = dict(start), support.quality(start), [("base", support.quality(start))]
    for stage in reversed([s for s in space.stages if s.max_k > 0]):
        while current[f"k_{stage.name}"] < stage.max_k:
            candidate = dict(current, **{f"k_{stage.name}": current[f"k_{stage.name}"] + 1})
            expected.append((f"+1 MSA in {stage.name}", support.quality(candidate)))
            if support.quality(candidate) <= best:
                break
            current, best = candidate, support.quality(candidate)
    assert [label for label, _ in walked] == [label for label, _ in expected]
    assert [v for _, v in walked] == pytest.approx([v for _, v in expected])


def _in_threads(work, workers: int = 3) -> None:
    """`work(seed)` on `workers` threads at once (seeds 0, 1, ...), as workers of one study; none may raise."""
    errors: list[Exception] = []

    def worker(seed: int) -> None:
        try:
            work(seed)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _walked(study: optuna.Study) -> list[tuple[str, str]]:
    """The walk's steps in a study: (label, digest) of each verdict, in trial order."""
    return [
        (t.user_attrs["buildup_step"], t.user_attrs[DIGEST_ATTR])
        for t in sorted(verdicts(study), key=lambda t: t.number)
    ]


def test_the_walk_is_proposed_by_its_sampler_in_one_optimize_call(monkeypatch, table_file, space):
    replay = load_replay(f"table:{table_file}")
    calls = []
    optimize = optuna.Study.optimize

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("n_trials"))
        return optimize(self, *args, **kwargs)

    monkeypatch.setattr(optuna.Study, "optimize", counted)
    study = replayed(replay, space, "buildup", n_trials=20, pruner="none")
    assert calls == [None]  # one call for the whole walk, no n_trials=1 steps
    assert isinstance(study.sampler, PlannedSampler)
    walked = verdicts(study)
    assert len(walked) > 2 and all(t.user_attrs["strategy"] == "buildup" for t in walked)
    assert not [t for t in walked if fixed_params(t)]  # proposed by the sampler, not enqueued


def test_a_resumed_or_shared_walk_replays_its_history(tmp_path, table_file, space):
    """Stopped after 2 designs and run again, or run by three workers on one journal, the walk takes the
    steps one worker takes alone, and no design is measured twice."""
    replay = load_replay(f"table:{table_file}")
    alone = _walked(replayed(replay, space, "buildup", n_trials=20, pruner="none"))
    journal = f"journal:{tmp_path / 'resumed.journal'}"
    assert (
        len(_walked(replayed(replay, space, "buildup", n_trials=2, pruner="none", storage=journal, out=tmp_path))) == 2
    )
    assert (
        _walked(replayed(replay, space, "buildup", n_trials=20, pruner="none", storage=journal, out=tmp_path)) == alone
    )

    shared = f"journal:{tmp_path / 'shared.journal'}"
    replayed(replay, space, "buildup", n_trials=1, pruner="none", storage=shared, out=tmp_path)  # creates the study
    _in_threads(
        lambda seed: replayed(
            replay, space, "buildup", n_trials=20, pruner="none", seed=seed, storage=shared, out=tmp_path
        )
    )
    study = optuna.load_study(study_name="replay", storage=_journal(tmp_path / "shared.journal"))
    assert _walked(study) == alone
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]


def test_a_replay_chooses_on_validation_when_the_test_set_disagrees(tmp_path, space):
    """The test top-1 is for reporting: a table whose test values rank the designs the other way round
    still has the search pick (and score) the validation-best design."""
    table = support.make_table(space, test_gain=lambda params: 1.6 - 2 * support.quality(params))  # test = 1.6 - val
    replay = load_replay(f"table:{support.write_table(tmp_path / 't.json', table)}")
    by_val = max(table.designs, key=lambda d: d.runs[0].val_acc)
    by_test = max(table.designs, key=lambda d: d.runs[0].test_acc)
    assert by_val.digest != by_test.digest  # the fixture disagrees
    study = replayed(replay, space, "grid", n_trials=space.n_designs(), pruner="none")
    assert study.best_trial.user_attrs[DIGEST_ATTR] == by_val.digest
    assert study.best_trial.value == pytest.approx(by_val.runs[0].val_acc)


@pytest.mark.parametrize("pruner", ["median", "halving", "hyperband"])
def test_pruners_stop_poor_designs_early_and_save_simulated_time(table_file, space, pruner):
    replay = load_replay(f"table:{table_file}")
    study = replayed(replay, space, "random", n_trials=space.n_designs(), pruner=pruner)
    trials = verdicts(study)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert pruned, "a random walk over every design prunes some"
    for t in pruned:
        run = run_of(replay, t)
        assert max(t.intermediate_values) < replay.epochs  # never at the last epoch
        assert t.user_attrs[SIM_SECONDS_ATTR] < run.train_time
        assert pruner.replace("halving", "successive halving") in t.user_attrs["pruned_reason"]
    # only a trial that completes seals test figures for the final test
    sealed = {int(k.split(":")[1]) for k in study.user_attrs if k.startswith(SEALED_ATTR_PREFIX)}
    assert sealed == {t.number for t in trials if t.state == TrialState.COMPLETE}
    best = max(replay.table.designs, key=lambda d: min(r.accuracy for r in d.runs))
    assert all(t.state == TrialState.COMPLETE for t in trials if t.user_attrs[DIGEST_ATTR] == best.digest)
    unpruned = replayed(replay, space, "random", n_trials=space.n_designs(), pruner="none")
    assert not [t for t in unpruned.trials if t.state == TrialState.PRUNED]


def test_a_replayed_study_resumes_where_it_stopped(tmp_path, table_file):
    out = tmp_path / "runs"
    assert main(search_args(table_file, out, "resume", "--strategy", "tpe", "--n-trials", "5")) == 0
    study = optuna.load_study(study_name="resume", storage=_journal(out / "resume" / "study.journal"))
    first = {t.number: t.user_attrs[DIGEST_ATTR] for t in verdicts(study)}
    assert main(search_args(table_file, out, "resume", "--strategy", "tpe", "--n-trials", "10")) == 0
    study = optuna.load_study(study_name="resume", storage=_journal(out / "resume" / "study.journal"))
    after = verdicts(study)
    assert len({t.user_attrs[DIGEST_ATTR] for t in after}) == len(after) == 10
    assert {t.number: t.user_attrs[DIGEST_ATTR] for t in after if t.number in first} == first


def test_several_workers_share_one_table_and_one_journal(tmp_path, table_file, space):
    replay = load_replay(f"table:{table_file}")
    journal = f"journal:{tmp_path / 'study.journal'}"
    replayed(replay, space, "random", n_trials=1, storage=journal, out=tmp_path)  # creates the study
    _in_threads(lambda seed: replayed(replay, space, "random", n_trials=12, seed=seed, storage=journal, out=tmp_path))
    study = optuna.load_study(study_name="replay", storage=_journal(tmp_path / "study.journal"))
    # A study total: the other workers may each finish the trial they were measuring when it was reached.
    assert 12 <= len({t.user_attrs[DIGEST_ATTR] for t in verdicts(study)}) <= 12 + 2
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]


def test_a_replayed_100_trial_search_runs_through(tmp_path):
    """A larger space (k, heads, window: 248 designs): 100 designs by random search with the median pruner."""
    big = support.the_space(("k", "heads", "window"))
    replay = load_replay(f"table:{support.write_table(tmp_path / 'big.json', support.make_table(big, seeds=(0, 1)))}")
    study = replayed(replay, big, "random", n_trials=100)
    assert len({t.user_attrs[DIGEST_ATTR] for t in verdicts(study)}) == 100


# -- mistakes --------------------------------------------------------------------------------------


def _edited(tmp_path: Path, table_file: Path, edit) -> Path:
    data = json.loads(table_file.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def _drop_robustness(data):
    for design in data["designs"]:
        for run in design["runs"]:
            run["robustness"] = None


def _uneven_seeds(data):
    # one design with a run of another seed: paired seed index s would read seed 7 for it, seed 0 for the others
    data["designs"][0]["runs"].append(dict(data["designs"][0]["runs"][0], seed=7))


def _drop_runs(data):
    data["designs"][3]["runs"] = []


@pytest.mark.parametrize(
    ("edit", "extra", "message"),
    [
        (None, ("--fidelity", "table:missing.json"), "no search table at missing.json"),
        (None, ("--fidelity", "table:no-such-table"), "no search table named 'no-such-table'"),
        (lambda d: d.update(schema="other/1"), (), "is not a search table of schema archdsl.search-table/2"),
        (
            lambda d: d.update(schema="archdsl.search-table/1"),
            (),
            "is a table of schema archdsl.search-table/1: it records no validation values (val_acc)",
        ),
        (lambda d: d.pop("designs"), (), "not a valid archdsl.search-table/2 table: designs"),
        (lambda d: d.update(dataset="mnist"), (), "measured mnist, not fashion-mnist"),
        (lambda d: d.update(searched=["k"]), (), "searched k, not k,init"),
        (_drop_runs, (), "has no run of 1 of the space's 16 designs"),
        (_drop_robustness, ("--objectives", "accuracy,robustness"), "records no robustness"),
        (None, ("--seeds", "4"), "--seeds 4: the table"),
        (_uneven_seeds, ("--seeds", "2"), "its designs were measured on different seeds (c1:"),
        (None, ("--seeds", "2", "--max-seeds", "5"), "--max-seeds 5: the table"),
    ],
)
def test_bad_tables_and_mismatched_searches_are_user_errors(tmp_path, table_file, capsys, edit, extra, message):
    table = _edited(tmp_path, table_file, edit) if edit is not None else table_file
    code = main([*search_args(table, tmp_path / "runs", "bad"), *extra])
    err = capsys.readouterr().err
    assert code != 0 and message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # refused before the study is made: nothing half-written


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_an_unknown_fidelity_is_a_usage_error_also_in_a_dry_run(tmp_path, table_file, capsys, dry_run):
    with pytest.raises(SystemExit) as info:
        main([*search_args(table_file, tmp_path / "runs", "bad"), "--fidelity", "cheap", *dry_run])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "unknown --fidelity 'cheap'" in err and "table:PATH" in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def test_a_table_larger_than_the_bound_is_refused_before_it_is_read(tmp_path, capsys):
    """A million designs parsed would take gigabytes: a file past the bound is refused by its size (a sparse
    file here: nothing is written, and nothing of it may be read)."""
    from archdsl.search.fidelity.replay import MAX_TABLE_BYTES

    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_TABLE_BYTES + 1)
    assert main(search_args(huge, tmp_path / "runs", "bad")) == 1
    err = capsys.readouterr().err
    assert f"{huge} is {MAX_TABLE_BYTES + 1:,} bytes; a search table holds at most {MAX_TABLE_BYTES:,} bytes" in err
    assert "Traceback" not in err and not (tmp_path / "runs").exists(), err


def test_a_file_that_is_not_json_and_another_base_are_user_errors(tmp_path, table_file, capsys):
    (tmp_path / "t.json").write_text("not json")
    assert main(search_args(tmp_path / "t.json", tmp_path / "runs", "bad")) == 1
    assert "is not a search table: not JSON" in capsys.readouterr().err
    assert main([*search_args(table_file, tmp_path / "runs", "bad"), "--base", "alter-small-base"]) == 1
    err = capsys.readouterr().err
    assert "measured the base 'resnet-fmnist', not this search's 'alter-small-base'" in err


def test_the_docs_replay_example_runs_on_the_shipped_table(tmp_path, monkeypatch, capsys):
    """docs/replay.md's replay example, as written (the slow doc runner runs it too; this one is fast)."""
    import re
    import shlex

    from _doc_files import section

    doc = Path(__file__).resolve().parent.parent / "docs" / "replay.md"
    text = section(
        doc.read_text(encoding="utf-8"), "Replay: a search answered from a measured table (`--fidelity table:...`)"
    )
    [block] = re.findall(r"^```console[ \t]*\n(.*?)^```", text, re.M | re.S)
    command, *shown = block.splitlines()
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command[len("$ archdsl ") :])) == 0
    printed = capsys.readouterr()
    eta = re.compile(r"\s*\[\d+/\d+(, ETA [^\]]*)?\]$")  # real time: the one thing that differs between runs

    def lines(text: str) -> list[str]:
        return [eta.sub("", line) for line in text.splitlines()]

    assert lines(printed.err + printed.out) == lines("\n".join(shown))


def test_the_clock_takes_a_runs_cpu_time_when_the_table_has_it():
    # A table made beside other work has wall times that hold that work too; its CPU times do not.
    from archdsl.search.fidelity.replay import TableRun

    curve = [{"epoch": 1, "val_acc": 0.5, "seconds": 9.0}]
    wall_only = TableRun(seed=0, val_acc=0.5, test_acc=0.5, curve=curve, train_seconds=9.0, measure_seconds=4.0)
    assert (wall_only.train_time, wall_only.measure_time) == (9.0, 4.0)
    both = wall_only.model_copy(update={"train_cpu_seconds": 3.0, "measure_cpu_seconds": 1.0})
    assert (both.train_time, both.measure_time) == (3.0, 1.0)


# -- a replayed study and a trained one are two studies -------------------------------------------


def test_a_replayed_search_gets_its_own_default_study_name(tmp_path, table_file, capsys):
    """Without --study-name a replay must not write into the trained study of the same command."""
    from archdsl.search.studies.naming import default_study_name

    args = search_args(table_file, tmp_path / "runs", "unused", "--strategy", "random", "--n-trials", "2")
    named = args.index("--study-name")
    del args[named : named + 2]
    assert main(args) == 0
    trained = default_study_name(support.BASE, support.DATASET, "random")
    replay_name = default_study_name(support.BASE, support.DATASET, "random", replayed=True)
    assert replay_name != trained and f"search {replay_name}:" in capsys.readouterr().err
    assert (tmp_path / "runs" / replay_name / "study.journal").is_file()
    assert not (tmp_path / "runs" / trained).exists()


def test_a_study_refuses_a_worker_of_the_other_fidelity(tmp_path, table_file):
    """A replayed worker joining a trained study (or back) would count simulated trials as measured."""
    from archdsl.errors import UserError
    from archdsl.search.runner import open_study
    from archdsl.search.studies.record import FIDELITY_ATTR

    def config(fidelity: str, journal: str):
        return search_support.plan_for(
            tmp_path, "mixed", strategy="random", n_trials=2, storage=f"journal:{tmp_path / journal}",
            fidelity_source=fidelity,
        )  # fmt: skip

    replay = f"table:{table_file}"
    assert open_study(config("train", "trained.journal")).user_attrs[FIDELITY_ATTR] == "train"
    with pytest.raises(UserError, match=r"is trained \(--fidelity train\), not replayed from a table") as info:
        open_study(config(replay, "trained.journal"))
    assert "--study-name" in str(info.value.hint)
    assert open_study(config(replay, "replayed.journal")).user_attrs[FIDELITY_ATTR] == replay
    with pytest.raises(UserError, match=r"is replayed from a table \(--fidelity table:"):
        open_study(config("train", "replayed.journal"))


def test_a_replay_indexes_its_table_once(table_file):
    replay = load_replay(f"table:{table_file}")
    assert replay.by_digest is replay.by_digest and len(replay.by_digest) == len(replay.table.designs)


def test_a_table_nested_too_deep_is_refused_with_its_depth(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"schema": ' + "[" * 50_000 + "]" * 50_000 + "}")
    from archdsl.errors import UserError
    from archdsl.search.fidelity.replay import load_replay

    with pytest.raises(UserError, match="not a search table: its JSON nested 50,001 levels deep"):
        load_replay(f"table:{path}")


def _set_run(field: str, value):
    def edit(data):
        data["designs"][2]["runs"][1][field] = value

    return edit


def _set_curve(field: str, value):
    def edit(data):
        data["designs"][2]["runs"][1]["curve"][0][field] = value

    return edit


def _twin_digest(data):
    data["designs"][5]["digest"] = data["designs"][4]["digest"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set_run("val_acc", float("nan")), "designs[2].runs[1].val_acc"),
        (_set_run("test_acc", float("inf")), "designs[2].runs[1].test_acc"),
        (_set_run("val_acc", -5), "designs[2].runs[1].val_acc: Input should be greater than or equal to 0"),
        (_set_run("val_acc", 1e300), "designs[2].runs[1].val_acc: Input should be less than or equal to 1"),
        (_set_run("train_cpu_seconds", 1e308), "designs[2].runs[1].train_cpu_seconds"),
        (_set_run("train_seconds", float("inf")), "designs[2].runs[1].train_seconds"),
        (_set_run("seed", 10**30), "designs[2].runs[1].seed"),
        (_set_curve("val_acc", float("nan")), "designs[2].runs[1].curve[0].val_acc"),
        (_twin_digest, "designs[5].digest: the digest of designs[4] again"),
    ],
)
def test_a_tables_values_are_checked_when_it_is_loaded(tmp_path, table_file, capsys, edit, message):
    table = _edited(tmp_path, table_file, edit)
    code = main(search_args(table, tmp_path / "runs", "bad"))
    err = capsys.readouterr().err
    assert code == 1 and message in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def test_an_integer_too_long_to_read_is_named(tmp_path, table_file, capsys):
    text = table_file.read_text().replace('"seed": 1', '"seed": 1' + "0" * 5000, 1)
    (tmp_path / "t.json").write_text(text)
    assert main(search_args(tmp_path / "t.json", tmp_path / "runs", "bad")) == 1
    err = capsys.readouterr().err
    assert "not a search table: not JSON" in err and "digits" in err and "Traceback" not in err, err


def test_a_table_made_on_another_version_of_the_same_base_names_what_differs(tmp_path, table_file, capsys):
    def wider(data):
        data["base"] = data["base"].replace("width=16", "width=24", 1)

    assert "width=16" in json.loads(table_file.read_text())["base"]
    assert main(search_args(_edited(tmp_path, table_file, wider), tmp_path / "runs", "bad")) == 1
    err = capsys.readouterr().err
    assert "another version of the base 'resnet-fmnist'" in err, err
    assert "width=24" in err and "width=16" in err and "not this search's 'resnet-fmnist'" not in err, err


def test_a_base_that_differs_in_a_line_of_its_own_width_names_that_line_not_a_realigned_one(
    tmp_path, table_file, capsys
):
    """c3 one digit wider: the printer pads every stage line to the widest, so c1's line changes only in its
    spaces. The difference quoted is c3's, not c1's twice."""

    def wider_c3(data):
        data["base"] = data["base"].replace("stage c3(width=64,", "stage c3(width=640,", 1)

    assert main(search_args(_edited(tmp_path, table_file, wider_c3), tmp_path / "runs", "bad")) == 1
    err = capsys.readouterr().err
    assert "its `stage c3(width=640, stride=2) { conv*2 }` is `stage c3(width=64, stride=2) { conv*2 }`" in err, err
    assert "c1" not in err and "Traceback" not in err, err


# -- paired seeds (--seeds N) -----------------------------------------------------------------------


def test_paired_seeds_answer_every_design_from_the_same_seeds_and_record_each(tmp_path, table_file, capsys):
    out = tmp_path / "runs"
    args = search_args(table_file, out, "paired", "--strategy", "random", "--n-trials", "4", "--pruner", "none")
    assert main([*args, "--seeds", "2"]) == 0
    table = load_replay(f"table:{table_file}")
    study = optuna.load_study(study_name="paired", storage=_journal(out / "paired" / "study.journal"))
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(done) == 4
    for t in done:
        runs = sorted(table.by_digest[t.user_attrs[DIGEST_ATTR]].runs, key=lambda r: r.seed)[:2]
        metrics = t.user_attrs["metrics"]
        assert metrics["accuracy_seeds"] == [r.accuracy for r in runs]  # seed index s: the table's s-th seed
        assert t.value == pytest.approx(sum(r.accuracy for r in runs) / 2)
        spread = abs(runs[0].accuracy - runs[1].accuracy) / 2  # the standard error of a mean of two
        assert metrics["accuracy_stderr"] == pytest.approx(spread)
    csv_header = (out / "paired" / "report" / "trials.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "accuracy_seeds,accuracy_stderr" in csv_header


@pytest.mark.parametrize("seed", [1, 2])
def test_a_replays_seed_picks_the_table_runs_a_trained_search_would_train(tmp_path, table_file, seed):
    # A trained search's seed index s trains with seed --seed + s (measures.seed_of); its replay answers from the
    # table's runs of those seeds (wrapping around the table's), so replays with other --seed values draw other
    # paired seeds. With the table's first seeds for every --seed, every replay of a study made the same choice.
    from archdsl.search.fidelity.measures import seed_of

    out = tmp_path / "runs"
    args = search_args(table_file, out, "shifted", "--strategy", "random", "--n-trials", "3", "--pruner", "none")
    assert main([*args, "--seeds", "2", "--seed", str(seed)]) == 0
    table = load_replay(f"table:{table_file}")
    study = optuna.load_study(study_name="shifted", storage=_journal(out / "shifted" / "study.journal"))
    for t in (t for t in study.trials if t.state == TrialState.COMPLETE):
        ordered = sorted(table.by_digest[t.user_attrs[DIGEST_ATTR]].runs, key=lambda r: r.seed)
        runs = [ordered[seed_of(seed, i) % len(ordered)] for i in range(2)]
        assert t.user_attrs["metrics"]["accuracy_seeds"] == [r.accuracy for r in runs]
        assert t.user_attrs[TABLE_SEED_ATTR] == runs[0].seed
    from archdsl.search.studies.record import read_held_out

    held_out = read_held_out(study)
    assert held_out, "the final test opened the table figures its best design's trial sealed"
    expected = sorted(r.seed for r in load_replay(f"table:{table_file}").table.designs[0].runs)
    for figures in held_out.values():  # the final test reads the runs that answered the trial
        assert figures.seeds == [expected[seed_of(seed, i) % len(expected)] for i in range(2)]


def test_more_paired_seeds_than_the_table_holds_is_one_line(tmp_path, table_file, capsys):
    args = search_args(table_file, tmp_path / "runs", "many", "--strategy", "random", "--n-trials", "2")
    assert main([*args, "--seeds", "9"]) != 0
    err = capsys.readouterr().err
    assert "--seeds 9: the table" in err and "Traceback" not in err, err


def test_no_seeds_is_one_line(tmp_path, table_file, capsys):
    args = search_args(table_file, tmp_path / "runs", "none", "--n-trials", "2")
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error, as for every bad flag value
        main([*args, "--seeds", "0"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seeds: expected a value greater than 0, got '0'" in err and "Traceback" not in err, err


# -- racing (--max-seeds M) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def noisy_table(tmp_path_factory, space) -> Path:
    """Six seeds per design, each run off its design's rule by its own noise (sd 0.01): two seeds cannot
    tell the designs apart, more can."""
    import random

    table = support.make_table(space, seeds=tuple(range(6)))
    rng = random.Random(7)
    designs = [
        d.model_copy(
            update={"runs": [r.model_copy(update={"val_acc": r.val_acc + rng.gauss(0, 0.01)}) for r in d.runs]}
        )
        for d in table.designs
    ]
    path = tmp_path_factory.mktemp("noisy") / "noisy.json"
    return support.write_table(path, table.model_copy(update={"designs": designs}))


def _raced(table: Path, out: Path, name: str, *flags: str) -> optuna.Study:
    args = search_args(table, out, name, "--strategy", "buildup", "--pruner", "none", "--n-trials", "20", *flags)
    assert main(args) == 0
    return optuna.load_study(study_name=name, storage=_journal(out / name / "study.journal"))


@pytest.mark.parametrize("seed", range(6))
def test_a_buildup_searchs_best_design_is_the_walks_last_kept_design(tmp_path, noisy_table, capsys, seed):
    # The walk keeps an MSA only beyond the noise; the report named the design of the best mean instead, often
    # one the walk had rejected (a candidate a lucky pair of seeds put ahead), so the search's answer was not
    # the walk's (benchmarks/search_efficiency.py: the walk ended at the table's best in 30 of 30 replays,
    # the report's best in 10).
    from archdsl.search import summarize_study

    out = tmp_path / "runs"
    study = _raced(noisy_table, out, "walked", "--seeds", "2", "--seed", str(seed))
    walked = [
        line[len("build-up: ") :] for line in capsys.readouterr().out.splitlines() if line.startswith("build-up:")
    ]
    kept = [line[:16].strip() for line in walked if line.endswith("kept")]
    [best] = summarize_study(study).best
    trial = next(t for t in study.trials if t.number == best.number)
    last = kept[-1]
    assert trial.user_attrs.get("buildup_step") == last, (trial.user_attrs.get("buildup_step"), kept)


def test_a_replayed_race_measures_more_seeds_only_up_to_max_seeds_and_counts_designs_once(tmp_path, noisy_table):
    out = tmp_path / "runs"
    plain = _raced(noisy_table, out, "plain", "--seeds", "2")
    assert not [t for t in plain.trials if "seed_indices" in t.user_attrs]  # --max-seeds defaults to --seeds
    study = _raced(noisy_table, out, "raced", "--seeds", "2", "--max-seeds", "5")
    extra = [t for t in verdicts(study) if "seed_indices" in t.user_attrs]
    assert extra, "two seeds cannot decide on this table: the race measures more"
    assert all(t.user_attrs["strategy"] == "race" and t.user_attrs["seed_indices"][0] in (2, 3, 4) for t in extra)
    main_trials = [t for t in verdicts(study) if "seed_indices" not in t.user_attrs]
    # One design per step, each measured on seed indices 0, 1 by its own trial and on more by a race's.
    assert len({t.user_attrs[DIGEST_ATTR] for t in main_trials}) == len(main_trials)
    per_design: dict[str, list[int]] = {}
    for t in extra:
        per_design.setdefault(t.user_attrs[DIGEST_ATTR], []).extend(t.user_attrs["seed_indices"])
    assert all(sorted(v) == list(range(2, 2 + len(v))) for v in per_design.values())  # in order, none twice
    assert {d for d in per_design} <= {t.user_attrs[DIGEST_ATTR] for t in main_trials}

    # The extra seeds do not count towards --n-trials: 3 designs are 3, whatever the race added.
    capped = _raced(noisy_table, out, "capped", "--seeds", "2", "--max-seeds", "5", "--n-trials", "3")
    assert len({t.user_attrs[DIGEST_ATTR] for t in verdicts(capped)}) == 3
    assert len(verdicts(capped)) > 3


def test_the_report_pools_a_raced_design_over_all_its_seeds(tmp_path, noisy_table):
    """After a race the report's best design is a design, not one lucky extra seed: its row holds the
    design's values on every seed index measured (its own trial's and the race's), its mean is theirs."""
    from archdsl.search.report._summary import summarize_study
    from archdsl.search.studies.record import design_seed_values, is_extra_seed

    study = _raced(noisy_table, tmp_path / "runs", "pooled", "--seeds", "2", "--max-seeds", "5")
    summary = summarize_study(study)
    best = summary.best[0]
    trial = next(t for t in study.trials if t.number == best.number)
    assert not is_extra_seed(trial)
    pooled = design_seed_values(study.trials, best.digest)
    assert best.seed_values == tuple(pooled[i] for i in sorted(pooled))
    estimate = summary.accuracy_estimate(best)
    assert estimate is not None and estimate.mean == pytest.approx(sum(pooled.values()) / len(pooled))
    assert best.digest == study.user_attrs["buildup_end"]  # a walk's answer is the design it kept last
    measured = {t.user_attrs[DIGEST_ATTR] for t in verdicts(study) if not is_extra_seed(t)}
    raced = [d for d in measured if len(design_seed_values(study.trials, d)) > 2]
    assert raced, "the race measured more seeds of some design"


def test_max_seeds_below_seeds_is_one_line(tmp_path, table_file, capsys):
    args = search_args(table_file, tmp_path / "runs", "below", "--n-trials", "2", "--seeds", "3", "--max-seeds", "2")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--max-seeds 2 is below --seeds 3" in err and "Traceback" not in err, err


@pytest.mark.parametrize("strategy", ["random", "tpe"])
def test_the_samplers_remeasure_their_leading_designs_up_to_max_seeds(tmp_path, noisy_table, strategy):
    from archdsl.search.report._summary import summarize_study
    from archdsl.search.runner import LEADERS
    from archdsl.search.studies.record import design_seed_values, is_extra_seed

    out = tmp_path / "runs"
    name = f"leaders-{strategy}"
    args = search_args(noisy_table, out, name, "--strategy", strategy, "--pruner", "none", "--n-trials", "6")
    assert main([*args, "--seeds", "2", "--max-seeds", "4"]) == 0
    study = optuna.load_study(study_name=name, storage=_journal(out / name / "study.journal"))
    trials = verdicts(study)
    assert len({t.user_attrs[DIGEST_ATTR] for t in trials}) == 6  # the extra seeds are no new designs
    extra = [t for t in trials if "seed_indices" in t.user_attrs]
    assert extra and all(t.user_attrs["strategy"] == "leaders" for t in extra)
    pooled = {d: design_seed_values(trials, d) for d in {t.user_attrs[DIGEST_ATTR] for t in trials}}
    leaders = sorted(pooled, key=lambda d: -sum(pooled[d].values()) / len(pooled[d]))[:LEADERS]
    assert all(sorted(pooled[d]) == [0, 1, 2, 3] for d in leaders)  # the final leaders have every seed
    assert all(sorted(v) in ([0, 1], [0, 1, 2, 3]) for v in pooled.values())
    [best] = summarize_study(study).best  # a sampler's answer: the design of the best mean over its seeds
    assert best.digest == leaders[0] and not is_extra_seed(next(t for t in trials if t.number == best.number))


def test_a_sampler_that_draws_the_whole_space_with_max_seeds_ends_and_measures_each_leader_seed_once(
    tmp_path, noisy_table, space
):
    # Once a sampler has drawn every design, its leaders are re-measured. A leader's extra seed was queued again
    # at every trial until the first queueing ran (a waiting trial has no digest yet): the repeats were left
    # waiting, or ran as copies that counted as pending for ever, and the search never ended
    # (benchmarks/search_efficiency.py --max-seeds hung on a whole-space replay).
    out, name = tmp_path / "runs", "whole"
    args = search_args(
        noisy_table, out, name, "--strategy", "random", "--pruner", "none", "--n-trials", str(space.n_designs())
    )
    ended = threading.Event()
    worker = threading.Thread(
        target=lambda: ended.set() if main([*args, "--seeds", "2", "--max-seeds", "3"]) == 0 else None, daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    assert ended.is_set(), "the search did not end"
    study = optuna.load_study(study_name=name, storage=_journal(out / name / "study.journal"))
    extra = [t for t in study.trials if t.user_attrs.get("strategy") == "leaders"]
    assert extra and not any(is_copy(t) for t in extra)
    assert not [t.number for t in study.trials if t.state == TrialState.WAITING]
    assert len({t.user_attrs[DIGEST_ATTR] for t in verdicts(study)}) == space.n_designs()


def test_the_grid_remeasures_its_leaders_after_its_last_grid_point(tmp_path, noisy_table, space):
    # Optuna's GridSampler stops the study when its grid is spent, which ended the search before the leaders'
    # extra seeds were measured: a grid search with --max-seeds chose on one draw of --seeds.
    from archdsl.search.runner import LEADERS
    from archdsl.search.studies.record import design_seed_values

    out, name = tmp_path / "runs", "grid-leaders"
    args = search_args(noisy_table, out, name, "--strategy", "grid", "--pruner", "none")
    assert main([*args, "--n-trials", str(space.n_designs()), "--seeds", "2", "--max-seeds", "3"]) == 0
    study = optuna.load_study(study_name=name, storage=_journal(out / name / "study.journal"))
    trials = verdicts(study)
    pooled = {d: design_seed_values(trials, d) for d in {t.user_attrs[DIGEST_ATTR] for t in trials}}
    assert len(pooled) == space.n_designs()
    leaders = sorted(pooled, key=lambda d: -sum(pooled[d].values()) / len(pooled[d]))[:LEADERS]
    assert all(sorted(pooled[d]) == [0, 1, 2] for d in leaders), {d[:8]: sorted(pooled[d]) for d in leaders}


def test_the_recorded_command_names_max_seeds_only_when_racing():
    from archdsl.search.plan import reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    racing = reproduce_command(plan_space(SearchSettings(study_name="s", max_seeds=4), {"seeds": 2}))
    assert " --max-seeds 4 " in racing and " --seeds 2 " in racing
    plain = reproduce_command(plan_space(SearchSettings(study_name="s", max_seeds=2), {"seeds": 2}))
    assert "--max-seeds" not in plain


def test_a_trial_has_a_heartbeat_before_it_looks_for_a_twin(tmp_path, table_file, space, monkeypatch):
    """A worker killed while its trial looks for (or waits on) a twin leaves a trial the next worker can fail as
    stale and retry: on a journal its heartbeat starts before the look, not after it (else it stays RUNNING and
    every later trial of its design defers to it for ever)."""
    from archdsl.search.fidelity import trial as trial_module
    from archdsl.search.studies.record import BEAT_ATTR

    looks = []
    original = trial_module.twin_decision

    def spying(trials, number, digest, indices=None, rung=0):
        looks.append(BEAT_ATTR in next(t for t in trials if t.number == number).system_attrs)
        return original(trials, number, digest, indices, rung)

    monkeypatch.setattr(trial_module, "twin_decision", spying)
    replayed(load_replay(f"table:{table_file}"), space, "random", n_trials=3, storage=f"journal:{tmp_path / 's.j'}")
    assert len(looks) >= 3 and all(looks)


def test_a_study_is_resumed_on_the_seeds_it_was_measured_on(tmp_path, table_file, capsys):
    """A trial's value is the mean over its paired seeds: a study made with --seeds 2 and resumed with another
    --seeds (the new default of 3, when none is given) would compare 2-seed means with 3-seed means."""
    out = tmp_path / "runs"
    assert main([*search_args(table_file, out, "paired", "--seeds", "2", "--n-trials", "2")]) == 0
    capsys.readouterr()
    assert main([*search_args(table_file, out, "paired", "--seeds", "3", "--n-trials", "3")]) == 1
    err = capsys.readouterr().err
    assert "study 'paired' measures each design on 2 paired seeds, not 3" in err and "--seeds 2" in err, err
    study = optuna.load_study(study_name="paired", storage=_journal(out / "paired" / "study.journal"))
    study.set_user_attr("seeds", None)  # a study made before the attr: its trials say how many seeds
    assert main([*search_args(table_file, out, "paired", "--seeds", "3", "--n-trials", "3")]) == 1
    assert main([*search_args(table_file, out, "paired", "--seeds", "2", "--n-trials", "3")]) == 0


def test_a_walk_resumed_by_a_sampler_reports_the_samplers_best(tmp_path, table_file):
    """The walk's answer (its last kept design) names the best of a build-up study only: resumed with a sampler,
    the study's best is the design of the best mean again."""
    from archdsl.search.report._summary import summarize_study

    out = tmp_path / "runs"
    base = ["--seeds", "2", "--pruner", "none"]
    assert main([*search_args(table_file, out, "mixed", *base, "--strategy", "buildup")]) == 0
    assert main([*search_args(table_file, out, "mixed", *base, "--strategy", "random", "--n-trials", "16")]) == 0
    study = optuna.load_study(study_name="mixed", storage=_journal(out / "mixed" / "study.journal"))
    summary = summarize_study(study)
    means = {t.number: t.value for t in study.trials if t.state == TrialState.COMPLETE}
    assert summary.best[0].number == max(means, key=lambda n: (means[n], -n))


def test_a_table_of_too_many_values_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    """A file under the byte bound can still hold millions of tiny values, each an object once parsed (780,000
    minimal designs in 64 MiB took 1.4 GB): the values are bounded first, and too many are refused unparsed."""
    from archdsl import json_text
    from archdsl.search.fidelity.replay import MAX_TABLE_BYTES, MAX_TABLE_VALUES

    design = '{"digest":"a","layout":"","n_msa":0,"params":{},"n_params":0,"flops":0,"runs":[]}'  # 9 commas, brackets
    designs = MAX_TABLE_VALUES // 10 + 1  # and one comma after each
    many = tmp_path / "many.json"
    many.write_text(
        '{"schema":"archdsl.search-table/2","dataset":"d","base":"b","searched":["k"],"designs":['
        + ",".join([design] * designs)
        + "]}"
    )
    assert many.stat().st_size < MAX_TABLE_BYTES

    def never(*args, **kwargs):
        raise AssertionError("the table was parsed")

    monkeypatch.setattr(json_text, "parse", never)
    assert main(search_args(many, tmp_path / "runs", "bad")) == 1
    err = capsys.readouterr().err
    most = 10 * designs + 7  # 1 + the table's 4 commas and 3 brackets, less the comma the last design lacks
    said = f"{many} holds up to {most:,} JSON values (its commas and brackets); a search table holds at most"
    assert f"{said} {MAX_TABLE_VALUES:,}" in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists(), err


def test_the_bound_on_a_tables_values_is_at_least_what_it_holds():
    import json

    from archdsl.json_text import most_values

    for value in (0, [], {}, [1, [2, {}], {"a": []}], {"a": [1, 2, {"b": "x"}], "c": "d"}, {"s": "x,y[{"}):
        text = json.dumps(value).encode()
        assert most_values(text) >= len(list(_values(value))), text
    exact = {"a": [1, 2, {"b": "x"}], "c": "d"}  # no comma or bracket in its strings: the bound is the count
    assert most_values(json.dumps(exact).encode()) == len(list(_values(exact))) == 7


def _values(value):
    yield value
    for inner in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        yield from _values(inner)


def test_keep_mean_reaches_the_walk_the_report_and_the_study_s_command(tmp_path, capsys):
    """`--keep mean` on the shipped 8-epoch table, seeds 0-2: a second MSA in c3 (6.7 points above the first on the
    mean, within the noise) is kept, then one in c2, where the default rule stops at one MSA; report.md says which
    rule kept, and the study's command runs it again."""
    table = Path(__file__).resolve().parent.parent / "search/tables/odd-one-out-k-8.json"
    out = tmp_path / "runs"
    answers = {}
    for keep in ("beyond-noise", "mean"):
        argv = ["search", "--fidelity", f"table:{table}", "--seeds", "3", "--keep", keep, "--out", str(out)]
        assert main([*argv, "--study-name", keep, "--no-progress"]) == 0
        printed = capsys.readouterr().out
        answers[keep] = next(line for line in printed.splitlines() if line.strip().startswith("best:")).split()[-1]
    assert answers == {"beyond-noise": "c3:CCCM", "mean": "c3:CMCM"}
    report = (out / "mean" / "report" / "report.md").read_text(encoding="utf-8")
    assert "keeps it where its mean over them is higher (--keep mean" in report
    assert "only where it is better beyond the noise" in (out / "beyond-noise" / "report" / "report.md").read_text()
    study = optuna.load_study(study_name="mean", storage=_journal(out / "mean" / "study.journal"))
    assert "--keep mean" in study.user_attrs["command"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [(("--strategy", "tpe"), "--keep mean is the build-up walk's rule"), (("--max-seeds", "5"), "no test to race")],
)
def test_keep_mean_refuses_what_it_cannot_do_in_one_line(tmp_path, capsys, extra, message):
    assert main(["search", "--keep", "mean", *extra, "--out", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and message in err and "Traceback" not in err


def test_knobs_with_a_strategy_that_does_not_walk_ends_in_one_line(tmp_path, capsys):
    """`--knobs` is how the walk gives a new MSA its knobs; TPE draws every knob itself: refused, not ignored."""
    argv = ["search", "--knobs", "base", "--strategy", "tpe", "--search", "k,window", "--out", str(tmp_path)]
    assert main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: --knobs is the build-up walk's rule") and "Traceback" not in err
