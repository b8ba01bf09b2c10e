"""`archdsl search`: search where the MSAs go (Optuna), then write the study's report.

With no arguments it runs the paper's build-up procedure on the built-in odd-one-out data
with a small base network, at the budget measured for that data: about two minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse

from archdsl.commands._args import renamed
from archdsl.commands._say import say
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments, recipe_settings
from archdsl.commands.settings_flags import add_settings_arguments, settings_given

# Recipe fields with a flag of the search's own (its fidelity's length), not the recipe's default.
SEARCH_OWN_FIELDS = ("epochs",)


EXAMPLES = (
    "archdsl search",
    "archdsl search --dry-run --dataset cifar100",
    "archdsl search --strategy nsga2 --objectives accuracy,params --n-trials 30",
    "archdsl search --dataset cifar100 --storage postgresql://user:pass@host/db   # on each machine",
)


def register(subparsers) -> None:
    from archdsl.common_settings import DataSettings
    from archdsl.search import BATCH_FROM_DATA, Fidelity, SearchSettings

    parser = subparsers.add_parser(
        "search",
        help="search where the MSAs go (build-up, TPE, NSGA-II, grid, random)",
        description=(
            "Search the build-up space of a base network: k MSAs per stage, placed C*(n-2k) [C M]*k, "
            "optionally heads/window/dim_head per stage. Trials live in an Optuna storage (a journal "
            "file under OUT/STUDY by default, or --storage URL); run the same command on several "
            "machines to share a study, or again to resume it. Ends with OUT/STUDY/report/report.md."
        ),
    )
    # The --help sections in order; SearchSettings' fields name theirs (default, bounds, help, flag).
    data, _, fid, where = (
        parser.section(title)
        for title in ("data and base", "strategy and objectives", "fidelity", "storage and output")
    )
    add_settings_arguments(parser, DataSettings, into=data)  # --data-root, --download
    add_settings_arguments(parser, SearchSettings, exclude=DataSettings.model_fields, into=where)
    # The fidelity's settings (Fidelity declares each: default, bounds, help, flag), then the recipe's.
    add_settings_arguments(parser, Fidelity, into=fid)
    add_recipe_arguments(parser, exclude=SEARCH_OWN_FIELDS, defaults_said={"batch_size": BATCH_FROM_DATA})
    # The old name of --val-subset, which scores on validation images, never on the test set: refused.
    fid.add_argument(
        "--test-subset", type=renamed("--val-subset", "it shrinks the validation images, not the test set"),
        help=argparse.SUPPRESS,
    )  # fmt: skip
    where.add_argument(
        "--dry-run", action="store_true",
        help="print the space, its size and endpoints, the budget rule and an estimate of the time; train nothing",
    )  # fmt: skip
    add_config_argument(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace):
    """The command line as `archdsl.search`'s arguments: the study's settings and the Fidelity fields given."""
    from archdsl.search import Fidelity, SearchSettings

    settings = SearchSettings(**settings_given(args, SearchSettings))
    fidelity = settings_given(args, Fidelity)
    fidelity["train_settings"] = tuple(sorted(recipe_settings(args, exclude=SEARCH_OWN_FIELDS).items()))
    return settings, fidelity


def run(args: argparse.Namespace) -> int:
    from archdsl.commands._signals import terminate_as_interrupt
    from archdsl.run import command_scope

    # SIGTERM (a scheduler's stop) ends the search as Ctrl-C does: its seeds' processes with it, its trial queued again.
    # command_scope: under torchrun, one worker per group, rank 0 speaks (archdsl.search.fidelity.distributed).
    with terminate_as_interrupt(), command_scope():
        return _search(args)


def _search(args: argparse.Namespace) -> int:
    from archdsl.commands._signals import Terminated
    from archdsl.run import quiet_followers
    from archdsl.search import (
        JOURNAL_SCHEME,
        describe_space,
        dry_run_check,
        estimate_time,
        journal_path,
        plan_search,
        plan_space,
        proxy_answering,
        run_planned,
    )

    settings, fidelity = settings_from_args(args)
    plan = plan_space(settings, fidelity)
    if args.dry_run:
        unchecked = dry_run_check(plan)  # the search's own refusal (a UserError) comes before any plan
        say(describe_space(plan))
        # measured on this machine now: beside the plan, not in it (never for data the machine has not got)
        say(f"time: not estimated: {unchecked}" if unchecked else estimate_time(plan).text(), err=True)
        return 0
    with proxy_answering(args.storage):  # it opens the study: a proxy that stops answering there, in one line
        plan = plan_search(plan)
    quiet_followers(plan.ranks)
    say(plan.describe(), err=True)
    out, study_name = plan.out, plan.study_name
    try:
        from archdsl.search import target_trials

        with proxy_answering(args.storage):
            result = run_planned(
                plan, on_trial=_trial_printer(plan, target_trials(plan)), on_final_test=_final_test_printer
            )
    except KeyboardInterrupt as err:
        # Every finished trial is already in the storage; the interrupted one is queued again (TrialObjective).
        # (The URL may hold a password: do not echo it.)
        database = args.storage is not None and not args.storage.startswith(JOURNAL_SCHEME)
        where = "the --storage database" if database else str(journal_path(out, study_name))
        if args.storage and not database:
            where = args.storage[len(JOURNAL_SCHEME) :]
        how = f" {err}" if isinstance(err, Terminated) else ""  # "by SIGTERM"
        say(
            f"archdsl: interrupted{how}; the finished trials are kept in {where}\n"
            f"  continue with the same command; see them with: archdsl report {study_name} --out {out}"
            + ((" --storage URL" if database else f" --storage {args.storage}") if args.storage else ""),
            err=True,
        )
        return err.status if isinstance(err, Terminated) else 130
    if result.follower:  # a rank after the first trained rank 0's designs; the study and its report are rank 0's
        return 0
    assert result.outcome is not None and result.study is not None, "rank 0 (or a worker alone) has its study"
    for remark in result.remarks:
        say(remark, err=True)
    if result.simulated_seconds is not None:
        say(f"simulated time: {result.simulated_seconds:.0f} s of training and measuring, one worker")

    from archdsl.search import write_report

    with proxy_answering(args.storage):
        paths = write_report(result.study, out / study_name)
    say(paths.summary_text)  # quotes what the study's storage holds: escaped
    say(f"report: {paths.report}")
    return 0


def _final_test_printer(rows) -> None:
    """The line before the final test: whose test figures are opened, and that they choose nothing."""
    from archdsl.search import NOT_USED

    numbers = ", ".join(str(row.number) for row in rows)
    say(
        f"final test: trial{'s' if len(rows) > 1 else ''} {numbers} (the best and any tied with it): the test "
        f"figures their trials sealed, opened now that the search has ended ({NOT_USED})",
        err=True,
        flush=True,
    )


def _trial_printer(plan, total: int):
    """`on_trial` for run_search: one line per finished trial, as it finishes, with the study's
    progress (`[3/8, ETA 1:20 min to 3:10 min]`, the raises and settle stage of `plan` counted). A plain line, so a
    log gets it too (the report has the full table)."""
    from archdsl.search import is_copy, progress_text, study_progress, trial_line

    def print_trial(study, trial) -> None:
        line = trial_line(study, trial)
        if not is_copy(trial):  # a copy measures nothing: the count stands
            line = f"{line}  {progress_text(study_progress(study, total, plan))}"
        say(line, err=True, flush=True)  # a failure's reason, from the storage

    return print_trial
