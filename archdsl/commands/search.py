"""`archdsl search`: search where the MSAs go (Optuna), then write the study's report.

With no arguments it runs the paper's build-up procedure on the built-in synthetic data
with a small base network, at a fidelity that finishes in minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse
import sys

from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    RUNS_DIR,
    add_data_arguments,
    add_dist_timeout_argument,
    add_optimize_argument,
    comma_list_text,
    device_name,
    non_negative_int,
    positive_float,
    positive_int,
)
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments, recipe_settings
from archdsl.commands.settings_flags import add_settings_arguments, settings_given
from archdsl.errors import visible_lines
from archdsl.search import GREY_BASE, PAPER_BASE, SMALL_BASE  # light

# Recipe fields with a flag of the search's own (its fidelity's length), not the recipe's default.
SEARCH_OWN_FIELDS = ("epochs",)


EXAMPLES = (
    "archdsl search",
    "archdsl search --dry-run --dataset cifar100",
    "archdsl search --strategy nsga2 --objectives accuracy,params --n-trials 30",
    "archdsl search --dataset cifar100 --storage postgresql://user:pass@host/db   # on each machine",
)


def register(subparsers) -> None:
    from archdsl.search import OBJECTIVES, PRUNERS, STRATEGIES, Fidelity

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
    data = parser.add_argument_group("data and base")
    data.add_argument(
        "--dataset", default="synthetic", metavar="NAME", help="dataset name (default: synthetic, built in)"
    )
    add_data_arguments(data)  # --data-root, --download
    data.add_argument(
        "--base",
        metavar="SPEC",
        help=f"base network, a spec path or built-in name (default: one that fits the data and the machine: "
        f"{SMALL_BASE} on synthetic, {GREY_BASE} on 28x28 grey sets, {PAPER_BASE} on CIFAR with a GPU, "
        f"{SMALL_BASE} on CIFAR without one; fitted to the data's input shape and classes)",
    )
    data.add_argument(
        "--search",
        default="k",
        type=comma_list_text,
        metavar="KNOBS",
        help="what to search, comma-separated from k,heads,window,dim_head,init (default: k)",
    )

    how = parser.add_argument_group("strategy and objectives")
    how.add_argument("--strategy", default="buildup", choices=STRATEGIES, help="default: buildup (the paper's rule)")
    how.add_argument(
        "--objectives",
        default="accuracy",
        type=comma_list_text,
        metavar="LIST",
        help=f"comma-separated from {', '.join(OBJECTIVES)}; several give a Pareto front (default: accuracy)",
    )
    how.add_argument(
        "--n-trials",
        type=positive_int,
        default=8,
        metavar="N",
        help="distinct designs the study should measure (a total over all workers and runs; default: 8)",
    )
    how.add_argument(
        "--pruner",
        default="auto",
        choices=("auto", *PRUNERS),
        help="stop poor candidates early on their per-epoch test accuracy (accuracy-only studies): median, "
        "successive halving, Hyperband, or none (default: auto, which is median for buildup and hyperband for "
        "the samplers, as the replayed efficiency study found best: docs/search.md)",
    )
    how.add_argument("--timeout", type=positive_float, metavar="SECONDS", help="stop starting trials after this")
    how.add_argument(
        "--seed-endpoints",
        action="store_true",
        help="measure the ResNet, AlterNet and Swin-like ends of the space first",
    )
    how.add_argument(
        "--max-params", type=positive_float, metavar="N", help="skip designs with more parameters (before training)"
    )
    how.add_argument("--max-flops", type=positive_float, metavar="N", help="skip designs with more FLOPs per image")
    how.add_argument("--seed", type=int, default=0, metavar="N", help="sampler and training seed (default: 0)")

    fid = parser.add_argument_group("fidelity")
    fid.add_argument(
        "--fidelity",
        dest="fidelity_source",
        default="train",
        metavar="train|table:TABLE",
        help="train each candidate (default), or answer it from a fully measured table (a path, or a built-in: "
        "table:fashion-mnist-k-init) in seconds, with simulated time (docs/search.md, Replay)",
    )
    # The fidelity's settings (Fidelity declares each: default, bounds, help, flag), then the recipe's.
    add_settings_arguments(parser, Fidelity, into=fid)
    add_recipe_arguments(fid, exclude=SEARCH_OWN_FIELDS)

    where = parser.add_argument_group("storage and output")
    where.add_argument("--study-name", metavar="NAME", help="default: BASE-DATASET-STRATEGY")
    where.add_argument(
        "--storage",
        metavar="URL",
        help="sqlite:///PATH, postgresql://USER:PASS@HOST/DB or journal:PATH "
        "(default: the journal file OUT/STUDY/study.journal)",
    )
    where.add_argument(
        "--heartbeat", type=positive_int, default=30, metavar="SECONDS", help="worker heartbeat interval (default: 30)"
    )
    where.add_argument(
        "--grace-period",
        type=positive_int,
        metavar="SECONDS",
        help="a worker silent this long is dead; its trial is failed and retried (default: 3 x heartbeat)",
    )
    where.add_argument(
        "--max-retry",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="retries of a trial whose worker died (default: 2)",
    )
    where.add_argument("--out", default=RUNS_DIR, metavar="DIR", help=f"runs folder (default: {RUNS_DIR})")
    where.add_argument(
        "--device", default="auto", type=device_name, help="auto, cpu, cuda, cuda:N, mps (default: auto)"
    )
    where.add_argument("--dry-run", action="store_true", help="print the space, its size and endpoints; train nothing")
    add_dist_timeout_argument(where)
    add_optimize_argument(where)
    where.add_argument("--no-progress", dest="progress", action="store_false", help=NO_PROGRESS_HELP)
    add_config_argument(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace):
    """The command line as `archdsl.search`'s arguments: the study's settings and the Fidelity fields given."""
    from archdsl.search import SearchSettings

    settings = SearchSettings(
        dataset=args.dataset, data_root=args.data_root, download=args.download, base=args.base, search=args.search,
        strategy=args.strategy, pruner=args.pruner, fidelity_source=args.fidelity_source, objectives=args.objectives,
        n_trials=args.n_trials, timeout=args.timeout,
        seed_endpoints=args.seed_endpoints, max_params=args.max_params, max_flops=args.max_flops, seed=args.seed,
        study_name=args.study_name, storage=args.storage, heartbeat=args.heartbeat, grace_period=args.grace_period,
        max_retry=args.max_retry, out=args.out, device=args.device, progress=args.progress,
        dist_timeout=args.dist_timeout,
    )  # fmt: skip
    from archdsl.search import Fidelity

    fidelity = settings_given(args, Fidelity)
    fidelity["train_settings"] = tuple(sorted(recipe_settings(args, exclude=SEARCH_OWN_FIELDS).items()))
    fidelity["optimize"] = args.optimize
    return settings, fidelity


def run(args: argparse.Namespace) -> int:
    from archdsl.run import command_scope

    with command_scope():  # under torchrun: one worker per group, rank 0 speaks (archdsl.search.distributed)
        return _search(args)


def _search(args: argparse.Namespace) -> int:
    from archdsl.run import quiet_followers
    from archdsl.search import describe_space, journal_path, plan_search, plan_space, run_planned

    settings, fidelity = settings_from_args(args)
    space_plan = plan_space(settings)
    if args.dry_run:
        print(describe_space(space_plan))
        return 0
    plan = plan_search(settings, fidelity, space_plan=space_plan)
    quiet_followers(plan.ranks)
    print(plan.describe(), file=sys.stderr)
    out, study_name = plan.out, space_plan.study_name
    try:
        from archdsl.search import target_trials

        result = run_planned(plan, on_trial=_trial_printer(target_trials(plan.config, space_plan.space)))
    except KeyboardInterrupt:
        # Every finished trial is already in the storage; the interrupted one is run again on resume.
        # (The URL may hold a password: do not echo it.)
        database = args.storage is not None and not args.storage.startswith("journal:")
        where = "the --storage database" if database else str(journal_path(out, study_name))
        if args.storage and not database:
            where = args.storage[len("journal:") :]
        print(
            f"archdsl: interrupted; the finished trials are kept in {where}\n"
            f"  continue with the same command; see them with: archdsl report {study_name} --out {out}"
            + ((" --storage URL" if database else f" --storage {args.storage}") if args.storage else ""),
            file=sys.stderr,
        )
        return 130
    if result.follower:  # a rank after the first trained rank 0's designs; the study and its report are rank 0's
        return 0
    for remark in result.remarks:
        print(remark, file=sys.stderr)
    if result.outcome.buildup is not None:
        for step in result.outcome.buildup:
            where = step.label
            verdict = "kept" if step.accepted else "rejected"
            value = step.state.lower() if step.value is None else f"{step.value:.4g}"
            print(f"build-up: {where:<16} {value:>8}  {verdict}")
    if result.simulated_seconds is not None:
        print(f"simulated time: {result.simulated_seconds:.0f} s of training and measuring, one worker")

    from archdsl.search import write_report

    paths = write_report(result.study, out / study_name)
    print(visible_lines(paths.summary_text))  # quotes what the study's storage holds: escaped
    print(f"report: {paths.report}")
    return 0


def _trial_printer(total: int):
    """`on_trial` for run_search: one line per finished trial, as it finishes, with the study's
    progress (`[3/8, ETA 1:20 min]`). A plain line, so a log gets it too (the report has the full table)."""
    from archdsl.search import is_copy, progress_text, study_progress, trial_line

    def print_trial(study, trial) -> None:
        line = trial_line(study, trial)
        if not is_copy(trial):  # a copy measures nothing: the count stands
            line = f"{line}  {progress_text(study_progress(study, total))}"
        print(visible_lines(line), file=sys.stderr, flush=True)  # a failure's reason, from the storage

    return print_trial
