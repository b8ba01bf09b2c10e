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
from abc import abstractmethod
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Tag,
    model_validator,
)

from archdsl import kinds


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


ConvVariant = Literal["bottleneck", "basic"]
# What a block reads and writes: a feature map (B, C, H, W) or a token sequence (B, tokens, C).
Layout = Literal["map", "tokens"]
# Where a block's output channels come from: its stage's width, or its input ("keep").
ChannelRule = Literal["width", "keep"]


class _Block(_Node):
    """A block of a stage. Beside its fields, each kind declares its shape rule here, once, and shape
    inference, the checks, the printer and the compiler ask the block instead of testing its kind:

    - `layout`: what it reads and writes (`Layout`);
    - `downsamples`: whether it applies its stage's stride (so may start a strided stage);
    - `channels`: whether its output channels come from its stage's width (`ChannelRule`);
    - `out_channels(arch, stage, in_channels)`: how many (the width, unless the kind says otherwise);
    - `attention`: whether it is an attention block (`Arch.n_msa`, the analysis' shading);
    - `follows_conv`: whether it reads the spec's `conv = ...` setting (so the printer writes it).

    The built-in kinds declare them as class variables, which are not fields: the IR's serialised
    form (and so every digest) is its fields alone. `ExtBlock` answers from its registered declaration.
    """

    attention: ClassVar[bool] = False
    follows_conv: ClassVar[bool] = False

    @property
    @abstractmethod
    def layout(self) -> Layout: ...

    @property
    @abstractmethod
    def downsamples(self) -> bool: ...

    @property
    @abstractmethod
    def channels(self) -> ChannelRule: ...

    def out_channels(self, arch: Arch, stage: Stage, in_channels: int) -> int:
        """The channels it outputs where it sits, given the channels it receives."""
        return stage.width if self.channels == "width" else in_channels


class ConvBlock(_Block):
    """A residual conv block (bottleneck or basic).

    `preact=True`: pre-activation (BN-ReLU before each conv, nothing after the sum: the AlterNet's
    and PreResNet's); `preact=False`: post-activation (conv-BN, ReLU after the sum, a BN on the
    projection shortcut: the original ResNet's).
    """

    kind: Literal["conv"] = "conv"
    variant: ConvVariant = "bottleneck"
    expansion: PositiveInt = 4
    preact: bool = True

    layout: ClassVar[Layout] = "map"
    downsamples: ClassVar[bool] = True
    channels: ClassVar[ChannelRule] = "width"
    follows_conv: ClassVar[bool] = True  # a plain `conv` in a stage is the setting

    def out_channels(self, arch: Arch, stage: Stage, in_channels: int) -> int:
        return stage.width * self.expansion


class MSABlock(_Block):
    """The AlterNet MSA block: BN-GELU-1x1-BN, window attention, residual. No MLP.

    `window=None` means global attention over the whole feature map.
    """

    kind: Literal["msa"] = "msa"
    heads: PositiveInt
    window: PositiveInt | None = None
    dim_head: PositiveInt = 64

    layout: ClassVar[Layout] = "map"
    downsamples: ClassVar[bool] = False
    channels: ClassVar[ChannelRule] = "width"
    attention: ClassVar[bool] = True
    follows_conv: ClassVar[bool] = True  # its channels follow the setting's expansion

    def out_channels(self, arch: Arch, stage: Stage, in_channels: int) -> int:
        # An MSA block's output width follows the arch's conv expansion (4*width for
        # bottleneck nets), so that it can replace a conv block one for one.
        return stage.width * arch.conv.expansion


class AttnBlock(_Block):
    """The transformer MSA block (pre-norm): x + DropPath(MSA(LayerNorm(x))) on tokens. No MLP.

    Keeps its input's channels. `window=None` and `kernel=None`: global attention (ViT);
    `window=w`: non-overlapping w x w windows, cyclically shifted by `shift` (Swin's W-MSA and
    SW-MSA); `kernel=k`: each token attends to its own k x k neighbourhood (the local MSAs of
    Park & Kim, Fig. 8). `dim_head` is filled in by the front end (channels // heads unless given).
    """

    kind: Literal["attn"] = "attn"
    heads: PositiveInt
    window: PositiveInt | None = None
    kernel: PositiveInt | None = None
    shift: NonNegativeInt = 0
    dim_head: PositiveInt
    qkv_bias: bool = True

    layout: ClassVar[Layout] = "tokens"
    downsamples: ClassVar[bool] = False
    channels: ClassVar[ChannelRule] = "keep"  # a residual block without projection
    attention: ClassVar[bool] = True


