"""All analysis results of one checkpoint, as JSON (`metrics.json`) and as a Markdown report.

Rendering is pure: `AnalysisReport.to_json()`, `render_markdown(report)` and `render_text(report)`
return text, both renderings built from one list of `headline(report)` results;
`archdsl analyze` writes the files and the figures the report links to, and prints the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from archdsl import markdown
from archdsl.analysis.cka import CKAResult
from archdsl.analysis.fourier import FeatureMapStatistics
from archdsl.analysis.hessian import Spectrum
from archdsl.analysis.landscape import Landscape
from archdsl.analysis.lesion import LesionResult
from archdsl.analysis.metrics import ClassificationMetrics, TrainingNLL
from archdsl.analysis.robustness import CorruptionErrors, RobustnessResult
from archdsl.analysis.settings import AnalysisSettings
from archdsl.analysis.trajectory import HessianTrajectory


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
    training_nll: TrainingNLL | None = None
    landscape: Landscape | None = None
    cka: CKAResult | None = None
    lesion: LesionResult | None = None
    hessian_trajectory: HessianTrajectory | None = None  # of a run directory's checkpoints
    figures: dict[str, str] = {}  # what -> PNG file name, relative to the report
    # stage -> the seconds it took, in the order they ran: loading the data (`data`), making or reading the corrupted
    # copies (`corrupted copies`) and each measure (`acc`, `fourier+variance`: one pass for both)
    stage_seconds: dict[str, float] = {}

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def save(self, out: str | Path, *, replacing: Iterable[str] = ()) -> AnalysisReport:
        """Write metrics.json, one PNG per figure and report.md into the folder `out`; the report
        returned names its figures. `replacing`: an earlier analysis's files there
        (`earlier_files`), of which the plots this report does not redraw are removed."""
        from archdsl.analysis.plots import DPI, report_figures
        from archdsl.files import save_figure, write_text

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        figures = {
            name: save_figure(figure, out / f"{name}.png", within=out, dpi=DPI).name
            for name, figure in report_figures(self).items()
        }
        report = self.model_copy(update={"figures": figures})
        write_text(out / METRICS_FILE, report.to_json(), within=out)
        write_text(out / REPORT_FILE, render_markdown(report), within=out)
        for name in set(replacing) - {METRICS_FILE, REPORT_FILE, *figures.values()}:
            (out / name).unlink(missing_ok=True)  # a plot of the replaced analysis that this one did not redraw
        return report

    @classmethod
    def load(cls, path: str | Path, *, option: str | None = None) -> AnalysisReport:
        """The report saved in `path` (a metrics.json, or the folder holding one); a `UserError`
        saying why not (naming the command-line `option` that gave the path, if any)."""
        from pydantic import ValidationError

        from archdsl.errors import UserError

        path = Path(path)
        if path.is_dir():
            path = path / METRICS_FILE
        given = f"{option} {str(path)!r}" if option else str(path)
        if not path.is_file():
            raise UserError(f"{given}: no such file", hint="pass the metrics.json of an earlier `archdsl analyze`")
        try:
            return cls.model_validate_json(path.read_bytes())
        except ValidationError:
            raise UserError(f"{given} is not a metrics.json written by `archdsl analyze`") from None

    @staticmethod
    def earlier_files(out: str | Path, *, force: bool = False) -> list[str]:
        """The files of an earlier analysis in `out`. Never replaced silently (its metrics may have
        taken hours): a `UserError` unless `force`; with it, `save(replacing=...)` removes the plots
        the new analysis does not redraw, so that no stale plot stays."""
        from archdsl.analysis.plots import FIGURE_NAMES
        from archdsl.errors import UserError

        out = Path(out)
        earlier = sorted(name for name in analysis_files(FIGURE_NAMES) if (out / name).exists())
        if earlier and not force:
            raise UserError(
                f"--out {out} already holds an analysis ({', '.join(earlier)})",
                hint="add --force to replace it, or give another --out",
            )
        return earlier


# Everything an analysis writes into its folder, and only that: what `force` replaces.
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"


def analysis_files(figure_names: Iterable[str]) -> tuple[str, ...]:
    """The files an analysis writes into its folder: metrics, the Markdown report and one PNG per figure."""
    return (METRICS_FILE, REPORT_FILE, *(f"{name}.png" for name in figure_names))


def _percent(value: float) -> str:
    return f"{100 * value:.2f} %"


def count(n: int, word: str, plural: str | None = None) -> str:
    """`1 batch`, `2 batches`: a number and its noun, in the right number."""
    many = plural or (word + "es" if word.endswith(("s", "sh", "ch", "x")) else word + "s")
    return f"{n} {word if n == 1 else many}"


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
        where = (
            f"top-{h.k} of {count(h.batches, 'batch')} of {h.batch_size}, {h.method}, tol {h.tol:g}, "
            f"wd {h.weight_decay:g}"
        )
        rows += [Headline("NEP", _percent(h.nep), where), Headline("APE", ape, "the same eigenvalues")]
    if report.feature_maps:
        amplitude = report.feature_maps.delta_log_amplitude
        values = amplitude.values
        rows.append(
            Headline(
                "Delta log amplitude",
                f"{min(values):.2f} .. {max(values):.2f}",
                f"stem and {count(len(values) - 1, 'block')}, {amplitude.images} test images",
            )
        )
    if report.hessian_trajectory:
        points = report.hessian_trajectory.points
        first, last = points[0], points[-1]
        rows.append(
            Headline(
                "NEP over training",
                f"{_percent(first.spectrum.nep)} -> {_percent(last.spectrum.nep)}",
                f"epoch {first.epoch} -> {last.epoch}, {count(len(points), 'checkpoint')}",
            )
        )
        apes = ["n/a" if p.spectrum.ape is None else f"{p.spectrum.ape:.4g}" for p in (first, last)]
        rows.append(Headline("APE over training", f"{apes[0]} -> {apes[1]}", "the same spectra"))
    if report.training_nll:
        t = report.training_nll
        rows.append(Headline("NLL_train", f"{t.nll:.4f}", f"{count(t.images, 'augmented training image')}"))
    if report.landscape:
        land = report.landscape
        values = _landscape_values(land)
        rows.append(
            Headline(
                "loss landscape",
                f"{land.center:.4f} at the weights, {min(values):.4f} .. {max(values):.4f}",
                f"{land.dims}-D, {land.points} points per axis over +-{land.span:g} x filter-normalised "
                f"direction, {count(land.batches, 'batch')} of {land.batch_size}, wd {land.weight_decay:g}",
            )
        )
    if report.cka:
        cka = report.cka
        n = len(cka.layers)
        off = [cka.matrix[i][j] for i in range(n) for j in range(n) if i != j]
        low = f"{min(off):.2f} .. 1" if off else "1"
        where = f"{n} layers, {cka.images} test images in batches of {cka.batch_size}, unbiased HSIC"
        rows.append(Headline("CKA", low, where))
    if report.lesion:
        lesion = report.lesion
        if lesion.blocks:
            worst = min(lesion.blocks, key=lambda b: b.top1)
            value = f"{_percent(worst.top1)} without {worst.name} ({worst.kind})"
        else:
            value = "no residual block"
        rows.append(
            Headline(
                "lesion, worst block",
                value,
                f"intact {_percent(lesion.top1)}; {count(len(lesion.blocks), 'residual branch')} removed one at a time",
            )
        )
    return rows


def _landscape_values(landscape) -> list[float]:
    if landscape.dims == 1:
        return list(landscape.losses)
    return [v for row in landscape.losses for v in row]


def _headline_table(report: AnalysisReport) -> list[str]:
    rows = headline(report)
    if not rows:
        return []
    return [*markdown.table(["metric", "value", "measured on"], [[r.metric, r.value, r.scope] for r in rows]), ""]


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
            f"of {count(h.batches, 'augmented training batch')} of {h.batch_size} (model in eval mode, {h.method}, "
            f"tolerance {h.tol:g}, at most {h.max_iter} iterations, {h.hvps} Hessian-vector products, "
            f"{h.hvps_per_eigenvalue:.1f} per eigenvalue). "
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
        ]
        measured = {(c.corruption, c.severity): c.top1 for c in r.cells}
        severities = list(r.per_severity)
        rows = [
            [
                corruption,
                *(f"{100 * measured[(corruption, s)]:.1f}" if (corruption, s) in measured else "" for s in severities),
                f"{100 * mean:.1f}",
            ]
            for corruption, mean in r.per_corruption.items()
        ]
        rows.append(["**mean**", *(f"{100 * v:.1f}" for v in r.per_severity.values()), f"**{100 * r.mean:.1f}**"])
        lines += [*markdown.table(["corruption", *(f"s{s}" for s in r.per_severity), "mean"], rows), ""]
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
            *markdown.table(
                ["depth", "block", "kind", "Delta log amplitude", "variance"],
                [
                    [amplitude.depth, amplitude.name, amplitude.kind, f"{amplitude.value:.3f}", f"{variance.value:.4g}"]
                    for amplitude, variance in zip(f.delta_log_amplitude.layers, f.variance.layers, strict=True)
                ],
            ),
            "",
        ]
    lines += _new_measures_markdown(report)
    return "\n".join(lines)


def _new_measures_markdown(report: AnalysisReport) -> list[str]:
    lines: list[str] = []
    if report.hessian_trajectory:
        points = report.hessian_trajectory.points
        h = points[0].spectrum
        lines += [
            "## Hessian spectrum over training",
            "",
            f"The top-{h.k} eigenvalues on the same {count(h.batches, 'augmented training batch')} of {h.batch_size} "
            f"for every checkpoint ({h.method}, tolerance {h.tol:g}, wd {h.weight_decay:g}).",
            "",
            *_figure(report, "hessian_trajectory", "Hessian spectrum over training"),
            *markdown.table(
                ["epoch", "checkpoint", "top eigenvalue (mean over batches)", "NEP", "APE"],
                [
                    [
                        p.epoch,
                        p.checkpoint,
                        f"{sum(p.top_eigenvalues) / len(p.top_eigenvalues):.4g}",
                        _percent(p.spectrum.nep),
                        "n/a" if p.spectrum.ape is None else f"{p.spectrum.ape:.4g}",
                    ]
                    for p in points
                ],
            ),
            "",
        ]
    if report.training_nll:
        t = report.training_nll
        lines += [
            "## NLL on augmented training data",
            "",
            f"NLL_train {t.nll:.4f} (top-1 {_percent(t.top1)}) on {count(t.images, 'training image')} augmented as the "
            f"recipe trains ({t.augmentation}; no Mixup: the labels stay hard), model in eval mode, seed {t.seed}.",
            "",
        ]
    if report.landscape:
        land = report.landscape
        lines += [
            "## Loss landscape",
            "",
            f"NLL + {land.weight_decay:g}/2 ||w||^2 on {count(land.batches, 'augmented training batch')} of "
            f"{land.batch_size} at w + a d{' + b e' if land.dims == 2 else ''}, a{' and b' if land.dims == 2 else ''} "
            f"in [-{land.span:g}, {land.span:g}] ({land.points} points per axis); {land.directions}; model in eval "
            f"mode. At the weights: {land.center:.4f}.",
            "",
            *_figure(report, "landscape", "Loss landscape"),
        ]
    if report.cka:
        c = report.cka
        lines += [
            "## Representational similarity (mini-batch CKA)",
            "",
            f"Linear CKA between the outputs of every pair of layers, unbiased HSIC averaged over "
            f"{count(c.batches, 'batch', 'batches')} of {c.batch_size} test images (Nguyen et al., 2021).",
            "",
            *_figure(report, "cka", "CKA between every pair of layers"),
        ]
    if report.lesion:
        lesion = report.lesion
        lines += [
            "## Lesion study",
            "",
            f"Test top-1 with one block's residual branch removed (its output set to zero), on "
            f"{count(lesion.images, 'test image')}; intact: {_percent(lesion.top1)}.",
            "",
            *_figure(report, "lesion", "Accuracy with each residual branch removed"),
            *markdown.table(
                ["depth", "block", "kind", "top-1", "change", "NLL"],
                [
                    [b.depth, b.name, b.kind, f"{100 * b.top1:.2f}", _change(b.top1, lesion.top1), f"{b.nll:.4f}"]
                    for b in lesion.blocks
                ],
            ),
            "",
        ]
    return lines


def _change(top1: float, intact: float) -> str:
    """A lesioned block's top-1 less the intact model's, in points with its sign."""
    return f"{100 * (top1 - intact):+.2f}"
