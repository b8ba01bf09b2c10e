"""The validation split: a fixed, class-stratified part of a training split, held out from training.

Designs are chosen on validation images and the test set is read once, at the end (the field
keeps three splits apart: NAS-Bench-201 reports train / valid / test, timm's `train.py` has
`--val-split`). `split_validation(train_set, size)` returns (rest, validation): train on `rest`
(and draw every `--subset` fraction from it), score on `validation`.

The validation images depend only on the training split and `size`, never on a trial's seed:
every design and every seed is scored on the same images (`VALIDATION_SEED`).
"""

from __future__ import annotations

import numpy as np

from archdsl.data.base import ImageSet, stratified_indices
from archdsl.errors import UserError

VALIDATION_SEED = 20_260_101  # fixed: the same validation images whatever the trial's seed
DEFAULT_VALIDATION_SHARE = 0.1  # the search's default: a tenth of the training split ...
DEFAULT_VALIDATION_CAP = 5_000  # ... at most 5,000 images (CIFAR-10/100: 5,000 of 50,000; MNIST: 5,000 of 60,000)

ValSize = float | int  # a fraction 0 < f < 1, or a count of images >= 1


def parse_val_split(text: str) -> ValSize:
    """`--val-split`'s value: a fraction (0 < f < 1, written with a point: `0.1`) or a count (`5000`)."""
    try:
        value: ValSize = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise UserError(
                f"--val-split {text!r} is not a number", hint="a fraction such as 0.1, or a count such as 5000"
            ) from None
    check_val_size(value)
    return value


def check_val_size(size: ValSize) -> None:
    """Raise a `UserError` unless `size` is a fraction in (0, 1) or a whole count >= 1."""
    if isinstance(size, bool) or not isinstance(size, int | float):
        raise UserError(f"--val-split must be a fraction or a count, got {size!r}")
    if isinstance(size, int):
        if size < 1:
            raise UserError(f"--val-split {size}: a count of validation images must be at least 1")
    elif not 0 < size < 1:
        raise UserError(f"--val-split {size:g}: a fraction must lie strictly between 0 and 1")


def default_val_size(train_set: ImageSet) -> int:
    """The search's default validation size for `train_set`: a tenth of it, at most 5,000 images,
    and at least one image a class (a `train=N` subset of a few hundred images still has every
    class in both parts when each class has at least two images)."""
    return held_out_count(len(train_set), train_set.num_classes, None)


def validation_count(train_set: ImageSet, size: ValSize) -> int:
    """How many images `size` (a fraction or a count) holds out of `train_set`."""
    return held_out_count(len(train_set), train_set.num_classes, size)


def held_out_count(images: int, classes: int, size: ValSize | None) -> int:
    """How many of `images` training images (in `classes` classes) `size` holds out for validation: a count as
    given, a fraction of them, or (None) the default, a tenth, at most 5,000 and at least one a class."""
    if size is None:
        return max(min(round(images * DEFAULT_VALIDATION_SHARE), DEFAULT_VALIDATION_CAP), classes)
    check_val_size(size)
    return size if isinstance(size, int) else max(1, round(images * size))


def split_validation(train_set: ImageSet, size: ValSize | None = None) -> tuple[ImageSet, ImageSet]:
    """(rest, validation): `train_set` split into the images to train on and a held-out validation set.

    Contract:
    - `size` is a fraction (0 < f < 1) of `train_set` or a count of images (>= 1); None is the
      search's default (`default_val_size`: 10 %, at most 5,000).
    - The validation set is class-stratified (each class as close to its share as whole images
      allow) and drawn with the fixed `VALIDATION_SEED`: the same images on every call, whatever
      seed a trial uses. `rest` is every other image; the two are disjoint and together are
      `train_set`, both in file order.
    - Draw training subsets (`ImageSet.subset`) from `rest`, never from `train_set`.
    - Raises a `UserError` (one line) for a size that is not a fraction or count, one that is not
      smaller than the training set, or one that leaves a class empty in either part.
    """
    count = default_val_size(train_set) if size is None else validation_count(train_set, size)
    if count >= len(train_set):
        raise UserError(
            f"--val-split {size if size is not None else count} leaves no training images: "
            f"{train_set.name} has {len(train_set)}",
            hint="use a smaller fraction or count",
        )
    held = stratified_indices(train_set.labels, count, seed=VALIDATION_SEED)
    rest_mask = np.ones(len(train_set), dtype=bool)
    rest_mask[held] = False
    rest = train_set.take(np.flatnonzero(rest_mask), name=f"{train_set.name}[train-val]")
    validation = train_set.take(held, name=f"{train_set.name}[val]")
    _check_every_class(train_set, rest, validation, count)
    return rest, validation


def _check_every_class(train_set: ImageSet, rest: ImageSet, validation: ImageSet, count: int) -> None:
    """Both parts hold every class the training split holds: a design scored on validation images
    of 9 classes, or trained without a class, is not measured on the task."""
    present = np.unique(train_set.labels)
    for part, what in ((validation, "the validation part"), (rest, "the training part")):
        missing = np.setdiff1d(present, np.unique(part.labels))
        if len(missing):
            name = _class_name(train_set, int(missing[0]))
            raise UserError(
                f"--val-split of {count} images of {train_set.name} ({len(train_set)} images, "
                f"{len(present)} classes) leaves class {name} empty in {what}",
                hint="use a larger training set, or a validation size between the number of classes "
                "and the training set less one image a class",
            )


def _class_name(train_set: ImageSet, label: int) -> str:
    if label < len(train_set.class_names):
        return f"{label} ({train_set.class_names[label]})"
    return str(label)
