"""archdsl's corruption generator against the `imagecorruptions` package, at equal parameters
and equal random numbers.

imagecorruptions (PyPI 1.1.2, Apache-2.0) is Hendrycks' ImageNet-C generator packaged; its
functions hard-code the ImageNet-C parameters (`IMAGENET_C` below, read off its source), so
archdsl's functions are run at those parameters (`archdsl.data.corruptions.apply`), with the
same random numbers: imagecorruptions draws from numpy's legacy global generator, and
`LegacyRandom` serves archdsl's draws from it, seeded alike.

The package is from 2019: on today's libraries it needs a few things patched around it
(`patched`): `pkg_resources` (gone from new setuptools), `np.float_` (gone in NumPy 2),
skimage's `multichannel=` (gone in scikit-image 0.19), `scipy.ndimage.interpolation`.
Nothing of its computations is changed.

For frost and elastic_transform, which are other algorithms in imagecorruptions, the CIFAR
generator's recipe is written out with the libraries it calls (`CIFAR_RECIPES`).

`python tests/_corruption_reference.py` prints the table of docs/data.md.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.resources
import importlib.util
import sys
import types
from collections.abc import Iterator

import numpy as np

from archdsl.data import corruptions

# imagecorruptions 1.1.2's parameters per severity (ImageNet-C's), for the functions compared.
IMAGENET_C = {
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    "shot_noise": (60, 25, 12, 5, 3),
    "speckle_noise": (0.15, 0.2, 0.35, 0.45, 0.6),
    "gaussian_blur": (1, 2, 3, 4, 6),
    "glass_blur": ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)),
    "defocus_blur": ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
    "motion_blur": ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
    "zoom_blur": (
        np.arange(1, 1.11, 0.01),
        np.arange(1, 1.16, 0.01),
        np.arange(1, 1.21, 0.02),
        np.arange(1, 1.26, 0.02),
        np.arange(1, 1.31, 0.03),
    ),
    "snow": (
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    ),
    "fog": ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)),
    "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    "saturate": ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)),
    "jpeg_compression": (25, 18, 15, 10, 7),
    "pixelate": (0.6, 0.5, 0.4, 0.3, 0.25),
    "spatter": (
        (0.65, 0.3, 4, 0.69, 0.6, 0),
        (0.65, 0.3, 3, 0.68, 0.6, 0),
        (0.65, 0.3, 2, 0.68, 0.5, 0),
        (0.65, 0.3, 1, 0.65, 1.5, 1),
        (0.67, 0.4, 1, 0.65, 1.5, 1),
    ),
}
# Functions that take a PIL image in imagecorruptions (the rest take arrays).
TAKES_PIL = {"jpeg_compression", "pixelate", "spatter"}
# Why the others are not compared whole: impulse_noise draws from skimage's own unseeded generator
# (compared with skimage.util.random_noise instead), frost and elastic_transform are other algorithms
# in imagecorruptions than in the CIFAR generator (frost: another photo scaling; elastic: no affine part).


class LegacyRandom:
    """The `np.random.Generator` methods archdsl's corruptions call, served by numpy's legacy
    global generator in the same order and shapes, so both sides see the same numbers."""

    def __init__(self, seed: int) -> None:
        np.random.seed(seed)

    def normal(self, loc, scale, size=None):
        return np.random.normal(loc, scale, size)

    def poisson(self, lam, size=None):
        return np.random.poisson(lam, size)

    def uniform(self, low, high, size=None):
        return np.random.uniform(low, high, size)

    def random(self, size=None):
        return np.random.random_sample(size)

    def integers(self, low, high, size=None):
        return np.random.randint(low, high, size)


@contextlib.contextmanager
def patched() -> Iterator[types.ModuleType]:
    """`imagecorruptions.corruptions`, importable and runnable on today's libraries."""
    saved_modules = dict(sys.modules)
    had_float = hasattr(np, "float_")
    try:
        if importlib.util.find_spec("pkg_resources") is None:
            stub = types.ModuleType("pkg_resources")
            stub.resource_filename = lambda package, name: str(importlib.resources.files(package) / name)
            sys.modules["pkg_resources"] = stub
        if importlib.util.find_spec("scipy.ndimage.interpolation") is None:
            sys.modules["scipy.ndimage.interpolation"] = importlib.import_module("scipy.ndimage")
        if not had_float:
            np.float_ = np.float64  # type: ignore[attr-defined]
        module = importlib.import_module("imagecorruptions.corruptions")
        from skimage.filters import gaussian

        def gaussian_with_multichannel(image, sigma, multichannel=False, **kwargs):
            return gaussian(image, sigma=sigma, channel_axis=-1 if multichannel else None, **kwargs)

        original = module.gaussian
        module.gaussian = gaussian_with_multichannel
        try:
            yield module
        finally:
            module.gaussian = original
    finally:
        if not had_float and hasattr(np, "float_"):
            del np.float_
        for name in set(sys.modules) - set(saved_modules):
            if name == "pkg_resources" or name.startswith("imagecorruptions"):
                del sys.modules[name]


def theirs(module: types.ModuleType, name: str, image: np.ndarray, severity: int, seed: int) -> np.ndarray:
    """imagecorruptions' `name` at `severity` on one uint8 (H, W, 3) image, truncated to uint8."""
    from PIL import Image

    np.random.seed(seed)
    argument = Image.fromarray(image) if name in TAKES_PIL else image
    return np.uint8(np.asarray(getattr(module, name)(argument, severity)))


