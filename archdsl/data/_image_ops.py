"""Batched image operations the corruption generator is built from.

Every function takes float32 images in [0, 1] laid out (N, H, W, C) and works on the
whole batch at once with numpy/scipy: per-image randomness (angles, offsets, noise
fields) is drawn as arrays, never in a Python loop over images. That is what keeps
15 corruptions x 5 severities x 10,000 CIFAR images down to minutes on two cores.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage


def to_float(images: np.ndarray) -> np.ndarray:
    return images.astype(np.float32) / np.float32(255.0)


def to_uint8(x: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def _wrap_index(index: np.ndarray, size: int, mode: str) -> np.ndarray:
    """Map out-of-range integer pixel indices back into [0, size) by the border rule.

    `mirror` is OpenCV's BORDER_REFLECT_101 (d c b | a b c d | c b a), `reflect` is
    scipy's half-sample reflect (c b a | a b c | c b a), `nearest` clamps to the edge.
    """
    if mode == "nearest":
        return np.clip(index, 0, size - 1)
    if mode == "mirror":
        if size == 1:
            return np.zeros_like(index)
        period = 2 * (size - 1)
        index = np.abs(index) % period
        return np.where(index > size - 1, period - index, index)
    if mode == "reflect":
        period = 2 * size
        index = index % period
        return np.where(index >= size, period - 1 - index, index)
    raise ValueError(f"unknown border mode {mode!r}")


def bilinear_sample(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, mode: str) -> np.ndarray:
    """Sample every image of `x` (N, H, W, C) at its own float coordinates (N, H', W')."""
    n, h, w, _ = x.shape
    r0 = np.floor(rows)
    c0 = np.floor(cols)
    fr = (rows - r0).astype(np.float32)[..., None]
    fc = (cols - c0).astype(np.float32)[..., None]
    r0 = r0.astype(np.int64)
    c0 = c0.astype(np.int64)
    r_lo, r_hi = _wrap_index(r0, h, mode), _wrap_index(r0 + 1, h, mode)
    c_lo, c_hi = _wrap_index(c0, w, mode), _wrap_index(c0 + 1, w, mode)
    batch = np.arange(n)[:, None, None]
    top = x[batch, r_lo, c_lo] * (1 - fc) + x[batch, r_lo, c_hi] * fc
    bottom = x[batch, r_hi, c_lo] * (1 - fc) + x[batch, r_hi, c_hi] * fc
    return top * (1 - fr) + bottom * fr


def pixel_grid(n: int, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
    return np.broadcast_to(rows, (n, h, w)), np.broadcast_to(cols, (n, h, w))


def gaussian_blur(x: np.ndarray, sigma: float) -> np.ndarray:
    """Blur each channel of each image (skimage.filters.gaussian's defaults: edge mode
    `nearest`, truncate 4)."""
    return ndimage.gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0)


def convolve_each(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Convolve every image and channel with one 2-D kernel (OpenCV filter2D's border)."""
    return ndimage.correlate(x, kernel[None, :, :, None].astype(np.float32), mode="mirror")


def line_blur(x: np.ndarray, radius: float, sigma: float, angles_deg: np.ndarray) -> np.ndarray:
    """Motion blur as ImageMagick's MotionBlurImage defines it, one angle per image.

    The kernel is one-sided: a line of 2*ceil(radius)+1 taps starting at the pixel and
    pointing along the angle, tap i weighted exp(-i^2 / 2 sigma^2) and offset by
    (round(i cos a), round(i sin a)) whole pixels; edges repeat the border pixel.
    Taps whose weight is below 1e-4 of the total are dropped (they cannot change a
    uint8 value).
    """
    n, h, w, _ = x.shape
    width = 2 * math.ceil(radius) + 1
    taps = np.arange(width)
    weights = np.exp(-(taps**2) / (2 * sigma**2))
    weights /= weights.sum()
    keep = weights >= 1e-4
    taps, weights = taps[keep], weights[keep] / weights[keep].sum()
    angles = np.deg2rad(np.asarray(angles_deg, dtype=np.float64))
    rows = np.arange(h)[None, :, None]
    cols = np.arange(w)[None, None, :]
    batch = np.arange(n)[:, None, None]
    out = np.zeros_like(x)
    for tap, weight in zip(taps, weights, strict=True):
        d_col = np.rint(tap * np.cos(angles)).astype(np.int64)[:, None, None]
        d_row = np.rint(tap * np.sin(angles)).astype(np.int64)[:, None, None]
        out += np.float32(weight) * x[batch, np.clip(rows + d_row, 0, h - 1), np.clip(cols + d_col, 0, w - 1)]
    return out


