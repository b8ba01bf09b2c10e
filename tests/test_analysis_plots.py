"""Figures are drawn and saved (non-empty PNGs) and the Markdown report says what was measured."""

from __future__ import annotations

import pytest
import torch

from archdsl.analysis import plots
from archdsl.analysis.fourier import FeatureMapStatistics, LayerProfile, LayerValue
from archdsl.analysis.hessian import Spectrum, average_positive_eigenvalue, negative_eigenvalue_proportion
from archdsl.analysis.metrics import classification_metrics
from archdsl.analysis.report import AnalysisReport, headline, render_markdown, render_text
from archdsl.analysis.robustness import CorruptionAccuracy, RobustnessResult


def spectrum(values: list[float]) -> Spectrum:
    return Spectrum(
        eigenvalues=tuple(values), nep=negative_eigenvalue_proportion(values), ape=average_positive_eigenvalue(values),
        k=2, batches=len(values) // 2, batch_size=16, tol=1e-3, max_iter=100, weight_decay=0.05, seed=0,
        method="power", hvp="autograd", hvps=40,
    )  # fmt: skip


def robustness() -> RobustnessResult:
    return RobustnessResult.from_cells(
        [
            CorruptionAccuracy(corruption=c, severity=s, top1=0.9 - 0.1 * s - i / 20, count=100)
            for i, c in enumerate(["fog", "snow", "gaussian_noise"])
            for s in (1, 3, 5)
        ]
    )


def feature_maps() -> FeatureMapStatistics:
    layout = [("stem", "stem", 0, "stem"), ("stages.a.0", "a", 0, "conv"), ("stages.a.1", "a", 1, "msa"),
              ("stages.b.0", "b", 0, "conv"), ("stages.b.1", "b", 1, "msa")]  # fmt: skip

    def profile(metric, values):
        layers = tuple(
            LayerValue(name=n, stage=s, index=i, kind=k, depth=d, value=v)
            for d, ((n, s, i, k), v) in enumerate(zip(layout, values, strict=True))
        )
        return LayerProfile(metric=metric, layers=layers, images=8)

    return FeatureMapStatistics(
        delta_log_amplitude=profile("delta_log_amplitude", [-1.0, -0.5, -2.0, -0.8, -2.5]),
        variance=profile("variance", [1.0, 2.0, 1.5, 4.0, 3.0]),
    )


@pytest.mark.parametrize(
    "figure",
    [
        lambda: plots.spectrum_figure({"a": spectrum([-3.0, 40.0, 2.0, 1.5]), "b": spectrum([0.5, 7.0, 300.0, -0.1])}),
        lambda: plots.robustness_figure(robustness()),
        lambda: plots.robustness_figure({"a": robustness(), "b": robustness()}),
        lambda: plots.feature_map_figure({"a": feature_maps(), "b": feature_maps()}),
    ],
    ids=["spectrum", "robustness", "robustness-overlay", "feature-maps"],
)
def test_figures_are_saved_as_non_empty_pngs(figure, tmp_path):
    path = tmp_path / "figure.png"
    figure().savefig(path, dpi=plots.DPI)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 20_000


def test_spectrum_legend_reports_nep_and_ape():
    figure = plots.spectrum_figure({"net": spectrum([-1.0, 3.0, 5.0, 4.0])})
    (label,) = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert label == "net: NEP 25.0%, APE 4"


