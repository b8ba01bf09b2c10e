"""Two block kinds built from timm's layers, registered from outside archdsl's core.

    import archdsl_timm_blocks          # registers `mbconv` and `convnext`
    arch = archdsl.load_spec("examples/mbconv-convnext.arch")

- `mbconv(expansion=4, kernel=3, se=0.25)`: MobileNetV2/EfficientNet's inverted residual,
  timm's `InvertedResidual` (1x1 expansion, depthwise kxk, squeeze-excite, 1x1 projection),
  to the stage's width; it applies the stage's stride, so it may start a strided stage. Its
  counts come from the meta device (`archdsl.nn.meta_count`); its checks (an odd kernel, a
  squeeze-excite of at least one channel) and its activations (the expanded maps) are written out.
- `convnext(kernel=7, ratio=4, grn=false)`: timm's `ConvNeXtBlock` (depthwise kxk, LayerNorm,
  MLP, layer scale), keeping its input's channels and map. Its counts are written out below,
  as archdsl's own blocks are.

The declarations import nothing heavy; torch and timm are imported when a block is built.
An installed package would name `kinds` (the function returning the list of `BlockKind`s,
which is what the loader reads; not `register`) under the entry point group `archdsl.blocks`
(`[project.entry-points."archdsl.blocks"] timm = "archdsl_timm_blocks:kinds"`).
"""

from __future__ import annotations

import math
from typing import Any

import archdsl
from archdsl.kinds import Arg, BlockKind, Issue, Placement
from archdsl.nn.meta_count import meta_count


def _odd_kernel(place: Placement) -> list[Issue]:
    kernel = int(place.args["kernel"])
    if kernel % 2:
        return []
    return [Issue(f"kernel {kernel} has no centre", f"use an odd size: {kernel - 1} or {kernel + 1}", arg="kernel")]


def se_channels(place: Placement) -> int:
    """The squeeze-excite's channels: EfficientNet's ratio of the block's input (0: none)."""
    return round(place.in_channels * float(place.args["se"]))


def _squeeze_excite(place: Placement) -> list[Issue]:
    """A squeeze-excite that rounds to no channel builds an empty conv, which fails on its first input."""
    se, channels = float(place.args["se"]), place.in_channels
    if se == 0 or se_channels(place) > 0:
        return []
    # The smallest ratio, in two significant digits, that keeps a channel (round(0.5) is 0).
    step = 10.0 ** (math.floor(math.log10(0.5 / channels)) - 1)
    least = math.floor(0.5 / channels / step + 1) * step
    return [
        Issue(
            f"se={se:g} squeezes the {channels} channels to none: round({channels} x {se:g}) = 0",
            f"use se=0 (no squeeze-excite) or at least se={least:.2g}",
            arg="se",
        )
    ]


def check_mbconv(place: Placement) -> list[Issue]:
    return _odd_kernel(place) + _squeeze_excite(place)


def activations_mbconv(place: Placement) -> int:
    """The expanded maps it keeps per image: after the 1x1 expansion and after the depthwise conv."""
    hidden = place.in_channels * int(place.args["expansion"])
    return hidden * (place.in_size[0] * place.in_size[1] + place.out_size[0] * place.out_size[1])


def build_mbconv(place: Placement, drop_path: float) -> Any:
    from functools import partial

    from timm.models._efficientnet_blocks import InvertedResidual, SqueezeExcite

    # EfficientNet's squeeze-excite reduces relative to the block's input, not its expanded width.
    se_layer = partial(SqueezeExcite, rd_channels=se_channels(place)) if float(place.args["se"]) > 0 else None
    return InvertedResidual(
        place.in_channels,
        place.out_channels,
        dw_kernel_size=int(place.args["kernel"]),
        stride=place.stride,
        exp_ratio=int(place.args["expansion"]),
        se_layer=se_layer,
        drop_path_rate=drop_path,
    )


def build_convnext(place: Placement, drop_path: float) -> Any:
    from timm.models.convnext import ConvNeXtBlock

    return ConvNeXtBlock(
        place.in_channels,
        kernel_size=int(place.args["kernel"]),
        mlp_ratio=int(place.args["ratio"]),
        use_grn=bool(place.args["grn"]),
        drop_path=drop_path,
    )


def count_convnext(place: Placement) -> tuple[int, int]:
    """(params, MACs) of timm's ConvNeXtBlock: depthwise conv with bias, LayerNorm, MLP, layer scale."""
    c, kernel = place.in_channels, int(place.args["kernel"])
    hidden = c * int(place.args["ratio"])
    params = c * kernel * kernel + c + 2 * c + (c * hidden + hidden) + (hidden * c + c) + c
    if place.args["grn"]:
        params += 2 * hidden  # GlobalResponseNorm's weight and bias
    pixels = place.out_size[0] * place.out_size[1]
    return params, pixels * (c * kernel * kernel + 2 * c * hidden)


MBCONV = BlockKind(
    name="mbconv",
    args=(
        Arg("expansion", int, default=4, low=1, high=16, help="the inverted bottleneck's width / its input's"),
        Arg("kernel", int, default=3, low=1, high=11, help="the depthwise conv's size (odd)"),
        Arg("se", float, default=0.25, low=0.0, high=1.0, help="squeeze-excite ratio to the input; 0: none"),
    ),
    count=meta_count(build_mbconv),
    build=build_mbconv,
    channels="width",
    downsamples=True,
    check=check_mbconv,
    activations=activations_mbconv,
    description="an inverted residual (MBConv)",
    example="`mbconv`, `mbconv(6, kernel=5)` or `mbconv(se=0)`",
)

CONVNEXT = BlockKind(
    name="convnext",
    args=(
        Arg("kernel", int, default=7, low=1, high=15, help="the depthwise conv's size (odd)"),
        Arg("ratio", int, default=4, low=1, help="the MLP's hidden width / the channels"),
        Arg("grn", bool, default=False, help="ConvNeXt-V2's global response norm in the MLP"),
    ),
    count=count_convnext,
    build=build_convnext,
    channels="keep",
    check=_odd_kernel,
    description="a ConvNeXt block",
    example="`convnext` or `convnext(kernel=5, ratio=2)`",
)


def kinds() -> list[BlockKind]:
    """The kinds of this module: what an entry point in the group `archdsl.blocks` names."""
    return [MBCONV, CONVNEXT]


def register() -> None:
    """Make `mbconv` and `convnext` words of the language (again: registering is idempotent)."""
    for kind in kinds():
        archdsl.register_block(kind)


register()
