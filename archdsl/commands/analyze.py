"""`archdsl analyze CKPT`: accuracy, calibration, robustness, Hessian spectrum and feature maps of a checkpoint.

Writes `metrics.json` (every result with the options used), one PNG per analysis and
`report.md` linking them, into `--out` (default: `<checkpoint stem>-analysis/` beside it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archdsl.analysis.pipeline import DEFAULT_MEASURES, MEASURES  # torch-free
from archdsl.commands._args import (
    add_data_arguments,
    device_name,
    fraction,
    non_negative_float,
    positive_float,
    positive_int,
    severity,
)
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
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="analyse a checkpoint: accuracy/ECE, corruption robustness, Hessian NEP/APE, feature maps",
        description=(
            "Measure a trained checkpoint the way Park & Kim do: top-1, NLL and ECE on the test split; mean "
            "accuracy over the corrupted sets (<dataset>-c); the Hessian max-eigenvalue spectrum (NEP, APE) on "
            "augmented training batches; Delta log amplitude and variance of the feature maps block by block. "
            "Writes metrics.json, PNG figures and report.md."
        ),
    )
    parser.add_argument("checkpoint", metavar="CKPT", help="a .safetensors checkpoint written by archdsl train")
    parser.add_argument("--dataset", metavar="NAME", help="dataset (default: the checkpoint's, else synthetic)")
    add_data_arguments(parser)
    parser.add_argument(
        "--metrics", type=metric_list, default=metric_list(DEFAULT_METRICS), metavar="LIST",
        help=f"comma-separated subset of {','.join(METRICS)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--out", metavar="DIR", help="output folder (default: <CKPT stem>-analysis beside CKPT)")
    parser.add_argument("--device", type=device_name, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--batch-size", type=positive_int, default=256, metavar="N", help="evaluation batch size (default: 256)"
    )
    parser.add_argument(
        "--subset",
        type=fraction,
        default=1.0,
        metavar="FRACTION",
        help="fraction of each test/corrupted set (default: 1)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the Hessian batches and start vectors (default: 0)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    robust = parser.add_argument_group("robustness")
    robust.add_argument("--corrupted", metavar="NAME", help="corrupted dataset (default: <dataset>-c)")
    robust.add_argument("--corruptions", nargs="+", metavar="NAME", help="only these corruptions (default: all)")
    robust.add_argument("--severities", nargs="+", type=severity, metavar="S", help="only these severities")
    robust.add_argument(
        "--baseline",
        metavar="METRICS_JSON",
        help="also report Hendrycks' mCE relative to this earlier `archdsl analyze` result (its metrics.json)",
    )
    hessian = parser.add_argument_group("hessian")
    hessian.add_argument(
        "--batches", type=positive_int, default=10, metavar="N", help="training batches to pool (default: 10)"
    )
    hessian.add_argument(
        "--hessian-batch-size", type=positive_int, default=16, metavar="N", help="images per batch (default: 16)"
    )
    hessian.add_argument(
        "--k", type=positive_int, default=5, metavar="N", help="top eigenvalues per batch (default: 5)"
    )
    hessian.add_argument(
        "--tol", type=positive_float, default=1e-3, metavar="X", help="relative tolerance (default: 1e-3)"
    )
    hessian.add_argument(
        "--max-iter", type=positive_int, default=100, metavar="N", help="iterations per eigenvalue (default: 100)"
    )
    hessian.add_argument("--method", choices=("power", "lanczos"), default="power", help="eigensolver (default: power)")
    hessian.add_argument("--hvp", choices=("autograd", "func"), default="autograd", help="Hessian-vector products")
    hessian.add_argument(
        "--weight-decay", type=non_negative_float, metavar="WD",
        help="L2 term 0.5*wd*||w||^2 in the loss (default: the checkpoint's training weight decay, "
        f"else the {DEFAULT_RECIPE} recipe's, {RECIPE_DEFAULTS[DEFAULT_RECIPE]['weight_decay']:g})",
    )  # fmt: skip
    maps = parser.add_argument_group("fourier / variance")
    maps.add_argument(
        "--images", type=positive_int, default=256, metavar="N", help="test images for feature maps (default: 256)"
    )
    parser.set_defaults(func=run)


def _corrupted_name(dataset: str) -> str:
    base, colon, params = dataset.partition(":")
    return base if base.endswith("-c") else f"{base}-c{colon}{params}"


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


def settings_from_args(args: argparse.Namespace, meta: dict):
    """The pipeline's settings from the command line; the recipe (augmentation, weight decay) is the checkpoint's."""
    from archdsl.analysis.settings import AnalysisSettings, HessianSettings

    hessian = HessianSettings(
        batches=args.batches, batch_size=args.hessian_batch_size, k=args.k, tol=args.tol, max_iter=args.max_iter,
        method=args.method, hvp=args.hvp,
    )  # fmt: skip
    return AnalysisSettings(
        recipe=_training_config(meta),
        weight_decay=args.weight_decay,
        seed=args.seed,
        batch_size=args.batch_size,
        subset=args.subset,
        hessian=hessian,
        images=args.images,
    )


def load_data(dataset: str, args: argparse.Namespace, measures, arch):
    """The splits `measures` read, checked against the design's input shape and classes."""
    from archdsl.analysis.pipeline import AnalysisData, needed_splits
    from archdsl.data import load_corrupted, load_split
    from archdsl.run.train import check_compatible

    splits = needed_splits(measures)
    loaded: dict = {}
    for split in ("test", "train"):
        if split in splits:
            loaded[split] = load_split(dataset, split, root=args.data_root, download=args.download)
            check_compatible(arch, loaded[split])
    if "corrupted" in splits:
        corrupted = args.corrupted or _corrupted_name(dataset)
        sets = load_corrupted(corrupted, root=args.data_root, corruptions=args.corruptions, severities=args.severities)
        for item in sets[:1]:
            check_compatible(arch, item.images)
        loaded["corrupted"] = sets
    return AnalysisData(name=dataset, **loaded)


def run(args: argparse.Namespace) -> int:
    from archdsl.analysis.pipeline import analyze
    from archdsl.analysis.plots import report_figures
    from archdsl.analysis.report import render_markdown, render_text
    from archdsl.commands.outputs import prepare_dir
    from archdsl.files import write_text
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device

    device = select_device(args.device)
    # Read the baseline before any long work, so that a bad path fails at once.
    baseline = _baseline_robustness(args.baseline) if args.baseline else None
    checkpoint = load_checkpoint(args.checkpoint, device=device)
    model, arch = checkpoint.model, checkpoint.arch
    dataset = args.dataset or checkpoint.meta.get("dataset") or "synthetic"
    path = Path(args.checkpoint)
    out = Path(args.out) if args.out else path.with_name(f"{path.stem}-analysis")
    prepare_dir(out, "--out")
    settings = settings_from_args(args, checkpoint.meta)
    data = load_data(dataset, args, args.metrics, arch)
    report = analyze(
        model, data, args.metrics, settings, device=device, progress=not args.no_progress, baseline=baseline,
        checkpoint=str(path),
    )  # fmt: skip
    figures = {name: _save(figure, out / f"{name}.png") for name, figure in report_figures(report).items()}
    report = report.model_copy(update={"figures": figures})
    write_text(out / "metrics.json", report.to_json())
    write_text(out / "report.md", render_markdown(report))
    print(render_text(report))
    print(f"wrote {out / 'metrics.json'}, {out / 'report.md'} and {len(report.figures)} figure(s)")
    return 0


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
