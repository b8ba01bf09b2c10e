"""Token sequences and feature maps: the two layouts blocks pass between them.

Conv-like blocks (`conv`, `msa`, `smooth`) read and write feature maps (B, C, H, W); the
transformer blocks (`attn`, `mlp`, `merge`, `pool`) token sequences (B, P + H*W, C), where
the P prefix tokens (the class token, if the spec has one) come before the patches in
row-major order. The rank of the tensor says which layout it is in; the compiler knows every
map's size from the IR, so converting is a reshape and never needs to guess.
"""

from functools import partial
from typing import cast

import torch
from timm.models import checkpoint_seq
from torch import nn

MAP = "map"
TOKENS = "tokens"


def to_tokens(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, H*W, C); a token sequence is returned as it is."""
    return x.flatten(2).transpose(1, 2) if x.ndim == 4 else x


def to_map(x: torch.Tensor, size: tuple[int, int], prefix: int = 0) -> torch.Tensor:
    """(B, P + H*W, C) -> (B, C, H, W), the P prefix tokens dropped; a map is returned as it is."""
    if x.ndim == 4:
        return x
    return x[:, prefix:].transpose(1, 2).reshape(x.shape[0], x.shape[2], *size)


def convert(x: torch.Tensor, source: str, target: str, size: tuple[int, int], prefix: int = 0) -> torch.Tensor:
    """`x`, known to be in layout `source`, in layout `target` (the P = `prefix` tokens dropped on
    the way to a map). The layouts come from the IR at build time, never from `x.ndim`, so the
    modules that call this trace with torch.fx and torch.export."""
    if source == target:
        return x
    if target == "tokens":  # TOKENS, spelled out: TorchScript compiles no module-level string
        return x.flatten(2).transpose(1, 2)
    return x[:, prefix:].transpose(1, 2).reshape(x.shape[0], x.shape[2], size[0], size[1])


class TokenOutput:
    """For modules that output tokens: their output as a feature map, for the analyses
    (Fourier, variance) that measure maps. The class token is left out, as in Park & Kim's
    analysis of ViT."""

    out_size: tuple[int, int]
    prefix: int

    def feature_map(self, output: torch.Tensor) -> torch.Tensor:
        return to_map(output, self.out_size, self.prefix)


class BlockSequence(nn.Sequential):
    """A stage's blocks in order, each given its input in the layout it reads.

    `in_sizes[i]` is the map size entering block i (from the IR's shape inference), which a
    token sequence needs to become a map again; `in_layout` the layout the stage receives.
    With `grad_checkpointing`, training runs the blocks through timm's `checkpoint_seq`.
    """

    def __init__(self, blocks: list[nn.Module], in_sizes: list[tuple[int, int]], in_layout: str = MAP) -> None:
        super().__init__(*blocks)
        self.in_sizes = list(in_sizes)
        self.in_layout = in_layout
        self.grad_checkpointing = False
        self._index_layouts()

    # TorchScript compiles properties unless told otherwise; forward reads the lists below instead.
    __jit_unused_properties__ = ["out_layout"]

    def _index_layouts(self) -> None:
        # Block i converts from `sources[i]` (what the block before it wrote) to `targets[i]` (what
        # it reads), lists fixed at build time: forward never asks a tensor or a block at run time,
        # so it traces (torch.fx, torch.export) and scripts (TorchScript).
        layouts = self.layouts()
        self.sources, self.targets = layouts[:-1], layouts[1:]

    def layouts(self) -> list[str]:
        """The layout each block receives, then the stage's output layout (one more entry)."""
        return [self.in_layout, *(cast(str, block.layout) for block in self)]

    @property
    def out_layout(self) -> str:
        return self.layouts()[-1]

    def step(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """Block `index` on `x`, the output of the block before it."""
        return self[index](convert(x, self.sources[index], self.targets[index], self.in_sizes[index]))

    def truncate(self, length: int) -> None:
        """Keep the first `length` blocks (timm's `prune_intermediate_layers`)."""
        for index in range(len(self) - 1, length - 1, -1):
            del self[index]
        self.in_sizes = self.in_sizes[:length]
        self._index_layouts()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.grad_checkpointing and not torch.jit.is_scripting():
            return checkpoint_seq([partial(self.step, index) for index in range(len(self))], x)
        for index, block in enumerate(self):
            x = block(convert(x, self.sources[index], self.targets[index], self.in_sizes[index]))
        return x
