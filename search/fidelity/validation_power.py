"""The smallest difference between two designs that a study's validation images can call, and the validation a small
dataset is given so that it can call the difference the search is for (docs/search.md, "What the validation can
call").

The formula: two designs scored on the same `n` validation images at accuracy `p` differ by chance (which images
happened to be held out) with a standard error of at most sqrt(2 p (1 - p) / n), the two binomial errors added as if
independent (scoring the same images correlates them, which only narrows it). A difference is called at the 95 %
level when it is `Z` = 1.96 of those errors:

    smallest difference = 1.96 * sqrt(2 p (1 - p) / n)

with `p` taken as (p n + 2) / (n + 4) (Agresti and Coull, 1998), so that a design at 100 % still has an error.
Every paired seed is scored on the same images (`data.validation`), so more seeds do not narrow it: they average the
training's noise, not the images'. One image moves a seed's accuracy by 1 / n, a mean over `s` seeds by 1 / (n s).
Before the search, `p` is unknown: `--dry-run` says it at 50 %, where the error is widest, and at 90 %, and warns
where even at 90 % it is above the target; the report says it at the answer's mean, and warns likewise there.

The target: a difference of `TARGET_DIFFERENCE` (5 points) at 50 % needs `images_for()` = 769 images. Where the
validation is left to the search (no --val-split or --val-subset given, by the user or the dataset's card, and no
budget measured for the data: odd-one-out and synthetic keep the validation theirs was measured with):
- on small data (fewer than `SMALL_PER_CLASS` training images a class, where the ladder raises the data too) every
  held-out image scores, not the first budget's share of them (scoring is a forward pass: a few hundred images an
  epoch cost little beside training), and the held-out count is raised to 769 where at most `MOST_HELD_OUT` of the
  training split holds them;
- where even that cannot reach the target (a 400-image folder: 40 images, 22 points), the split is left as it is
  (holding out more images costs training images and still calls no 5-point difference) and `--dry-run` and the
  report say so in one line.
On larger data the validation is as before (Fashion-MNIST: 500 of its 5,000 held-out images, 6.2 points at 50 %,
about 4 at the 88 % its designs reach); `--val-subset` raises it.
"""

from __future__ import annotations

import math

from archdsl.data.cards import SMALL_PER_CLASS

Z = 1.96  # a two-sided test at the 95 % level
TARGET_DIFFERENCE = 0.05  # the difference the validation should be able to call (5 points of top-1) ...
WIDEST_ACCURACY = 0.5  # ... at the accuracy where a binomial error is widest (before any design is measured)
LEARNED_ACCURACY = 0.9  # where `--dry-run` also says it: designs that learned (the report: the answer's own)
MOST_HELD_OUT = 0.2  # the largest share of a small training split held out to reach the target (4/5 still train)


def smallest_difference(images: int, accuracy: float = WIDEST_ACCURACY) -> float:
    """The smallest difference of top-1 between two designs that `images` validation images call at `accuracy`,
    taken as Agresti and Coull's (p n + 2) / (n + 4): a design at 100 % (the 400-image folder's answer, on 40
    images) has a binomial error of 0, which would say the validation calls any difference."""
    n = max(1, images)
    p = (accuracy * n + 2) / (n + 4)
    return Z * math.sqrt(2 * p * (1 - p) / n)


def images_for(difference: float = TARGET_DIFFERENCE, accuracy: float = WIDEST_ACCURACY) -> int:
    """The fewest validation images that call `difference` at `accuracy` (769 for 5 points at 50 %)."""
    low, high = 1, 1
    while smallest_difference(high, accuracy) > difference:  # it falls as the images grow
        low, high = high, 2 * high
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if smallest_difference(middle, accuracy) > difference else (low, middle)
    return high


def is_small(train_images: int, classes: int) -> bool:
    """Data the search sizes its validation for: fewer than `SMALL_PER_CLASS` training images a class."""
    return 0 < train_images < SMALL_PER_CLASS * max(1, classes)


def held_out_for_target(train_images: int, default: int) -> int | None:
    """The held-out count that reaches the target on a small training split of `train_images` whose default holds
    out `default`: `images_for()` where at most `MOST_HELD_OUT` of the split holds it and the default holds fewer;
    None where the default stays (it reaches the target already, or nothing within the share does)."""
    wanted = images_for()
    if default >= wanted or wanted > MOST_HELD_OUT * train_images:
        return None
    return wanted


def difference_text(images: int, seeds: int, accuracy: float | None = None) -> str:
    """`validation: 500 images call a difference of 6.2 points ...`: what `--dry-run` says (at 50 %, the widest, and
    at `LEARNED_ACCURACY`) and the report (at the answer's accuracy), with one image's share; and where even there the
    difference is above `TARGET_DIFFERENCE`, that designs closer are tied by the validation's size."""
    at = LEARNED_ACCURACY if accuracy is None else min(max(accuracy, 0.0), 1.0)
    points = 100 * smallest_difference(images, at)
    if accuracy is None:
        where = (
            f"{100 * smallest_difference(images):.2g} points of top-1 or more at 50 % accuracy, {points:.2g} at 90 %"
        )
    else:
        where = f"{points:.2g} points of top-1 or more at the answer's {100 * at:.0f} %"
    text = (
        f"validation: {images:,} images call a difference of {where} (1.96 x sqrt(2p(1-p)/n); one image is "
        f"{100 / max(1, images):.2g} points a seed, {100 / max(1, images * seeds):.2g} of the mean over {seeds} "
        f"seed{'s' if seeds != 1 else ''})"
    )
    if points > 100 * TARGET_DIFFERENCE + 1e-9:
        text += (
            f"; {100 * TARGET_DIFFERENCE:.0f} points would need {images_for(accuracy=at):,} images at "
            f"{100 * at:.0f} %: designs closer than {points:.2g} points are tied by the validation's size, not shown "
            "equal"
        )
    return text
