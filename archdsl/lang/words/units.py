"""Parameter counts of the layers the blocks, stems and heads are made of (for `count` rules)."""

from __future__ import annotations

from archdsl.ir import BlockShape


def bn(channels: int) -> int:
    return 2 * channels  # weight and bias (running stats are buffers)


def ln(channels: int) -> int:
    return 2 * channels  # weight and bias


def linear(c_in: int, c_out: int, bias: bool = True) -> int:
    return c_in * c_out + (c_out if bias else 0)


def needs_projection(shape: BlockShape) -> bool:
    return shape.stride != 1 or shape.in_channels != shape.out_channels
