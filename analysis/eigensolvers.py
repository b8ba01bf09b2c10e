"""Eigensolvers for a symmetric operator given only by its product (`matvec`): the k
largest-|lambda| eigenvalues, on flat torch vectors, on any device.

"Top" means largest in *magnitude*: power iteration converges to the eigenvalue of
largest |lambda|, and with deflation to the next largest |lambda| in the orthogonal
complement. A strongly negative eigenvalue therefore shows up in the top-k, which is
exactly what the Hessian's NEP (the share of negative ones) measures.

Two solvers on the same operator: `power` (the paper's power iteration with deflation;
stops when the Rayleigh quotient changes by less than `tol` relative, which stops a little
short of the true value) and `lanczos` (Lanczos with full reorthogonalisation; stops when
every wanted Ritz pair has a residual ||H y - theta y|| <= tol * |theta|, usually in far
fewer products and closer to the truth). Both are checked against SciPy's ARPACK
(`arpack`: `scipy.sparse.linalg.eigsh` on a `LinearOperator`) in tests/test_analysis_hessian.py.
They stay rather than eigsh, which is no better: on benchmarks/hessian.py's 0.1 M-parameter
CNN (top-5, tol 1e-3, one thread) eigsh used 1.04x the Hessian-vector products of `lanczos` and
1.8x its CPU time for the same accuracy (worst relative error 1.3e-6 against 1.5e-6), and 1.38x
the products (2.2x the time) at tol 1e-5; and `lanczos`
runs on the operator's own device (eigsh takes NumPy vectors on the CPU: a copy each way per
product) and reports every product to the progress bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

Matvec = Callable[[torch.Tensor], torch.Tensor]
Method = Literal["power", "lanczos"]


@dataclass(frozen=True)
class EigenEstimate:
    """What an eigensolver found: eigenvalues by decreasing |lambda| and its cost."""

    eigenvalues: tuple[float, ...]
    matvecs: int


@dataclass(frozen=True)
class SolverStep:
    """Where an eigensolver stands after one product of the operator (what a progress bar shows)."""

    matvecs: int  # products so far, this one included
    estimate: float  # power: the eigenvalue being iterated; lanczos: the largest-|theta| Ritz value
    found: int  # eigenvalues settled so far (power: deflated; lanczos: Ritz pairs within `tol`)


OnStep = Callable[[SolverStep], None]


def max_matvecs(method: Method, k: int, max_iter: int, dimension: int) -> int:
    """The most products a solver can use on one operator (one batch's Hessian); it stops earlier when it converges."""
    if method == "power":
        return min(k, dimension) * max_iter
    return min(max_iter, dimension)


def random_start(chunks: Sequence[int], generator: torch.Generator, *, dtype: torch.dtype, device) -> torch.Tensor:
    """A unit random vector, drawn chunk by chunk (one chunk per parameter tensor).

    Drawing per parameter on the CPU generator makes the start reproducible across
    devices and identical to `torch.randn(p.shape)` per parameter after `manual_seed`.
    """
    parts = [torch.randn(n, generator=generator, dtype=dtype) for n in chunks]
    vector = torch.cat(parts).to(device)
    return vector / vector.norm()


def _project_out(vector: torch.Tensor, basis: Sequence[torch.Tensor]) -> torch.Tensor:
    # Modified Gram-Schmidt: orthogonal to every (unit) basis vector.
    for q in basis:
        vector = vector - torch.dot(q, vector) * q
    return vector


def power_iteration(
    matvec: Matvec,
    chunks: Sequence[int],
    k: int = 5,
    *,
    max_iter: int = 100,
    tol: float = 1e-3,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device="cpu",
    on_step: OnStep | None = None,
) -> EigenEstimate:
    """The k largest-|lambda| eigenvalues of a symmetric operator by power iteration.

    Each eigenpair starts from a fresh random vector and iterates in the orthogonal
    complement of the eigenvectors already found (deflation). It stops when the Rayleigh
    quotient changes by less than `tol` relative to its previous value, or after `max_iter`.
    `on_step` is called after every Hessian-vector product.
    """
    generator = generator or torch.Generator().manual_seed(0)
    found: list[torch.Tensor] = []
    values: list[float] = []
    matvecs = 0
    for _ in range(min(k, sum(chunks))):
        vector = random_start(chunks, generator, dtype=dtype, device=device)
        previous: float | None = None
        value = 0.0
        for _ in range(max_iter):
            vector = _project_out(vector, found)
            vector = vector / vector.norm()
            product = matvec(vector)
            matvecs += 1
            value = float(torch.dot(vector, product))
            if on_step is not None:
                on_step(SolverStep(matvecs, value, len(values)))
            norm = product.norm()
            if norm == 0:  # the vector lies in the null space: the eigenvalue is 0
                break
            vector = product / norm
            if previous is not None and abs(value - previous) < tol * (abs(previous) + 1e-6):
                break
            previous = value
        vector = _project_out(vector, found)
        found.append(vector / vector.norm())
        values.append(value)
    order = sorted(range(len(values)), key=lambda i: -abs(values[i]))
    return EigenEstimate(tuple(values[i] for i in order), matvecs)


def lanczos(
    matvec: Matvec,
    chunks: Sequence[int],
    k: int = 5,
    *,
    max_iter: int = 100,
    tol: float = 1e-3,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device="cpu",
    on_step: OnStep | None = None,
) -> EigenEstimate:
    """The k largest-|lambda| eigenvalues of a symmetric operator by Lanczos.

    Full reorthogonalisation keeps the Krylov basis orthogonal (it costs one dot and one
    axpy per stored vector per step, nothing beside a Hessian-vector product; the memory
    is one parameter-sized vector per step). Stops when each of the k largest-|theta| Ritz
    pairs has residual norm |beta_m * s_m| <= tol * |theta|, or after `max_iter` steps.
    `on_step` is called after every step (one Hessian-vector product each).
    """
    generator = generator or torch.Generator().manual_seed(0)
    dimension = sum(chunks)
    basis: list[torch.Tensor] = []
    alphas: list[float] = []
    betas: list[float] = []
    q = random_start(chunks, generator, dtype=dtype, device=device)
    wanted = torch.zeros(0, dtype=torch.float64)
    for _ in range(min(max_iter, dimension)):
        basis.append(q)
        w = matvec(q)
        alpha = float(torch.dot(q, w))
        # Projecting out the whole basis also removes the three-term recurrence's
        # alpha * q and beta * q_previous. Twice is enough (Kahan/Parlett): one pass
        # leaves float32 round-off that grows into spurious copies of converged eigenvalues.
        w = _project_out(_project_out(w, basis), basis)
        beta = float(w.norm())
        alphas.append(alpha)
        tridiagonal = torch.diag(torch.tensor(alphas, dtype=torch.float64))
        if betas:
            off = torch.tensor(betas, dtype=torch.float64)
            tridiagonal += torch.diag(off, 1) + torch.diag(off, -1)
        theta, vectors = torch.linalg.eigh(tridiagonal)
        pick = torch.argsort(theta.abs(), descending=True)[:k]
        wanted = theta[pick]
        residuals = beta * vectors[-1, pick].abs()
        settled = residuals <= tol * wanted.abs()
        if on_step is not None:
            on_step(SolverStep(len(basis), float(wanted[0]), int(settled.sum())))
        scale = max(abs(a) for a in alphas) or 1.0
        if beta <= 1e-6 * scale:  # an invariant subspace: the Ritz values are exact
            break
        if len(pick) == min(k, dimension) and bool(settled.all()):
            break
        betas.append(beta)
        q = w / beta
    return EigenEstimate(tuple(float(v) for v in wanted), len(basis))


SOLVERS: dict[str, Callable[..., EigenEstimate]] = {"power": power_iteration, "lanczos": lanczos}


def arpack(
    matvec: Matvec,
    chunks: Sequence[int],
    k: int = 5,
    *,
    tol: float = 1e-3,
    max_restarts: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device="cpu",
) -> EigenEstimate:
    """The k largest-|lambda| eigenvalues by SciPy's ARPACK (`scipy.sparse.linalg.eigsh` on a
    `LinearOperator`, implicitly restarted Lanczos): the reference the solvers above are
    checked and benchmarked against.

    Starts from the same `random_start` vector; each product goes through NumPy on the CPU.
    `tol` is ARPACK's (the relative accuracy of the Ritz values), `max_restarts` its `maxiter`
    (None: ARPACK's default). Not converging within it raises SciPy's `ArpackNoConvergence`.
    """
    import numpy as np
    from scipy.sparse.linalg import LinearOperator, eigsh

    generator = generator or torch.Generator().manual_seed(0)
    dimension = sum(chunks)
    numpy_dtype = np.float64 if dtype == torch.float64 else np.float32
    matvecs = 0

    def product(vector: np.ndarray) -> np.ndarray:
        nonlocal matvecs
        matvecs += 1
        flat = torch.from_numpy(np.ascontiguousarray(vector, dtype=numpy_dtype).reshape(-1))
        return matvec(flat.to(device)).cpu().numpy()

    start = random_start(chunks, generator, dtype=dtype, device="cpu").numpy()
    operator = LinearOperator((dimension, dimension), matvec=product, dtype=numpy_dtype)
    # ARPACK finds at most dimension - 1 eigenvalues.
    values = eigsh(operator, k=min(k, dimension - 1), which="LM", tol=tol, v0=start, maxiter=max_restarts)
    found = sorted((float(v) for v in values[0]), key=abs, reverse=True)
    return EigenEstimate(tuple(found), matvecs)
