"""A study journal read line by line: a torn last record set aside, which records are damaged, and a repaired journal
that keeps every trial's id. Optuna (4.9-5.x) lacks all three: it appends behind a torn record, stops on a damaged
line with a bare JSONDecodeError, AssertionError or KeyError that names no line, and repairs nothing.

Optuna's journal is one JSON record per line, replayed in order; a trial's id is the number of trial
creations before it, and every later record names its trial by that id. So a damaged change is
dropped, a damaged creation is rebuilt in its place, and an unreadable line is dropped unless a later
record names a trial that only it could have created (docs/storage.md, "A damaged journal", says
what is done to each kind of line).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import json_to_distribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection
from optuna.trial import TrialState

from archdsl import json_text
from archdsl.errors import ArchdslWarning, UserError
from archdsl.files import atomic_path
from archdsl.search._optuna_private import JournalOperation
from archdsl.search.studies._journal_lock import JournalLock
from archdsl.search.studies.record import BEAT_ATTR, REPAIRED_ATTR

CREATE_STUDY, CREATE_TRIAL = JournalOperation.CREATE_STUDY, JournalOperation.CREATE_TRIAL
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
REPAIR_WORKER = "archdsl-study-repair"
_RECORD_START = re.compile(rb'\{\s*"op_code"\s*:\s*(\d+)')
_NUMBER_FIELD = r'"{}"\s*:\s*(\d+)'
_STRING_FIELD = r'"{}"\s*:\s*("(?:[^"\\]|\\.)*")'


@dataclass(frozen=True)
class Damage:
    """One damaged line of a journal: its number (from 1), what is wrong, and what it was if its start tells."""

    line: int
    problem: str
    op_code: int | None = None

    def describe(self) -> str:
        what = f" ({OP_NAMES[self.op_code]})" if self.op_code in OP_NAMES else ""
        return f"line {self.line}{what}: {self.problem}"


@dataclass
class Repair:
    """The journal's records after repair, and what was done to each damaged line (for the user)."""

    records: list[dict[str, Any]]
    actions: list[str] = field(default_factory=list)


_STUDY = {"study_id": int}
_TRIAL = {"trial_id": int}
_TIME = (str, type(None))
_NUMBER = (int, float, type(None))
# The fields Optuna's replay (optuna.storages.journal._storage) reads from each kind of record,
# by op code (`JournalOperation`), and their JSON types; more fields are optional or ignored.
_RECORD_FIELDS: dict[int, dict[str, Any]] = {
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


def record_problem(record: Any) -> str | None:
    """What keeps Optuna from replaying one journal record (a parsed JSON line), or None: an
    unknown op code, a field its op needs missing or of the wrong type, a study direction or trial
    state Optuna does not know, a time that is no ISO time."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    op = record.get("op_code")
    if type(op) is not int or op not in _RECORD_FIELDS:
        return f"unknown op code {op!r}" if "op_code" in record else "no op code"
    fields = {"worker_id": str, **_RECORD_FIELDS[op]}
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


def read_lines(path: Path) -> tuple[list[bytes], bytes]:
    """The journal's complete lines, and what follows the last newline: a write in progress or cut short (a torn
    tail), which Optuna's reader skips, and so does this."""
    with open(path, "rb") as f:
        *lines, tail = f.read().split(b"\n")
    return lines, tail


