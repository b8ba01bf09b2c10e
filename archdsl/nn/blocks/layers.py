"""Stems and heads: the CIFAR and ImageNet conv stems, the patch stems of ViT/PiT/Swin, the BN and LayerNorm heads."""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from timm.layers import LayerNorm, SelectAdaptivePool2d
from torch import nn

from archdsl.ir import Arch, PatchStem, stem_out_size
from archdsl.nn.blocks.tokens import MAP, TOKENS, TokenOutput


class ConvStem(nn.Conv2d):
    """`stem conv3x3(C)`: one 3x3 conv, stride 1, no bias, no norm/act/pool: the first block's BN-ReLU follows."""

    kind = "conv3x3"
    layout = MAP

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__(in_channels, channels, 3, padding=1, bias=False)


class ConvNormStem(nn.Module):
    """`stem conv3x3(C, norm=true)`: 3x3 conv (stride 1, no bias) -> BN -> ReLU, the post-activation ResNet's stem."""

    kind = "conv3x3"
    layout = MAP

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_norm_act(x)

    def conv_norm_act(self, x: torch.Tensor) -> torch.Tensor:
        # A method of its own so that ImageNetNormStem reuses it: TorchScript cannot compile `super().forward`.
        return self.act(self.norm(self.conv(x)))

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """The BN reads only the conv (foldable in eval mode)."""
        return [("conv", "norm")]


