"""Token blocks that halve the map between transformer stages: Swin's patch merging, PiT's pooling.

Each is the first block of a stage with stride 2 and maps its input's channels to the stage's
width. Both read and write token sequences (B, P + H*W, C).
"""

from functools import partial

import torch
import torch.nn.functional as F
from timm.layers import LayerNorm
from timm.models.swin_transformer import PatchMerging
from torch import nn

from archdsl.nn.blocks.tokens import TOKENS, TokenOutput


class MergeBlock(TokenOutput, PatchMerging):
    """`merge`: timm's Swin `PatchMerging`: each 2x2 group of tokens concatenated (4C, in timm's
    order), LayerNorm(4C), Linear(4C -> width) without bias. An odd side is padded first."""

    kind = "merge"
    layout = TOKENS

    def __init__(self, channels: int, width: int, *, in_size: tuple[int, int], out_size: tuple[int, int], eps: float):
        # timm types norm_layer as a class; any callable that makes the layer works.
        super().__init__(channels, width, norm_layer=partial(LayerNorm, eps=eps))  # type: ignore[arg-type]
        self.in_size, self.out_size, self.prefix = in_size, out_size, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # timm's `PatchMerging.forward` on the NHWC map, written out (TorchScript has no `super()`),
        # with the padding of an odd side known at build time.
        b, _, channels = x.shape
        height, width = self.in_size
        x = F.pad(x.reshape(b, height, width, channels), (0, 0, 0, width % 2, 0, height % 2))
        height, width = height + height % 2, width + width % 2
        x = x.reshape(b, height // 2, 2, width // 2, 2, channels).permute(0, 1, 3, 4, 2, 5).flatten(3)
        return self.reduction(self.norm(x)).flatten(1, 2)


class PoolBlock(TokenOutput, nn.Module):
    """`pool`: PiT's pooling layer: the patch map through a depthwise 3x3 conv with stride 2 and
    padding 1 (groups = input channels, so the width is a multiple of them), with bias; the
    class token, if any, through a Linear to the same width (the `conv` and `fc` of timm's
    `timm.models.pit.Pooling`)."""

    kind = "pool"
    layout = TOKENS

    def __init__(
        self,
        channels: int,
        width: int,
        *,
        in_size: tuple[int, int],
        out_size: tuple[int, int],
        prefix: int,
    ) -> None:
        super().__init__()
        self.in_size, self.out_size, self.prefix = in_size, out_size, prefix
        self.conv = nn.Conv2d(channels, width, kernel_size=3, stride=2, padding=1, groups=channels)
        self.fc = nn.Linear(channels, width) if prefix else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, channels = x.shape
        patches = x[:, self.prefix :].transpose(1, 2).reshape(b, channels, self.in_size[0], self.in_size[1])
        patches = self.conv(patches).flatten(2).transpose(1, 2)
        if self.fc is None:
            return patches
        return torch.cat([self.fc(x[:, : self.prefix]), patches], dim=1)
