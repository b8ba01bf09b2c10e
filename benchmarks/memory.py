"""Peak memory (RSS) of a train step and of a Hessian-vector product, eager against optimize_model.

Each variant runs in a fresh process (peak RSS is a high-water mark: it never goes down), which
builds the model, records its RSS (the baseline: interpreter, torch, weights), runs the work
twice and reports its peak RSS. The train step is forward, cross-entropy, backward and an AdamW
step; the Hessian-vector product is what `archdsl analyze` computes (double backward through
the math attention kernel, model in eval mode), on `optimize_model(training=True)`'s version
for the optimized variant (channels_last; the same parameters).

    python benchmarks/memory.py                       # alter50, batch 32
    python benchmarks/memory.py --model tiny --batch 16
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

VARIANTS = ("train eager", "train optimize_model", "hvp eager", "hvp optimize_model")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def measure(variant: str, model_name: str, batch: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from archdsl.analysis import hessian_operator
    from archdsl.nn.blocks.attention import math_attention
    from archdsl.nn.build import create_model
    from archdsl.run.optimize import optimize_model

    torch.manual_seed(0)
    model = create_model(model_name, seed=0)
    shape = model.arch.input
    images = torch.randn(batch, shape.channels, shape.height, shape.width)
    labels = torch.randint(0, model.num_classes, (batch,))
    if variant.endswith("optimize_model"):
        model = optimize_model(model, training=True)
        images = images.contiguous(memory_format=torch.channels_last)
    baseline = peak_rss_mb()
    if variant.startswith("train"):
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
    else:
        model.eval()
        with math_attention():
            for _ in range(2):
                operator = hessian_operator(model, images, labels, weight_decay=0.05)
                vector = torch.randn(sum(operator.chunks))
                operator.matvec(vector)
                del operator
    return {"baseline_mb": baseline, "peak_mb": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="alter50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.model, args.batch)))
        return
    results = {}
    for variant in VARIANTS:
        command = [sys.executable, __file__, "--model", args.model, "--batch", str(args.batch), "--one", variant]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"peak RSS, {args.model} at batch {args.batch} (fresh process each; baseline: after building the model)")
    print(f"{'variant':<24}{'peak MB':>10}{'baseline MB':>13}{'work MB':>10}{'work vs eager':>15}")
    for variant, r in results.items():
        eager = results[variant.split()[0] + " eager"]
        work, eager_work = r["peak_mb"] - r["baseline_mb"], eager["peak_mb"] - eager["baseline_mb"]
        print(f"{variant:<24}{r['peak_mb']:>10.0f}{r['baseline_mb']:>13.0f}{work:>10.0f}{work / eager_work:>14.2f}x")


if __name__ == "__main__":
    main()
