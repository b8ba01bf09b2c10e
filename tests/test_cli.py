"""What every command shares: its flags spelled out, unknown flags answered with the command's
usage and the closest flag, and no traceback when the reader of its output goes away."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from archdsl.cli import build_parser, main


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_a_flag_is_never_abbreviated(capsys):
    """`train --epoch 1` once ran as `--epochs 1`... or, spelled `--epoch` on a longer run, as the default."""
    err = _usage_error(["train", "tiny", "--dataset", "synthetic", "--epoch", "1"], capsys)
    assert "usage: archdsl train " in err  # the command's usage, not archdsl's
    assert "unrecognized arguments: --epoch 1" in err and "did you mean `--epochs`?" in err


@pytest.mark.parametrize(
    "argv, suggestion",
    [
        (["search", "--dry-run", "--batchsize", "8"], "--batch-size"),
        (["eval", "ckpt.safetensors", "--devic=cpu"], "--device"),
        (["data", "info", "--dataset", "synthetic", "--data-rot", "x"], "--data-root"),
    ],
)
def test_an_unknown_flag_shows_the_command_usage_and_the_closest_flag(argv, suggestion, capsys):
    err = _usage_error(argv, capsys)
    assert err.startswith(f"usage: archdsl {' '.join(argv[:2] if argv[0] == 'data' else argv[:1])} ")
    assert f"did you mean `{suggestion}`?" in err and "Traceback" not in err


def test_an_unknown_word_is_refused_without_a_guess(capsys):
    err = _usage_error(["check", "tiny", "--zzzzzz"], capsys)
    assert "usage: archdsl check " in err and "unrecognized arguments: --zzzzzz" in err and "did you mean" not in err


def test_every_parser_refuses_abbreviations():
    parser = build_parser()
    stack = [parser]
    seen = 0
    while stack:
        current = stack.pop()
        seen += 1
        assert current.allow_abbrev is False, current.prog
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    assert seen > 12  # archdsl, its commands and data's actions


def test_a_closed_pipe_ends_quietly(monkeypatch, capsys):
    """`archdsl data list | head -1`: the reader is gone before archdsl has written its lines."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["data", "list"]) == 141  # 128 + SIGPIPE, as a shell reports a writer `head` stopped
        print("more output goes nowhere, silently")
        stream.flush()
    finally:
        monkeypatch.undo()
        stream.close()
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "c.safetensors", "--corruptions", "fog,contrast", "--severities", "1,5"],
        ["analyze", "c.safetensors", "--corruptions", "fog, contrast", "--severities", "1,5"],
        ["data", "corrupt", "--dataset", "synthetic", "--out", "x", "--corruptions", "fog,contrast"],
        ["search", "--severities", "1,5"],
    ],
)
def test_every_list_flag_takes_commas(argv):
    """eval and analyze once took `--corruptions fog contrast`, data corrupt and search commas."""
    args = build_parser().parse_args(argv)
    if "--corruptions" in argv:
        assert args.corruptions == ("fog", "contrast")
    assert getattr(args, "severities", None) in (None, (1, 5))


def test_a_comma_list_is_not_read_as_one_misspelt_name(tmp_path, capsys):
    """`fog,contrast` was one name to eval, which answered "did you mean `contrast`"."""
    assert main(["data", "corrupt", "--dataset", "synthetic:test=4", "--out", str(tmp_path),
                 "--corruptions", "fog,contrst", "--no-progress"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "'contrst'" in err and "did you mean `contrast`?" in err and "fog,contrst" not in err


@pytest.mark.parametrize("command", ["train", "search"])
def test_a_missing_dataset_names_flags_that_exist_and_leaves_no_folder(command, tmp_path, capsys):
    """search's hint said `--download`, which search lacked; both commands left an empty --out behind."""
    out = tmp_path / "runs" / "new"
    argv = [command, *(["tiny"] if command == "train" else []), "--dataset", "cifar10", "--data-root", str(tmp_path)]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "CIFAR-10 not found" in err and "--download" in err
    assert not (tmp_path / "runs").exists()
    assert build_parser().parse_args([*argv, "--download"]).download is True


# Ctrl-C lands while a module is being imported (`TARGET`): a finder placed first raises it there, as Python's
# signal handler would (torch alone takes 1.5 s to import on an idle machine, 8 s on a loaded one).
INTERRUPTED_AT_IMPORT = """
import sys

TARGET = sys.argv[1]


class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == TARGET:
            sys.meta_path.remove(self)
            raise KeyboardInterrupt
        return None


from archdsl.cli import program

sys.meta_path.insert(0, CtrlC())
sys.argv = ["archdsl", *sys.argv[2:]]
program()
"""


@pytest.mark.parametrize(
    "module",
    [
        "archdsl.commands.search",  # while the parser is built (every command registers)
        "torch",  # the command's first heavy import starts
        "torch.masked",  # deep in torch's import, torch.distributed loaded already: the clean-up must not re-import
        "optuna",
    ],
)
def test_ctrl_c_at_any_moment_of_start_up_is_one_line_and_130(tmp_path, module):
    import subprocess

    import _search_support as support

    args = support.search_args(tmp_path, "s", "--n-trials", "1")
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_IMPORT, module, *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "archdsl: interrupted\n"), done.stderr


def test_torchs_grad_strides_warning_of_a_data_parallel_run_is_not_printed(monkeypatch, recwarn):
    """DDP warns "Grad strides do not match bucket view strides" in every 2-rank run of a channels_last model; the
    strides differ only on dimensions of size 1 (a 1x1 kernel), where both layouts are the same bytes
    (docs/training.md): four lines of noise before archdsl's. Any other warning is printed as before."""
    import warnings

    import archdsl.commands.check as check

    def warns(args) -> int:
        warnings.warn(
            "Grad strides do not match bucket view strides. This may indicate grad was not created according to "
            "the gradient layout contract, or that the param's strides changed since DDP was constructed.  This "
            "is not an error, but may impair performance.\ngrad.sizes() = [64, 64, 1, 1], strides() = [64, 1, 64, "
            "64]\nbucket_view.sizes() = [64, 64, 1, 1], strides() = [64, 1, 1, 1]",
            UserWarning,
            stacklevel=1,
        )
        warnings.warn("some other warning", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(check, "run", warns)
    assert main(["check", "tiny"]) == 0
    shown = [str(w.message) for w in recwarn]  # what reached the user (pytest records what Python would print)
    assert shown == ["some other warning"], shown
