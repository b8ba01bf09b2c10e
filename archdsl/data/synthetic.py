"""The built-in dataset: 32x32 RGB shapes, generated from a seed, needing no download.

Each class is a combination of three cues, so that models biased towards shape, towards
texture or towards colour can all learn it, and differ in how:
- shape: one of ten silhouettes (disk, square, triangle, ring, cross, diamond, star,
  ellipse, hexagon, crescent), drawn anti-aliased from a signed distance;
- texture: stripes, a checkerboard or concentric rings at one of three frequencies,
  painted in the object's own frame (it turns and scales with the object);
- colour: a hue spread evenly round the colour wheel.
With more classes than silhouettes or textures the cues repeat, but never all three
together. Every image adds nuisance: position, scale, rotation, a background of random
colour with a gradient, hue and saturation jitter and pixel noise. Everything is vectorised over
the images; the default 5,000 + 1,000 images take about half a second on one core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from archdsl.data._cache import MiB, byte_bounded_cache

SHAPES = ("disk", "square", "triangle", "ring", "cross", "diamond", "star", "ellipse", "hexagon", "crescent")
TEXTURES = ("stripes", "checker", "rings")
FREQUENCIES = (1.2, 2.0, 3.0)  # cycles per object radius (about 11 px at scale 1)
IMAGE_SIZE = 32
OBJECT_RADIUS_PX = 11.0
HUE_JITTER = 0.05


# The options' limits (docs/data.md). A split is held in memory as uint8 (3 KiB an image):
# 100,000 training images are 0.3 GB, twice CIFAR's 50,000. A test set is also corrupted
# into up to 75 sets that stay in memory, so it stops at CIFAR's 10,000 (2.3 GB in all).
LIMITS = {"classes": (2, 1000), "train": (1, 100_000), "test": (1, 10_000), "seed": (0, 2**32 - 1)}
CHUNK = 5000  # images rendered at once: the working set stays near 0.5 GB whatever the split's size


@dataclass(frozen=True)
class GeneratorConfig:
    """A generated dataset's options (integers, each checked against LIMITS when the config is made:
    a ValueError, which the registry reports as the user's mistake). Its fields are the options of
    its dataset name, their defaults the name's: every generator has these four (the registry reads
    them), and a subclass gives their defaults and may add more."""

    LIMITS: ClassVar[Mapping[str, tuple[int, int]]] = {}
    classes: int
    train: int
    test: int
    seed: int = 0  # every generator's first stream

    def __post_init__(self) -> None:
        for key, (low, high) in self.LIMITS.items():
            value = getattr(self, key)
            if not low <= value <= high:
                raise ValueError(f"{key} must be between {low} and {high}, got {value}")

    @classmethod
    def options(cls) -> tuple[str, ...]:
        """The options a dataset name may set: the config's fields."""
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class SyntheticConfig(GeneratorConfig):
    """The options of `synthetic:classes=C,train=N,test=N,seed=S`."""

    LIMITS: ClassVar[Mapping[str, tuple[int, int]]] = LIMITS
    classes: int = 10
    train: int = 5000
    test: int = 1000


@dataclass(frozen=True)
class ClassCues:
    shape: str
    texture: str
    frequency: float
    hue: float

    @property
    def name(self) -> str:
        return f"{self.shape}-{self.texture}{FREQUENCIES.index(self.frequency) + 1}"


