"""`mlp(ratio=4)`: the transformer MLP block."""

from __future__ import annotations

from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock, MLPBlock
from archdsl.lang.arguments import ArgumentReader
from archdsl.lang.parser import BlockRef
from archdsl.lang.words.base import Lowered, Word
from archdsl.lang.words.units import linear, ln


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    spans = {"": ref.span}
    bound = reader.bind(ref.args or (), "mlp", ("ratio",))
    ratio = 4
    if "ratio" in bound:
        spans["ratio"] = bound["ratio"].value.span
        ratio = reader.positive_int(bound["ratio"].value, "mlp ratio") or ratio
    return Lowered(MLPBlock(ratio=ratio), spans)


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    assert isinstance(block, MLPBlock)
    return f"mlp({block.ratio})"  # the ratio is worth seeing, like a bottleneck's expansion


def count(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    block = shape.block
    assert isinstance(block, MLPBlock)
    c, hidden = shape.in_channels, shape.in_channels * block.ratio
    tokens = shape.out_size[0] * shape.out_size[1] + arch.prefix_tokens
    return ln(c) + linear(c, hidden) + linear(hidden, c), tokens * 2 * c * hidden


def activations(arch: Arch, shape: BlockShape) -> int:
    """Its hidden layer: `ratio` times its output."""
    block = shape.block
    assert isinstance(block, MLPBlock)
    return block.ratio * shape.out_channels * shape.out_size[0] * shape.out_size[1]


WORD = Word("mlp", lower, text, count, noun="an `mlp` block", activations=activations)
