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

A recipe cut to a shorter run keeps its shape: the recipe's own multistep milestones (`weak`'s
60/120/160 of 200 main epochs) become the same fractions of the shorter run's main epochs (0.3,
0.6, 0.8), each at most the last main epoch, so the run ends at the recipe's final rate instead
of at the peak (a 6-epoch `weak` run ended mid-oscillation at lr 0.1 before). Milestones the
user gave are kept as given (`train` warns about one beyond the run). At the recipe's own
length, or longer, nothing is scaled: the reference's schedule exactly.

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
    ends_at_minimum: bool = False  # a cut recipe: the cosine reaches min_lr at the run's last step

    @classmethod
    def of(cls, config: TrainConfig, steps_per_epoch: int) -> LrSchedule:
        warmup = config.effective_warmup()
        cut = is_cut(config)
        return cls(
            lr=config.lr,
            steps_per_epoch=steps_per_epoch,
            warmup_epochs=warmup,
            main_epochs=config.epochs - warmup,
            sched=config.sched,
            # A cut run of one main epoch anneals per step through it: per epoch, it could not both
            # start at the peak and end at the minimum.
            on_updates=config.sched_on_updates or (cut and config.epochs - warmup == 1),
            warmup_lr=config.warmup_lr,
            min_lr=config.min_lr,
            milestones=run_milestones(config),
            decay_rate=config.decay_rate,
            ends_at_minimum=cut,
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
        # The horizon: timm's CosineLRScheduler's t_initial (per iteration) or torch's T_max (per epoch),
        # one step or epoch short for a cut run, so that its last step or epoch is at the minimum.
        shorter = 1 if self.ends_at_minimum else 0
        if self.on_updates:
            progress = after / max(self.main_epochs * self.steps_per_epoch - shorter, 1)
        else:
            progress = epoch / max(self.main_epochs - shorter, 1)
        progress = min(progress, 1.0)
        return floor + (self.lr - floor) * (1 + math.cos(math.pi * progress)) / 2


def is_cut(config: TrainConfig) -> bool:
    """Whether `config`'s run is shorter than its recipe's own (whose schedule it then compresses)."""
    from archdsl.run.recipe import RECIPE_DEFAULTS

    recipe = RECIPE_DEFAULTS.get(config.recipe)
    return recipe is not None and config.epochs - config.effective_warmup() < recipe["epochs"] - recipe["warmup_epochs"]


def run_milestones(config: TrainConfig) -> tuple[int, ...]:
    """The multistep milestones `config`'s run uses (in main epochs): the recipe's own scaled to a
    shorter run (same fractions of the main schedule, at most its last epoch), any others as given."""
    from archdsl.run.recipe import RECIPE_DEFAULTS

    milestones = tuple(sorted(config.decay_milestones))
    recipe = RECIPE_DEFAULTS.get(config.recipe)
    if recipe is None or milestones != tuple(sorted(recipe["decay_milestones"])):
        return milestones  # the user's own: as given
    if not is_cut(config):
        return milestones  # the recipe's own length (or an extension of it): the reference's schedule
    recipe_main = recipe["epochs"] - recipe["warmup_epochs"]
    main = config.epochs - config.effective_warmup()
    return tuple(min(round(m * main / recipe_main), main - 1) for m in milestones)


def milestones_beyond(config: TrainConfig) -> tuple[int, ...]:
    """The milestones `config`'s run never reaches (a user's, given for a longer run)."""
    main = config.epochs - config.effective_warmup()
    return tuple(m for m in run_milestones(config) if m >= main) if config.sched == "multistep" else ()
