"""Feature maps in frequency and in space, block by block (Park & Kim, Figs. 2 and 8).

For the stem output and every block output (`stages.<stage>.<index>`), over a set of
images in eval mode:

- Delta log amplitude: the log amplitude of each feature map's 2-D FFT, log(|F| + 1e-6),
  averaged over images and channels into one (H, W) map, taken at the highest frequency
  minus at frequency 0. The highest frequency is the single point (pi, pi): index
  (H // 2, W // 2) of the unshifted FFT, the corner of the fftshift-ed spectrum (for odd
  sizes, the nearest point below pi on each axis). Frequency 0 is the mean of the map.
  More negative means the block passes less high-frequency signal: a low-pass filter
  (the paper's MSAs) lowers it, a high-pass one (Convs) raises it.
- Feature-map variance: the (population) variance over the spatial positions of each
  feature map, averaged over images and channels.

Blocks that output token sequences (the patch stem, `attn`, `mlp`, `merge`, `pool`) are
measured on their tokens laid out as a map again, without the class token, as in Park &
Kim's analysis of ViT: such a module's `feature_map(output)` does it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn as nn
from pydantic import BaseModel, ConfigDict

from archdsl.ir import block_path

LOG_EPS = 1e-6  # keeps log finite where a channel is constant (its FFT is 0 off the origin)


class LayerValue(BaseModel):
    """One point of a per-block curve: where the block sits and the value measured after it."""

    model_config = ConfigDict(frozen=True)

    name: str  # module path: "stem" or "stages.<stage>.<index>"
    stage: str  # "stem" for the stem
    index: int  # position inside the stage (0 for the stem)
    kind: str  # "stem", or the block's kind: "conv", "msa", "attn", "mlp", "merge", "pool", "smooth"
    depth: int  # 0 for the stem, then 1, 2, ... in model order
    value: float


class LayerProfile(BaseModel):
    """One measure (`metric`) at every layer, in model order, averaged over `images` images."""

    model_config = ConfigDict(frozen=True)

    metric: Literal["delta_log_amplitude", "variance"]
    layers: tuple[LayerValue, ...]
    images: int

    @property
    def values(self) -> list[float]:
        return [layer.value for layer in self.layers]


@dataclass(frozen=True)
class FeatureLayer:
    """A layer whose output is measured: its module path, stage, index in the stage and kind."""

    name: str
    stage: str
    index: int
    kind: str


def feature_layers(model: nn.Module) -> list[FeatureLayer]:
    """The stem and every block of an ArchNet-like model (`.stem`, `.stages` of Sequentials)."""
    if not hasattr(model, "stages"):
        raise ValueError("the model has no `.stages`: feature maps are measured on archdsl models")
    layers = [FeatureLayer("stem", "stem", 0, "stem")] if hasattr(model, "stem") else []
    stages = cast(nn.ModuleDict, model.stages)
    for stage, blocks in stages.items():
        for index, block in enumerate(blocks.children()):
            layers.append(FeatureLayer(block_path(stage, index), stage, index, getattr(block, "kind", "block")))
    return layers


# --------------------------------------------------------------------------- the measures


def _check_maps(features: torch.Tensor) -> None:
    if features.ndim != 4:
        raise ValueError(f"expected feature maps (N, C, H, W), got shape {tuple(features.shape)}")


def log_amplitude_sum(features: torch.Tensor) -> torch.Tensor:
    """Sum over images and channels of log(|FFT2| + eps): an (H, W) map, unshifted, float64."""
    _check_maps(features)
    amplitude = torch.fft.fft2(features.double()).abs()
    return torch.log(amplitude + LOG_EPS).sum(dim=(0, 1))


def delta_of(log_amplitude: torch.Tensor) -> float:
    """Highest-frequency (pi, pi) minus zero-frequency value of an unshifted (H, W) map."""
    height, width = log_amplitude.shape
    return float(log_amplitude[height // 2, width // 2] - log_amplitude[0, 0])


def delta_log_amplitude_of(features: torch.Tensor) -> float:
    """Delta log amplitude of a batch of feature maps (N, C, H, W)."""
    return delta_of(log_amplitude_sum(features) / (features.shape[0] * features.shape[1]))


def spatial_variance_sum(features: torch.Tensor) -> float:
    """Sum over images and channels of the spatial variance (population, not unbiased)."""
    _check_maps(features)
    return float(features.double().var(dim=(-2, -1), correction=0).sum())


def spatial_variance_of(features: torch.Tensor) -> float:
    """Spatial variance of a batch of feature maps, averaged over images and channels."""
    return spatial_variance_sum(features) / (features.shape[0] * features.shape[1])


# --------------------------------------------------------------------------- on a model


class FeatureMapStatistics(BaseModel):
    """Delta log amplitude and spatial variance of the feature maps, layer by layer."""

    model_config = ConfigDict(frozen=True)

    delta_log_amplitude: LayerProfile
    variance: LayerProfile


def feature_map_statistics(
    model: nn.Module,
    images: torch.Tensor,
    *,
    batch_size: int = 64,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> FeatureMapStatistics:
    """Delta log amplitude and variance after the stem and every block, on normalised images (N, C, H, W)."""
    from archdsl.progress import progress_bar

    if len(images) == 0:
        raise ValueError("no images to measure feature maps on")
    layers = feature_layers(model)
    if device is not None:
        model = model.to(device)
    target = next(model.parameters()).device
    amplitude_sums: dict[str, torch.Tensor] = {}
    variance_sums = {layer.name: 0.0 for layer in layers}
    maps_seen = {layer.name: 0 for layer in layers}

    def record(name: str):
        def hook(module: nn.Module, args, output: torch.Tensor) -> None:
            to_map = getattr(module, "feature_map", None)
            output = to_map(output) if to_map is not None else output
            amplitude = log_amplitude_sum(output).cpu()
            amplitude_sums[name] = amplitude_sums[name] + amplitude if name in amplitude_sums else amplitude
            variance_sums[name] += spatial_variance_sum(output)
            maps_seen[name] += output.shape[0] * output.shape[1]

        return hook

    handles = [model.get_submodule(layer.name).register_forward_hook(record(layer.name)) for layer in layers]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in progress_bar(images.split(batch_size), desc="feature maps", unit="batch", show=progress):
                model(batch.to(target))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)

    silent = [name for name, seen in maps_seen.items() if not seen]
    if silent:
        raise ValueError(f"the model's forward never ran {', '.join(silent)}: cannot measure their feature maps")

    def profile(metric, value_of) -> LayerProfile:
        points = tuple(
            LayerValue(
                name=layer.name,
                stage=layer.stage,
                index=layer.index,
                kind=layer.kind,
                depth=depth,
                value=value_of(layer.name),
            )
            for depth, layer in enumerate(layers)
        )
        return LayerProfile(metric=metric, layers=points, images=len(images))

    return FeatureMapStatistics(
        delta_log_amplitude=profile("delta_log_amplitude", lambda n: delta_of(amplitude_sums[n] / maps_seen[n])),
        variance=profile("variance", lambda n: variance_sums[n] / maps_seen[n]),
    )


def delta_log_amplitude(model: nn.Module, images: torch.Tensor, **options) -> LayerProfile:
    """Delta log amplitude per block (see the module docstring); options as `feature_map_statistics`."""
    return feature_map_statistics(model, images, **options).delta_log_amplitude


def feature_variance(model: nn.Module, images: torch.Tensor, **options) -> LayerProfile:
    """Feature-map variance per block; options as `feature_map_statistics`."""
    return feature_map_statistics(model, images, **options).variance
