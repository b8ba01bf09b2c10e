"""`archdsl study repair JOURNAL`: recover the trials of a study journal with damaged lines."""

from __future__ import annotations

import argparse
from pathlib import Path

from archdsl.errors import UserError

EXAMPLES = ("archdsl study repair runs/alter-small-base-synthetic-buildup/study.journal",)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "study",
        help="repair a study journal with damaged lines",
        description="Maintenance of a study's storage.",
    )
    actions = parser.add_subparsers(dest="study_command", metavar="ACTION", required=True)
    repair = actions.add_parser(
        "repair",
        help="recover every trial of a journal around its damaged lines (the original is kept as JOURNAL.damaged)",
        description=(
            "Rewrite a study journal that Optuna cannot read because of damaged lines (a partial write on a "
            "shared disk): a damaged change to a trial is dropped, a damaged trial creation is rebuilt so "
            "every trial keeps its number, and each damaged line is reported. The original is kept as "
            "JOURNAL.damaged. Stop the study's workers first."
        ),
    )
    repair.add_argument("journal", metavar="JOURNAL", help="the study's journal file (OUT/STUDY/study.journal)")
    repair.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.search.journal_check import repair_records, replay, write_repaired

    path = Path(args.journal)
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
        print(f"{path}: no damaged line; nothing to repair")
        return 0
    kept = write_repaired(path, repair)
    for action in repair.actions:
        print(action)
    trials = sum(len(found) for _, found in replay(path))
    print(f"repaired {path}: {trials} trials readable; the original is kept as {kept}")
    return 0
