"""The released CIFAR-10-C / CIFAR-100-C layout: reading it (memory-mapped) and writing it.

A folder holds `<corruption>.npy`, uint8 (5n, 32, 32, 3), severity s in rows
n*(s-1) .. n*s (n = 10,000 in the released files), and `labels.npy` with the 5n labels.
Files are opened with `np.load(mmap_mode="r", allow_pickle=False)`: nothing is unpickled
and a set costs no memory until it is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archdsl.data.base import CorruptedSet, ImageSet
from archdsl.data.corruptions import (
    CORRUPTIONS,
    SEVERITIES,
    all_corruptions,
    check_can_generate,
    check_corruption,
    check_severity,
    corrupt,
)
from archdsl.errors import UserError
from archdsl.files import atomic_writer, ensure_dir

LABELS_FILE = "labels.npy"
SEVERITY_COUNT = len(SEVERITIES)
IMAGE_SHAPE = (32, 32, 3)


@dataclass(frozen=True)
class CorruptedFolder:
    """What a CIFAR-C folder is for: its clean dataset's classes and normalisation."""

    title: str
    folder: Path
    num_classes: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    source_url: str
    clean_name: str


def load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise UserError(f"could not read {path}: truncated or not a plain .npy array ({err})") from None


def _missing_hint(spec: CorruptedFolder) -> str:
    return (
        f"download {spec.title} ({spec.source_url}) and unpack it so that {spec.folder}/ holds "
        f"<corruption>.npy and {LABELS_FILE}; or generate it with `archdsl data corrupt --dataset "
        f"{spec.clean_name} --data-root {spec.folder.parent} --out {spec.folder}`"
    )


def read_labels(spec: CorruptedFolder) -> np.ndarray:
    path = spec.folder / LABELS_FILE
    if not path.is_file():
        raise UserError(f"{spec.title} not found: {path} is missing", hint=_missing_hint(spec))
    labels = load_npy(path)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer) or len(labels) % SEVERITY_COUNT:
        raise UserError(
            f"{path}: expected integer labels of shape (5n,) (50000 in the released files), "
            f"found {labels.dtype} {labels.shape}"
        )
    if len(labels) == 0:  # scoring an empty set gives NaN, not an error
        raise UserError(f"{path} holds no labels: the corrupted test sets would be empty")
    if labels.min() < 0 or labels.max() >= spec.num_classes:
        raise UserError(f"{path}: labels must lie in 0..{spec.num_classes - 1}")
    return labels


def read_corruption(spec: CorruptedFolder, corruption: str, rows: int) -> np.ndarray:
    path = spec.folder / f"{corruption}.npy"
    if not path.is_file():
        present = sorted(p.stem for p in spec.folder.glob("*.npy") if p.name != LABELS_FILE)
        raise UserError(
            f"{spec.title}: {path} is missing",
            hint=f"the folder holds {', '.join(present) or 'no corruption files'}",
        )
    images = load_npy(path)
    if images.dtype != np.uint8 or images.shape != (rows, *IMAGE_SHAPE):
        raise UserError(
            f"{path}: expected uint8 images of shape ({rows}, 32, 32, 3) to match {LABELS_FILE}, "
            f"found {images.dtype} {images.shape}"
        )
    return images


def read_corrupted(
    spec: CorruptedFolder, corruptions: Iterable[str], severities: Iterable[int], name: str
) -> list[CorruptedSet]:
    labels = read_labels(spec)
    per_severity = len(labels) // SEVERITY_COUNT
    sets = []
    for corruption in corruptions:
        images = read_corruption(spec, corruption, len(labels))
        for severity in severities:
            rows = slice(per_severity * (severity - 1), per_severity * severity)
            image_set = ImageSet(
                name=f"{name}/{corruption}/{severity}",
                images=images[rows],  # still memory-mapped
                labels=np.asarray(labels[rows], dtype=np.int64),
                num_classes=spec.num_classes,
                mean=spec.mean,
                std=spec.std,
            )
            sets.append(CorruptedSet(corruption, severity, image_set))
    return sets


def _save_atomically(path: Path, array: np.ndarray) -> None:
    """Write the .npy beside its final name, then rename: a killed run leaves no half file."""
    with atomic_writer(path, binary=True) as stream:
        np.save(stream, array, allow_pickle=False)


def corruption_seed(seed: int, corruption: str, severity: int, chunk: int = 0) -> list[int]:
    """An independent random stream for each (corruption, severity, chunk) of a run."""
    return [seed, all_corruptions().index(corruption), severity, chunk]


def write_corrupted(
    out_dir: str | os.PathLike,
    clean: ImageSet,
    corruptions: Iterable[str] | None = None,
    severities: Iterable[int] | None = None,
    seed: int = 0,
    progress: bool = True,
    chunk_size: int = 2000,
) -> list[Path]:
    """Corrupt `clean` and write the released layout into `out_dir`; returns the files written.

    All five severities are always written (the layout has no room for fewer); `severities`
    is accepted for symmetry with `load_corrupted` and must be 1..5 in any order.
    Images are corrupted in chunks of `chunk_size` to bound memory; each chunk has its own
    seeded stream, so a seed fixes the output.
    """
    from archdsl.progress import progress_bar

    names = [check_corruption(c) for c in (CORRUPTIONS if corruptions is None else corruptions)]
    wanted = sorted(check_severity(s) for s in (SEVERITIES if severities is None else severities))
    if tuple(wanted) != SEVERITIES:
        raise UserError(
            "the CIFAR-C layout stores all five severities in one file",
            hint="write all of them and pick severities when loading (load_corrupted(..., severities=...))",
        )
    check_can_generate(names)
    if clean.images.shape[1:] != IMAGE_SHAPE:
        raise UserError(f"{clean.name}: the CIFAR-C layout holds 32x32 RGB images, got {clean.images.shape[1:]}")
    out = ensure_dir(out_dir)
    count = len(clean)
    written = []
    steps = len(names) * SEVERITY_COUNT * max(1, -(-count // chunk_size))
    with progress_bar(total=steps, desc="corrupting", unit="chunk", show=progress) as bar:
        for corruption in names:
            result = np.empty((SEVERITY_COUNT * count, *IMAGE_SHAPE), dtype=np.uint8)
            for severity in SEVERITIES:
                bar.set_postfix_str(f"{corruption} {severity}")
                for chunk, start in enumerate(range(0, count, chunk_size)):
                    stop = min(start + chunk_size, count)
                    seed_words = corruption_seed(seed, corruption, severity, chunk)
                    stream_seed = int(np.random.SeedSequence(seed_words).generate_state(1)[0])
                    result[(severity - 1) * count + start : (severity - 1) * count + stop] = corrupt(
                        np.asarray(clean.images[start:stop]), corruption, severity, stream_seed
                    )
                    bar.update(1)
            path = out / f"{corruption}.npy"
            _save_atomically(path, result)
            written.append(path)
    labels_path = out / LABELS_FILE
    _save_atomically(labels_path, np.tile(np.asarray(clean.labels, dtype=np.int64), SEVERITY_COUNT))
    written.append(labels_path)
    return written
