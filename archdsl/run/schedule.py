"""The learning rate of every training step, as a function of the step alone.

The reference implementation (xxxnell/how-do-vits-work, `ops/schedulers.py`, `ops/trains.py`)
warms up linearly per iteration, `lr = base_lr * step / (warmup_epochs * steps_per_epoch)`: its
first step runs at lr 0 and the last warm-up step's update leaves lr at base_lr. Its main
scheduler (CosineAnnealingLR or MultiStepLR) is stepped after each main epoch. `LrSchedule`
computes the same numbers in closed form, and also timm's per-iteration cosine (`sched_on_updates`,
the `fast` recipe), so that:

- resuming needs no scheduler state: the rate of step k is `lr_at(k)`, whatever ran before;
- an extended run (`train --resume --epochs N`) follows the schedule a run planned for N epochs
  from the step it resumes at, as timm's train.py does.

Torch-free: the docs and tests read it without building anything.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archdsl.run.recipe import TrainConfig


@dataclass(frozen=True)
class LrSchedule:
    """Warm-up then cosine or multistep, over `steps_per_epoch`-step epochs."""

    lr: float  # the peak, reached when the warm-up ends
    steps_per_epoch: int
    warmup_epochs: int
    main_epochs: int  # the epochs after the warm-up: the cosine's length
    sched: str  # "cosine" or "multistep"
    on_updates: bool  # the main schedule moves every step (else once per epoch)
    warmup_lr: float = 0.0
    min_lr: float = 0.0
    milestones: tuple[int, ...] = ()  # in epochs after the warm-up
    decay_rate: float = 0.1

    @classmethod
    def of(cls, config: TrainConfig, steps_per_epoch: int) -> LrSchedule:
        from archdsl.run.recipe import filled

        warmup = config.effective_warmup()
        return cls(
            lr=filled(config.lr),
            steps_per_epoch=steps_per_epoch,
            warmup_epochs=warmup,
            main_epochs=config.epochs - warmup,
            sched=filled(config.sched),
            on_updates=filled(config.sched_on_updates),
            warmup_lr=filled(config.warmup_lr),
            min_lr=filled(config.min_lr),
            milestones=tuple(sorted(filled(config.decay_milestones))),
            decay_rate=filled(config.decay_rate),
        )

    @property
    def warmup_steps(self) -> int:
        return self.warmup_epochs * self.steps_per_epoch

    def lr_at(self, step: int) -> float:
        """The learning rate of the optimizer step numbered `step` (0 is the run's first)."""
        if step < self.warmup_steps:
            start = min(self.warmup_lr, self.lr)
            return start + (self.lr - start) * step / self.warmup_steps
        after = step - self.warmup_steps  # steps since the warm-up
        # Where the main schedule is: whole epochs, or (on updates) epochs and a fraction.
        epoch = after / self.steps_per_epoch if self.on_updates else after // self.steps_per_epoch
        if self.sched == "multistep":
            return self.lr * self.decay_rate ** bisect.bisect_right(self.milestones, epoch)
        floor = min(self.min_lr, self.lr)
        if epoch >= self.main_epochs:
            return floor
        # (Whole-step fractions per iteration: timm's CosineLRScheduler's t / t_initial.)
        progress = after / (self.main_epochs * self.steps_per_epoch) if self.on_updates else epoch / self.main_epochs
        return floor + (self.lr - floor) * (1 + math.cos(math.pi * progress)) / 2