class MLPBlock(_Block):
    """The transformer MLP block (pre-norm): x + DropPath(MLP(LayerNorm(x))), hidden = ratio x channels."""

    kind: Literal["mlp"] = "mlp"
    ratio: PositiveInt = 4

    layout: ClassVar[Layout] = "tokens"
    downsamples: ClassVar[bool] = False
    channels: ClassVar[ChannelRule] = "keep"  # a residual block without projection


class MergeBlock(_Block):
    """Swin's patch merging: each 2x2 group of tokens concatenated (4C), LayerNorm, Linear to the stage width."""

    kind: Literal["merge"] = "merge"

    layout: ClassVar[Layout] = "tokens"
    downsamples: ClassVar[bool] = True
    channels: ClassVar[ChannelRule] = "width"


class PoolBlock(_Block):
    """PiT's pooling: a depthwise 3x3 conv, stride 2, to the stage width; the class token goes through a Linear."""

    kind: Literal["pool"] = "pool"

    layout: ClassVar[Layout] = "tokens"
    downsamples: ClassVar[bool] = True
    channels: ClassVar[ChannelRule] = "width"


class SmoothBlock(_Block):
    """The fixed 2x2 box blur of "Blurs Behave Like Ensembles" (Park & Kim, ICML 2022). No parameters."""

    kind: Literal["smooth"] = "smooth"

    layout: ClassVar[Layout] = "map"
    downsamples: ClassVar[bool] = False
    channels: ClassVar[ChannelRule] = "keep"  # a fixed blur, channel by channel


class ExtBlock(_Block):
    """A block of a kind registered from outside the package (`archdsl.kinds.register_block`).

    `args` holds every declared argument in declaration order, defaults filled in, so that the
    IR stays canonical. The kind must be registered when an IR holding it is read (a spec, a
    checkpoint, a trial): its declaration gives the block its shape, counts and module.
    """

    kind: str
    args: tuple[tuple[str, int | float | bool | str], ...] = ()

    @model_validator(mode="after")
    def _declared(self) -> ExtBlock:
        kind = kinds.block_kind(self.kind)
        if kind is None:
            raise ValueError(f"unknown block kind {self.kind!r}: {kinds.unknown_kind_hint()}")
        names = tuple(name for name, _ in self.args)
        declared = tuple(arg.name for arg in kind.args)
        if names != declared:
            raise ValueError(f"block kind {self.kind!r} takes the arguments {declared}, got {names}")
        # A stored IR (a checkpoint, a trial) was not read by the front end: its values get the checks here.
        for arg, (_, value) in zip(kind.args, self.args, strict=True):
            problem = arg.problem(value)
            if problem is not None:
                raise ValueError(f"block kind {self.kind!r}: {problem}")
        return self

    @property
    def arguments(self) -> dict[str, int | float | bool | str]:
        """The arguments by name."""
        return dict(self.args)

    @property
    def declaration(self) -> kinds.BlockKind:
        return kinds.require_kind(self.kind)

    @property
    def layout(self) -> Layout:
        return self.declaration.layout

    @property
    def downsamples(self) -> bool:
        return self.declaration.downsamples

    @property
    def channels(self) -> ChannelRule:
        return self.declaration.channels


AnyBlock = ConvBlock | MSABlock | AttnBlock | MLPBlock | MergeBlock | PoolBlock | SmoothBlock | ExtBlock
# The built-in kinds' classes, in the order of their words.
BUILTIN_BLOCKS: tuple[type[_Block], ...] = (
    ConvBlock,
    MSABlock,
    AttnBlock,
    MLPBlock,
    MergeBlock,
    PoolBlock,
    SmoothBlock,
)
assert tuple(cls.model_fields["kind"].default for cls in BUILTIN_BLOCKS) == kinds.BUILTIN_KINDS
# The attention kinds, by name: for what knows a block only by its kind (a summary row, a profile).
ATTENTION_KINDS = frozenset(cls.model_fields["kind"].default for cls in BUILTIN_BLOCKS if cls.attention)


