"""`archdsl report STUDY`: the best designs, the Pareto front, plots and report.md of a search."""

from __future__ import annotations

import argparse

from archdsl.commands._say import say
from archdsl.outputs import RUNS_DIR

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
    from archdsl.search import load_saved_study, proxy_answering, report_study, summarize_study, trials_csv

    with proxy_answering(args.storage):  # a gRPC proxy that dies mid-read: one line, not gRPC's traceback
        if args.csv:
            say(trials_csv(summarize_study(load_saved_study(args.study, storage=args.storage, out=args.out))), end="")
            return 0
        paths = report_study(args.study, storage=args.storage, out=args.out)
    say(paths.summary_text)  # quotes what the study's storage holds: escaped
    say(f"report: {paths.report}")
    return 0
