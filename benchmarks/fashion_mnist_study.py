"""The paper's claims on real images: a small ResNet, its AlterNet and its Swin-like endpoint on Fashion-MNIST.

Trains the three designs from the built-in `resnet-fmnist` (the AlterNet and the Swin-like
model come from it by the build-up rule: `buildup.layout`), with the fast recipe and AdamW
on a class-stratified subset of Fashion-MNIST, on the CPU, then measures each with the one
analysis pipeline (`archdsl.analysis.analyze`): test accuracy and NLL, NLL on augmented
training data, robustness to Fashion-MNIST-C (the CIFAR-C generator on the grey test images),
Delta log amplitude and variance per block, the Hessian spectrum (NEP/APE), CKA between
blocks, the lesion study and a 1-D loss landscape. Writes one `metrics.json` per model,
`summary.md` and five figures into --out (default `runs/fashion-mnist-study`).

Needs Fashion-MNIST (`apt-get install dataset-fashion-mnist`, or the IDX files under
--data-root). Run it in the background, one process per model, then once more for the
summary (docs/analysis.md gives the exact commands); `--quick` is a smoke test:

    nohup python benchmarks/fashion_mnist_study.py > study.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def designs():
    """name -> Arch: the ResNet base, its AlterNet (MSAs end the later stages) and its Swin-like endpoint."""
    from archdsl.buildup import layout
    from archdsl.lang.spec import load_spec

    base = load_spec("resnet-fmnist")
    return {
        "ResNet": base,
        "AlterNet": layout(base, [0, 1, 1], name="alter-fmnist"),  # c1 CC, c2 CM, c3 CM
        "Swin-like": layout(base, [1, 1, 1], name="swinlike-fmnist"),  # every other block an MSA
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/fashion-mnist-study")
    parser.add_argument("--data-root")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--subset", type=float, default=0.2, help="fraction of the 60,000 training images")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="SGD's learning rate scales with it (0.1 per 128 images)"
    )
    parser.add_argument(
        "--optimizer",
        choices=("adamw", "sgd"),
        default="adamw",
        help="adamw (lr 1e-3, weight decay 0.05; the paper trains every model with AdamW) or the fast recipe's "
        "Nesterov SGD (lr 0.1 per 128 images, weight decay 5e-4)",
    )
    parser.add_argument("--test", type=int, default=1000, help="test images (the first N of the 10,000)")
    parser.add_argument("--severities", type=int, nargs="+", default=[3])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny subsets, one epoch")
    parser.add_argument(
        "--only",
        choices=("ResNet", "AlterNet", "Swin-like"),
        help="train and measure this model only (to run the "
        "three in parallel processes; a last run without --only writes the summary from their metrics.json)",
    )
    return parser.parse_args()


def main() -> None:
    import torch

    from archdsl.analysis import AnalysisData, AnalysisSettings, HessianSettings, analyze
    from archdsl.analysis.report import AnalysisReport
    from archdsl.analysis.settings import CKASettings, LandscapeSettings
    from archdsl.data import load_corrupted, load_split
    from archdsl.nn.summary import summarize
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.train import TrainConfig, train

    args = parse_args()
    if args.quick:
        args.epochs, args.subset, args.test, args.severities = 1, 0.005, 64, [3]
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    labels = [label for label in designs() if not args.only or label == args.only]
    if all((out / label.lower() / "metrics.json").is_file() for label in labels):
        data = None  # every model measured: only the summary and figures to write
    else:
        dataset = f"fashion-mnist:test={args.test}"
        train_set = load_split(dataset, "train", root=args.data_root)
        test_set = load_split(dataset, "test", root=args.data_root)
        started = time.perf_counter()
        corrupted = load_corrupted(dataset, root=args.data_root, severities=args.severities)
        print(
            f"Fashion-MNIST-C: {len(corrupted)} sets of {args.test} in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        data = AnalysisData(name=dataset, train=train_set, test=test_set, corrupted=corrupted)
    # The fast recipe (crop + flip, no warm-up, per-iteration cosine, plain cross-entropy; archdsl's
    # `weak` when the study ran), with AdamW unless told otherwise.
    optimizer = dict(optimizer="adamw", lr=1e-3, weight_decay=0.05) if args.optimizer == "adamw" else {}
    config = TrainConfig(
        recipe="fast",
        epochs=args.epochs,
        subset=args.subset,
        batch_size=args.batch_size,
        seed=0,
        device="cpu",
        **optimizer,
    )
    settings = AnalysisSettings(
        recipe=config,
        hessian=HessianSettings(batches=3, batch_size=16, k=5, max_iter=30, method="lanczos"),
        images=256,
        train_images=1000 if not args.quick else 64,
        landscape=LandscapeSettings(dims=1, points=11, span=1.0, batches=2, batch_size=32),
        cka=CKASettings(images=256 if not args.quick else 32, batch_size=32 if not args.quick else 8),
    )
    measures = ["acc", "robustness", "hessian", "fourier", "variance", "nll-train", "landscape", "cka", "lesion"]
    reports: dict[str, AnalysisReport] = {}
    timings: dict[str, dict[str, float]] = {}
    for label, arch in designs().items():
        if label not in labels:
            continue
        folder = out / label.lower()
        if (folder / "metrics.json").is_file():  # a rerun keeps finished models
            reports[label] = AnalysisReport.model_validate_json((folder / "metrics.json").read_text())
            continue
        assert data is not None
        t0 = time.perf_counter()
        final = folder / "run" / "final.safetensors"
        if final.is_file():  # trained before, killed while analysing: measure that model
            model = load_checkpoint(final).model
            train_s = sum(json.loads(line)["seconds"] for line in (folder / "run" / "metrics.jsonl").open())
            print(f"{label}: measuring the model trained before ({final})", flush=True)
        else:
            result = train(arch, data.train, data.test, config, run_dir=folder / "run", progress=False, save_every=1)
            model, train_s = result.model, time.perf_counter() - t0
            print(f"{label}: trained {args.epochs} epochs in {train_s:.0f} s, top-1 {result.test_acc:.4f}", flush=True)
        t1 = time.perf_counter()
        report = analyze(model, data, measures, settings, device="cpu")
        t2 = time.perf_counter()
        print(f"{label}: analysed in {t2 - t1:.0f} s", flush=True)
        (folder / "metrics.json").write_text(report.to_json())
        reports[label] = report
        summary = summarize(arch)
        timings[label] = {"train_s": train_s, "analyze_s": t2 - t1, "params": summary.params, "flops": summary.flops}
        (folder / "timing.json").write_text(json.dumps(timings[label], indent=2))
    if args.only:
        return
    write_summary(out, reports, args)
    write_figures(out, reports)
    print(f"wrote {out / 'summary.md'} and figures in {out}", flush=True)


def write_summary(out: Path, reports, args) -> None:
    lines = [
        f"Fashion-MNIST study: fast recipe with {args.optimizer}, batch {args.batch_size}, {args.epochs} epoch(s) "
        f"on {args.subset:g} of the training set, {args.test} test images, Fashion-MNIST-C severities "
        f"{args.severities}.",
        "",
        "| model | params | top-1 % | NLL | NLL_train | robustness % | NEP % | APE | mean dLogAmp, MSA / conv "
        "| lesion: worst block (top-1 %) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, r in reports.items():
        timing = out / label.lower() / "timing.json"
        params = json.loads(timing.read_text())["params"] if timing.is_file() else "?"
        amp = r.feature_maps.delta_log_amplitude.layers
        msa = [x.value for x in amp if x.kind in ("msa", "attn")]
        conv = [x.value for x in amp if x.kind == "conv"]
        mean = lambda xs: f"{sum(xs) / len(xs):.2f}" if xs else "-"  # noqa: E731
        worst = min(r.lesion.blocks, key=lambda b: b.top1)
        lines.append(
            f"| {label} | {params:,} | {100 * r.classification.top1:.2f} | {r.classification.nll:.3f} "
            f"| {r.training_nll.nll:.3f} | {100 * r.robustness.mean:.2f} | {100 * r.hessian.nep:.1f} "
            f"| {r.hessian.ape:.3g} | {mean(msa)} / {mean(conv)} | {worst.name} {worst.kind} ({100 * worst.top1:.1f}) |"
        )
    lines += [
        "",
        "Across a block, by kind (mean over the blocks of that kind): the change of Delta log amplitude "
        "(negative: the block removed high frequencies), the log ratio of the feature-map variance "
        "(negative: the block reduced it), and the drop in test top-1 when the block's branch is removed.",
        "",
        "| model | kind | blocks | change of dLogAmp | log variance ratio | lesion drop (points) |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in reports.items():
        for kind, rows in block_changes(r).items():
            amp, var, drop = (sum(x[i] for x in rows) / len(rows) for i in range(3))
            lines.append(f"| {label} | {kind} | {len(rows)} | {amp:+.3f} | {var:+.3f} | {drop:.2f} |")
    lines += ["", "Per block (Delta log amplitude, variance, lesion top-1 %):", ""]
    for label, r in reports.items():
        lesion = {b.name: b.top1 for b in r.lesion.blocks}
        lines += [f"{label}: intact {100 * r.lesion.top1:.2f} %", "", "| block | kind | dLogAmp | variance | lesion |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for amp, var in zip(r.feature_maps.delta_log_amplitude.layers, r.feature_maps.variance.layers, strict=True):
            les = f"{100 * lesion[amp.name]:.1f}" if amp.name in lesion else ""
            lines.append(f"| {amp.name} | {amp.kind} | {amp.value:.3f} | {var.value:.4g} | {les} |")
        lines.append("")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def block_changes(report) -> dict[str, list[tuple[float, float, float]]]:
    """kind -> (change of Delta log amplitude, log variance ratio, lesion drop in points) per block."""
    import math

    amp = report.feature_maps.delta_log_amplitude.layers
    var = report.feature_maps.variance.layers
    lesion = {b.name: b.top1 for b in report.lesion.blocks}
    changes: dict[str, list[tuple[float, float, float]]] = {}
    first_stage = amp[1].stage
    for i in range(1, len(amp)):
        # A stage's first block halves the map: its frequencies and variance change for that reason too.
        kind = amp[i].kind + (" (downsamples)" if amp[i].index == 0 and amp[i].stage != first_stage else "")
        drop = 100 * (report.lesion.top1 - lesion[amp[i].name]) if amp[i].name in lesion else float("nan")
        ratio = math.log(var[i].value / var[i - 1].value)
        changes.setdefault(kind, []).append((amp[i].value - amp[i - 1].value, ratio, drop))
    return changes


def write_figures(out: Path, reports) -> None:
    from matplotlib.figure import Figure

    from archdsl.analysis import plots

    dpi = 80
    plots.feature_map_figure({k: r.feature_maps for k, r in reports.items()}).savefig(
        out / "fmnist-feature-maps.png", dpi=dpi
    )
    plots.spectrum_figure({k: r.hessian for k, r in reports.items()}).savefig(out / "fmnist-hessian.png", dpi=dpi)
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    for axes, (label, r) in zip(figure.subplots(1, len(reports)), reports.items(), strict=True):
        blocks = r.lesion.blocks
        axes.bar([b.depth for b in blocks], [100 * b.top1 for b in blocks],
                 color=[plots._kind_color(b.kind) for b in blocks])  # fmt: skip
        axes.axhline(100 * r.lesion.top1, color="black", linestyle="--", linewidth=1)
        axes.set_xticks([b.depth for b in blocks], [b.name.removeprefix("stages.") for b in blocks], rotation=90)
        axes.set_ylim(0, 100)
        axes.set_title(f"{label}: lesions (intact dashed)", fontsize=9)
        axes.set_ylabel("test top-1 (%)")
    figure.savefig(out / "fmnist-lesion.png", dpi=dpi)
    # The NLL_train / test error plane (the paper's Fig. 6 axes) and the 1-D loss landscapes.
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    scatter, curves = figure.subplots(1, 2)
    for (label, r), color in zip(reports.items(), plots.COLORS, strict=False):
        scatter.scatter(r.training_nll.nll, 100 * (1 - r.classification.top1), color=color, label=label, s=40)
        curves.plot(r.landscape.coordinates, r.landscape.losses, marker="o", markersize=3, color=color, label=label)
    scatter.set_xlabel("NLL_train (augmented training images)")
    scatter.set_ylabel("test error (%)")
    scatter.set_title("Fig. 6 axes", fontsize=9)
    curves.set_xlabel("step along a filter-normalised random direction")
    curves.set_ylabel("NLL + L2 term (training batches)")
    curves.set_title("1-D loss landscape", fontsize=9)
    for axes in (scatter, curves):
        axes.legend(fontsize=8)
        axes.grid(alpha=0.3)
    figure.savefig(out / "fmnist-nll-landscape.png", dpi=dpi)
    figure = Figure(figsize=(14, 4.6), layout="constrained")
    for axes, (label, r) in zip(figure.subplots(1, len(reports)), reports.items(), strict=True):
        names = [f"{x.name.removeprefix('stages.')} {x.kind}" for x in r.cka.layers]
        image = axes.imshow(r.cka.matrix, vmin=0, vmax=1, cmap="magma", origin="lower")
        axes.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
        axes.set_yticks(range(len(names)), names, fontsize=7)
        for ticks in (axes.get_xticklabels(), axes.get_yticklabels()):
            for tick, layer in zip(ticks, r.cka.layers, strict=True):
                tick.set_color(plots._kind_color(layer.kind))
        axes.set_title(f"{label}: CKA", fontsize=9)
    figure.colorbar(image, ax=figure.axes, shrink=0.8)
    figure.savefig(out / "fmnist-cka.png", dpi=dpi)


if __name__ == "__main__":
    main()
