"""The Hessian of a model's batch loss as an operator: v -> (H_nll + weight_decay * I) v on flat
parameter-sized vectors, what the eigensolvers (`archdsl.analysis.eigensolvers`) iterate on.

Decisions, and why:
- The weight-decay term's Hessian is exactly `weight_decay * I`; it is added to every
  Hessian-vector product analytically instead of being differentiated twice. It covers
  all trainable parameters.
- Hessian-vector products use double backward through a graph kept from one
  forward/backward pass per batch (`hvp="autograd"`), or forward-over-reverse with
  `torch.func.jvp(grad(loss))` (`hvp="func"`), which recomputes the graph per product.
  Both need the math attention kernel around them: fused kernels have no double backward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from archdsl.analysis.eigensolvers import Matvec
from archdsl.run.evaluate import NON_FINITE_HINT, NonFiniteOutput

HvpBackend = Literal["autograd", "func"]


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
