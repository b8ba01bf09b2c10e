"""`archdsl analyze` end to end on a micro checkpoint and the synthetic dataset."""

from __future__ import annotations

import json

import pytest
from _micro_arch import micro_arch

from archdsl.analysis.report import AnalysisReport
from archdsl.cli import main

DATASET = "synthetic:train=200,test=100"  # small, so that generating it is quick

MICRO = micro_arch("c1(width=4) { conv }", "c2(width=8, stride=2) { conv msa(heads=1, window=4, dim_head=4) }", stem=4)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from archdsl.lang.spec import parse_spec
    from archdsl.nn.build import build
    from archdsl.run.checkpoint import save_checkpoint

    arch = parse_spec(MICRO)
    path = tmp_path_factory.mktemp("ckpt") / "micro.safetensors"
    save_checkpoint(path, build(arch, seed=0), arch, {"dataset": DATASET})
    return path


@pytest.mark.slow
def test_analyze_writes_metrics_figures_and_report(checkpoint, tmp_path, capsys):
    out = tmp_path / "analysis"
    code = main([
        "analyze", str(checkpoint), "--out", str(out), "--device", "cpu", "--no-progress",
        "--test-subset", "0.5", "--corruptions", "fog,contrast", "--severities", "1,3",
        "--batches", "2", "--hessian-batch-size", "4", "--k", "2", "--max-iter", "8", "--method", "lanczos",
        "--images", "12",
    ])  # fmt: skip
    assert code == 0
    report = AnalysisReport.model_validate_json((out / "metrics.json").read_text())
    assert report.arch == "micro" and report.dataset == DATASET
    assert report.classification.count == 50  # half of the 100 test images
    assert {(c.corruption, c.severity) for c in report.robustness.cells} == {
        ("fog", 1),
        ("fog", 3),
        ("contrast", 1),
        ("contrast", 3),
    }
    assert not report.robustness.complete
    hessian = report.hessian
    assert (len(hessian.eigenvalues), hessian.batch_size, hessian.k, hessian.method) == (4, 4, 2, "lanczos")
    assert hessian.weight_decay == 0.05  # no training config in the meta: the recipe's default
    names = [layer.name for layer in report.feature_maps.variance.layers]
    assert names == ["stem", "stages.c1.0", "stages.c2.0", "stages.c2.1"]
    assert [layer.kind for layer in report.feature_maps.variance.layers] == ["stem", "conv", "conv", "msa"]
    assert report.feature_maps.variance.images == 12
    markdown = (out / "report.md").read_text()
    for name in ("robustness.png", "hessian.png", "feature_maps.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / name).stat().st_size > 10_000
        assert f"]({name})" in markdown
    assert "micro on synthetic" in capsys.readouterr().out


def test_analyze_only_what_is_asked(checkpoint, tmp_path):
    out = tmp_path / "only"
    code = main(["analyze", str(checkpoint), "--metrics", "acc", "--test-subset", "0.2", "--out", str(out),
                 "--device", "cpu", "--no-progress"])  # fmt: skip
    assert code == 0
    data = json.loads((out / "metrics.json").read_text())
    assert data["classification"]["count"] == 20
    assert data["robustness"] is None and data["hessian"] is None and data["feature_maps"] is None
    assert not list(out.glob("*.png"))


def test_unknown_metric_is_a_usage_error(checkpoint, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(checkpoint), "--metrics", "acc,hesian"])
    assert exit_info.value.code == 2
    assert "hesian" in capsys.readouterr().err


