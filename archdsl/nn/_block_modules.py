"""The torch module of each block kind, given where it sits: what the compiler calls per IR block.

One builder per built-in word (`archdsl.lang.words` holds how each is read, written and counted);
a registered kind (`archdsl.kinds`) brings its own `build`. `module_for` looks the kind up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from torch import nn

from archdsl.ir import Arch, AttnBlock, BlockShape, ConvBlock, ExtBlock, MLPBlock, MSABlock, placement
from archdsl.kinds import BuildRule, Placement, call_hook
from archdsl.nn.blocks import downsample, transformer
from archdsl.nn.blocks.attention import AlterMSABlock
from archdsl.nn.blocks.conv import conv_block
from archdsl.nn.blocks.smoothing import SmoothBlock

# (arch, where the block sits, its stage's width, its stochastic-depth rate) -> module
Builder = Callable[[Arch, BlockShape, int, float], nn.Module]


def _conv(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    assert isinstance(shape.block, ConvBlock)
    return conv_block(shape.block, shape.in_channels, width, stride=shape.stride, drop_path=drop_path)


def _msa(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    assert isinstance(shape.block, MSABlock)
    return AlterMSABlock(
        shape.block, shape.in_channels, width, shape.out_channels, map_size=shape.out_size, drop_path=drop_path
    )


def _attn(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    assert isinstance(shape.block, AttnBlock)
    relative = arch.pos.kind == "relative"
    return transformer.TransformerAttnBlock(
        shape.block, shape.in_channels, relative=relative, **_token_placement(arch, shape, drop_path)
    )


def _mlp(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    assert isinstance(shape.block, MLPBlock)
    return transformer.TransformerMLPBlock(shape.block, shape.in_channels, **_token_placement(arch, shape, drop_path))


class _TokenPlacement(TypedDict):
    size: tuple[int, int]
    prefix: int
    eps: float
    drop_path: float


def _token_placement(arch: Arch, shape: BlockShape, drop_path: float) -> _TokenPlacement:
    """What both transformer blocks are told of where they sit: the map their tokens come from, the
    class token before them, the LayerNorm eps and their stochastic-depth rate."""
    return {"size": shape.out_size, "prefix": arch.prefix_tokens, "eps": arch.norm.eps, "drop_path": drop_path}


def _merge(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    return downsample.MergeBlock(
        shape.in_channels, shape.out_channels, in_size=shape.in_size, out_size=shape.out_size, eps=arch.norm.eps
    )


def _pool(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    return downsample.PoolBlock(
        shape.in_channels,
        shape.out_channels,
        in_size=shape.in_size,
        out_size=shape.out_size,
        prefix=arch.prefix_tokens,
    )


def _smooth(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    return SmoothBlock()


def _registered(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    """A registered kind's module, told its kind and layout as the built-in blocks know theirs."""
    block = shape.block
    assert isinstance(block, ExtBlock)
    kind = block.declaration
    module = call_hook(kind, "build", _module_of, kind.builder(), placement(arch, shape), drop_path)
    setattr(module, "kind", kind.name)  # noqa: B010 (nn.Module keeps plain attributes; mypy knows none here)
    setattr(module, "layout", kind.layout)  # noqa: B010
    return module


def _module_of(build: BuildRule, place: Placement, drop_path: float) -> nn.Module:
    module = build(place, drop_path)
    if not isinstance(module, nn.Module):
        raise TypeError(f"it returned a {type(module).__name__}, not a torch.nn.Module")
    return module


BUILDERS: dict[str, Builder] = {
    "conv": _conv,
    "msa": _msa,
    "attn": _attn,
    "mlp": _mlp,
    "merge": _merge,
    "pool": _pool,
    "smooth": _smooth,
}


def module_for(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    """The module for one IR block, given where it sits."""
    return BUILDERS.get(shape.block.kind, _registered)(arch, shape, width, drop_path)
