"""Eigensolvers for a symmetric operator given only by its product (`matvec`): the k
largest-|lambda| eigenvalues, on flat torch vectors, on any device.

"Top" means largest in *magnitude*: power iteration converges to the eigenvalue of
largest |lambda|, and with deflation to the next largest |lambda| in the orthogonal
complement. A strongly negative eigenvalue therefore shows up in the top-k, which is
exactly what the Hessian's NEP (the share of negative ones) measures.

Two solvers on the same operator, called with the same arguments (`EigenProblem`): `power`
(the paper's power iteration with deflation; stops when the Rayleigh quotient changes by less
than `tol` relative, which stops a little short of the true value) and `lanczos` (Lanczos with
full reorthogonalisation; stops when every wanted Ritz pair has a residual
||H y - theta y|| <= tol * |theta|, usually in far fewer products and closer to the truth).
Both are checked against SciPy's ARPACK (`scipy.sparse.linalg.eigsh` on a `LinearOperator`: `arpack`
below on a network's Hessian, eigsh itself on a small matrix) in tests/test_analysis_hessian.py.
They stay rather than eigsh, which is no better: on benchmarks/hessian.py's 0.1 M-parameter
CNN (top-5, tol 1e-3, one thread) eigsh used 1.04x the Hessian-vector products of `lanczos` and
1.8x its CPU time for the same accuracy (worst relative error 1.3e-6 against 1.5e-6), and 1.38x
the products (2.2x the time) at tol 1e-5; and `lanczos`
runs on the operator's own device (eigsh takes NumPy vectors on the CPU: a copy each way per
product) and reports every product to the progress bar.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal, ParamSpec

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


class KrylovBasis:
    """Lanczos's orthonormal vectors, stored as the rows of blocks of `BLOCK` rows, so that projecting
    a vector out of all of them is two matrix-vector products per block rather than a Python loop
    of a dot and an axpy per vector (10-12x faster on alter50's 33 M parameters, one CPU thread:
    benchmarks/reorth.py).

    Blocks, not one matrix grown by copying: nothing is copied, and the memory is the vectors
    stored plus at most `BLOCK - 1` spare rows (a parameter-sized vector each)."""

    BLOCK = 8

    def __init__(self) -> None:
        self._blocks: list[torch.Tensor] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, vector: torch.Tensor) -> None:
        row = self._count % self.BLOCK
        if row == 0:
            self._blocks.append(vector.new_empty((self.BLOCK, vector.numel())))
        self._blocks[-1][row] = vector
        self._count += 1

    def project_out(self, vector: torch.Tensor) -> torch.Tensor:
        """`vector` without its components along the basis: Gram-Schmidt twice, classical within a
        block and modified across blocks. One pass leaves float32 round-off that grows into spurious
        copies of converged eigenvalues; twice is enough (Giraud, Langou and Rozloznik 2005)."""
        vector = vector.clone()  # updated in place below: no parameter-sized temporaries
        for _ in range(2):
            for start, block in zip(range(0, self._count, self.BLOCK), self._blocks, strict=True):
                rows = block[: self._count - start]  # the last block: only its filled rows
                vector.addmv_(rows.T, rows @ vector, alpha=-1)
        return vector


@dataclass(frozen=True)
class EigenProblem:
    """What both solvers take: a symmetric operator given by its product, how many of its
    eigenvalues are wanted and how hard to look. `power_iteration(matvec, chunks, k, tol=...)`
    (and `lanczos(...)`) are called with these arguments and build one."""

    matvec: Matvec  # the operator's product with a flat vector
    chunks: Sequence[int]  # the vector's parts (one per parameter tensor): `random_start` draws them
    k: int = 5  # eigenvalues wanted, largest |lambda| first
    _: KW_ONLY
    max_iter: int = 100  # power: products per eigenvalue; lanczos: steps in all
    tol: float = 1e-3
    generator: torch.Generator | None = None  # draws the random starts; None: a generator seeded 0
    dtype: torch.dtype = torch.float32
    device: torch.device | str = "cpu"
    on_step: OnStep | None = None  # called after every product (see `SolverStep`)

    @property
    def dimension(self) -> int:
        return sum(self.chunks)

    def starts(self) -> Iterator[torch.Tensor]:
        """Unit random start vectors, one after another from the same generator."""
        generator = self.generator or torch.Generator().manual_seed(0)
        while True:
            yield random_start(self.chunks, generator, dtype=self.dtype, device=self.device)

    def report(self, matvecs: int, estimate: float, found: int) -> None:
        if self.on_step is not None:
            self.on_step(SolverStep(matvecs, estimate, found))


_P = ParamSpec("_P")


def _called_with(
    arguments: Callable[_P, EigenProblem],
) -> Callable[[Callable[[EigenProblem], EigenEstimate]], Callable[_P, EigenEstimate]]:
    """A solver of an `EigenProblem` that is called with the problem's own arguments (one
    signature for both solvers, and `help()` shows it)."""

    def decorate(solve: Callable[[EigenProblem], EigenEstimate]) -> Callable[_P, EigenEstimate]:
        @functools.wraps(solve)
        def solver(*args: _P.args, **kwargs: _P.kwargs) -> EigenEstimate:
            return solve(arguments(*args, **kwargs))

        solver.__signature__ = inspect.signature(arguments).replace(  # type: ignore[attr-defined]
            return_annotation=EigenEstimate.__name__
        )
        return solver

    return decorate


@_called_with(EigenProblem)
def power_iteration(problem: EigenProblem) -> EigenEstimate:
    """The k largest-|lambda| eigenvalues of a symmetric operator by power iteration.

    Each eigenpair starts from a fresh random vector and iterates in the orthogonal
    complement of the eigenvectors already found (deflation). It stops when the Rayleigh
    quotient changes by less than `tol` relative to its previous value, or after `max_iter`.
    `on_step` is called after every Hessian-vector product.
    """
    found: list[torch.Tensor] = []
    values: list[float] = []
    matvecs = 0
    for vector in itertools.islice(problem.starts(), min(problem.k, problem.dimension)):
        previous: float | None = None
        value = 0.0
        for _ in range(problem.max_iter):
            vector = _project_out(vector, found)
            vector = vector / vector.norm()
            product = problem.matvec(vector)
            matvecs += 1
            value = float(torch.dot(vector, product))
            problem.report(matvecs, value, len(values))
            norm = product.norm()
            if norm == 0:  # the vector lies in the null space: the eigenvalue is 0
                break
            vector = product / norm
            if previous is not None and abs(value - previous) < problem.tol * (abs(previous) + 1e-6):
                break
            previous = value
        vector = _project_out(vector, found)
        found.append(vector / vector.norm())
        values.append(value)
    order = sorted(range(len(values)), key=lambda i: -abs(values[i]))
    return EigenEstimate(tuple(values[i] for i in order), matvecs)


@_called_with(EigenProblem)
def lanczos(problem: EigenProblem) -> EigenEstimate:
    """The k largest-|lambda| eigenvalues of a symmetric operator by Lanczos.

    Full reorthogonalisation keeps the Krylov basis orthogonal (it costs two matrix-vector
    products per block of the basis per step, little beside a Hessian-vector product; the
    memory is one parameter-sized vector per step, `KrylovBasis`). Stops when each of the k largest-|theta| Ritz
    pairs has residual norm |beta_m * s_m| <= tol * |theta|, or after `max_iter` steps.
    `on_step` is called after every step (one Hessian-vector product each).
    """
    k, dimension = problem.k, problem.dimension
    alphas: list[float] = []
    betas: list[float] = []
    q = next(problem.starts())
    basis = KrylovBasis()
    wanted = torch.zeros(0, dtype=torch.float64)
    for _ in range(min(problem.max_iter, dimension)):
        basis.append(q)
        w = problem.matvec(q)
        alpha = float(torch.dot(q, w))
        # Projecting out the whole basis also removes the three-term recurrence's
        # alpha * q and beta * q_previous.
        w = basis.project_out(w)
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
        settled = residuals <= problem.tol * wanted.abs()
        problem.report(len(basis), float(wanted[0]), int(settled.sum()))
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
