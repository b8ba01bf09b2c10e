"""A study journal opened as Optuna opens it, with what Optuna (4.9-5.x) lacks: nothing appended to a torn last
record (Optuna's next append would glue a record onto it), and a record Optuna cannot replay refused with its line
named (Optuna stops on it with a bare AssertionError, KeyError or JSONDecodeError that names no line, or reads a
wrong value). Repairing a damaged journal is `_journal_check`'s (`archdsl study repair`), not imported here.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from optuna.distributions import json_to_distribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection
from optuna.trial import TrialState

from archdsl import json_text
from archdsl.errors import ArchdslWarning, UserError
from archdsl.files import ensure_dir
from archdsl.search._optuna_private import JournalOperation
from archdsl.search.studies._journal_lock import JournalLock

RECORD_START = re.compile(rb'\{\s*"op_code"\s*:\s*(\d+)')
_STUDY = {"study_id": int}
_TRIAL = {"trial_id": int}
_TIME = (str, type(None))
_NUMBER = (int, float, type(None))
# The fields Optuna's replay (optuna.storages.journal._storage) reads from each kind of record,
# by op code (`JournalOperation`), and their JSON types; more fields are optional or ignored.
RECORD_FIELDS: dict[int, dict[str, Any]] = {
    JournalOperation.CREATE_STUDY: {"study_name": str, "directions": list},
    JournalOperation.DELETE_STUDY: _STUDY,
    JournalOperation.SET_STUDY_USER_ATTR: {**_STUDY, "user_attr": dict},
    JournalOperation.SET_STUDY_SYSTEM_ATTR: {**_STUDY, "system_attr": dict},
    JournalOperation.CREATE_TRIAL: {**_STUDY, "datetime_start": _TIME},
    JournalOperation.SET_TRIAL_PARAM: {
        **_TRIAL,
        "param_name": str,
        "param_value_internal": _NUMBER,
        "distribution": str,
    },
    JournalOperation.SET_TRIAL_STATE_VALUES: {**_TRIAL, "state": int, "values": (list, type(None))},
    JournalOperation.SET_TRIAL_INTERMEDIATE_VALUE: {**_TRIAL, "step": int, "intermediate_value": _NUMBER},
    JournalOperation.SET_TRIAL_USER_ATTR: {**_TRIAL, "user_attr": dict},
    JournalOperation.SET_TRIAL_SYSTEM_ATTR: {**_TRIAL, "system_attr": dict},
    JournalOperation.DISCARD_TRIALS: {},
}

OP_NAMES = {
    0: "a study's creation",
    1: "a study's deletion",
    2: "a study's user attribute",
    3: "a study's system attribute",
    4: "a trial's creation",
    5: "a trial's parameter",
    6: "a trial's state and values",
    7: "a trial's intermediate value",
    8: "a trial's user attribute",
    9: "a trial's system attribute",
    10: "a discard of trials",
}


def open_journal(path: Path) -> JournalStorage:
    """The journal storage at `path` (created if missing); a UserError for a file that is no journal, one that
    cannot be opened, and a damaged one (its first damaged line named, by `JournalFile`)."""
    if path.exists() and not path.is_file():
        raise UserError(
            f"cannot use {path} as a study journal: not a regular file",
            hint="give --storage journal:PATH a file path (it is created if missing)",
        )
    try:
        ensure_dir(path.parent)
        if path.is_file():  # Optuna would read a file of one unfinished line as an empty study
            check_holds_records(path, hint="give --storage journal:PATH of a study.journal written by archdsl")
        return JournalStorage(JournalFile(str(path)))
    except OSError as err:
        raise UserError(f"cannot open the study journal {path}: {err.strerror or err}") from err


class JournalFile(JournalFileBackend):
    """Optuna's journal file, with what it lacks (see the module): a record Optuna cannot replay refused, its line
    named, and a torn last record set aside before Optuna appends (its reader skips it, its append would not)."""

    def __init__(self, file_path: str) -> None:
        self._path = Path(file_path)  # our own copy: Optuna's attribute for it is private
        super().__init__(file_path, lock_obj=_TornTailLock(file_path))

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        try:
            for record in super().read_logs(log_number_from):
                problem = record_problem(record)
                if problem is not None:
                    raise ValueError(problem)
                yield record
        except (ValueError, RecursionError) as err:  # a damaged line, or one nested deeper than json.loads follows
            decoded = (decode(line)[1] for line in read_lines(self._path)[0])
            line, damage = next(((n, d) for n, d in enumerate(decoded, start=1) if d is not None), (0, None))
            if damage is None:  # every line a sound record: not the file's fault
                raise UserError(f"{self._path}: a record Optuna cannot read ({err})") from None
            what = f" ({OP_NAMES[damage.op_code]})" if damage.op_code is not None else ""
            raise UserError(
                f"the study journal {self._path} is damaged at line {line}{what}: {damage.problem}",
                hint=f"stop its workers, then `archdsl study repair {self._path}` recovers every trial it can "
                "(the original is kept beside it)",
            ) from None


class _TornTailLock(JournalLock):
    """The journal's lock, which once held (no other writer is in the middle of a line then) moves a torn last
    record to PATH.torn, so that Optuna's append that follows starts on a line of its own."""

    def acquire(self) -> bool:
        super().acquire()
        try:
            _set_aside_torn_tail(Path(self._target))
        except BaseException:
            self.release()
            raise
        return True


