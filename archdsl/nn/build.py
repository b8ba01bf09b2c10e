"""IR -> nn.Module: the compiler.

`build(arch)` turns a validated `archdsl.ir.Arch` into an `ArchNet` whose module tree
mirrors the spec: `stem`, `stages.<stage>.<index>` (one module per IR block, each with the
`.kind` of its IR block: "conv", "msa", "attn", "mlp", "merge", "pool", "smooth") and `head`.
The IR rides along as `model.arch`, so a model always knows how to rebuild itself
(checkpoints store it beside the weights).

Blocks read feature maps or token sequences (`archdsl.nn.blocks.tokens`); each stage hands
every block its input in the layout it reads, and the head follows the last block's layout
(BN-ReLU-pool-linear after maps, LayerNorm-pool-linear after tokens; pool-linear with `norm=false`).

An `ArchNet` is also a timm model: `num_classes`, `num_features`, `get_classifier`,
`reset_classifier`, `forward_features`/`forward_head`, `forward_intermediates`,
`feature_info` and `pretrained_cfg` mean what they mean in timm, so timm's train script,
feature extraction and fine-tuning work on it (`archdsl.nn.timm_models` registers the specs
with timm's registry).
"""

# No `from __future__ import annotations` here: torch.fx copies `forward`'s annotations into
# the code of its graphs, which TorchScript then compiles (timm's FX + TorchScript test).
from collections.abc import Iterator, Sequence
from os import PathLike
from typing import Any, cast

import torch
from timm.models._features import feature_take_indices  # what timm's own models use
from torch import nn

from archdsl.errors import UserError
from archdsl.ir import (
    Arch,
    ExtBlock,
    block_path,
    block_shapes,
    feature_channels,
    head_layout,
    stage_shapes,
)
from archdsl.nn import init_schemes
from archdsl.nn._block_modules import module_for
from archdsl.nn.blocks.layers import ClassifierHead, TokenHead, stem
from archdsl.nn.blocks.tokens import MAP, TOKENS, BlockSequence, convert
from archdsl.nn.timm_cfg import (
    CLASSIFIER,
    feature_info,
    feature_layouts,
    feature_sizes,
    per_block_features,
    pretrained_cfg,
)

# Parameter names (the last part) that get no weight decay, whatever their shape: what timm's
# transformers list in their `no_weight_decay()`.
NO_WEIGHT_DECAY = ("pos_embed", "cls_token", "relative_position_bias_table")


