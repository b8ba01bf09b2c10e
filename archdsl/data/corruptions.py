"""The CIFAR-C corruption generator, vectorised over a batch of images.

`corrupt(images, corruption, severity, seed)` computes Hendrycks & Dietterich's CIFAR
corruptions (`make_cifar_c.py`) with their CIFAR parameters (the table in docs/reference.md):
each function below does the original's arithmetic, in the original's precision (float64,
or float32 where the original works in float32), and ends as it does, in values 0..255 that
`corrupt` truncates to uint8 (`np.uint8(...)`). Given the same random numbers, most
corruptions therefore give the published generator's pixels exactly; docs/data.md lists
which do and how far the others are, measured against the `imagecorruptions` package.
Neither ImageMagick nor OpenCV is needed: motion blur and snow use ImageMagick's motion-blur
kernel (`_image_ops.line_blur`); frost uses the original photographs, which the `frost`
extra installs (`archdsl.data._frost`).

Randomness comes only from `np.random.default_rng(seed)`, so a seed fixes the output, and
the same seed at two severities draws the same noise (severities differ only by their
parameters). The functions draw in the original's order, so a legacy `np.random` stream
handed to them reproduces the original image by image.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import ndimage

from archdsl.data import _image_ops as ops
from archdsl.data._frost import frost_crops, photo_folder
from archdsl.errors import UserError

# The 15 of CIFAR-10-C/CIFAR-100-C, in the benchmark's order (docs/reference.md, and the paper's tables).
CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
# The 4 held-out ones of the released data (not in the 15 x 5 robustness score).
EXTRA_CORRUPTIONS: tuple[str, ...] = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)

# Severity 1..5 parameters of the CIFAR generator (images in [0, 1]).
PARAMS: dict[str, tuple] = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "speckle_noise": (0.06, 0.10, 0.12, 0.16, 0.20),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
    "defocus_blur": ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)),
    "glass_blur": ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)),
    "motion_blur": ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)),
    "zoom_blur": tuple(np.arange(1, stop, 0.01) for stop in (1.06, 1.11, 1.16, 1.21, 1.26)),
    "snow": (
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    ),
    "frost": ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)),
    "fog": ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "saturate": ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)),
    # (alpha, sigma, affine) as fractions of the image size (32 on CIFAR)
    "elastic_transform": ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05), (0.1, 0.03, 0.03)),
    "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),
    "jpeg_compression": (80, 65, 58, 50, 40),
    # (loc, scale, sigma, threshold, intensity or mud sigma, mode: 0 water / 1 mud)
    "spatter": (
        (0.62, 0.1, 0.7, 0.7, 0.5, 0),
        (0.65, 0.1, 0.8, 0.7, 0.5, 0),
        (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1),
        (0.65, 0.1, 0.5, 0.68, 0.6, 1),
    ),
}

# A corruption: uint8 images (N, H, W, 3), its parameters, the random generator -> values in [0, 255].
Corruption = Callable[[np.ndarray, Any, np.random.Generator], np.ndarray]
unit, to_255 = ops.unit, ops.to_255


# --- noise -------------------------------------------------------------------------------


def _gaussian_noise(images, sigma, rng):
    x = unit(images)
    return to_255(x + rng.normal(0.0, sigma, x.shape))


def _shot_noise(images, c, rng):
    return to_255(rng.poisson(unit(images) * c) / c)


def _impulse_noise(images, amount, rng):
    # skimage.util.random_noise(x, mode="s&p", amount=amount): each value flips with probability
    # `amount`, to 1 or 0 with even odds.
    x = unit(images)
    flipped = rng.random(x.shape) <= amount
    salted = rng.random(x.shape) <= 0.5
    x[flipped & salted] = 1.0
    x[flipped & ~salted] = 0.0
    return to_255(x)


def _speckle_noise(images, sigma, rng):
    x = unit(images)
    return to_255(x + x * rng.normal(0.0, sigma, x.shape))


# --- blur --------------------------------------------------------------------------------


def _gaussian_blur(images, sigma, rng):
    return to_255(ops.gaussian_blur(unit(images), sigma))


def _disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The original's `disk`: a float32 disk of `radius` on a 17x17 grid, normalised, then
    cv2.GaussianBlur with a 3x3 kernel of sigma `alias_blur` (reflect-101 border);
    cropped to its non-zero support (the zero taps add nothing)."""
    half, ksize = (8, 3) if radius <= 8 else (math.ceil(radius), 5)
    coords = np.arange(-half, half + 1)
    cols, rows = np.meshgrid(coords, coords)
    disk = np.array(rows**2 + cols**2 <= radius**2, dtype=np.float32)
    disk /= np.sum(disk)
    taps = ops.gaussian_taps(ksize, alias_blur)
    kernel = ndimage.correlate(disk.astype(np.float64), np.outer(taps, taps), mode="mirror").astype(np.float32)
    support = np.argwhere(kernel != 0)
    (r0, c0), (r1, c1) = support.min(axis=0), support.max(axis=0)
    return kernel[r0 : r1 + 1, c0 : c1 + 1]


