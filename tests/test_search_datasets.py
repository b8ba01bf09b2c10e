"""`archdsl search` on a dataset other than the synthetic one: a base that fits the data and the
machine by default (and says which), and a dry run that describes the space the run searches."""

from __future__ import annotations

import re

import pytest
from _mnist_files import write_idx

from archdsl.cli import main


@pytest.fixture
def fashion_root(tmp_path):
    write_idx(tmp_path / "FashionMNIST" / "raw", n_train=60, n_test=30)
    return str(tmp_path)


def _dry_run(capsys, *argv: str) -> tuple[str, str]:
    # (a batch the 60 training images hold: the dry run checks the data as the search does)
    assert main(["search", "--dry-run", "--device", "cpu", "--subset", "1", "--batch-size", "10", *argv]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_the_dry_run_describes_the_space_fitted_to_the_dataset(capsys, fashion_root):
    base = ["--base", "alter-small-base"]  # a 3x32x32 spec: fitted to 1x28x28, its maps are 28, 14 and 7
    out, _ = _dry_run(capsys, "--dataset", "fashion-mnist", "--data-root", fashion_root, "--search", "k,window", *base)
    # windows that tile 28 and 14 (not 32's 8 and 16)
    assert "window [2, 4, 7, 14, 'global']" in out and "window [2, 4, 8, 16" not in out
    assert "size: 180 points" in out
    assert "fitted to fashion-mnist: 1x28x28, 10 classes" in out


def test_the_dry_run_and_the_run_search_the_same_space(tmp_path, capsys, fashion_root, monkeypatch):
    """The run's header counts the points of the space it searches: the dry run's count."""
    from archdsl.search import runner

    out, _ = _dry_run(capsys, "--dataset", "fashion-mnist", "--data-root", fashion_root, "--search", "k,window")
    points = re.search(r"size: (\d+) points", out).group(1)
    searched = []

    def no_trials(plan, **_):
        searched.append(plan.space)
        raise KeyboardInterrupt  # stop before any training: the space is what is checked

    monkeypatch.setattr(runner, "run_search", no_trials)
    argv = ["search", "--dataset", "fashion-mnist", "--data-root", fashion_root, "--search", "k,window"]
    argv += ["--subset", "1", "--batch-size", "10"]
    assert main([*argv, "--device", "cpu", "--out", str(tmp_path / "runs"), "--no-progress"]) == 130
    assert str(searched[0].size()) == points
    assert f"over {points} points of resnet-fmnist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("dataset", "base", "why"),
    [
        ("synthetic", "alter-small-base", "default on built-in data"),
        ("odd-one-out", "alter-small-base", "default on built-in data"),
        ("fashion-mnist", "resnet-fmnist", "default for 28x28 grey images"),
        ("cifar100", "alter-small-base", "--base alter50-base"),  # the paper's base takes hours per candidate on a CPU
    ],
)
def test_the_default_base_fits_the_data_and_the_machine_and_says_so(capsys, fashion_root, dataset, base, why):
    out, _ = _dry_run(capsys, "--dataset", dataset, "--data-root", fashion_root)
    first = out.splitlines()[0]
    assert first.startswith(f"base {base} (") and why in first


def test_a_base_given_is_taken_as_it_is(capsys, fashion_root):
    out, _ = _dry_run(capsys, "--dataset", "cifar100", "--base", "alter50-base")
    assert out.startswith("base alter50-base: 4 stages")
    assert "fitted to cifar100: 3x32x32, 100 classes" in out


def test_a_search_piped_to_a_log_says_each_epoch_each_trial_and_why_it_ended(tmp_path, capsys):
    import _search_support as support

    argv = [a for a in support.search_args(tmp_path, "piped", "--n-trials", "20") if a != "--no-progress"]
    assert main(argv) == 0
    err = capsys.readouterr().err  # not a terminal, as a log file is not
    assert "\r" not in err
    trials = [line for line in err.splitlines() if re.match(r"trial \d+ COMPLETE", line)]
    lines = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert trials and [line.split("  ")[0] for line in lines] == ["epoch 1/1"] * len(trials)  # one line an epoch
    # a trial is scored on validation images: its lines say so, and name no test figure
    assert all("val_acc=" in line and "test_acc" not in line for line in lines), lines
    # the build-up walk measured fewer designs than --n-trials: the last line says why
    assert f"search ended: the build-up walk is done after {len(trials)} designs" in err
    assert "--n-trials 20 is an upper bound" in err