def test_msa_blocks_are_shaded_in_the_feature_map_figure():
    figure = plots.feature_map_figure(feature_maps())
    for axes in figure.axes:
        shaded = [patch for patch in axes.patches if patch.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
        assert len(shaded) == 2  # stages.a.1 and stages.b.1


@pytest.mark.parametrize("order", [("cnn", "hybrid"), ("hybrid", "cnn")])
def test_models_with_msas_in_different_places_get_their_msas_circled_not_shaded(order):
    hybrid = feature_maps()
    conv_only = {
        metric: getattr(hybrid, metric).model_copy(
            update={
                "layers": tuple(
                    x.model_copy(update={"kind": "conv"}) if x.kind == "msa" else x
                    for x in getattr(hybrid, metric).layers
                )
            }  # fmt: skip
        )
        for metric in ("delta_log_amplitude", "variance")
    }
    models = {"cnn": FeatureMapStatistics(**conv_only), "hybrid": hybrid}
    figure = plots.feature_map_figure({name: models[name] for name in order})
    # Shading the first model's MSA blocks would mark the other's conv blocks as MSAs.
    assert all(not axes.patches for axes in figure.axes)
    assert "circled: MSA blocks" in figure.get_suptitle()
    assert "MSA block" in [text.get_text() for text in figure.axes[0].get_legend().get_texts()]


def test_msa_and_mlp_blocks_are_shaded_apart():
    layout = [("stem", "stem", 0, "stem"), ("stages.s.0", "s", 0, "attn"), ("stages.s.1", "s", 1, "mlp"),
              ("stages.s.2", "s", 2, "attn"), ("stages.s.3", "s", 3, "mlp")]  # fmt: skip
    layers = tuple(
        LayerValue(name=n, stage=s, index=i, kind=k, depth=d, value=float(d)) for d, (n, s, i, k) in enumerate(layout)
    )
    profile = LayerProfile(metric="variance", layers=layers, images=4)
    stats = FeatureMapStatistics(delta_log_amplitude=profile.model_copy(update={"metric": "delta_log_amplitude"}),
                                 variance=profile)  # fmt: skip
    figure = plots.feature_map_figure(stats)
    for axes in figure.axes:
        colours = [patch.get_facecolor()[:3] for patch in axes.patches]
        msa, mlp = colours[0::2], colours[1::2]
        assert len(colours) == 4 and len(set(msa)) == len(set(mlp)) == 1 and msa[0] != mlp[0]
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert "MSA block" in labels and "MLP block" in labels


def test_nothing_to_plot_is_refused():
    with pytest.raises(ValueError):
        plots.spectrum_figure({})


def test_report_lists_the_results_it_has_and_round_trips():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [3.0, 0.0]])
    report = AnalysisReport(
        checkpoint="runs/x.safetensors", arch="net", arch_digest="ab" * 32, dataset="synthetic",
        classification=classification_metrics(logits, torch.tensor([0, 1, 1, 0])),
        robustness=robustness(), figures={"robustness": "robustness.png"},
    )  # fmt: skip
    markdown = render_markdown(report)
    assert "| top-1 accuracy | 75.00 % |" in markdown
    assert "![Accuracy per corruption](robustness.png)" in markdown
    assert "| fog | 80.0 | 60.0 | 40.0 | 60.0 |" in markdown
    assert "NEP" not in markdown and "Feature maps" not in markdown
    assert AnalysisReport.model_validate_json(report.to_json()) == report


def test_the_terminal_summary_and_the_markdown_show_the_same_headline():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [3.0, 0.0]])
    report = AnalysisReport(
        checkpoint="runs/x.safetensors", arch="net", arch_digest="ab" * 32, dataset="synthetic",
        classification=classification_metrics(logits, torch.tensor([0, 1, 1, 0])), robustness=robustness(),
    )  # fmt: skip
    rows = headline(report)
    assert [row.metric for row in rows] == ["top-1 accuracy", "NLL", "ECE", "corruption robustness"]
    markdown, text = render_markdown(report), render_text(report).splitlines()
    assert text[0] == "net on synthetic"
    for row, line in zip(rows, text[1:], strict=True):
        assert f"| {row.metric} | {row.value} | {row.scope} |" in markdown
        assert line.split() == [*row.metric.split(), *row.value.split(), *f"({row.scope})".split()]


