"""A study that a search left behind, opened by name to read it (`archdsl report`); never created."""

from __future__ import annotations

import os
from pathlib import Path

import optuna

from archdsl.errors import UserError
from archdsl.outputs import RUNS_DIR
from archdsl.search.report.write import ReportPaths, write_report
from archdsl.search.runner import load_study
from archdsl.search.studies.naming import check_study_name
from archdsl.search.studies.storage import JOURNAL_SCHEME, StorageOptions, journal_path, open_storage


def load_saved_study(name: str, *, storage: str | None = None, out: str | os.PathLike[str] = RUNS_DIR) -> optuna.Study:
    """The study `name` from `storage` (a URL: postgresql://..., grpc://..., journal:PATH) or, when
    None, from its journal file OUT/NAME/study.journal, which must exist."""
    check_study_name(name, hint="give the runs folder with --out, not in the name")
    out = Path(out)
    if storage is None and not journal_path(out, name).exists():
        raise UserError(
            f"no study {name!r} under {out}/ (no {journal_path(out, name)})",
            hint="give --out where the search ran, or --storage for a database study",
        )
    # Opening a journal creates it (and its folders), as a search must: a mistyped path would leave them.
    if storage is not None and storage.startswith(JOURNAL_SCHEME) and not Path(storage[len(JOURNAL_SCHEME) :]).exists():
        raise UserError(
            f"no study journal at {storage[len(JOURNAL_SCHEME) :]}",
            hint="give --storage journal:PATH of the journal the search wrote",
        )
    return load_study(name, open_storage(StorageOptions(url=storage), out, name))


def report_study(name: str, *, storage: str | None = None, out: str | os.PathLike[str] = RUNS_DIR) -> ReportPaths:
    """Write the report of the saved study `name` (`load_saved_study`) to OUT/NAME/report/ and its
    best designs to OUT/NAME/best/, as `archdsl report` does; returns what was written."""
    return write_report(load_saved_study(name, storage=storage, out=out), Path(out) / name)
