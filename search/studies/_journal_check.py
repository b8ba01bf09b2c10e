"""A damaged study journal repaired so that every trial keeps its id (`archdsl study repair`); Optuna (4.9-5.x)
repairs nothing. Imported by the repair alone: the search opens a journal, and names its damaged line, with
`_journal_file`. A trial's id is the number of trial creations before it, and later records name their trial
by it: what is done to each kind of damaged line keeps that count (docs/storage.md, "A damaged journal").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from archdsl.errors import UserError
from archdsl.files import atomic_path
from archdsl.search._optuna_private import JournalOperation
from archdsl.search.studies._journal_file import OP_NAMES, Damage, check_holds_records, decode, pieces, read_lines
from archdsl.search.studies._journal_lock import JournalLock
from archdsl.search.studies.record import BEAT_ATTR, REPAIRED_ATTR

CREATE_STUDY, CREATE_TRIAL = JournalOperation.CREATE_STUDY, JournalOperation.CREATE_TRIAL
REPAIR_WORKER = "archdsl-study-repair"
_NUMBER_FIELD = r'"{}"\s*:\s*(\d+)'
_STRING_FIELD = r'"{}"\s*:\s*("(?:[^"\\]|\\.)*")'


@dataclass
class Repair:
    """The journal's records after repair, and what was done to each damaged line (for the user)."""

    records: list[dict[str, Any]]
    actions: list[str]


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
    actions: defaultdict[int, list[str]] = defaultdict(list)
    lines, torn_tail = read_lines(path)
    for number, line in enumerate(lines, start=1):
        record, damage = decode(line)
        if damage is None:
            assert record is not None
            entries.append((number, record))
            continue
        kept = 0
        parts = pieces(line)
        for piece in parts:
            whole, piece_damage = decode(piece)
            if whole is not None:
                entries.append((number, whole))
                kept += 1
            else:
                assert piece_damage is not None
                actions[number].append(_replace(number, piece, piece_damage, entries, alone=len(parts) == 1))
        if kept:  # records glued together (a newline lost, or a torn record before them)
            actions[number].append(f"{kept} complete record(s) on the line kept")
    records = _resolve_unknown(entries, actions)
    if actions and torn_tail:  # no damage alone (Optuna's reader skips it), but not in the repaired journal
        actions[len(lines) + 1] = ["the last record, cut short (an interrupted write), dropped"]
    return Repair(records=records, actions=[f"line {n}: {a}" for n in sorted(actions) for a in _counted(actions[n])])


def _counted(actions: list[str]) -> list[str]:
    """A line's actions, each said once, with how many pieces of the line it was done to when more than one."""
    counts = Counter(actions)
    return [f"{counts[a]:,} x {a}" if counts[a] > 1 else a for a in counts]


def _replace(number: int, piece: bytes, damage: Damage, entries: list[Entry], *, alone: bool) -> str:
    """Append what stands for the damaged record `piece` (`alone` on its line, or one of several pieces) to
    `entries`; what was done, in words."""
    text = piece.decode("utf-8", errors="replace")
    if damage.op_code == CREATE_TRIAL and not alone:
        # One of several pieces on a line: a creation only if a later record needs it (no phantom trials).
        action = f"a piece of a trial's creation dropped ({damage.problem}); no later record names its trial"
        entries.append((number, _Unknown(_string(text, "datetime_start"), action)))
        return action
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
    if damage.op_code is not None or damage.parsed:  # what it was is known, and no creation
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


def _number(text: str, key: str) -> int | None:
    match = re.search(_NUMBER_FIELD.format(key), text)
    return int(match.group(1)) if match else None


def _string(text: str, key: str) -> str | None:
    match = re.search(_STRING_FIELD.format(key), text)
    try:
        return json.loads(match.group(1)) if match else None  # a JSON string literal: a str, or a bad escape
    except ValueError:
        return None


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


def write_repaired(path: Path, repair: Repair) -> JournalRepair:
    """Write the repaired journal at `path`, under the journal's lock (no worker writes meanwhile),
    once Optuna reads it whole; the original is kept as PATH.damaged (.2, .3 if taken)."""
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / "study.journal"
        JournalFileBackend(str(trial)).append_logs(repair.records)  # each record written as Optuna writes it
        text = trial.read_bytes()
        try:
            replayed = JournalStorage(JournalFileBackend(str(trial)))
            trials = sum(s.n_trials for s in optuna.get_all_study_summaries(replayed, include_best_trial=False))
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
    return JournalRepair(path, list(repair.actions), kept=kept, trials=trials)


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
    return write_repaired(path, repair) if repair.actions else JournalRepair(path, actions=[])


def _unused(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = Path(f"{path}.{n}")
    return candidate
