"""The torch module of each block kind, given where it sits: what the compiler calls per IR block.

One builder per built-in word (`archdsl.lang.words` holds how each is read, written and counted);
a registered kind (`archdsl.kinds`) brings its own `build`. `module_for` looks the kind up.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import TypedDict

import torch
from torch import nn

from archdsl.errors import UserError
from archdsl.ir import Arch, AttnBlock, BlockShape, ConvBlock, ExtBlock, MLPBlock, MSABlock, block_path, placement
from archdsl.kinds import PLUGIN_BUG_HINT, BlockKind, BuildRule, Placement, call_hook
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
    """A registered kind's module, told its kind and layout as the built-in blocks know theirs, and
    held to the output shape its declaration promises (`check_output`)."""
    block = shape.block
    assert isinstance(block, ExtBlock)
    kind = block.declaration
    module = call_hook(kind, "build", _module_of, kind.builder(), placement(arch, shape), drop_path)
    setattr(module, "kind", kind.name)  # noqa: B010 (nn.Module keeps plain attributes; mypy knows none here)
    setattr(module, "layout", kind.layout)  # noqa: B010
    check_output(module, kind, shape)
    return module


def check_output(module: nn.Module, kind: BlockKind, shape: BlockShape) -> None:
    """Run a registered kind's new module once, on zeros of the shape its block receives, and refuse
    it (a `UserError` naming the kind, the block, both shapes) unless it gives the shape the kind's
    `channels`, `downsamples` and `layout` promise. Shape inference, the summary and the next block
    rely on that promise; a module that breaks it would otherwise end the first forward pass in a
    RuntimeError from deep inside the next layer. The pass runs in eval mode without gradients,
    on its own random-number stream (the weights drawn next are as without it), and leaves each
    part of the module in the mode it was in. A module built on the meta device (`archdsl.nn.weights.expected_shapes`:
    its weights' shapes only) is not run; the real build that follows is."""
    like = next((t for t in chain(module.parameters(), module.buffers()) if t.is_floating_point()), None)
    if like is not None and like.is_meta:
        return
    x = torch.zeros(
        _layout_shape(kind, shape.in_channels, shape.in_size),
        device=like.device if like is not None else None,
        dtype=like.dtype if like is not None else None,
    )
    modes = [(part, part.training) for part in module.modules()]
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        module.eval()
        try:
            out = call_hook(kind, "forward pass", module, x)
        finally:
            for part, training in modes:
                part.training = training
    where = f"{kind.title} at {block_path(shape.stage, shape.index)}: its module gives"
    given = f"for an input of {_dims(x.shape)}"
    hint = f'it declares channels="{kind.channels}" and downsamples={kind.downsamples}; {PLUGIN_BUG_HINT}'
    if not isinstance(out, torch.Tensor):
        raise UserError(f"{where} a {type(out).__name__} {given}, not a tensor", hint=PLUGIN_BUG_HINT)
    expected = _layout_shape(kind, shape.out_channels, shape.out_size)
    if tuple(out.shape) != expected:
        axes = "B x C x H x W" if kind.layout == "map" else "B x tokens x C"
        raise UserError(
            f"{where} {_dims(out.shape)} {given}, not {_dims(expected)} ({axes}) as its declaration says", hint=hint
        )


def _layout_shape(kind: BlockKind, channels: int, size: tuple[int, int]) -> tuple[int, ...]:
    """One image's shape in the layout `kind` reads and writes: a map (1, C, H, W) or tokens (1, H*W, C)."""
    return (1, channels, *size) if kind.layout == "map" else (1, size[0] * size[1], channels)


def _dims(shape: tuple[int, ...] | torch.Size) -> str:
    return "x".join(str(n) for n in shape)


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