class PatchEmbedding(TokenOutput, nn.Module):
    """`stem patch(size, C, stride, norm)`: image -> token sequence (B, P + H*W, C).

    A size x size conv with bias (`proj`, stride `stride`, no padding), flattened row-major,
    then optionally LayerNorm (`norm`, Swin): timm's `PatchEmbed` (ViT, Swin) and PiT's
    `ConvEmbedding` (whose stride may be smaller than the patch). With a class token
    (`head class`) a learned `cls_token` is prepended; with `pos absolute` a learned
    `pos_embed` is added: after the class token is prepended when it has a position too (ViT),
    before (to the patches only) when it has not (PiT).
    """

    kind = "patch"
    layout = TOKENS

    def __init__(self, arch: Arch) -> None:
        super().__init__()
        spec = arch.stem
        assert isinstance(spec, PatchStem)
        self.out_size, self.prefix = stem_out_size(arch), arch.prefix_tokens
        self.proj = nn.Conv2d(arch.input.channels, spec.channels, spec.size, stride=spec.stride)
        self.norm = LayerNorm(spec.channels, eps=arch.norm.eps) if spec.norm else nn.Identity()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, spec.channels)) if self.prefix else None
        self.pos_covers_class = bool(self.prefix) and arch.pos.class_token
        self.pos_embed = None
        if arch.pos.kind == "absolute":
            tokens = self.out_size[0] * self.out_size[1] + (1 if self.pos_covers_class else 0)
            self.pos_embed = nn.Parameter(torch.zeros(1, tokens, spec.channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.proj(x).flatten(2).transpose(1, 2))
        if self.pos_embed is not None and not self.pos_covers_class:
            x = x + self.pos_embed
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None and self.pos_covers_class:
            x = x + self.pos_embed
        return x


class ImageNetStem(nn.Conv2d):
    """`stem conv7x7(C)`: 7x7 conv (stride 2, padding 3, no bias) -> 3x3 max-pool (stride 2, padding 1), the
    pre-activation ResNet's ImageNet stem (the reference's `StemB(pool=True)`). A Conv2d itself, as ConvStem, so
    its weight is `stem.weight` in either stem."""

    kind = "conv7x7"
    layout = MAP

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__(in_channels, channels, 7, stride=2, padding=3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Conv2d.forward's own body: TorchScript cannot compile `super().forward`.
        return F.max_pool2d(self._conv_forward(x, self.weight, self.bias), 3, stride=2, padding=1)


class ImageNetNormStem(ConvNormStem):
    """`stem conv7x7(C, norm=true)`: 7x7 conv (stride 2, padding 3, no bias) -> BN -> ReLU -> 3x3 max-pool
    (stride 2, padding 1): torchvision's ResNet stem, the post-activation ResNet's on ImageNet."""

    kind = "conv7x7"

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__(in_channels, channels)
        self.conv = nn.Conv2d(in_channels, channels, 7, stride=2, padding=3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(self.conv_norm_act(x), 3, stride=2, padding=1)


def stem(arch: Arch) -> nn.Module:
    spec = arch.stem
    if isinstance(spec, PatchStem):
        return PatchEmbedding(arch)
    imagenet = spec.kind == "conv7x7"
    if spec.norm:
        return (ImageNetNormStem if imagenet else ConvNormStem)(arch.input.channels, spec.channels)
    return (ImageNetStem if imagenet else ConvStem)(arch.input.channels, spec.channels)


class _Classifier(nn.Module):
    """The part of a head that timm swaps for fine-tuning: dropout (`drop_rate`) -> `fc`.

    `reset(0)` leaves no classifier (the head returns the pooled features, as timm's
    `num_classes=0`). A new layer is on the head's device and dtype, with PyTorch's default
    init (`ArchNet.reset_classifier` draws it by the spec's `init`).
    """

    if TYPE_CHECKING:  # set by the heads; TorchScript reads no module annotations
        norm: nn.Module
        fc: nn.Module

    def _set_classifier(self, in_channels: int, classes: int, drop_rate: float) -> None:
        self.in_channels = in_channels
        self.drop = nn.Dropout(drop_rate)
        self.fc = nn.Linear(in_channels, classes) if classes > 0 else nn.Identity()

    def reset(self, classes: int, like: torch.Tensor) -> None:
        """A new classifier for `classes` (0: none), on the device and in the dtype of `like` (a weight of
        the model: a head without norm has none of its own once its classifier is gone)."""
        if classes > 0:
            self.fc = nn.Linear(self.in_channels, classes, device=like.device, dtype=like.dtype)
        else:
            self.fc = nn.Identity()
        self.fc.train(self.training)  # a new layer in the model's mode (eval stays eval)

    def drop_norm(self) -> None:
        """No norm before the pooling: timm's `prune_norm`."""
        self.norm = nn.Identity()

    def classify(self, x: torch.Tensor, pre_logits: bool) -> torch.Tensor:
        return x if pre_logits else self.fc(self.drop(x))

    # timm's `global_pool` values each head takes; '' (no pooling) only without a classifier.
    pool_types: tuple[str, ...] = ()
    global_pool: str
    # Read only when the pooling changes, never by forward; TorchScript has no `tuple[str, ...]`.
    __jit_ignored_attributes__ = ["pool_types"]

    def check_pool(self, pool_type: str, classes: int) -> None:
        if pool_type not in self.pool_types:
            raise ValueError(f"global_pool must be one of {', '.join(map(repr, self.pool_types))}, got {pool_type!r}")
        if pool_type == "" and classes > 0:
            raise ValueError("global_pool='' (no pooling) needs num_classes=0: the classifier reads pooled features")

    def set_pool(self, pool_type: str) -> None:
        self.check_pool(pool_type, 0 if isinstance(self.fc, nn.Identity) else 1)
        self.global_pool = pool_type


class ClassifierHead(_Classifier):
    """BN -> ReLU -> global average pool -> (dropout) -> Linear.

    The BN-ReLU is here because the pre-activation blocks leave the stream un-normalised;
    without `norm` (`head mean(norm=false)`, after post-activation blocks) the head pools and
    classifies only.
    """

    layout = MAP

    def __init__(self, in_channels: int, classes: int, *, drop_rate: float = 0.0, norm: bool = True) -> None:
        super().__init__()
        self.kind = "bn-gap-fc" if norm else "gap-fc"
        self.norm = nn.BatchNorm2d(in_channels) if norm else nn.Identity()
        self.act = nn.ReLU(inplace=True) if norm else nn.Identity()
        self.pool = SelectAdaptivePool2d(pool_type="avg", flatten=True)
        self.global_pool = "avg"
        self._set_classifier(in_channels, classes, drop_rate)

    pool_types = ("avg", "max", "avgmax", "")

    def set_pool(self, pool_type: str) -> None:
        super().set_pool(pool_type)
        self.pool = SelectAdaptivePool2d(pool_type=pool_type, flatten=bool(pool_type))

    def drop_norm(self) -> None:
        super().drop_norm()
        self.act = nn.Identity()  # the ReLU belongs to the norm (BN-ReLU)

    def forward(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.classify(self.pool(self.act(self.norm(x))), pre_logits)


class TokenHead(_Classifier):
    """LayerNorm, then the class token (ViT, PiT) or the mean over the tokens (Swin), then (dropout) Linear.

    The norm is per token, so normalising only the class token equals timm's normalising all
    tokens and then taking the first.
    """

    layout = TOKENS

    def __init__(
        self,
        in_channels: int,
        classes: int,
        *,
        class_token: bool,
        eps: float,
        drop_rate: float = 0.0,
        norm: bool = True,
    ) -> None:
        super().__init__()
        self.class_token = class_token
        kind = "class-fc" if class_token else "gap-fc"
        self.kind = f"ln-{kind}" if norm else kind
        self.norm = LayerNorm(in_channels, eps=eps) if norm else nn.Identity()
        self.global_pool = "token" if class_token else "avg"
        self.pool_types = ("token", "avg", "max", "avgmax", "") if class_token else ("avg", "max", "avgmax", "")
        self._set_classifier(in_channels, classes, drop_rate)

    def forward(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        # timm's ViT pooling: the class token, or the patch tokens (the class token left out)
        # averaged or maxed; '' keeps every token.
        if self.global_pool == "token":
            x = self.norm(x[:, 0])
        elif self.global_pool:
            x = self.norm(x[:, 1:] if self.class_token else x)
            if self.global_pool == "avg":
                x = x.mean(dim=1)
            elif self.global_pool == "max":
                x = x.amax(dim=1)
            else:
                x = 0.5 * (x.mean(dim=1) + x.amax(dim=1))
        else:
            x = self.norm(x)
        return self.classify(x, pre_logits)
