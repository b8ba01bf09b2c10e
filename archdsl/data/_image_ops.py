"""Batched image operations the corruption generator is built from.

Every function works on a whole batch of images laid out (N, H, W, C) at once with
numpy/scipy: per-image randomness (angles, offsets, noise fields) is drawn as arrays,
never in a Python loop over images. Each one computes what the published CIFAR-C
generator's library call computes (named in its docstring), in the same precision, so
that the generator can reproduce the published pixels; tests/test_data_corruption_references.py
checks each against that call or an independent reference.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage


def unit(images: np.ndarray) -> np.ndarray:
    """uint8 images as float64 in [0, 1], as the original's `np.array(x) / 255.`."""
    return images / 255.0


def to_255(x: np.ndarray) -> np.ndarray:
    """[0, 1] values clipped and scaled back to [0, 255], as the original's `np.clip(x, 0, 1) * 255`."""
    return np.clip(x, 0, 1) * 255


def sample(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, mode: str) -> np.ndarray:
    """Bilinear samples of every image of `x` (N, H, W, C) at its own coordinates (N, H', W').

    scipy's `map_coordinates` (order 1) with the batch index as a further, integral coordinate;
    `mode="mirror"` is OpenCV's BORDER_REFLECT_101 (d c b | a b c d | c b a), `"reflect"` the
    half-sample reflection (c b a | a b c | c b a), `"nearest"` repeats the edge. Channel by
    channel, so that the coordinate array stays the size of one channel.
    """
    batch = np.broadcast_to(np.arange(len(x), dtype=np.float64)[:, None, None], rows.shape)
    coordinates = np.stack([batch, rows, cols])
    out = np.empty((*rows.shape, x.shape[-1]), dtype=x.dtype)
    for channel in range(x.shape[-1]):
        out[..., channel] = ndimage.map_coordinates(x[..., channel], coordinates, order=1, mode=mode)
    return out


