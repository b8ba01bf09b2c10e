"""When a training run has diverged: one rule, checked during and after every epoch.

A run has diverged when
- any loss or metric it reports is NaN or infinite, or
- the *training* loss rises above `EXPLOSION_FACTOR` times the run's starting loss.

An evaluated loss (test or validation) above that limit is a *spike*: recorded
(`EpochMetrics.test_loss_spike`, metrics.csv) and shown as a warning, but the run goes on.
After one epoch at a high learning rate, BatchNorm's running statistics can give a test
loss of 450 while the training loss is sound and the run goes on to train normally
(Fashion-MNIST, `fast`, issue 28): stopping there failed a healthy design. The weights are
what the training loss judges; a diverged model also shows in its training loss.

Only non-finite values were caught before, and whether a huge learning rate overflows to
NaN or stays finite (a training loss of 1.5e21) depends on the CPU's vector kernels and the
thread count; the explosion rule catches both. The starting loss is the first training
step's, floored at ln(classes) (the loss of a uniform guess), so that a run started from
good weights with a tiny loss is not stopped by ordinary noise. A resumed run keeps the
starting loss of its first epoch (it is saved with the training state).

A cross-entropy of 100 x ln(10) = 230 means the right class gets probability e^-230: no
training that is learning reaches it, so the factor leaves wide room for noisy starts.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from archdsl.errors import ArchdslWarning, UserError

EXPLOSION_FACTOR = 100.0


class TrainingDiverged(UserError):
    """A loss or metric became NaN/infinite or exploded (too high a learning rate, a broken design)."""

    def __init__(self, what: str, value: float, epoch: int, step: int | None = None, why: str = "") -> None:
        where = f"epoch {epoch + 1}" + (f" (step {step})" if step is not None else "")
        super().__init__(
            f"training diverged: {what} is {value:.4g} in {where}{why}",
            hint="lower --lr, or use more warm-up epochs",
        )
        self.what, self.value, self.epoch, self.step = what, value, epoch, step


@dataclass
class DivergenceGuard:
    """Raises `TrainingDiverged` for a value that says the run diverged."""

    classes: int
    start_loss: float | None = None  # the first training step's loss (None until it is seen)

    @property
    def limit(self) -> float:
        """The highest loss that is not an explosion."""
        start = max(self.start_loss or 0.0, math.log(max(self.classes, 2)))
        return EXPLOSION_FACTOR * start

    def start(self, loss: float, epoch: int) -> None:
        """Record the run's first training loss (a non-finite one has diverged already)."""
        if not math.isfinite(loss):
            raise TrainingDiverged("the training loss", loss, epoch, 1)
        self.start_loss = loss

    def check_loss(self, what: str, value: float, epoch: int, step: int | None = None) -> None:
        if not math.isfinite(value):
            raise TrainingDiverged(what, value, epoch, step)
        if value > self.limit:
            raise TrainingDiverged(
                what,
                value,
                epoch,
                step,
                f", over {EXPLOSION_FACTOR:g}x the starting loss {self.limit / EXPLOSION_FACTOR:.3g}",
            )

    def check_evaluated_loss(self, what: str, value: float, epoch: int) -> bool:
        """Whether an evaluated (test/validation) loss spiked above the limit, warning if so; a
        non-finite one still raises `TrainingDiverged`."""
        if not math.isfinite(value):
            raise TrainingDiverged(what, value, epoch)
        if value <= self.limit:
            return False
        warnings.warn(
            f"{what} is {value:.4g} in epoch {epoch + 1}, over {EXPLOSION_FACTOR:g}x the starting loss "
            f"{self.limit / EXPLOSION_FACTOR:.3g}: recorded, training not stopped (the training loss is sound)",
            ArchdslWarning,
            stacklevel=2,
        )
        return True

    def check_metric(self, what: str, value: float, epoch: int) -> None:
        if not math.isfinite(value):
            raise TrainingDiverged(what, value, epoch)
