"""What timm needs to know about a design, read from its IR alone (no torch).

`pretrained_cfg(arch)` is timm's data and head config of a model (`model.pretrained_cfg`):
the input size, the normalisation, where the first conv and the classifier are. archdsl has
no pretrained weights, so there is no `url`; the config is what `timm.data.resolve_data_config`
and timm's train script read. `feature_info(arch)` lists the feature maps `features_only`
returns (timm's `model.feature_info`): the stem's output and every stage's, or, for a model of
one stage (ViT), every block's output, as timm's ViT lists one feature per block.
"""

from __future__ import annotations

from typing import Any

from archdsl.ir import Arch, PatchStem, block_shapes, stage_shapes, stem_out_size

# timm's defaults (timm.data.IMAGENET_DEFAULT_MEAN/STD), for inputs that are not CIFAR-sized.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def normalization(arch: Arch) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(mean, std) a design's inputs are normalised with: those of the CIFAR set whose images and
    number of classes it takes (3x32x32 and 10 or 100 classes: the training-set statistics
    archdsl's loaders use), else timm's ImageNet defaults."""
    if (arch.input.channels, arch.input.height, arch.input.width) == (3, 32, 32) and arch.classes in (10, 100):
        from archdsl.data.cifar import CIFAR10, CIFAR100

        spec = CIFAR10 if arch.classes == 10 else CIFAR100
        return spec.mean, spec.std
    channels = arch.input.channels
    if channels == 3:
        return IMAGENET_MEAN, IMAGENET_STD
    return (0.5,) * channels, (0.5,) * channels


def first_conv(arch: Arch) -> str:
    """The module of the first conv (timm adapts its weights to another `in_chans`)."""
    if isinstance(arch.stem, PatchStem):
        return "stem.proj"
    return "stem.conv" if arch.stem.norm else "stem"  # conv3x3(norm=true) is conv-BN-ReLU


CLASSIFIER = "head.fc"  # the module `reset_classifier` replaces
# archdsl ships no weights: a model's weights are whoever trained them's; timm's field says so.
WEIGHTS_LICENSE = "unknown"


def pretrained_cfg(arch: Arch) -> dict[str, Any]:
    """timm's `PretrainedCfg` fields for a design (no weights: `url` is empty)."""
    mean, std = normalization(arch)
    size = (arch.input.channels, arch.input.height, arch.input.width)
    return {
        "url": "",
        "num_classes": arch.classes,
        "input_size": size,
        # The spec fixes the input size (positions, windows and FLOPs depend on it); `img_size=`
        # builds the design for another one.
        "fixed_input_size": True,
        "interpolation": "bicubic",
        "crop_pct": 1.0,  # small images are used whole
        "mean": tuple(mean),
        "std": tuple(std),
        "pool_size": (feature_sizes(arch) or [stem_out_size(arch)])[
            -1
        ],  # the map forward_features ends in (tokens: their grid)
        "first_conv": first_conv(arch),
        "classifier": CLASSIFIER,
        "license": WEIGHTS_LICENSE,
        "description": f"archdsl spec {arch.name} (id {arch.short_id}), randomly initialised",
    }


def per_block_features(arch: Arch) -> bool:
    """Whether the features are every block's output (a model of one stage) or the stem's and each stage's."""
    return len(arch.stages) == 1


def feature_info(arch: Arch) -> list[dict[str, Any]]:
    """The feature maps `features_only` returns: the stem's output, then each stage's (every
    block's for a model of one stage).

    `num_chs` channels, `reduction` the input height over the map's, `module` the module it
    comes from (timm's `model.feature_info` format).
    """
    height = arch.input.height
    if per_block_features(arch):
        return [
            {
                "num_chs": shape.out_channels,
                "reduction": height // max(1, shape.out_size[0]),
                "module": shape.qualified_name,
            }
            for shape in block_shapes(arch)
        ]
    info = [{"num_chs": arch.stem.channels, "reduction": height // max(1, stem_out_size(arch)[0]), "module": "stem"}]
    for shape in stage_shapes(arch):
        info.append(
            {
                "num_chs": shape.out_channels,
                "reduction": height // max(1, shape.out_size[0]),
                "module": f"stages.{shape.name}",
            }
        )
    return info


def feature_sizes(arch: Arch) -> list[tuple[int, int]]:
    """The map size of each entry of `feature_info` (tokens are turned back into these maps)."""
    if per_block_features(arch):
        return [shape.out_size for shape in block_shapes(arch)]
    return [stem_out_size(arch), *(shape.out_size for shape in stage_shapes(arch))]


def feature_layouts(arch: Arch) -> list[str]:
    """The layout ("map" or "tokens") of each entry of `feature_info` as the model computes it."""
    stem = "tokens" if isinstance(arch.stem, PatchStem) else "map"
    ends = [stem]
    for stage in arch.stages:
        layouts = [block.layout for block in stage.blocks]
        ends += layouts if per_block_features(arch) else [(layouts or ends[-1:])[-1]]
    return ends[1:] if per_block_features(arch) else ends