def record_problem(record: Any) -> str | None:
    """What keeps Optuna from replaying one journal record (a parsed JSON line) as it was written, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    op = record.get("op_code")
    if type(op) is not int or op not in RECORD_FIELDS:
        return f"unknown op code {op!r}" if "op_code" in record else "no op code"
    fields = {"worker_id": str, **RECORD_FIELDS[op]}
    for name, kind in fields.items():
        if name not in record:
            return f"a {JournalOperation(op).name} record without its {name}"
        if not isinstance(record[name], kind) or isinstance(record[name], bool) and kind in (int, _NUMBER):
            return f"a {JournalOperation(op).name} record whose {name} is {record[name]!r}"
    try:
        if op == JournalOperation.CREATE_STUDY:
            [StudyDirection(d) for d in record["directions"]]
        if op == JournalOperation.SET_TRIAL_STATE_VALUES:
            TrialState(record["state"])
        for name in ("datetime_start", "datetime_complete"):
            if record.get(name) is not None:
                datetime.fromisoformat(record[name])
        if op == JournalOperation.SET_TRIAL_PARAM:
            json_to_distribution(record["distribution"])
        for name in ("user_attr", "system_attr"):
            if name in fields and len(record[name]) != 1:
                return f"a {JournalOperation(op).name} record with {len(record[name])} attributes, not one"
    except (ValueError, TypeError, KeyError) as err:
        return f"a {JournalOperation(op).name} record with a bad value ({err})"
    return None


def pieces(line: bytes) -> list[bytes]:
    """A damaged line cut before every record start it holds (a torn record with a whole one glued behind)."""
    starts = [m.start() for m in RECORD_START.finditer(line)]
    if not starts or line[: starts[0]].strip():
        starts = [0, *starts]
    return [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]


def check_holds_records(path: Path, *, hint: str) -> None:
    """A UserError (with `hint`) if the file at `path` holds bytes but not one journal record: the wrong file
    (a spec, a log, notes), not a damaged journal. A record cut short at the end counts: a journal killed
    during its first write. Reads up to the first record (a journal's first line)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            count += 1
            if not line.endswith(b"\n"):  # the last line, unfinished: Optuna's reader skips it
                if count == 1 and RECORD_START.match(line.lstrip()):
                    return  # the first record, cut short
                break
            if any(decode(piece)[0] is not None for piece in pieces(line[:-1])):
                return
    if count:
        raise UserError(
            f"{path} is not an Optuna journal file: none of its {count} line(s) is a journal record", hint=hint
        )


@dataclass(frozen=True)
class Damage:
    """What is wrong with a damaged journal line, and what it was (its op code) if its start tells."""

    problem: str
    op_code: int | None = None
    parsed: bool = False  # the line is JSON, with a field Optuna needs missing or wrong


def read_lines(path: Path) -> tuple[list[bytes], bytes]:
    """The journal's complete lines, and what follows the last newline: a write in progress or cut short (a torn
    tail), which Optuna's reader skips, and so does this."""
    with open(path, "rb") as f:
        *lines, tail = f.read().split(b"\n")
    return lines, tail


def decode(line: bytes) -> tuple[dict[str, Any] | None, Damage | None]:
    """(the record, None) of a sound line; (None, what is wrong) of a damaged one."""
    try:
        record = json_text.parse(line)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, TooDeepJSON
        start = RECORD_START.match(line.lstrip())
        op = int(start.group(1)) if start else None
        reason = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else getattr(err, "msg", str(err))
        return None, Damage(f"not a complete JSON record ({reason})", op if op in RECORD_FIELDS else None)
    problem = record_problem(record)
    if problem is not None:
        op = record.get("op_code") if isinstance(record, dict) else None
        return None, Damage(problem, op if type(op) is int and op in RECORD_FIELDS else None, parsed=True)
    return record, None


def _set_aside_torn_tail(path: Path) -> None:
    """Cut a last line that lacks its newline off `path` (appended to PATH.torn), with a warning."""
    with open(path, "r+b") as f:
        f.seek(max(f.seek(0, os.SEEK_END) - 1, 0))
        if f.read(1) in (b"", b"\n"):  # empty, or a whole record last
            return
        f.seek(0)
        start = f.read().rfind(b"\n") + 1  # after the last whole record (the file read whole: a rare event)
        f.seek(start)
        torn = f.read()
        with open(f"{path}.torn", "ab") as aside:
            aside.write(torn)
        f.truncate(start)
    warnings.warn(
        f"the last record of {path} was cut short (an interrupted write, {len(torn)} bytes): "
        f"it is ignored and kept in {path}.torn; every complete record is read as before",
        ArchdslWarning,
        stacklevel=2,
    )
