"""All analysis results of one checkpoint, as JSON (`metrics.json`) and as a Markdown report.

Rendering is pure: `AnalysisReport.to_json()`, `render_markdown(report)` and `render_text(report)`
return text, both renderings built from one list of `headline(report)` results;
`archdsl analyze` writes the files and the figures the report links to, and prints the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from archdsl.analysis.fourier import FeatureMapStatistics
from archdsl.analysis.hessian import Spectrum
from archdsl.analysis.metrics import ClassificationMetrics
from archdsl.analysis.robustness import CorruptionErrors, RobustnessResult
from archdsl.analysis.settings import AnalysisSettings


class AnalysisReport(BaseModel):
    """Every result of one `archdsl analyze` run, with the checkpoint and dataset it was measured on (written as
    metrics.json)."""

    model_config = ConfigDict(frozen=True)

    checkpoint: str | None = None  # the file measured, when it was one
    arch: str  # the design's name
    arch_digest: str  # its canonical hash (`Arch.digest()`)
    dataset: str
    measures: tuple[str, ...] = ()  # what was asked for (`analysis.pipeline.MEASURES`)
    settings: AnalysisSettings | None = None  # every option the results were measured with
    classification: ClassificationMetrics | None = None
    robustness: RobustnessResult | None = None
    corruption_errors: CorruptionErrors | None = None  # mCE against a baseline run, when one was given
    hessian: Spectrum | None = None
    feature_maps: FeatureMapStatistics | None = None
    figures: dict[str, str] = {}  # what -> PNG file name, relative to the report

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def _percent(value: float) -> str:
    return f"{100 * value:.2f} %"


@dataclass(frozen=True)
class Headline:
    """One headline result: what was measured, its value as shown, and on what."""

    metric: str
    value: str
    scope: str


def headline(report: AnalysisReport) -> list[Headline]:
    """The headline results of a report, in the order both renderings show them."""
    rows: list[Headline] = []
    if report.classification:
        c = report.classification
        rows += [
            Headline("top-1 accuracy", _percent(c.top1), f"{c.count} test images"),
            Headline("NLL", f"{c.nll:.4f}", "nats per image"),
            Headline("ECE", _percent(c.ece), f"{c.n_bins} equal-width bins"),
        ]
    if report.robustness:
        r = report.robustness
        scope = "15 corruptions x 5 severities" if r.complete else f"{len(r.cells)} corrupted sets, not the full 15 x 5"
        rows.append(Headline("corruption robustness", _percent(r.mean), f"mean top-1 over {scope}"))
    if report.corruption_errors:
        rows.append(
            Headline("mCE", _percent(report.corruption_errors.mce), "corruption error relative to the baseline run")
        )
    if report.hessian:
        h = report.hessian
        ape = "n/a" if h.ape is None else f"{h.ape:.4g}"
        where = f"top-{h.k} of {h.batches} batches of {h.batch_size}, {h.method}, tol {h.tol:g}, wd {h.weight_decay:g}"
        rows += [Headline("NEP", _percent(h.nep), where), Headline("APE", ape, "the same eigenvalues")]
    if report.feature_maps:
        amplitude = report.feature_maps.delta_log_amplitude
        values = amplitude.values
        rows.append(
            Headline(
                "Delta log amplitude",
                f"{min(values):.2f} .. {max(values):.2f}",
                f"stem and {len(values) - 1} blocks, {amplitude.images} test images",
            )
        )
    return rows


def _headline_table(report: AnalysisReport) -> list[str]:
    rows = headline(report)
    if not rows:
        return []
    return [
        "| metric | value | measured on |",
        "|---|---|---|",
        *(f"| {row.metric} | {row.value} | {row.scope} |" for row in rows),
        "",
    ]


def render_text(report: AnalysisReport) -> str:
    """The headline results as aligned plain-text lines (what `archdsl analyze` prints)."""
    rows = headline(report)
    width = max((len(row.metric) for row in rows), default=0)
    lines = [f"{report.arch} on {report.dataset}"]
    lines += [f"  {row.metric:<{width}}  {row.value}  ({row.scope})" for row in rows]
    return "\n".join(lines)


def _figure(report: AnalysisReport, key: str, caption: str) -> list[str]:
    return [f"![{caption}]({report.figures[key]})", ""] if key in report.figures else []


def render_markdown(report: AnalysisReport) -> str:
    """report.md: the headline table, then a section per analysis with its figure and table."""
    lines = [
        f"# Analysis of `{report.arch}`",
        "",
        f"{f'Checkpoint `{report.checkpoint}`' if report.checkpoint else 'Model'} (design {report.arch_digest[:12]}), "
        f"dataset `{report.dataset}`.",
        "",
        *_headline_table(report),
    ]
    if report.hessian:
        h = report.hessian
        lines += [
            "## Hessian max-eigenvalue spectrum",
            "",
            f"The {h.k} largest-magnitude eigenvalues of the Hessian of NLL + {h.weight_decay:g}/2 ||w||^2 on each "
            f"of {h.batches} augmented training batches of {h.batch_size} (model in eval mode, {h.method}, "
            f"tolerance {h.tol:g}, at most {h.max_iter} iterations, {h.hvps} Hessian-vector products). "
            "NEP is the share of negative eigenvalues, APE the mean of the positive ones; lower is flatter.",
            "",
            *_figure(report, "hessian", "Hessian eigenvalue spectrum"),
        ]
    if report.robustness:
        r = report.robustness
        lines += [
            "## Corruption robustness",
            "",
            *_figure(report, "robustness", "Accuracy per corruption"),
            "| corruption | " + " | ".join(f"s{s}" for s in r.per_severity) + " | mean |",
            "|---|" + "---|" * (len(r.per_severity) + 1),
        ]
        measured = {(c.corruption, c.severity): c.top1 for c in r.cells}
        for corruption, mean in r.per_corruption.items():
            cells = [
                f"{100 * measured[(corruption, s)]:.1f}" if (corruption, s) in measured else "" for s in r.per_severity
            ]
            lines.append(f"| {corruption} | " + " | ".join(cells) + f" | {100 * mean:.1f} |")
        severity_means = " | ".join(f"{100 * v:.1f}" for v in r.per_severity.values())
        lines += [f"| **mean** | {severity_means} | **{100 * r.mean:.1f}** |", ""]
    if report.feature_maps:
        f = report.feature_maps
        lines += [
            "## Feature maps block by block",
            "",
            "Delta log amplitude: log amplitude of the feature maps' 2-D FFT at frequency (pi, pi) minus at 0 "
            "(more negative: fewer high frequencies). Variance: spatial variance of the feature maps. "
            f"Both averaged over {f.variance.images} test images and all channels.",
            "",
            *_figure(report, "feature_maps", "Delta log amplitude and variance per block"),
            "| depth | block | kind | Delta log amplitude | variance |",
            "|---|---|---|---|---|",
        ]
        for amplitude, variance in zip(f.delta_log_amplitude.layers, f.variance.layers, strict=True):
            lines.append(
                f"| {amplitude.depth} | {amplitude.name} | {amplitude.kind} "
                f"| {amplitude.value:.3f} | {variance.value:.4g} |"
            )
        lines.append("")
    return "\n".join(lines)
