"""Lanczos's full reorthogonalisation, side by side: the Krylov basis in blocks of rows
(`archdsl.analysis.eigensolvers.KrylovBasis`, Gram-Schmidt twice, two matrix-vector products per
block, in place) against the loop it replaced (modified Gram-Schmidt twice, a dot and an axpy per
stored vector, in Python), at a network's parameter count and 15-40 stored vectors. For scale,
one Hessian-vector product of that network on a batch of 16 (what each Lanczos step also costs).

    python benchmarks/reorth.py --quick
    python benchmarks/reorth.py --model alter50 --threads 1
"""

from __future__ import annotations

import argparse
import time

import torch

from archdsl import load_spec
from archdsl.analysis import hessian_operator
from archdsl.analysis.eigensolvers import KrylovBasis
from archdsl.nn import compile_arch
from archdsl.nn.blocks.attention import math_attention


def loop_projection(vector: torch.Tensor, basis: list[torch.Tensor]) -> torch.Tensor:
    """The previous code: modified Gram-Schmidt, twice."""
    for _ in range(2):
        for q in basis:
            vector = vector - torch.dot(q, vector) * q
    return vector


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def one_product_time(model_name: str, repeats: int) -> tuple[int, float]:
    """The network's parameter count and the seconds of one Hessian-vector product (batch 16, eval mode)."""
    arch = load_spec(model_name)
    model = compile_arch(arch, seed=0).model.eval()
    shape = arch.input
    x = torch.randn(16, shape.channels, shape.height, shape.width, generator=torch.Generator().manual_seed(0))
    y = torch.arange(16) % arch.classes
    with math_attention():
        operator = hessian_operator(model, x, y)
        vector = torch.randn(sum(operator.chunks))
        seconds = best_time(lambda: operator.matvec(vector), repeats)
    return sum(operator.chunks), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="built-in spec whose size and product are used (default: tiny)")
    parser.add_argument("--vectors", default="15,40", help="stored vectors to time (default: 15,40)")
    parser.add_argument("--repeats", type=int, default=3, help="best-of-N timing (default: 3)")
    parser.add_argument("--quick", action="store_true", help="one repeat")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = 1 if args.quick else args.repeats
    n, product = one_product_time(args.model, repeats)
    print(f"{args.model}: {n:,} parameters; one Hessian-vector product (batch 16): {product * 1000:.0f} ms")
    print("| stored vectors | loop (MGS x2) | KrylovBasis (CGS x2) | speed-up | loop / product | basis / product |")
    print("|---|---|---|---|---|---|")
    generator = torch.Generator().manual_seed(0)
    for m in (int(v) for v in args.vectors.split(",")):
        rows = [unit(torch.randn(n, generator=generator)) for _ in range(m)]
        basis = KrylovBasis()
        for row in rows:
            basis.append(row)
        vector = torch.randn(n, generator=generator)
        loop = best_time(lambda: loop_projection(vector, rows), repeats)  # noqa: B023
        matrix = best_time(lambda: basis.project_out(vector), repeats)  # noqa: B023
        print(
            f"| {m} | {loop * 1000:.1f} ms | {matrix * 1000:.1f} ms | {loop / matrix:.1f}x "
            f"| {loop / product:.2f} | {matrix / product:.2f} |"
        )


def unit(vector: torch.Tensor) -> torch.Tensor:
    return vector / vector.norm()


if __name__ == "__main__":
    main()
