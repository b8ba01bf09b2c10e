"""Residual conv blocks, pre-activation (He et al., "Identity Mappings in Deep Residual Networks")
and post-activation (He et al., "Deep Residual Learning for Image Recognition").

Pre-activation means every conv is preceded by BN -> ReLU and the block ends on a conv, so
the residual stream is never normalised: that is what lets an MSA block (which also ends on
a plain projection) be swapped in for a conv block one for one. Where the shape changes, the
shortcut is a 1x1 conv (with the stride) applied to the *activated* input, i.e. it shares the
block's first BN-ReLU; elsewhere it is the identity.

Post-activation (`conv(preact=false)`, the reference implementation's models/resnet.py) means
conv -> BN (-> ReLU but after the last conv), the shortcut added, then ReLU; a projection
shortcut is a 1x1 conv -> BN on the block's raw input.
"""

from typing import TYPE_CHECKING

import torch
from timm.layers import DropPath
from torch import nn

from archdsl.ir import ConvBlock
from archdsl.nn.blocks.tokens import MAP

Units = list[tuple[int, int, int, int]]  # (in, out, kernel, stride) per conv
# The most convs a block chains (bottleneck: 3). forward() names each unit, so that TorchScript,
# which has no getattr with a computed name, compiles it; `hasattr` leaves out the absent ones.
MAX_UNITS = 3


def _check_units(units: Units) -> None:
    if not 1 <= len(units) <= MAX_UNITS:
        raise ValueError(f"a conv block chains 1 to {MAX_UNITS} convs, got {len(units)}")


