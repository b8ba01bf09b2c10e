"""Released corrupted test sets in the folder layout, as ImageNet-C is published: `--corrupted folder:PATH`.

PATH holds `<corruption>/<severity>/<class>/<image>`: one folder per corruption (the names of the
generator, `archdsl.data.corruptions`: gaussian_noise, ..., and the extras), severities 1 to 5,
and in each the clean dataset's class folders. Such a folder is told from a clean one
(`PATH/train/`, `PATH/val/`) by its layout (`is_corrupted_folder`).

A corrupted set is measured against the clean dataset the model was trained on, so it is read as
that dataset's test split is: its images stay on disk and are fitted to the clean images' size and
colour (the released 224x224 crops are not cropped again), normalised by the clean dataset's
mean and std, and labelled by the clean dataset's classes: each class folder is matched by name to
a class of the clean dataset, so a folder listing its classes in another order is labelled right,
and a class folder the clean dataset does not have is refused rather than scored against the
wrong label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archdsl.data import folder
from archdsl.data.base import CorruptedSet, ImageSet
from archdsl.data.corruptions import CORRUPTIONS, SEVERITIES, check_corruption, check_severity
from archdsl.data.image_files import DiskImages, image_channels
from archdsl.errors import UserError, visible

LAYOUT = "<corruption>/<severity>/<class>/<image>"


def is_corrupted_folder(name: str) -> bool:
    """Whether `name` is `folder:PATH` with PATH in the released corrupted layout (no `train/`; a
    `<corruption>/<severity>/` folder)."""
    if not folder.is_folder_name(name):
        return False
    path = folder.parse_folder_name(name).path
    if not path.is_dir() or (path / "train").is_dir():
        return False
    return any(entry.is_dir() and (entry / str(s)).is_dir() for entry in path.iterdir() for s in SEVERITIES)


@dataclass(frozen=True)
class ReleasedFolder:
    """What a released folder holds, for `archdsl data info` (only its first set's files are listed)."""

    path: Path
    levels: dict[str, tuple[int, ...]]  # each corruption folder -> its severity folders
    first: Path  # the first set's folder, <corruption>/<severity>
    class_names: tuple[str, ...]  # its class folders
    images: int  # in the first set
    channels: int  # of the first set's first image


def scan_released(name: str) -> ReleasedFolder:
    """The corruptions, severities and classes of the released folder `name` (`is_corrupted_folder`)."""
    path = folder.parse_folder_name(name).path
    levels = {
        entry.name: tuple(s for s in SEVERITIES if (entry / str(s)).is_dir())
        for entry in sorted(path.iterdir())
        if entry.is_dir()
    }
    levels = {corruption: found for corruption, found in levels.items() if found}
    first = path / next(iter(levels)) / str(next(iter(levels.values()))[0])
    classes = folder.class_folders(first)
    files = folder.split_files(first, classes).files
    return ReleasedFolder(path, levels, first, classes, len(files), image_channels(files[0]))


def read_corrupted_folder(
    name: str,
    clean: ImageSet,
    corruptions: Sequence[str] | None = None,
    severities: Sequence[int] | None = None,
) -> list[CorruptedSet]:
    """The sets of the released folder `name` (`folder:PATH`) for each of `corruptions` (default:
    the 15) and `severities` (default: 1..5), in that order, read as `clean` (the dataset's test
    split) is; a UserError naming a missing folder or a class `clean` does not have."""
    path = folder.parse_folder_name(name).path
    chosen = tuple(check_corruption(c) for c in (CORRUPTIONS if corruptions is None else corruptions))
    levels = tuple(check_severity(s) for s in (SEVERITIES if severities is None else severities))
    _, size, _, channels = clean.images.shape
    label = str(path)
    sets = []
    for corruption in chosen:
        for severity in levels:
            level = path / corruption / str(severity)
            if not level.is_dir():
                raise UserError(
                    f"{visible(level)}: no such folder (a released corrupted set holds {LAYOUT})",
                    hint="measure what the folder holds with --corruptions and --severities",
                )
            classes = folder.class_folders(level)
            files = folder.split_files(level, classes)
            labels = _clean_labels(level, classes, clean)[np.asarray(files.labels, dtype=np.int64)]
            image_set = ImageSet(
                name=f"{label}/{corruption}/{severity}",
                images=DiskImages(files.files, size, channels),
                labels=labels,
                num_classes=clean.num_classes,
                mean=clean.mean,
                std=clean.std,
                class_names=clean.class_names,
            )
            sets.append(CorruptedSet(corruption, severity, image_set))
    return sets


def _clean_labels(level: Path, classes: tuple[str, ...], clean: ImageSet) -> np.ndarray:
    """The clean dataset's label of each of the class folders `classes` (sorted) of `level`."""
    if not clean.class_names:  # a dataset without class names: its classes in the folders' sorted order
        if len(classes) != clean.num_classes:
            raise UserError(
                f"{visible(level)}: {len(classes)} class folders, but {clean.name} has {clean.num_classes} classes"
            )
        return np.arange(len(classes), dtype=np.int64)
    index = {name: position for position, name in enumerate(clean.class_names)}
    unknown = [name for name in classes if name not in index]
    if unknown:
        shown = ", ".join(map(visible, unknown[:5])) + (", ..." if len(unknown) > 5 else "")
        raise UserError(
            f"{visible(level)}: class folders that {clean.name} does not have ({shown})",
            hint="a corrupted set is labelled by the clean dataset's classes: its class folders must be named as those",
        )
    return np.asarray([index[name] for name in classes], dtype=np.int64)