class ArchNet(nn.Module):
    """A network compiled from an `Arch`. Use `build` or `create_model` to make one."""

    def __init__(self, arch: Arch, *, drop_path: float = 0.0, drop_rate: float = 0.0) -> None:
        super().__init__()
        self.arch = arch
        self.stem = stem(arch)
        shapes = block_shapes(arch)
        rates = drop_path_rates(drop_path, len(shapes))
        stages: dict[str, list[nn.Module]] = {stage.name: [] for stage in arch.stages}
        in_sizes: dict[str, list[tuple[int, int]]] = {stage.name: [] for stage in arch.stages}
        widths = {stage.name: stage.width for stage in arch.stages}
        for shape, rate in zip(shapes, rates, strict=True):
            stages[shape.stage].append(module_for(arch, shape, widths[shape.stage], rate))
            in_sizes[shape.stage].append(shape.in_size)
        self.stages = nn.ModuleDict()
        layout = cast(str, self.stem.layout)  # each stage receives the layout the one before it ends in
        for name in stages:
            sequence = BlockSequence(stages[name], in_sizes[name], layout)
            self.stages[name] = sequence
            layout = sequence.out_layout
        features = feature_channels(arch)
        self.head: TokenHead | ClassifierHead
        if head_layout(arch) == TOKENS:
            self.head = TokenHead(
                features,
                arch.classes,
                class_token=arch.class_token,
                eps=arch.norm.eps,
                drop_rate=drop_rate,
                norm=arch.head_norm,
            )
        else:
            self.head = ClassifierHead(features, arch.classes, drop_rate=drop_rate, norm=arch.head_norm)
        # The map size the head receives, should it have to turn tokens back into a map; the
        # layouts forward_head converts between, fixed here so that forward scripts and traces.
        self._head_size = stage_shapes(arch)[-1].out_size if arch.stages else (0, 0)
        self._head_layout = self.head.layout
        self._features_layout = self._end_layout()
        # timm's model attributes.
        self.num_classes = arch.classes
        self.num_features = self.head_hidden_size = features
        self.in_chans = arch.input.channels
        self.feature_info = feature_info(arch)
        self._feature_sizes = feature_sizes(arch)
        self._feature_layouts = feature_layouts(arch)
        self.pretrained_cfg = self.default_cfg = pretrained_cfg(arch)
        self._init_weights()

    def _init_weights(self) -> None:
        """Draw the weights as the spec's `init` scheme says (`archdsl.nn.init_schemes`)."""
        init_schemes.initialise(self, self.arch.init)

    def named_blocks(self) -> Iterator[tuple[str, nn.Module]]:
        """(`stages.<stage>.<index>`, block) in model order: the units the analyses report on."""
        for stage_name, stage in self.stages.items():
            for index, block in enumerate(stage.children()):
                yield block_path(stage_name, index), block

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages.values():
            x = stage(x)
        return x

    def _end_layout(self) -> str:
        """The layout `forward_features` ends in: its last stage's, or the stem's."""
        last = cast(BlockSequence, self.stages[list(self.stages)[-1]]) if self.stages else None
        return last.out_layout if last is not None else cast(str, self.stem.layout)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = convert(x, self._features_layout, self._head_layout, self._head_size)
        return self.head(x, pre_logits=pre_logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    # -- timm's interface -------------------------------------------------------------------

    def get_classifier(self, name_only: bool = False) -> nn.Module | str:
        return CLASSIFIER if name_only else self.head.fc

    def no_weight_decay(self) -> set[str]:
        """The parameters weight decay spares besides the 1-d ones (biases, norms), as in timm's ViT,
        PiT and Swin: position embeddings, class tokens, relative-position tables. timm's
        `create_optimizer_v2` reads it (archdsl's recipes and timm's train.py use that factory)."""
        return {name for name, _ in self.named_parameters() if name.rsplit(".", 1)[-1] in NO_WEIGHT_DECAY}

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Run every stage's blocks through timm's `checkpoint_seq` (activations recomputed in backward)."""
        for stage in self.stages.values():
            cast(BlockSequence, stage).grad_checkpointing = enable

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new classifier for `num_classes` (0: none, the model returns pooled features).

        `global_pool` as in timm (None keeps the current pooling): `avg`, `max`, `avgmax`, `token`
        (the class token, with `head class`), or `''` (no pooling: with `num_classes=0`, the model
        returns the unpooled map, or every token). The spec's pooling is `token` for `head class`,
        `avg` otherwise; `model.arch` keeps it. With `num_classes > 0`, `model.arch` says the new
        number of classes.
        """
        if global_pool is not None:
            self.head.check_pool(global_pool, num_classes)
        self.head.reset(num_classes, like=next(self.parameters(), torch.empty(0)))  # where the weights are
        if global_pool is not None:
            self.head.set_pool(global_pool)
        self.num_classes = num_classes
        if num_classes > 0:
            init_schemes.init_layer(self.head.fc, self.arch.init)  # drawn as the spec's scheme draws a Linear
            self.arch = self.arch.model_copy(update={"classes": num_classes})

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | Sequence[int] | None = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ) -> list[torch.Tensor] | tuple[torch.Tensor, list[torch.Tensor]]:
        """The feature maps of `feature_info` (stem, then each stage; each block of a one-stage
        model) as timm returns them.

        `indices`: the last n if an int, all if None, else those positions. Token outputs become
        maps (the class token left out). `norm` is accepted for timm's sake: the final norm is the
        head's, which no intermediate passes through.
        """
        if output_fmt not in ("NCHW", "NHWC"):
            raise ValueError(f"output_fmt must be NCHW or NHWC, got {output_fmt!r}")
        take, max_index = feature_take_indices(len(self.feature_info), _index_list(indices))
        intermediates: list[torch.Tensor] = []

        def keep(index: int, value: torch.Tensor) -> None:
            if index in take:
                size, layout = self._feature_sizes[index], self._feature_layouts[index]
                fmap = convert(value, layout, MAP, size, self.arch.prefix_tokens)
                intermediates.append(fmap.permute(0, 2, 3, 1) if output_fmt == "NHWC" else fmap)

        x = self.stem(x)
        stages = list(self.stages.values())
        if per_block_features(self.arch):  # one feature per block of the one stage, as timm's ViT
            stage = cast(BlockSequence, stages[0])
            for index in range(max_index + 1 if stop_early else len(stage)):
                x = stage.step(index, x)
                keep(index, x)
        else:
            keep(0, x)
            for index, module in enumerate(stages[:max_index] if stop_early else stages, start=1):
                x = module(x)
                keep(index, x)
        if intermediates_only:
            return intermediates
        return x, intermediates

    def prune_intermediate_layers(
        self, indices: int | Sequence[int] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        """Drop the stages (blocks, in a one-stage model) after the last wanted feature map, and the
        classifier: timm's `features_only`."""
        take, max_index = feature_take_indices(len(self.feature_info), _index_list(indices))
        if per_block_features(self.arch):
            cast(BlockSequence, next(iter(self.stages.values()))).truncate(max_index + 1)
        for name in list(self.stages)[max_index:] if not per_block_features(self.arch) else []:
            del self.stages[name]
        self._features_layout = self._end_layout()
        if prune_head:
            self.reset_classifier(0)
            if prune_norm:  # the final norm goes; the head still pools what the kept blocks give
                self.head.drop_norm()
        return take


def drop_path_rates(drop_path: float, n_blocks: int) -> list[float]:
    """Stochastic depth growing linearly over all blocks: rate_j = drop_path * j / (N - 1).

    timm's `calculate_drop_path_rates` is the same rule in float32 (`torch.linspace`): it differs
    in the last bits (0.02500000037 for 0.025), and so in the training, from every model built so
    far; tests check the two agree to float32 precision.
    """
    if n_blocks <= 1:
        return [0.0] * n_blocks
    return [drop_path * j / (n_blocks - 1) for j in range(n_blocks)]


def build(arch: Arch, *, drop_path: float = 0.0, drop_rate: float = 0.0, seed: int | None = None) -> ArchNet:
    """Compile a (valid) IR into a model.

    The IR is checked first (`archdsl.lang.checks.ensure_valid`), so an invalid design raises a
    `SpecError` instead of failing inside torch, and its memory is estimated
    (`archdsl.nn.summary.ensure_fits`): a design over the limit raises `DesignTooLarge`.
    `drop_path` is the stochastic depth of the last block (growing linearly from 0),
    `drop_rate` the dropout before the classifier. With `seed`, the weights depend on the seed
    alone (the global RNG is left untouched); without it they come from the global RNG.
    """
    from archdsl.lang.checks import ensure_valid
    from archdsl.nn.summary import ensure_fits

    ensure_valid(arch)
    ensure_fits(arch)  # before a single weight is allocated
    for name, rate in (("drop_path", drop_path), ("drop_rate", drop_rate)):
        if not 0.0 <= rate < 1.0:
            raise UserError(f"{name} must be in [0, 1), got {rate}")
    if seed is None:
        return ArchNet(arch, drop_path=drop_path, drop_rate=drop_rate)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ArchNet(arch, drop_path=drop_path, drop_rate=drop_rate)


def check_registered_blocks(arch: Arch) -> None:
    """The `UserError` that building `arch` would end in because of a registered kind (`archdsl.kinds`):
    its hooks failing, or its module breaking its declared shape (`_block_modules.check_output`). Each
    of its blocks is built alone and run once; the built-in blocks are not built. For the commands
    that make folders (`train`, `search`) to refuse before they make them."""
    from archdsl.nn.summary import ensure_fits

    ensure_fits(arch)  # a block too large to build is refused before it is allocated
    widths = {stage.name: stage.width for stage in arch.stages}
    for shape in block_shapes(arch):
        if isinstance(shape.block, ExtBlock):
            module_for(arch, shape, widths[shape.stage], 0.0)


def create_model(
    spec: Arch | str | PathLike[str],
    *,
    num_classes: int | None = None,
    in_chans: int | None = None,
    img_size: int | Sequence[int] | None = None,
    drop_rate: float = 0.0,
    drop_path_rate: float = 0.0,
    global_pool: str | None = None,
    seed: int | None = None,
    device: Any = None,
    dtype: torch.dtype | None = None,
) -> ArchNet:
    """Build from an `Arch`, a `.arch` path or a built-in spec name (`"alter50"`).

    The keywords are timm's (`timm.create_model` passes them): `num_classes` (0: no classifier),
    `in_chans` and `img_size` change the spec's classes and input, `drop_rate` is the dropout
    before the classifier, `drop_path_rate` the stochastic depth of the last block,
    `global_pool` the pooling (see `ArchNet.reset_classifier`). `seed` makes the weights depend
    on it alone.
    """
    if not isinstance(spec, Arch):
        from archdsl.lang.spec import load_spec

        spec = load_spec(spec)
    arch = with_overrides(spec, num_classes=num_classes or None, in_chans=in_chans, img_size=img_size)
    model = build(arch, drop_path=drop_path_rate, drop_rate=drop_rate, seed=seed)
    try:
        if num_classes == 0:
            model.reset_classifier(0, global_pool)
        elif global_pool is not None:
            model.head.set_pool(global_pool)
    except ValueError as err:
        raise UserError(str(err)) from None
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    return model


def _index_list(indices: int | Sequence[int] | None) -> int | list[int] | None:
    """timm's `feature_take_indices` wants a list where we accept any sequence."""
    return indices if indices is None or isinstance(indices, int) else list(indices)


def with_overrides(
    arch: Arch,
    *,
    num_classes: int | None = None,
    in_chans: int | None = None,
    img_size: int | Sequence[int] | None = None,
) -> Arch:
    """`arch` with another number of classes, input channels or input size (timm's keywords)."""
    update: dict[str, Any] = {}
    if num_classes is not None:
        update["classes"] = _positive("num_classes", num_classes)
    shape: dict[str, int] = {}
    if in_chans is not None:
        shape["channels"] = _positive("in_chans", in_chans)
    if img_size is not None:
        sides = [img_size, img_size] if isinstance(img_size, int) else list(img_size)
        if len(sides) != 2:
            raise UserError(f"img_size must be one side or (height, width), got {img_size!r}")
        shape["height"], shape["width"] = (_positive("img_size", side) for side in sides)
    if shape:
        update["input"] = arch.input.model_copy(update=shape)
    return arch.model_copy(update=update) if update else arch


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{name} must be a positive integer, got {value!r}")
    return value
