"""The typed intermediate representation (IR): the one source of truth of a design.

The IR is what the language lowers to, what the compiler builds from, what the build-up
transforms rewrite, what the search stores per trial and what every checkpoint carries.
It is canonical: repeats are expanded, every default is filled in, so two specs that mean
the same network have equal IRs (and equal `digest()`), whatever their formatting.

The IR only validates *types* (positive integers, known kinds). Whether a design makes
sense (a window tiles its feature map, an MSA does not start a strided stage, ...) is
decided by `archdsl.lang.checks.problems(arch)`, so that the front end can point at the
offending source span and programmatic users get the same checks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConvBlock(_Node):
    """A pre-activation residual conv block (bottleneck or basic)."""

    kind: Literal["conv"] = "conv"
    variant: Literal["bottleneck", "basic"] = "bottleneck"
    expansion: PositiveInt = 4


class MSABlock(_Node):
    """The AlterNet MSA block: BN-GELU-1x1-BN, window attention, residual. No MLP.

    `window=None` means global attention over the whole feature map.
    """

    kind: Literal["msa"] = "msa"
    heads: PositiveInt
    window: PositiveInt | None = None
    dim_head: PositiveInt = 64


Block = Annotated[ConvBlock | MSABlock, Field(discriminator="kind")]


class Stage(_Node):
    name: str
    width: PositiveInt
    stride: PositiveInt
    blocks: tuple[Block, ...]


class Stem(_Node):
    """The CIFAR stem: one 3x3 conv, stride 1, no bias, no norm, no pool."""

    kind: Literal["conv3x3"] = "conv3x3"
    channels: PositiveInt


class InputShape(_Node):
    channels: PositiveInt
    height: PositiveInt
    width: PositiveInt


class Arch(_Node):
    name: str
    input: InputShape
    classes: PositiveInt
    stem: Stem
    conv: ConvBlock = ConvBlock()
    """What a plain `conv` means in this spec (`conv = bottleneck(expansion=4)`)."""
    stages: tuple[Stage, ...]

    def canonical_json(self) -> str:
        """The identity of the design: everything but the arch's own name, keys sorted.

        Stage names stay in: they name the model's modules (state-dict keys) and the
        search's parameters, so renaming a stage makes a different artefact.
        """
        data = self.model_dump(mode="json", exclude={"name"})
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """Canonical content hash (sha256 hex) of the design; stable across formatting."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    @property
    def short_id(self) -> str:
        return self.digest()[:12]

    @property
    def n_blocks(self) -> int:
        return sum(len(s.blocks) for s in self.stages)

    @property
    def n_msa(self) -> int:
        return sum(isinstance(b, MSABlock) for s in self.stages for b in s.blocks)


def block_path(stage: str, index: int) -> str:
    """The module path of a stage's `index`-th block in a built model, e.g. `stages.c3.5`.

    The one spelling of a block's name: state-dict keys, analysis reports and summaries use it.
    """
    return f"stages.{stage}.{index}"


@dataclass(frozen=True)
class BlockShape:
    """Where a block sits and what it maps: channels and feature-map size in and out."""

    stage: str
    index: int  # position inside its stage
    block: ConvBlock | MSABlock
    stride: int
    in_channels: int
    out_channels: int
    in_size: tuple[int, int]  # (height, width)
    out_size: tuple[int, int]

    @property
    def qualified_name(self) -> str:
        """The module path in a built model, e.g. `stages.c3.5`."""
        return block_path(self.stage, self.index)


@dataclass(frozen=True)
class StageShape:
    name: str
    in_channels: int
    out_channels: int
    in_size: tuple[int, int]
    out_size: tuple[int, int]


def _strided(size: int, stride: int) -> int:
    # A 3x3 conv with padding 1 (and the 1x1 shortcut) maps n to ceil(n / stride).
    return -(-size // stride)


def block_out_channels(arch: Arch, stage: Stage, block: ConvBlock | MSABlock, in_channels: int) -> int:
    if isinstance(block, ConvBlock):
        return stage.width * block.expansion
    # An MSA block's output width follows the arch's conv expansion (4*width for
    # bottleneck nets), so that it can replace a conv block one for one.
    return stage.width * arch.conv.expansion


def block_shapes(arch: Arch) -> list[BlockShape]:
    """Shape inference: every block's channels and feature-map size, in model order.

    Pure arithmetic on the IR; raises nothing. Ceil division never reaches 0, so a map
    strided past 1x1 is caught by `archdsl.lang.checks` (a side smaller than the stride).
    """
    shapes: list[BlockShape] = []
    channels = arch.stem.channels
    size = (arch.input.height, arch.input.width)
    for stage in arch.stages:
        for index, block in enumerate(stage.blocks):
            stride = stage.stride if index == 0 else 1
            out_size = (_strided(size[0], stride), _strided(size[1], stride)) if size[0] > 0 else (0, 0)
            out_channels = block_out_channels(arch, stage, block, channels)
            shapes.append(BlockShape(stage.name, index, block, stride, channels, out_channels, size, out_size))
            channels, size = out_channels, out_size
    return shapes


def stage_shapes(arch: Arch) -> list[StageShape]:
    """Per stage: channels and feature-map size in and out (stride applied by its first block)."""
    result: list[StageShape] = []
    shapes = iter(block_shapes(arch))
    channels = arch.stem.channels
    size = (arch.input.height, arch.input.width)
    for stage in arch.stages:
        out_channels = channels
        out_size = (_strided(size[0], stage.stride), _strided(size[1], stage.stride))
        for _ in stage.blocks:
            last = next(shapes)
            out_channels, out_size = last.out_channels, last.out_size
        result.append(StageShape(stage.name, channels, out_channels, size, out_size))
        channels, size = out_channels, out_size
    return result


def feature_channels(arch: Arch) -> int:
    """Channels entering the classifier."""
    shapes = stage_shapes(arch)
    return shapes[-1].out_channels if shapes else arch.stem.channels
