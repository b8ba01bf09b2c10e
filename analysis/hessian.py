"""The Hessian "max eigenvalue spectrum" of Park & Kim (NEP and APE).

For each mini-batch of augmented training images, the top-k eigenvalues of the Hessian
of the batch loss (NLL + 0.5 * weight_decay * ||w||^2) with respect to all trainable
parameters are estimated; the eigenvalues of all batches are pooled into one spectrum.

"Top" means largest in *magnitude*: power iteration converges to the eigenvalue of
largest |lambda|, and with deflation to the next largest |lambda| in the orthogonal
complement. A strongly negative eigenvalue therefore shows up in the top-k, which is
exactly what NEP (the share of negative ones) measures.

Decisions, and why:
- The model is measured in eval mode. BatchNorm then uses its running statistics, so
  the loss is a fixed function of the weights (train-mode BN would make every sample's
  loss depend on its batch mates and would update the running statistics on every
  forward), and DropPath is off, so repeated Hessian-vector products see the same
  function (stochastic depth would make the operator random).
- The weight-decay term's Hessian is exactly `weight_decay * I`; it is added to every
  Hessian-vector product analytically instead of being differentiated twice. It covers
  all trainable parameters.
- Hessian-vector products use double backward through a graph kept from one
  forward/backward pass per batch (`hvp="autograd"`), or forward-over-reverse with
  `torch.func.jvp(grad(loss))` (`hvp="func"`), which recomputes the graph per product.
  Both run under the math attention kernel: fused kernels have no double backward.
- Two eigensolvers on the same operator: `power` (the paper's power iteration with
  deflation; stops when the Rayleigh quotient changes by less than `tol` relative, which
  stops a little short of the true value) and `lanczos` (Lanczos with full
  reorthogonalisation; stops when every wanted Ritz pair has a residual
  ||H y - theta y|| <= tol * |theta|, usually in far fewer products and closer to the truth).
- Lanczos is the default (`auto`: unless its basis of up to `max_iter` parameter-sized
  vectors would not fit a quarter of the device's memory). It estimates the same top-k,
  within `tol` of the exact values (tests/test_analysis_hessian.py checks it at the default
  settings against `torch.linalg.eigvalsh` of the full Hessian of a small conv + MSA
  network), in fewer Hessian-vector products than power iteration (2-8x fewer in
  docs/analysis.md's table), whose stopping rule stops short of the values by up to 5 % at
  tol 1e-3 and can return a wrong 5th eigenvalue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, computed_field

from archdsl.data.base import ImageSet
from archdsl.nn.blocks.attention import math_attention  # fused kernels have no double backward
from archdsl.run.evaluate import NON_FINITE_HINT, NonFiniteOutput
from archdsl.run.loader import make_loader
from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS, RecipeName, TrainConfig

Matvec = Callable[[torch.Tensor], torch.Tensor]
Method = Literal["power", "lanczos"]
MethodChoice = Literal["auto", "power", "lanczos"]  # auto: see `choose_method`
HvpBackend = Literal["autograd", "func"]

# The L2 term of the paper's loss: the weight decay of its (DeiT-style) training recipe.
DEFAULT_WEIGHT_DECAY: float = RECIPE_DEFAULTS[DEFAULT_RECIPE]["weight_decay"]


# --------------------------------------------------------------------------- results


class Spectrum(BaseModel):
    """Pooled top-k Hessian eigenvalues over `batches` mini-batches, and the options used."""

    model_config = ConfigDict(frozen=True)

    eigenvalues: tuple[float, ...]  # batch by batch, each batch's k by decreasing |lambda|
    nep: float  # share of eigenvalues < 0
    ape: float | None  # mean of the eigenvalues > 0 (None when there is none)
    k: int
    batches: int
    batch_size: int
    tol: float
    max_iter: int
    weight_decay: float
    seed: int
    method: Method
    hvp: HvpBackend
    bn_mode: Literal["eval"] = "eval"
    hvps: int  # Hessian-vector products used in all (the cost)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hvps_per_eigenvalue(self) -> float:
        """The cost of one eigenvalue: Hessian-vector products per eigenvalue found."""
        return self.hvps / len(self.eigenvalues) if self.eigenvalues else 0.0


@dataclass(frozen=True)
class EigenEstimate:
    """What an eigensolver found: eigenvalues by decreasing |lambda| and its cost."""

    eigenvalues: tuple[float, ...]
    matvecs: int


@dataclass(frozen=True)
class SolverStep:
    """Where an eigensolver stands after one Hessian-vector product (what a progress bar shows)."""

    matvecs: int  # products so far, this one included
    estimate: float  # power: the eigenvalue being iterated; lanczos: the largest-|theta| Ritz value
    found: int  # eigenvalues settled so far (power: deflated; lanczos: Ritz pairs within `tol`)


OnStep = Callable[[SolverStep], None]


def max_matvecs(method: Method, k: int, max_iter: int, dimension: int) -> int:
    """The most Hessian-vector products a solver can use on one batch (it stops earlier when it converges)."""
    if method == "power":
        return min(k, dimension) * max_iter
    return min(max_iter, dimension)


def negative_eigenvalue_proportion(eigenvalues: Sequence[float]) -> float:
    """NEP: the share of the pooled eigenvalues below 0 (0 for an empty spectrum)."""
    if not eigenvalues:
        return 0.0
    return sum(value < 0 for value in eigenvalues) / len(eigenvalues)


def average_positive_eigenvalue(eigenvalues: Sequence[float]) -> float | None:
    """APE: the mean of the pooled eigenvalues above 0, None when none is positive."""
    positive = [value for value in eigenvalues if value > 0]
    return sum(positive) / len(positive) if positive else None


# --------------------------------------------------------------------------- eigensolvers


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


# --------------------------------------------------------------------------- the Hessian operator


@dataclass
class HessianOperator:
    """v -> (H_nll + weight_decay * I) v for one batch, on flat parameter-sized vectors."""

    matvec: Matvec
    chunks: tuple[int, ...]  # numel of each trainable parameter, in `model.parameters()` order
    dtype: torch.dtype
    device: torch.device


def _flatten(tensors: Sequence[torch.Tensor | None], like: Sequence[torch.Tensor]) -> torch.Tensor:
    # A parameter off the loss path has no gradient: its Hessian rows are zero.
    return torch.cat(
        [(t if t is not None else torch.zeros_like(p)).reshape(-1) for t, p in zip(tensors, like, strict=True)]
    )


def _unflatten(vector: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [part.view_as(p) for part, p in zip(torch.split(vector, [p.numel() for p in like]), like, strict=True)]


def hessian_operator(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    weight_decay: float = 0.0,
    hvp: HvpBackend = "autograd",
) -> HessianOperator:
    """The Hessian of mean cross-entropy on (inputs, targets) + 0.5 * wd * ||w||^2.

    The model is used as it is (set eval mode and the math attention kernel around the
    calls, as `hessian_spectrum` does).
    """
    names_params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in names_params]
    if not params:
        raise ValueError("the model has no trainable parameters")

    if hvp == "autograd":
        loss = F.cross_entropy(model(inputs), targets)
        grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        # Only gradients that depend on the weights have a non-zero Hessian block.
        live = [i for i, g in enumerate(grads) if g is not None and g.requires_grad]

        def hessian_product(vector: torch.Tensor) -> torch.Tensor:
            pieces = _unflatten(vector, params)
            products = torch.autograd.grad(
                [grads[i] for i in live],
                params,
                grad_outputs=[pieces[i] for i in live],
                retain_graph=True,
                allow_unused=True,
            )
            return _flatten(products, params)

    elif hvp == "func":
        from torch.func import functional_call, grad, jvp

        names = [name for name, _ in names_params]
        fixed: dict[str, torch.Tensor] = {name: p for name, p in model.named_parameters() if not p.requires_grad}
        fixed.update(dict(model.named_buffers()))
        primals = tuple(p.detach() for p in params)

        def loss_of(*values: torch.Tensor) -> torch.Tensor:
            state = {**fixed, **dict(zip(names, values, strict=True))}
            return F.cross_entropy(functional_call(model, state, (inputs,)), targets)

        gradient = grad(loss_of, argnums=tuple(range(len(params))))

        def hessian_product(vector: torch.Tensor) -> torch.Tensor:
            _, products = jvp(gradient, primals, tuple(_unflatten(vector, params)))[:2]
            return _flatten(products, params)

    else:
        raise ValueError(f"unknown Hessian-vector product backend {hvp!r} (autograd or func)")

    def matvec(vector: torch.Tensor) -> torch.Tensor:
        product = hessian_product(vector).detach()
        if not bool(torch.isfinite(product).all()):  # eigh and the Rayleigh quotients would fail on it
            raise NonFiniteOutput(
                f"the Hessian of the model's loss is not finite (NaN or infinite) on a batch of {len(inputs)} images",
                hint=NON_FINITE_HINT,
            )
        return product + weight_decay * vector if weight_decay else product

    first = params[0]
    return HessianOperator(matvec, tuple(p.numel() for p in params), first.dtype, first.device)


SOLVERS: dict[str, Callable[..., EigenEstimate]] = {"power": power_iteration, "lanczos": lanczos}

# Lanczos keeps one parameter-sized vector per step; `auto` lets its basis (max_iter of them)
# take at most this share of the device's memory, and uses power iteration beyond.
LANCZOS_MEMORY_SHARE = 0.25


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of a CUDA device, or of the machine for the CPU; None if unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type == "cpu":
        try:
            import os

            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    return None


def choose_method(model: nn.Module, max_iter: int, method: MethodChoice = "auto") -> Method:
    """The eigensolver for `method`: `auto` is Lanczos (the same top-k in fewer products,
    closer to the exact values) unless its basis would not fit `LANCZOS_MEMORY_SHARE` of the
    device's memory, then power iteration (a few vectors whatever the step count)."""
    if method not in ("auto", *SOLVERS):
        raise ValueError(f"unknown eigensolver {method!r} (auto, power or lanczos)")
    if method != "auto":
        return method
    params = [p for p in model.parameters() if p.requires_grad]
    basis = max_iter * sum(p.numel() for p in params) * (params[0].element_size() if params else 4)
    memory = device_memory_bytes(params[0].device) if params else None
    return "lanczos" if memory is None or basis <= LANCZOS_MEMORY_SHARE * memory else "power"


