"""What a run reports as it trains: a step's record (`StepRecord`, for `train(on_step=...)`) and an epoch's
figures, each named by the split that scored it: the record (`EpochMetrics`, a row of metrics.csv), the scoring
of the trained model on the test and validation images, the epoch's line, and the figures a checkpoint keeps.
Plain functions of what they are given: the training loop (archdsl.run.train) calls them.

`test_*` figures come from a test set, `val_*` ones from validation images (`--val-split`, or a
search's trial, which has no test set); a run without one of them has None there, never the other's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archdsl.run.evaluate import Evaluation, predict_logits, score_logits

if TYPE_CHECKING:
    from torch import nn

    from archdsl.data.base import ImageSet
    from archdsl.run.divergence import DivergenceGuard
    from archdsl.run.recipe import TrainConfig

__all__ = ["EpochMetrics", "StepRecord", "epoch_line", "kept_figures", "score_epoch", "scored_top1"]

# The figures a scored split adds to an epoch, by split: (loss, top-1, the loss's spike flag).
_FIGURES = {
    "test": ("test_loss", "test_acc", "test_loss_spike"),
    "validation": ("val_loss", "val_acc", "val_loss_spike"),
}


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step, for `train(on_step=...)`: its number, epoch, learning rate and loss."""

    step: int  # 0-based over the whole run
    epoch: int  # 0-based
    lr: float  # the rate the step ran with
    loss: float  # the training objective of the batch, before the step


@dataclass(frozen=True)
class EpochMetrics:
    """One finished epoch: losses and top-1 (fractions) on train, test and validation images, the learning
    rate, speed and time. A run scored on validation images alone (a search's trial) has no test figures."""

    epoch: int  # 1-based: the number of epochs finished
    train_loss: float  # the training objective (with Mixup/label smoothing if the recipe has them)
    train_acc: float  # top-1 against the un-mixed labels
    test_loss: float | None  # plain cross-entropy (NLL) on the test set; None: no test set
    test_acc: float | None
    lr: float  # at the end of the epoch
    img_per_s: float  # training images per second (evaluation excluded)
    seconds: float  # wall time of the whole epoch
    # The test loss rose above the divergence limit (archdsl.run.divergence): recorded and
    # warned about, not a reason to stop (only the training loss judges divergence). None: no test set.
    test_loss_spike: bool | None = None
    # With --val-split (or `train(val_set=)`): the validation images' loss (NLL) and top-1, and the same spike flag.
    val_loss: float | None = None
    val_acc: float | None = None
    val_loss_spike: bool | None = None


def score_epoch(
    model: nn.Module,
    test_set: ImageSet | None,
    val_set: ImageSet | None,
    guard: DivergenceGuard,
    config: TrainConfig,
    *,
    epoch: int,
    amp: bool,
    scored: bool = True,
) -> dict[str, Any]:
    """The trained model's figures on the test set and the validation images the run has (`EpochMetrics`
    fields; all None where `scored` is False), checked by `guard`: a diverged epoch raises before it is
    saved, so it never replaces the last good checkpoint. `epoch` is 0-based."""
    figures: dict[str, Any] = {}
    for split, images in (("test", test_set), ("validation", val_set)):
        loss, top1, spike = _FIGURES[split]
        if images is None or not scored:
            figures.update({loss: None, top1: None, spike: None})
            continue
        evaluated = _evaluate(model, images, config, amp=amp)
        figures[spike] = guard.check_evaluated_loss(f"the {split} loss", evaluated.nll, epoch)
        guard.check_metric(f"the {split} accuracy", evaluated.top1, epoch)
        figures.update({loss: evaluated.nll, top1: evaluated.top1})
    return figures


def _evaluate(model: nn.Module, images: ImageSet, config: TrainConfig, *, amp: bool) -> Evaluation:
    """Loss and top-1 of the model on `images` (the test or the validation set)."""
    logits = predict_logits(
        model, images, batch_size=config.eval_batch_size, amp=amp, workers=config.workers, optimize=config.optimize
    )
    return score_logits(logits, images.labels)


def scored_top1(metrics: EpochMetrics) -> dict[str, float]:
    """The epoch's top-1 on the images it was scored on, by its name: `val_acc` (validation), `test_acc` (test)."""
    found = {"val_acc": metrics.val_acc, "test_acc": metrics.test_acc}
    return {name: value for name, value in found.items() if value is not None}


def epoch_line(metrics: EpochMetrics, epochs: int) -> str:
    """One finished epoch as a plain line, with the names the bar shows them by."""
    return (
        f"epoch {metrics.epoch}/{epochs}  loss={metrics.train_loss:.3f} acc={metrics.train_acc:.3f} "
        + "".join(f"{name}={value:.3f} " for name, value in scored_top1(metrics).items())
        + f" ({metrics.seconds:.1f} s, {metrics.img_per_s:.0f} img/s)"
    )


def kept_figures(metrics: EpochMetrics) -> dict[str, float]:
    """The scored figures a checkpoint keeps in its metadata, named by their split: `test_acc`, `test_loss`
    where a test set scored the epoch, `val_acc`, `val_loss` where validation images did."""
    names = ("test_acc", "test_loss", "val_acc", "val_loss")
    return {name: value for name in names if (value := getattr(metrics, name)) is not None}
