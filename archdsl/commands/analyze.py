"""`archdsl analyze CKPT`: accuracy, calibration, robustness, Hessian spectrum and feature maps of a checkpoint.

Writes `metrics.json` (every result with the options used), one PNG per analysis and
`report.md` linking them, into `--out` (default: `<checkpoint stem>-analysis/` beside it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

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

METRICS = ("acc", "robustness", "hessian", "fourier", "variance")
DEFAULT_METRICS = "acc,robustness,hessian,fourier,variance"


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


def run(args: argparse.Namespace) -> int:
    import dataclasses

    import torch

    from archdsl.analysis import plots
    from archdsl.analysis.report import AnalysisReport, render_markdown, render_text
    from archdsl.commands.outputs import prepare_dir
    from archdsl.data import load_split
    from archdsl.files import write_text
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.train import check_compatible

    device = select_device(args.device)
    # Read the baseline before any long work, so that a bad path fails at once.
    baseline = _baseline_robustness(args.baseline) if args.baseline else None
    checkpoint = load_checkpoint(args.checkpoint, device=device)
    model, arch = checkpoint.model, checkpoint.arch
    dataset = args.dataset or checkpoint.meta.get("dataset") or "synthetic"
    path = Path(args.checkpoint)
    out = Path(args.out) if args.out else path.with_name(f"{path.stem}-analysis")
    prepare_dir(out, "--out")
    progress = not args.no_progress
    wanted = set(args.metrics)
    results: dict = {}
    figures: dict[str, str] = {}

    test_set = None
    if wanted & {"acc", "fourier", "variance"}:
        test_set = load_split(dataset, "test", root=args.data_root, download=args.download)
        check_compatible(arch, test_set)
        test_set = test_set.subset(args.subset, seed=args.seed)

    if "acc" in wanted and test_set is not None:
        from archdsl.analysis.metrics import classification_metrics
        from archdsl.run.evaluate import predict_logits

        logits = predict_logits(model, test_set, batch_size=args.batch_size, device=device, progress=progress)
        results["classification"] = classification_metrics(logits, test_set.labels)

    if "robustness" in wanted:
        from archdsl.analysis.robustness import evaluate_robustness
        from archdsl.data import load_corrupted

        corrupted = args.corrupted or _corrupted_name(dataset)
        sets = load_corrupted(corrupted, root=args.data_root, corruptions=args.corruptions, severities=args.severities)
        for item in sets[:1]:
            check_compatible(arch, item.images)
        if args.subset < 1:
            sets = [dataclasses.replace(s, images=s.images.subset(args.subset, seed=args.seed)) for s in sets]
        robustness = evaluate_robustness(model, sets, batch_size=args.batch_size, device=device, progress=progress)
        results["robustness"] = robustness
        if baseline is not None:
            from archdsl.analysis.robustness import mce

            results["corruption_errors"] = mce(robustness, baseline)
        figures["robustness"] = _save(plots.robustness_figure({arch.name: robustness}), out / "robustness.png")

    if "hessian" in wanted:
        from archdsl.analysis.hessian import hessian_spectrum, training_batches

        config = _training_config(checkpoint.meta)
        weight_decay = args.weight_decay if args.weight_decay is not None else config.weight_decay
        train_set = load_split(dataset, "train", root=args.data_root, download=args.download)
        check_compatible(arch, train_set)
        batches = training_batches(
            train_set, args.batches, batch_size=args.hessian_batch_size, recipe=config, seed=args.seed
        )
        spectrum = hessian_spectrum(
            model, batches, k=args.k, max_iter=args.max_iter, tol=args.tol, weight_decay=weight_decay,
            method=args.method, hvp=args.hvp, seed=args.seed, device=device, progress=progress,
        )  # fmt: skip
        results["hessian"] = spectrum
        figures["hessian"] = _save(plots.spectrum_figure({arch.name: spectrum}), out / "hessian.png")

    if wanted & {"fourier", "variance"} and test_set is not None:
        from archdsl.analysis.fourier import feature_map_statistics
        from archdsl.run.loader import make_loader

        sample = test_set.take(torch.arange(min(args.images, len(test_set))).numpy())
        images = torch.cat([x for x, _ in make_loader(sample, args.batch_size, augment=False, shuffle=False)])
        statistics = feature_map_statistics(model, images, batch_size=64, device=device, progress=progress)
        results["feature_maps"] = statistics
        figures["feature_maps"] = _save(plots.feature_map_figure({arch.name: statistics}), out / "feature_maps.png")

    report = AnalysisReport(
        checkpoint=str(path), arch=arch.name, arch_digest=arch.digest(), dataset=dataset, figures=figures, **results
    )
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
