"""The reference implementation's post-activation ResNet, rebuilt in torch modules for the tests.

Written from the description of xxxnell/how-do-vits-work (branch `transformer`) models/resnet.py,
models/resnet_dnn_block.py, models/classifier_block.py and models/layers.py, not from its code,
and without archdsl: `ResNet(Bottleneck, (3, 4, 6, 3), stem=False)` is the model the released
`resnet_50_cifar100` checkpoint was saved from (`models.get_model("resnet_50", stem=False)`).

- `layers.conv1x1/conv3x3`: Conv2d without bias (3x3 with padding 1); `layers.bn`: BatchNorm2d.
- stem (`stem=False`, CIFAR): `layer0 = Sequential(conv3x3(3, 64), bn(64), ReLU)`; (`stem=True`, ImageNet, the
  default of models.resnet.dnn_50): `layer0 = Sequential(convnxn(3, 64, kernel_size=7, stride=2, padding=3),
  bn(64), ReLU, MaxPool2d(kernel_size=3, stride=2, padding=1))`, torchvision's ResNet stem.
- `Bottleneck` (expansion 4): `shortcut = Sequential(conv1x1(in, 4w, stride), bn(4w))` where the
  shape changes, else an empty Sequential (the identity); `conv1 = Sequential(conv1x1(in, w), bn, ReLU)`,
  `conv2 = Sequential(conv3x3(w, w, stride), bn, ReLU)`, `conv3 = Sequential(conv1x1(w, 4w), bn)`;
  forward: `relu(conv3(conv2(conv1(x))) + shortcut(x))` (drop path is the identity at sd 0).
- stages `layer1..layer4`, widths 64/128/256/512, strides 1/2/2/2.
- head `classifier = Sequential(GAPBlock)`, GAPBlock: global average pool, flatten, `dense` (Linear).
"""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * self.expansion
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out, 1, stride, bias=False), nn.BatchNorm2d(out))
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.conv2 = nn.Sequential(
            nn.Conv2d(width, width, 3, stride, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.conv3 = nn.Sequential(nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + self.shortcut(x))


class GAPBlock(nn.Module):
    def __init__(self, in_features: int, classes: int) -> None:
        super().__init__()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.dense = nn.Linear(in_features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.gap(x).flatten(1))


class PostActResNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), classes: int = 100, stem: bool = False) -> None:
        super().__init__()
        if stem:
            self.layer0 = nn.Sequential(
                nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(),
                nn.MaxPool2d(3, stride=2, padding=1),
            )
        else:
            self.layer0 = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        channels = 64
        for number, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True), start=1):
            layer = []
            for index in range(count):
                layer.append(Bottleneck(channels, width, 2 if number > 1 and index == 0 else 1))
                channels = width * Bottleneck.expansion
            self.add_module(f"layer{number}", nn.Sequential(*layer))
        self.classifier = nn.Sequential(GAPBlock(channels, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer0(x)
        for number in range(1, 5):
            x = getattr(self, f"layer{number}")(x)
        return self.classifier(x)


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights, BN affine terms and running statistics too, at scales that keep activations finite."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                fan_in = module.weight[0].numel()
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) / fan_in**0.5)
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.1)
            elif isinstance(module, nn.BatchNorm2d):
                n = module.num_features
                module.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                module.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                module.num_batches_tracked.fill_(7)
    return model.eval()
