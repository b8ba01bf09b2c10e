"""A journal with a damaged line in the middle: the line named, every trial recovered by `archdsl study repair`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.errors import UserError
from archdsl.search.runner import load_study
from archdsl.search.studies._journal_check import repair_records
from archdsl.search.studies.record import REPAIRED_ATTR
from archdsl.search.studies.storage import StorageOptions, open_storage

TRIALS = 6
DAMAGED_TRIAL = 3


def _journal(folder: Path) -> Path:
    """A study of six finished trials, each with a parameter, a user attribute and a value."""
    path = folder / "study.journal"
    storage = open_storage(StorageOptions(url=f"journal:{path}"), folder, "s")
    study = optuna.create_study(storage=storage, study_name="s", sampler=optuna.samplers.RandomSampler(seed=0))

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -3, 3)
        trial.set_user_attr("note", f"trial {trial.number}")
        return x * x

    study.optimize(objective, n_trials=TRIALS)
    return path


def _summary(path: Path) -> list[tuple]:
    study = load_study("s", open_storage(StorageOptions(url=f"journal:{path}"), path.parent, "s"))
    return [(t.number, t.state, t.values, t.params, t.user_attrs) for t in study.trials]


def _line_of(lines: list[bytes], op_code: int, trial: int) -> int:
    """The index of the line with `op_code` of trial number `trial` (a creation: the trial-th one)."""
    found = [i for i, line in enumerate(lines) if json.loads(line)["op_code"] == op_code]
    if op_code == 4:
        return found[trial]
    return next(i for i in found if json.loads(lines[i])["trial_id"] == trial)


def _damage(path: Path, how: str) -> int:
    """Damage one line of trial 3's records as a partial write would; the line number (from 1)."""
    lines = path.read_bytes().split(b"\n")[:-1]
    if how == "change cut short":  # its user attribute record, cut in the middle
        i = _line_of(lines, 8, DAMAGED_TRIAL)
        lines[i] = lines[i][: len(lines[i]) // 2]
    elif how == "creation cut short":
        i = _line_of(lines, 4, DAMAGED_TRIAL)
        lines[i] = lines[i][: len(lines[i]) // 2]
    elif how == "creation zeroed":  # a lost write: the right length of zero bytes
        i = _line_of(lines, 4, DAMAGED_TRIAL)
        lines[i] = b"\0" * len(lines[i])
    elif how == "record glued to a torn one":  # the next record lands on the torn line
        i = _line_of(lines, 8, DAMAGED_TRIAL)
        lines[i : i + 2] = [lines[i][: len(lines[i]) // 2] + lines[i + 1]]
    elif how == "newline lost":  # two whole records on one line
        i = _line_of(lines, 8, DAMAGED_TRIAL)
        lines[i : i + 2] = [lines[i] + lines[i + 1]]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return i + 1


@pytest.mark.parametrize(
    "how", ["change cut short", "creation cut short", "creation zeroed", "record glued to a torn one", "newline lost"]
)
def test_a_damaged_journal_line_is_named_and_repair_recovers_every_trial_around_it(tmp_path, capsys, how):
    path = _journal(tmp_path)
    before = _summary(path)
    line = _damage(path, how)

    # Before: "is not an Optuna journal file (JSONDecodeError)", and no trial readable.
    with pytest.raises(UserError, match=f"damaged at line {line}") as info:
        open_storage(StorageOptions(url=f"journal:{path}"), tmp_path, "s")
    assert f"archdsl study repair {path}" in str(info.value)
    assert main(["report", "s", "--storage", f"journal:{path}", "--out", str(tmp_path)]) == 1
    assert f"damaged at line {line}" in capsys.readouterr().err

    assert main(["study", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"line {line}: " in out and f"repaired {path}: {TRIALS} trials readable" in out
    assert Path(f"{path}.damaged").exists()
    after = _summary(path)
    assert [t[0] for t in after] == list(range(TRIALS))  # no number shifted
    for trial in range(TRIALS):
        if trial != DAMAGED_TRIAL:  # every trial before and after the damaged line, as it was
            assert after[trial] == before[trial]
    number, state, values, params, attrs = after[DAMAGED_TRIAL]
    assert (state, values, params) == before[DAMAGED_TRIAL][1:4]  # its other records restore it
    if how in ("change cut short", "record glued to a torn one"):
        assert "note" not in attrs  # the damaged change itself is lost
    else:
        assert attrs == before[DAMAGED_TRIAL][4]
    assert main(["report", "s", "--storage", f"journal:{path}", "--out", str(tmp_path)]) == 0


def test_a_rebuilt_creation_whose_trial_never_finished_is_failed_and_retried_by_the_next_search(tmp_path):
    from archdsl.search.studies.storage import fail_stale_trials

    path = _journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    last = _line_of(lines, 4, TRIALS - 1)  # the last trial: created, and its record cut; nothing after
    path.write_bytes(b"".join(line + b"\n" for line in lines[:last]) + lines[last][:40] + b"\n")
    records = repair_records(path)
    assert main(["study", "repair", str(path)]) == 0
    study = load_study("s", open_storage(StorageOptions(url=f"journal:{path}"), tmp_path, "s"))
    rebuilt = study.trials[-1]
    assert rebuilt.number == TRIALS - 1 and rebuilt.state == TrialState.RUNNING
    assert REPAIRED_ATTR in rebuilt.system_attrs and records.actions
    assert fail_stale_trials(study, StorageOptions(url=None)) == [TRIALS - 1]
    assert study.trials[-1].state == TrialState.WAITING  # queued again


def test_a_journal_record_with_an_unknown_op_code_or_a_study_without_a_name_is_a_clear_error(tmp_path, capsys):
    path = _journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    unknown = json.dumps({"op_code": 99, "worker_id": "w"}).encode()
    path.write_bytes(b"".join(line + b"\n" for line in [lines[0], unknown, *lines[1:]]))
    # Before: Optuna's AssertionError.
    with pytest.raises(UserError, match="damaged at line 2: unknown op code 99"):
        open_storage(StorageOptions(url=f"journal:{path}"), tmp_path, "s")
    assert main(["study", "repair", str(path)]) == 0
    assert len(_summary(path)) == TRIALS

    nameless = json.dumps({"op_code": 0, "worker_id": "w", "directions": [1]}).encode()
    path.write_bytes(nameless + b"\n" + path.read_bytes())
    with pytest.raises(UserError, match=r"line 1 \(a study's creation\): a CREATE_STUDY record without its study_name"):
        open_storage(StorageOptions(url=f"journal:{path}"), tmp_path, "s")  # before: KeyError
    assert main(["study", "repair", str(path)]) == 1  # its trials would land in another study
    assert "cannot repair line 1: it created a study" in capsys.readouterr().err


def test_repair_of_a_sound_journal_changes_nothing(tmp_path, capsys):
    path = _journal(tmp_path)
    content = path.read_bytes()
    assert main(["study", "repair", str(path)]) == 0
    assert "no damaged line; nothing to repair" in capsys.readouterr().out
    assert path.read_bytes() == content and not Path(f"{path}.damaged").exists()


def test_repair_reports_a_torn_last_record_it_leaves_out(tmp_path, capsys):
    path = _journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    lines[2] = lines[2][:20]  # a damaged change in the middle, and a write cut short at the end
    path.write_bytes(b"".join(line + b"\n" for line in lines) + b'{"op_code":8,"wor')
    assert main(["study", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "line 3: " in out and f"line {len(lines) + 1}: the last record, cut short" in out
    assert path.read_bytes().endswith(b"\n")


def test_repair_refuses_a_file_that_holds_no_journal_record(tmp_path, capsys):
    # A wrong path (a spec, a log) must not be "repaired" into an empty journal.
    path = tmp_path / "notes.txt"
    path.write_text("arch x {\n  input 3x32x32\n}\n")
    assert main(["study", "repair", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path} is not an Optuna journal file" in err and "Traceback" not in err
    assert path.read_text() == "arch x {\n  input 3x32x32\n}\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt"
    ]


def test_repair_journal_is_the_command_as_a_function(tmp_path):
    from archdsl.search import JournalRepair, repair_journal

    path = _journal(tmp_path)
    sound = path.read_bytes()
    assert repair_journal(path) == JournalRepair(path, actions=[])  # nothing written, nothing kept
    assert path.read_bytes() == sound

    line = _damage(path, "creation cut short")
    repaired = repair_journal(str(path))
    assert repaired.path == path and repaired.trials == TRIALS
    assert len(repaired.actions) == 1 and repaired.actions[0].startswith(f"line {line}")
    assert repaired.kept == Path(f"{path}.damaged") and repaired.kept.exists()
    assert [t[0] for t in _summary(path)] == list(range(TRIALS))


def test_repair_journal_refuses_a_missing_file_or_a_folder(tmp_path):
    from archdsl.search import repair_journal

    with pytest.raises(UserError, match="no journal file"):
        repair_journal(tmp_path / "study.journal")
    with pytest.raises(UserError, match="is not a regular file"):
        repair_journal(tmp_path)


def _deep_record() -> bytes:
    return b'{"op_code": 5, "worker_id": "w", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"


def test_a_journal_record_nested_too_deep_is_named_by_report_and_left_out_by_repair(tmp_path, capsys):
    path = _journal(tmp_path)
    before = _summary(path)
    with open(path, "ab") as journal:
        journal.write(_deep_record())
    lines = len(path.read_bytes().split(b"\n")) - 1

    assert main(["report", "s", "--storage", f"journal:{path}"]) == 1
    err = capsys.readouterr().err
    assert f"{path}" in err and f"line {lines}" in err and "100,001 levels deep" in err
    assert "Traceback" not in err

    assert main(["study", "repair", str(path)]) == 0
    assert "100,001 levels deep" in capsys.readouterr().out
    assert _summary(path) == before


def test_repair_of_a_line_of_many_small_pieces_invents_no_trial(tmp_path, capsys):
    """One long line of fragments (`{}`, a creation's bare op code, a torn creation) glued together between two
    trials' records: the pieces that are no whole record are dropped, and the study keeps exactly its trials."""
    path = _journal(tmp_path)
    before = _summary(path)
    lines = path.read_bytes().split(b"\n")[:-1]
    pieces = [b"{}", b'{"op_code":4}', b'{"op_code": 4, "worker_id": "w", "study_id": 0, "datet']
    junk = b"".join(pieces[i % len(pieces)] for i in range(3000))
    middle = _line_of(lines, 4, DAMAGED_TRIAL)  # before trial 3's creation: every later id must stay
    path.write_bytes(b"".join(line + b"\n" for line in [*lines[:middle], junk, *lines[middle:]]))

    assert main(["study", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"repaired {path}: {TRIALS} trials readable" in out
    assert len(out.splitlines()) < 10  # what was done to the line, said once per kind of piece
    assert _summary(path) == before


def test_the_search_and_a_sound_journal_open_without_the_journal_repair(tmp_path):
    """The repair is for `archdsl study repair` and a damaged journal: the search's modules, and a sound journal
    opened and read, leave it unimported (a process of its own: this one has imported it above)."""
    path = _journal(tmp_path)
    code = f"""
import sys
import archdsl.search, archdsl.search.runner
from archdsl.search.studies.storage import StorageOptions, open_storage
study = archdsl.search.runner.load_study("s", open_storage(StorageOptions(url="journal:{path}"), None, "s"))
assert len(study.trials) == {TRIALS}
print(sorted(m for m in sys.modules if m.startswith("archdsl.search.studies")))
"""
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "archdsl.search.studies.storage" in shown and "archdsl.search.studies._journal_check" not in shown, shown