def test_a_trials_files_hold_validation_figures_under_their_own_names(tmp_path):
    """A trial's metrics.csv, metrics.jsonl, checkpoint and metrics.json say `val_` for its validation figures:
    no `test_` name holds one (issue 38)."""
    import csv
    import json

    import _search_support as support

    from archdsl.run import load_checkpoint

    assert main(support.search_args(tmp_path, "names", "--strategy", "random", "--n-trials", "1")) == 0
    [trial] = (tmp_path / "runs" / "names" / "trials").iterdir()
    record = json.loads((trial / "metrics.json").read_text())
    [epoch] = record["metrics"]["history"]
    assert epoch["val_acc"] == record["metrics"]["accuracy"] and not [k for k in epoch if k.startswith("test_")]
    [row] = csv.DictReader((trial / "metrics.csv").open())
    assert float(row["val_acc"]) == epoch["val_acc"] and row["test_acc"] == row["test_loss"] == ""
    assert "test_acc" not in load_checkpoint(trial / "final.safetensors").meta


def test_subset_shrinks_the_training_set_and_val_subset_the_sets_that_score(tmp_path):
    import _search_support as support

    from archdsl.search.fidelity import measures as measure
    from archdsl.search.plan import reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    # 96 training images: 16 held out for validation (a quarter of them score), 80 to train on
    data = measure.load_data(support.DATASET, None, seed=0, val_subset=0.25, val_split="16")
    assert (len(data.train_set), len(data.validation)) == (80, 4)  # the training set is shrunk by each trial
    default = measure.load_data(support.DATASET, None, seed=0)
    assert (len(default.train_set), len(default.validation)) == (86, 10)  # a tenth by default
    config = measure.train_config(measure.Fidelity(subset=0.5, val_subset=0.25), device="cpu", seed=0)
    assert config.subset == 0.5
    settings = SearchSettings(study_name="s")
    fidelity = {"subset": 0.5, "val_subset": 0.25, "val_split": "0.2"}
    line = reproduce_command(plan_space(settings, fidelity))
    assert "--val-split 0.2 --val-subset 0.25" in line


def test_a_val_subset_below_one_image_a_class_says_how_many_images_score(tmp_path, capsys):
    """A class-stratified subset keeps at least one image of each class: --val-subset 1e-9 scored every candidate on
    four images, and said nothing."""
    import _search_support as support

    assert main(support.search_args(tmp_path, "tiny-val", "--n-trials", "1", "--val-subset", "1e-9")) == 0
    err = capsys.readouterr().err
    said = (
        "archdsl: warning: --val-subset 1e-09 keeps less than one validation image of 4 of the 4 classes: each "
        "candidate is scored on 4 of the 10 validation images (at least one of each class)"
    )
    assert said in err, err
    assert main(support.search_args(tmp_path, "whole-val", "--n-trials", "1")) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("where", ["flag", "config"])
