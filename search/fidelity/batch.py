"""The batch size a search trains with where nobody chose one: the largest power of two, up to the recipe's, that
gives a design enough optimizer steps at the first budget for it to leave chance.

Why: on a folder of 400 images (360 to train on) the first budget was 2 epochs in the recipe's batches of 128, 4
optimizer steps a design, and every design scored at chance there (issue 58). The learning rate follows the batch
(the recipe's rate is per `lr_batch` images, scaled linearly: `run.recipe`), so a smaller batch trains alike, only
in more steps. A `--batch-size` given (on the command line, in a --config file or by the dataset's card) always wins.
"""

from __future__ import annotations

from dataclasses import dataclass

FEW_FIRST_STEPS = (
    24  # fewer optimizer steps a design at the first budget than this: too few to leave chance on some data
)
SMALLEST_BATCH = 8  # never chosen below (a batch's statistics, BatchNorm's included, need a few images)
# What `archdsl search --help` adds to --batch-size's default.
BATCH_FROM_DATA = (
    f"left out, the search takes the largest power of two up to it that gives {FEW_FIRST_STEPS} optimizer steps at "
    "the first budget (small data; --dry-run says which)"
)


def optimizer_steps(images: int, batch: int, epochs: int) -> int:
    """The optimizer steps of `epochs` passes over `images` in batches of `batch` (a training epoch drops its last
    partial batch: run/loader.py)."""
    return images // batch * epochs


def batch_for_steps(images: int, epochs: int, largest: int) -> int:
    """The largest power of two, at most `largest` and at least `SMALLEST_BATCH`, whose batches give at least
    `FEW_FIRST_STEPS` optimizer steps over `images` for `epochs`; `largest` itself where it already does (or is no
    larger than `SMALLEST_BATCH`), `SMALLEST_BATCH` where none does."""
    if largest <= SMALLEST_BATCH or optimizer_steps(images, largest, epochs) >= FEW_FIRST_STEPS:
        return largest
    batch = 1 << (largest.bit_length() - 1)  # the largest power of two <= largest
    while batch > SMALLEST_BATCH and optimizer_steps(images, batch, epochs) < FEW_FIRST_STEPS:
        batch //= 2
    return max(batch, SMALLEST_BATCH)


@dataclass(frozen=True)
class BatchChoice:
    """A batch size chosen from the data: the recipe's `default` gave too few steps over the first budget's
    `images` for its `epochs`; `chosen` gives these many."""

    default: int
    chosen: int
    images: int
    epochs: int

    def text(self) -> str:
        """What `--dry-run` and report.md say of it."""
        steps, few = (optimizer_steps(self.images, b, self.epochs) for b in (self.chosen, self.default))
        return (
            f"batch {self.chosen}, chosen from the data: {self.images:,} training images for {self.epochs} epochs at "
            f"the first budget give {steps} optimizer steps in batches of {self.chosen}, {few} in the recipe's "
            f"{self.default} (at least {FEW_FIRST_STEPS} wanted); the learning rate scales with the batch; "
            "--batch-size chooses another"
        )


def choose_batch(images: int, epochs: int, default: int) -> BatchChoice | None:
    """The `BatchChoice` for a first budget of `images` for `epochs` where the recipe's `default` batch gives fewer
    than `FEW_FIRST_STEPS` steps and a smaller one gives more; None where the default stays."""
    chosen = batch_for_steps(images, epochs, default)
    if chosen >= default or images <= 0:
        return None
    return BatchChoice(default=default, chosen=chosen, images=images, epochs=epochs)
