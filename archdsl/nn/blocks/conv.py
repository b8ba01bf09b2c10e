"""Pre-activation residual conv blocks (He et al., "Identity Mappings in Deep Residual Networks").

Pre-activation means every conv is preceded by BN -> ReLU and the block ends on a conv, so
the residual stream is never normalised: that is what lets an MSA block (which also ends on
a plain projection) be swapped in for a conv block one for one.

Where the shape changes, the shortcut is a 1x1 conv (with the stride) applied to the
*activated* input, i.e. it shares the block's first BN-ReLU; elsewhere it is the identity.
"""

from __future__ import annotations

import torch
from timm.layers import DropPath
from torch import nn

from archdsl.ir import ConvBlock
from archdsl.nn.blocks.tokens import MAP


def _conv(in_channels: int, out_channels: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    # No bias: every conv is followed (in the next block, or in the head) by a BN.
    return nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=kernel // 2, bias=False)


class PreActBlock(nn.Module):
    """Shared skeleton: a chain of BN-ReLU-conv units plus the shortcut.

    `units` lists (in, out, kernel, stride) per conv. Module names are `norm1, conv1, ...`
    so that state-dict keys read like the block description in docs/reference.md.
    """

    kind = "conv"
    layout = MAP
    norm1: nn.BatchNorm2d  # added by name below (norm1, conv1, norm2, ...)
    conv1: nn.Conv2d

    def __init__(self, units: list[tuple[int, int, int, int]], *, drop_path: float = 0.0) -> None:
        super().__init__()
        self.n_units = len(units)
        for i, (c_in, c_out, kernel, stride) in enumerate(units, start=1):
            self.add_module(f"norm{i}", nn.BatchNorm2d(c_in))
            self.add_module(f"conv{i}", _conv(c_in, c_out, kernel, stride))
        in_channels, out_channels = units[0][0], units[-1][1]
        stride = max(u[3] for u in units)
        self.shortcut = (
            _conv(in_channels, out_channels, 1, stride) if stride != 1 or in_channels != out_channels else None
        )
        self.act = nn.ReLU(inplace=True)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.norm1(x))
        # The projection shortcut reads the activated input; the identity reads x itself.
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        for i in range(2, self.n_units + 1):
            out = getattr(self, f"conv{i}")(self.act(getattr(self, f"norm{i}")(out)))
        return self.drop_path(out) + skip

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """(conv_i, norm_i+1): each BN after the first reads only the conv before it (foldable in eval mode)."""
        return [(f"conv{i}", f"norm{i + 1}") for i in range(1, self.n_units)]


class PreActBottleneck(PreActBlock):
    """BN-ReLU-1x1(width), BN-ReLU-3x3(width, stride), BN-ReLU-1x1(expansion*width)."""

    def __init__(self, in_channels: int, width: int, *, expansion: int = 4, stride: int = 1, drop_path: float = 0.0):
        super().__init__(
            [(in_channels, width, 1, 1), (width, width, 3, stride), (width, width * expansion, 1, 1)],
            drop_path=drop_path,
        )


class PreActBasic(PreActBlock):
    """BN-ReLU-3x3(expansion*width, stride), BN-ReLU-3x3(expansion*width) (expansion is 1 in ResNet-18)."""

    def __init__(self, in_channels: int, width: int, *, expansion: int = 1, stride: int = 1, drop_path: float = 0.0):
        out = width * expansion
        super().__init__([(in_channels, out, 3, stride), (out, out, 3, 1)], drop_path=drop_path)


def conv_block(block: ConvBlock, in_channels: int, width: int, *, stride: int, drop_path: float) -> PreActBlock:
    """The module for one IR conv block."""
    cls = PreActBottleneck if block.variant == "bottleneck" else PreActBasic
    return cls(in_channels, width, expansion=block.expansion, stride=stride, drop_path=drop_path)
