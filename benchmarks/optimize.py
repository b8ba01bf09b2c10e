"""What `archdsl.optimize_model` gains, transform by transform, as ratios to the eager model.

Inference: img/s of a forward pass over one batch (default 256 images, 32x32) in
`inference_mode`, for the model as built (eager, NCHW), each transform alone, and
`optimize_model(training=False)` (all of them; with --compile also compiled, with its
compile time). Training: img/s of a train step (forward, cross-entropy, backward, AdamW) at
--train-batch, eager against `optimize_model(training=True)` and channels_last.

    python benchmarks/optimize.py --quick                     # tiny and alter-small-base, a minute
    python benchmarks/optimize.py --models tiny alter50 --compile
    python benchmarks/optimize.py --threads 1 --cpu-time      # a busy machine: CPU time of 1 thread

Variants take turns in every round and the best round counts, so a slow spell of a shared
machine hits them alike; the load average is printed beside the figures. With --cpu-time
(one thread only) the clock is the thread's CPU time, which other processes disturb far
less than wall time. FLOPs are `archdsl.summarize`'s (2 per multiply-add); a train step counts 3x a forward.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from archdsl.nn.build import create_model
from archdsl.nn.summary import summarize
from archdsl.run.optimize import InferenceModel, fold_batchnorms, optimize_model, plan_for


def best_of(variants: dict[str, Callable[[], None]], rounds: int, clock: Callable[[], float]) -> dict[str, float]:
    """Seconds of the fastest round of each variant; variants take turns within a round."""
    for run in variants.values():  # warm-up: allocations, oneDNN primitive caches
        run()
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, run in variants.items():
            start = clock()
            run()
            best[name] = min(best[name], clock() - start)
    return best


def eager_copy(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model).eval().requires_grad_(False)


def inference_variants(name: str, batch: int, compile_: bool) -> tuple[dict[str, Callable[[], None]], dict]:
    model = create_model(name, seed=0).eval()
    images = torch.randn(batch, 3, 32, 32)
    cl = eager_copy(model).to(memory_format=torch.channels_last)
    folded = eager_copy(model)
    fold_batchnorms(folded)
    micro = InferenceModel(eager_copy(model), plan_for("cpu", training=False, compile=False))
    fast = optimize_model(model, training=False, compile=False)
    variants = {
        "eager": lambda: model(images),
        "channels_last": lambda: cl(images),
        "BN folded": lambda: folded(images),
        "micro-batched": lambda: micro(images),
        "optimize_model": lambda: fast(images),
    }
    info = {}
    if compile_:
        compiled = optimize_model(model, training=False, compile=True)
        start = time.perf_counter()
        with torch.inference_mode():
            compiled(images)
        info["compile_s"] = time.perf_counter() - start
        variants["optimize_model + compile"] = lambda: compiled(images)
    with torch.inference_mode():
        fast(images)  # fixes its micro-batch size
    info["pieces"] = fast.pieces
    return variants, info


def train_variants(name: str, batch: int, compile_: bool) -> tuple[dict[str, Callable[[], None]], dict]:
    def step_of(model: torch.nn.Module, memory_format=torch.contiguous_format) -> Callable[[], None]:
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        images = torch.randn(batch, 3, 32, 32).contiguous(memory_format=memory_format)
        labels = torch.randint(0, model.num_classes, (batch,))

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()

        return step

    variants = {
        "eager": step_of(create_model(name, seed=0)),
        "channels_last": step_of(create_model(name, seed=0).to(memory_format=torch.channels_last), torch.channels_last),
        "optimize_model": step_of(optimize_model(create_model(name, seed=0), training=True)),
    }
    info = {}
    if compile_:
        model = optimize_model(create_model(name, seed=0), training=True, compile=True)
        step = step_of(model)
        start = time.perf_counter()
        step()
        info["compile_s"] = time.perf_counter() - start
        variants["optimize_model + compile"] = step
    return variants, info


def report(title: str, name: str, batch: int, seconds: dict[str, float], flops: float, info: dict) -> None:
    base = seconds["eager"]
    extra = f", compile {info['compile_s']:.0f} s" if "compile_s" in info else ""
    pieces = f", micro-batches of {info['pieces']}" if info.get("pieces") else ""
    print(f"{title} {name}, batch {batch}{pieces}{extra}")
    for variant, s in seconds.items():
        print(f"  {variant:<26} {batch / s:9.1f} img/s {batch * flops / s / 1e9:7.1f} GFLOP/s {base / s:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["tiny", "alter-small-base", "alter50"])
    parser.add_argument("--batch", type=int, default=256, help="inference batch (default 256, as archdsl eval)")
    parser.add_argument("--train-batch", type=int, default=32, help="train-step batch (default 32)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--cpu-time", action="store_true", help="time by the thread's CPU time (needs --threads 1)")
    parser.add_argument("--compile", action="store_true", help="also torch.compile (slow to compile)")
    parser.add_argument("--no-train", action="store_true", help="inference only")
    parser.add_argument("--quick", action="store_true", help="tiny and alter-small-base, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.models, args.rounds = ["tiny", "alter-small-base"], 3
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cpu_time and torch.get_num_threads() != 1:
        parser.error("--cpu-time measures one thread: add --threads 1")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    load = os.getloadavg()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, "
        f"clock: {'thread CPU time' if args.cpu_time else 'wall'}; "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    for name in args.models:
        flops = summarize(create_model(name, seed=0).arch).flops
        variants, info = inference_variants(name, args.batch, args.compile)
        with torch.inference_mode():
            seconds = best_of(variants, args.rounds, clock)
        report("inference", name, args.batch, seconds, flops, info)
        if not args.no_train:
            variants, info = train_variants(name, args.train_batch, args.compile)
            seconds = best_of(variants, args.rounds, clock)
            report("train step", name, args.train_batch, seconds, 3 * flops, info)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
