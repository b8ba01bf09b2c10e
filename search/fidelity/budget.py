"""The ladder of budgets the build-up walk climbs where no budget was measured for the data (docs/search.md, "The
budget the search finds"): the first rung is the study's fidelity; each step doubles the epochs, and the training
subset while it holds fewer than `SMALL_PER_CLASS` images a class. Every rung trains from scratch with its schedule
annealed to its own end, so a verdict at a rung is what training that long gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from archdsl.data.cards import MIN_PER_CLASS, SMALL_PER_CLASS


class FirstRung(Protocol):
    """What the ladder reads of a study's fidelity (`measures.Fidelity`; that module reaches this one through the
    study's record, so the type is named by what it offers)."""

    @property
    def epochs(self) -> int: ...
    @property
    def subset(self) -> float: ...
    @property
    def budget_steps(self) -> int: ...


@dataclass(frozen=True)
class Budget:
    """One rung: epochs per candidate and the class-stratified fraction of the training images."""

    epochs: int
    subset: float

    def cost(self) -> float:
        """Training work in epochs over the whole training set (what the time of a rung grows with)."""
        return self.epochs * self.subset

    def text(self, train_images: int | None = None) -> str:
        """`8 epochs on 10 %` (with the images, where known: `8 epochs on 5,400 images (10 %)`)."""
        share = f"{100 * self.subset:.3g} %"
        if train_images is None:
            return f"{self.epochs_text()} on {share}"
        return f"{self.epochs_text()} on {self.images(train_images):,} images ({share})"

    def epochs_text(self) -> str:
        """`1 epoch`, `8 epochs`."""
        return f"{self.epochs} epoch{'' if self.epochs == 1 else 's'}"

    def images(self, train_images: int) -> int:
        """The training images this budget trains on, of `train_images` (its class-stratified subset)."""
        return round(train_images * self.subset)


def ladder(fidelity: FirstRung, train_images: int, classes: int) -> tuple[Budget, ...]:
    """The rungs of `fidelity` (its epochs and subset first, then `fidelity.budget_steps` steps up) for a training
    split of `train_images` images (less the validation ones) in `classes` classes."""
    rungs = [Budget(fidelity.epochs, fidelity.subset)]
    for _ in range(fidelity.budget_steps):
        last = rungs[-1]
        small = train_images * last.subset / max(1, classes) < SMALL_PER_CLASS
        rungs.append(Budget(last.epochs * 2, min(1.0, last.subset * 2) if small else last.subset))
    return tuple(rungs)


def floored_subset(subset: float, train_images: int, classes: int) -> float:
    """`subset`, raised where it would leave fewer than `MIN_PER_CLASS` images a class (to the whole split where it
    holds fewer): a small dataset is never cut below what trains."""
    if train_images <= 0:
        return subset
    return max(subset, min(1.0, MIN_PER_CLASS * classes / train_images))
