"""`archdsl analyze CKPT`: accuracy, calibration, robustness, Hessian spectrum and feature maps of a checkpoint.

Writes `metrics.json` (every result with the options used), one PNG per analysis and
`report.md` linking them, into `--out` (default: `<checkpoint stem>-analysis/` beside it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archdsl.analysis.pipeline import DEFAULT_MEASURES, MEASURES  # torch-free
from archdsl.commands._args import (
    NO_PROGRESS_HELP,
    add_data_arguments,
    add_optimize_argument,
    device_name,
    fraction,
    name_list,
    non_negative_float,
    positive_float,
    positive_int,
    severity_list,
)
from archdsl.errors import UsageError
from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS  # torch-free

METRICS = tuple(MEASURES)
DEFAULT_METRICS = ",".join(DEFAULT_MEASURES)


def metric_list(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in chosen if name not in METRICS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown metric {', '.join(map(repr, unknown)) or '(none given)'}; choose from {','.join(METRICS)}"
        )
    return chosen


EXAMPLES = (
    "archdsl analyze runs/a50/final.safetensors",
    "archdsl analyze runs/a50/final.safetensors --metrics acc,hessian --out runs/a50/analysis",
    "archdsl analyze runs/a50/final.safetensors --metrics cka,lesion,landscape --landscape-dims 2",
    "archdsl analyze runs/a50 --metrics hessian   # a run kept with `archdsl train --save-every N`",
)


def _default(model, name: str):
    """The default of a settings field: the one definition, shown in --help and used when a flag is left out."""
    return model.model_fields[name].default


def register(subparsers) -> None:
    from archdsl.analysis.settings import AnalysisSettings, CKASettings, HessianSettings, LandscapeSettings

    parser = subparsers.add_parser(
        "analyze",
        help="analyse a checkpoint: accuracy/ECE, robustness, Hessian NEP/APE, feature maps, CKA, lesions, landscape",
        description=(
            "Measure a trained checkpoint the way Park & Kim do: top-1, NLL and ECE on the test split; mean "
            "accuracy over the corrupted sets (<dataset>-c); the Hessian max-eigenvalue spectrum (NEP, APE) on "
            "augmented training batches; Delta log amplitude and variance of the feature maps block by block; "
            "NLL on augmented training data (nll-train); the filter-normalised loss landscape; mini-batch CKA "
            "between every pair of blocks; accuracy with each block's residual branch removed (lesion). Given a "
            "run directory, measures the Hessian spectrum of every checkpoint it kept (train --save-every). "
            "Writes metrics.json, PNG figures and report.md."
        ),
    )
    parser.add_argument(
        "checkpoint", metavar="CKPT",
        help="a .safetensors checkpoint written by archdsl train, or a run directory (--metrics hessian)",
    )  # fmt: skip
    parser.add_argument("--dataset", metavar="NAME", help="dataset (default: the checkpoint's, else synthetic)")
    add_data_arguments(parser)
    parser.add_argument(
        "--metrics", type=metric_list, metavar="LIST",
        help=f"comma-separated subset of {','.join(METRICS)} (default: {DEFAULT_METRICS}; hessian for a run "
        "directory)",
    )  # fmt: skip
    parser.add_argument("--out", metavar="DIR", help="output folder (default: <CKPT stem>-analysis beside CKPT)")
    parser.add_argument(
        "--force", action="store_true", help="replace an analysis already in --out (its files only; stale plots go)"
    )
    parser.add_argument("--device", type=device_name, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--batch-size", type=positive_int, default=_default(AnalysisSettings, "batch_size"), metavar="N",
        help="evaluation batch size (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--test-subset", type=fraction, default=_default(AnalysisSettings, "test_subset"), metavar="FRACTION",
        help="class-stratified fraction of the test and corrupted sets (default: %(default)s)",
    )  # fmt: skip
    # The old spelling: --subset is the training set's fraction everywhere else (train, search).
    parser.add_argument("--subset", dest="old_subset", type=fraction, help=argparse.SUPPRESS)
    parser.add_argument(
        "--seed", type=int, default=_default(AnalysisSettings, "seed"), metavar="N",
        help="seed of the training batches, start vectors, directions and subsets (default: %(default)s)",
    )  # fmt: skip
    add_optimize_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    parser.add_argument(
        "--weight-decay", type=non_negative_float, metavar="WD",
        help="L2 term 0.5*wd*||w||^2 of the loss (hessian, landscape) (default: the checkpoint's training weight "
        f"decay, else the {DEFAULT_RECIPE} recipe's, {RECIPE_DEFAULTS[DEFAULT_RECIPE]['weight_decay']:g})",
    )  # fmt: skip
    robust = parser.add_argument_group("robustness")
    robust.add_argument("--corrupted", metavar="NAME", help="corrupted dataset (default: <dataset>-c)")
    robust.add_argument(
        "--corruptions", type=name_list, metavar="A,B", help="only these corruptions, comma-separated (default: all)"
    )
    robust.add_argument("--severities", type=severity_list, metavar="S,S", help="only these severities, e.g. 1,5")
    robust.add_argument(
        "--baseline",
        metavar="METRICS_JSON",
        help="also report Hendrycks' mCE relative to this earlier `archdsl analyze` result (its metrics.json)",
    )
    hessian = parser.add_argument_group("hessian")
    h = HessianSettings
    hessian.add_argument(
        "--batches", type=positive_int, default=_default(h, "batches"), metavar="N",
        help="training batches to pool (default: %(default)s)",
    )  # fmt: skip
    hessian.add_argument(
        "--hessian-batch-size", type=positive_int, default=_default(h, "batch_size"), metavar="N",
        help="images per batch (default: %(default)s)",
    )  # fmt: skip
    hessian.add_argument(
        "--k", type=positive_int, default=_default(h, "k"), metavar="N",
        help="top eigenvalues per batch (default: %(default)s)",
    )  # fmt: skip
    hessian.add_argument(
        "--tol", type=positive_float, default=_default(h, "tol"), metavar="X",
        help="relative tolerance (default: %(default)g)",
    )  # fmt: skip
    hessian.add_argument(
        "--max-iter", type=positive_int, default=_default(h, "max_iter"), metavar="N",
        help="most Hessian-vector products: Lanczos steps per batch, or power iterations per eigenvalue "
        "(default: %(default)s)",
    )  # fmt: skip
    hessian.add_argument(
        "--method", choices=("auto", "lanczos", "power"), default=_default(h, "method"),
        help="eigensolver: lanczos (the top-k within --tol, in fewer products than power iteration), power, or auto "
        "(default: lanczos unless its vectors would take over a quarter of the memory)",
    )  # fmt: skip
    hessian.add_argument(
        "--hvp", choices=("autograd", "func"), default=_default(h, "hvp"),
        help="Hessian-vector products (default: %(default)s)",
    )  # fmt: skip
    maps = parser.add_argument_group("fourier / variance")
    maps.add_argument(
        "--images", type=positive_int, default=_default(AnalysisSettings, "images"), metavar="N",
        help="test images for feature maps (default: %(default)s)",
    )  # fmt: skip
    train_nll = parser.add_argument_group("nll-train")
    train_nll.add_argument(
        "--train-images", type=positive_int, default=_default(AnalysisSettings, "train_images"), metavar="N",
        help="augmented training images (default: %(default)s, or the whole split if smaller)",
    )  # fmt: skip
    land = parser.add_argument_group("landscape")
    land.add_argument(
        "--landscape-dims", type=int, choices=(1, 2), default=_default(LandscapeSettings, "dims"),
        help="1-D curve or 2-D contour (default: %(default)s)",
    )  # fmt: skip
    land.add_argument(
        "--landscape-points", type=positive_int, default=_default(LandscapeSettings, "points"), metavar="N",
        help="grid points per axis, odd (default: %(default)s)",
    )  # fmt: skip
    land.add_argument(
        "--landscape-span", type=positive_float, default=_default(LandscapeSettings, "span"), metavar="X",
        help="the grid covers [-X, X] times each direction (default: %(default)g)",
    )  # fmt: skip
    land.add_argument(
        "--landscape-batches", type=positive_int, default=_default(LandscapeSettings, "batches"), metavar="N",
        help="augmented training batches per loss value (default: %(default)s)",
    )  # fmt: skip
    land.add_argument(
        "--landscape-batch-size", type=positive_int, default=_default(LandscapeSettings, "batch_size"), metavar="N",
        help="images per batch (default: %(default)s)",
    )  # fmt: skip
    cka = parser.add_argument_group("cka")
    cka.add_argument(
        "--cka-images", type=positive_int, default=_default(CKASettings, "images"), metavar="N",
        help="test images (default: %(default)s)",
    )  # fmt: skip
    cka.add_argument(
        "--cka-batch-size", type=positive_int, default=_default(CKASettings, "batch_size"), metavar="N",
        help="images per mini-batch, at least 4 (default: %(default)s)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def _test_subset(args: argparse.Namespace) -> float:
    """--test-subset, or the old --subset of analyze (said so once: the word means the training set elsewhere)."""
    old = getattr(args, "old_subset", None)
    if old is None:
        return args.test_subset
    if args.test_subset != _default_test_subset():
        raise UsageError("give --test-subset alone: --subset is its old name in analyze")
    import sys

    print(
        f"archdsl: analyze --subset is now --test-subset (the test and corrupted sets; --subset means the "
        f"training set in train and search): taken as --test-subset {old:g}",
        file=sys.stderr,
    )
    return old


def _default_test_subset() -> float:
    from archdsl.analysis.settings import AnalysisSettings

    return _default(AnalysisSettings, "test_subset")


def settings_from_args(args: argparse.Namespace) -> dict:
    """The analysis settings the command line gives (AnalysisSettings fields, nested); the recipe, and
    the weight decay unless --weight-decay is given, are the checkpoint's (archdsl.analysis.session)."""
    fields = dict(
        seed=args.seed, batch_size=args.batch_size, test_subset=_test_subset(args),
        hessian=dict(
            batches=args.batches, batch_size=args.hessian_batch_size, k=args.k, tol=args.tol,
            max_iter=args.max_iter, method=args.method, hvp=args.hvp,
        ),
        images=args.images, train_images=args.train_images,
        landscape=dict(
            dims=args.landscape_dims, points=args.landscape_points, span=args.landscape_span,
            batches=args.landscape_batches, batch_size=args.landscape_batch_size,
        ),
        cka=dict(images=args.cka_images, batch_size=args.cka_batch_size),
    )  # fmt: skip
    if args.weight_decay is not None:
        fields["weight_decay"] = args.weight_decay
    return fields


def sources_from_args(args: argparse.Namespace):
    from archdsl.analysis.session import AnalysisSources

    return AnalysisSources(
        measures=args.metrics, dataset=args.dataset, data_root=args.data_root, download=args.download,
        corrupted=args.corrupted, corruptions=args.corruptions, severities=args.severities, baseline=args.baseline,
        device=args.device, optimize=args.optimize, progress=not args.no_progress,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis.report import render_text
    from archdsl.analysis.session import analyze_checkpoint, default_out

    out = Path(args.out) if args.out else default_out(args.checkpoint)
    report = analyze_checkpoint(
        args.checkpoint, settings_from_args(args), sources_from_args(args), out=out, force=args.force
    )
    print(render_text(report))
    print(f"wrote {out / 'metrics.json'}, {out / 'report.md'} and {len(report.figures)} figure(s)")
    return 0
