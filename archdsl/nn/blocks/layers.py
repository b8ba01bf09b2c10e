"""The CIFAR stem and the pre-activation classifier head."""

from __future__ import annotations

import torch
from torch import nn

from archdsl.ir import Stem


def stem(spec: Stem, in_channels: int) -> nn.Module:
    """One 3x3 conv, stride 1, no bias, no norm/act/pool: the first block's BN-ReLU follows."""
    return nn.Conv2d(in_channels, spec.channels, 3, padding=1, bias=False)


class ClassifierHead(nn.Module):
    """BN -> ReLU -> global average pool -> Linear.

    The BN-ReLU is here because the pre-activation blocks leave the stream un-normalised.
    """

    def __init__(self, in_channels: int, classes: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_channels)
        self.act = nn.ReLU(inplace=True)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, classes)

    def forward(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.pool(self.act(self.norm(x))).flatten(1)
        return x if pre_logits else self.fc(x)