def test_the_spectrum_is_drawn_whole_with_readable_ticks_and_plurals():
    values = [-6.2, 5.8, 4.9, -0.3]
    figure = plots.spectrum_figure({"net": spectrum(values)})
    axes = figure.axes[0]
    low, high = axes.get_xlim()
    assert low < min(values) and high > max(values)  # no bar cut off at the frame
    figure.canvas.draw()
    ticks = [t for t in axes.get_xticks() if low <= t <= high]
    assert len(ticks) >= 5 and min(ticks) <= -4 and max(ticks) >= 4  # not only at +-1
    assert "of 2 batches of 16" in axes.get_title()
    one = plots.spectrum_figure({"net": spectrum([3.0, -1.0])})
    assert "of 1 batch of 16" in one.axes[0].get_title()


def cka_result():
    from archdsl.analysis.cka import CKALayer, CKAResult

    layout = [("stem", "stem", 0, "stem"), ("stages.c1.0", "c1", 0, "conv"), ("stages.c2.0", "c2", 0, "attn"),
              ("stages.c2.1", "c2", 1, "mlp")]  # fmt: skip
    layers = tuple(CKALayer(name=n, stage=s, index=i, kind=k) for n, s, i, k in layout)
    matrix = tuple(tuple(1.0 if i == j else 0.5 for j in range(4)) for i in range(4))
    return CKAResult(layers=layers, matrix=matrix, images=64, batch_size=32, batches=2, unbiased=True)


def lesion_result():
    from archdsl.analysis.lesion import LesionedBlock, LesionResult

    blocks = tuple(
        LesionedBlock(name=f"stages.{s}.{i}", stage=s, index=i, kind=k, depth=d, top1=t, nll=1.0)
        for d, (s, i, k, t) in enumerate([("c1", 0, "conv", 0.5), ("c2", 0, "conv", 0.2), ("c2", 1, "msa", 0.6)], 1)
    )
    return LesionResult(top1=0.7, nll=0.9, blocks=blocks, images=100)


def test_cka_heatmap_names_the_blocks_and_marks_their_kinds():
    figure = plots.cka_figure(cka_result())
    axes = figure.axes[0]
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels == ["stem stem", "c1.0 conv", "c2.0 attn", "c2.1 mlp"]
    colors = {t.get_text(): t.get_color() for t in axes.get_yticklabels()}
    assert colors["c2.0 attn"] == plots.KIND_COLORS["attn"] != colors["c2.1 mlp"] == plots.KIND_COLORS["mlp"]


def test_lesion_bars_follow_depth_coloured_by_kind():
    figure = plots.lesion_figure(lesion_result())
    bars = figure.axes[0].patches
    assert [round(b.get_height()) for b in bars] == [50, 20, 60]
    assert bars[2].get_facecolor() != bars[1].get_facecolor()


@pytest.mark.parametrize("dims", [1, 2])
def test_landscape_figures_are_saved(dims, tmp_path):
    from archdsl.analysis.landscape import Landscape

    coordinates = (-1.0, 0.0, 1.0)
    losses = (3.0, 1.0, 2.0) if dims == 1 else tuple(tuple(1 + a * a + b * b for b in coordinates) for a in coordinates)
    land = Landscape(dims=dims, coordinates=coordinates, losses=losses, center=1.0, span=1.0, points=3, batches=1,
                     batch_size=8, weight_decay=0.0, seed=0)  # fmt: skip
    path = tmp_path / "landscape.png"
    plots.landscape_figure(land).savefig(path, dpi=plots.DPI)
    assert path.stat().st_size > 10_000


def test_robustness_figure_is_as_wide_as_its_corruptions_need():
    def result(corruptions: list[str]) -> RobustnessResult:
        cells = [CorruptionAccuracy(corruption=c, severity=1, top1=0.5, count=10) for c in corruptions]
        return RobustnessResult.from_cells(cells)

    names = [f"corruption_{i}" for i in range(15)]
    widths = [plots.robustness_figure(result(names[:n])).get_size_inches()[0] for n in (2, 8, 15)]
    assert widths[0] < widths[1] < widths[2]
    assert widths[0] <= 6  # two corruptions are not drawn a page wide
