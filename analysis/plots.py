"""Figures of the analysis results, in the style of Park & Kim's figures.

Each function returns a matplotlib `Figure` (built without pyplot, so no GUI backend and
no global state); the caller saves it (`figure.savefig(path, dpi=DPI)`). Several models can
be overlaid by passing a mapping of label -> result.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from archdsl.analysis.fourier import FeatureMapStatistics, LayerProfile
from archdsl.analysis.hessian import Spectrum
from archdsl.analysis.robustness import RobustnessResult
from archdsl.ir import ATTENTION_KINDS

DPI = 150
COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
MSA_SHADE = "#f2d8a7"
MLP_SHADE = "#d6e4f0"
# Park & Kim shade the attention blocks of either kind (AlterNet `msa`, transformer `attn`)
# and, in ViTs, tell the MLP blocks apart from them.
SHADES = {**dict.fromkeys(ATTENTION_KINDS, MSA_SHADE), "mlp": MLP_SHADE}


def _plural(n: int, word: str, plural: str) -> str:
    return f"{n} {word if n == 1 else plural}"


def _batches(measured: Any) -> str:
    """`3 batches of 16`: what a Hessian spectrum or a loss landscape was measured on."""
    return f"{_plural(measured.batches, 'batch', 'batches')} of {measured.batch_size}"


def _spectrum_settings(spectrum: Spectrum, *, tol: bool = True) -> str:
    """`top-5 of 3 batches of 16, lanczos, tol 0.001, wd 0.05`: how a spectrum was measured."""
    tolerance = f", tol {spectrum.tol:g}" if tol else ""
    return f"top-{spectrum.k} of {_batches(spectrum)}, {spectrum.method}{tolerance}, wd {spectrum.weight_decay:g}"


def _histogram_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bins over [min(values, 0), max(values, 0)] with a margin: no bar is cut off at the frame."""
    low, high = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    span = high - low or max(abs(high), 1.0)
    return np.linspace(low - 0.03 * span, high + 0.03 * span, bins + 1)


def spectrum_figure(spectra: Mapping[str, Spectrum], *, bins: int = 40, title: str | None = None) -> Figure:
    """The Hessian max-eigenvalue spectrum as the paper draws it: the density of the pooled
    top-k eigenvalues on a linear axis (negative ones left of the line at 0), each value also
    marked as a tick under the histogram; NEP and APE in the legend."""
    from matplotlib.ticker import MaxNLocator

    if not spectra:
        raise ValueError("no spectrum to plot")
    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    axes = figure.add_subplot()
    everything = np.concatenate([np.asarray(s.eigenvalues, dtype=float) for s in spectra.values()])
    edges = _histogram_edges(everything, bins)
    for (label, spectrum), color in zip(spectra.items(), itertools.cycle(COLORS)):
        values = np.asarray(spectrum.eigenvalues, dtype=float)
        ape = "n/a" if spectrum.ape is None else f"{spectrum.ape:.3g}"
        axes.hist(
            values,
            bins=list(edges),
            density=True,
            histtype="stepfilled",
            alpha=0.35,
            color=color,
            edgecolor=color,
            linewidth=1.5,
            label=f"{label}: NEP {spectrum.nep:.1%}, APE {ape}",
        )
        # A rug: every eigenvalue, so that a spectrum of a few values stays readable.
        axes.plot(values, np.zeros_like(values), "|", color=color, markersize=12, markeredgewidth=1.2, clip_on=False)
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xlim(edges[0], edges[-1])
    axes.set_ylim(bottom=0)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=9))
    axes.set_xlabel(r"Hessian eigenvalue $\lambda$")
    axes.set_ylabel(r"density $p(\lambda)$")
    first = next(iter(spectra.values()))
    axes.set_title(title or f"Hessian max-eigenvalue spectrum ({_spectrum_settings(first)})", fontsize=10)
    axes.legend(loc="best", fontsize=9, framealpha=0.9)
    axes.grid(axis="y", alpha=0.3)
    return figure