def _defocus_blur(images, c, rng):
    radius, alias_blur = c
    return to_255(ops.correlate_each(unit(images), _disk_kernel(radius, alias_blur).astype(np.float64)))


def _glass_blur(images, c, rng):
    """Blur (quantised to uint8, as the original does), move pixels locally, blur again.

    The walk goes from the bottom-right corner up and left; at each pixel the original writes
    `x[h, w], x[h', w'] = x[h', w'], x[h, w]` with numpy views, which copies the neighbour at
    offset randint(-delta, delta) (upper bound excluded) into the pixel and leaves the
    neighbour as it was: that copy is what is reproduced here. Sequential within an image, so
    it loops over positions, each step done for the whole batch at once.
    """
    sigma, delta, iterations = c
    n, h, w, _ = images.shape
    x = np.uint8(ops.gaussian_blur(unit(images), sigma) * 255)
    batch = np.arange(n)
    for _ in range(iterations):
        for row in range(h - delta, delta, -1):
            for col in range(w - delta, delta, -1):
                d_col, d_row = rng.integers(-delta, delta, (2, n))
                x[batch, row, col] = x[batch, row + d_row, col + d_col]
    return to_255(ops.gaussian_blur(x / 255.0, sigma))


def _motion_blur(images, c, rng):
    # ImageMagick blurs the PNG of the image and writes 8-bit pixels: rounded to integers.
    radius, sigma = c
    blurred = ops.line_blur(images.astype(np.float64), radius, sigma, rng.uniform(-45, 45, len(images)))
    return np.clip(np.rint(blurred), 0, 255)


