"""Every numeric flag that sizes a search's (or a training run's) work has an upper bound, stated in --help and
refused in one line past it; the ladder of budgets stays trainable, and `--dry-run`'s time estimate stays a
number a person can read (issue 57: `--budget-steps 1100 --dry-run` printed a 186,000-character line and an
OverflowError traceback)."""

from __future__ import annotations

import re

import _search_support as support
import pytest

from archdsl.cli import main
from archdsl.search.report import duration_text

# The flags that size the work, per command: each one's --help states its bound.
SEARCH_SIZING = (
    "--budget-steps", "--n-trials", "--seeds", "--max-seeds", "--epochs", "--subset", "--val-subset", "--batch-size",
    "--timeout", "--hessian-batches", "--hessian-iters", "--image-size", "--max-retry", "--heartbeat",
    "--grace-period", "--dist-timeout",
)  # fmt: skip
TRAIN_SIZING = ("--epochs", "--subset", "--batch-size", "--image-size", "--dist-timeout")


def _help_of(capsys, command: str) -> dict[str, str]:
    """Each flag's --help text, joined into one line."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    found: dict[str, str] = {}
    flag = None
    for line in text.splitlines():
        match = re.match(r"^  (--[a-z-]+)", line)
        if match:
            flag = match.group(1)
            found[flag] = line
        elif flag is not None and line.startswith("      "):
            found[flag] += " " + line.strip()
        else:
            flag = None
    return found


@pytest.mark.parametrize(("command", "flags"), [("search", SEARCH_SIZING), ("train", TRAIN_SIZING)])
def test_help_states_the_bound_of_every_flag_that_sizes_work(capsys, command, flags):
    helps = _help_of(capsys, command)
    for flag in flags:
        assert re.search(r"at most [0-9,.]+", helps[flag].replace("- ", "-")), (flag, helps[flag])


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget-steps", "1100"), ("--n-trials", "10000000"), ("--seeds", "100000"), ("--epochs", "1000000"),
     ("--batch-size", "100000000"), ("--timeout", "1e300"), ("--hessian-iters", "1000000")],
)  # fmt: skip
def test_a_value_past_its_bound_is_refused_in_one_line(capsys, flag, value):
    with pytest.raises(SystemExit) as exit:
        main(["search", flag, value, "--dry-run"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # (after argparse's usage, as for any bad flag)
    assert f"argument {flag}: expected a value less than or equal to" in last and "Traceback" not in err
    assert len(last) < 200


def test_a_ladder_past_the_trainable_epochs_is_refused_before_the_plan(tmp_path, capsys):
    argv = ["search", "--dataset", support.DATASET, "--base", str(support.write_base(tmp_path)), "--device", "cpu"]
    assert main([*argv, "--epochs", "100", "--budget-steps", "10", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) <= 2, err
    assert "--budget-steps 10 from --epochs 100" in err and "--budget-steps 6" in err


def test_the_longest_dry_run_estimate_is_a_readable_number(tmp_path, capsys):
    argv = ["search", "--dataset", support.DATASET, "--base", str(support.write_base(tmp_path)), "--device", "cpu"]
    argv += ["--batch-size", "32"]  # (one the 96 images hold: the dry run checks the data as the search does)
    assert main([*argv, "--epochs", "8", "--budget-steps", "10", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert max(map(len, (out + err).splitlines())) < 400
    assert re.search(r"time: about [0-9.:]+ (s|min|h) to [0-9,.:]+ (s|min|h|days|years) of one core", err), err


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(9.5, "9.5 s"), (80, "1:20 min"), (7500, "2:05 h"), (47 * 3600, "47:00 h"), (3 * 86400, "3 days"),
     (400 * 86400, "1.1 years"), (1e15, "31,688,088 years"), (float("inf"), "forever")],
)  # fmt: skip
def test_a_duration_reads_in_days_or_years_when_long(seconds, text):
    assert duration_text(seconds) == text
