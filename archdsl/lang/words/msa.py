"""`msa(heads, window, dim_head=64)`: the AlterNet MSA block."""

from __future__ import annotations

from archdsl.errors import did_you_mean
from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock, MSABlock
from archdsl.lang.arguments import ArgumentReader, describe
from archdsl.lang.parser import BlockRef, Name
from archdsl.lang.problems import Problem, Site
from archdsl.lang.words.base import Lowered, Word
from archdsl.lang.words.units import bn
from archdsl.lang.words.windows import attention_values, tiling_problems


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    spans = {"": ref.span}
    # A placeholder for a broken MSA: global attention fits every map, so it adds no noise.
    heads, window, dim_head = 1, None, 64
    if ref.args is None:
        reader.error(ref.span, "`msa` needs heads and a window", "e.g. `msa(6, 4)` or `msa(6, window=global)`")
        return Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)
    bound = reader.bind(ref.args, "msa", ("heads", "window", "dim_head"))
    arg = reader.require(bound, "heads", "msa", ref.span, "`msa(6, 4)`")
    if arg is not None:
        spans["heads"] = arg.value.span
        heads = reader.positive_int(arg.value, "heads") or heads
    arg = reader.require(bound, "window", "msa", ref.span, "`msa(6, 4)` or `msa(6, window=global)`")
    if arg is not None:
        spans["window"] = arg.value.span
        value = arg.value
        if isinstance(value, Name):
            if value.text != "global":
                hint = did_you_mean(value.text, ("global",)) or "a window is a number or `global`"
                reader.error(value.span, f"window must be a number or `global`, not {describe(value)}", hint)
        else:
            window = reader.positive_int(value, "window")
    if "dim_head" in bound:
        arg = bound["dim_head"]
        spans["dim_head"] = arg.value.span
        dim_head = reader.positive_int(arg.value, "dim_head") or dim_head
    return Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    assert isinstance(block, MSABlock)
    window = "window=global" if block.window is None else str(block.window)
    extra = "" if block.dim_head == 64 else f", dim_head={block.dim_head}"
    return f"msa({block.heads}, {window}{extra})"


def count(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of an AlterNet MSA block; attention matmuls counted exactly."""
    block = shape.block
    assert isinstance(block, MSABlock)
    c_in, c_out = shape.in_channels, shape.out_channels
    height, wide = shape.out_size
    hw = height * wide
    inner = block.heads * block.dim_head
    win_h, win_w = (block.window, block.window) if block.window is not None else (height, wide)
    tokens = win_h * win_w
    params = (
        bn(c_in)
        + c_in * width  # 1x1 conv, no bias
        + bn(width)
        + width * inner  # q
        + width * 2 * inner  # k, v
        + inner * c_out
        + c_out  # output projection with bias
        + (2 * win_h - 1) * (2 * win_w - 1)  # relative-position bias table, shared by heads
    )
    macs = hw * (c_in * width + width * 3 * inner + inner * c_out)
    # Per window: QK^T and AV, each heads x tokens x tokens x dim_head; hw / tokens windows.
    macs += 2 * block.heads * tokens * block.dim_head * hw
    if c_in != c_out:
        params += c_in * c_out
        macs += c_in * c_out * hw
    return params, macs


def check(site: Site) -> list[Problem]:
    block = site.shape.block
    assert isinstance(block, MSABlock)
    return tiling_problems(site, block.window)


def activations(arch: Arch, shape: BlockShape) -> int:
    """Its attention maps."""
    block = shape.block
    assert isinstance(block, MSABlock)
    return attention_values(block.heads, block.window, shape.out_size)


WORD = Word(
    "msa",
    lower,
    text,
    count,
    noun="an MSA",
    check=check,
    start_hint="start the stage with a `conv`, or give it stride=1",
    activations=activations,
)
