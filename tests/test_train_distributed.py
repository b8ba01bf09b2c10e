"""Data-parallel training under torchrun on the CPU (gloo): the ranks share the global batch and
reach one process's weights; only rank 0 writes and prints; resume works; a lost rank is an error."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import _ddp_worker
import pytest
import torch

from archdsl.run.checkpoint import load_checkpoint

WORKER = Path(__file__).with_name("_ddp_worker.py")
DATASET = "synthetic:classes=4,train=64,test=16"


def torchrun(ranks: int, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node RANKS ARGS` (a free local port), as a user starts it."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_reach_one_process_weights_and_batchnorm_differs_as_documented(tmp_path: Path) -> None:
    for ranks in (1, 2):
        torchrun(ranks, str(WORKER), str(tmp_path), cwd=tmp_path)
    weights = {path.stem: torch.load(path) for path in tmp_path.glob("*.pt")}
    # Without BatchNorm: the same steps on the same global batches, to float rounding.
    for key, value in weights["flat-1-0"].items():
        for rank in (0, 1):
            assert torch.allclose(weights[f"flat-2-{rank}"][key], value, rtol=1e-5, atol=1e-6), key
    # With BatchNorm (no --sync-bn): the replicas stay identical, buffers included (rank 0's running
    # statistics), but each rank normalised with its half of the batch: not one process's weights.
    for key, value in weights["bn-2-0"].items():
        assert torch.equal(weights["bn-2-1"][key], value), key
    assert any(
        not torch.allclose(weights["bn-1-0"][key], value, rtol=1e-5, atol=1e-6)
        for key, value in weights["bn-2-0"].items()
    )


# A stand-in for torch's teardown at a rank's exit, which now and then aborts the process after a
# finished command (gloo's threads outlive destroy_process_group; archdsl.run.distributed.exit_rank):
# here it always aborts, so a rank passes only if `archdsl` ends it without that teardown.
ABORT_AT_EXIT = """
import atexit, os
if "LOCAL_RANK" in os.environ:
    atexit.register(os.abort)
"""


def aborting_at_exit(folder: Path) -> dict[str, str]:
    """An environment whose ranks would abort in the interpreter's teardown (a sitecustomize module)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(ABORT_AT_EXIT)
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.slow
def test_archdsl_train_under_torchrun_writes_once_and_resumes(tmp_path: Path) -> None:
    env = aborting_at_exit(tmp_path / "site")
    spec = tmp_path / "flat.arch"
    spec.write_text(_ddp_worker.NO_BATCHNORM.replace("3x16x16", "3x32x32"))
    out = tmp_path / "run"
    train = ["-m", "archdsl", "train", str(spec), "--dataset", DATASET, "--recipe", "fast", "--batch-size", "16"]
    train += ["--device", "cpu", "--no-optimize", "--no-progress", "--out", str(out)]
    first = torchrun(2, *train, "--epochs", "1", cwd=tmp_path, env=env)
    # Rank 0 alone prints (torchrun's own lines aside).
    assert first.stderr.count("training flat") == 1 and "batch 16 over 2 ranks" in first.stderr
    assert first.stdout.count("1 epoch in") == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["config.json", "final.safetensors", "last.safetensors", "metrics.csv", "metrics.jsonl", "spec.arch"]
    )
    # The record says two ranks trained it: BatchNorm's statistics depend on their number.
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    assert load_checkpoint(out / "final.safetensors").meta["world_size"] == 2
    resumed = torchrun(2, *train, "--epochs", "2", "--resume", cwd=tmp_path, env=env)
    assert resumed.stderr.count("extending") == 1
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2]


LIBRARY_CALL = """
import json, sys
import torch.distributed as dist
import archdsl
from archdsl.run import distributed

spec, dataset, out, report = sys.argv[1:5]
config = {"recipe": "fast", "epochs": 1, "batch_size": 16, "device": "cpu", "optimize": False}
result = archdsl.train(spec, dataset=dataset, out=out, config=config)
rank = dist.get_rank()  # the group archdsl.train joined is left open for the caller
with open(f"{report}-{rank}.json", "w") as f:
    json.dump({"world_size": dist.get_world_size(), "test_acc": [m.test_acc for m in result.history]}, f)
dist.destroy_process_group()
distributed.exit_rank(0)  # as the docs advise: gloo's threads outlive the group
"""


