"""Filter-normalised loss landscapes (Li, Xu, Taylor, Studer & Goldstein, NeurIPS 2018).

The loss is evaluated at w + a d (1-D) or w + a d + b e (2-D) on a grid of a (and b) in
[-span, span], where d and e are random directions scaled filter by filter: every filter of
a weight tensor (a slice along its first axis: an output channel of a conv, a row of a
linear layer) gets the norm of the same filter of the weights. Tensors of one dimension
(BatchNorm and LayerNorm scales and shifts, biases) get a zero direction, as in Li et al.'s
"ignore biasbn": the picture is of the weights, not of the normalisation.

The loss is the one Park & Kim draw (and the Hessian measures): the mean NLL on augmented
training batches plus 0.5 * weight decay * ||w||^2 over all trainable parameters, with the
model in eval mode (BatchNorm on its running statistics, no stochastic depth), so that every
grid point is a fixed function of the weights. The grid always holds a = 0 exactly, where
the value is the model's own loss at its weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from archdsl.run.evaluate import NON_FINITE_HINT, NonFiniteOutput

Batches = Sequence[tuple[torch.Tensor, torch.Tensor]]
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


class Landscape(BaseModel):
    """Loss on a grid around the weights: `losses[i]` is the loss at a = coordinates[i] (1-D), or
    `losses[i][j]` at (a, b) = (coordinates[i], coordinates[j]) (2-D)."""

    model_config = ConfigDict(frozen=True)

    dims: Literal[1, 2]
    coordinates: tuple[float, ...]
    losses: tuple[float, ...] | tuple[tuple[float, ...], ...]
    center: float  # the loss at the weights (a = b = 0)
    span: float
    points: int
    batches: int
    batch_size: int
    weight_decay: float
    seed: int
    directions: str = "filter-normalised random (Li et al. 2018), zero for 1-d tensors (BN, LayerNorm, biases)"
    bn_mode: Literal["eval"] = "eval"


def filter_normalised_direction(parameters: Sequence[torch.Tensor], generator: torch.Generator) -> list[torch.Tensor]:
    """One random direction per parameter tensor, each filter scaled to its weight filter's norm.

    Drawn on the CPU generator tensor by tensor (reproducible across devices); a filter of
    zero weights gets a zero direction.
    """
    direction = []
    for p in parameters:
        if p.ndim <= 1:
            direction.append(torch.zeros_like(p))
            continue
        d = torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device)
        weight_norms = p.detach().reshape(len(p), -1).norm(dim=1)
        d_norms = d.reshape(len(d), -1).norm(dim=1).clamp_min(1e-12)
        scale = (weight_norms / d_norms).reshape(-1, *([1] * (p.ndim - 1)))
        direction.append(d * scale)
    return direction


def cross_entropy(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean NLL of a batch: the data term of the landscape (and of the Hessian)."""
    return F.cross_entropy(model(inputs), targets)


def _loss(model: nn.Module, params: Sequence[torch.Tensor], batches: Batches, weight_decay: float, loss_fn) -> float:
    total = sum(float(loss_fn(model, x, y)) * len(y) for x, y in batches) / sum(len(y) for _, y in batches)
    if weight_decay:
        total += 0.5 * weight_decay * float(sum(p.double().pow(2).sum() for p in params))
    return total


def grid(span: float, points: int) -> list[float]:
    """`points` (odd) equally spaced values in [-span, span], the middle one exactly 0."""
    if points < 3 or points % 2 == 0:
        raise ValueError(f"a landscape needs an odd number of points >= 3 (so that 0 is one), got {points}")
    half = points // 2
    return [span * (i - half) / half for i in range(points)]


def loss_landscape(
    model: nn.Module,
    batches: Batches,
    *,
    dims: Literal[1, 2] = 1,
    points: int = 21,
    span: float = 1.0,
    weight_decay: float = 0.0,
    seed: int = 0,
    directions: Sequence[Sequence[torch.Tensor]] | None = None,
    loss_fn: LossFn = cross_entropy,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> Landscape:
    """The loss (NLL + 0.5 * wd * ||w||^2 by default) along `dims` filter-normalised random directions.

    `directions` (one list of tensors per axis, in `model.parameters()` order of the trainable
    ones) replaces the random ones. The weights are restored exactly afterwards.
    """
    from archdsl.progress import progress_bar

    if dims not in (1, 2):
        raise ValueError(f"a landscape has 1 or 2 dimensions, got {dims}")
    batches = list(batches)
    if not batches:
        raise ValueError("no batches to evaluate the loss on")
    coordinates = grid(span, points)
    if device is not None:
        model = model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    target = params[0].device
    batches = [(x.to(target), y.to(target)) for x, y in batches]
    if directions is None:
        generator = torch.Generator().manual_seed(seed)
        directions = [filter_normalised_direction(params, generator) for _ in range(dims)]
    if len(directions) != dims or any(len(d) != len(params) for d in directions):
        raise ValueError(f"need {dims} direction(s) of {len(params)} tensors each")
    origin = [p.detach().clone() for p in params]
    cells = [(a,) for a in coordinates] if dims == 1 else [(a, b) for a in coordinates for b in coordinates]
    values: list[float] = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for cell in progress_bar(cells, desc="landscape", unit="point", show=progress):
                for i, p in enumerate(params):
                    moved = origin[i].clone()
                    for step, direction in zip(cell, directions, strict=True):
                        if step:
                            moved.add_(direction[i], alpha=step)
                    p.copy_(moved)
                values.append(_loss(model, params, batches, weight_decay, loss_fn))
                if not any(cell) and not math.isfinite(values[-1]):  # at the weights: nothing to compare with
                    raise NonFiniteOutput(
                        f"the model's loss is not finite (NaN or infinite) at its own weights, on "
                        f"{sum(len(y) for _, y in batches)} images",
                        hint=NON_FINITE_HINT,
                    )
    finally:
        with torch.no_grad():
            for p, saved in zip(params, origin, strict=True):
                p.copy_(saved)
        model.train(was_training)
    half = points // 2
    if dims == 1:
        losses: tuple = tuple(values)
        center = values[half]
    else:
        losses = tuple(tuple(values[i * points : (i + 1) * points]) for i in range(points))
        center = losses[half][half]
    return Landscape(
        dims=dims,
        coordinates=tuple(coordinates),
        losses=losses,
        center=center,
        span=span,
        points=points,
        batches=len(batches),
        batch_size=max(len(y) for _, y in batches),
        weight_decay=weight_decay,
        seed=seed,
    )
