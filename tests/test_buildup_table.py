"""benchmarks/buildup_table.py's own inputs: a bad flag or a damaged --work ends in one line (exit 2), before any
training; a --work whose last line a killed run cut mid-write resumes, the cut run trained again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.test_benchmarks import load_script

SYNTHETIC = "synthetic:classes=4,train=96,test=32"  # built-in, no download: the space and data load in a second


def _status(script, argv: list[str], monkeypatch) -> int:
    """The script's exit status run as `python benchmarks/buildup_table.py ARGV`: argparse's (a flag's type), or
    what `main` returns (0, or a UsageError's)."""
    monkeypatch.setattr(sys, "argv", ["benchmarks/buildup_table.py", *argv])
    try:
        return script.main() or 0
    except SystemExit as stopped:
        return int(stopped.code)


def _untrained(script, monkeypatch) -> list:
    """Replaces the training of a run by a record made up at once; the list of runs it was asked for."""
    asked: list = []

    def run_one(arch, data, test_set, fid, seed, **kwargs):
        asked.append(seed)
        return {"seed": seed, "val_acc": 0.5, "test_acc": 0.5, "curve": []}

    monkeypatch.setattr(script, "run_one", run_one)
    return asked


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--shard", "3/2"], "argument --shard: '3/2': I must be 0 to N-1"),
        (["--shard", "x"], "argument --shard: 'x' is not I/N"),
        (["--shard", "0/0"], "argument --shard: '0/0': I must be 0 to N-1"),
        (["--shard=-1/2"], "argument --shard: '-1/2': I must be 0 to N-1"),
        (["--epochs", "0"], "argument --epochs: 0 is below 1"),
        (["--subset", "nan"], "argument --subset: nan is not a fraction"),
        (["--subset", "1.5"], "argument --subset: 1.5 is not a fraction"),
        (["--limit", "-1"], "argument --limit: -1 is below 1"),
        (["--threads", "0"], "argument --threads: 0 is below 1"),
        (["--dataset", "bogus"], "archdsl: error: unknown dataset 'bogus'"),
        (["--search", "bogus"], "archdsl: error: cannot search 'bogus'"),
        (["--first", "k,bogus"], "archdsl: error: cannot search 'bogus'"),
    ],
)
def test_a_bad_flag_ends_in_one_line_before_any_training(tmp_path: Path, monkeypatch, capsys, argv, said):
    script = load_script("buildup_table", monkeypatch)
    asked = _untrained(script, monkeypatch)
    assert _status(script, ["--work", str(tmp_path / "work"), "--dataset", SYNTHETIC, *argv], monkeypatch) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err
    assert not asked and not (tmp_path / "work").exists()


