"""The paper's claims on real images: a small ResNet, its AlterNet and its Swin-like endpoint on Fashion-MNIST.

Trains the three designs from the built-in `resnet-fmnist` (the AlterNet and the Swin-like
model come from it by the build-up rule: `buildup.layout`), with the paper's `deit` recipe
(shortened: `--epochs`, `--warmup-epochs`) and the spec's initialisation (the reference
implementation's: PyTorch's layer defaults), once per seed (`--seeds`, default 0 1 2), on a
class-stratified subset of Fashion-MNIST, on the CPU, then measures each with the one analysis
pipeline (`archdsl.analysis.analyze`): test accuracy and NLL, NLL on augmented training data,
robustness to Fashion-MNIST-C (the CIFAR-C generator on the grey test images), Delta log
amplitude and variance per block, the Hessian spectrum (NEP/APE), CKA between blocks, the
lesion study and a 1-D loss landscape. Writes one `metrics.json` per model and seed
(`<model>/seed<k>/`), `summary.md` (means and spreads over the seeds, and a verdict on each
of the paper's claims: `study_claims.py`) and five figures of the first seed into --out
(default `runs/fashion-mnist-study`).

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


def designs(init: str = "spec"):
    """name -> Arch: the ResNet base, its AlterNet (MSAs end the later stages) and its Swin-like endpoint.

    `init`: the spec's initialisation scheme (`spec`) or another one on purpose (`torch`, `timm`).
    """
    from archdsl.buildup import layout
    from archdsl.lang.spec import load_spec

    base = load_spec("resnet-fmnist")
    if init != "spec":
        base = base.model_copy(update={"init": init})
    return {
        "ResNet": base,
        "AlterNet": layout(base, [0, 1, 1], name="alter-fmnist"),  # c1 CC, c2 CM, c3 CM
        "Swin-like": layout(base, [1, 1, 1], name="swinlike-fmnist"),  # every other block an MSA
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/fashion-mnist-study")
    parser.add_argument("--data-root")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one training run per model and seed")
    parser.add_argument("--recipe", default="deit", help="the training recipe (archdsl train --recipe)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--warmup-epochs", type=int, default=1, help="the recipe's warm-up, shortened with the run")
    parser.add_argument(
        "--init",
        choices=("spec", "torch", "timm"),
        default="spec",
        help="initialisation: the spec's own (`init` line) or the other scheme on purpose",
    )
    parser.add_argument("--subset", type=float, default=0.2, help="fraction of the 60,000 training images")
    parser.add_argument("--batch-size", type=int, help="default: the recipe's (the learning rate scales with it)")
    parser.add_argument("--test", type=int, default=1000, help="test images (a class-stratified 1,000 of the 10,000)")
    parser.add_argument("--severities", type=int, nargs="+", default=[3])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny subsets, one epoch")
    parser.add_argument(
        "--only",
        choices=("ResNet", "AlterNet", "Swin-like"),
        help="train and measure this model only (to run the three in parallel processes; "
        "a last run without --only writes the summary from their metrics.json)",
    )
    return parser.parse_args()  # fmt: skip


def main() -> None:
    import torch

    from archdsl.analysis import AnalysisData, AnalysisSettings, HessianSettings, analyze
    from archdsl.analysis.report import AnalysisReport
    from archdsl.analysis.settings import CKASettings, LandscapeSettings
    from archdsl.data import load_corrupted, load_split
    from archdsl.nn.summary import summarize
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.recipe import TrainConfig
    from archdsl.run.train import train

    args = parse_args()
    if args.quick:
        args.epochs, args.warmup_epochs, args.subset, args.test, args.severities = 1, 0, 0.005, 64, [3]
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    labels = [label for label in designs() if not args.only or label == args.only]
    folders = {(label, seed): out / label.lower() / f"seed{seed}" for label in labels for seed in args.seeds}
    data = None
    if not all((folder / "metrics.json").is_file() for folder in folders.values()):
        dataset = f"fashion-mnist:test={args.test}"
        train_set = load_split(dataset, "train", root=args.data_root)
        test_set = load_split(dataset, "test", root=args.data_root)
        started = time.perf_counter()
        corrupted = load_corrupted(dataset, root=args.data_root, severities=args.severities)
        print(
            f"Fashion-MNIST-C: {len(corrupted)} sets of {args.test} in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        data = AnalysisData(name=dataset, train=train_set, scored=test_set, corrupted=corrupted)
    reports: dict[int, dict[str, AnalysisReport]] = {seed: {} for seed in args.seeds}
    for seed in args.seeds:
        config = TrainConfig(
            recipe=args.recipe,
            epochs=args.epochs,
            warmup_epochs=args.warmup_epochs,
            subset=args.subset,
            batch_size=args.batch_size,
            seed=seed,
            device="cpu",
        )
        settings = AnalysisSettings(
            recipe=config,
            hessian=HessianSettings(batches=3, batch_size=16, k=5, max_iter=30, method="lanczos"),
            seed=seed,
            images=256,
            train_images=1000 if not args.quick else 64,
            landscape=LandscapeSettings(dims=1, points=11, span=1.0, batches=2, batch_size=32),
            cka=CKASettings(images=256 if not args.quick else 32, batch_size=32 if not args.quick else 8),
        )
        measures = ["acc", "robustness", "hessian", "fourier", "variance", "nll-train", "landscape", "cka", "lesion"]
        for label, arch in designs(args.init).items():
            if label not in labels:
                continue
            folder = folders[label, seed]
            if (folder / "metrics.json").is_file():  # a rerun keeps finished models
                reports[seed][label] = AnalysisReport.model_validate_json((folder / "metrics.json").read_text())
                continue
            assert data is not None
            t0 = time.perf_counter()
            final = folder / "run" / "final.safetensors"
            if final.is_file():  # trained before, killed while analysing: measure that model
                model = load_checkpoint(final).model
                train_s = sum(json.loads(line)["seconds"] for line in (folder / "run" / "metrics.jsonl").open())
                print(f"{label} seed {seed}: measuring the model trained before ({final})", flush=True)
            else:
                result = train(arch, data.train, data.scored, config, run_dir=folder / "run", progress=False)
                model, train_s = result.model, time.perf_counter() - t0
                print(
                    f"{label} seed {seed}: trained {args.epochs} epochs in {train_s:.0f} s, top-1 "
                    f"{result.test_acc:.4f}",
                    flush=True,
                )
            t1 = time.perf_counter()
            report = analyze(model, data, measures, settings, device="cpu")
            t2 = time.perf_counter()
            print(f"{label} seed {seed}: analysed in {t2 - t1:.0f} s", flush=True)
            (folder / "metrics.json").write_text(report.to_json())
            reports[seed][label] = report
            summary = summarize(arch)
            timing = {"train_s": train_s, "analyze_s": t2 - t1, "params": summary.params, "flops": summary.flops}
            (folder / "timing.json").write_text(json.dumps(timing, indent=2))
    if args.only:
        return
    write_summary(out, reports, args)
    write_figures(out, reports[args.seeds[0]])
    print(f"wrote {out / 'summary.md'} and figures (seed {args.seeds[0]}) in {out}", flush=True)


def _spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    """`mean +- std` over the seeds."""
    import statistics

    mean = scale * sum(values) / len(values)
    std = scale * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} +- {std:.{digits}f}"


def write_summary(out: Path, reports: dict[int, dict], args) -> None:
    from study_claims import block_changes, verdict_table, verdicts

    seeds = list(reports)
    labels = list(next(iter(reports.values())))
    lines = [
        f"Fashion-MNIST study: recipe {args.recipe}, {args.epochs} epoch(s) ({args.warmup_epochs} of warm-up) on "
        f"{args.subset:g} of the training set, init {args.init}, seeds {seeds}, {args.test} test images, "
        f"Fashion-MNIST-C severities {args.severities}. Mean +- standard deviation over the seeds.",
        "",
        "| model | params | top-1 % | NLL | NLL_train | robustness % | NEP % | APE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        timing = out / label.lower() / f"seed{seeds[0]}" / "timing.json"
        params = f"{json.loads(timing.read_text())['params']:,}" if timing.is_file() else "?"
        rs = [reports[seed][label] for seed in seeds]
        lines.append(
            f"| {label} | {params} | {_spread([r.classification.top1 for r in rs], 100)} "
            f"| {_spread([r.classification.nll for r in rs], digits=3)} "
            f"| {_spread([r.training_nll.nll for r in rs], digits=3)} "
            f"| {_spread([r.robustness.mean for r in rs], 100)} | {_spread([r.hessian.nep for r in rs], 100, 1)} "
            f"| {_spread([r.hessian.ape or 0.0 for r in rs], digits=0)} |"
        )
    lines += [
        "",
        "The paper's claims, each as a statistic that is positive when it holds in a seed. A claim holds when it "
        "does in every seed or the 95 % t-interval of the mean excludes the opposite:",
        "",
        *verdict_table(verdicts([reports[seed] for seed in seeds])),
        "",
        "Across a block, by kind (mean over the blocks of that kind and the seeds): the change of Delta log "
        "amplitude (negative: the block removed high frequencies), the log ratio of the feature-map variance "
        "(negative: the block reduced it), and the drop in test top-1 when the block's branch is removed.",
        "",
        "| model | kind | blocks | change of dLogAmp | log variance ratio | lesion drop (points) |",
        "|---|---|---|---|---|---|",
    ]
    for label in labels:
        per_kind: dict[str, list[tuple[float, float, float]]] = {}
        for seed in seeds:
            for kind, rows in block_changes(reports[seed][label]).items():
                per_kind.setdefault(kind, []).extend(rows)
        for kind, rows in per_kind.items():
            amp, var, drop = (sum(x[i] for x in rows) / len(rows) for i in range(3))
            lines.append(f"| {label} | {kind} | {len(rows) // len(seeds)} | {amp:+.3f} | {var:+.3f} | {drop:.2f} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


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
