"""`merge`, `pool`, `smooth`: the blocks without arguments."""

from __future__ import annotations

from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock, MergeBlock, PoolBlock, SmoothBlock
from archdsl.lang.arguments import ArgumentReader
from archdsl.lang.parser import BlockRef
from archdsl.lang.problems import Problem, Site
from archdsl.lang.words.base import Lowered, Word
from archdsl.lang.words.units import linear, ln

# What each one is, for the "takes no arguments" hint.
PLAIN_BLOCKS = {
    "merge": "Swin's patch merging",
    "pool": "PiT's pooling",
    "smooth": "a fixed 2x2 blur",
}


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    if ref.args:
        what = PLAIN_BLOCKS[ref.name.text]
        reader.error(ref.span, f"`{ref.name.text}` takes no arguments", f"it is {what}: write `{ref.name.text}`")
    block = {"merge": MergeBlock, "pool": PoolBlock, "smooth": SmoothBlock}[ref.name.text]()
    return Lowered(block, {"": ref.span})


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    return block.kind


def count_merge(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    c_in, c_out = 4 * shape.in_channels, shape.out_channels
    return ln(c_in) + linear(c_in, c_out, bias=False), shape.out_size[0] * shape.out_size[1] * c_in * c_out


def count_pool(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    c_in, c_out = shape.in_channels, shape.out_channels
    # Depthwise 3x3: each output channel reads one input channel.
    params, macs = c_out * 9 + c_out, shape.out_size[0] * shape.out_size[1] * c_out * 9
    if arch.class_token:
        params += linear(c_in, c_out)
        macs += c_in * c_out
    return params, macs


def count_smooth(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    return 0, 0  # a fixed blur: no parameters, and its adds are not counted


def check_pool(site: Site) -> list[Problem]:
    """Its depthwise conv maps each input channel to a whole number of output channels."""
    c_in, c_out = site.shape.in_channels, site.shape.out_channels
    if c_out % c_in == 0:
        return []
    return [
        Problem(
            site.stage_path + ("width",),
            f"mismatched dims: PiT's pooling maps {c_in} channels to {c_out} with "
            f"a depthwise conv, so the width must be a multiple of {c_in}",
            f"e.g. width={2 * c_in}",
        )
    ]


MERGE = Word("merge", lower, text, count_merge, noun="`merge`", halves=PLAIN_BLOCKS["merge"], class_token=False)
POOL = Word("pool", lower, text, count_pool, noun="`pool`", halves=PLAIN_BLOCKS["pool"], check=check_pool)
SMOOTH = Word("smooth", lower, text, count_smooth, noun="`smooth`")
