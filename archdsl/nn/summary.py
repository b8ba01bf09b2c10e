"""Per-block shapes, parameter counts and FLOPs, computed from the IR alone (no torch).

FLOPs are 2 x multiply-accumulates of the convolutions, the linear layers (classifier,
qkv and output projections, MLPs, patch merging) and the two attention matmuls (QK^T and
AV, per window or over the whole sequence), which is what torch's `FlopCounterMode` counts
with the math attention kernel (it misses fused attention kernels, hence the exact count
here), and what the reference figures in docs/reference.md count. Normalisation,
activations, softmax, pooling, the fixed `smooth` blur, bias and position adds and the
residual additions are not counted.

The parameter formulas mirror `archdsl.nn.blocks` one for one; a test cross-checks them
against built models.
"""

from __future__ import annotations

from dataclasses import dataclass

from archdsl.errors import UserError
from archdsl.ir import (
    ATTENTION_KINDS,
    Arch,
    BlockShape,
    PatchStem,
    block_path,
    block_shapes,
    feature_channels,
    head_layout,
    stem_out_size,
)
from archdsl.lang import words
from archdsl.lang.words.units import bn as _bn
from archdsl.lang.words.units import linear as _linear
from archdsl.lang.words.units import ln as _ln

# The one memory limit (docs/compiler.md): a design whose weights plus one image's
# activations are estimated above it is refused before anything is allocated. Real designs
# are far below (Alter-ResNet-50: 0.12 GiB of weights, 0.007 GiB per 32x32 image); absurd ones
# (a width of 10^9, a 2^31 x 2^31 input) would otherwise fail deep inside torch, or swap.
MEMORY_LIMIT_BYTES = 16 * 2**30
BYTES_PER_VALUE = 4  # float32


@dataclass(frozen=True)
class BlockSummary:
    """One block of a summary: where it sits, its kind, its output shape (C, H, W), parameters and FLOPs per image."""

    stage: str
    index: int
    kind: str  # the IR block's kind: "conv", "msa", "attn", "mlp", "merge", "pool", "smooth" or a registered one
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
    # the stem: "conv3x3", "conv7x7" or "patch"; the head: "bn-gap-fc", "ln-gap-fc", "ln-class-fc", and without a
    # norm "gap-fc", "class-fc"
    kind: str
    out_shape: tuple[int, ...]
    params: int
    flops: int


@dataclass(frozen=True)
class ModelSummary:
    """Per-layer shapes, parameters and FLOPs of a design, computed from its IR (`summarize`); `.params` and `.flops`
    are the totals."""

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
        return sum(b.kind in ATTENTION_KINDS for b in self.blocks)


def _block(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of one block."""
    return words.word(shape.block.kind).count(arch, shape, width)


def _stem(arch: Arch) -> LayerSummary:
    stem = arch.stem
    height, width = stem_out_size(arch)
    c_in = arch.input.channels
    if not isinstance(stem, PatchStem):
        side = 3 if stem.kind == "conv3x3" else 7
        conv = c_in * stem.channels * side**2
        params = conv + (_bn(stem.channels) if stem.norm else 0)
        if stem.kind == "conv7x7":  # the conv (stride 2) works on ceil(n / 2); the max-pool after it has no MACs
            height, width = -(-arch.input.height // 2), -(-arch.input.width // 2)
        flops = 2 * conv * height * width
        return LayerSummary("stem", stem.kind, (stem.channels, *stem_out_size(arch)), params, flops)
    c = stem.channels
    conv = c_in * c * stem.size**2
    params = conv + c + (_ln(c) if stem.norm else 0) + (c if arch.class_token else 0)
    if arch.pos.kind == "absolute":
        params += (height * width + (1 if arch.class_token and arch.pos.class_token else 0)) * c
    return LayerSummary("stem", "patch", (c, height, width), params, 2 * conv * height * width)


def _head(arch: Arch) -> LayerSummary:
    features = feature_channels(arch)
    fc = _linear(features, arch.classes)
    flops = 2 * features * arch.classes
    if head_layout(arch) == "tokens":
        kind = "class-fc" if arch.class_token else "gap-fc"
        norm = _ln(features) if arch.head_norm else 0
        return LayerSummary("head", f"ln-{kind}" if arch.head_norm else kind, (arch.classes,), norm + fc, flops)
    if not arch.head_norm:
        return LayerSummary("head", "gap-fc", (arch.classes,), fc, flops)
    return LayerSummary("head", "bn-gap-fc", (arch.classes,), _bn(features) + fc, flops)


def summarize(arch: Arch) -> ModelSummary:
    """Shapes, params and FLOPs per block of `arch` (assumed valid), plus stem and head."""
    widths = {stage.name: stage.width for stage in arch.stages}
    blocks = []
    for shape in block_shapes(arch):
        params, macs = _block(arch, shape, widths[shape.stage])
        out_shape = (shape.out_channels, *shape.out_size)
        blocks.append(BlockSummary(shape.stage, shape.index, shape.block.kind, out_shape, params, 2 * macs))
    input_shape = (arch.input.channels, arch.input.height, arch.input.width)
    return ModelSummary(arch.name, input_shape, _stem(arch), tuple(blocks), _head(arch))


@dataclass(frozen=True)
class MemoryEstimate:
    """What building a design and running one image through it takes, in bytes (float32).

    `activations` counts every block's output and every attention map (heads x tokens x
    tokens per window) of one image, which is what training keeps for the backward pass;
    the real peak is a small multiple of it (normalisation and activation outputs).
    """

    weights: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.activations


def memory_estimate(summary: ModelSummary, arch: Arch) -> MemoryEstimate:
    """What building `arch` and running one image through it would hold: the weights, and the
    activations (block outputs, MLP hidden layers, attention maps heads x queries x keys, and
    what a registered kind declares: `archdsl.kinds.BlockKind.activations`)."""
    values = _numel(summary.stem.out_shape) + _numel(summary.head.out_shape)
    for shape, block in zip(block_shapes(arch), summary.blocks, strict=True):
        # Its output, and what its word says it keeps besides (`archdsl.lang.words.Word.activations`).
        values += _numel(block.out_shape) + words.word(shape.block.kind).activations(arch, shape)
    return MemoryEstimate(weights=BYTES_PER_VALUE * summary.params, activations=BYTES_PER_VALUE * values)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def gib(size: int) -> str:
    """Bytes as GiB, 3 significant digits (`16 GiB`, `0.123 GiB`, `3.73e+09 GiB`)."""
    return f"{size / 2**30:.3g} GiB"


class DesignTooLarge(UserError):
    """The design's estimated memory is over `MEMORY_LIMIT_BYTES`: it is not built."""

    def __init__(self, name: str, estimate: MemoryEstimate, limit: int) -> None:
        super().__init__(
            f"design {name!r} needs about {gib(estimate.total)} ({gib(estimate.weights)} of weights, "
            f"{gib(estimate.activations)} of activations for one image), more than the {gib(limit)} limit",
            hint="use smaller widths, heads, dim_head, classes or input, or fewer blocks",
        )
        self.estimate, self.limit = estimate.total, limit


def ensure_fits(arch: Arch, summary: ModelSummary | None = None) -> MemoryEstimate:
    """The memory estimate of `arch` (assumed valid), or `DesignTooLarge` over the limit."""
    estimate = memory_estimate(summary or summarize(arch), arch)
    if estimate.total > MEMORY_LIMIT_BYTES:
        raise DesignTooLarge(arch.name, estimate, MEMORY_LIMIT_BYTES)
    return estimate
