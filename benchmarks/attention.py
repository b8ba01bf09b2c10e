"""MSA designs' training speed as a fraction of their ResNet's, with the current attention and the previous one.

The designs are those of a Fashion-MNIST search from `resnet-fmnist` (docs/results-search.md): the ResNet
(`k0_0_0`), an MSA ending the 28x28 first stage (`k1_0_0`, 49 windows of 4x4) and an MSA ending
every stage (`k1_1_1`: c2 and c3 attend globally over 196 and 49 tokens). One step is
`archdsl.run.train.train_step` with the search's recipe (`fast`: batch 128, Nesterov SGD, no
Mixup) on a model through `optimize_model(training=True)`, as a search trains it. Every variant
takes its turn in every round and the best round counts, so a busy spell of a shared machine
hits them alike; the load average is printed beside the figures.

`previous` is the attention as it was before `archdsl.nn.blocks.attention.attention` and
`WindowAttention._narrow_attention` (kept here, `previous_forward`, to be measured side by side):
the q and kv 1x1 convs as one conv on windows cut out as (B*windows, c, h, w) images, q, k and v
split off its output by a permute and `unbind` (whose backward stacks and copies them), and SDPA
with the relative-position bias as a float mask, which in training (the bias needs a gradient)
runs SDPA's math kernel. `current` is the block as it is: in these designs every MSA has heads
of 64 on 16 to 64 channels, and trains through `_narrow_attention`.

    python benchmarks/attention.py                 # 2 threads, 5 rounds, a minute or two
    python benchmarks/attention.py --quick         # 2 rounds at batch 32 (smoke)
    python benchmarks/attention.py --profile       # also torch's operator profile of k1_1_1, both forms
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from archdsl.buildup import layout
from archdsl.lang.spec import load_spec
from archdsl.nn.blocks.attention import WindowAttention, in_memory_format_of
from archdsl.nn.build import build
from archdsl.run.optimize import optimize_model
from archdsl.run.recipe import TrainConfig, make_loss, make_mixup, make_optimizer
from archdsl.run.train import train_step

LAYOUTS = {"ResNet (k0_0_0)": (0, 0, 0), "MSA in c1 (k1_0_0)": (1, 0, 0), "MSA per stage (k1_1_1)": (1, 1, 1)}
CURRENT_FORWARD = WindowAttention.forward


def previous_forward(self: WindowAttention, x: torch.Tensor) -> torch.Tensor:
    """WindowAttention.forward before this benchmark's change (commit ea5d4fb), for the side-by-side ratio."""
    b, c, height, width = x.shape
    wh, ww = self.window
    nh, nw, n = height // wh, width // ww, wh * ww
    windows = x.permute(0, 2, 3, 1).reshape(b, nh, wh, nw, ww, c).transpose(2, 3)
    windows = windows.reshape(b * nh * nw, wh, ww, c).permute(0, 3, 1, 2)
    qkv = F.conv2d(windows, torch.cat([self.q.weight, self.kv.weight]))
    qkv = qkv.permute(0, 2, 3, 1).reshape(-1, n, 3, self.heads, self.dim_head)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    bias = self.rel_pos_bias[self.rel_pos_index.reshape(-1)].reshape(n, n).to(q.dtype)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    out = out.transpose(1, 2).reshape(-1, wh, ww, self.heads * self.dim_head).permute(0, 3, 1, 2)
    out = self.proj(out)
    out = out.permute(0, 2, 3, 1).reshape(b, nh, nw, wh, ww, -1).transpose(2, 3)
    out = out.reshape(b, height, width, -1).permute(0, 3, 1, 2)
    return in_memory_format_of(out, x)


FORWARDS = {"current": CURRENT_FORWARD, "previous": previous_forward}


def step_of(ks: tuple[int, ...], forward: Callable, batch: int) -> Callable[[], None]:
    """One training step of design `ks` with the attention `forward`, on a fixed random batch."""
    config = TrainConfig(recipe="fast", batch_size=batch)
    arch = layout(load_spec("resnet-fmnist"), ks)
    model = optimize_model(build(arch, seed=0), training=True, channels_last=True)
    optimizer, loss_fn = make_optimizer(model, config), make_loss(config)
    mixup = make_mixup(config, arch.classes)
    images = torch.randn(batch, 1, 28, 28).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, arch.classes, (batch,))

    def step() -> None:
        WindowAttention.forward = forward  # type: ignore[method-assign]  # the variant's attention
        try:
            train_step(model, images, labels, optimizer, loss_fn, mixup, config, amp=False)
        finally:
            WindowAttention.forward = CURRENT_FORWARD  # type: ignore[method-assign]

    return step


def best_of(variants: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Seconds of the fastest round of each variant; variants take turns within a round."""
    for run in variants.values():  # warm-up: allocations, oneDNN primitive caches
        run()
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def profile(step: Callable[[], None], title: str) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            step()
    print(f"\n{title}: operators by self CPU time, 2 steps")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128, help="the fast recipe's batch (default 128)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the issue's 2 cores)")
    parser.add_argument("--quick", action="store_true", help="batch 32, 2 rounds")
    parser.add_argument("--profile", action="store_true", help="also profile k1_1_1's step with each attention")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.rounds = 32, 2
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, batch {args.batch}, "
        f"best of {args.rounds} rounds; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    variants: dict[str, Callable[[], None]] = {}
    for design, ks in LAYOUTS.items():
        for form, forward in FORWARDS.items():
            if any(ks) or form == "current":  # the ResNet has no attention
                variants[f"{design}, {form}" if any(ks) else design] = step_of(ks, forward, args.batch)
    seconds = best_of(variants, args.rounds)
    resnet = seconds[next(iter(LAYOUTS))]
    print(f"{'design, attention':<36} {'img/s':>8} {'x ResNet':>9} {'x previous':>11}")
    for name, s in seconds.items():
        previous = seconds.get(name.replace("current", "previous"), s)
        print(f"{name:<36} {args.batch / s:8.0f} {resnet / s:9.2f} {previous / s:11.2f}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if args.profile:
        for form in FORWARDS:
            profile(variants[f"{list(LAYOUTS)[2]}, {form}"], f"k1_1_1, {form} attention")


if __name__ == "__main__":
    main()
