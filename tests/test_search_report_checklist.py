"""The report answers the field's checklist for the run (Lindauer and Hutter, "Best practices for scientific
research on neural architecture search", JMLR 2020): the seeds, the validation protocol, the sealed test split,
each budget, the whole CPU time, and for a replayed study what a random pick in the same CPU would score."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import _replay_support as replay_support
import _search_support as support
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search import summarize_study
from archdsl.search.fidelity.budget import Budget
from archdsl.search.fidelity.random_pick import random_pick
from archdsl.search.fidelity.replay import load_replay, paired_runs
from archdsl.search.report._lines import summary_text
from archdsl.search.report._markdown import markdown
from archdsl.search.studies.record import (
    CPU_SECONDS_ATTR,
    DIGEST_ATTR,
    LAYOUT_ATTR,
    METRICS_ATTR,
    PROTOCOL_ATTR,
    SEED_VALUES_KEY,
    Protocol,
    read_protocol,
    read_random_pick,
    trials,
)

PROTOCOL = Protocol(
    dataset="synthetic:classes=4,train=96,test=32", seed=5, seeds=2, max_seeds=3, training_seeds=[5, 6, 7],
    budgets=[Budget(1, 1.0), Budget(2, 1.0)], train_images=86, held_out=10, validation_images=10, test_images=32,
    train_settings={"batch_size": 32}, device="cpu",
)  # fmt: skip


def _study(cpu: list[float | None]) -> optuna.Study:
    study = optuna.create_study(direction="maximize", study_name="checked")
    study.set_user_attr("objectives", "accuracy")
    study.set_user_attr(PROTOCOL_ATTR, PROTOCOL.model_dump(mode="json"))
    for number, seconds in enumerate(cpu):
        seeds = [0.5 + 0.1 * number, 0.52 + 0.1 * number]
        attrs = {
            DIGEST_ATTR: f"d{number}", LAYOUT_ATTR: f"c1:{'CM' if number else 'CC'}",
            METRICS_ATTR: {"accuracy": sum(seeds) / 2, SEED_VALUES_KEY: seeds},
            **({CPU_SECONDS_ATTR: seconds} if seconds is not None else {}),
        }  # fmt: skip
        study.add_trial(
            optuna.create_trial(
                state=TrialState.COMPLETE, value=sum(seeds) / 2, params={"k_c1": number},
                distributions={"k_c1": IntDistribution(0, 5)}, user_attrs=attrs,
            )
        )  # fmt: skip
    return study


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}")[1].split("\n## ")[0]


def test_the_checklist_names_seeds_splits_budgets_and_the_cpu_time():
    summary = summarize_study(_study([40.0, 51.0, 10.0]))
    section = _section(markdown(summary, {}, {}), "Checklist")
    assert "2 paired seeds, indices 0, 1, trained with seeds 5, 6" in section
    assert "up to 3 (index 2: seed 7)" in section  # racing
    assert "10 validation images, held out of the training split" in section and "86 images" in section
    assert "32 test images" in section and "opened once" in section
    assert "1 epoch on 86 images (100 %)" in section and "2 epochs on 86 images (100 %)" in section
    assert "1:41 min of CPU" in section and "3 trials" in section
    [line] = [line for line in summary_text(summary).splitlines() if line.startswith("  checklist:")]
    assert "seeds 5, 6 (paired)" in line and "10 validation images" in line and "32 test images" in line
    assert "CPU 1:41 min (3 trials)" in line


def test_trials_without_a_cpu_record_are_counted_as_such():
    summary = summarize_study(_study([40.0, None]))
    assert (summary.cpu_seconds, summary.cpu_unknown) == (40.0, 1)
    assert "1 trial recorded none" in _section(markdown(summary, {}, {}), "Checklist")


def test_a_random_pick_expects_the_best_of_the_designs_its_cpu_measures(tmp_path):
    space = replay_support.the_space(("k",))
    table = replay_support.make_table(space, epochs=2)
    designs = [
        d.model_copy(update={"runs": [r.model_copy(update={"train_cpu_seconds": 9.0, "test_cpu_seconds": 1.0})
                                      for r in d.runs]})
        for d in table.designs
    ]  # fmt: skip
    path = replay_support.write_table(tmp_path / "t.json", table.model_copy(update={"designs": designs}))
    replay = load_replay(f"table:{path}")
    values = sorted(r.val_acc for d in replay.table.designs for r in paired_runs(d, 0, range(1)))
    n = len(values)
    # 20 s of CPU measure two designs of 10 s each: the best of two drawn without repeats
    exact = sum(v * i for i, v in enumerate(values)) / (n * (n - 1) / 2)
    pick = random_pick(replay, seed=0, seeds=1, cpu_seconds=20.0)
    assert pick is not None and pick.designs == 2
    assert pick.expected_best == pytest.approx(exact, abs=0.002)
    assert random_pick(replay, seed=0, seeds=1, cpu_seconds=1.0).designs == 1  # one design at least
    whole = random_pick(replay, seed=0, seeds=1, cpu_seconds=1e9)
    assert whole.expected_best == pytest.approx(values[-1])


def test_a_replayed_study_records_its_runs_cpu_and_the_random_pick(tmp_path):
    space = replay_support.the_space(("k",))
    table = replay_support.make_table(space, noise=0.002)
    designs = [
        d.model_copy(update={"runs": [r.model_copy(update={"train_cpu_seconds": 8.0 + d.n_msa, "test_cpu_seconds": 0.5})
                                      for r in d.runs]})
        for d in table.designs
    ]  # fmt: skip
    path = replay_support.write_table(tmp_path / "t.json", table.model_copy(update={"designs": designs}))
    out = tmp_path / "runs"
    args = [
        "search", "--dataset", replay_support.DATASET, "--base", replay_support.BASE, "--search", "k",
        "--fidelity", f"table:{path}", "--study-name", "replayed", "--out", str(out), "--no-progress",
        "--seeds", "2", "--pruner", "none",
    ]  # fmt: skip
    assert main(args) == 0
    study = support.load(tmp_path, "replayed")
    replay = load_replay(f"table:{path}")
    measured = [t for t in trials(study) if t.state == TrialState.COMPLETE]
    for t in measured:
        runs = paired_runs(replay.by_digest[t.user_attrs[DIGEST_ATTR]], 0, range(2))
        assert t.user_attrs[CPU_SECONDS_ATTR] == pytest.approx(sum(r.cpu_seconds(replay.epochs) for r in runs))
    protocol = read_protocol(study)
    assert protocol is not None and protocol.table == str(path) and protocol.training_seeds == [0, 1]
    pick = read_random_pick(study)
    assert pick is not None and pick.cpu_seconds == pytest.approx(sum(t.user_attrs[CPU_SECONDS_ATTR] for t in measured))
    md = (out / "replayed" / "report" / "report.md").read_text()
    assert f"expected to score {pick.expected_best:.4g}" in _section(md, "Checklist")


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_a_trained_search_records_each_trials_cpu_and_its_protocol(tmp_path):
    assert main(support.search_args(tmp_path, "cpu", "--n-trials", "2", "--seed", "3", "--val-split", "20")) == 0
    study = support.load(tmp_path, "cpu")
    measured = [t for t in trials(study) if DIGEST_ATTR in t.user_attrs]
    assert measured and all(t.user_attrs[CPU_SECONDS_ATTR] > 0 for t in measured)
    protocol = read_protocol(study)
    assert protocol is not None
    assert (protocol.seed, protocol.training_seeds, protocol.held_out, protocol.test_images) == (3, [3], 20, 32)
    assert (protocol.train_images, protocol.validation_images) == (76, 20)
    assert protocol.budgets == [Budget(1, 1.0)] and protocol.train_settings["batch_size"] == 32
    md = (tmp_path / "runs" / "cpu" / "report" / "report.md").read_text()
    assert "20 validation images" in _section(md, "Checklist")


def test_a_plan_without_data_records_no_counts():
    from archdsl.search.studies.for_report import protocol

    plan = support.plan_for(Path("unused"), "p", seeds=2)
    recorded = protocol(dataclasses.replace(plan))
    assert recorded.training_seeds == [0, 1] and recorded.train_images is None