def _row(digest: str, seed: int) -> str:
    return json.dumps({"digest": digest, "params": {}, "run": {"seed": seed, "val_acc": 0.5}, "meta": {}}) + "\n"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (_row("d1", 0) + "not json\n" + _row("d2", 0), "runs-0.jsonl line 2 is not a finished run's record"),
        (_row("d1", 0) + "[1, 2]\n", "runs-0.jsonl line 2 is not a finished run's record"),
        ('{"digest": "d1", "run": {}}\n', "runs-0.jsonl line 1 is not a finished run's record"),
    ],
)
def test_a_damaged_work_folder_ends_in_one_line_naming_the_line(tmp_path: Path, monkeypatch, capsys, text, said):
    script = load_script("buildup_table", monkeypatch)
    asked = _untrained(script, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    (work / "runs-0.jsonl").write_text(text)
    for extra in ([], ["--assemble", "--out", str(tmp_path / "table.json")]):
        assert _status(script, ["--work", str(work), "--dataset", SYNTHETIC, *extra], monkeypatch) == 2
        err = capsys.readouterr().err
        assert err.startswith("archdsl: error: ") and said in err and "Traceback" not in err, err
    assert not asked and (work / "runs-0.jsonl").read_text() == text  # nothing trained, nothing rewritten


def test_a_work_path_that_is_a_file_ends_in_one_line(tmp_path: Path, monkeypatch, capsys):
    script = load_script("buildup_table", monkeypatch)
    (tmp_path / "work").write_text("")
    assert _status(script, ["--work", str(tmp_path / "work"), "--dataset", SYNTHETIC], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: --work ") and "is a file" in err and "Traceback" not in err, err


def test_a_last_line_cut_mid_write_is_dropped_and_its_run_trained_again(tmp_path: Path, monkeypatch, capsys):
    """A run killed while it wrote its line leaves the line cut short, with no line break: the resume drops it
    (saying so), trains that run again, and its new line starts a line of its own."""
    script = load_script("buildup_table", monkeypatch)
    asked = _untrained(script, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    argv = ["--work", str(work), "--dataset", SYNTHETIC, "--search", "k", "--first", "", "--seeds", "0", "1"]
    argv += ["--accuracy-only", "--limit", "1"]
    assert _status(script, argv, monkeypatch) == 0  # the first run of the shard, whole
    first = (work / "runs-0.jsonl").read_text()
    row = json.loads(first)
    second = json.dumps({**row, "run": {**row["run"], "seed": 1}}) + "\n"  # the shard's next run: seed 1
    (work / "runs-0.jsonl").write_text(first + second[: len(second) // 2])  # killed mid-write
    capsys.readouterr()
    assert _status(script, argv, monkeypatch) == 0
    out = capsys.readouterr().out
    assert len(asked) == 2 and "cut short" in out and "Traceback" not in out, out
    lines = (work / "runs-0.jsonl").read_text().splitlines(keepends=True)
    assert lines[0] == first and len(lines) == 2 and all(line.endswith("\n") for line in lines)
    assert json.loads(lines[1]) == json.loads(second) | {"meta": json.loads(lines[1])["meta"]}  # trained again
    assert len(script.finished(work)) == 2


def test_designs_names_the_designs_trained_in_its_order_and_a_name_of_no_design_ends_in_one_line(
    tmp_path: Path, monkeypatch, capsys
):
    """--designs: only the designs the file names, design by design in the file's order (a table cut short holds
    the first ones whole); a name that is no design of the space ends in one line, before any work."""
    script = load_script("buildup_table", monkeypatch)
    trained: list[tuple[str, int]] = []

    def run_one(arch, data, test_set, fid, seed, **kwargs):
        trained.append((arch.digest(), seed))
        return {"seed": seed, "val_acc": 0.5, "test_acc": 0.5, "curve": []}

    monkeypatch.setattr(script, "run_one", run_one)
    space = script.the_space(("k",), SYNTHETIC, "resnet-fmnist")
    digests = [digest for digest, _, _ in script.designs(space)]
    names = tmp_path / "designs.txt"
    names.write_text(f"# the most needed first\n{digests[5]}\t3 sets\n\n{digests[2][:12]} # a prefix\n")
    work = tmp_path / "work"
    argv = ["--work", str(work), "--dataset", SYNTHETIC, "--base", "resnet-fmnist", "--search", "k", "--first", ""]
    argv += ["--seeds", "0", "1", "--accuracy-only", "--designs", str(names)]
    assert _status(script, argv, monkeypatch) == 0
    assert trained == [(digests[5], 0), (digests[5], 1), (digests[2], 0), (digests[2], 1)]

    names.write_text(f"{digests[5]}\nbeefbeefbeefbeef\n")
    trained.clear()
    capsys.readouterr()
    assert _status(script, [*argv[:1], str(tmp_path / "other"), *argv[2:]], monkeypatch) == 2
    err = capsys.readouterr().err
    assert "line 2: beefbeefbeefbeef names no design of the space" in err and "Traceback" not in err, err
    assert not trained and not (tmp_path / "other").exists()
