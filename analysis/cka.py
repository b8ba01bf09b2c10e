"""Mini-batch linear CKA between every pair of blocks (Nguyen, Raghu & Kornblith, ICLR 2021).

For two layers with representations X (n, p) and Y (n, q) of the same n images (feature
maps flattened per image), the linear kernels are K = X X^T and L = Y Y^T, and

    CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)).

Over a data set too large for one Gram matrix, Nguyen et al. average an *unbiased* HSIC
estimate (Song et al., 2012) over mini-batches, each term separately, then form the ratio;
the unbiased estimator makes the average independent of the batch size. For a batch of n
(n >= 4), with K~ and L~ the kernels with their diagonals set to 0:

    HSIC_1(K, L) = [tr(K~ L~) + (1^T K~ 1)(1^T L~ 1) / ((n-1)(n-2)) - 2/(n-2) 1^T K~ L~ 1] / (n(n-3)).

The biased estimator, HSIC_0 = tr(K H L H) / (n-1)^2 with H = I - 11^T/n, gives the classic
linear CKA ||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F) (columns centred); it is
offered for comparison (`unbiased=False`).

Layers are the stem and every block (`stages.<stage>.<index>`), measured in eval mode on
their outputs as the blocks return them (token sequences include the class token).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from pydantic import BaseModel, ConfigDict

from archdsl.analysis.fourier import feature_layers


def gram(features: torch.Tensor) -> torch.Tensor:
    """The linear kernel X X^T (n, n) of a batch, each example flattened, in float64."""
    flat = features.reshape(len(features), -1).double()
    return flat @ flat.T


def hsic_unbiased(kx: torch.Tensor, ky: torch.Tensor) -> float:
    """Song et al.'s unbiased HSIC estimate of two (n, n) kernels, n >= 4."""
    n = kx.shape[0]
    if n < 4:
        raise ValueError(f"the unbiased HSIC needs a batch of at least 4, got {n}")
    kx = kx.clone().fill_diagonal_(0)
    ky = ky.clone().fill_diagonal_(0)
    trace = (kx * ky).sum()  # tr(K L) for symmetric kernels
    sums = kx.sum() * ky.sum() / ((n - 1) * (n - 2))
    cross = 2 / (n - 2) * (kx.sum(dim=0) @ ky.sum(dim=1))  # 1^T K L 1
    return float((trace + sums - cross) / (n * (n - 3)))


def hsic_biased(kx: torch.Tensor, ky: torch.Tensor) -> float:
    """tr(K H L H) / (n - 1)^2, H the centring matrix."""
    n = kx.shape[0]
    h = torch.eye(n, dtype=kx.dtype) - 1.0 / n
    return float(torch.trace(kx @ h @ ky @ h) / (n - 1) ** 2)


def linear_cka(x: torch.Tensor, y: torch.Tensor, *, unbiased: bool = True) -> float:
    """Linear CKA of two representations (n, ...) of the same n examples, from one batch."""
    hsic = hsic_unbiased if unbiased else hsic_biased
    kx, ky = gram(x), gram(y)
    return hsic(kx, ky) / (hsic(kx, kx) * hsic(ky, ky)) ** 0.5


class CKALayer(BaseModel):
    """A layer whose output CKA compares: its module path, stage, index and kind."""

    model_config = ConfigDict(frozen=True)

    name: str  # "stem" or "stages.<stage>.<index>"
    stage: str
    index: int
    kind: str  # "stem", "conv", "msa", "attn", "mlp", ...


class CKAResult(BaseModel):
    """CKA between every pair of layers (symmetric; 1 on the diagonal) and how it was measured."""

    model_config = ConfigDict(frozen=True)

    layers: tuple[CKALayer, ...]
    matrix: tuple[tuple[float, ...], ...]
    images: int
    batch_size: int
    batches: int
    unbiased: bool
    bn_mode: str = "eval"

    def value(self, a: str, b: str) -> float:
        names = [layer.name for layer in self.layers]
        return self.matrix[names.index(a)][names.index(b)]


def minibatch_cka(
    model: nn.Module,
    images: torch.Tensor,
    *,
    batch_size: int = 64,
    unbiased: bool = True,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> CKAResult:
    """Linear CKA between the outputs of every pair of layers, HSIC averaged over mini-batches.

    `images` are normalised (N, C, H, W); the last incomplete batch is left out (every batch
    must weigh the same in the average).
    """
    from archdsl.progress import progress_bar

    if batch_size < 4 and unbiased:
        raise ValueError(f"the unbiased HSIC needs batches of at least 4, got {batch_size}")
    batches = [batch for batch in images.split(batch_size) if len(batch) == batch_size]  # full batches only
    if not batches:
        raise ValueError(f"{len(images)} images make no batch of {batch_size}")
    layers = feature_layers(model)
    if device is not None:
        model = model.to(device)
    target = next(model.parameters()).device
    hsic = hsic_unbiased if unbiased else hsic_biased
    grams: dict[str, torch.Tensor] = {}

    def record(name: str):
        def hook(module: nn.Module, args, output: torch.Tensor) -> None:
            grams[name] = gram(output).cpu()

        return hook

    n = len(layers)
    sums = torch.zeros(n, n, dtype=torch.float64)
    handles = [model.get_submodule(layer.name).register_forward_hook(record(layer.name)) for layer in layers]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in progress_bar(batches, desc="cka", unit="batch", show=progress):
                grams.clear()
                model(batch.to(target))
                kernels = [grams[layer.name] for layer in layers]
                for i in range(n):
                    for j in range(i, n):
                        sums[i, j] += hsic(kernels[i], kernels[j])
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    sums = torch.triu(sums) + torch.triu(sums, 1).T
    diagonal = sums.diagonal().clamp_min(1e-300)
    matrix = sums / torch.sqrt(diagonal[:, None] * diagonal[None, :])
    return CKAResult(
        layers=tuple(CKALayer(name=x.name, stage=x.stage, index=x.index, kind=x.kind) for x in layers),
        matrix=tuple(tuple(float(v) for v in row) for row in matrix),
        images=len(batches) * batch_size,
        batch_size=batch_size,
        batches=len(batches),
        unbiased=unbiased,
    )
