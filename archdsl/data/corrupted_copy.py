"""A dataset's test split corrupted into the released CIFAR-C layout: what `archdsl data corrupt` writes.

`write_corrupted` (archdsl.data.cifar_c) writes images it is given; `corrupt_dataset` is the
whole job by the dataset's name: it checks the corruptions' names and refuses to replace files
the folder already holds (it may be a downloaded CIFAR-C release) before the dataset is loaded,
then loads and writes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archdsl.data.cifar_c import LABELS_FILE, write_corrupted
from archdsl.data.corruptions import CORRUPTIONS, all_corruptions, check_corruption
from archdsl.data.registry import load_split
from archdsl.errors import UserError


@dataclass(frozen=True)
class CorruptedCopy:
    """What `corrupt_dataset` wrote."""

    files: list[Path]  # <corruption>.npy ..., labels.npy
    corruptions: tuple[str, ...]
    images: int  # test images, each written once per corruption and severity


def corruption_names(requested: Sequence[str] | None) -> tuple[str, ...]:
    """The corruptions `requested` names: None, the 15 of the benchmark; ["all"], those and the 4 extras.
    A UserError for a name the generator does not know, checked before any work."""
    if requested is None:
        return CORRUPTIONS
    if tuple(requested) == ("all",):
        return all_corruptions()
    if "all" in requested:
        raise UserError("'all' stands alone: it names every corruption", hint="give --corruptions all, or names only")
    return tuple(check_corruption(name) for name in requested)


def corrupt_dataset(
    dataset: str,
    out: str | os.PathLike[str],
    corruptions: Sequence[str] | None = None,
    *,
    root: str | None = None,
    download: bool = False,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = True,
) -> CorruptedCopy:
    """Corrupt the test split of `dataset` at every severity into `out` (`corruption_names`
    picks the corruptions); files `out` already holds are replaced only with `overwrite`."""
    names = corruption_names(corruptions)
    out = Path(out)
    # `out` may be a downloaded CIFAR-C folder: never replace released files unasked.
    existing = [name for name in (*(f"{c}.npy" for c in names), LABELS_FILE) if (out / name).exists()]
    if existing and not overwrite:
        shown = ", ".join(existing[:3]) + (", ..." if len(existing) > 3 else "")
        raise UserError(
            f"--out {out} already holds {shown}", hint="add --force to replace them, or choose another --out"
        )
    clean = load_split(dataset, "test", root=root, download=download)
    written = write_corrupted(out, clean, names, seed=seed, progress=progress)
    return CorruptedCopy(files=written, corruptions=names, images=len(clean))
