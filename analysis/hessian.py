"""The Hessian "max eigenvalue spectrum" of Park & Kim (NEP and APE).

For each mini-batch of augmented training images (`_hessian_batches.training_batches`), the
top-k (largest |lambda|) eigenvalues of the Hessian of the batch loss (NLL + 0.5 *
weight_decay * ||w||^2) with respect to all trainable parameters are estimated by an
eigensolver (`eigensolvers`) on the Hessian-vector-product operator (`hessian_operator`);
the eigenvalues of all batches are pooled into one spectrum here.

Decisions, and why:
- The model is measured in eval mode. BatchNorm then uses its running statistics, so
  the loss is a fixed function of the weights (train-mode BN would make every sample's
  loss depend on its batch mates and would update the running statistics on every
  forward), and DropPath is off, so repeated Hessian-vector products see the same
  function (stochastic depth would make the operator random). The products run under
  the math attention kernel: fused kernels have no double backward.
- Lanczos is the default (`auto`, `_solver_choice.choose_method`: unless its basis of up to
  `max_iter` parameter-sized vectors would not fit a quarter of the device's memory). It
  estimates the same top-k, within `tol` of the exact values (tests/test_analysis_hessian.py
  checks it at the default settings against `torch.linalg.eigvalsh` of the full Hessian of a
  small conv + MSA network), in fewer Hessian-vector products than power iteration (2-8x
  fewer in docs/analysis.md's table), whose stopping rule stops short of the values by up to
  5 % at tol 1e-3 and can return a wrong 5th eigenvalue.

The solvers (`eigensolvers`), the operator (`_hessian_operator`), the solver choice
(`_solver_choice`) and the batches (`_hessian_batches`) live in their own modules; import their
names from there (`archdsl.analysis` exports `hessian_operator` and `training_batches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import torch
import torch.nn as nn
from pydantic import BaseModel, ConfigDict, computed_field

from archdsl.analysis._hessian_operator import HvpBackend, hessian_operator
from archdsl.analysis._solver_choice import MethodChoice, choose_method
from archdsl.analysis.eigensolvers import SOLVERS, EigenEstimate, Method, OnStep, SolverStep, max_matvecs
from archdsl.nn.blocks.attention import math_attention  # fused kernels have no double backward
from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS

__all__ = [
    "DEFAULT_WEIGHT_DECAY",
    "Spectrum",
    "average_positive_eigenvalue",
    "hessian_spectrum",
    "negative_eigenvalue_proportion",
    "top_eigenvalues",
]

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


def negative_eigenvalue_proportion(eigenvalues: Sequence[float]) -> float:
    """NEP: the share of the pooled eigenvalues below 0 (0 for an empty spectrum)."""
    if not eigenvalues:
        return 0.0
    return sum(value < 0 for value in eigenvalues) / len(eigenvalues)


def average_positive_eigenvalue(eigenvalues: Sequence[float]) -> float | None:
    """APE: the mean of the pooled eigenvalues above 0, None when none is positive."""
    positive = [value for value in eigenvalues if value > 0]
    return sum(positive) / len(positive) if positive else None


# --------------------------------------------------------------------------- the spectrum


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
    from archdsl.progress import StepLog, progress_bar

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
    log = StepLog("hessian", len(batches) * per_batch, show=progress)  # a log's lines, where the bar is not drawn
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
                on_step=_bar_step(bar, log, index, len(batches), k) if progress else None,
            )
            bar.update((index + 1) * per_batch - bar.n)
            log.step(f"batch {index + 1}/{len(batches)} done", count=(index + 1) * per_batch - log.done)
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


def _bar_step(bar, log, batch: int, batches: int, k: int) -> OnStep:
    """A solver callback that ticks `bar` (and, in a log, `log`) once per product and shows the current estimate."""

    def step(state: SolverStep) -> None:
        where = f"batch {batch + 1}/{batches}, found {state.found}/{k}, λ={state.estimate:.4g}"
        bar.set_postfix_str(where, refresh=False)
        bar.update(1)
        log.step(where)

    return step
