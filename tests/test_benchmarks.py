"""benchmarks/gpu.sh keeps working: its CPU fallback runs the same steps as on a GPU, small."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str, monkeypatch):
    """benchmarks/NAME.py as a module, its folder on sys.path (the scripts import each other) and the module in
    sys.modules (dataclasses look their module up), both undone after the test."""
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    loader = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    script = importlib.util.module_from_spec(loader)
    monkeypatch.setitem(sys.modules, name, script)
    loader.loader.exec_module(script)  # type: ignore[union-attr]
    return script


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="gpu.sh is a bash script")
def test_gpu_script_runs_its_cpu_fallback_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--cpu", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    assert "device cpu, train-step batch 8" in table
    assert "bf16 + channels_last" in table and "tiny-basic" in table  # two variants, two models
    assert "archdsl train tiny, 1 epoch end to end" in table
    assert "archdsl analyze --metrics hessian (2 batches)" in table and "lanczos" in table
    assert "archdsl train tiny under torchrun" in table  # 2 CPU ranks, or skipped saying why
    assert (tmp_path / "train" / "final.safetensors").is_file() and (tmp_path / "analyze" / "report.md").is_file()


@pytest.mark.slow
def test_storage_load_benchmark_counts_every_trial_of_its_quick_cell(tmp_path: Path) -> None:
    # The journal cell only: the PostgreSQL and proxy cells need a server and grpcio (run by hand).
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "storage_load.py"), "--quick", "--backends", "journal",
         "--json", str(tmp_path / "load.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| journal | 4 | 20/20 |" in done.stdout
    (cell,) = json.loads((tmp_path / "load.json").read_text())
    assert (cell["lost"], cell["duplicated"], cell["orphans"], cell["gave_up"]) == (0, 0, 0, 0)


@pytest.mark.slow
def test_the_table_script_trains_a_run_and_assembles_a_table_the_replay_reads(tmp_path: Path, monkeypatch) -> None:
    # benchmarks/buildup_table.py on a small Fashion-MNIST in the real IDX format (random images):
    # one run (the first design, seed 0), then the table assembled from it and read by the replay's model.
    import dataclasses

    from _mnist_files import write_idx

    from archdsl.data import mnist as mnist_module
    from archdsl.search.fidelity.replay import Table

    write_idx(tmp_path / "data" / "FashionMNIST" / "raw", n_train=600, n_test=60)
    spec = mnist_module.SPECS["fashion-mnist"]
    monkeypatch.setitem(mnist_module.SPECS, "fashion-mnist", dataclasses.replace(spec, system_folder=tmp_path / "none"))
    script = load_script("buildup_table", monkeypatch)
    work, out, md = tmp_path / "work", tmp_path / "table.json", tmp_path / "table.md"
    common = ["buildup_table.py", "--work", str(work), "--data-root", str(tmp_path / "data")]
    fidelity = ["--epochs", "2", "--subset", "0.5"]
    trained = [*common, *fidelity, "--first", "", "--shard", "0/96", "--limit", "1"]
    monkeypatch.setattr(sys, "argv", trained)
    script.main()
    monkeypatch.setattr(sys, "argv", [*common, "--assemble", "--out", str(out), "--markdown", str(md)])
    script.main()

    table = Table.model_validate_json(out.read_text())
    # the command the table records runs its runs again as written: an empty argument (`--first ''`) stays one
    assert shlex.split(table.command) == ["python", "benchmarks/buildup_table.py", *trained[1:]]
    assert len(table.designs) == 32 and table.searched == ["k", "heads"] and table.dataset == "fashion-mnist"
    measured = [d for d in table.designs if d.runs]
    assert len(measured) == 1 and table.statistics is None  # one run: no seed statistics yet
    (one,) = measured[0].runs
    assert one.seed == 0 and [p.epoch for p in one.curve] == [1, 2] and one.val_acc == one.curve[-1].val_acc
    assert 0 <= one.test_acc <= 1 and one.test_nll is not None
    # the test split after every epoch too (for reporting; the last is the run's own test figure)
    assert all(p.test_acc is not None and p.test_nll is not None for p in one.curve)
    assert (one.curve[-1].test_acc, one.curve[-1].test_nll) == (one.test_acc, one.test_nll)
    assert one.train_cpu_seconds is not None and 0 <= one.robustness <= 1 and 0 <= one.nep <= 1
    assert table.fidelity["epochs"] == 2 and table.fidelity["recipe"] == "fast" and "torch" in table.versions
    assert f"`{measured[0].layout}` |" in md.read_text()

    # A run recorded without them (the first tables) gets them from --test-curves: the run trained again to its
    # last-but-one epoch, its validation figures checked against the line's, its test figures added on assembly.
    (runs_file,) = work.glob("runs-*.jsonl")
    row = json.loads(runs_file.read_text())
    for point in row["run"]["curve"]:
        point["test_acc"] = point["test_nll"] = None
    runs_file.write_text(json.dumps(row) + "\n")
    monkeypatch.setattr(sys, "argv", [*common, *fidelity, "--test-curves"])
    script.main()
    monkeypatch.setattr(sys, "argv", [*common, "--assemble", "--out", str(out)])
    script.main()
    (again,) = [d for d in Table.model_validate_json(out.read_text()).designs if d.runs][0].runs
    assert [(p.test_acc, p.test_nll) for p in again.curve] == [(p.test_acc, p.test_nll) for p in one.curve]
    assert again.model_dump(exclude={"curve"}) == one.model_dump(exclude={"curve"})
    # a run that does not repeat its line (another fidelity, code or machine) gets no test figures: the script stops
    for path in work.glob("test-curves-*.jsonl"):
        path.unlink()
    row["run"]["curve"][0]["val_acc"] = 0.125
    runs_file.write_text(json.dumps(row) + "\n")
    monkeypatch.setattr(sys, "argv", [*common, *fidelity, "--test-curves"])
    with pytest.raises(SystemExit, match=r"seed 0 of .* does not repeat: epoch 1 gave val .*, its line 0.125/"):
        script.main()
    assert not list(work.glob("test-curves-*.jsonl"))


@pytest.mark.slow
def test_the_search_efficiency_script_reports_every_strategy(tmp_path: Path) -> None:
    # The docs' efficiency tables and figures come from this script: a smoke run on the shipped table,
    # with paired seeds and racing as the docs' study runs it.
    figures, md = tmp_path / "figures", tmp_path / "x.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "search_efficiency.py"), "--repeats", "2", "--jobs", "1",
         "--seeds", "2", "--max-seeds", "3", "--figures", str(figures), "--markdown", str(md)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    text = md.read_text()
    for header in (
        "| strategy | trials to the best within the noise (median) | ratio to random |",
        "| rank of the end (1 = best of the table) |",
        "| strategy | pruner | pruned trials (median) |",
        "| objectives | strategy | after 4 |",
    ):
        assert header in text
    strategy_table = text.split("| strategy | trials to the best")[1].split("\n\n")[0]
    from archdsl.search import STRATEGIES

    assert sorted(line.split(" | ")[0].strip("| ") for line in strategy_table.splitlines()[2:]) == sorted(STRATEGIES)
    assert "2 replays each, --seeds 2 --max-seeds 3." in text and "| test regret of the chosen design (mean) |" in text
    assert sorted(p.name for p in figures.iterdir()) == [
        "search-efficiency-hypervolume.png",
        "search-efficiency-regret.png",
    ]


def test_the_search_efficiency_script_draws_into_a_scratch_folder_by_default(monkeypatch) -> None:
    # A --quick run from the checkout must not overwrite the shipped figures: the docs' command names docs/figures.

    script = load_script("search_efficiency", monkeypatch)
    monkeypatch.setattr(sys, "argv", ["search_efficiency.py", "--quick"])
    assert "docs" not in Path(script.parse_args().figures).parts


@pytest.mark.slow
def test_the_reorthogonalisation_benchmark_times_both_ways_on_tiny() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "reorth.py"), "--quick", "--vectors", "3", "--threads", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^tiny: [\d,]+ parameters; one Hessian-vector product \(batch 16\): \d+ ms$", done.stdout, re.M)
    row = next(line for line in done.stdout.splitlines() if line.startswith("| 3 |"))
    assert row.count(" ms ") == 2 and row.count("x |") == 1


@pytest.mark.slow
def test_the_trial_profile_splits_a_trial_into_parts_that_add_up() -> None:
    # benchmarks/trial_profile.py --quick (synthetic data, 1 epoch): the table of docs/results.md's
    # "Where a trial's time goes", for both designs, with each analysis measure.
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trial_profile.py"), "--quick", "--threads", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines() if line.startswith("| ")}
    parts = ("data", "forward", "backward", "optimizer", "evaluation", "setup and the rest")
    for part in (*parts, "latency", "robustness", "hessian (NEP, APE)"):
        assert part in rows
    whole = rows["**default trial** (IR costs + training)"]
    for design in range(2):  # the parts' wall seconds add up to the training, within the trial
        walls = [float(rows[p].split(" | ")[1 + 3 * design]) for p in parts]
        assert all(w >= 0 for w in walls) and sum(walls) <= float(whole.split(" | ")[1 + 3 * design]) + 0.05
    assert re.search(
        r"^k1_1_1: default trial [\d.]+ s wall, training steps [\d.]+ s \(2 steps\): [\d.]+x$", done.stdout, re.M
    )


@pytest.mark.slow
def test_the_short_recipes_benchmark_trains_and_prints_its_row() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "short_recipes.py"), "--specs", "tiny", "--seeds", "0",
         "--epochs", "1", "--recipes", "fast", "--subset", "0.05"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("tiny"))
    accuracy = float(row.split()[2])
    assert row.split()[1] == "fast" and 0 <= accuracy <= 100


def test_the_long_run_reference_correlates_the_rankings_of_designs_with_every_long_seed(tmp_path: Path, monkeypatch):
    # benchmarks/long_run_reference.py --report on a generated table and long runs: the long validation
    # ranking follows the table's (tau 1), the long test ranking is its reverse (tau -1), and a design
    # with one long seed of two is left out.

    import _replay_support as support

    table = support.make_table(support.the_space())
    table_path = support.write_table(tmp_path / "table.json", table)
    ranked = sorted(table.designs, key=lambda d: sum(r.val_acc for r in d.runs))[:5]
    work = tmp_path / "long"
    work.mkdir()
    with (work / "runs.jsonl").open("w") as f:
        for rank, d in enumerate(ranked):
            for seed in (0, 1) if rank < 4 else (0,):
                row = {"digest": d.digest, "layout": d.layout, "seed": seed, "val_acc": 0.5 + rank / 10 + seed / 100,
                       "test_acc": 0.9 - rank / 10, "cpu_seconds": 10.0}  # fmt: skip
                f.write(json.dumps(row) + "\n")
    script = load_script("long_run_reference", monkeypatch)
    out = tmp_path / "summary.json"
    monkeypatch.setattr(
        sys,
        "argv",
        ["long_run_reference.py", "--table", str(table_path), "--work", str(work), "--report", "--json", str(out)],
    )
    script.main()
    summary = json.loads(out.read_text())
    assert summary["designs"] == 4 and summary["cpu_seconds"] == 90.0
    assert summary["short_val_vs_long_val"] == {"kendall": 1.0, "spearman": 1.0}
    assert summary["short_val_vs_long_test"]["kendall"] == pytest.approx(-1.0)


def test_the_more_seeds_script_ranks_the_designs_by_disjoint_groups_of_seeds(tmp_path: Path, monkeypatch):
    # benchmarks/more_seeds.py on a generated noiseless table (seeds 0-2) and extra runs of seeds 3-5 that rank
    # the designs in reverse: two 3-seed answers disagree completely (Spearman -1), two seeds of the table agree.

    import _replay_support as support

    table = support.make_table(support.the_space())
    table_path = support.write_table(tmp_path / "table.json", table)
    work = tmp_path / "more"
    work.mkdir()
    with (work / "runs-0.jsonl").open("w") as f:
        for d in table.designs:
            for seed in (3, 4, 5):
                f.write(
                    json.dumps({"digest": d.digest, "run": {"seed": seed, "val_acc": 0.9 - d.runs[0].val_acc / 2}})
                    + "\n"
                )
    script = load_script("more_seeds", monkeypatch)
    out = tmp_path / "summary.json"
    monkeypatch.setattr(
        sys, "argv", ["more_seeds.py", "--table", str(table_path), "--work", str(work), "--json", str(out)]
    )
    script.main()
    summary = json.loads(out.read_text())
    assert summary["seeds"] == [0, 1, 2, 3, 4, 5]
    by_size = {r["seeds_per_group"]: r for r in summary["by_seeds_per_group"]}
    assert sorted(by_size) == [1, 2, 3]
    assert by_size[3]["groups"] == 2 and by_size[3]["spearman"] == [pytest.approx(-1.0)]
    assert by_size[1]["spearman"][0] == pytest.approx(1.0)  # seeds 0 and 1 of a noiseless table


def test_test_curves_shards_keep_their_share_when_one_resumes(tmp_path: Path, monkeypatch) -> None:
    # shard 1 stops after one run, shard 0 finishes, shard 1 resumes: every run gets its test figures, once
    from archdsl.search import space as space_module

    script = load_script("buildup_table", monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    curve = [{"epoch": 1, "val_acc": 0.5, "val_nll": 1.0, "test_acc": None, "test_nll": None, "train_loss": 1.0,
              "seconds": 1.0}, {"epoch": 2, "val_acc": 0.6, "val_nll": 0.9, "test_acc": None, "test_nll": None,
              "train_loss": 0.9, "seconds": 1.0}]  # fmt: skip
    rows = [{"digest": f"d{i}", "run": {"seed": 0, "curve": curve, "test_acc": 0.6, "test_nll": 0.9}} for i in range(6)]
    (work / "runs-0.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    designs = [(f"d{i}", {}, f"arch{i}") for i in range(6)]
    trained: list[str] = []

    def test_curve(arch, data, test_set, fid, seed, epochs, stop_after=None):
        if stop_after is not None and len(trained) == stop_after:
            raise KeyboardInterrupt
        trained.append(arch)
        return [{**curve[0], "test_acc": 0.55, "test_nll": 1.1}]

    monkeypatch.setattr(space_module, "layout_text", str)
    monkeypatch.setattr(script, "test_curve", lambda *a: test_curve(*a, stop_after=1))
    with pytest.raises(KeyboardInterrupt):
        script.add_test_curves(work, (1, 2), designs, None, None, None)
    monkeypatch.setattr(script, "test_curve", test_curve)
    script.add_test_curves(work, (0, 2), designs, None, None, None)
    script.add_test_curves(work, (1, 2), designs, None, None, None)
    assert sorted(trained) == [f"arch{i}" for i in range(6)]  # each run once
    done = script.with_test_curves(script.finished(work), work)
    assert all(p["test_acc"] is not None for row in done.values() for p in row["run"]["curve"])


def test_the_dataset_samples_script_draws_a_row_per_class(tmp_path: Path, monkeypatch, capsys) -> None:
    script = load_script("dataset_samples", monkeypatch)
    monkeypatch.setattr(sys, "argv", ["dataset_samples.py", "--dataset", "odd-one-out:classes=3,train=30,test=3"])
    assert "docs" not in Path(script.parse_args().figures).parts  # a trial run leaves the shipped figure alone
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--per-class", "4", "--figures", str(tmp_path)])
    script.main()
    assert "3 classes x 4 images" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["odd-one-out-samples.png"]
    labels = np.array([0, 1, 0, 2, 1, 2, 0])
    assert script.samples(labels, 3, 2).tolist() == [[0, 2], [1, 4], [3, 5]]