@pytest.mark.slow
def test_archdsl_train_from_python_under_torchrun_trains_data_parallel(tmp_path: Path) -> None:
    spec = tmp_path / "flat.arch"
    spec.write_text(_ddp_worker.NO_BATCHNORM.replace("3x16x16", "3x32x32"))
    script = tmp_path / "call.py"
    script.write_text(LIBRARY_CALL)
    out, report = tmp_path / "run", tmp_path / "rank"
    env = aborting_at_exit(tmp_path / "site")
    torchrun(2, str(script), str(spec), DATASET, str(out), str(report), cwd=tmp_path, env=env)
    reports = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["world_size"] for r in reports] == [2, 2]
    assert reports[0]["test_acc"] == reports[1]["test_acc"]  # one model, evaluated on the whole test set by each
    assert (out / "final.safetensors").is_file() and (out / "metrics.jsonl").read_text().count("\n") == 1


def test_a_batch_the_ranks_cannot_share_or_sync_bn_on_the_cpu_is_refused(tmp_path: Path, monkeypatch) -> None:
    from archdsl.errors import UserError
    from archdsl.lang.spec import parse_spec
    from archdsl.run import distributed
    from archdsl.run.train import check_trainable

    monkeypatch.setattr(distributed, "current", lambda: distributed.Ranks(rank=0, world_size=3))
    arch, data = parse_spec(_ddp_worker.NO_BATCHNORM), _ddp_worker.images(96, 0)
    with pytest.raises(UserError, match="cannot be split evenly over 3 ranks"):
        check_trainable(arch, data, data, _ddp_worker.CONFIG)
    with pytest.raises(UserError, match="--sync-bn needs CUDA"):
        check_trainable(arch, data, data, _ddp_worker.CONFIG.model_copy(update={"batch_size": 15, "sync_bn": True}))