def class_cues(classes: int) -> tuple[ClassCues, ...]:
    """The shape, texture, frequency and hue of each class (fixed: independent of the seed)."""
    cues = []
    for k in range(classes):
        texture = k % len(TEXTURES)
        frequency = (k // len(TEXTURES) + k) % len(FREQUENCIES)
        cues.append(ClassCues(SHAPES[k % len(SHAPES)], TEXTURES[texture], FREQUENCIES[frequency], k / classes))
    return tuple(cues)


def class_names(classes: int) -> tuple[str, ...]:
    """The class names: each class's silhouette and texture (`disk-stripes1`)."""
    return tuple(cue.name for cue in class_cues(classes))


def signed_distance(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Approximate signed distance (object radius units, negative inside) of a silhouette."""
    r = np.hypot(u, v)
    if shape == "disk":
        return r - 0.8
    if shape == "square":
        return np.maximum(np.abs(u), np.abs(v)) - 0.65
    if shape in ("triangle", "hexagon"):
        sides, size = (3, 0.45) if shape == "triangle" else (6, 0.72)
        angles = np.pi / 2 + 2 * np.pi * np.arange(sides) / sides
        return np.max([u * np.cos(a) + v * np.sin(a) for a in angles], axis=0) - size
    if shape == "ring":
        return np.abs(r - 0.62) - 0.24
    if shape == "cross":
        return np.minimum(
            np.maximum(np.abs(u) - 0.27, np.abs(v) - 0.85), np.maximum(np.abs(u) - 0.85, np.abs(v) - 0.27)
        )
    if shape == "diamond":
        return (np.abs(u) + np.abs(v) - 0.9) / np.sqrt(2)
    if shape == "star":
        return r - (0.58 + 0.3 * np.cos(5 * np.arctan2(v, u)))
    if shape == "ellipse":
        return np.hypot(u / 0.95, v / 0.45) * 0.45 - 0.45
    if shape == "crescent":
        return np.maximum(r - 0.85, 0.6 - np.hypot(u - 0.4, v))
    raise ValueError(shape)


def _texture(kind: str, frequency: float, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A pattern in [0, 1] in the object's frame."""
    phase = 2 * np.pi * frequency
    if kind == "stripes":
        return 0.5 + 0.5 * np.sin(phase * u)
    if kind == "checker":
        return 0.5 + 0.5 * np.sign(np.sin(phase * u) * np.sin(phase * v)) * 0.9
    return 0.5 + 0.5 * np.sin(phase * np.hypot(u, v))


def hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectorised HSV -> RGB for arrays of equal shape; returns shape + (3,)."""
    k = (np.array([5.0, 3.0, 1.0]) + (h[..., None] * 6.0)) % 6.0
    return v[..., None] - v[..., None] * s[..., None] * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def render(labels: np.ndarray, cues: tuple[ClassCues, ...], rng: np.random.Generator) -> np.ndarray:
    """Draw one image per label: uint8 (N, 32, 32, 3)."""
    n = len(labels)
    size = IMAGE_SIZE
    centre = (size - 1) / 2 + rng.uniform(-5, 5, (n, 2))
    scale = rng.uniform(0.75, 1.1, n) * OBJECT_RADIUS_PX
    angle = rng.uniform(0, 2 * np.pi, n)
    # float32 throughout: half the memory traffic of float64, and plenty for 8-bit images.
    rows, cols = np.meshgrid(np.arange(size, dtype=np.float32), np.arange(size, dtype=np.float32), indexing="ij")
    inv_scale = (1 / scale).astype(np.float32)[:, None, None]
    dy = (rows[None] - centre[:, 0, None, None].astype(np.float32)) * inv_scale
    dx = (cols[None] - centre[:, 1, None, None].astype(np.float32)) * inv_scale
    cos, sin = np.cos(angle).astype(np.float32)[:, None, None], np.sin(angle).astype(np.float32)[:, None, None]
    u, v = cos * dx + sin * dy, -sin * dx + cos * dy

    inside = np.empty((n, size, size), dtype=np.float32)
    pattern = np.empty((n, size, size), dtype=np.float32)
    for k, cue in enumerate(cues):
        members = labels == k
        if not members.any():
            continue
        sdf = signed_distance(cue.shape, u[members], v[members])
        # Anti-aliasing: a one-pixel ramp across the edge.
        inside[members] = np.clip(0.5 - sdf * scale[members, None, None], 0.0, 1.0)
        pattern[members] = _texture(cue.texture, cue.frequency, u[members], v[members])

    # Hue jitter of half the spacing of 10 classes: colour alone identifies a class only
    # in part, so shape and texture are needed too.
    hues = np.array([cue.hue for cue in cues])[labels] + rng.normal(0, HUE_JITTER, n)
    colour = hsv_to_rgb(hues % 1.0, rng.uniform(0.5, 0.9, n), rng.uniform(0.8, 1.0, n)).astype(np.float32)
    shade = (0.45 + 0.55 * pattern)[..., None]
    foreground = colour[:, None, None, :] * shade

    bg_colour = hsv_to_rgb(rng.uniform(0, 1, n), rng.uniform(0, 0.35, n), rng.uniform(0.2, 0.8, n))
    bg_angle = rng.uniform(0, 2 * np.pi, n)
    tilt = rng.uniform(0, 0.3, n).astype(np.float32)[:, None, None] / size
    gradient = (
        np.cos(bg_angle).astype(np.float32)[:, None, None] * cols
        + np.sin(bg_angle).astype(np.float32)[:, None, None] * rows
    ) * tilt
    background = bg_colour.astype(np.float32)[:, None, None, :] + gradient[..., None]

    alpha = inside[..., None]
    image = background + alpha * (foreground - background)
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(0.03)
    np.clip(image, 0, 1, out=image)
    return np.rint(image * 255).astype(np.uint8)


def balanced_labels(count: int, classes: int, rng: np.random.Generator) -> np.ndarray:
    """Labels 0..classes-1 in equal shares (counts differ by at most one), shuffled."""
    return rng.permutation(np.arange(count) % classes).astype(np.int64)


@byte_bounded_cache(256 * MiB)
def generate(config: SyntheticConfig, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 32, 32, 3), labels int64) of one split; cached, read-only."""
    count = config.train if split == "train" else config.test
    # One independent stream per split, so the test set does not change with the train size.
    rng = np.random.default_rng([config.seed, 0 if split == "train" else 1])
    labels = balanced_labels(count, config.classes, rng)
    cues = class_cues(config.classes)
    images = rendered_in_chunks(labels, (IMAGE_SIZE, IMAGE_SIZE, 3), lambda part: render(part, cues, rng))
    return images, labels


def rendered_in_chunks(
    labels: np.ndarray, image_shape: tuple[int, int, int], render: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """`render(labels)` (uint8 images, one per label) made CHUNK labels at a time, in order (a renderer
    drawing from one random stream makes exactly one call's images up to CHUNK). Each chunk goes
    straight into the split's array (concatenating a list of them would hold the split twice). The
    images and the labels are made read-only: a generated split is cached and shared."""
    images = np.empty((len(labels), *image_shape), dtype=np.uint8)
    for start in range(0, len(labels), CHUNK):
        images[start : start + CHUNK] = render(labels[start : start + CHUNK])
    images.setflags(write=False)
    labels.setflags(write=False)
    return images
