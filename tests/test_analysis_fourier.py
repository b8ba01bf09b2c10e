"""Delta log amplitude and feature-map variance on signals whose spectra are known."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from archdsl.analysis.fourier import (
    LOG_EPS,
    delta_log_amplitude_of,
    feature_layers,
    feature_map_statistics,
    spatial_variance_of,
)


def checkerboard(size: int) -> torch.Tensor:
    i, j = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    return ((-1.0) ** (i + j)).float()


def test_delta_of_pure_signals_is_known_exactly():
    # A checkerboard has all its energy at (pi, pi), a constant all of it at 0.
    board = checkerboard(8).expand(2, 3, 8, 8)
    assert delta_log_amplitude_of(board) == pytest.approx(math.log(64 + LOG_EPS) - math.log(LOG_EPS), rel=1e-6)
    flat = torch.full((2, 3, 8, 8), 0.5)
    assert delta_log_amplitude_of(flat) == pytest.approx(math.log(LOG_EPS) - math.log(32 + LOG_EPS), rel=1e-6)


def test_variance_of_known_maps():
    assert spatial_variance_of(torch.full((2, 4, 5, 5), 3.0)) == 0.0
    assert spatial_variance_of(2.0 * checkerboard(4).expand(3, 2, 4, 4)) == pytest.approx(4.0)
    # Averaged over channels: one channel of variance 9, one of 0.
    maps = torch.stack([3.0 * checkerboard(4), torch.zeros(4, 4)]).unsqueeze(0)
    assert spatial_variance_of(maps) == pytest.approx(4.5)


class Filter(nn.Module):
    """A fixed depthwise 3x3 filter standing in for a block."""

    def __init__(self, kernel: list[list[float]], kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.register_buffer("kernel", torch.tensor(kernel).expand(3, 1, 3, 3).clone())
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * F.conv2d(x, self.kernel, padding=1, groups=3)


BLUR = [[1 / 9] * 3] * 3
SHARPEN = [[0.0, -1.0, 0.0], [-1.0, 5.0, -1.0], [0.0, -1.0, 0.0]]


class FilterNet(nn.Module):
    """ArchNet's layout (stem, stages of Sequentials of blocks with `.kind`) with known filters."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Identity()
        self.stages = nn.ModuleDict(
            {
                "s1": nn.Sequential(Filter(BLUR, "msa"), Filter(BLUR, "msa")),
                "s2": nn.Sequential(Filter(SHARPEN, "conv")),
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages.values():
            x = stage(x)
        return x.mean(dim=(2, 3))


def test_blur_lowers_and_sharpening_raises_high_frequencies_block_by_block():
    images = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    stats = feature_map_statistics(FilterNet(), images, batch_size=4)
    deltas = stats.delta_log_amplitude.values
    assert [layer.name for layer in stats.delta_log_amplitude.layers] == [
        "stem",
        "stages.s1.0",
        "stages.s1.1",
        "stages.s2.0",
    ]
    assert [layer.kind for layer in stats.variance.layers] == ["stem", "msa", "msa", "conv"]
    assert [layer.depth for layer in stats.variance.layers] == [0, 1, 2, 3]
    assert deltas[1] < deltas[0] - 1 and deltas[2] < deltas[1]  # blurs are low-pass
    assert deltas[3] > deltas[2] + 1  # sharpening is high-pass
    variances = stats.variance.values
    assert variances[0] == pytest.approx(spatial_variance_of(images), rel=1e-9)
    assert variances[1] < variances[0] and variances[3] > variances[2]


def test_statistics_do_not_depend_on_the_batch_size():
    images = torch.randn(7, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    one = feature_map_statistics(FilterNet(), images, batch_size=7)
    many = feature_map_statistics(FilterNet(), images, batch_size=2)
    assert one.delta_log_amplitude.values == pytest.approx(many.delta_log_amplitude.values, rel=1e-9)
    assert one.variance.values == pytest.approx(many.variance.values, rel=1e-9)
    assert one.delta_log_amplitude.values[0] == pytest.approx(delta_log_amplitude_of(images), rel=1e-9)


def test_layers_need_an_archnet_layout():
    assert [layer.name for layer in feature_layers(FilterNet())][:2] == ["stem", "stages.s1.0"]
    with pytest.raises(ValueError, match="stages"):
        feature_layers(nn.Linear(2, 2))


def test_token_blocks_are_measured_as_maps_without_the_class_token():
    from archdsl.lang.spec import parse_spec
    from archdsl.nn.build import build

    arch = parse_spec(
        "arch t { input 3x8x8 classes 3 stem patch(2, 8) head class pos absolute "
        "stage a(width=8) { attn(2, global) mlp(2) } stage b(width=16) { pool mlp(2) } }"
    )
    model = build(arch, seed=0)
    images = torch.randn(4, 3, 8, 8)
    stats = feature_map_statistics(model, images)
    kinds = [(layer.name, layer.kind) for layer in stats.variance.layers]
    assert kinds == [
        ("stem", "stem"),
        ("stages.a.0", "attn"),
        ("stages.a.1", "mlp"),
        ("stages.b.0", "pool"),
        ("stages.b.1", "mlp"),
    ]
    # The mlp's variance is that of its patch tokens laid out as the 4x4 map, class token left out.
    with torch.no_grad():
        tokens = model.stages.a(model.stem(images))
    patches = tokens[:, 1:].transpose(1, 2).reshape(4, 8, 4, 4)
    assert stats.variance.values[2] == pytest.approx(spatial_variance_of(patches), rel=1e-9)