def _block_tag(value: Any) -> str:
    """The union member a block is read as: a built-in kind's own class, else `ExtBlock`."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in kinds.BUILTIN_KINDS else "ext"


Block = Annotated[
    Annotated[ConvBlock, Tag("conv")]
    | Annotated[MSABlock, Tag("msa")]
    | Annotated[AttnBlock, Tag("attn")]
    | Annotated[MLPBlock, Tag("mlp")]
    | Annotated[MergeBlock, Tag("merge")]
    | Annotated[PoolBlock, Tag("pool")]
    | Annotated[SmoothBlock, Tag("smooth")]
    | Annotated[ExtBlock, Tag("ext")],
    Discriminator(_block_tag),
]


class Stage(_Node):
    """A stage: `width` channels (times the conv expansion on its output), the `stride` its first block applies, and
    its blocks in order."""

    name: str
    width: PositiveInt
    stride: PositiveInt
    blocks: tuple[Block, ...]


class Stem(_Node):
    """A conv stem, no bias; with `norm`, BN then ReLU after the conv (the post-activation ResNet's
    stem), else nothing (the first block's BN-ReLU follows).

    `conv3x3` is the CIFAR stem: one 3x3 conv, stride 1, padding 1, no pool. `conv7x7` is the
    ImageNet stem (torchvision's ResNet, the reference's `stem=True`): a 7x7 conv, stride 2,
    padding 3, then a 3x3 max-pool, stride 2, padding 1 (after the BN-ReLU when `norm`), so the
    first block sees a quarter of the input's side.
    """

    kind: Literal["conv3x3", "conv7x7"] = "conv3x3"
    channels: PositiveInt
    norm: bool = False


class PatchStem(_Node):
    """A patch embedding: a `size` x `size` conv with bias (stride `size` unless told), flattened to
    tokens of `channels` dims, optionally LayerNorm-ed (Swin). `stride < size` overlaps (PiT)."""

    kind: Literal["patch"] = "patch"
    size: PositiveInt
    channels: PositiveInt
    stride: PositiveInt
    norm: bool = False


AnyStem = Stem | PatchStem


class Position(_Node):
    """Position terms of the transformer blocks.

    `absolute`: a learned embedding added to the stem's tokens (with `class_token`, the class
    token has a position too, as in ViT; without, only the patches do, as in PiT).
    `relative`: every `attn` block has a learned bias per head and relative offset (Swin).
    The AlterNet `msa` always has its own relative table, whatever this says.
    """

    kind: Literal["none", "absolute", "relative"] = "none"
    class_token: bool = True


class Norm(_Node):
    """The LayerNorm of the token blocks, patch merging, patch stem and token head."""

    kind: Literal["layernorm"] = "layernorm"
    eps: PositiveFloat = 1e-6


# How a new model's weights are drawn (the spec's `init` setting; `archdsl.nn.init_schemes` draws them).
# `torch`: PyTorch's layer defaults, as the reference AlterNet/ResNet and timm's PiT start;
# `timm`: timm's ViT/Swin init (truncated-normal Linear weights, zero biases).
InitScheme = Literal["torch", "timm"]
INIT_SCHEMES: tuple[InitScheme, ...] = ("torch", "timm")
DEFAULT_INIT: InitScheme = "torch"


class InputShape(_Node):
    """The image size a design takes: channels x height x width (a spec's `input 3x32x32`)."""

    channels: PositiveInt
    height: PositiveInt
    width: PositiveInt


class Arch(_Node):
    """A whole design: input shape, classes, stem, the meaning of a plain `conv`, and the stages.

    Frozen and canonical (every default filled in, repeats expanded): two specs that mean the
    same network give equal `Arch`s and the same `digest()`. Build it from text with
    `archdsl.load_spec`/`parse_spec`, compile it with `archdsl.create_model`.
    """

    name: str
    input: InputShape
    classes: PositiveInt
    stem: Annotated[AnyStem, Field(discriminator="kind")]
    conv: ConvBlock = ConvBlock()
    """What a plain `conv` means in this spec (`conv = bottleneck(expansion=4)`)."""
    stages: tuple[Stage, ...]
    head: Literal["mean", "class"] = "mean"
    """`mean`: the classifier averages the final map; `class`: a class token is prepended to the
    stem's tokens, carried through every block, and the classifier reads it."""
    pos: Position = Position()
    norm: Norm = Norm()
    init: InitScheme = DEFAULT_INIT
    """How a new model's weights are drawn (`INIT_SCHEMES`); a checkpoint's weights are its own."""
    head_norm: bool = True
    """Whether the classifier starts with a norm (BN-ReLU after maps, LayerNorm after tokens);
    `head mean(norm=false)` pools and classifies only, as the post-activation ResNet does."""

    def canonical_json(self) -> str:
        """The identity of the design: everything but the arch's own name, keys sorted.

        Stage names stay in: they name the model's modules (state-dict keys) and the
        search's parameters, so renaming a stage makes a different artefact.
        """
        data = self.model_dump(mode="json", exclude={"name"})
        # Fields added after the first designs (the transformer words, `init`) stay out at their
        # defaults, so that the designs written before them keep their identity (digest).
        for name in _LATER_FIELDS:
            if getattr(self, name) == type(self).model_fields[name].default:
                del data[name]
        _drop_later_node_fields(data)
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
        """Attention blocks of either kind: AlterNet `msa` and transformer `attn`."""
        return sum(b.attention for s in self.stages for b in s.blocks)

    @property
    def class_token(self) -> bool:
        return self.head == "class"

    @property
    def prefix_tokens(self) -> int:
        """Tokens before the patches in every token sequence: the class token, if any."""
        return 1 if self.class_token else 0


_LATER_FIELDS = ("head", "pos", "norm", "head_norm", "init")


def _later_node_fields() -> dict[str, dict[str, object]]:
    """Fields added to nested nodes after the node itself, with their defaults, by the node's kind."""
    added = ((ConvBlock, ("preact",)), (Stem, ("norm",)))
    return {
        node.model_fields["kind"].default: {f: node.model_fields[f].default for f in fields} for node, fields in added
    }


_LATER_NODE_FIELDS = _later_node_fields()


def _drop_later_node_fields(data: object) -> None:
    """Leave the later fields of nested nodes (a conv's `preact`, the conv stem's `norm`) out of a
    dump at their defaults, in place, for the same reason as `_LATER_FIELDS`."""
    if isinstance(data, dict):
        for key, default in _LATER_NODE_FIELDS.get(str(data.get("kind")), {}).items():
            if key in data and data[key] == default:
                del data[key]
        for value in data.values():
            _drop_later_node_fields(value)
    elif isinstance(data, list):
        for value in data:
            _drop_later_node_fields(value)


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
    block: AnyBlock
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
    """A stage's channels and feature-map size in and out (its stride applied by its first block)."""

    name: str
    in_channels: int
    out_channels: int
    in_size: tuple[int, int]
    out_size: tuple[int, int]


def _strided(size: int, stride: int) -> int:
    # A 3x3 conv with padding 1 (and the 1x1 shortcut) maps n to ceil(n / stride); so do
    # patch merging (which pads an odd side) and PiT's pooling (3x3, padding 1, stride 2).
    return -(-size // stride)


def stem_out_size(arch: Arch) -> tuple[int, int]:
    """The map the stem hands to the first block (0 on a side where the patch does not fit)."""
    height, width = arch.input.height, arch.input.width
    stem = arch.stem
    if isinstance(stem, Stem):
        if stem.kind == "conv3x3":
            return height, width  # 3x3, padding 1, stride 1
        # 7x7 conv (padding 3) and 3x3 max-pool (padding 1), both stride 2: each maps n to ceil(n / 2)
        return _strided(_strided(height, 2), 2), _strided(_strided(width, 2), 2)

    def side(n: int) -> int:
        return max(0, (n - stem.size) // stem.stride + 1)  # a conv without padding

    return side(height), side(width)


def placement(arch: Arch, shape: BlockShape) -> kinds.Placement:
    """What a registered kind's `count`, `check` and `build` are told about an `ExtBlock` where it sits."""
    block = shape.block
    assert isinstance(block, ExtBlock)
    width = next(stage.width for stage in arch.stages if stage.name == shape.stage)
    return kinds.Placement(
        args=block.arguments,
        in_channels=shape.in_channels,
        out_channels=shape.out_channels,
        width=width,
        stride=shape.stride,
        in_size=shape.in_size,
        out_size=shape.out_size,
        eps=arch.norm.eps,
        stage=shape.stage,
    )


def block_shapes(arch: Arch) -> list[BlockShape]:
    """Shape inference: every block's channels and feature-map size, in model order.

    Pure arithmetic on the IR; raises nothing. Ceil division never reaches 0, so a map
    strided past 1x1 is caught by `archdsl.lang.checks` (a side smaller than the stride).
    """
    shapes: list[BlockShape] = []
    channels = arch.stem.channels
    size = stem_out_size(arch)
    for stage in arch.stages:
        for index, block in enumerate(stage.blocks):
            stride = stage.stride if index == 0 else 1
            out_size = (_strided(size[0], stride), _strided(size[1], stride)) if size[0] > 0 else (0, 0)
            out_channels = block.out_channels(arch, stage, channels)
            shapes.append(BlockShape(stage.name, index, block, stride, channels, out_channels, size, out_size))
            channels, size = out_channels, out_size
    return shapes


def stage_shapes(arch: Arch) -> list[StageShape]:
    """Per stage: channels and feature-map size in and out (stride applied by its first block)."""
    result: list[StageShape] = []
    shapes = iter(block_shapes(arch))
    channels = arch.stem.channels
    size = stem_out_size(arch)
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


def head_layout(arch: Arch) -> Layout:
    """ "map" or "tokens": what the classifier receives, so which norm it starts with (BN or LayerNorm)."""
    last = arch.stages[-1].blocks[-1] if arch.stages and arch.stages[-1].blocks else None
    if last is None:
        return "tokens" if isinstance(arch.stem, PatchStem) else "map"
    return last.layout
