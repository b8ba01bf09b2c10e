"""The in-memory image set every loader returns and every consumer takes.

All datasets archdsl knows are small (32x32 RGB): they are held as one uint8 array in
the released CIFAR layout (N, H, W, C), which is also what CIFAR-100-C's `.npy` files
hold (memory-mapped there). Training, evaluation and analysis turn it into tensors.
The arrays may be read-only (memory-mapped files, cached generated sets): copy before
writing into them (`torch.from_numpy` of a read-only slice warns; index or copy first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from archdsl.data.image_files import DiskImages

STATS_CHUNK = 1024  # images counted at once by `channel_stats`: bincount widens to int64, 8 MB a channel


@dataclass(frozen=True)
class ImageSet:
    """Images and labels of one split, with what training and evaluation need to read them.

    `images` are uint8 (N, H, W, C) (possibly read-only: memory-mapped or cached), `labels`
    int64 (N,); `mean`/`std` normalise images scaled to [0, 1] (from the train split);
    `class_names` may be empty. `subset` and `take` return new sets. Images read from disk
    (`folder:`, `imagenet`) are a `DiskImages`, indexed like the array and decoded when indexed.
    """

    name: str
    images: np.ndarray | DiskImages  # uint8, (N, H, W, C); DiskImages: files decoded when indexed
    labels: np.ndarray  # int64, (N,)
    num_classes: int
    mean: tuple[float, ...]  # per-channel normalisation (one value per channel), images scaled to [0, 1]
    std: tuple[float, ...]
    class_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.images.ndim != 4 or self.images.dtype != np.uint8:
            raise ValueError(f"images must be uint8 (N, H, W, C), got {self.images.dtype} {self.images.shape}")
        if len(self.images) != len(self.labels):
            raise ValueError(f"{len(self.images)} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)

    def fingerprint(self) -> str:
        """A digest of the images and labels (16 hex digits): equal sets have equal fingerprints,
        whatever their name (about 0.2 s for CIFAR's 50,000 training images). Images on disk are
        known by their files (paths, sizes, modification times) and labels: none is decoded."""
        import hashlib

        if isinstance(self.images, DiskImages):
            labels = np.ascontiguousarray(self.labels, dtype=np.int64).data
            return hashlib.blake2b(self.images.digest().encode() + bytes(labels), digest_size=8).hexdigest()
        digest = hashlib.blake2b(digest_size=8)
        digest.update(repr((self.images.shape, self.num_classes)).encode())
        digest.update(np.ascontiguousarray(self.images).data)
        digest.update(np.ascontiguousarray(self.labels, dtype=np.int64).data)
        return digest.hexdigest()

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W), as a spec's `input` line writes it."""
        _, h, w, c = self.images.shape
        return (c, h, w)

    def take(self, indices: np.ndarray, name: str | None = None) -> ImageSet:
        images = self.images.select(indices) if isinstance(self.images, DiskImages) else self.images[indices]
        return replace(self, name=name or self.name, images=images, labels=self.labels[indices])

    def subset(self, fraction: float, seed: int = 0) -> ImageSet:
        """A class-stratified random fraction (0 < fraction <= 1) of the set, deterministic by seed."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if fraction == 1:
            return self
        rng = np.random.default_rng(seed)
        keep = []
        for label in np.unique(self.labels):
            members = np.flatnonzero(self.labels == label)
            keep.append(rng.choice(members, size=_kept(len(members), fraction), replace=False))
        return self.take(np.sort(np.concatenate(keep)), name=f"{self.name}[{fraction:g}]")

    def subset_size(self, fraction: float) -> int:
        """len(self.subset(fraction)), without copying any image."""
        if fraction == 1:
            return len(self)
        _, counts = np.unique(self.labels, return_counts=True)
        return sum(_kept(int(n), fraction) for n in counts)


def stratified_indices(labels: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """`count` indices into `labels` (all of them if there are fewer), in file order, with each class
    as close to its share as whole images allow (largest remainders get the odd ones), drawn at
    random within a class, deterministic by seed: what `train=N`/`test=N` dataset options keep."""
    if count >= len(labels):
        return np.arange(len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * count / len(labels)
    kept = np.floor(quota).astype(np.int64)
    for index in np.argsort(-(quota - kept), kind="stable")[: count - int(kept.sum())]:
        kept[index] += 1
    rng = np.random.default_rng(seed)
    chosen = [
        rng.choice(np.flatnonzero(labels == label), size=int(n), replace=False)
        for label, n in zip(classes, kept, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def _kept(members: int, fraction: float) -> int:
    """How many of a class's `members` a stratified subset keeps: at least one."""
    return max(1, round(members * fraction))


@dataclass(frozen=True)
class CorruptedSet:
    """One corrupted test set: a corruption at one severity (1..5)."""

    corruption: str
    severity: int
    images: ImageSet


def channel_stats(images: np.ndarray | DiskImages) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (population) standard deviation of uint8 (N, H, W, C) `images` scaled to
    [0, 1]. From each channel's histogram of the 256 values, counted a few thousand images at a time
    and summed exactly in integers: no float copy of the set (100,000 images as float64 would be 2.5 GB)."""
    channels = images.shape[-1]
    counts = np.zeros((channels, 256), dtype=np.int64)
    for start in range(0, len(images), STATS_CHUNK):
        chunk = images[start : start + STATS_CHUNK]
        for c in range(channels):
            counts[c] += np.bincount(chunk[..., c].ravel(), minlength=256)
    values = range(256)
    means, stds = [], []
    for row in counts.tolist():  # Python ints: the sums below are exact
        n = sum(row)
        total = sum(v * k for v, k in zip(values, row, strict=True))
        squares = sum(v * v * k for v, k in zip(values, row, strict=True))
        means.append(total / (n * 255))
        stds.append(math.sqrt((squares * n - total * total) / (n * n * 255 * 255)))
    return tuple(means), tuple(stds)
