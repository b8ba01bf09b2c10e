"""IR -> nn.Module: the compiler.

`build(arch)` turns a validated `archdsl.ir.Arch` into an `ArchNet` whose module tree
mirrors the spec: `stem`, `stages.<stage>.<index>` (one module per IR block, each with the
`.kind` of its IR block: "conv", "msa", "attn", "mlp", "merge", "pool", "smooth") and `head`.
The IR rides along as `model.arch`, so a model always knows how to rebuild itself
(checkpoints store it beside the weights).

Blocks read feature maps or token sequences (`archdsl.nn.blocks.tokens`); each stage hands
every block its input in the layout it reads, and the head follows the last block's layout
(BN-ReLU-pool-linear after maps, LayerNorm-pool-linear after tokens).
"""

from __future__ import annotations

from collections.abc import Iterator
from os import PathLike
from typing import Any, cast

import torch
from timm.layers import trunc_normal_
from torch import nn

from archdsl.ir import (
    Arch,
    AttnBlock,
    BlockShape,
    ConvBlock,
    MergeBlock,
    MLPBlock,
    MSABlock,
    PoolBlock,
    block_path,
    block_shapes,
    feature_channels,
    head_layout,
    stage_shapes,
)
from archdsl.nn.blocks import downsample, transformer
from archdsl.nn.blocks.attention import AlterMSABlock
from archdsl.nn.blocks.conv import conv_block
from archdsl.nn.blocks.layers import ClassifierHead, TokenHead, stem
from archdsl.nn.blocks.smoothing import SmoothBlock
from archdsl.nn.blocks.tokens import TOKENS, BlockSequence, to_layout


class ArchNet(nn.Module):
    """A network compiled from an `Arch`. Use `build` or `create_model` to make one."""

    def __init__(self, arch: Arch, *, drop_path: float = 0.0) -> None:
        super().__init__()
        self.arch = arch
        self.stem = stem(arch)
        shapes = block_shapes(arch)
        rates = drop_path_rates(drop_path, len(shapes))
        stages: dict[str, list[nn.Module]] = {stage.name: [] for stage in arch.stages}
        in_sizes: dict[str, list[tuple[int, int]]] = {stage.name: [] for stage in arch.stages}
        widths = {stage.name: stage.width for stage in arch.stages}
        for shape, rate in zip(shapes, rates, strict=True):
            stages[shape.stage].append(_block(arch, shape, widths[shape.stage], rate))
            in_sizes[shape.stage].append(shape.in_size)
        self.stages = nn.ModuleDict({name: BlockSequence(stages[name], in_sizes[name]) for name in stages})
        features = feature_channels(arch)
        self.head: TokenHead | ClassifierHead
        if head_layout(arch) == TOKENS:
            self.head = TokenHead(features, arch.classes, class_token=arch.class_token, eps=arch.norm.eps)
        else:
            self.head = ClassifierHead(features, arch.classes)
        # The map size the head receives, should it have to turn tokens back into a map.
        self._head_size = stage_shapes(arch)[-1].out_size if arch.stages else (0, 0)
        self.num_classes = arch.classes
        self.num_features = features
        self._init_weights()

    def _init_weights(self) -> None:
        # CNN init for convs (kaiming, fan-out as in torchvision/timm ResNets), transformer
        # init (truncated normal 0.02) for linear layers and the attention projections.
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        # Blocks with more than these rules (bias tables, class token, positions) finish their own init.
        for module in self.modules():
            if module is not self and hasattr(module, "init_weights"):
                cast(Any, module).init_weights()

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

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.head(to_layout(x, self.head.layout, self._head_size), pre_logits=pre_logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def _block(arch: Arch, shape: BlockShape, width: int, drop_path: float) -> nn.Module:
    """The module for one IR block, given where it sits."""
    block = shape.block
    if isinstance(block, ConvBlock):
        return conv_block(block, shape.in_channels, width, stride=shape.stride, drop_path=drop_path)
    if isinstance(block, MSABlock):
        return AlterMSABlock(
            block, shape.in_channels, width, shape.out_channels, map_size=shape.out_size, drop_path=drop_path
        )
    eps, prefix = arch.norm.eps, arch.prefix_tokens
    if isinstance(block, AttnBlock):
        relative = arch.pos.kind == "relative"
        return transformer.TransformerAttnBlock(
            block,
            shape.in_channels,
            size=shape.out_size,
            prefix=prefix,
            relative=relative,
            eps=eps,
            drop_path=drop_path,
        )
    if isinstance(block, MLPBlock):
        return transformer.TransformerMLPBlock(
            block, shape.in_channels, size=shape.out_size, prefix=prefix, eps=eps, drop_path=drop_path
        )
    if isinstance(block, MergeBlock):
        return downsample.MergeBlock(
            shape.in_channels, shape.out_channels, in_size=shape.in_size, out_size=shape.out_size, eps=eps
        )
    if isinstance(block, PoolBlock):
        return downsample.PoolBlock(
            shape.in_channels, shape.out_channels, in_size=shape.in_size, out_size=shape.out_size, prefix=prefix
        )
    return SmoothBlock()


def drop_path_rates(drop_path: float, n_blocks: int) -> list[float]:
    """Stochastic depth growing linearly over all blocks: rate_j = drop_path * j / (N - 1)."""
    if n_blocks <= 1:
        return [0.0] * n_blocks
    return [drop_path * j / (n_blocks - 1) for j in range(n_blocks)]


def build(arch: Arch, *, drop_path: float = 0.0, seed: int | None = None) -> ArchNet:
    """Compile a (valid) IR into a model.

    The IR is checked first (`archdsl.lang.checks.ensure_valid`), so an invalid design raises a
    `SpecError` instead of failing inside torch. With `seed`, the weights depend on the
    seed alone (the global RNG is left untouched); without it they come from the global RNG.
    """
    from archdsl.lang.checks import ensure_valid

    ensure_valid(arch)
    if not 0.0 <= drop_path < 1.0:
        from archdsl.errors import UserError

        raise UserError(f"drop_path must be in [0, 1), got {drop_path}")
    if seed is None:
        return ArchNet(arch, drop_path=drop_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ArchNet(arch, drop_path=drop_path)


def create_model(spec: Arch | str | PathLike[str], *, drop_path: float = 0.0, seed: int | None = None) -> ArchNet:
    """Build from an `Arch`, a `.arch` path or a built-in spec name (`"alter50"`); see `build`."""
    if not isinstance(spec, Arch):
        from archdsl.lang.spec import load_spec

        spec = load_spec(spec)
    return build(spec, drop_path=drop_path, seed=seed)
