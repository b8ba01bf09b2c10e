"""IR -> nn.Module: the compiler.

`build(arch)` turns a validated `archdsl.ir.Arch` into an `ArchNet` whose module tree
mirrors the spec: `stem`, `stages.<stage>.<index>` (one module per IR block, each with a
`.kind` of "conv" or "msa") and `head`. The IR rides along as `model.arch`, so a model
always knows how to rebuild itself (checkpoints store it beside the weights).
"""

from __future__ import annotations

from collections.abc import Iterator
from os import PathLike

import torch
from timm.layers import trunc_normal_
from torch import nn

from archdsl.ir import Arch, ConvBlock, block_path, block_shapes, feature_channels
from archdsl.nn.blocks.attention import AlterMSABlock
from archdsl.nn.blocks.conv import conv_block
from archdsl.nn.blocks.layers import ClassifierHead, stem


class ArchNet(nn.Module):
    """A network compiled from an `Arch`. Use `build` or `create_model` to make one."""

    def __init__(self, arch: Arch, *, drop_path: float = 0.0) -> None:
        super().__init__()
        self.arch = arch
        self.stem = stem(arch.stem, arch.input.channels)
        shapes = block_shapes(arch)
        rates = drop_path_rates(drop_path, len(shapes))
        stages: dict[str, list[nn.Module]] = {stage.name: [] for stage in arch.stages}
        widths = {stage.name: stage.width for stage in arch.stages}
        for shape, rate in zip(shapes, rates, strict=True):
            width = widths[shape.stage]
            if isinstance(shape.block, ConvBlock):
                module = conv_block(shape.block, shape.in_channels, width, stride=shape.stride, drop_path=rate)
            else:
                module = AlterMSABlock(
                    shape.block,
                    shape.in_channels,
                    width,
                    shape.out_channels,
                    map_size=shape.out_size,
                    drop_path=rate,
                )
            stages[shape.stage].append(module)
        self.stages = nn.ModuleDict({name: nn.Sequential(*blocks) for name, blocks in stages.items()})
        self.head = ClassifierHead(feature_channels(arch), arch.classes)
        self.num_classes = arch.classes
        self.num_features = feature_channels(arch)
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
                nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, AlterMSABlock):
                module.init_weights()

    def named_blocks(self) -> Iterator[tuple[str, nn.Module]]:
        """(`stages.<stage>.<index>`, block) in model order: the units the analyses report on."""
        for stage_name, stage in self.stages.items():
            for index, block in enumerate(stage):
                yield block_path(stage_name, index), block

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages.values():
            x = stage(x)
        return x

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.head(x, pre_logits=pre_logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


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


def create_model(spec: Arch | str | PathLike[str], **kwargs: object) -> ArchNet:
    """Build from an `Arch`, a `.arch` path or a built-in spec name (`"alter50"`)."""
    if not isinstance(spec, Arch):
        from archdsl.lang.spec import load_spec

        spec = load_spec(spec)
    return build(spec, **kwargs)  # type: ignore[arg-type]
