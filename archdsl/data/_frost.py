"""The frost photographs of Hendrycks' generator, as the CIFAR generator uses them.

The frost corruption blends a random crop of a photograph of frosted glass into the image.
The photographs are not archdsl's to ship: they come with the `imagecorruptions` package
(Apache-2.0; package data `imagecorruptions/frost/`), installed by the `frost` extra
(`pip install 'archdsl[frost]'`). archdsl reads the files only: it does not import that
package (which needs OpenCV and scikit-image), and decodes them with Pillow (which decodes
these files to the same pixels as OpenCV).

The CIFAR generator draws from the first five photographs only (`np.random.randint(5)` over
a list of six) and shows them at 0.2 scale (`cv2.resize(frost, (0, 0), fx=0.2, fy=0.2)`,
bilinear), which `photos()` reproduces.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy import ndimage

from archdsl.errors import UserError, install_extra

PACKAGE = "imagecorruptions"
FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")  # frost6.jpg is never drawn
SCALE = 0.2


def photo_folder() -> Path:
    """The folder of the frost photographs in the installed imagecorruptions package."""
    spec = importlib.util.find_spec(PACKAGE)
    folder = Path(next(iter(spec.submodule_search_locations or ()), "")) / "frost" if spec else None
    if folder is None or not all((folder / name).is_file() for name in FILES):
        raise UserError(
            "the frost corruption needs the frost photographs of Hendrycks' generator, which are not installed",
            hint=f"{install_extra('frost')}: the imagecorruptions package ships them; "
            "or leave frost out (e.g. --corruptions with the other names)",
        )
    return folder


def resize_linear(image: np.ndarray, scale: float) -> np.ndarray:
    """cv2.resize(image, (0, 0), fx=scale, fy=scale) with INTER_LINEAR, on an (H, W, C) array.

    OpenCV's output size is round(size * scale) and output pixel i samples the input at
    (i + 0.5) / scale - 0.5 (pixel centres aligned), bilinearly, repeating the edge.
    """
    h, w, _ = image.shape
    rows = (np.arange(round(h * scale)) + 0.5) / scale - 0.5
    cols = (np.arange(round(w * scale)) + 0.5) / scale - 0.5
    grid_rows, grid_cols = np.meshgrid(rows, cols, indexing="ij")
    channels = [
        ndimage.map_coordinates(image[..., c].astype(np.float64), [grid_rows, grid_cols], order=1, mode="nearest")
        for c in range(image.shape[2])
    ]
    return np.clip(np.rint(np.stack(channels, axis=-1)), 0, 255).astype(np.uint8)


@lru_cache(maxsize=1)
def photos() -> tuple[np.ndarray, ...]:
    """The five photographs at 0.2 scale, RGB uint8 (read-only), in the generator's order."""
    from PIL import Image

    folder = photo_folder()
    scaled = []
    for name in FILES:
        with Image.open(folder / name) as image:
            pixels = np.asarray(image.convert("RGB"))
        small = resize_linear(pixels, SCALE)
        small.setflags(write=False)
        scaled.append(small)
    return tuple(scaled)


def frost_crops(rng: np.random.Generator, count: int, height: int, width: int) -> np.ndarray:
    """For each of `count` images a random photograph and a random crop of it, uint8 (count, H, W, 3).

    The draws come in the original's order: the photograph, then the crop's top, then its left
    (`randint(0, size - 32)`: the last possible offset is never drawn, as in the original).
    """
    scaled = photos()
    which = rng.integers(0, len(scaled), count)
    tops = rng.integers(0, np.array([scaled[k].shape[0] - height for k in which]))
    lefts = rng.integers(0, np.array([scaled[k].shape[1] - width for k in which]))
    return np.stack(
        [scaled[k][top : top + height, left : left + width] for k, top, left in zip(which, tops, lefts, strict=True)]
    )