def _zoom_blur(images, zooms, rng):
    x = (images / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for zoom in zooms:
        out += ops.clipped_zoom(x, zoom)
    return to_255((x + out) / (len(zooms) + 1))


# --- weather -----------------------------------------------------------------------------


def _snow(images, c, rng):
    loc, scale, zoom, threshold, radius, sigma, blend = c
    n, h, w, _ = images.shape
    x = images.astype(np.float32) / 255.0
    flakes = ops.clipped_zoom(rng.normal(loc, scale, (n, h, w))[..., None], zoom)
    flakes[flakes < threshold] = 0
    # The original blurs an 8-bit PNG of the flakes with ImageMagick and reads 8 bits back.
    flakes = np.uint8(np.clip(flakes, 0, 1) * 255).astype(np.float64)
    flakes = np.rint(ops.line_blur(flakes, radius, sigma, rng.uniform(-135, -45, n))) / 255.0
    # Whiten the scene as snow light does, then add the flakes and their 180-degree turn.
    x = blend * x + (1 - blend) * np.maximum(x, ops.rgb_to_gray(x) * 1.5 + 0.5)
    return to_255(x + flakes + np.rot90(flakes, k=2, axes=(1, 2)))


def _frost(images, c, rng):
    image_weight, frost_weight = c
    n, h, w, _ = images.shape
    return np.clip(image_weight * images + frost_weight * frost_crops(rng, n, h, w), 0, 255)


def _fog(images, c, rng):
    strength, decay = c
    n, h, w, _ = images.shape
    x = unit(images)
    peak = x.max(axis=(1, 2, 3), keepdims=True)
    mapsize = 1 << max(5, math.ceil(math.log2(max(h, w))))  # 32 on CIFAR
    x = x + strength * ops.plasma_fractal(rng, n, mapsize, decay)[:, :h, :w, None]
    return to_255(x * peak / (peak + strength))


# --- digital -----------------------------------------------------------------------------


def _brightness(images, c, rng):
    hsv = ops.rgb_to_hsv(unit(images))
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return to_255(ops.hsv_to_rgb(hsv))


def _saturate(images, c, rng):
    scale, shift = c
    hsv = ops.rgb_to_hsv(unit(images))
    hsv[..., 1] = np.clip(hsv[..., 1] * scale + shift, 0, 1)
    return to_255(ops.hsv_to_rgb(hsv))


def _contrast(images, c, rng):
    x = unit(images)
    means = np.mean(x, axis=(1, 2), keepdims=True)
    return to_255((x - means) * c + means)


def _elastic_transform(images, c, rng):
    """A random affine warp (three points moved by up to `affine`), then a smooth random
    displacement field (uniform noise blurred by `sigma`, scaled by `alpha`), in float32.

    The original warps with cv2.warpAffine (bilinear, reflect-101 border) and displaces with
    scipy's map_coordinates (order 1, reflect border); both are one `_image_ops.sample` here.
    """
    n, h, w, _ = images.shape
    size = min(h, w)
    alpha, sigma, affine = (value * size for value in c)
    x = images.astype(np.float32) / 255.0
    # Three points around the centre, moved at random. OpenCV reads points as (x, y) = (col, row);
    # the original builds them from (H // 2, W // 2), which only matters for non-square images.
    centre = np.float32([h, w]) // 2
    half = size // 3
    src = np.array([centre + half, [centre[0] + half, centre[1] - half], centre - half], dtype=np.float32)
    dst = src[None] + rng.uniform(-affine, affine, (n, 3, 2)).astype(np.float32)
    # warpAffine samples each output pixel at the inverse map's image of it: solve dst -> src.
    lhs = np.concatenate([dst, np.ones((n, 3, 1), dtype=np.float32)], axis=2).astype(np.float64)
    inverse = np.linalg.solve(lhs, np.broadcast_to(src.astype(np.float64), (n, 3, 2)))  # (n, 3, 2): x, y
    rows, cols = ops.pixel_grid(n, h, w)
    a = inverse[:, :, None, None, :]  # (n, 3, 1, 1, 2)
    source = cols[..., None] * a[:, 0] + rows[..., None] * a[:, 1] + a[:, 2]  # (n, h, w, 2): x, y
    x = ops.sample(x, source[..., 1], source[..., 0], mode="mirror")
    d_cols = rng.uniform(-1, 1, (n, h, w))
    d_rows = rng.uniform(-1, 1, (n, h, w))
    if sigma > 0:
        d_cols = ndimage.gaussian_filter(d_cols, (0, sigma, sigma), mode="reflect", truncate=3.0)
        d_rows = ndimage.gaussian_filter(d_rows, (0, sigma, sigma), mode="reflect", truncate=3.0)
    d_cols = (d_cols * alpha).astype(np.float32)
    d_rows = (d_rows * alpha).astype(np.float32)
    return to_255(ops.sample(x, rows + d_rows, cols + d_cols, mode="reflect"))


def _pil_roundtrip(images: np.ndarray, transform: Callable) -> np.ndarray:
    from PIL import Image

    out = np.empty_like(images)
    for index, image in enumerate(images):
        out[index] = np.asarray(transform(Image.fromarray(image)))
    return out


def _pixelate(images, c, rng):
    from PIL import Image

    h, w = images.shape[1:3]
    small = (int(w * c), int(h * c))
    return _pil_roundtrip(images, lambda im: im.resize(small, Image.BOX).resize((w, h), Image.BOX))


def _jpeg_compression(images, quality, rng):
    from PIL import Image

    def roundtrip(image):
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=quality)
        buffer.seek(0)
        return Image.open(buffer).convert("RGB")

    return _pil_roundtrip(images, roundtrip)