@pytest.mark.slow
def test_a_rank_that_dies_ends_the_run_with_an_error_not_a_hang(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    port = free_port()
    processes = [context.Process(target=_ddp_worker.rank_that_dies, args=(r, port, str(tmp_path))) for r in (0, 1)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)  # the group's timeout is 30 s: a hang would outlast this
    assert [p.exitcode for p in processes] == [0, 3]
    error = (tmp_path / "rank0.txt").read_text()
    assert error.startswith("RankLost: rank 0: another rank of this run stopped") and "hint:" in error


def test_a_rank_that_never_joins_is_an_error_naming_the_address_not_a_traceback(tmp_path: Path) -> None:
    import os

    spec = tmp_path / "flat.arch"
    spec.write_text(_ddp_worker.NO_BATCHNORM.replace("3x16x16", "3x32x32"))
    port = free_port()
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # rank 1 is never started
    argv = [sys.executable, "-m", "archdsl", "train", str(spec), "--dataset", DATASET, "--device", "cpu"]
    done = subprocess.run(
        [*argv, "--dist-timeout", "2", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"rank 0 of 2 could not join the process group at 127.0.0.1:{port}" in done.stderr
    assert "--dist-timeout 2" in done.stderr and "hint: start every rank with torchrun" in done.stderr


def test_torchrun_variables_that_are_not_numbers_are_an_error(tmp_path: Path, monkeypatch, capsys) -> None:
    from archdsl.cli import main

    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "first", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    out = str(tmp_path / "run")
    assert main(["train", "tiny", "--dataset", DATASET, "--device", "cpu", "--dist-timeout", "2", "--out", out]) == 1
    err = capsys.readouterr().err
    assert "LOCAL_RANK='first' is not a number" in err and "hint: start every rank with torchrun" in err


def test_one_gpu_for_every_rank_is_refused_before_cuda_is_touched(tmp_path: Path, monkeypatch) -> None:
    from archdsl.errors import UsageError
    from archdsl.lang.spec import parse_spec
    from archdsl.run import distributed
    from archdsl.run.session import TrainSettings, plan_training
    from archdsl.run.train import train

    def no_cuda(*args, **kwargs):
        raise AssertionError("CUDA was touched")

    monkeypatch.setattr(torch.cuda, "is_available", no_cuda)
    monkeypatch.setattr(torch.cuda, "device_count", no_cuda)
    monkeypatch.setattr(torch.cuda, "set_device", no_cuda)
    monkeypatch.setattr(distributed, "launched", lambda: True)  # under torchrun, before the group is open
    settings = TrainSettings(dataset=DATASET, out=str(tmp_path / "run"), progress=False)
    with pytest.raises(UsageError, match="--device cuda:1 cannot be used under torchrun") as refused:
        plan_training("tiny", settings, {"device": "cuda:1"})
    assert refused.value.hint == "give --device cuda: each rank uses the GPU of its LOCAL_RANK"
    # From Python with the group already open (archdsl.run.train.train): the same.
    monkeypatch.setattr(distributed, "current", lambda: distributed.Ranks(rank=0, world_size=2))
    arch, data = parse_spec(_ddp_worker.NO_BATCHNORM), _ddp_worker.images(32, 0)
    with pytest.raises(UsageError, match="--device cuda:0 cannot be used under torchrun"):
        train(arch, data, data, _ddp_worker.CONFIG.model_copy(update={"device": "cuda:0"}), progress=False)


@pytest.mark.parametrize("doc", ["training.md", "storage.md"])
def test_the_docs_torchrun_commands_parse_as_torchrun_and_archdsl_read_them(doc: str) -> None:
    from torch.distributed.run import get_args_parser

    from archdsl.cli import build_parser

    text = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text()
    # A line that starts torchrun, perhaps after environment settings, perhaps sent to the background.
    commands = re.findall(r"^(?:\w+=\S+ )*torchrun (.*?)(?: &)?$", text, re.M)
    assert commands
    for command in commands:
        launcher = get_args_parser().parse_args(shlex.split(command))
        assert launcher.module and launcher.training_script == "archdsl"
        build_parser().parse_args(launcher.training_script_args)


def test_a_rank_that_torchrun_stops_says_so_even_with_its_output_quieted(tmp_path: Path) -> None:
    # torchrun ends every surviving rank with SIGTERM once one rank ends (rank 0 killed, say); a
    # follower's output is quieted (quiet_followers), so without a word of its own it vanished silently.
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys, time\n"
        "from archdsl.run import distributed\n"
        "ranks = distributed.Ranks(rank=1, world_size=2)\n"
        "distributed.say_when_stopped(ranks)\n"
        "distributed.quiet_followers(ranks)\n"
        "print('ready', file=sys.__stdout__, flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = process.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert process.returncode == 128 + signal.SIGTERM
    assert err.startswith("archdsl: rank 1 of 2: stopped by torchrun (SIGTERM)"), err
    assert "another rank ended" in err and "Traceback" not in err


@pytest.mark.slow
def test_torchrun_reports_a_failed_rank_with_its_own_traceback_after_archdsls_line(tmp_path: Path) -> None:
    """What docs/training.md says a user sees when a rank ends with a status other than 0: archdsl's line
    first, then torchrun's own report (its ChildFailedError traceback, none of whose frames is archdsl's, and
    the rank that ended first under `Root Cause`), exit status 1. Here every rank meets a user's mistake."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "archdsl"]
    command += ["train", "tiny", "--dataset", DATASET, "--device", "cpu", "--out", str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    said = output.index("archdsl: error: design 'tiny' has 10 classes")
    traceback = output.index("Traceback (most recent call last):")
    assert said < traceback, output
    frames = re.findall(r'^  File "([^"]+)"', output[traceback:], re.M)
    # archdsl's packages, not the checkout: a virtualenv inside the checkout (CI's .venv-ci) holds torch's frames.
    root = Path(__file__).resolve().parents[1]
    ours = [root / package for package in ("archdsl", "search", "analysis", "specs")]
    assert frames and not [f for f in frames if any(Path(f).resolve().is_relative_to(p) for p in ours)]
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in output
    assert "Root Cause (first observed failure)" in output and "exitcode  : 1" in output, output