def _zoom_axis_coords(size: int, zoom: float) -> np.ndarray:
    """Source coordinates of a centre crop zoomed by `zoom` and trimmed back to `size`.

    This is scipy.ndimage.zoom (order 1, corners aligned) of the central ceil(size/zoom)
    crop, then the central `size` pixels of the result, written as coordinates into the
    uncropped axis so it can run as one separable linear interpolation.
    """
    crop = int(math.ceil(size / zoom))
    top = (size - crop) // 2
    zoomed = int(round(crop * zoom))
    trim = (zoomed - size) // 2
    out = np.arange(trim, trim + size, dtype=np.float64)
    scale = (crop - 1) / (zoomed - 1) if zoomed > 1 else 0.0
    return top + out * scale


def _interp_axis(x: np.ndarray, coords: np.ndarray, axis: int) -> np.ndarray:
    lo = np.clip(np.floor(coords).astype(np.int64), 0, x.shape[axis] - 1)
    hi = np.clip(lo + 1, 0, x.shape[axis] - 1)
    frac = (coords - np.floor(coords)).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = len(coords)
    frac = frac.reshape(shape)
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


def clipped_zoom(x: np.ndarray, zoom: float) -> np.ndarray:
    """Zoom every image of (N, H, W, C) into its centre by `zoom` >= 1, keeping H x W."""
    _, h, w, _ = x.shape
    x = _interp_axis(x, _zoom_axis_coords(h, zoom), axis=1)
    return _interp_axis(x, _zoom_axis_coords(w, zoom), axis=2)


def plasma_fractal(rng: np.random.Generator, count: int, mapsize: int, decay: float) -> np.ndarray:
    """`count` diamond-square (plasma) fractals of mapsize x mapsize in [0, 1], at once.

    The map is periodic (neighbours wrap around), it starts from 0 in the corner, and at
    each halving of the step the random displacement amplitude `wibble` is divided by
    `decay`: a larger decay gives a smoother fog.
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
        left_right = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2)
        grid[:, 0:mapsize:step, half:mapsize:step] = wibbled_mean(left_right)
        up_down = centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1)
        grid[:, half:mapsize:step, 0:mapsize:step] = wibbled_mean(up_down)
        step //= 2
        wibble /= decay
    grid -= grid.min(axis=(1, 2), keepdims=True)
    grid /= np.maximum(grid.max(axis=(1, 2), keepdims=True), 1e-12)
    return grid.astype(np.float32)


def shift_value(x: np.ndarray, delta: float) -> np.ndarray:
    """Add `delta` to the HSV value (clipped to [0, 1]) keeping hue and saturation.

    With hue and saturation fixed every channel is proportional to the value V = max(R, G, B),
    so the HSV round trip reduces to scaling by V'/V (black, V = 0, becomes grey V').
    """
    value = x.max(axis=-1, keepdims=True)
    new_value = np.clip(value + delta, 0.0, 1.0)
    safe = np.where(value > 0, value, 1.0)
    return np.where(value > 0, x * (new_value / safe), new_value)


def scale_saturation(x: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """Set the HSV saturation S to clip(S * scale + shift, 0, 1) keeping hue and value.

    With hue and value fixed, V - channel is proportional to S, so each channel moves to
    V - (V - channel) * S'/S. A grey pixel (S = 0) has hue 0 by convention, i.e. red:
    it becomes (V, V(1 - S'), V(1 - S')), as an HSV round trip would make it.
    """
    value = x.max(axis=-1, keepdims=True)
    spread = value - x.min(axis=-1, keepdims=True)
    safe_value = np.where(value > 0, value, 1.0)
    saturation = np.where(value > 0, spread / safe_value, 0.0)
    new_saturation = np.clip(saturation * scale + shift, 0.0, 1.0)
    ratio = new_saturation / np.where(saturation > 0, saturation, 1.0)
    coloured = value - (value - x) * ratio
    grey = value * np.concatenate([np.ones_like(value), 1 - new_saturation, 1 - new_saturation], axis=-1)
    return np.where(saturation > 0, coloured, grey).astype(np.float32)


def rgb_to_gray(x: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma (OpenCV's RGB2GRAY), shape (N, H, W, 1)."""
    return (x @ np.array([0.299, 0.587, 0.114], dtype=np.float32))[..., None]