def test_the_old_test_subset_is_refused_naming_val_subset(tmp_path, capsys, where):
    """--test-subset shrank validation images, never the test set: its old name is refused in one line that
    names --val-subset (and its --config key), before anything is made."""
    import _search_support as support

    args = support.search_args(tmp_path, "renamed")
    if where == "flag":
        args += ["--test-subset", "0.5"]
    else:
        (tmp_path / "c.yaml").write_text("test_subset: 0.5\n")
        args += ["--config", str(tmp_path / "c.yaml")]
    try:
        code = main(args)
    except SystemExit as exit:  # argparse's own refusal of a flag
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and "give --val-subset 0.5" in err and "val_subset:" in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "settings, fidelity",
    [
        ({}, {}),
        ({"objectives": "accuracy,nep,robustness", "max_seeds": 4, "seed_endpoints": True, "timeout": 90.5},
         {"seeds": 2, "severities": (2, 4), "val_split": "0.2", "train_settings": {"lr": 0.01, "optimizer": "adamw"}}),
    ],
)  # fmt: skip
def test_the_recorded_command_runs_the_same_study(settings, fidelity):
    """The command a study keeps is spelled from its settings' own flags: read back by `archdsl search`, it
    plans the same study (every setting that shapes the results, resolved defaults included)."""
    import shlex

    from archdsl.cli import build_parser
    from archdsl.commands.search import settings_from_args
    from archdsl.search.plan import NOT_RECORDED, reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    plan = plan_space(SearchSettings(study_name="s", **settings), fidelity)
    words = shlex.split(reproduce_command(plan))
    again = plan_space(*settings_from_args(build_parser().parse_args(words[1:])))
    recorded = {k: v for k, v in plan.settings.model_dump().items() if k not in NOT_RECORDED}
    assert {k: v for k, v in again.settings.model_dump().items() if k in recorded} == {
        **recorded, "base": plan.base_name, "pruner": plan.pruner, "study_name": "s",
        "max_seeds": plan.settings.max_seeds, "keep": plan.keep if plan.strategy.walks else None,
    }  # fmt: skip
    assert again.fidelity == plan.fidelity and again.objectives == plan.objectives


def test_validation_images_are_held_out_of_training_and_fixed():
    import _search_support as support
    import numpy as np

    from archdsl.search.fidelity import measures as measure

    one = measure.load_data(support.DATASET, None, seed=0, val_split="0.25")
    other = measure.load_data(support.DATASET, None, seed=7, val_split="0.25")
    assert np.array_equal(one.validation.images, other.validation.images)  # whatever the seed
    held = {img.tobytes() for img in one.validation.images}
    assert not held & {img.tobytes() for img in one.train_set.images}


@pytest.mark.parametrize("value", ["0", "1.5", "ten"])
def test_a_bad_val_split_is_one_line(tmp_path, capsys, value):
    import _search_support as support

    assert main(support.search_args(tmp_path, "badval", "--val-split", value)) != 0
    err = capsys.readouterr().err
    assert "--val-split" in err and "Traceback" not in err, err


def test_a_search_loads_the_test_split_once_and_never_its_corrupted_copies(tmp_path, monkeypatch):
    """Trials train on the training split less its validation part and are scored on validation images,
    robustness on their corrupted copies: the test split is loaded once, with the training split, only to
    score each trained model for its trial to seal (tests/test_search_final_test.py), and no corrupted
    test set is loaded (item 8 of issue 28)."""
    import _search_support as support

    import archdsl.data as data_module

    reads: list[str] = []
    load_split, load_corrupted = data_module.load_split, data_module.load_corrupted

    def counting_split(name, split, *args, **kwargs):
        reads.append(split)
        return load_split(name, split, *args, **kwargs)

    def counting_corrupted(*args, **kwargs):
        reads.append("corrupted test")
        return load_corrupted(*args, **kwargs)

    monkeypatch.setattr(data_module, "load_split", counting_split)
    monkeypatch.setattr(data_module, "load_corrupted", counting_corrupted)
    args = support.search_args(tmp_path, "novisit", "--objectives", "accuracy,robustness", "--n-trials", "2")
    assert main([*args, "--strategy", "random"]) == 0
    assert reads == ["train", "test"], reads


def test_a_search_stopped_by_its_timeout_says_so(tmp_path, capsys):
    import _search_support as support

    assert main(support.search_args(tmp_path, "timed", "--timeout", "0.001")) == 0
    err = capsys.readouterr().err
    # Optuna checks the timeout before each trial: one may start within the first millisecond.
    stopped = re.search(r"search stopped: --timeout 0.001 s passed; (\d) of 8 designs", err)
    assert stopped and int(stopped.group(1)) < 8 and "build-up walk" not in err, err


