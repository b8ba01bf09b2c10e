"""Image files on disk: one decoded and fitted to a size, or a whole split kept as paths (`DiskImages`).

`DiskImages` stands where an `ImageSet` holds its uint8 (N, H, W, C) array, for images read from
disk (`folder:`, `imagenet`): it holds the file paths and how to fit them, and decodes an image
only when it is indexed. So a folder of ImageNet's size is never held in memory, and a DataLoader
worker receives a few kilobytes of paths, not the pixels (the dataset pickles small). Indexing
with an int gives one (H, W, C) image, with a slice or an index array a decoded (n, H, W, C)
array, as numpy would; `select` keeps a subset still on disk; `np.asarray` decodes all of it.

Every failure to read a file is one `UserError` naming it: an image that does not decode, one
so large it may be a decompression bomb (Pillow's MAX_IMAGE_PIXELS).
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archdsl.errors import UserError, visible

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")
DECODE_THREADS = 8  # Pillow releases the GIL while it decodes and resizes: threads decode in parallel


@dataclass(frozen=True)
class DiskImages:
    """uint8 (N, size, size, channels) images decoded on demand from `files` (see the module)."""

    files: tuple[Path, ...]
    size: int
    channels: int
    crop_pct: float = 1.0

    ndim = 4
    dtype = np.dtype(np.uint8)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.files), self.size, self.size, self.channels)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):  # images first, then within each image: images[mask][..., 0]
            if not key or key[0] is Ellipsis:
                return self.decode()[key]
            chosen = self[key[0]]
            return chosen[key[1:]] if chosen.ndim == 3 else chosen[(slice(None),) + key[1:]]
        if isinstance(key, (int, np.integer)):
            return read_image(self.files[key], self.size, self.channels, self.crop_pct)
        return self.select(np.arange(len(self.files))[key])._decoded()  # writable, as numpy's fancy index

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        decoded = self.decode()
        return decoded if dtype is None else decoded.astype(dtype)

    def select(self, indices: np.ndarray) -> DiskImages:
        """The images at `indices` (an index array or a boolean mask), still on disk."""
        chosen = np.arange(len(self.files))[np.asarray(indices)]
        return DiskImages(tuple(self.files[i] for i in chosen.tolist()), self.size, self.channels, self.crop_pct)

    def decode(self) -> np.ndarray:
        """All the images as one read-only uint8 array, decoded on a pool of threads."""
        images = self._decoded()
        images.setflags(write=False)
        return images

    def _decoded(self) -> np.ndarray:
        """All the images as one new uint8 array, decoded on a pool of threads."""
        images = np.empty(self.shape, dtype=np.uint8)

        def fill(slot: int) -> None:
            images[slot] = read_image(self.files[slot], self.size, self.channels, self.crop_pct)

        with ThreadPoolExecutor(max_workers=min(DECODE_THREADS, os.cpu_count() or 1)) as pool:
            list(pool.map(fill, range(len(self.files))))  # list(): the first error is raised here
        return images

    def digest(self) -> str:
        """16 hex digits that change when a file is added, removed, rewritten (size or modification
        time) or fitted differently; no image is opened."""
        return files_digest(self.files, (self.size, self.channels, self.crop_pct))


def files_digest(files: Iterable[Path], how: object = ()) -> str:
    """16 hex digits of `files` (their paths, sizes and modification times, in order) and of `how`
    they are read (its repr): what keeps a result computed from them in the cache (the statistics of
    `archdsl.data.stats_cache`, the corrupted copies of `archdsl.data.corrupted_cache`). No file is read."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(repr(how).encode())
    for path in files:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def read_image(path: Path, size: int, channels: int, crop_pct: float = 1.0) -> np.ndarray:
    """One image as uint8 (size, size, channels): shorter side resized to `size / crop_pct` (bicubic;
    timm's eval transform, whose ImageNet default 0.875 takes 256 for 224), centre-cropped to `size`."""
    with opened_image(path) as image:
        try:
            return fit_image(image, size, channels, crop_pct)
        except OSError as err:  # a truncated or corrupt file fails when its pixels are read
            raise UserError(f"{visible(path)}: the image does not decode ({err})") from None


def fit_image(image: PILImage, size: int, channels: int, crop_pct: float = 1.0) -> np.ndarray:
    """A decoded Pillow image as uint8 (size, size, channels), resized and centre-cropped as `read_image`."""
    from PIL import Image

    image = image.convert("L" if channels == 1 else "RGB")
    width, height = image.size
    scale = math.floor(size / crop_pct) / min(width, height)
    resized = (max(size, round(width * scale)), max(size, round(height * scale)))
    image = image.resize(resized, Image.Resampling.BICUBIC)
    left, top = (resized[0] - size) // 2, (resized[1] - size) // 2
    pixels = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.uint8)
    return pixels.reshape(size, size, channels)


def image_channels(path: Path) -> int:
    """1 if the image at `path` is grey, else 3."""
    with opened_image(path) as image:
        return 1 if image.mode in GREY_MODES else 3


class opened_image:
    """`Image.open(path)` as a context manager whose failures are one UserError naming the file;
    Pillow's decompression-bomb warning (an image over MAX_IMAGE_PIXELS) is an error too."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> PILImage:
        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                self.image = Image.open(self.path)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
            raise UserError(
                f"{visible(self.path)}: refused as a possible decompression bomb ({err})",
                hint="shrink the image, or raise PIL.Image.MAX_IMAGE_PIXELS in Python if you trust it",
            ) from None
        except OSError as err:  # UnidentifiedImageError is an OSError
            raise UserError(f"{visible(self.path)}: not an image Pillow can read ({err})") from None
        return self.image

    def __exit__(self, *exc: object) -> None:
        self.image.close()