def top_eigenvalues(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    k: int = 5,
    max_iter: int = 100,
    tol: float = 1e-3,
    weight_decay: float = 0.0,
    method: MethodChoice = "auto",
    hvp: HvpBackend = "autograd",
    seed: int = 0,
    on_step: OnStep | None = None,
) -> EigenEstimate:
    """The top-k (largest |lambda|) Hessian eigenvalues for one batch, in eval mode;
    `on_step` after every Hessian-vector product (see `SolverStep`)."""
    method = choose_method(model, max_iter, method)
    was_training = model.training
    model.eval()
    try:
        with math_attention():
            operator = hessian_operator(model, inputs, targets, weight_decay=weight_decay, hvp=hvp)
            return SOLVERS[method](
                operator.matvec,
                operator.chunks,
                k,
                max_iter=max_iter,
                tol=tol,
                generator=torch.Generator().manual_seed(seed),
                dtype=operator.dtype,
                device=operator.device,
                on_step=on_step,
            )
    finally:
        model.train(was_training)


def hessian_spectrum(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    *,
    k: int = 5,
    max_iter: int = 100,
    tol: float = 1e-3,
    weight_decay: float = DEFAULT_WEIGHT_DECAY,
    method: MethodChoice = "auto",
    hvp: HvpBackend = "autograd",
    seed: int = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> Spectrum:
    """Pool the top-k Hessian eigenvalues of every (inputs, targets) batch into a Spectrum.

    Batch b starts its solver from the random vectors of seed `seed + b`. The spectrum
    records the solver used (`auto` resolved by `choose_method`).
    """
    from archdsl.progress import progress_bar

    if k < 1 or max_iter < 1 or not tol > 0:
        raise ValueError(f"need k >= 1, max_iter >= 1 and tol > 0, got k={k}, max_iter={max_iter}, tol={tol}")
    if device is not None:
        model = model.to(device)
    target_device = next(model.parameters()).device
    method = choose_method(model, max_iter, method)
    batches = list(batches)
    if not batches:
        raise ValueError("no batches to measure the Hessian on")
    pooled: list[float] = []
    total = 0
    batch_size = 0
    # The bar ticks per Hessian-vector product (what takes the time) out of the most the solver
    # may use; a batch that converges early skips the rest of its share.
    dimension = sum(p.numel() for p in model.parameters() if p.requires_grad)
    per_batch = max_matvecs(method, k, max_iter, dimension)
    with progress_bar(total=len(batches) * per_batch, desc="hessian", unit="hvp", show=progress) as bar:
        for index, (inputs, targets) in enumerate(batches):
            batch_size = max(batch_size, len(targets))
            estimate = top_eigenvalues(
                model,
                inputs.to(target_device),
                targets.to(target_device),
                k=k,
                max_iter=max_iter,
                tol=tol,
                weight_decay=weight_decay,
                method=method,
                hvp=hvp,
                seed=seed + index,
                on_step=_bar_step(bar, index, len(batches), k) if progress else None,
            )
            bar.update((index + 1) * per_batch - bar.n)
            pooled.extend(estimate.eigenvalues)
            total += estimate.matvecs
    return Spectrum(
        eigenvalues=tuple(pooled),
        nep=negative_eigenvalue_proportion(pooled),
        ape=average_positive_eigenvalue(pooled),
        k=k,
        batches=len(batches),
        batch_size=batch_size,
        tol=tol,
        max_iter=max_iter,
        weight_decay=weight_decay,
        seed=seed,
        method=method,
        hvp=hvp,
        hvps=total,
    )


def _bar_step(bar, batch: int, batches: int, k: int) -> OnStep:
    """A solver callback that ticks `bar` once per product and shows the current estimate."""

    def step(state: SolverStep) -> None:
        bar.set_postfix_str(
            f"batch {batch + 1}/{batches}, found {state.found}/{k}, λ={state.estimate:.4g}", refresh=False
        )
        bar.update(1)

    return step


def training_batches(
    image_set: ImageSet,
    n_batches: int,
    *,
    batch_size: int = 16,
    recipe: RecipeName | TrainConfig = DEFAULT_RECIPE,
    seed: int = 0,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first `n_batches` augmented, shuffled training batches (the paper's input).

    Uses the training loader so the augmentation is the recipe's; Mixup is not applied
    (it lives in the training step), so the labels stay hard and the loss is the NLL.
    The same seed gives the same batches; the global generators are left as they were.
    """
    from archdsl.errors import UserError

    available = len(image_set) // batch_size  # the training loader drops the last partial batch
    if available < n_batches:
        raise UserError(
            f"{image_set.name} has {len(image_set)} images: {available} batches of {batch_size}, not {n_batches}",
            hint="ask for fewer batches or a smaller batch size",
        )
    # The augmentation draws from the global generators: seed them for the same batches
    # on every call (candidates are compared on the same images), and put them back after.
    from archdsl.run.loader import globally_seeded

    with globally_seeded(seed):
        loader = make_loader(image_set, batch_size, augment=True, recipe=recipe, seed=seed, shuffle=True)
        batches = []
        for inputs, targets in loader:
            batches.append((inputs, targets))
            if len(batches) == n_batches:
                break
    return batches
