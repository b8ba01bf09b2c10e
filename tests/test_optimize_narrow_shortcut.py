"""A CPU training keeps a model with a strided 1x1 convolution on fewer than 8 channels as built (NCHW): torch 2.14's
CPU backward of such a convolution in channels_last frees memory twice and aborts the process."""

from __future__ import annotations

import torch
from torch import nn

from archdsl.run.optimize import applied_plan, optimize_model


def _shortcut(channels: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.Conv2d(channels, 8, 1, stride=2), nn.Flatten())


def test_a_narrow_strided_1x1_convolution_trains_as_built_on_a_cpu():
    model = optimize_model(_shortcut(4), training=True, device="cpu")
    plan = applied_plan(model)
    assert plan is not None and not plan.channels_last
    images = torch.randn(4, 3, 16, 16)
    model(images).sum().backward()  # aborted the process in channels_last (torch 2.14.1)
    assert model[1].weight.grad is not None


def test_a_wide_one_still_trains_in_channels_last():
    plan = applied_plan(optimize_model(_shortcut(8), training=True, device="cpu"))
    assert plan is not None and plan.channels_last
