"""Figures of the analysis results, in the style of Park & Kim's figures.

Each function returns a matplotlib `Figure` (built without pyplot, so no GUI backend and
no global state); the caller saves it (`figure.savefig(path, dpi=DPI)`). Several models can
be overlaid by passing a mapping of label -> result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from archdsl.analysis.fourier import FeatureMapStatistics, LayerProfile
from archdsl.analysis.hessian import Spectrum
from archdsl.analysis.robustness import RobustnessResult

DPI = 150
COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
MSA_SHADE = "#f2d8a7"
MLP_SHADE = "#d6e4f0"
# Park & Kim shade the attention blocks of either kind (AlterNet `msa`, transformer `attn`)
# and, in ViTs, tell the MLP blocks apart from them.
SHADES = {"msa": MSA_SHADE, "attn": MSA_SHADE, "mlp": MLP_SHADE}
ATTENTION_KINDS = ("msa", "attn")


def _linthresh(values: np.ndarray) -> float:
    """The linear zone of the symlog axis: the power of 10 at or below the smallest |value|,
    but no more than 4 decades below the largest (so a value near 0 does not squash the rest)."""
    magnitudes = np.abs(values[values != 0])
    if not len(magnitudes):
        return 1.0
    smallest = max(float(magnitudes.min()), float(magnitudes.max()) * 1e-4)
    return 10.0 ** math.floor(math.log10(smallest))


def _symlog_edges(values: np.ndarray, linthresh: float, bins: int) -> np.ndarray:
    # Equal-width bins in symlog coordinates t = sign(x) log10(1 + |x| / linthresh).
    def forward(x):
        return np.sign(x) * np.log10(1 + np.abs(x) / linthresh)

    def inverse(t):
        return np.sign(t) * linthresh * (10 ** np.abs(t) - 1)

    low, high = forward(min(values.min(), 0.0)), forward(max(values.max(), 0.0))
    span = high - low or 1.0
    return inverse(np.linspace(low - 0.02 * span, high + 0.02 * span, bins + 1))


def spectrum_figure(spectra: Mapping[str, Spectrum], *, bins: int = 40, title: str | None = None) -> Figure:
    """Histogram of the pooled top-k Hessian eigenvalues, symlog x, NEP and APE in the legend."""
    if not spectra:
        raise ValueError("no spectrum to plot")
    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    axes = figure.add_subplot()
    everything = np.concatenate([np.asarray(s.eigenvalues, dtype=float) for s in spectra.values()])
    linthresh = _linthresh(everything)
    edges = _symlog_edges(everything, linthresh, bins)
    for (label, spectrum), color in zip(spectra.items(), itertools.cycle(COLORS)):
        values = np.asarray(spectrum.eigenvalues, dtype=float)
        ape = "n/a" if spectrum.ape is None else f"{spectrum.ape:.3g}"
        axes.hist(
            values,
            bins=list(edges),
            weights=np.full(len(values), 1 / len(values)),
            histtype="stepfilled",
            alpha=0.35,
            color=color,
            edgecolor=color,
            linewidth=1.5,
            label=f"{label}: NEP {spectrum.nep:.1%}, APE {ape}",
        )
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xscale("symlog", linthresh=linthresh)
    axes.set_xlabel(r"Hessian eigenvalue $\lambda$ (symlog)")
    axes.set_ylabel(r"share of eigenvalues $p(\lambda)$")
    first = next(iter(spectra.values()))
    axes.set_title(
        title
        or f"Hessian max-eigenvalue spectrum (top-{first.k} of {first.batches} batches of {first.batch_size}, "
        f"{first.method}, tol {first.tol:g})",
        fontsize=10,
    )
    axes.legend(loc="best", fontsize=9, framealpha=0.9)
    axes.grid(axis="y", alpha=0.3)
    return figure


def robustness_figure(
    results: Mapping[str, RobustnessResult] | RobustnessResult, *, title: str | None = None
) -> Figure:
    """Accuracy per corruption: bars for the mean over severities, one marker line per severity."""
    if isinstance(results, RobustnessResult):
        results = {"model": results}
    if not results:
        raise ValueError("no robustness result to plot")
    figure = Figure(figsize=(12.5, 4.8), layout="constrained")
    axes = figure.add_subplot()
    corruptions = list(dict.fromkeys(c for r in results.values() for c in r.per_corruption))
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
    axes.set_title(title or "Accuracy on corrupted test sets (bars: mean over severities)", fontsize=11)
    figure.legend(loc="outside right upper", fontsize=8, frameon=False)
    return figure


def _keys(result: RobustnessResult) -> set[tuple[str, int]]:
    return {(c.corruption, c.severity) for c in result.cells}


def _mark_blocks(axes, profile: LayerProfile, *, label_stages: bool) -> None:
    """Shade the MSA and MLP blocks and draw a dotted line where each stage starts."""
    for layer in profile.layers:
        if layer.kind in SHADES:
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
    """Delta log amplitude (left) and feature-map variance (right) against depth, MSA blocks shaded."""
    if isinstance(statistics, FeatureMapStatistics):
        statistics = {"model": statistics}
    if not statistics:
        raise ValueError("no feature-map statistics to plot")
    figure = Figure(figsize=(12, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    first = next(iter(statistics.values()))
    panels = [
        (left, "delta_log_amplitude", r"$\Delta$ log amplitude (at $\pi$ minus at 0)"),
        (right, "variance", "feature-map variance"),
    ]
    for axes, metric, ylabel in panels:
        _mark_blocks(axes, getattr(first, metric), label_stages=True)
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
    shaded = [("MSA block", MSA_SHADE)] if kinds & set(ATTENTION_KINDS) else []
    shaded += [("MLP block", MLP_SHADE)] if "mlp" in kinds else []
    handles = [*left.get_legend_handles_labels()[0], *(_patch(color) for _, color in shaded)]
    labels = [*left.get_legend_handles_labels()[1], *(label for label, _ in shaded)]
    left.legend(handles, labels, fontsize=8, loc="best", frameon=True, framealpha=0.9)
    what = "MSA and MLP blocks" if "mlp" in kinds else "MSA blocks"
    figure.suptitle(title or f"Feature maps block by block (shaded: {what}; dotted: stage starts)", fontsize=11)
    return figure


def _patch(color: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, edgecolor="none")


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
    return figures