def hessian_trajectory_figure(trajectory, *, title: str | None = None) -> Figure:
    """The spectrum over training (Fig. 5 / C.5): the top eigenvalue (mean and range over the
    batches) on the left, NEP and APE on the right, against the epoch of each checkpoint."""
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    epochs = [point.epoch for point in trajectory.points]
    tops = [np.asarray(point.top_eigenvalues) for point in trajectory.points]
    left.plot(epochs, [t.mean() for t in tops], marker="o", color=COLORS[0], label="mean over batches")
    left.fill_between(epochs, [t.min() for t in tops], [t.max() for t in tops], color=COLORS[0], alpha=0.2,
                      label="range over batches")  # fmt: skip
    left.axhline(0, color="black", linewidth=0.8)
    left.set_xlabel("epoch")
    left.set_ylabel(r"largest-magnitude eigenvalue $\lambda_1$")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.plot(epochs, [100 * p.spectrum.nep for p in trajectory.points], marker="o", color=COLORS[1], label="NEP")
    right.set_xlabel("epoch")
    right.set_ylabel("NEP (%)", color=COLORS[1])
    twin = right.twinx()
    twin.plot(epochs, [p.spectrum.ape if p.spectrum.ape is not None else np.nan for p in trajectory.points],
              marker="s", color=COLORS[2], label="APE")  # fmt: skip
    twin.set_ylabel("APE", color=COLORS[2])
    right.grid(alpha=0.3)
    handles = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    twin.legend(handles, ["NEP", "APE"], fontsize=8, loc="best", framealpha=0.9)
    from matplotlib.ticker import MaxNLocator

    for axes in (left, right):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    first = trajectory.points[0].spectrum
    checkpoints = _plural(len(epochs), "checkpoint", "checkpoints")
    settings = _spectrum_settings(first, tol=False)
    figure.suptitle(title or f"Hessian spectrum over training ({checkpoints}; {settings})", fontsize=11)
    return figure


def robustness_figure(
    results: Mapping[str, RobustnessResult] | RobustnessResult, *, title: str | None = None
) -> Figure:
    """Accuracy per corruption: bars for the mean over severities, one marker line per severity."""
    if isinstance(results, RobustnessResult):
        results = {"model": results}
    if not results:
        raise ValueError("no robustness result to plot")
    corruptions = list(dict.fromkeys(c for r in results.values() for c in r.per_corruption))
    # As wide as the corruptions need (about half an inch each, more with several models side
    # by side), plus the y label and the legend outside: 2 corruptions are not drawn 12 inches wide.
    per_corruption = 0.55 * (1 + 0.3 * (len(results) - 1))
    figure = Figure(figsize=(min(14.0, max(5.5, 3.3 + per_corruption * len(corruptions))), 4.8), layout="constrained")
    axes = figure.add_subplot()
    positions = np.arange(len(corruptions))
    width = 0.8 / len(results)
    single = len(results) == 1
    for offset, ((label, result), color) in enumerate(zip(results.items(), itertools.cycle(COLORS))):
        x = positions - 0.4 + width * (offset + 0.5)
        means = [100 * result.per_corruption.get(c, np.nan) for c in corruptions]
        axes.bar(
            x, means, width=width * 0.92, color=color, alpha=0.45, label=f"{label}: mean {100 * result.mean:.1f} %"
        )
        axes.axhline(100 * result.mean, color=color, linestyle="--", linewidth=1)
        if single:  # severity lines only where they stay readable
            measured = _keys(result)
            for severity in sorted(result.per_severity):
                row = [100 * result.accuracy(c, severity) if (c, severity) in measured else np.nan for c in corruptions]
                grey = 0.75 - 0.15 * (severity - 1)  # darker for harsher corruption
                axes.plot(x, row, marker="o", markersize=4, linewidth=1, color=str(grey), label=f"severity {severity}")
    axes.set_xticks(positions, [c.replace("_", " ") for c in corruptions], rotation=40, ha="right")
    axes.set_ylabel("top-1 accuracy (%)")
    axes.set_ylim(0, 100)
    axes.set_xlim(-0.6, len(corruptions) - 0.4)
    axes.grid(axis="y", alpha=0.3)
    wrap = "\n" if len(corruptions) < 8 else " "  # a narrow figure takes the title on two lines
    axes.set_title(title or f"Accuracy on corrupted test sets{wrap}(bars: mean over severities)", fontsize=11)
    figure.legend(loc="outside right upper", fontsize=8, frameon=False)
    return figure


