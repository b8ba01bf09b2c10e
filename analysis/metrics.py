"""Predictive performance from logits: top-1 accuracy, NLL and expected calibration error.

All three are fractions or nats on the whole set (not per batch), so the search can
compare candidates evaluated with different batch sizes.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from archdsl.run.evaluate import labels_tensor, require_finite_logits, score_logits


class ClassificationMetrics(BaseModel):
    """`top1` and `ece` are fractions in [0, 1]; `nll` is the mean negative log-likelihood in nats."""

    model_config = ConfigDict(frozen=True)

    top1: float
    nll: float
    ece: float
    n_bins: int
    count: int


def expected_calibration_error(confidence: torch.Tensor, correct: torch.Tensor, n_bins: int = 15) -> float:
    """ECE with `n_bins` equal-width confidence bins (Guo et al., 2017).

    Sum over bins of (share of samples in the bin) x |accuracy - mean confidence| in the bin.
    Bins are right-closed, (i/n, (i+1)/n], with confidence 0 falling into the first bin.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    confidence = confidence.double().flatten()
    correct = correct.double().flatten()
    # ceil(c * n) - 1 is the right-closed bin; clamp puts c == 0 into bin 0.
    bins = (torch.ceil(confidence * n_bins) - 1).clamp(0, n_bins - 1).long()
    conf_sum = torch.bincount(bins, weights=confidence, minlength=n_bins)
    acc_sum = torch.bincount(bins, weights=correct, minlength=n_bins)
    # |sum(acc) - sum(conf)| / N per bin equals (|B|/N) * |acc(B) - conf(B)|.
    return float((acc_sum - conf_sum).abs().sum() / max(len(confidence), 1))


def classification_metrics(logits: torch.Tensor, labels, n_bins: int = 15) -> ClassificationMetrics:
    """Top-1, NLL and ECE of `logits` (N, classes) against integer `labels` (N,).

    Top-1 and NLL are `archdsl.run.evaluate.score_logits`'s (what training reports); ECE is added here.
    """
    require_finite_logits(logits)  # NaN confidences have no calibration bin
    scored = score_logits(logits, labels)
    probabilities = logits.detach().double().cpu().softmax(dim=1)
    confidence, predicted = probabilities.max(dim=1)
    correct = predicted == labels_tensor(labels).cpu()
    return ClassificationMetrics(
        top1=scored.top1,
        nll=scored.nll,
        ece=expected_calibration_error(confidence, correct, n_bins),
        n_bins=n_bins,
        count=len(correct),
    )


class TrainingNLL(BaseModel):
    """NLL (and top-1) on augmented training images: the paper's NLL_train (Fig. 6)."""

    model_config = ConfigDict(frozen=True)

    nll: float
    top1: float
    images: int
    seed: int
    augmentation: str  # what the recipe did to the images


def augmentation_of(recipe: Any) -> str:
    """The training augmentation of a `TrainConfig`, in words (Mixup is not part of it: labels stay hard)."""
    parts = [f"random crop with padding {recipe.crop_padding}"] if recipe.crop_padding else []
    parts += ["horizontal flip"] if recipe.hflip else []
    parts += [f"RandAugment {recipe.randaugment}"] if recipe.randaugment else []
    return ", ".join(parts) or "none"


def augmented_training_nll(
    model: torch.nn.Module,
    train_set: Any,
    recipe: Any,
    *,
    images: int = 10000,
    batch_size: int = 256,
    seed: int = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> TrainingNLL:
    """Mean NLL and top-1 of `model` (eval mode) on the first `images` shuffled training images,
    augmented as the `recipe` (a `TrainConfig`) trains: crop, flip, RandAugment; no Mixup/CutMix,
    which mix labels (the NLL is against the true class). Same `seed`, same images."""
    from archdsl.progress import progress_bar
    from archdsl.run.device import model_device
    from archdsl.run.loader import globally_seeded, make_loader

    device = model_device(model) if device is None else torch.device(device)
    model.to(device)
    count = min(images, len(train_set))
    outputs, labels = [], []
    was_training = model.training
    model.eval()
    try:
        with globally_seeded(seed), torch.no_grad():
            loader = make_loader(
                train_set, batch_size, augment=True, recipe=recipe, seed=seed, shuffle=True, drop_last=False
            )
            seen = 0
            for inputs, targets in progress_bar(loader, desc="nll-train", unit="batch", show=progress, leave=False):
                take = min(len(targets), count - seen)
                outputs.append(model(inputs[:take].to(device)).float().cpu())
                labels.append(targets[:take])
                seen += take
                if seen >= count:
                    break
    finally:
        model.train(was_training)
    scored = score_logits(require_finite_logits(torch.cat(outputs), "the augmented training images"), torch.cat(labels))
    return TrainingNLL(nll=scored.nll, top1=scored.top1, images=count, seed=seed, augmentation=augmentation_of(recipe))