def set_aside_torn_tail(path: Path) -> int:
    """Cut a last line that lacks its newline off `path` (appended to PATH.torn); its length.

    Call it with the journal's lock held: then no other writer is in the middle of a line.
    """
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        start = size
        while start > 0:  # back to the newline that ends the last whole record
            step = min(65536, start)
            f.seek(start - step)
            chunk = f.read(step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                start = start - step + cut + 1
                break
            start -= step
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
    return len(torn)


def decode(line: bytes) -> tuple[dict[str, Any] | None, Damage | None]:
    """(the record, None) of a sound line; (None, what is wrong) of a damaged one (its Damage's line is 0)."""
    try:
        record = json_text.parse(line)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, TooDeepJSON
        start = _RECORD_START.match(line.lstrip())
        op = int(start.group(1)) if start else None
        reason = (
            err.msg
            if isinstance(err, json.JSONDecodeError)
            else str(err)
            if isinstance(err, json_text.TooDeepJSON)
            else "not UTF-8 text"
        )
        return None, Damage(0, f"not a complete JSON record ({reason})", op if op in _RECORD_FIELDS else None)
    problem = record_problem(record)
    if problem is not None:
        op = record.get("op_code") if isinstance(record, dict) else None
        return None, Damage(0, problem, op if type(op) is int and op in _RECORD_FIELDS else None)
    return record, None


def check_holds_records(path: Path, *, hint: str) -> None:
    """A UserError (with `hint`) if the file at `path` holds bytes but not one journal record: the wrong file
    (a spec, a log, notes), not a damaged journal. A record cut short at the end counts: a journal killed
    during its first write. Reads up to the first record (a journal's first line)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            count += 1
            if not line.endswith(b"\n"):  # the last line, unfinished: Optuna's reader skips it
                if count == 1 and _RECORD_START.match(line.lstrip()):
                    return  # the first record, cut short
                break
            if any(decode(piece)[0] is not None for piece in _pieces(line[:-1])):
                return
    if count:
        raise UserError(
            f"{path} is not an Optuna journal file: none of its {count} line(s) is a journal record", hint=hint
        )


def damage_error(path: Path, err: Exception) -> UserError | None:
    """The UserError for a journal Optuna could not read (`err`): the first damaged line named.
    None if every line is a sound record (then `err` is not the file's fault)."""
    decoded = [decode(line) for line in read_lines(path)[0]]
    damage = next((replace(d, line=n) for n, (_, d) in enumerate(decoded, start=1) if d is not None), None)
    if damage is None:
        return None
    if all(record is None for record, _ in decoded):
        return UserError(
            f"{path} is not an Optuna journal file ({damage.describe()})",
            hint="give --storage journal:PATH of a study.journal written by `archdsl search`",
        )
    return UserError(
        f"the study journal {path} is damaged at {damage.describe()}",
        hint=f"stop its workers, then `archdsl study repair {path}` recovers every trial it can "
        "(the original is kept beside it)",
    )


@dataclass
class _Unknown:
    """A damaged record whose start is unreadable: dropped, unless a later record shows it created a trial."""

    datetime_start: str | None = None
    action: str = ""  # what the repair says it did to it (dropped), replaced if it is rebuilt


Entry = tuple[int, "dict[str, Any] | _Unknown"]  # (line number, record)


def repair_records(path: Path) -> Repair:
    """The journal's records with every damaged line dropped, split or rebuilt so that each
    trial keeps its id (see the module's docstring); a UserError when that cannot be done."""
    check_holds_records(path, hint="give the study's journal, OUT/STUDY/study.journal; nothing was changed")
    entries: list[Entry] = []
    actions: dict[int, list[str]] = {}
    lines, torn_tail = read_lines(path)
    for number, line in enumerate(lines, start=1):
        record, damage = decode(line)
        if damage is None:
            assert record is not None
            entries.append((number, record))
            continue
        kept = 0
        pieces = _pieces(line)
        for piece in pieces:
            whole, piece_damage = decode(piece)
            if whole is not None:
                entries.append((number, whole))
                kept += 1
            elif len(pieces) > 1 and piece_damage is not None and piece_damage.op_code == CREATE_TRIAL:
                # One of several pieces on a line: a creation only if a later record needs it (no phantom trials).
                action = (
                    f"a piece of a trial's creation dropped ({piece_damage.problem}); no later record names its trial"
                )
                start = _string(piece.decode("utf-8", errors="replace"), "datetime_start")
                entries.append((number, _Unknown(start, action)))
                actions.setdefault(number, []).append(action)
            else:
                assert piece_damage is not None
                actions.setdefault(number, []).append(_replace(number, piece, piece_damage, entries))
        if kept:  # records glued together (a newline lost, or a torn record before them)
            actions.setdefault(number, []).append(f"{kept} complete record(s) on the line kept")
    records = _resolve_unknown(entries, actions)
    if actions and torn_tail:  # no damage alone (Optuna's reader skips it), but not in the repaired journal
        actions[len(lines) + 1] = ["the last record, cut short (an interrupted write), dropped"]
    return Repair(records=records, actions=[f"line {n}: {a}" for n in sorted(actions) for a in _counted(actions[n])])


def _counted(actions: list[str]) -> list[str]:
    """A line's actions, each said once, with how many pieces of the line it was done to when more than one."""
    counts = Counter(actions)
    return [f"{counts[a]:,} x {a}" if counts[a] > 1 else a for a in counts]


def _pieces(line: bytes) -> list[bytes]:
    """A damaged line cut before every record start it holds (a torn record with a whole one glued behind)."""
    starts = [m.start() for m in _RECORD_START.finditer(line)]
    if not starts or line[: starts[0]].strip():
        starts = [0, *starts]
    return [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]


def _replace(number: int, piece: bytes, damage: Damage, entries: list[Entry]) -> str:
    """Append what stands for the damaged record `piece` to `entries`; what was done, in words."""
    text = piece.decode("utf-8", errors="replace")
    if damage.op_code == CREATE_TRIAL:
        study = _number(text, "study_id")
        if study is None:
            names = {r["study_name"] for _, r in entries if isinstance(r, dict) and r["op_code"] == CREATE_STUDY}
            study = _only_study(len(names), number)
        entries.append((number, _trial_creation(study, number, _string(text, "datetime_start"))))
        return "a trial's creation, rebuilt: the trial keeps its number, and its later records restore it"
    if damage.op_code == CREATE_STUDY:
        name, directions = _string(text, "study_name"), re.search(r'"directions"\s*:\s*(\[[\d,\s]*\])', text)
        if name is None or directions is None:
            raise UserError(
                f"cannot repair line {number}: it created a study whose name or directions are unreadable "
                "(its trials would land in another study)",
                hint="restore the journal from a copy, or start the study again",
            )
        record = {"op_code": CREATE_STUDY, "worker_id": REPAIR_WORKER, "study_name": name}
        entries.append((number, {**record, "directions": json.loads(directions.group(1))}))
        return f"the creation of study {name!r}, rebuilt from its readable name and directions"
    if damage.op_code is not None or _is_json(piece):  # what it was is known, and no creation
        trial = _number(text, "trial_id")
        whose = f" of trial id {trial}" if trial is not None else ""
        what = OP_NAMES[damage.op_code] if damage.op_code is not None else "a record"
        return f"{what}{whose} dropped ({damage.problem})"
    action = f"an unreadable record dropped ({damage.problem}); no later record names a trial it could have created"
    entries.append((number, _Unknown(_string(text, "datetime_start"), action)))
    return action


def _trial_creation(study_id: int, line: int, datetime_start: str | None) -> dict[str, Any]:
    """A trial's creation record in place of a damaged one: RUNNING (as Optuna's `ask` creates
    it), with a heartbeat so old that the next search fails and retries the trial unless its
    later records finished it."""
    return {
        "op_code": CREATE_TRIAL,
        "worker_id": REPAIR_WORKER,
        "study_id": study_id,
        "datetime_start": datetime_start,
        "system_attrs": {BEAT_ATTR: 0.0, REPAIRED_ATTR: f"its creation record (line {line}) was damaged"},
    }


def _resolve_unknown(entries: list[Entry], actions: dict[int, list[str]]) -> list[dict[str, Any]]:
    """The records, each unreadable one (`_Unknown`) dropped unless a later record names a trial id
    that only a creation in its place explains: then the nearest one before it is rebuilt as that creation.
    One pass: a rebuilt creation raises the count of the trials before every later record by one."""
    trials = 0
    studies: set[str] = set()
    pending: list[tuple[int, int]] = []  # (index of an _Unknown not rebuilt, how many studies were created before it)
    for index, (number, record) in enumerate(entries):
        if isinstance(record, _Unknown):
            pending.append((index, len(studies)))
            continue
        if record["op_code"] == CREATE_STUDY:
            studies.add(record["study_name"])
        elif record["op_code"] == CREATE_TRIAL:
            trials += 1
        elif isinstance(record.get("trial_id"), int):
            while record["trial_id"] >= trials:
                if not pending:
                    raise UserError(
                        f"cannot repair line {number}: it names trial id {record['trial_id']}, which no "
                        "readable record created",
                        hint="restore the journal from a copy",
                    )
                at, studies_before = pending.pop()
                where, lost = entries[at]
                assert isinstance(lost, _Unknown)
                entries[at] = (where, _trial_creation(_only_study(studies_before, where), where, lost.datetime_start))
                trials += 1
                actions[where].remove(lost.action)
                actions[where].append(
                    f"an unreadable record, rebuilt as a trial's creation (line {number} names the trial it "
                    "created): the trial keeps its number, and its later records restore it"
                )
    return [record for _, record in entries if not isinstance(record, _Unknown)]


def _is_json(piece: bytes) -> bool:
    try:
        json_text.parse(piece)
    except ValueError:
        return False
    return True


def _number(text: str, key: str) -> int | None:
    match = re.search(_NUMBER_FIELD.format(key), text)
    return int(match.group(1)) if match else None


def _string(text: str, key: str) -> str | None:
    match = re.search(_STRING_FIELD.format(key), text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _only_study(studies: int, number: int) -> int:
    """The id of the journal's one study (`studies`: how many were created before line `number`), for a rebuilt
    trial creation whose own study id is unreadable."""
    if studies != 1:
        raise UserError(
            f"cannot repair line {number}: it created a trial, and which of the journal's {studies} "
            "studies it belongs to is unreadable",
            hint="restore the journal from a copy",
        )
    return 0


def readable_trials(path: Path) -> int:
    """How many trials Optuna reads from the journal at `path`, in all its studies (raises what Optuna raises)."""
    storage = JournalStorage(JournalFileBackend(str(path)))
    return sum(s.n_trials for s in optuna.get_all_study_summaries(storage, include_best_trial=False))


def write_repaired(path: Path, repair: Repair) -> Path:
    """Write the repaired journal at `path`, under the journal's lock (no worker writes meanwhile),
    once Optuna reads it whole; the original is kept as PATH.damaged (.2, .3 if taken), returned."""
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / "study.journal"
        JournalFileBackend(str(trial)).append_logs(repair.records)  # each record written as Optuna writes it
        text = trial.read_bytes()
        try:
            readable_trials(trial)
        except Exception as err:  # a damage this module does not understand: leave the journal as it was
            raise UserError(
                f"cannot repair {path}: the repaired journal is still unreadable ({type(err).__name__}: {err})",
                hint="restore the journal from a copy",
            ) from err
    lock = JournalLock(path)
    lock.acquire()
    try:
        kept = _unused(Path(f"{path}.damaged"))
        shutil.copy2(path, kept)
        with atomic_path(path) as temporary:
            temporary.write_bytes(text)
            shutil.copymode(path, temporary)
    finally:
        lock.release()
    return kept


@dataclass(frozen=True)
class JournalRepair:
    """What `repair_journal` did: one line per damaged line (empty: nothing was damaged, nothing
    written), where the original was kept and how many trials Optuna reads from the repaired journal."""

    path: Path  # the journal
    actions: list[str]
    kept: Path | None = None  # PATH.damaged (.2, .3, ...); None: nothing was repaired
    trials: int | None = None  # None: nothing was repaired (the journal was not replayed)


def repair_journal(path: str | os.PathLike[str]) -> JournalRepair:
    """Repair the study journal at `path` in place (`archdsl study repair`): every trial is kept
    around its damaged lines and the original is kept as PATH.damaged. A journal without damage is
    left as it is. Stop the study's workers first."""
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"no journal file {path}" if not path.exists() else f"{path} is not a regular file",
            hint="give the study's journal, OUT/STUDY/study.journal",
        )
    try:
        repair = repair_records(path)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None
    if not repair.actions:
        return JournalRepair(path, actions=[])
    kept = write_repaired(path, repair)
    return JournalRepair(path, list(repair.actions), kept=kept, trials=readable_trials(path))


def _unused(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = Path(f"{path}.{n}")
    return candidate
