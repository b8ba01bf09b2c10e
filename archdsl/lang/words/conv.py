"""`conv`, `conv(basic)`, `conv(expansion=2, preact=false)`: a residual conv block (bottleneck or basic)."""

from __future__ import annotations

from archdsl.errors import did_you_mean
from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock
from archdsl.lang._lower_settings import CONV_VARIANTS, conv_variant
from archdsl.lang.arguments import ArgumentReader, describe
from archdsl.lang.parser import BlockRef, Name
from archdsl.lang.words.base import Lowered, Word
from archdsl.lang.words.units import bn, needs_projection


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    spans = {"": ref.span}
    if not ref.args:
        return Lowered(default, spans)
    bound = reader.bind(ref.args, "conv", ("variant", "expansion", "preact"))
    variant, expansion, preact = default.variant, default.expansion, default.preact
    if "variant" in bound:
        value = bound["variant"].value
        named = conv_variant(value.text) if isinstance(value, Name) else None
        if named is not None:
            variant = named
            expansion = CONV_VARIANTS[variant]
        else:
            hint = did_you_mean(value.text, tuple(CONV_VARIANTS)) if isinstance(value, Name) else None
            reader.error(
                value.span,
                f"conv variant must be `bottleneck` or `basic`, not {describe(value)}",
                hint or "e.g. `conv(basic)` or `conv(expansion=2)`",
            )
    if "expansion" in bound:
        arg = bound["expansion"]
        spans["expansion"] = arg.value.span
        number = reader.positive_int(arg.value, "expansion")
        if number is not None:
            expansion = number
    if "preact" in bound:
        given = reader.boolean(bound["preact"].value, "preact")
        preact = default.preact if given is None else given
    return Lowered(ConvBlock(variant=variant, expansion=expansion, preact=preact), spans)


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    """Only what differs from the plain `conv`; a new variant brings its own expansion."""
    assert isinstance(block, ConvBlock)
    if block == default_conv:
        return "conv"
    same_variant = block.variant == default_conv.variant
    args: list[str] = [] if same_variant else [block.variant]
    if block.expansion != (default_conv.expansion if same_variant else CONV_VARIANTS[block.variant]):
        args.append(f"expansion={block.expansion}")
    if block.preact != default_conv.preact:
        args.append(f"preact={'true' if block.preact else 'false'}")
    return f"conv({', '.join(args)})"


def count(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of a bottleneck or basic block, pre- or post-activation."""
    block = shape.block
    assert isinstance(block, ConvBlock)
    c_in, c_out = shape.in_channels, shape.out_channels
    hw_in = shape.in_size[0] * shape.in_size[1]
    hw_out = shape.out_size[0] * shape.out_size[1]
    if block.variant == "bottleneck":
        # (in, out, kernel area, pixels of the output) per conv; the first 1x1 has stride 1.
        convs = [(c_in, width, 1, hw_in), (width, width, 9, hw_out), (width, c_out, 1, hw_out)]
    else:
        convs = [(c_in, c_out, 9, hw_out), (c_out, c_out, 9, hw_out)]
    # Pre-activation: a BN before each conv (on its input); post-activation: after it (on its output).
    params = sum(bn(ci if block.preact else co) + ci * co * k for ci, co, k, _ in convs)
    macs = sum(ci * co * k * hw for ci, co, k, hw in convs)
    if needs_projection(shape):
        params += c_in * c_out + (0 if block.preact else bn(c_out))  # post-activation: conv-BN shortcut
        macs += c_in * c_out * hw_out
    return params, macs


WORD = Word("conv", lower, text, count, noun="a `conv` block")
