"""Running a trained model over an ImageSet: logits, top-1 accuracy and NLL.

Calibration (ECE) and corruption robustness belong to `archdsl.analysis`; this module
only produces the logits they are computed from.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.progress import progress_bar
from archdsl.run.device import autocast, model_device, model_dtype
from archdsl.run.loader import make_loader


class Evaluation(NamedTuple):
    """Top-1 accuracy (a fraction) and mean NLL (nats) on a set."""

    top1: float  # fraction in [0, 1]
    nll: float  # mean negative log-likelihood (cross-entropy), nats


def predict_logits(
    model: nn.Module,
    image_set: ImageSet,
    *,
    batch_size: int = 256,
    device: str | torch.device | None = None,
    amp: bool = False,
    workers: int | None = None,
    progress: bool = False,
    optimize: bool = True,
) -> torch.Tensor:
    """float32 logits (N, classes) on the CPU, in the order of `image_set`; the model in eval mode.

    `device=None` runs where the model already is; otherwise the model is moved there.
    `optimize` runs the fast inference copy of the model (`optimize_model(training=False)`),
    unless `model` already is one (make it once yourself to predict several sets with it).
    """
    from archdsl.run.optimize import InferenceModel, optimize_model

    device = model_device(model) if device is None else torch.device(device)
    if optimize and not isinstance(model, InferenceModel):
        model = optimize_model(model, training=False, device=device, images=len(image_set))
    model.to(device)
    was_training = model.training
    model.eval()
    outputs = []
    dtype = model_dtype(model)  # a float64 model (exact comparisons) takes float64 inputs
    loader = make_loader(image_set, batch_size, augment=False, shuffle=False, workers=workers, dtype=dtype)
    try:
        with torch.inference_mode():
            for images, _ in progress_bar(loader, desc=f"predict {image_set.name}", show=progress, leave=False):
                with autocast(device, amp):
                    logits = model(images.to(device, dtype=dtype, non_blocking=True))
                outputs.append(logits.float().cpu())
    finally:
        model.train(was_training)
    if not outputs:
        return torch.empty(0, getattr(model, "num_classes", 0))
    return torch.cat(outputs)  # outside inference mode: an ordinary tensor


def labels_tensor(labels) -> torch.Tensor:
    """int64 labels as a tensor (a copy: ImageSet labels may be read-only arrays)."""
    if isinstance(labels, torch.Tensor):
        return labels.to(torch.int64)
    import numpy as np

    return torch.tensor(np.asarray(labels), dtype=torch.int64)


def score_logits(logits: torch.Tensor, labels) -> Evaluation:
    """Top-1 accuracy (a fraction) and mean NLL (nats) of `logits` (N, classes) against integer
    `labels` (N,), on the whole set in float64: the one definition of both, which training,
    `archdsl eval` and the analyses (`archdsl.analysis.metrics`, robustness) share."""
    labels = labels_tensor(labels).cpu()
    if logits.ndim != 2 or labels.ndim != 1 or len(logits) != len(labels):
        raise ValueError(f"expected logits (N, C) and labels (N,), got {tuple(logits.shape)} and {tuple(labels.shape)}")
    if len(labels) == 0:
        raise ValueError("no samples to score")
    logits = logits.detach().double().cpu()
    top1 = float((logits.argmax(dim=1) == labels).double().mean())
    nll = float(F.cross_entropy(logits, labels))
    return Evaluation(top1=top1, nll=nll)


class NonFiniteOutput(UserError):
    """A model whose outputs are NaN or infinite though its weights are finite (weights large
    enough to overflow, a negative BatchNorm variance): nothing measured from it means anything."""


def require_finite_logits(logits: torch.Tensor, what: str = "") -> torch.Tensor:
    """`logits` (N, classes) when every one is finite; `NonFiniteOutput` naming how many images are not.
    For the measures (eval, analyze): training has its own divergence check (`archdsl.run.divergence`)."""
    bad = int((~torch.isfinite(logits)).flatten(1).any(dim=1).sum()) if logits.numel() else 0
    if bad:
        raise NonFiniteOutput(
            f"the model's logits are not finite (NaN or infinite) on {bad} of {len(logits)} images"
            + (f" of {what}" if what else ""),
            hint=NON_FINITE_HINT,
        )
    return logits


@contextmanager
def checkpoint_named(path: object) -> Iterator[None]:
    """A `NonFiniteOutput` raised inside names the checkpoint `path` whose model gave it."""
    try:
        yield
    except NonFiniteOutput as err:
        raise NonFiniteOutput(f"{path}: {err.message}", hint=err.hint) from None


NON_FINITE_HINT = (
    "its weights are finite but overflow, or contradict each other (a negative BatchNorm variance): "
    "the checkpoint is damaged or was edited"
)


def evaluate(model: nn.Module, image_set: ImageSet, **kwargs) -> Evaluation:
    """(top-1, NLL) of `model` on `image_set`; keyword arguments go to `predict_logits`."""
    return score_logits(predict_logits(model, image_set, **kwargs), image_set.labels)
