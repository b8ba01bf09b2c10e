"""Training throughput of compiled models, side by side, reported as ratios.

One train step = forward, cross-entropy, backward, AdamW step, on random 32x32 images.
Models: archdsl's resnet50, alter50 and swinlike50, and timm's `resnet50`
(num_classes=100; ImageNet stem, so it sees 1x1 maps by stage 4 at 32x32: an outside
reference for the framework overhead, not a like-for-like network).

    python benchmarks/throughput.py            # device auto (cuda if available), batch 32
    python benchmarks/throughput.py --quick    # a few steps, for a CPU sanity check
    python benchmarks/throughput.py --amp --channels-last --compile --json out.json   # what gpu.sh runs

`--compile` compiles each model with `archdsl.optimize_model(training=True, compile=True)`
(the warm-up steps then include the compile time, reported as `warmup_s` in the JSON).

The paper reports Alter-ResNet-50 20 % faster than pre-activation ResNet-50 on a GPU;
on a CPU the attention reshapes cost relatively more. Numbers are one run: compare ratios
from the same run, never absolute img/s across machines.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Result:
    name: str
    params: int
    images_per_second: float
    warmup_s: float = 0.0  # the warm-up steps, with any compile time


def make_models(names: list[str]) -> dict[str, torch.nn.Module]:
    import timm

    from archdsl.nn.build import create_model

    models = {}
    for name in names:
        if name == "timm-resnet50":
            models[name] = timm.create_model("resnet50", num_classes=100)
        else:
            models[name] = create_model(name, seed=0)
    return models


class TrainStep:
    """One model with its optimizer and a fixed batch; `time(steps)` returns img/s."""

    def __init__(
        self, model: torch.nn.Module, device: torch.device, *, batch: int, channels_last: bool, amp: bool
    ) -> None:
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = model.to(device, memory_format=memory_format).train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        arch = getattr(model, "arch", None)
        shape = (arch.input.channels, arch.input.height, arch.input.width) if arch is not None else (3, 32, 32)
        self.images = torch.randn(batch, *shape, device=device).to(memory_format=memory_format)
        self.labels = torch.randint(0, getattr(model, "num_classes", 100), (batch,), device=device)
        self.device = device
        self.amp = amp and device.type == "cuda"

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            loss = F.cross_entropy(self.model(self.images), self.labels)
        loss.backward()
        self.optimizer.step()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def time(self, steps: int) -> float:
        self._sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        self._sync()
        return len(self.labels) * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median round counts")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="1 warm-up step, then 3 rounds of 1 step")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA only)")
    parser.add_argument("--models", default="resnet50,alter50,swinlike50,timm-resnet50")
    parser.add_argument("--compile", action="store_true", help="torch.compile each model (optimize_model)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.warmup, args.rounds = 1, 1, 3

    from archdsl.run.device import select_device

    device = select_device(args.device)
    torch.manual_seed(0)
    names = args.models.split(",")
    models = make_models(names)
    if args.compile:
        from archdsl.run.optimize import optimize_model

        models = {
            name: optimize_model(model, training=True, device=device, compile=True, channels_last=args.channels_last)
            for name, model in models.items()
        }
    runners = {
        name: TrainStep(model, device, batch=args.batch, channels_last=args.channels_last, amp=args.amp)
        for name, model in models.items()
    }
    warmup_s = {}
    for name, runner in runners.items():
        runner._sync()
        start = time.perf_counter()
        for _ in range(args.warmup):
            runner.step()
        runner._sync()
        warmup_s[name] = time.perf_counter() - start
    # Models take turns within each round, so a slow spell of a shared machine hits all of
    # them alike; the median round per model discards the outliers.
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            rates[name].append(runner.time(args.steps))
    results = [
        Result(name, sum(p.numel() for p in runner.model.parameters()), statistics.median(rates[name]), warmup_s[name])
        for name, runner in runners.items()
    ]
    if args.json:
        import json
        from dataclasses import asdict

        keys = ("batch", "steps", "rounds", "warmup", "channels_last", "amp", "compile")
        settings = {key: getattr(args, key) for key in keys}
        record = {"device": str(device), **settings, "results": [asdict(r) for r in results]}
        with open(args.json, "w") as file:
            json.dump(record, file, indent=1)

    print(
        f"train-step throughput on {device} ({torch.get_num_threads()} threads), batch {args.batch}, "
        f"32x32, median of {args.rounds} rounds of {args.steps} steps after {args.warmup} warm-up"
        f"{', channels_last' if args.channels_last else ''}{', bf16' if args.amp and device.type == 'cuda' else ''}"
        f"{', compiled' if args.compile else ''}"
    )
    reference = next((r for r in results if r.name == "resnet50"), results[0])
    print(f"{'model':<15}{'params':>12}{'img/s':>10}{'vs ' + reference.name:>16}")
    for r in results:
        print(
            f"{r.name:<15}{r.params:>12,}{r.images_per_second:>10.1f}"
            f"{r.images_per_second / reference.images_per_second:>15.2f}x"
        )


if __name__ == "__main__":
    main()
