"""Trials: constraints before training, failures recorded with their reason, staged analyses."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import _search_support as support
import pytest
import torch
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.errors import UserError
from archdsl.search.fidelity import measures as measure
from archdsl.search.objectives import OBJECTIVES, dominates, parse_objectives
from archdsl.search.studies.record import COPY_ATTR

pytestmark = pytest.mark.usefixtures("one_thread")


def test_objectives_parse_with_directions_and_dominance_follows_them():
    objs = parse_objectives("accuracy,params")
    assert [(o.name, o.direction) for o in objs] == [("accuracy", "maximize"), ("params", "minimize")]
    assert dominates({"accuracy": 0.5, "params": 10}, {"accuracy": 0.4, "params": 10}, objs)
    assert not dominates({"accuracy": 0.5, "params": 20}, {"accuracy": 0.4, "params": 10}, objs)
    assert not dominates({"accuracy": 0.5, "params": 10}, {"accuracy": 0.5, "params": 10}, objs)
    with pytest.raises(UserError, match="unknown objective 'acc'"):
        parse_objectives("acc")
    assert OBJECTIVES["nep"].better(0.1, 0.2) and OBJECTIVES["robustness"].better(0.6, 0.5)


def test_constraints_prune_designs_before_any_training(tmp_path):
    # The limit is the MSA-free design's size: some MSA designs are larger, some smaller.
    base_params = measure.static_costs(
        measure.fit_to_data(measure.load_base(str(support.write_base(tmp_path))), (3, 32, 32), 4)
    )["params"]
    args = support.search_args(
        tmp_path,
        "cons",
        "--strategy",
        "grid",
        "--n-trials",
        "8",
        "--objectives",
        "accuracy",
        "--max-params",
        str(base_params),
        "--opt",  # a recipe setting: every candidate trains with it, and the command keeps it
        "momentum",
        "--no-sched-on-updates",
    )
    assert main(args) == 0
    trials = support.load(tmp_path, "cons").trials
    trained = json.loads(
        (Path(next(t for t in trials if "dir" in t.user_attrs).user_attrs["dir"]) / "config.json").read_text()
    )
    assert (trained["recipe"], trained["optimizer"], trained["sched_on_updates"], trained["batch_size"]) == (
        "fast", "momentum", False, 32,
    )  # fmt: skip
    assert len(trials) == 8
    for t in trials:
        params = t.user_attrs["metrics"]["params"]
        if params > base_params:
            assert t.state == TrialState.PRUNED and "--max-params" in t.user_attrs["pruned_reason"]
            assert "accuracy" not in t.user_attrs["metrics"] and "dir" not in t.user_attrs  # never trained
        else:
            assert t.state == TrialState.COMPLETE and t.values[0] == t.user_attrs["metrics"]["accuracy"]
    assert {t.state for t in trials} == {TrialState.PRUNED, TrialState.COMPLETE}
    # Every trial says where its MSAs are; the study keeps the command that reproduces it, which
    # names this very study and space (running it again finds the study complete).
    assert all(t.user_attrs["layout"].startswith("c1:") for t in trials)
    command = support.load(tmp_path, "cons").user_attrs["command"]
    assert f"`{command}`" in (tmp_path / "runs" / "cons" / "report" / "report.md").read_text()
    argv = shlex.split(command)
    assert argv[:2] == ["archdsl", "search"] and "--max-params" in argv
    # The recipe's flags, in order (the last may end the line).
    assert " --recipe fast --batch-size 32 --opt momentum --no-sched-on-updates " in f"{command} "
    assert main(argv[1:]) == 0
    assert len(support.load(tmp_path, "cons").trials) == 8


def test_a_diverging_design_fails_with_its_reason_and_the_study_goes_on(tmp_path, capsys):
    args = support.search_args(tmp_path, "nan", "--strategy", "random", "--n-trials", "2", "--lr", "1e12")
    assert main(args) == 0
    trials = support.load(tmp_path, "nan").trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL]
    assert all(t.user_attrs["fail_reason"].startswith("training diverged") for t in trials)
    report = (tmp_path / "runs" / "nan" / "report" / "report.md").read_text()
    assert "No trial has completed yet." in report and "training diverged" in report


def test_out_of_memory_fails_only_that_trial(tmp_path, monkeypatch):
    real_train = measure.train_candidate
    calls = []

    def train_or_run_out(arch, *args, **kwargs):
        calls.append(arch.n_msa)
        if len(calls) == 1:  # the first candidate does not fit on the device
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_train(arch, *args, **kwargs)

    monkeypatch.setattr(measure, "train_candidate", train_or_run_out)
    assert main(support.search_args(tmp_path, "oom", "--strategy", "random", "--n-trials", "2", "--seed", "1")) == 0
    first, second = support.load(tmp_path, "oom").trials
    assert first.state == TrialState.FAIL and first.user_attrs["fail_reason"].startswith("out of memory")
    assert second.state == TrialState.COMPLETE


@pytest.mark.slow
def test_expensive_objectives_run_only_for_designs_not_dominated_on_the_cheap_ones(tmp_path):
    # The endpoints go first: the MSA-free design has fewer parameters and FLOPs than the
    # all-MSA one, which is therefore pruned before it is trained or its Hessian computed.
    args = support.search_args(
        tmp_path,
        "staged",
        "--strategy",
        "random",
        "--n-trials",
        "4",
        "--seed-endpoints",
        "--objectives",
        "params,flops,nep",
        "--hessian-batches",
        "1",
        "--hessian-iters",
        "3",
    )
    assert main(args) == 0
    trials = support.load(tmp_path, "staged").trials
    cheap = parse_objectives("params,flops")
    assert trials[1].user_attrs["endpoint"] == "swin-like"
    assert trials[1].state == TrialState.PRUNED
    assert trials[1].user_attrs["pruned_reason"] == "dominated on the cheap objectives by trial 0"
    measured = [t for t in trials if COPY_ATTR not in t.user_attrs]  # a copy of a design is never measured
    assert len(measured) == 4  # --n-trials counts designs measured, not copies
    for t in measured:
        metrics = t.user_attrs["metrics"]
        if t.state == TrialState.COMPLETE:
            assert 0 <= metrics["nep"] <= 1 and t.values[2] == metrics["nep"] and "accuracy" in metrics
        else:
            assert t.state == TrialState.PRUNED and "nep" not in metrics and "accuracy" not in metrics
            by = int(t.user_attrs["pruned_reason"].rsplit(" ", 1)[1])
            assert trials[by].state == TrialState.COMPLETE and dominates(
                trials[by].user_attrs["metrics"], metrics, cheap
            )


def test_ctrl_c_keeps_the_finished_trials_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    from archdsl.search import runner

    real = runner.run_search

    def interrupted_after_one_trial(plan, *, on_trial=None):
        def report_then_stop(study, trial):
            on_trial(study, trial)
            raise KeyboardInterrupt  # as Ctrl-C right after the first trial

        return real(plan, on_trial=report_then_stop)

    args = support.search_args(tmp_path, "ctrlc", "--strategy", "random", "--n-trials", "2")
    monkeypatch.setattr(runner, "run_search", interrupted_after_one_trial)
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "interrupted; the finished trials are kept in" in err and "continue with the same command" in err
    assert [t.state for t in support.load(tmp_path, "ctrlc").trials] == [TrialState.COMPLETE]
    monkeypatch.setattr(runner, "run_search", real)
    assert main(args) == 0
    trials = support.load(tmp_path, "ctrlc").trials
    assert len(trials) == 2 and all(t.state == TrialState.COMPLETE for t in trials)


def test_a_bug_in_archdsl_stops_the_search_with_its_traceback_after_marking_the_trial(tmp_path, monkeypatch):
    # Only what a design can cause (out of memory, divergence, too large to build) fails a
    # trial and lets the search go on; a bug would otherwise look like a study of bad designs.
    def broken(arch, *args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(measure, "train_candidate", broken)
    args = support.search_args(tmp_path, "bug", "--strategy", "random", "--n-trials", "3")
    with pytest.raises(KeyError, match="a bug"):
        main(args)
    trial, retry = support.load(tmp_path, "bug").trials
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["fail_reason"].startswith("stopped the search: KeyError: 'a bug' (test_search_trials.py:")
    assert retry.state == TrialState.WAITING and retry.system_attrs["failed_trial"] == trial.number
    # It says nothing about the design: the same command measures it again once fixed.
    monkeypatch.undo()
    assert main(args) == 0
    trials = support.load(tmp_path, "bug").trials
    assert trials[1].params == trial.params and trials[1].state == TrialState.COMPLETE


def test_a_cpu_allocation_failure_is_out_of_memory_for_the_design(tmp_path, monkeypatch):
    def too_big(arch, *args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: 4e14 bytes")

    monkeypatch.setattr(measure, "train_candidate", too_big)
    assert main(support.search_args(tmp_path, "cpuoom", "--strategy", "random", "--n-trials", "1")) == 0
    (trial,) = support.load(tmp_path, "cpuoom").trials
    assert trial.state == TrialState.FAIL and trial.user_attrs["fail_reason"].startswith("out of memory")


def test_a_design_over_the_memory_limit_fails_its_trial_before_it_is_built(tmp_path, monkeypatch):
    from archdsl.nn import summary

    # A limit between the tiny space's designs: those with MSAs (more activations) are over it.
    base = measure.fit_to_data(measure.load_base(str(support.write_base(tmp_path))), (3, 32, 32), 4)
    limit = summary.memory_estimate(summary.summarize(base), base).total + 1
    monkeypatch.setattr(summary, "MEMORY_LIMIT_BYTES", limit)
    args = support.search_args(tmp_path, "big", "--strategy", "grid", "--n-trials", "3", "--objectives", "params")
    assert main(args) == 0
    trials = [t for t in support.load(tmp_path, "big").trials if "copy_of" not in t.user_attrs]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert failed and all(t.user_attrs["fail_reason"].startswith("too large: design") for t in failed)
    assert all(t.state == TrialState.COMPLETE for t in trials if t.user_attrs["n_msa"] == 0)


def test_a_kernel_the_device_lacks_fails_the_trial_and_the_search_goes_on(tmp_path, monkeypatch):
    import torch

    def low_precision(arch, *args, **kwargs):  # torch's own error: no bf16 kernel for this op on the CPU
        torch.linalg.eigvalsh(torch.eye(3, dtype=torch.bfloat16))

    monkeypatch.setattr(measure, "train_candidate", low_precision)
    assert main(support.search_args(tmp_path, "nokernel", "--strategy", "random", "--n-trials", "2")) == 0
    trials = support.load(tmp_path, "nokernel").trials
    assert len(trials) == 2 and all(t.state == TrialState.FAIL for t in trials)
    assert all(t.user_attrs["fail_reason"].startswith("the device cannot run it: ") for t in trials)
    assert "BFloat16" in trials[0].user_attrs["fail_reason"]


def test_an_integer_tensor_in_a_float_kernel_is_a_bug_not_the_device(tmp_path, monkeypatch):
    import torch

    def bug(arch, *args, **kwargs):  # the same kind of torch error, but for integers: archdsl's mistake
        torch.nn.functional.gelu(torch.zeros(2, dtype=torch.long))

    monkeypatch.setattr(measure, "train_candidate", bug)
    with pytest.raises(NotImplementedError, match="Long"):
        main(support.search_args(tmp_path, "intbug", "--strategy", "random", "--n-trials", "2"))
    (trial, retry) = support.load(tmp_path, "intbug").trials
    assert trial.user_attrs["fail_reason"].startswith("stopped the search: NotImplementedError")


@pytest.mark.parametrize(
    ("error", "device_cannot"),
    [  # torch's texts for hardware this test machine may not have
        (
            RuntimeError(
                "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input"
            ),
            True,
        ),
        (RuntimeError("FIND was unable to find an engine to execute this computation"), True),
        (
            RuntimeError(
                "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, k, ...)`"
            ),
            True,
        ),
        (
            RuntimeError(
                "Expected canUse32BitIndexMath(input) && canUse32BitIndexMath(output) to be true, but got false."
            ),
            True,
        ),
        (
            NotImplementedError(
                "The operator 'aten::_upsample_bicubic2d_aa.out' is not currently implemented for the MPS device."
            ),
            True,
        ),
        (RuntimeError("CUDA error: invalid configuration argument"), True),
        (NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Half'"), True),
        (NotImplementedError("\"GeluKernelImpl\" not implemented for 'Long'"), False),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x10 and 12x3)"), False),
        (ValueError("CUDNN_STATUS_NOT_SUPPORTED"), False),  # not torch's: a RuntimeError or nothing
    ],
)
def test_which_errors_say_the_device_cannot_run_the_design(error, device_cannot):
    assert measure.is_unsupported_by_device(error) is device_cannot