def _keys(result: RobustnessResult) -> set[tuple[str, int]]:
    return {(c.corruption, c.severity) for c in result.cells}


def _mark_blocks(axes, profile: LayerProfile, *, label_stages: bool, shade: bool = True) -> None:
    """Shade the MSA and MLP blocks (unless `shade` is false) and draw a dotted line where each stage starts."""
    for layer in profile.layers:
        if shade and layer.kind in SHADES:
            axes.axvspan(layer.depth - 0.5, layer.depth + 0.5, color=SHADES[layer.kind], zorder=0, linewidth=0)
    starts = [layer for layer in profile.layers if layer.index == 0 and layer.stage != "stem"]
    for layer in starts:
        axes.axvline(layer.depth - 0.5, color="grey", linestyle=":", linewidth=1, zorder=1)
        if label_stages:
            axes.annotate(
                layer.stage,
                xy=(layer.depth - 0.4, 1.0),
                xycoords=("data", "axes fraction"),
                va="bottom",
                fontsize=8,
                color="dimgrey",
            )


def feature_map_figure(
    statistics: Mapping[str, FeatureMapStatistics] | FeatureMapStatistics, *, title: str | None = None
) -> Figure:
    """Delta log amplitude (left) and feature-map variance (right) against depth, MSA blocks shaded
    (circled instead where the models overlaid have their blocks of each kind in different places)."""
    if isinstance(statistics, FeatureMapStatistics):
        statistics = {"model": statistics}
    if not statistics:
        raise ValueError("no feature-map statistics to plot")
    layouts = {tuple((x.depth, x.kind) for x in stats.delta_log_amplitude.layers) for stats in statistics.values()}
    shade = len(layouts) == 1
    figure = Figure(figsize=(12, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    first = next(iter(statistics.values()))
    panels = [
        (left, "delta_log_amplitude", r"$\Delta$ log amplitude (at $\pi$ minus at 0)"),
        (right, "variance", "feature-map variance"),
    ]
    for axes, metric, ylabel in panels:
        _mark_blocks(axes, getattr(first, metric), label_stages=True, shade=shade)
        for (label, stats), color in zip(statistics.items(), itertools.cycle(COLORS)):
            profile: LayerProfile = getattr(stats, metric)
            depth = [layer.depth for layer in profile.layers]
            axes.plot(depth, profile.values, marker="o", markersize=4, color=color, label=label)
            msa = [(layer.depth, layer.value) for layer in profile.layers if layer.kind in ATTENTION_KINDS]
            if msa:
                axes.scatter(
                    *zip(*msa, strict=True), s=40, facecolors="none", edgecolors="black", zorder=3, linewidths=1
                )
        values = np.asarray(getattr(first, metric).values)
        if metric == "variance" and values.min() > 0 and values.max() / values.min() > 100:
            axes.set_yscale("log")
        axes.set_xlabel("depth (0 = stem output, then one point per block)")
        axes.set_ylabel(ylabel)
        axes.grid(alpha=0.3)
        axes.set_xlim(-0.6, len(getattr(first, metric).layers) - 0.4)
    kinds = {layer.kind for stats in statistics.values() for layer in stats.delta_log_amplitude.layers}
    handles, labels = left.get_legend_handles_labels()
    if shade:
        shaded = [("MSA block", MSA_SHADE)] if kinds & ATTENTION_KINDS else []
        shaded += [("MLP block", MLP_SHADE)] if "mlp" in kinds else []
        handles += [_patch(color) for _, color in shaded]
        labels += [label for label, _ in shaded]
        what = "shaded: MSA and MLP blocks" if "mlp" in kinds else "shaded: MSA blocks"
    else:
        handles.append(_ring())
        labels.append("MSA block")
        what = "circled: MSA blocks"
    left.legend(handles, labels, fontsize=8, loc="best", frameon=True, framealpha=0.9)
    figure.suptitle(title or f"Feature maps block by block ({what}; dotted: stage starts)", fontsize=11)
    return figure


def _patch(color: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, edgecolor="none")


def _ring():
    from matplotlib.lines import Line2D

    return Line2D([], [], marker="o", markersize=7, markerfacecolor="none", markeredgecolor="black", linestyle="")


KIND_COLORS = {"stem": "dimgrey", "conv": "tab:blue", "msa": "tab:orange", "attn": "tab:orange", "mlp": "tab:green"}


def _kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, "tab:purple")


def _short_name(name: str) -> str:
    """`stages.c2.1` -> `c2.1` (the spec's stage name and the block's index)."""
    return name.removeprefix("stages.")


def cka_figure(result, *, title: str | None = None) -> Figure:
    """CKA between every pair of layers as a heatmap, ticks named by the spec's blocks and
    coloured by kind (conv, MSA, MLP), stage boundaries drawn."""
    from matplotlib.patches import Patch

    n = len(result.layers)
    size = min(4 + 0.28 * n, 14)
    figure = Figure(figsize=(size + 1.6, size), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(np.asarray(result.matrix), vmin=0, vmax=1, cmap="magma", origin="lower")
    labels = [f"{_short_name(layer.name)} {layer.kind}" for layer in result.layers]
    axes.set_xticks(range(n), labels, rotation=90, fontsize=7)
    axes.set_yticks(range(n), labels, fontsize=7)
    for ticks in (axes.get_xticklabels(), axes.get_yticklabels()):
        for tick, layer in zip(ticks, result.layers, strict=True):
            tick.set_color(_kind_color(layer.kind))
    starts = [i for i, layer in enumerate(result.layers) if layer.index == 0 and layer.stage != "stem" and i > 0]
    for i in starts:
        axes.axvline(i - 0.5, color="white", linewidth=0.8)
        axes.axhline(i - 0.5, color="white", linewidth=0.8)
    figure.colorbar(image, ax=axes, shrink=0.8, label="linear CKA")
    kinds = list(dict.fromkeys(layer.kind for layer in result.layers))
    figure.legend(
        [Patch(color=_kind_color(k)) for k in kinds], kinds, fontsize=8, loc="outside lower center", ncols=len(kinds)
    )
    axes.set_title(
        title or f"Mini-batch CKA ({result.images} test images, batches of {result.batch_size}; lines: stage starts)",
        fontsize=10,
    )
    return figure


def lesion_figure(result, *, title: str | None = None) -> Figure:
    """Accuracy with each block's residual branch removed, along depth (Fig. 11b): bars coloured
    by block kind, the intact model's accuracy dashed, stage starts dotted."""
    from matplotlib.patches import Patch

    if not result.blocks:
        raise ValueError("no block was lesioned")
    figure = Figure(figsize=(max(6.0, 0.35 * len(result.blocks) + 3), 4.2), layout="constrained")
    axes = figure.add_subplot()
    depth = [b.depth for b in result.blocks]
    axes.bar(depth, [100 * b.top1 for b in result.blocks], color=[_kind_color(b.kind) for b in result.blocks],
             width=0.8)  # fmt: skip
    axes.axhline(100 * result.top1, color="black", linestyle="--", linewidth=1)
    for block in result.blocks:
        if block.index == 0:
            axes.axvline(block.depth - 0.5, color="grey", linestyle=":", linewidth=1)
            axes.annotate(block.stage, xy=(block.depth - 0.4, 1.0), xycoords=("data", "axes fraction"),
                          va="bottom", fontsize=8, color="dimgrey")  # fmt: skip
    axes.set_xticks(depth, [_short_name(b.name) for b in result.blocks], rotation=90, fontsize=7)
    axes.set_xlim(min(depth) - 0.6, max(depth) + 0.6)
    axes.set_ylim(0, 100)
    axes.set_xlabel("removed block (depth order)")
    axes.set_ylabel("test top-1 (%)")
    axes.grid(axis="y", alpha=0.3)
    kinds = list(dict.fromkeys(b.kind for b in result.blocks))
    from matplotlib.lines import Line2D

    handles: list[Any] = [Patch(color=_kind_color(k)) for k in kinds]

    handles.append(Line2D([], [], color="black", linestyle="--"))
    figure.legend(handles, [*kinds, f"intact {100 * result.top1:.1f} %"], fontsize=8, loc="outside right upper")
    axes.set_title(title or "Lesion study: accuracy with one residual branch removed", fontsize=10, pad=14)
    return figure


def landscape_figure(landscape, *, title: str | None = None) -> Figure:
    """The loss landscape: a curve (1-D) or filled contours with the weights marked (2-D)."""
    coordinates = np.asarray(landscape.coordinates)
    losses = np.asarray(landscape.losses, dtype=float)
    figure = Figure(figsize=(6.4, 4.8) if landscape.dims == 2 else (6.4, 4.2), layout="constrained")
    axes = figure.add_subplot()
    if landscape.dims == 1:
        axes.plot(coordinates, losses, marker="o", markersize=3, color=COLORS[0])
        axes.plot([0], [landscape.center], marker="*", markersize=12, color=COLORS[1], label="the weights")
        axes.set_xlabel(r"$\alpha$ (along a filter-normalised direction $d$)")
        axes.set_ylabel("NLL + L2 term")
        axes.legend(fontsize=8)
        axes.grid(alpha=0.3)
    else:
        low, high = float(losses.min()), float(losses.max())
        levels = np.geomspace(max(low, 1e-8), high, 24) if low > 0 and high / max(low, 1e-12) > 20 else 24
        filled = axes.contourf(coordinates, coordinates, losses.T, levels=levels, cmap="viridis")
        axes.contour(coordinates, coordinates, losses.T, levels=levels, colors="white", linewidths=0.3)
        axes.plot([0], [0], marker="*", markersize=12, color=COLORS[1])
        figure.colorbar(filled, ax=axes, label="NLL + L2 term")
        axes.set_xlabel(r"$\alpha$ (direction $d$)")
        axes.set_ylabel(r"$\beta$ (direction $e$)")
        axes.set_aspect("equal")
    measured = f"{_batches(landscape)}, wd {landscape.weight_decay:g}; at the weights {landscape.center:.3f}"
    axes.set_title(title or f"Loss landscape ({measured})", fontsize=10)
    return figure


# Every figure `report_figures` may draw (`archdsl analyze --force` removes those it did not redraw).
FIGURE_NAMES = ("robustness", "hessian", "feature_maps", "landscape", "cka", "lesion", "hessian_trajectory")


def report_figures(report) -> dict[str, Figure]:
    """The figures of an `AnalysisReport`, by the name `archdsl analyze` saves them under (`<name>.png`)."""
    label = report.arch
    figures: dict[str, Figure] = {}
    if report.robustness is not None:
        figures["robustness"] = robustness_figure({label: report.robustness})
    if report.hessian is not None:
        figures["hessian"] = spectrum_figure({label: report.hessian})
    if report.feature_maps is not None:
        figures["feature_maps"] = feature_map_figure({label: report.feature_maps})
    if report.landscape is not None:
        figures["landscape"] = landscape_figure(report.landscape)
    if report.cka is not None:
        figures["cka"] = cka_figure(report.cka)
    if report.lesion is not None and report.lesion.blocks:
        figures["lesion"] = lesion_figure(report.lesion)
    if report.hessian_trajectory is not None:
        figures["hessian_trajectory"] = hessian_trajectory_figure(report.hessian_trajectory)
    assert set(figures) <= set(FIGURE_NAMES), "a new figure belongs in FIGURE_NAMES"
    return figures
