"""`archdsl report STUDY`: the best designs, the Pareto front, plots and report.md of a search."""

from __future__ import annotations

import argparse
from pathlib import Path

from archdsl.commands._args import RUNS_DIR
from archdsl.errors import visible_lines

EXAMPLES = (
    "archdsl report alter-small-base-synthetic-buildup",
    "archdsl report alter-small-base-synthetic-buildup --csv > trials.csv",
    "archdsl report my-study --storage postgresql://user:pass@host/db",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="report on a search: best designs, Pareto front, plots, report.md",
        description=(
            "Read a study from its storage and write OUT/STUDY/report/report.md with plots "
            "(optimisation history, Pareto front, parameter importances, where the MSAs went), "
            "the trials as OUT/STUDY/report/trials.csv and the winning designs as OUT/STUDY/best/*.arch. "
            "The study's journal file also opens in optuna-dashboard: "
            "`optuna-dashboard OUT/STUDY/study.journal`."
        ),
    )
    parser.add_argument("study", metavar="STUDY", help="the study name (`archdsl search --study-name`)")
    parser.add_argument(
        "--storage", metavar="URL", help="the study's storage (default: the journal OUT/STUDY/study.journal)"
    )
    parser.add_argument("--out", metavar="DIR", default=RUNS_DIR, help=f"the runs folder (default: {RUNS_DIR})")
    parser.add_argument(
        "--csv",
        action="store_true",
        help="print every trial as CSV on stdout (one column per objective and parameter); write nothing",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archdsl.errors import UserError
    from archdsl.search.naming import check_study_name
    from archdsl.search.report import summarize_study, trials_csv, write_report
    from archdsl.search.runner import load_study
    from archdsl.search.storage import StorageOptions, journal_path, open_storage

    check_study_name(args.study, hint="give the runs folder with --out, not in the name")
    out = Path(args.out)
    if args.storage is None and not journal_path(out, args.study).exists():
        raise UserError(
            f"no study {args.study!r} under {out}/ (no {journal_path(out, args.study)})",
            hint="give --out where the search ran, or --storage for a database study",
        )
    storage = open_storage(StorageOptions(url=args.storage), out, args.study)
    study = load_study(args.study, storage)
    if args.csv:
        print(trials_csv(summarize_study(study)), end="")
        return 0
    paths = write_report(study, out / args.study)
    print(visible_lines(paths.summary_text))  # quotes what the study's storage holds: escaped
    print(f"report: {paths.report}")
    return 0
