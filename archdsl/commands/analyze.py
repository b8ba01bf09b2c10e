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
from archdsl.errors import UsageError, UserError
from archdsl.outputs import output_dir
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


def _training_config(meta: dict):
    """The checkpoint's training config (for the same augmentation and weight decay), or the default recipe's."""
    from pydantic import ValidationError

    from archdsl.run.recipe import TrainConfig

    try:
        return TrainConfig.model_validate(meta.get("config") or {})
    except ValidationError:
        return TrainConfig()


def _save(figure, path: Path) -> str:
    from archdsl.analysis.plots import DPI
    from archdsl.files import save_figure

    return save_figure(figure, path, dpi=DPI).name


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


def settings_from_args(args: argparse.Namespace, meta: dict):
    """The pipeline's settings from the command line; the recipe (augmentation, weight decay) is the checkpoint's."""
    from pydantic import ValidationError

    from archdsl.analysis.settings import AnalysisSettings, CKASettings, HessianSettings, LandscapeSettings

    try:
        return AnalysisSettings(
            recipe=_training_config(meta),
            weight_decay=args.weight_decay,
            seed=args.seed,
            batch_size=args.batch_size,
            test_subset=_test_subset(args),
            hessian=HessianSettings(
                batches=args.batches, batch_size=args.hessian_batch_size, k=args.k, tol=args.tol,
                max_iter=args.max_iter, method=args.method, hvp=args.hvp,
            ),
            images=args.images,
            train_images=args.train_images,
            landscape=LandscapeSettings(
                dims=args.landscape_dims, points=args.landscape_points, span=args.landscape_span,
                batches=args.landscape_batches, batch_size=args.landscape_batch_size,
            ),
            cka=CKASettings(images=args.cka_images, batch_size=args.cka_batch_size),
        )  # fmt: skip
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise UsageError(f"bad analysis settings: {problems}") from None


def load_data(dataset: str, args: argparse.Namespace, measures, arch):
    """The splits `measures` read, checked against the design's input shape and classes."""
    from archdsl.analysis.pipeline import AnalysisData, needed_splits
    from archdsl.data import corrupted_name, load_corrupted, load_split
    from archdsl.run.train import check_compatible

    splits = needed_splits(measures)
    loaded: dict = {}
    for split in ("test", "train"):
        if split in splits:
            loaded[split] = load_split(dataset, split, root=args.data_root, download=args.download)
            check_compatible(arch, loaded[split])
    if "corrupted" in splits:
        corrupted = args.corrupted or corrupted_name(dataset)
        sets = load_corrupted(corrupted, root=args.data_root, corruptions=args.corruptions, severities=args.severities)
        for item in sets[:1]:
            check_compatible(arch, item.images)
        loaded["corrupted"] = sets
    return AnalysisData(name=dataset, **loaded)


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis.pipeline import analyze
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.evaluate import checkpoint_named

    path = Path(args.checkpoint)
    if path.is_dir():
        return _run_directory(args, path)
    device = select_device(args.device)
    # Check --out and read the baseline before any long work, so that a bad path fails at once.
    out = Path(args.out) if args.out else path.with_name(f"{path.stem}-analysis")
    with output_dir(out, "--out"):  # a missing dataset or baseline leaves no empty --out behind
        earlier = _earlier_analysis(out, force=args.force)
        baseline = _baseline_robustness(args.baseline) if args.baseline else None
        checkpoint = load_checkpoint(args.checkpoint, device=device)
        model, arch = checkpoint.model, checkpoint.arch
        dataset = args.dataset or checkpoint.meta.get("dataset") or "synthetic"
        measures = args.metrics or DEFAULT_MEASURES
        settings = settings_from_args(args, checkpoint.meta)
        data = load_data(dataset, args, measures, arch)
        with checkpoint_named(path):  # a model whose logits are NaN: refused, and no empty --out is left
            report = analyze(
                model, data, measures, settings, device=device, progress=not args.no_progress, baseline=baseline,
                checkpoint=str(path), optimize=args.optimize,
            )  # fmt: skip
    return _write(report, out, earlier)


