"""Procedural frost textures, standing in for the photographs of Hendrycks' generator.

The original frost corruption blends a random 32x32 crop of one of six photographs of
frosted glass (shown at 0.2 scale) into the image. archdsl downloads nothing, so it draws
its own: an icy haze from a plasma fractal, then many thin crystal needles (straight
segments that fork into side branches) rasterised and softened, tinted blue-white. The
textures are made once per seed and cached; crops come from them as from the photographs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import ndimage

from archdsl.data._image_ops import plasma_fractal

TEXTURE_SIZE = 128
TEXTURE_COUNT = 6
# Blue-white, as frost on glass photographs: the blue channel is the brightest.
_TINT = np.array([0.80, 0.90, 1.00], dtype=np.float32)


def _needles(rng: np.random.Generator, size: int, count: int) -> np.ndarray:
    """Rasterise `count` crystal needles, each with two forked side branches."""
    starts = rng.uniform(0, size, (count, 2))
    angles = rng.uniform(0, 2 * np.pi, count)
    lengths = rng.uniform(4, 18, count)
    segments = [(starts, angles, lengths)]
    # Side branches leave the needle at +-(40..70) degrees from a point along it.
    for sign in (-1, 1):
        along = rng.uniform(0.2, 0.8, count)[:, None]
        fork = starts + along * lengths[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        segments.append((fork, angles + sign * rng.uniform(0.7, 1.2, count), lengths * rng.uniform(0.3, 0.6, count)))
    canvas = np.zeros((size, size), dtype=np.float32)
    steps = np.linspace(0.0, 1.0, 24)
    for origin, angle, length in segments:
        brightness = rng.uniform(0.4, 1.0, len(origin))
        direction = np.stack([np.cos(angle), np.sin(angle)], axis=1) * length[:, None]
        points = origin[:, None, :] + steps[None, :, None] * direction[:, None, :]
        rows = np.rint(points[..., 0]).astype(np.int64) % size  # the texture tiles
        cols = np.rint(points[..., 1]).astype(np.int64) % size
        np.maximum.at(canvas, (rows.ravel(), cols.ravel()), np.repeat(brightness, len(steps)))
    # Soften to anti-aliased lines; x1.6 brings a lone line's centre back to its brightness.
    return np.clip(ndimage.gaussian_filter(canvas, 0.6, mode="wrap") * 1.6, 0.0, 1.0)


@lru_cache(maxsize=4)
def frost_textures(seed: int = 0) -> np.ndarray:
    """TEXTURE_COUNT RGB textures of TEXTURE_SIZE^2 in [0, 1], float32 (T, S, S, 3)."""
    rng = np.random.default_rng([seed, 0xF2057])
    haze = plasma_fractal(rng, TEXTURE_COUNT, TEXTURE_SIZE, decay=1.8)
    textures = []
    for index in range(TEXTURE_COUNT):
        density = 120 + 40 * index  # from sparse to dense frost, as the photographs vary
        crystals = _needles(rng, TEXTURE_SIZE, density)
        intensity = np.clip(0.1 + 0.35 * haze[index] + 0.7 * crystals, 0.0, 1.0)
        textures.append(intensity[..., None] * _TINT)
    out = np.stack(textures).astype(np.float32)
    out.setflags(write=False)
    return out


def frost_crops(rng: np.random.Generator, count: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """A random crop of a random texture for each of `count` images: (count, H, W, 3)."""
    textures = frost_textures(seed)
    which = rng.integers(0, len(textures), count)
    top = rng.integers(0, TEXTURE_SIZE - height + 1, count)
    left = rng.integers(0, TEXTURE_SIZE - width + 1, count)
    rows = top[:, None, None] + np.arange(height)[None, :, None]
    cols = left[:, None, None] + np.arange(width)[None, None, :]
    return textures[which[:, None, None], rows, cols]
