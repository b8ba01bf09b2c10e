"""Training throughput with archdsl's recipe: img/s of full training steps, as ratios.

One step is `archdsl.run.train.train_step` with the paper's (deit) recipe: Mixup/CutMix on
the batch, soft-target cross-entropy, backward, gradient clipping, AdamW (timm, no decay
on 1-d parameters), stochastic depth 0.1. The batch already sits on the device, so this
is the model+recipe cost; the data pipeline (crop, flip, RandAugment on PIL, collation)
is timed separately as loader img/s on the built-in synthetic set, since on a GPU it runs
in worker processes beside the model.

    python benchmarks/train_throughput.py --quick      # CPU: a few steps at batch 32
    python benchmarks/train_throughput.py              # device auto; on a GPU 300 steps, bf16, channels_last

Compare the alter50/resnet50 ratio (the paper: Alter-ResNet-50 trains 20 % faster than
ResNet-50 on a GPU), not absolute img/s across machines.
"""

from __future__ import annotations

import argparse
import time

import torch

from archdsl.nn.build import create_model
from archdsl.run.device import select_device
from archdsl.run.recipe import TrainConfig, make_loss, make_mixup, make_optimizer
from archdsl.run.train import train_step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_throughput(
    name: str, config: TrainConfig, device: torch.device, warmup: int, steps: int
) -> tuple[int, float]:
    """(parameters, training images per second) of spec `name`."""
    amp = device.type == "cuda" if config.amp is None else config.amp
    channels_last = device.type == "cuda" if config.channels_last is None else config.channels_last
    model = create_model(name, drop_path_rate=config.drop_path, seed=0)
    params = sum(p.numel() for p in model.parameters())
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model.to(device=device, memory_format=memory_format).train()
    optimizer = make_optimizer(model, config)
    loss_fn, mixup = make_loss(config), make_mixup(config, model.arch.classes)
    shape = (config.batch_size, model.arch.input.channels, model.arch.input.height, model.arch.input.width)
    images = torch.randn(shape, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(0, model.arch.classes, (config.batch_size,), device=device)
    for _ in range(warmup):
        train_step(model, images, labels, optimizer, loss_fn, mixup, config, amp=amp)
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        train_step(model, images, labels, optimizer, loss_fn, mixup, config, amp=amp)
    sync(device)
    return params, steps * config.batch_size / (time.perf_counter() - start)


def loader_throughput(config: TrainConfig, images: int, workers: int) -> float:
    """Augmented (crop, flip, RandAugment) and normalised images per second from the loader."""
    from archdsl.data import load_split
    from archdsl.run.loader import make_loader

    data = load_split(f"synthetic:train={images},test=10", "train")
    loader = make_loader(data, config.batch_size, augment=True, recipe=config, workers=workers)
    start = time.perf_counter()
    count = sum(len(labels) for _, labels in loader)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["resnet50", "alter50"], help="built-in specs or paths")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, help="timed steps (default: 300 on a GPU, 5 on a CPU)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default: 20 on a GPU, 1 on a CPU)")
    parser.add_argument("--workers", type=int, default=0, help="loader worker processes for the loader timing")
    parser.add_argument("--quick", action="store_true", help="3 timed steps, 1 warm-up, 256 loader images")
    args = parser.parse_args()

    device = select_device(args.device)
    gpu = device.type != "cpu"
    steps = args.steps or (3 if args.quick else 300 if gpu else 5)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick or not gpu else 20)
    config = TrainConfig(recipe="deit", batch_size=args.batch_size, device=str(device))
    print(
        f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
        f"batch {args.batch_size}, {steps} timed steps after {warmup}, "
        f"bf16 {'on' if gpu else 'off'}, channels_last {'on' if gpu else 'off'}"
    )

    results = {}
    for name in args.models:
        params, speed = model_throughput(name, config, device, warmup, steps)
        results[name] = (params, speed)
    base = results.get("resnet50", next(iter(results.values())))[1]
    print(f"{'model':<14} {'params':>12} {'img/s':>9} {'vs resnet50':>12}")
    for name, (params, speed) in results.items():
        print(f"{name:<14} {params:>12,} {speed:>9.1f} {speed / base:>11.2f}x")

    loader_images = 256 if args.quick else 2048
    speed = loader_throughput(config, loader_images, args.workers)
    print(f"data pipeline (deit augmentation, {args.workers} workers): {speed:.0f} img/s")


if __name__ == "__main__":
    main()