def _run_directory(args: argparse.Namespace, run_dir: Path) -> int:
    """The Hessian spectrum of every checkpoint a run kept, against the epoch."""
    from archdsl.analysis.pipeline import hessian_over_training
    from archdsl.analysis.report import AnalysisReport
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.train import saved_epochs

    measures = args.metrics or ("hessian",)
    if tuple(measures) != ("hessian",):
        raise UsageError(
            f"{run_dir} is a run directory: it is measured with --metrics hessian (the spectrum over training)",
            hint="pass one checkpoint (e.g. final.safetensors) for the other measures",
        )
    epochs = saved_epochs(run_dir)
    if not epochs:
        raise UserError(
            f"{run_dir} holds no checkpoint of a finished epoch (epoch-NNNN.safetensors or final.safetensors)",
            hint="train with --save-every N to keep checkpoints along the way",
        )
    device = select_device(args.device)
    out = Path(args.out) if args.out else run_dir / "hessian-analysis"
    with output_dir(out, "--out"):
        earlier = _earlier_analysis(out, force=args.force)
        first = load_checkpoint(epochs[-1][1], device=device)
        dataset = args.dataset or first.meta.get("dataset") or "synthetic"
        settings = settings_from_args(args, first.meta)
        data = load_data(dataset, args, ("hessian",), first.arch)

        def models():
            for epoch, checkpoint_path in epochs:
                yield epoch, checkpoint_path.name, load_checkpoint(checkpoint_path, device=device).model

        trajectory = hessian_over_training(models(), data, settings, device=device, progress=not args.no_progress)
    report = AnalysisReport(
        checkpoint=str(run_dir), arch=first.arch.name, arch_digest=first.arch.digest(), dataset=dataset,
        measures=("hessian",), settings=settings, hessian_trajectory=trajectory,
    )  # fmt: skip
    return _write(report, out, earlier)


def _write(report, out: Path, earlier: list[str]) -> int:
    from archdsl.analysis.plots import report_figures
    from archdsl.analysis.report import render_markdown, render_text
    from archdsl.files import write_text

    figures = {name: _save(figure, out / f"{name}.png") for name, figure in report_figures(report).items()}
    report = report.model_copy(update={"figures": figures})
    write_text(out / METRICS_FILE, report.to_json())
    write_text(out / REPORT_FILE, render_markdown(report))
    for name in set(earlier) - {METRICS_FILE, REPORT_FILE, *figures.values()}:
        (out / name).unlink(missing_ok=True)  # a plot of the replaced analysis that this one did not redraw
    print(render_text(report))
    print(f"wrote {out / 'metrics.json'}, {out / 'report.md'} and {len(report.figures)} figure(s)")
    return 0


# Everything an analysis writes into --out, and only that: what --force replaces.
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"


def _earlier_analysis(out: Path, *, force: bool) -> list[str]:
    """The files of an earlier analysis in `out`. Never replaced silently (its metrics may
    have taken hours): refused without --force; with it, replaced, and its plots that the
    new analysis does not redraw are removed at the end, so that no stale plot stays."""
    from archdsl.analysis.plots import FIGURE_NAMES

    written = (METRICS_FILE, REPORT_FILE, *(f"{name}.png" for name in FIGURE_NAMES))
    earlier = sorted(name for name in written if (out / name).exists())
    if earlier and not force:
        raise UserError(
            f"--out {out} already holds an analysis ({', '.join(earlier)})",
            hint="add --force to replace it, or give another --out",
        )
    return earlier


def _baseline_robustness(path_text: str):
    """The robustness result stored in an earlier run's metrics.json, or a UserError saying why not."""
    import pydantic

    from archdsl.analysis.report import AnalysisReport
    from archdsl.errors import UserError

    path = Path(path_text)
    if not path.is_file():
        raise UserError(
            f"--baseline {path_text!r}: no such file", hint="pass the metrics.json of an earlier `archdsl analyze`"
        )
    try:
        baseline = AnalysisReport.model_validate_json(path.read_bytes())
    except pydantic.ValidationError:
        raise UserError(f"--baseline {path_text!r} is not a metrics.json written by `archdsl analyze`") from None
    if baseline.robustness is None:
        raise UserError(
            f"--baseline {path_text!r} holds no robustness result",
            hint="analyse the baseline with --metrics robustness",
        )
    return baseline.robustness