@pytest.mark.parametrize(
    "strategy, given, epochs, runs_with",
    [
        ("buildup", "auto", 6, "none"),  # the walk prunes nothing: its verdicts read every seed at the end
        ("buildup", "median", 6, "median"),  # asked for, it is what runs
        ("tpe", "auto", 6, "hyperband"),
        ("random", "auto", 3, "hyperband"),
        # The default fidelity's 2 epochs give Hyperband one bracket: successive halving, which the study rejected.
        ("tpe", "auto", 2, "median"),
        ("random", "auto", 2, "median"),
        ("tpe", "none", 6, "none"),
        ("tpe", "hyperband", 2, "hyperband"),  # asked for, it is what runs
    ],
)
def test_the_default_pruner_follows_the_strategy_and_the_epochs_and_the_study_line_names_it(
    strategy, given, epochs, runs_with
):
    # `auto` is the efficiency study's finding (docs/results-search.md): median for the walk, Hyperband for the
    # samplers.
    import shlex

    from archdsl.search.plan import reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    settings = SearchSettings(study_name="s", strategy=strategy, pruner=given)
    assert settings.chosen_pruner(epochs) == runs_with
    words = shlex.split(reproduce_command(plan_space(settings, {"epochs": epochs})))
    assert words[words.index("--pruner") + 1] == runs_with  # spelled out: a later default cannot change it


def test_an_unknown_pruner_is_refused_by_the_settings():
    from pydantic import ValidationError

    from archdsl.search.settings import SearchSettings

    with pytest.raises(ValidationError, match="unknown pruner 'sometimes'"):
        SearchSettings(pruner="sometimes")


def test_paired_seeds_train_every_design_on_the_same_seeds(tmp_path, monkeypatch):
    """Seed index s is one training seed for every design, so each design meets the same subset,
    batch order and augmentation draws (the loader draws them from the seed alone)."""
    import _search_support as support
    import optuna

    from archdsl.search.fidelity import measures as measure

    seeds_by_design: dict[str, list[int]] = {}
    train_candidate = measure.train_candidate

    def recording(arch, *args, seed, **kwargs):
        seeds_by_design.setdefault(arch.digest(), []).append(seed)
        return train_candidate(arch, *args, seed=seed, **kwargs)

    monkeypatch.setattr(measure, "train_candidate", recording)
    # the calls are counted in this process: the seeds in turn (trained aside they are the same: test_seeds_aside.py)
    from archdsl.search.fidelity import seeds_aside

    monkeypatch.setattr(seeds_aside, "can_train_aside", lambda *args, **kwargs: False)
    args = support.search_args(tmp_path, "paired", "--strategy", "random", "--n-trials", "2", "--seed", "5")
    assert main([*args, "--seeds", "2", "--pruner", "none"]) == 0
    # each design once on each seed (the final test trains nothing: tests/test_search_final_test.py)
    assert len(seeds_by_design) == 2 and all(s == [5, 6] for s in seeds_by_design.values())
    study = support.load(tmp_path, "paired")
    for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        values = t.user_attrs["metrics"]["accuracy_seeds"]
        assert len(values) == 2 and t.value == pytest.approx(sum(values) / 2)


def test_the_build_up_walk_says_which_of_the_searched_designs_it_can_reach(capsys):
    """`--search k,window` with the default strategy: the walk chooses each stage's window (`--knobs choose`), so it
    reaches all 100 designs and measures 11 at most (the base, c3 at 2 windows and one MSA more, c2 at 3, c1 at 4);
    with `--knobs base` it keeps the base's windows, reaches 12, and the dry run names the strategies that search
    the windows; with k alone there is nothing to say, and a sampler reaches everything."""
    out, _ = _dry_run(capsys, "--search", "k,window")
    assert "size: 288 points, 100 distinct designs" in out
    assert "chooses a stage's window as the stage takes its first MSA" in out
    assert "100 of the 100 designs are within its reach, at most 11 measured" in out
    out, _ = _dry_run(capsys, "--search", "k,window", "--knobs", "base")
    assert "the build-up walk keeps the base's window (12 of the 100 designs are within its reach)" in out
    assert "--strategy tpe or random searches window too" in out
    for argv in ((), ("--search", "k,window", "--strategy", "tpe")):
        out, _ = _dry_run(capsys, *argv)
        assert "walk:" not in out
