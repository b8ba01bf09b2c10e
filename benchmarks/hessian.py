"""Top Hessian eigenvalue on one batch of 16: archdsl.analysis.hessian vs PyHessian 0.1 and
SciPy's ARPACK (`scipy.sparse.linalg.eigsh` on a `LinearOperator`, `eigensolvers.arpack`).

Same model, same batch, same seed (all draw the start vector per parameter from the
seeded generator, so the power iterations start from the same vector), all in eval
mode under the math attention kernel. Reports each estimate, its relative difference to
PyHessian and its relative error to a converged reference (Lanczos at tol 1e-9), the
number of Hessian-vector products, the best-of-N wall time, and eigsh's products and time
as ratios to archdsl's Lanczos at the same tolerance. PyHessian's rows are left out when
it is not installed.

    pip install --no-deps pyhessian==0.1   # benchmark only; --no-deps keeps the installed torch
    python benchmarks/hessian.py --quick
    python benchmarks/hessian.py --model tiny --k 5
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

import torch
import torch.nn as nn

from archdsl.analysis import hessian_operator
from archdsl.analysis.eigensolvers import arpack
from archdsl.analysis.hessian import top_eigenvalues
from archdsl.nn.blocks.attention import math_attention


def small_cnn(classes: int = 100) -> nn.Module:
    """A ResNet-stem-like CNN for 32x32 images (about 0.1 M parameters)."""

    def unit(cin: int, cout: int, stride: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(
        *unit(3, 32, 1), *unit(32, 64, 2), *unit(64, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes),
    )  # fmt: skip


def make_model(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if name == "cnn":
        model = small_cnn()
    else:
        from archdsl.nn.build import create_model

        model = create_model(name)
    # A few SGD steps in train mode, so the network is not at its initialisation and BN has statistics.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    classes = model(torch.zeros(1, 3, 32, 32)).shape[1]
    generator = torch.Generator().manual_seed(seed + 1)
    for _ in range(5):
        x = torch.randn(32, 3, 32, 32, generator=generator)
        y = torch.randint(0, classes, (32,), generator=generator)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


CLOCK = time.perf_counter  # --cpu-time: time.process_time (one thread on a shared, loaded machine)


def best_of(repeats: int, run):
    times, result = [], None
    for _ in range(repeats):
        start = CLOCK()
        result = run()
        times.append(CLOCK() - start)
    return min(times), result


def pyhessian_top(model, x, y, k: int, tol: float, max_iter: int, seed: int):
    from pyhessian import hessian

    module = sys.modules["pyhessian.hessian"]
    counted = {"hvps": 0}
    original = module.hessian_vector_product

    def counting(*args, **kwargs):
        counted["hvps"] += 1
        return original(*args, **kwargs)

    module.hessian_vector_product = counting
    try:
        with math_attention():
            torch.manual_seed(seed)
            values, _ = hessian(model, nn.CrossEntropyLoss(), data=(x, y), cuda=False).eigenvalues(
                maxIter=max_iter, tol=tol, top_n=k
            )
    finally:
        module.hessian_vector_product = original
        model.zero_grad(set_to_none=True)
    return sorted(values, key=abs, reverse=True), counted["hvps"]


def scipy_top(model, x, y, k: int, tol: float, seed: int):
    """ARPACK on archdsl's Hessian operator (double backward, eval mode), from the same start vector."""
    model.eval()
    with math_attention():
        operator = hessian_operator(model, x, y)
        return arpack(
            operator.matvec,
            operator.chunks,
            k,
            tol=tol,
            generator=torch.Generator().manual_seed(seed),
            dtype=operator.dtype,
            device=operator.device,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn", help="cnn (default) or an archdsl spec name such as tiny")
    parser.add_argument("--k", type=int, default=1, help="eigenvalues (default: 1, the top one)")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="best-of-N timing (default: 3)")
    parser.add_argument("--quick", action="store_true", help="one repeat")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time, not the wall clock")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = 1 if args.quick else args.repeats

    model = make_model(args.model, args.seed)
    generator = torch.Generator().manual_seed(args.seed + 2)
    x = torch.randn(16, 3, 32, 32, generator=generator)
    classes = model(x[:1]).shape[1]
    y = torch.randint(0, classes, (16,), generator=generator)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model {args.model}: {params:,} parameters; batch 16; k={args.k}, tol={args.tol:g}, "
        f"max_iter={args.max_iter}, seed={args.seed}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    reference = top_eigenvalues(model, x, y, k=args.k, tol=1e-9, max_iter=400, method="lanczos", seed=args.seed + 99)
    rows = []
    try:
        import pyhessian  # noqa: F401
    except ImportError:
        print("PyHessian is not installed: its rows are left out (pip install --no-deps pyhessian==0.1)")
    else:
        py_time, (py_values, py_hvps) = best_of(
            repeats, lambda: pyhessian_top(model, x, y, args.k, args.tol, args.max_iter, args.seed)
        )
        rows.append((f"PyHessian 0.1 tol {args.tol:g}", py_values, py_hvps, py_time))
        # What PyHessian's power iteration needs to get close to the converged value.
        tight_time, (tight_values, tight_hvps) = best_of(
            repeats, lambda: pyhessian_top(model, x, y, args.k, args.tol / 100, 10 * args.max_iter, args.seed)
        )
        rows.append((f"PyHessian 0.1 tol {args.tol / 100:g}", tight_values, tight_hvps, tight_time))
    for label, method, hvp in [
        (f"archdsl power tol {args.tol:g}", "power", "autograd"),
        (f"archdsl lanczos tol {args.tol:g}", "lanczos", "autograd"),
        ("archdsl lanczos (func HVP)", "lanczos", "func"),
    ]:
        run = functools.partial(
            top_eigenvalues,
            model,
            x,
            y,
            k=args.k,
            tol=args.tol,
            max_iter=args.max_iter,
            method=method,
            hvp=hvp,
            seed=args.seed,
        )
        elapsed, estimate = best_of(repeats, run)
        rows.append((label, list(estimate.eigenvalues), estimate.matvecs, elapsed))
    lanczos_row = rows[-2]
    for tol in (args.tol, args.tol / 100):
        elapsed, estimate = best_of(repeats, functools.partial(scipy_top, model, x, y, args.k, tol, args.seed))
        rows.append((f"scipy eigsh tol {tol:g}", list(estimate.eigenvalues), estimate.matvecs, elapsed))

    top_ref = reference.eigenvalues[0]
    print(f"reference (Lanczos, tol 1e-9, {reference.matvecs} HVPs): top eigenvalue {top_ref:.6f}")
    baseline = rows[0]  # PyHessian at the tolerance asked for, else archdsl's power iteration
    print(f"{'method':<28} {'top eigenvalue':>15} {'vs ' + baseline[0][:10]:>13} {'vs reference':>13} {'HVPs':>5} "
          f"{'time s':>8} {'speed-up':>8}")  # fmt: skip
    for label, values, hvps, elapsed in rows:
        top = values[0]
        print(
            f"{label:<28} {top:>15.6f} {abs(top - baseline[1][0]) / abs(baseline[1][0]):>13.2e} "
            f"{abs(top - top_ref) / abs(top_ref):>13.2e} {hvps:>5} {elapsed:>8.3f} {baseline[3] / elapsed:>7.2f}x"
        )
    print(f"eigsh / archdsl lanczos at tol {args.tol:g} (worst error over all k against the reference):")
    for label, values, hvps, elapsed in (lanczos_row, *rows[-2:]):
        worst = max(abs(v - r) / abs(r) for v, r in zip(values, reference.eigenvalues, strict=True))
        print(
            f"  {label:<28} worst error {worst:.2e}, HVPs {hvps / lanczos_row[2]:.2f}x, "
            f"time {elapsed / lanczos_row[3]:.2f}x"
        )
    if args.k > 1:
        print("all k (largest |lambda| first):")
        print(f"  reference: {', '.join(f'{v:.4f}' for v in reference.eigenvalues)}")
        for label, values, _, _ in rows:
            print(f"  {label}: {', '.join(f'{v:.4f}' for v in values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
