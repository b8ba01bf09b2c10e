"""Not speed: how far each `init` scheme starts from the reference implementation's init.

The reference AlterNet/ResNet (xxxnell/how-do-vits-work) draws every Conv2d and Linear weight
and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (std 1/sqrt(3 fan_in)) and the MSA's position
table from normal(0, 0.02). For a spec built with `init timm` (archdsl's init before the `init`
setting) and with `init torch` (now the default), this prints per group of tensors the measured
std over that reference std (mean, and the range over the group's tensors), and, per MSA block, the
std of its residual branch over its input's in a first training-mode forward pass, `timm` over
`torch` (how much weaker the MSA starts relative to its skip path). Results: docs/compiler.md.

    python benchmarks/init_ratios.py [--spec alter50] [--seed 0]   # --quick: alter18
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict

import torch
from torch import nn

from archdsl.lang.spec import load_spec
from archdsl.nn.build import build

TABLE_STD = 0.02


def group_of(name: str, param: str, module: nn.Module) -> str | None:
    """The issue's groups of an AlterNet's tensors (None: a norm, not compared)."""
    if isinstance(module, nn.BatchNorm2d):
        return None
    leaf = name.rsplit(".", 1)[-1]
    if param == "rel_pos_bias":
        return "MSA position table"
    if name == "stem":
        return "stem conv"
    if name == "head.fc":
        return f"head {param}"
    if leaf in ("q", "kv"):
        return "MSA q / kv"
    if leaf == "proj":
        return f"MSA output projection {param}"
    if leaf == "shortcut":
        return "1x1 shortcuts"
    if leaf == "conv":
        return "MSA block's 1x1 conv before attention"
    if isinstance(module, nn.Conv2d) and module.kernel_size == (3, 3):
        return "3x3 convs"
    if leaf == "conv1":
        return "1x1 reduce convs"
    if leaf == "conv3":
        return "1x1 expand convs"
    return name


def std_ratios(model: nn.Module) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = defaultdict(list)
    for name, module in model.named_modules():
        for param, value in module.named_parameters(recurse=False):
            group = group_of(name, param, module)
            if group is None:
                continue
            fan_in = module.weight[0].numel()  # type: ignore[index]
            reference = TABLE_STD if param == "rel_pos_bias" else 1 / math.sqrt(3 * fan_in)
            groups[group].append(value.detach().double().std().item() / reference)
    return groups


def branch_ratios(model: nn.Module, images: torch.Tensor) -> dict[str, float]:
    """Per MSA block: std(output - input) / std(input) in a training-mode forward pass."""
    ratios: dict[str, float] = {}
    hooks = []
    for name, block in model.named_blocks():  # type: ignore[operator]
        if block.kind == "msa":

            def record(module, inputs, output, name=name):
                ratios[name] = ((output - inputs[0]).std() / inputs[0].std()).item()

            hooks.append(block.register_forward_hook(record))
    with torch.no_grad():
        model.train()(images)
    for hook in hooks:
        hook.remove()
    return ratios


def describe(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1 or max(values) - min(values) < 0.01:
        return f"{mean:.2f}"
    return f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="alter50")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="alter18 instead of the --spec")
    args = parser.parse_args()
    arch = load_spec("alter18" if args.quick else args.spec)
    models = {scheme: build(arch.model_copy(update={"init": scheme}), seed=args.seed) for scheme in ("timm", "torch")}
    ratios = {scheme: std_ratios(model) for scheme, model in models.items()}
    print(f"{arch.name}, seed {args.seed}: std over the reference's")
    print("| group | init timm (former) | init torch |")
    print("|---|---|---|")
    for group in ratios["torch"]:
        print(f"| {group} | {describe(ratios['timm'][group])} | {describe(ratios['torch'][group])} |")
    images = torch.randn(32, *(arch.input.channels, arch.input.height, arch.input.width))
    branches = {scheme: branch_ratios(model, images) for scheme, model in models.items()}
    print("\nMSA branch / input std, timm over torch:")
    for name in branches["torch"]:
        print(f"  {name}: {branches['timm'][name] / branches['torch'][name]:.2f}")


if __name__ == "__main__":
    main()