def ours(name: str, image: np.ndarray, severity: int, seed: int) -> np.ndarray:
    """archdsl's `name` at imagecorruptions' parameters for `severity`, same random numbers."""
    return corruptions.apply(image[None], name, IMAGENET_C[name][severity - 1], LegacyRandom(seed))[0]


def mean_absolute_difference(module, name: str, images: np.ndarray, severity: int) -> float:
    """Mean |ours - theirs| in uint8 steps over `images`, seed i for image i."""
    total = 0.0
    for seed, image in enumerate(images):
        a = ours(name, image, severity, seed).astype(np.int64)
        b = theirs(module, name, image, severity, seed).astype(np.int64)
        total += float(np.abs(a - b).mean())
    return total / len(images)


# Two corruptions are other algorithms in imagecorruptions than in the CIFAR generator (frost
# scales its photographs otherwise; elastic_transform has no affine part there). For them the
# CIFAR generator's own recipe is written out below with the libraries it calls (OpenCV,
# scipy), at the CIFAR parameters.


def cifar_frost(image: np.ndarray, c: tuple, seed: int) -> np.ndarray:
    """The CIFAR generator's frost: one of the first five photographs (cv2.imread, BGR), at 0.2
    scale (cv2.resize, bilinear), a random 32x32 crop, a weighted sum."""
    import cv2

    from archdsl.data import _frost as frost

    np.random.seed(seed)
    photo = cv2.imread(str(frost.photo_folder() / frost.FILES[np.random.randint(5)]))
    photo = cv2.resize(photo, (0, 0), fx=0.2, fy=0.2)
    top, left = np.random.randint(0, photo.shape[0] - 32), np.random.randint(0, photo.shape[1] - 32)
    crop = photo[top : top + 32, left : left + 32][..., [2, 1, 0]]
    return np.uint8(np.clip(c[0] * image + c[1] * crop, 0, 255))


def cifar_elastic_transform(image: np.ndarray, c: tuple, seed: int) -> np.ndarray:
    """The CIFAR generator's elastic_transform: an affine warp of three points moved at random
    (cv2.warpAffine, reflect-101), then a blurred random displacement (scipy map_coordinates)."""
    import cv2
    from scipy.ndimage import gaussian_filter, map_coordinates

    np.random.seed(seed)
    alpha, sigma, affine = (value * 32 for value in c)
    x = image.astype(np.float32) / 255.0
    centre = np.float32(x.shape[:2]) // 2
    half = min(x.shape[:2]) // 3
    points = np.float32([centre + half, [centre[0] + half, centre[1] - half], centre - half])
    moved = points + np.random.uniform(-affine, affine, size=points.shape).astype(np.float32)
    x = cv2.warpAffine(x, cv2.getAffineTransform(points, moved), x.shape[1::-1], borderMode=cv2.BORDER_REFLECT_101)
    shifts = [
        (gaussian_filter(np.random.uniform(-1, 1, size=x.shape[:2]), sigma, mode="reflect", truncate=3) * alpha)
        for _ in range(2)
    ]
    d_cols, d_rows = (shift.astype(np.float32)[..., None] for shift in shifts)
    cols, rows, channels = np.meshgrid(np.arange(x.shape[1]), np.arange(x.shape[0]), np.arange(x.shape[2]))
    where = ((rows + d_rows).reshape(-1, 1), (cols + d_cols).reshape(-1, 1), channels.reshape(-1, 1))
    warped = map_coordinates(x, where, order=1, mode="reflect").reshape(x.shape)
    return np.uint8(np.clip(warped, 0, 1) * 255)


CIFAR_RECIPES = {"frost": cifar_frost, "elastic_transform": cifar_elastic_transform}


def recipe_difference(name: str, images: np.ndarray, severity: int) -> float:
    """Mean |ours - the CIFAR recipe| in uint8 steps at the CIFAR parameters, seed i for image i."""
    c = corruptions.PARAMS[name][severity - 1]
    total = 0.0
    for seed, image in enumerate(images):
        a = corruptions.apply(image[None], name, c, LegacyRandom(seed))[0].astype(np.int64)
        total += float(np.abs(a - CIFAR_RECIPES[name](image, c, seed).astype(np.int64)).mean())
    return total / len(images)


def sample_images(count: int = 16) -> np.ndarray:
    """Test images of the built-in synthetic set (32x32 photos-like scenes, no download)."""
    from archdsl.data import load_split

    return np.asarray(load_split(f"synthetic:test={count}", "test").images)


def table(count: int = 16) -> str:
    images = sample_images(count)
    lines = ["| corruption | " + " | ".join(f"s{s}" for s in range(1, 6)) + " |", "|---|" + "---|" * 5]
    with patched() as module:
        for name in IMAGENET_C:
            cells = [f"{mean_absolute_difference(module, name, images, s):.3g}" for s in range(1, 6)]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name in CIFAR_RECIPES:
        cells = [f"{recipe_difference(name, images, s):.3g}" for s in range(1, 6)]
        lines.append(f"| {name} (CIFAR recipe, CIFAR parameters) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
