"""`archdsl search`: search where the MSAs go (Optuna), then write the study's report.

With no arguments it runs the paper's build-up procedure on the built-in synthetic data
with a small base network, at a fidelity that finishes in minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    RUNS_DIR,
    add_data_arguments,
    add_dist_timeout_argument,
    add_optimize_argument,
    comma_list_text,
    device_name,
    fraction,
    non_negative_int,
    positive_float,
    positive_int,
    severity_list,
)
from archdsl.commands.config_file import add_config_argument
from archdsl.commands.recipe_flags import add_recipe_arguments, recipe_command_words, recipe_settings
from archdsl.errors import visible_lines

SMALL_BASE = "alter-small-base"  # the default base on the synthetic data, and on CIFAR without an accelerator
GREY_BASE = "resnet-fmnist"  # the default base on 28x28 grey images (Fashion-MNIST, MNIST)
PAPER_BASE = "alter50-base"  # the default base on CIFAR with a GPU: the paper's Alter-ResNet-50 (hours per
# candidate on a CPU)
# Default fidelity: the synthetic set's 2,000 of 5,000 training images for 2 epochs trains a
# small-base candidate in seconds on a laptop CPU; real datasets start from a tenth.
SYNTHETIC_SUBSET = 0.4
REAL_SUBSET = 0.1
# Recipe fields with a flag of the search's own (its fidelity's length), not the recipe's default.
SEARCH_OWN_FIELDS = ("epochs",)


EXAMPLES = (
    "archdsl search",
    "archdsl search --dry-run --dataset cifar100",
    "archdsl search --strategy nsga2 --objectives accuracy,params --n-trials 30",
    "archdsl search --dataset cifar100 --storage postgresql://user:pass@host/db   # on each machine",
)


def register(subparsers) -> None:
    from archdsl.run.recipe import RECIPES
    from archdsl.search import STRATEGIES
    from archdsl.search.objective import Fidelity
    from archdsl.search.objectives import OBJECTIVES

    fidelity = Fidelity()  # the search's default fidelity

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
        "--epochs",
        type=positive_int,
        default=fidelity.epochs,
        metavar="N",
        help=f"training epochs per candidate (default: {fidelity.epochs})",
    )
    fid.add_argument(
        "--subset",
        type=fraction,
        metavar="FRACTION",
        help=f"class-stratified fraction of the training set (default: {SYNTHETIC_SUBSET:g} on synthetic, "
        f"{REAL_SUBSET:g} otherwise)",
    )
    fid.add_argument(
        "--test-subset",
        type=fraction,
        metavar="FRACTION",
        help="class-stratified fraction of the test and corrupted sets that score each candidate (default: the "
        "--subset fraction)",
    )
    fid.add_argument(
        "--recipe",
        default=fidelity.recipe,
        choices=RECIPES,
        help=f"training recipe (default: {fidelity.recipe}, which learns fastest in few epochs: docs/search.md)",
    )
    add_recipe_arguments(fid, exclude=SEARCH_OWN_FIELDS)
    fid.add_argument(
        "--hessian-batches",
        type=positive_int,
        default=fidelity.hessian_batches,
        metavar="N",
        help=f"batches of 16 for nep/ape (default: {fidelity.hessian_batches})",
    )
    fid.add_argument(
        "--hessian-iters",
        type=positive_int,
        default=fidelity.hessian_max_iter,
        metavar="N",
        help=f"Lanczos steps per batch for nep/ape (default: {fidelity.hessian_max_iter})",
    )
    severities = ",".join(map(str, fidelity.severities))
    fid.add_argument(
        "--severities",
        type=severity_list,
        default=fidelity.severities,
        metavar="S,S",
        help=f"corruption severities for robustness (default: {severities})",
    )

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


def run(args: argparse.Namespace) -> int:
    from archdsl.run.distributed import command_scope

    with command_scope():  # under torchrun: one worker per group, rank 0 speaks (archdsl.search.distributed)
        return _search(args)


def _search(args: argparse.Namespace) -> int:
    import logging

    import optuna

    from archdsl.commands.outputs import output_dir
    from archdsl.data import describe
    from archdsl.run.device import select_device
    from archdsl.search import objective as measure
    from archdsl.search.naming import check_study_name, default_study_name
    from archdsl.search.objectives import parse_objectives
    from archdsl.search.runner import (
        SearchConfig,
        check_same_space,
        open_study,
        run_search,
        study_progress,
        target_trials,
    )
    from archdsl.search.space import make_space, parse_searched
    from archdsl.search.storage import StorageOptions, journal_path
    from archdsl.search.trial import TrialSettings

    objectives = parse_objectives(args.objectives)
    searched = parse_searched(args.search)
    device = select_device(args.device)  # a device this machine lacks: refused now, not by the first trial
    info = describe(args.dataset, args.data_root)  # a bad dataset name fails now, before anything loads
    synthetic = args.dataset.split(":")[0] == "synthetic"
    base_name, why = (args.base, None) if args.base else default_base(info, synthetic, device.type != "cpu")
    base = measure.load_base(base_name)
    study_name = check_study_name(args.study_name or default_study_name(base_name, args.dataset, args.strategy))
    severities = args.severities
    # The space is fitted to the data from its description, here, for the dry run and the run alike.
    fitted = measure.fit_to_data(base, info.image_shape, info.num_classes)
    space = make_space(fitted, searched)
    base_text = f"{base.name} ({why})" if why else base.name

    if args.dry_run:
        print(_describe_space(space, base_text, f"fitted to {args.dataset}: {_shape_text(info)}"))
        return 0

    subset = args.subset if args.subset is not None else (SYNTHETIC_SUBSET if synthetic else REAL_SUBSET)
    test_subset = args.test_subset if args.test_subset is not None else subset
    data = measure.load_data(
        args.dataset,
        Path(args.data_root) if args.data_root else None,
        seed=args.seed,
        test_subset=test_subset,
        download=args.download,
    )
    out = Path(args.out)  # made below, once the data is here: a missing dataset leaves no empty runs folder
    measure.check_described(data, info.image_shape, info.num_classes)
    storage = StorageOptions(
        url=args.storage,
        heartbeat_interval=args.heartbeat,
        grace_period=args.grace_period or 3 * args.heartbeat,
        max_retry=args.max_retry,
    )
    config = SearchConfig(
        command=reproduce_command(
            args, study_name=study_name, base=base_name, subset=subset, test_subset=test_subset, objectives=objectives
        ),
        study_name=study_name,
        strategy=args.strategy,
        objectives=objectives,
        n_trials=args.n_trials,
        timeout=args.timeout,
        seed=args.seed,
        seed_endpoints=args.seed_endpoints,
        storage=storage,
    )
    fidelity = measure.Fidelity(
        epochs=args.epochs,
        subset=subset,
        test_subset=test_subset,
        recipe=args.recipe,
        train_settings=tuple(sorted(recipe_settings(args, exclude=SEARCH_OWN_FIELDS).items())),
        hessian_batches=args.hessian_batches,
        hessian_max_iter=args.hessian_iters,
        severities=severities,
        optimize=args.optimize,
    )
    measure.check_fidelity(fitted, data, fidelity, device=args.device, seed=args.seed)  # not each trial's error
    settings = TrialSettings(
        objectives=objectives,
        fidelity=fidelity,
        device=args.device,
        seed=args.seed,
        max_params=args.max_params,
        max_flops=args.max_flops,
        out_dir=out / study_name,
        storage=storage,
        progress=args.progress,
    )
    from archdsl.run.distributed import join_if_launched
    from archdsl.search.distributed import follow_leader, leading

    ranks = join_if_launched(args.device, timeout_s=args.dist_timeout)
    if ranks is not None and not ranks.leader:  # trains what rank 0 sends; the study is rank 0's
        follow_leader(data, fidelity, device=args.device, seed=args.seed)
        return 0
    # Optuna's own log repeats every failure with a traceback; one line per trial says it all.
    optuna.logging.set_verbosity(logging.ERROR)
    # The storage, the study's objectives and its space are inputs too: checked before the header line,
    # and a refusal leaves no empty --out behind (the data was loaded before --out was made).
    with output_dir(out, "--out"):
        study = open_study(config, out)
        check_same_space(study, space)
    print(
        f"search {study_name}: {args.strategy} over {space.size()} points of {base_text} on {args.dataset}, "
        f"objectives {','.join(o.name for o in objectives)}",
        file=sys.stderr,
    )
    total = target_trials(config, space)
    started = time.monotonic()
    try:
        printer = _trial_printer(total)
        with leading(ranks):
            outcome = run_search(config, space, data, settings, out, on_trial=printer, study=study)
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
    if outcome.exhausted is not None:
        print(
            f"search space exhausted: all {outcome.exhausted} designs are measured (or being measured); "
            f"--n-trials {args.n_trials} asks for more",
            file=sys.stderr,
        )
    else:
        timed_out = args.timeout is not None and time.monotonic() - started >= args.timeout
        ended = _why_short(outcome, args, total, study_progress(outcome.study, total).done, timed_out)
        if ended:
            print(ended, file=sys.stderr)
    if outcome.stale_failed:
        print(f"failed and re-queued trials of stopped workers: {outcome.stale_failed}", file=sys.stderr)
    if outcome.buildup is not None:
        for step in outcome.buildup:
            where = step.label
            verdict = "kept" if step.accepted else "rejected"
            value = step.state.lower() if step.value is None else f"{step.value:.4g}"
            print(f"build-up: {where:<16} {value:>8}  {verdict}")

    from archdsl.search.report import write_report

    paths = write_report(outcome.study, out / study_name)
    print(visible_lines(paths.summary_text))  # quotes what the study's storage holds: escaped
    print(f"report: {paths.report}")
    return 0


def _why_short(outcome, args: argparse.Namespace, total: int, measured: int, timed_out: bool) -> str | None:
    """Why a search that measured fewer designs than --n-trials stopped (the space's end is said apart)."""
    if measured >= args.n_trials:
        return None
    if timed_out:
        return f"search stopped: --timeout {_number(args.timeout)} s passed; {measured} of {args.n_trials} designs"
    if outcome.buildup is not None:
        if measured < total:
            why = "an MSA that did not help ends its stage's additions, so the walk is shorter than the longest"
        else:
            why = "every stage is full"
        return (
            f"search ended: the build-up walk is done after {measured} designs ({why}, {total}); "
            f"--n-trials {args.n_trials} is an upper bound, or use --strategy tpe to measure more"
        )
    return None


def reproduce_command(
    args: argparse.Namespace, *, study_name: str, base: str, subset: float, test_subset: float, objectives
) -> str:
    """The `archdsl search` line that runs this study again, kept in the study for its report.

    Every setting that shapes the results is spelled out, defaults included (a later change of
    a default must not change what the line does); the Hessian and robustness settings only when
    an objective uses them. A database URL's password is left out.
    """
    import shlex

    parts = ["archdsl", "search", "--dataset", args.dataset]
    if args.data_root:
        parts += ["--data-root", args.data_root]
    parts += ["--base", base, "--search", args.search, "--strategy", args.strategy]
    parts += ["--objectives", ",".join(o.name for o in objectives), "--n-trials", str(args.n_trials)]
    if args.timeout is not None:
        parts += ["--timeout", _number(args.timeout)]
    if args.seed_endpoints:
        parts.append("--seed-endpoints")
    for flag, value in (("--max-params", args.max_params), ("--max-flops", args.max_flops)):
        if value is not None:
            parts += [flag, _number(value)]
    parts += ["--seed", str(args.seed), "--epochs", str(args.epochs), "--subset", _number(subset)]
    parts += ["--test-subset", _number(test_subset)]
    parts += ["--recipe", args.recipe, *recipe_command_words(recipe_settings(args, exclude=SEARCH_OWN_FIELDS))]
    names = {o.name for o in objectives}
    if names & {"nep", "ape"}:
        parts += ["--hessian-batches", str(args.hessian_batches), "--hessian-iters", str(args.hessian_iters)]
    if "robustness" in names:
        parts += ["--severities", ",".join(map(str, args.severities))]
    parts += ["--study-name", study_name, "--out", str(args.out)]
    if args.storage:
        parts += ["--storage", _without_password(args.storage)]
    if args.device != "auto":
        parts += ["--device", args.device]
    return shlex.join(parts)


def _number(value: float) -> str:
    """A number as a flag takes it back exactly: `323000`, `0.4`, `1e-05`."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":PASSWORD@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _trial_printer(total: int):
    """`on_trial` for run_search: one line per finished trial, as it finishes, with the study's
    progress (`[3/8, ETA 1:20 min]`). A plain line, so a log gets it too (the report has the full table)."""
    from archdsl.search.report import progress_text, trial_line
    from archdsl.search.runner import study_progress
    from archdsl.search.storage import is_copy

    def print_trial(study, trial) -> None:
        line = trial_line(study, trial)
        if not is_copy(trial):  # a copy measures nothing: the count stands
            line = f"{line}  {progress_text(study_progress(study, total))}"
        print(visible_lines(line), file=sys.stderr, flush=True)  # a failure's reason, from the storage

    return print_trial


def default_base(info, synthetic: bool, accelerator: bool) -> tuple[str, str]:
    """The base a search takes when --base is not given, and why: one that trains a candidate in
    minutes on the data and the machine at hand (the paper's base only on CIFAR with a GPU)."""
    if synthetic:
        return SMALL_BASE, "default on synthetic data"
    if info.image_shape == (1, 28, 28):
        return GREY_BASE, "default for 28x28 grey images"
    if accelerator:
        return PAPER_BASE, "default with a GPU: the paper's Alter-ResNet-50"
    return SMALL_BASE, f"default without a GPU; --base {PAPER_BASE} for the paper's, hours per candidate on a CPU"


def _shape_text(info) -> str:
    c, h, w = info.image_shape
    return f"{c}x{h}x{w}, {info.num_classes} classes"


def _describe_space(space, base_text: str, fitted: str) -> str:
    from archdsl.search.space import layout_text

    lines = [f"base {base_text}: {len(space.stages)} stages, searching {','.join(space.searched)}", fitted]
    for s in space.stages:
        n = next(len(st.blocks) for st in space.base.stages if st.name == s.name)
        extra = ""
        if "heads" in space.searched:
            extra += f"  heads {list(s.heads)}"
        if "window" in space.searched:
            extra += f"  window {list(s.windows)}"
        if "dim_head" in space.searched:
            extra += f"  dim_head {list(s.dim_heads)}"
        lines.append(f"  {s.name}: {n} blocks, k in 0..{s.max_k}{extra}")
    if "init" in space.searched:
        lines.append(f"  init: {', '.join(space.choices()['init'])} (base: {space.base.init})")
    lines.append(f"size: {space.size()} points, {space.n_designs()} distinct designs")
    lines.append("endpoints:")
    for e in space.endpoints():
        arch = space.arch_from_params(e.params)
        layout = layout_text(arch)
        ks = ",".join(str(e.params.get(f"k_{s.name}", 0)) for s in space.stages)
        lines.append(f"  {e.name:<10} k=({ks})  {layout}  {arch.n_msa} MSA")
    return "\n".join(lines)