def _conv(in_channels: int, out_channels: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    # No bias: every conv is followed (in the next block, or in the head) by a BN.
    return nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=kernel // 2, bias=False)


class _ResidualConvBlock(nn.Module):
    """What both residual conv blocks are: 1 to MAX_UNITS convs, each with its BN, named
    `conv1, norm1, ...` (so that state-dict keys read like the block description in
    docs/reference.md), a 1x1 projection shortcut (`shortcut`, with the stride) where the shape
    changes, the drop path on the residual branch, and one ReLU module for every activation."""

    kind = "conv"
    layout = MAP
    if TYPE_CHECKING:  # added by name below (conv1, norm1, ...); TorchScript reads no module annotations
        conv1: nn.Conv2d
        norm1: nn.BatchNorm2d
        conv2: nn.Conv2d
        norm2: nn.BatchNorm2d
        conv3: nn.Conv2d
        norm3: nn.BatchNorm2d

    def __init__(self, units: Units, *, preact: bool, drop_path: float) -> None:
        super().__init__()
        _check_units(units)
        self.n_units = len(units)
        for i, (c_in, c_out, kernel, stride) in enumerate(units, start=1):
            # Pre-activation normalises what goes into a conv, post-activation what comes out.
            if preact:
                self.add_module(f"norm{i}", nn.BatchNorm2d(c_in))
            self.add_module(f"conv{i}", _conv(c_in, c_out, kernel, stride))
            if not preact:
                self.add_module(f"norm{i}", nn.BatchNorm2d(c_out))
        in_channels, out_channels = units[0][0], units[-1][1]
        stride = max(u[3] for u in units)
        projects = stride != 1 or in_channels != out_channels
        self.shortcut = _conv(in_channels, out_channels, 1, stride) if projects else None
        if not preact:  # post-activation normalises the projection too
            self.shortcut_norm = nn.BatchNorm2d(out_channels) if projects else None
        self.act = nn.ReLU(inplace=True)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()


class PreActBlock(_ResidualConvBlock):
    """A pre-activation block: a chain of BN-ReLU-conv units plus the shortcut, which reads the
    activated input (the first BN-ReLU's output) where it projects, the input itself elsewhere.

    `units` lists (in, out, kernel, stride) per conv. Module names are `norm1, conv1, ...`
    (PreActBottleneck and PreActBasic are the two chains a spec names).
    """

    def __init__(self, units: Units, *, drop_path: float = 0.0) -> None:
        super().__init__(units, preact=True, drop_path=drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.norm1(x))
        # The projection shortcut reads the activated input; the identity reads x itself.
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        if hasattr(self, "conv2"):
            out = self.conv2(self.act(self.norm2(out)))
        if hasattr(self, "conv3"):
            out = self.conv3(self.act(self.norm3(out)))
        return self.drop_path(out) + skip

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """(conv_i, norm_i+1): each BN after the first reads only the conv before it (foldable in eval mode)."""
        return [(f"conv{i}", f"norm{i + 1}") for i in range(1, self.n_units)]


def bottleneck_units(in_channels: int, width: int, expansion: int, stride: int) -> Units:
    """1x1(width), 3x3(width, stride), 1x1(expansion*width)."""
    return [(in_channels, width, 1, 1), (width, width, 3, stride), (width, width * expansion, 1, 1)]


def basic_units(in_channels: int, width: int, expansion: int, stride: int) -> Units:
    """3x3(expansion*width, stride), 3x3(expansion*width) (expansion is 1 in ResNet-18)."""
    out = width * expansion
    return [(in_channels, out, 3, stride), (out, out, 3, 1)]


class PreActBottleneck(PreActBlock):
    """BN-ReLU-1x1(width), BN-ReLU-3x3(width, stride), BN-ReLU-1x1(expansion*width)."""

    def __init__(self, in_channels: int, width: int, *, expansion: int = 4, stride: int = 1, drop_path: float = 0.0):
        super().__init__(bottleneck_units(in_channels, width, expansion, stride), drop_path=drop_path)


class PreActBasic(PreActBlock):
    """BN-ReLU-3x3(expansion*width, stride), BN-ReLU-3x3(expansion*width) (expansion is 1 in ResNet-18)."""

    def __init__(self, in_channels: int, width: int, *, expansion: int = 1, stride: int = 1, drop_path: float = 0.0):
        super().__init__(basic_units(in_channels, width, expansion, stride), drop_path=drop_path)


class PostActBlock(_ResidualConvBlock):
    """A post-activation block: conv-BN-ReLU units, the last without its ReLU, plus the shortcut, then ReLU.

    Module names are `conv1, norm1, conv2, norm2, ...`; a projection shortcut is `shortcut`
    (1x1 conv with the stride) followed by `shortcut_norm` (BN), reading the raw input.
    """

    def __init__(self, units: Units, *, drop_path: float = 0.0) -> None:
        super().__init__(units, preact=False, drop_path=drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x
        if self.shortcut is not None and self.shortcut_norm is not None:
            skip = self.shortcut_norm(self.shortcut(x))
        # conv-BN, with a ReLU between units (not after the last: the sum comes first).
        out = self.norm1(self.conv1(x))
        if hasattr(self, "conv2"):
            out = self.norm2(self.conv2(self.act(out)))
        if hasattr(self, "conv3"):
            out = self.norm3(self.conv3(self.act(out)))
        return self.act(self.drop_path(out) + skip)

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """(conv_i, norm_i) and the shortcut's: every BN reads only the conv before it (foldable in eval mode)."""
        pairs = [(f"conv{i}", f"norm{i}") for i in range(1, self.n_units + 1)]
        return pairs + ([("shortcut", "shortcut_norm")] if self.shortcut is not None else [])


def conv_block(
    block: ConvBlock, in_channels: int, width: int, *, stride: int, drop_path: float
) -> PreActBlock | PostActBlock:
    """The module for one IR conv block."""
    if not block.preact:
        units = bottleneck_units if block.variant == "bottleneck" else basic_units
        return PostActBlock(units(in_channels, width, block.expansion, stride), drop_path=drop_path)
    cls = PreActBottleneck if block.variant == "bottleneck" else PreActBasic
    return cls(in_channels, width, expansion=block.expansion, stride=stride, drop_path=drop_path)
