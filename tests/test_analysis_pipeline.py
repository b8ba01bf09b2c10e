"""The one analysis pipeline: settings, data checks, and the same numbers from the search and `archdsl analyze`."""

from __future__ import annotations

import pytest

from archdsl.analysis import AnalysisData, AnalysisSettings, HessianSettings, analyze
from archdsl.analysis.pipeline import needed_splits
from archdsl.analysis.report import AnalysisReport
from archdsl.cli import main
from archdsl.run.recipe import RECIPE_DEFAULTS, TrainConfig


def test_the_weight_decay_is_the_recipes_unless_given():
    assert AnalysisSettings().weight_decay == RECIPE_DEFAULTS["deit"]["weight_decay"]
    assert AnalysisSettings(recipe=TrainConfig(recipe="fast")).weight_decay == RECIPE_DEFAULTS["fast"]["weight_decay"]
    assert AnalysisSettings(recipe=TrainConfig(recipe="fast"), weight_decay=0.0).weight_decay == 0.0
    assert AnalysisSettings(recipe={"recipe": "weak"}).weight_decay == RECIPE_DEFAULTS["weak"]["weight_decay"]


def test_settings_round_trip_through_json():
    settings = AnalysisSettings(recipe=TrainConfig(recipe="fast"), hessian=HessianSettings(k=2, method="lanczos"))
    assert AnalysisSettings.model_validate_json(settings.model_dump_json()) == settings


def test_each_measure_says_what_it_reads():
    assert needed_splits(["acc"]) == {"scored"}
    assert needed_splits(["hessian", "robustness"]) == {"train", "corrupted"}


def test_the_analysis_input_names_the_split_it_scores(monkeypatch):
    # `archdsl analyze` scores a checkpoint on the test split, a search's trial on its validation images
    # (it once handed them over in a slot named `test`): the input says which split its scored images are.
    from types import SimpleNamespace

    from archdsl.analysis import AnalysisSources, pipeline
    from archdsl.analysis.session import load_data
    from archdsl.data import load_split, split_validation
    from archdsl.lang.spec import load_spec
    from archdsl.search.fidelity import measures

    dataset = "synthetic:train=40,test=20"
    data = load_data(dataset, AnalysisSources(), ("acc", "hessian"), load_spec("tiny"))
    assert data.scored_split == "test" and data.scored.fingerprint() == load_split(dataset, "test").fingerprint()

    given = []
    monkeypatch.setattr(pipeline, "analyze", lambda model, data, *_, **__: given.append(data) or SimpleNamespace(
        hessian=SimpleNamespace(nep=1.0, ape=None)
    ))  # fmt: skip
    rest, validation = split_validation(load_split(dataset, "train"), 10)
    trial_data = measures.DataContext(name=dataset, root=None, train_set=rest, validation=validation)
    assert measures.hessian(None, trial_data, measures.Fidelity(), seed=0, device="cpu") == (1.0, 0.0)
    assert given[0].scored_split == "validation" and given[0].scored is validation


def test_a_measure_without_its_data_is_refused_before_any_work():
    from archdsl.nn.build import create_model

    with pytest.raises(ValueError, match="need the train data"):
        analyze(create_model("tiny"), AnalysisData(name="x"), ["hessian"])
    with pytest.raises(ValueError, match="unknown measure 'hesian'"):
        analyze(create_model("tiny"), AnalysisData(name="x"), ["hesian"])


@pytest.mark.slow
def test_search_and_analyze_report_the_same_nep_and_ape(tmp_path, one_thread):
    """The search measures a trial's model with the recipe it trained with; `archdsl analyze` on the
    checkpoint of that model, with the same solver settings, must give the same spectrum."""
    from _search_support import DATASET, TINY_BASE

    from archdsl.lang.spec import parse_spec
    from archdsl.search.fidelity import measures

    arch = parse_spec(TINY_BASE)
    fidelity = measures.Fidelity(epochs=1, train_settings=(("batch_size", 32),), hessian_batches=2, hessian_max_iter=12)
    data = measures.load_data(DATASET, None, seed=0, val_subset=1.0)
    run_dir = tmp_path / "trial"
    trained = measures.train_candidate(
        arch, data, fidelity, device="cpu", seed=0, run_dir=run_dir, on_epoch=lambda *_: None, progress=False
    )
    nep, ape = measures.hessian(trained.model, data, fidelity, seed=3, device="cpu")

    out = tmp_path / "analysis"
    code = main([
        "analyze", str(run_dir / "final.safetensors"), "--metrics", "hessian", "--out", str(out),
        "--batches", "2", "--max-iter", "12", "--method", "lanczos", "--seed", "3", "--device", "cpu", "--no-progress",
    ])  # fmt: skip
    assert code == 0
    report = AnalysisReport.model_validate_json((out / "metrics.json").read_text())
    assert (report.hessian.nep, report.hessian.ape) == (nep, ape)
    # The fast recipe the search trains with: its weight decay, not the paper's 0.05.
    assert report.hessian.weight_decay == report.settings.weight_decay == RECIPE_DEFAULTS["fast"]["weight_decay"]
    assert report.settings.recipe.recipe == "fast" and report.settings.hessian.method == "lanczos"