def _spatter(images, c, rng):
    """Mud splashes (brown) as the original; water drops as a pale cyan film (the original
    shades them with OpenCV's Canny edges and distance transform, which are not reproduced)."""
    loc, scale, sigma, threshold, strength, mud = c
    n, h, w, _ = images.shape
    x = images.astype(np.float32) / 255.0
    liquid = rng.normal(loc, scale, (n, h, w))
    liquid = ndimage.gaussian_filter(liquid, (0, sigma, sigma), mode="nearest", truncate=4.0)
    liquid[liquid < threshold] = 0
    if mud:
        mask = np.where(liquid > threshold, 1, 0).astype(np.float32)
        mask = ndimage.gaussian_filter(mask, (0, strength, strength), mode="nearest", truncate=4.0)
        mask[mask < 0.8] = 0
        colour = np.array([63 / 255.0, 42 / 255.0, 20 / 255.0], dtype=np.float32) * mask[..., None]
        return to_255(x * (1 - mask[..., None]) + colour)
    peak = np.maximum(liquid.max(axis=(1, 2), keepdims=True), 1e-12)
    film = (liquid / peak * strength).astype(np.float32)[..., None]
    colour = np.array([175, 238, 238], dtype=np.float32) / 255
    return to_255(x + film * colour)


_FUNCTIONS: dict[str, Corruption] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "speckle_noise": _speckle_noise,
    "gaussian_blur": _gaussian_blur,
    "defocus_blur": _defocus_blur,
    "glass_blur": _glass_blur,
    "motion_blur": _motion_blur,
    "zoom_blur": _zoom_blur,
    "snow": _snow,
    "frost": _frost,
    "fog": _fog,
    "brightness": _brightness,
    "contrast": _contrast,
    "saturate": _saturate,
    "elastic_transform": _elastic_transform,
    "pixelate": _pixelate,
    "jpeg_compression": _jpeg_compression,
    "spatter": _spatter,
}


def all_corruptions() -> tuple[str, ...]:
    """The 15 of the benchmark, then the 4 extras."""
    return CORRUPTIONS + EXTRA_CORRUPTIONS


def check_corruption(name: str) -> str:
    """`name` if it is a corruption this generator knows; a UserError with a suggestion otherwise."""
    if name not in _FUNCTIONS:
        from archdsl.errors import did_you_mean

        raise UserError(
            f"unknown corruption {name!r}",
            hint=did_you_mean(name, all_corruptions()) or f"choose from {', '.join(all_corruptions())}",
        )
    return name


def check_can_generate(names: tuple[str, ...] | list[str]) -> None:
    """Before generating `names`: a UserError now if one cannot be generated on this machine
    (frost without its photographs), rather than after the others are done."""
    if "frost" in names:
        photo_folder()


def check_severity(severity: int) -> int:
    """`severity` if it is 1..5; a UserError otherwise."""
    if severity not in SEVERITIES:
        raise UserError(f"severity must be one of 1..5, got {severity!r}")
    return int(severity)


def corrupt(images: np.ndarray, corruption: str, severity: int, seed: int = 0) -> np.ndarray:
    """Corrupt a batch of uint8 (N, H, W, 3) images; returns a new uint8 array of the same shape."""
    check_corruption(corruption)
    check_severity(severity)
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}")
    if len(images) == 0:
        return images.copy()
    rng = np.random.default_rng(seed)
    return apply(images, corruption, PARAMS[corruption][severity - 1], rng)


def apply(images: np.ndarray, corruption: str, parameters: Any, rng: Any) -> np.ndarray:
    """One corruption at explicit `parameters` (a `PARAMS` entry, or another generator's, to
    compare with it), drawing from `rng`; uint8 in and out, truncated as the original does."""
    values = _FUNCTIONS[corruption](np.asarray(images, dtype=np.uint8), parameters, rng)
    return np.clip(values, 0, 255).astype(np.uint8)