def test_missing_checkpoint_is_a_user_error(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope.safetensors"), "--device", "cpu"]) == 1
    assert "no such checkpoint" in capsys.readouterr().err


def test_a_missing_dataset_leaves_no_empty_out_folder(checkpoint, tmp_path, capsys):
    out = tmp_path / "new" / "analysis"
    argv = ["analyze", str(checkpoint), "--dataset", "cifar100", "--data-root", str(tmp_path / "nodata")]
    assert main([*argv, "--out", str(out), "--device", "cpu", "--no-progress"]) == 1
    assert "CIFAR-100 not found" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_an_out_that_is_a_file_is_a_user_error(checkpoint, tmp_path, capsys):
    a_file = tmp_path / "report.md"
    a_file.write_text("keep")
    assert main(["analyze", str(checkpoint), "--out", str(a_file), "--device", "cpu", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err
    assert a_file.read_text() == "keep"


def test_mce_against_a_baseline_run_and_its_own_mistakes(checkpoint, tmp_path, capsys):
    common = ["--metrics", "robustness", "--corruptions", "fog", "--severities", "1,5", "--device", "cpu",
              "--no-progress"]  # fmt: skip
    assert main(["analyze", str(checkpoint), "--out", str(tmp_path / "base"), "--test-subset", "0.5", *common]) == 0
    baseline_json = tmp_path / "base" / "metrics.json"
    assert main(["analyze", str(checkpoint), "--out", str(tmp_path / "other"), "--baseline", str(baseline_json),
                 *common]) == 0  # fmt: skip
    baseline = AnalysisReport.model_validate_json(baseline_json.read_text()).robustness
    report = AnalysisReport.model_validate_json((tmp_path / "other" / "metrics.json").read_text())
    errors = sum(1 - c.top1 for c in report.robustness.cells)
    base_errors = sum(1 - c.top1 for c in baseline.cells)
    assert report.corruption_errors.mce == pytest.approx(errors / base_errors)
    assert "mCE" in (tmp_path / "other" / "report.md").read_text()
    capsys.readouterr()

    # A baseline that is missing, or is no analysis result, is refused before any work.
    assert main(["analyze", str(checkpoint), "--out", str(tmp_path / "x"), "--baseline", "nope.json", *common]) == 1
    assert main(["analyze", str(checkpoint), "--out", str(tmp_path / "y"), "--baseline", str(checkpoint), *common]) == 1
    err = capsys.readouterr().err
    assert "no such file" in err and "not a metrics.json" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_papers_other_measures_from_the_command_line(checkpoint, tmp_path, capsys):
    out = tmp_path / "more"
    code = main([
        "analyze", str(checkpoint), "--metrics", "nll-train,landscape,cka,lesion", "--out", str(out),
        "--device", "cpu", "--no-progress", "--test-subset", "0.5", "--train-images", "40",
        "--landscape-dims", "2", "--landscape-points", "3", "--landscape-batches", "1", "--landscape-batch-size", "8",
        "--cka-images", "16", "--cka-batch-size", "8",
    ])  # fmt: skip
    assert code == 0
    report = AnalysisReport.model_validate_json((out / "metrics.json").read_text())
    assert report.training_nll.images == 40
    assert report.landscape.dims == 2 and len(report.landscape.losses) == 3
    assert report.landscape.center == report.landscape.losses[1][1]
    assert report.landscape.weight_decay == report.settings.weight_decay == 0.05
    assert [layer.name for layer in report.cka.layers] == ["stem", "stages.c1.0", "stages.c2.0", "stages.c2.1"]
    assert (report.cka.images, report.cka.batch_size) == (16, 8)
    assert [b.kind for b in report.lesion.blocks] == ["conv", "conv", "msa"] and report.lesion.images == 50
    assert report.measures == ("nll-train", "landscape", "cka", "lesion")
    for name in ("landscape.png", "cka.png", "lesion.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "NLL_train" in printed and "lesion, worst block" in printed


def test_bad_landscape_settings_are_usage_errors(checkpoint, tmp_path, capsys):
    code = main(["analyze", str(checkpoint), "--metrics", "landscape", "--landscape-points", "4",
                 "--out", str(tmp_path / "x"), "--device", "cpu"])  # fmt: skip
    assert code == 2
    assert "odd" in capsys.readouterr().err


@pytest.mark.slow
def test_the_hessian_spectrum_over_training_of_a_run_directory(tmp_path, capsys, one_thread):
    spec = tmp_path / "micro.arch"
    spec.write_text(MICRO)
    run_dir = tmp_path / "run"
    assert main(["train", str(spec), "--dataset", DATASET, "--recipe", "fast", "--epochs", "2", "--batch-size", "50",
                 "--save-every", "1", "--out", str(run_dir), "--device", "cpu", "--no-progress"]) == 0  # fmt: skip
    assert {p.name for p in run_dir.glob("epoch-*")} == {"epoch-0001.safetensors", "epoch-0002.safetensors"}
    common = ["--batches", "1", "--hessian-batch-size", "8", "--k", "2", "--method", "lanczos", "--max-iter", "10",
              "--device", "cpu", "--no-progress"]  # fmt: skip
    assert main(["analyze", str(run_dir), *common]) == 0
    out = run_dir / "hessian-analysis"
    report = AnalysisReport.model_validate_json((out / "metrics.json").read_text())
    points = report.hessian_trajectory.points
    assert [(p.epoch, p.checkpoint) for p in points] == [(1, "epoch-0001.safetensors"), (2, "epoch-0002.safetensors")]
    assert report.settings.weight_decay == 5e-4  # the fast recipe the run trained with
    # The last point is the final model's spectrum, as a single-checkpoint analysis measures it.
    single = tmp_path / "single"
    assert main(["analyze", str(run_dir / "final.safetensors"), "--metrics", "hessian", "--out", str(single),
                 *common]) == 0  # fmt: skip
    final = AnalysisReport.model_validate_json((single / "metrics.json").read_text()).hessian
    assert points[-1].spectrum.eigenvalues == final.eigenvalues
    assert (out / "hessian_trajectory.png").stat().st_size > 10_000
    capsys.readouterr()
    # Other measures need one checkpoint.
    assert main(["analyze", str(run_dir), "--metrics", "acc", "--out", str(tmp_path / "no"), *common]) == 2
    assert "run directory" in capsys.readouterr().err


def test_an_out_that_holds_an_analysis_is_refused_unless_forced(checkpoint, tmp_path, capsys):
    out = tmp_path / "analysis"
    out.mkdir()
    (out / "metrics.json").write_text('{"a 3-minute Hessian": "result"}')
    (out / "hessian.png").write_bytes(b"an earlier plot")
    (out / "notes.txt").write_text("mine")
    args = ["analyze", str(checkpoint), "--metrics", "acc", "--test-subset", "0.2", "--out", str(out),
            "--device", "cpu", "--no-progress"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "already holds an analysis (hessian.png, metrics.json)" in err and "--force" in err
    assert (out / "metrics.json").read_text() == '{"a 3-minute Hessian": "result"}'
    assert main([*args, "--force"]) == 0
    assert json.loads((out / "metrics.json").read_text())["classification"]["count"] == 20
    assert not (out / "hessian.png").exists()  # no stale plot of the earlier analysis is left behind
    assert (out / "notes.txt").read_text() == "mine"  # what archdsl did not write stays


def test_the_old_subset_flag_of_analyze_still_works_and_says_its_new_name(checkpoint, tmp_path, capsys):
    out = tmp_path / "old"
    assert main(["analyze", str(checkpoint), "--metrics", "acc", "--subset", "0.2", "--out", str(out),
                 "--device", "cpu", "--no-progress"]) == 0  # fmt: skip
    assert "analyze --subset is now --test-subset" in capsys.readouterr().err
    data = json.loads((out / "metrics.json").read_text())
    assert data["classification"]["count"] == 20 and data["settings"]["test_subset"] == 0.2


def test_a_metrics_json_that_calls_the_test_fraction_subset_still_reads():
    from archdsl.analysis.settings import AnalysisSettings

    assert AnalysisSettings.model_validate({"subset": 0.5}).test_subset == 0.5


def test_a_log_of_analyze_says_each_stage_and_step_and_metrics_json_holds_their_seconds(
    checkpoint, tmp_path, capsys, monkeypatch
):
    # analyze ran 12 minutes into a log and printed nothing until the end, and metrics.json held no timings
    # (issue 58, item 5); capsys's stderr is no terminal: the lines a log gets
    import archdsl.progress

    monkeypatch.setattr(archdsl.progress, "LOG_EVERY_SECONDS", 0.0)  # every step its line, however quick
    out = tmp_path / "logged"
    code = main([
        "analyze", str(checkpoint), "--out", str(out), "--device", "cpu", "--progress", "--no-optimize",
        "--test-subset", "0.2", "--corruptions", "fog,contrast", "--severities", "1",
        "--batches", "1", "--hessian-batch-size", "4", "--k", "1", "--max-iter", "3", "--method", "lanczos",
        "--images", "8",
    ])  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().err.splitlines()
    stages = ("data", "corrupted copies", "acc", "robustness", "hessian", "fourier+variance")
    for stage in stages:
        assert any(line.startswith(f"analyze: {stage} ") for line in lines), (stage, lines)
        assert any(line.startswith(f"analyze: {stage} took ") for line in lines), (stage, lines)
    assert [line for line in lines if line.startswith("corrupted copies: ")][-1].startswith("corrupted copies: 2/2")
    robustness = [line for line in lines if line.startswith("robustness: ")]
    assert [line.split()[1] for line in robustness] == ["1/2", "2/2"] and "fog 1" in robustness[0]
    assert any(line.startswith("hessian: ") and "batch 1/1" in line for line in lines)
    seconds = json.loads((out / "metrics.json").read_text())["stage_seconds"]
    assert list(seconds) == list(stages) and all(s >= 0 for s in seconds.values())


def test_analyze_help_says_what_the_default_full_test_set_costs(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "75 corrupted copies of the whole test split" in text and "--test-subset 0.1" in text