def pixel_grid(n: int, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, col) coordinates of every pixel, (N, H, W) each."""
    rows, cols = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    return np.broadcast_to(rows, (n, h, w)), np.broadcast_to(cols, (n, h, w))


def gaussian_blur(x: np.ndarray, sigma: float) -> np.ndarray:
    """skimage.filters.gaussian(x, sigma, channel_axis=-1) per image: edge mode `nearest`, truncate 4."""
    return ndimage.gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0)


def correlate_each(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """cv2.filter2D(channel, -1, kernel) for every image and channel: correlation, BORDER_REFLECT_101."""
    return ndimage.correlate(x, kernel[None, :, :, None].astype(x.dtype), mode="mirror")


def gaussian_taps(ksize: int, sigma: float) -> np.ndarray:
    """cv2.getGaussianKernel(ksize, sigma): exp(-(i - (ksize-1)/2)^2 / 2 sigma^2), normalised."""
    offsets = np.arange(ksize) - (ksize - 1) / 2
    taps = np.exp(-(offsets**2) / (2 * sigma**2))
    return taps / taps.sum()


def line_blur(x: np.ndarray, radius: float, sigma: float, angles_deg: np.ndarray) -> np.ndarray:
    """ImageMagick's MotionBlurImage, one angle per image, in float64 (the caller quantises).

    The kernel is one-sided: a line of 2*ceil(radius)+1 taps starting at the pixel and
    pointing along the angle, tap i weighted exp(-i^2 / 2 sigma^2) / (sqrt(2 pi) sigma)
    (normalised to sum 1) and offset by ceil(i cos a - 0.5) columns and ceil(i sin a - 0.5)
    rows; pixels beyond the border repeat the edge. (imagecorruptions' Wand-free
    `_motion_blur` computes the same sum.)
    """
    n, h, w, _ = x.shape
    width = 2 * math.ceil(radius) + 1
    taps = np.arange(width)
    weights = np.exp(-(taps**2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    weights /= weights.sum()
    angles = np.deg2rad(np.asarray(angles_deg, dtype=np.float64))
    rows = np.arange(h)[None, :, None]
    cols = np.arange(w)[None, None, :]
    batch = np.arange(n)[:, None, None]
    out = np.zeros(x.shape, dtype=np.float64)
    for tap, weight in zip(taps, weights, strict=True):
        d_col = np.ceil(tap * np.cos(angles) - 0.5).astype(np.int64)[:, None, None]
        d_row = np.ceil(tap * np.sin(angles) - 0.5).astype(np.int64)[:, None, None]
        out += weight * x[batch, np.clip(rows + d_row, 0, h - 1), np.clip(cols + d_col, 0, w - 1)]
    return out


def clipped_zoom(x: np.ndarray, zoom: float) -> np.ndarray:
    """Zoom every image of (N, H, W, C) into its centre by `zoom` >= 1, keeping H x W.

    As the CIFAR generator: the central ceil(H / zoom) square, scipy.ndimage.zoom (order 1)
    by `zoom`, then the central H x W of the result (imagecorruptions keeps its top-left instead).
    The batch rides along the channel axis, which is zoomed by 1: each image gets exactly the
    arithmetic of its own (H, W, C) zoom, in one call.
    """
    n, h, w, c = x.shape
    crop = int(np.ceil(h / zoom))
    top = (h - crop) // 2
    part = x[:, top : top + crop, top : top + crop].transpose(1, 2, 0, 3).reshape(crop, crop, n * c)
    zoomed = ndimage.zoom(part, (zoom, zoom, 1), order=1)
    trim = (zoomed.shape[0] - h) // 2
    zoomed = zoomed[trim : trim + h, trim : trim + h]
    return np.ascontiguousarray(zoomed.reshape(h, h, n, c).transpose(2, 0, 1, 3))


def plasma_fractal(rng: np.random.Generator, count: int, mapsize: int, decay: float) -> np.ndarray:
    """`count` diamond-square (plasma) fractals of mapsize x mapsize in [0, 1], float64, at once.

    The map is periodic (neighbours wrap around), it starts from 0 in the corner, and at
    each halving of the step the random displacement amplitude `wibble` is divided by
    `decay`: a larger decay gives a smoother fog. The draws come in the original's order
    (squares, then the two sets of diamonds, step by step).
    """
    if mapsize & (mapsize - 1):
        raise ValueError(f"mapsize must be a power of two, got {mapsize}")
    grid = np.zeros((count, mapsize, mapsize), dtype=np.float64)
    step = mapsize
    wibble = 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = grid[:, 0:mapsize:step, 0:mapsize:step]
        # squares: the centre of each square from its four corners
        total = corners + np.roll(corners, -1, axis=1)
        total = total + np.roll(total, -1, axis=2)
        grid[:, half:mapsize:step, half:mapsize:step] = wibbled_mean(total)
        # diamonds: the edge midpoints from the two corners and two centres around them
        centres = grid[:, half:mapsize:step, half:mapsize:step]
        corners = grid[:, 0:mapsize:step, 0:mapsize:step]
        left_right = centres + np.roll(centres, 1, axis=1) + (corners + np.roll(corners, -1, axis=2))
        grid[:, 0:mapsize:step, half:mapsize:step] = wibbled_mean(left_right)
        up_down = centres + np.roll(centres, 1, axis=2) + (corners + np.roll(corners, -1, axis=1))
        grid[:, half:mapsize:step, 0:mapsize:step] = wibbled_mean(up_down)
        step //= 2
        wibble /= decay
    grid -= grid.min(axis=(1, 2), keepdims=True)
    return grid / grid.max(axis=(1, 2), keepdims=True)


def rgb_to_hsv(x: np.ndarray) -> np.ndarray:
    """skimage.color.rgb2hsv: hue, saturation and value in [0, 1] (grey pixels get hue 0;
    where two channels tie for the maximum, blue's formula wins over green's over red's)."""
    value = x.max(axis=-1)
    delta = np.ptp(x, axis=-1)
    red, green, blue = x[..., 0], x[..., 1], x[..., 2]
    is_blue = blue == value
    is_green = ~is_blue & (green == value)
    # skimage's three formulas, (g - b) / d, 2 + (b - r) / d, 4 + (r - g) / d, with one division.
    numerator = np.where(is_blue, red - green, np.where(is_green, blue - red, green - blue))
    offset = np.where(is_blue, 4.0, np.where(is_green, 2.0, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        saturation = delta / value
        hue = offset + numerator / delta
    saturation[delta == 0.0] = 0.0
    hue = (hue / 6.0) % 1.0
    hue[delta == 0.0] = 0.0
    return np.stack([hue, saturation, value], axis=-1)


# (red, green, blue) of each hue sector, as indices into (v, t, p, q).
_SECTORS = np.array([[0, 1, 2], [3, 0, 2], [2, 0, 1], [2, 3, 0], [1, 2, 0], [0, 2, 3]])


def hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """skimage.color.hsv2rgb: the inverse of `rgb_to_hsv` (the same values, picked per sector)."""
    hue, saturation, value = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    sector = np.floor(hue * 6)
    fraction = hue * 6 - sector
    p = value * (1 - saturation)
    q = value * (1 - fraction * saturation)
    t = value * (1 - (1 - fraction) * saturation)
    candidates = np.stack([value, t, p, q], axis=-1)
    return np.take_along_axis(candidates, _SECTORS[sector.astype(np.uint8) % 6], axis=-1)


def rgb_to_gray(x: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma (OpenCV's RGB2GRAY), shape (N, H, W, 1), in the dtype of `x`."""
    coefficients = np.array([0.299, 0.587, 0.114], dtype=x.dtype)
    return (x[..., 0] * coefficients[0] + x[..., 1] * coefficients[1] + x[..., 2] * coefficients[2])[..., None]
