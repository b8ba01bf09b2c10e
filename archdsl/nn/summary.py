"""Per-block shapes, parameter counts and FLOPs, computed from the IR alone (no torch).

FLOPs are 2 x multiply-accumulates of the convolutions, the classifier's linear layer
and the two attention matmuls (QK^T and AV, per window), which is what the reference
figures in docs/reference.md count (torch's `FlopCounterMode` with the math attention kernel
agrees; it misses fused attention kernels, hence the exact count here). Normalisation,
activations, softmax, bias adds and the residual additions are not counted.

The parameter formulas mirror `archdsl.nn.blocks` one for one; a test cross-checks them
against built models.
"""

from __future__ import annotations

from dataclasses import dataclass

from archdsl.ir import Arch, BlockShape, ConvBlock, block_path, block_shapes, feature_channels


@dataclass(frozen=True)
class BlockSummary:
    stage: str
    index: int
    kind: str  # "conv" or "msa"
    out_shape: tuple[int, int, int]  # (channels, height, width)
    params: int
    flops: int  # per image

    @property
    def qualified_name(self) -> str:
        return block_path(self.stage, self.index)


@dataclass(frozen=True)
class LayerSummary:
    """The stem or the classifier head."""

    name: str
    out_shape: tuple[int, ...]
    params: int
    flops: int


@dataclass(frozen=True)
class ModelSummary:
    name: str
    input_shape: tuple[int, int, int]
    stem: LayerSummary
    blocks: tuple[BlockSummary, ...]
    head: LayerSummary

    @property
    def params(self) -> int:
        return self.stem.params + sum(b.params for b in self.blocks) + self.head.params

    @property
    def flops(self) -> int:
        return self.stem.flops + sum(b.flops for b in self.blocks) + self.head.flops

    @property
    def n_msa(self) -> int:
        return sum(b.kind == "msa" for b in self.blocks)


def _bn(channels: int) -> int:
    return 2 * channels  # weight and bias (running stats are buffers)


def _needs_projection(shape: BlockShape) -> bool:
    return shape.stride != 1 or shape.in_channels != shape.out_channels


def _conv_block(shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of a pre-activation bottleneck or basic block."""
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
    params = sum(_bn(ci) + ci * co * k for ci, co, k, _ in convs)
    macs = sum(ci * co * k * hw for ci, co, k, hw in convs)
    if _needs_projection(shape):
        params += c_in * c_out
        macs += c_in * c_out * hw_out
    return params, macs


def _msa_block(shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of an AlterNet MSA block; attention matmuls counted exactly."""
    block = shape.block
    c_in, c_out = shape.in_channels, shape.out_channels
    height, wide = shape.out_size
    hw = height * wide
    inner = block.heads * block.dim_head
    win_h, win_w = (block.window, block.window) if block.window is not None else (height, wide)
    tokens = win_h * win_w
    params = (
        _bn(c_in)
        + c_in * width  # 1x1 conv, no bias
        + _bn(width)
        + width * inner  # q
        + width * 2 * inner  # k, v
        + inner * c_out
        + c_out  # output projection with bias
        + (2 * win_h - 1) * (2 * win_w - 1)  # relative-position bias table, shared by heads
    )
    macs = hw * (c_in * width + width * 3 * inner + inner * c_out)
    # Per window: QK^T and AV, each heads x tokens x tokens x dim_head; hw / tokens windows.
    macs += 2 * block.heads * tokens * block.dim_head * hw
    if c_in != c_out:
        params += c_in * c_out
        macs += c_in * c_out * hw
    return params, macs


def summarize(arch: Arch) -> ModelSummary:
    """Shapes, params and FLOPs per block of `arch` (assumed valid), plus stem and head."""
    h, w = arch.input.height, arch.input.width
    stem_c = arch.stem.channels
    stem_params = arch.input.channels * stem_c * 9
    stem = LayerSummary("stem", (stem_c, h, w), stem_params, 2 * stem_params * h * w)
    widths = {stage.name: stage.width for stage in arch.stages}
    blocks = []
    for shape in block_shapes(arch):
        kind = shape.block.kind
        count = _conv_block if kind == "conv" else _msa_block
        params, macs = count(shape, widths[shape.stage])
        out_shape = (shape.out_channels, *shape.out_size)
        blocks.append(BlockSummary(shape.stage, shape.index, kind, out_shape, params, 2 * macs))
    features = feature_channels(arch)
    head = LayerSummary(
        "head", (arch.classes,), _bn(features) + features * arch.classes + arch.classes, 2 * features * arch.classes
    )
    return ModelSummary(arch.name, (arch.input.channels, h, w), stem, tuple(blocks), head)
