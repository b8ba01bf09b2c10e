"""The built-in relational dataset: which colour is the odd one out? 16x16 RGB images, generated from a seed.

Each image holds three small objects far apart from each other: two share a colour, the third has
another, and the class is the colour of that odd one (one class per colour). No single object tells
the class: an object's colour says only that it may be the odd one, and a network must compare the
objects' colours across the image. That makes the task a test of where MSAs go:

- a network that pools features of one object at a time and classifies their sum linearly cannot
  learn it: with counts of each colour as the features (2 of the pair's colour, 1 of the odd one's),
  no linear classifier, biases included, names the odd colour of every image. Averaged over the
  relabellings of the colours (the task does not change under them, and the weights that succeed
  form a convex set), its weights would become a on a colour's own count and b on every other
  colour's, and those would need b > a (the odd colour's score 2b + a above the pair colour's 2a + b)
  and a > b (above the 3b of a colour not in the image). The same holds for any features of one
  object each, summed. A CNN pools (global average pooling) before its classifier, so it must learn
  the comparison in its convolutions, whose kernels see a piece of the map at a time;
- an MSA whose window holds the whole map (the last stage of `alter-small-base` on 16x16 images: a
  4x4 map, window 4) mixes every object into every position in one step, and the ReLU after it can
  compare. MSAs with windows of a quarter of their map (the earlier stages) see one object at a time,
  like a convolution.

So the placement of MSAs can matter here, where on the `synthetic` shapes (one object, whose shape,
texture and colour name its class) it does not (docs/data.md). Nuisance in every image: the objects'
shapes (disk, square, diamond, cross), sizes, rotations and exact hues, the background's colour, and
pixel noise. The objects stay whole in the frame, and training on this set leaves out random crops
(`TRAINING_DEFAULTS`): a crop of a 16x16 image by 4 pixels would cut the odd one out of some images
and so mislabel them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from archdsl.data import synthetic
from archdsl.data._cache import MiB, byte_bounded_cache
from archdsl.data.synthetic import (
    GeneratorConfig,
    balanced_labels,
    hsv_to_rgb,
    rendered_in_chunks,
    signed_distance,
)

IMAGE_SIZE = 16
OBJECTS = 3  # two of one colour, one of another
SHAPES = ("disk", "square", "diamond", "cross")
RADIUS = (0.17, 0.20)  # of the image side: about 3 pixels
MIN_DISTANCE = 0.43  # between two objects' centres, of the image side (6.9 pixels)
MARGIN = 0.215  # of the image side between a centre and the border: every object whole in the frame
POOL = 128  # layouts drawn per image still missing one (_centres): about a sixth fit, so a few dozen rounds
HUE_JITTER = 0.01  # a tenth of the spacing of 10 colours: colours stay apart

# The options' limits: colours (classes) from 3 (with 2 the odd colour is the one seen less, which a
# linear classifier of colour counts finds) to 12 (hues 0.08 apart, still distinct at this size);
# split sizes and seeds as the synthetic set's.
LIMITS = {**synthetic.LIMITS, "classes": (3, 12)}


# TrainConfig fields that training on this set takes unless the user sets them (archdsl.data.training_defaults):
# no crop (above), and AdamW with a warm-up epoch over the recipe's optimiser: seeds that stall with colours
# merged (2/3 accuracy) were seen with the `fast` recipe's Nesterov SGD, and fewer with AdamW (docs/data.md).
TRAINING_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"crop_padding": 0, "optimizer": "adamw", "lr": 2e-3, "weight_decay": 0.05, "warmup_epochs": 1, "batch_size": 64}
)


@dataclass(frozen=True)
class OddOneOutConfig(GeneratorConfig):
    """The options of `odd-one-out:classes=C,train=N,test=N,seed=S`: colours (= classes) and images per split."""

    LIMITS: ClassVar[Mapping[str, tuple[int, int]]] = LIMITS
    # 12 colours and 2,000 training images by default: a task on which the search's designs differ at the end
    # of training (docs/data.md); with 6 colours the ResNet learns the relation too.
    classes: int = 12  # colours: COLOUR_NAMES[12]
    train: int = 2000
    test: int = 1000


COLOUR_NAMES = {  # the hue of colour k is k / classes: names for 6 and the default 12 (others are numbered)
    6: ("red", "yellow", "green", "cyan", "blue", "magenta"),
    12: ("red", "orange", "yellow", "chartreuse", "green", "spring green", "cyan", "azure", "blue", "violet")
    + ("magenta", "rose"),
}


def class_names(classes: int) -> tuple[str, ...]:
    """The class names: the odd object's colour."""
    return COLOUR_NAMES.get(classes, tuple(f"hue{k}" for k in range(classes)))


def _centres(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, OBJECTS, 2) object centres (row, column) in pixels, uniform over the layouts whose centres are
    all MIN_DISTANCE apart. About 1 draw in 800 is such a layout (the objects end near three of the four
    corners of the square the centres may take), so they are drawn in pools of POOL per image still
    missing one, and the first layouts that fit are kept: a few dozen rounds, from one random stream."""
    low, high = MARGIN * IMAGE_SIZE, (1 - MARGIN) * IMAGE_SIZE - 1
    kept: list[np.ndarray] = []
    missing = n
    while missing:
        pool = rng.uniform(low, high, (POOL * missing, OBJECTS, 2))
        apart = np.ones(len(pool), dtype=bool)
        for i, j in combinations(range(OBJECTS), 2):
            apart &= np.hypot(*(pool[:, i] - pool[:, j]).T) >= MIN_DISTANCE * IMAGE_SIZE
        found = pool[apart][:missing]
        kept.append(found)
        missing -= len(found)
    return np.concatenate(kept)


def render(labels: np.ndarray, classes: int, rng: np.random.Generator) -> np.ndarray:
    """Draw one image per label (the odd object's colour): uint8 (N, 16, 16, 3)."""
    n, size = len(labels), IMAGE_SIZE
    centres = _centres(n, rng)
    pair = (labels + rng.integers(1, classes, n)) % classes  # the shared colour: any other than the odd one
    colours = np.repeat(pair[:, None], OBJECTS, axis=1)
    colours[np.arange(n), rng.integers(0, OBJECTS, n)] = labels  # the odd one, at a random place
    radius = (rng.uniform(*RADIUS, (n, OBJECTS)) * size).astype(np.float32)
    shapes = rng.integers(0, len(SHAPES), (n, OBJECTS))
    angle = rng.uniform(0, 2 * np.pi, (n, OBJECTS)).astype(np.float32)

    rows, cols = np.meshgrid(np.arange(size, dtype=np.float32), np.arange(size, dtype=np.float32), indexing="ij")
    background = hsv_to_rgb(rng.uniform(0, 1, n), rng.uniform(0, 0.3, n), rng.uniform(0.15, 0.5, n))
    image = np.repeat(np.repeat(background.astype(np.float32)[:, None, None, :], size, 1), size, 2)
    for k in range(OBJECTS):
        scale = radius[:, k, None, None]
        dy = (rows[None] - centres[:, k, 0, None, None].astype(np.float32)) / scale
        dx = (cols[None] - centres[:, k, 1, None, None].astype(np.float32)) / scale
        cos, sin = np.cos(angle[:, k])[:, None, None], np.sin(angle[:, k])[:, None, None]
        u, v = cos * dx + sin * dy, -sin * dx + cos * dy
        inside = np.zeros((n, size, size), dtype=np.float32)
        for s, shape in enumerate(SHAPES):
            members = shapes[:, k] == s
            if members.any():  # anti-aliased: a one-pixel ramp across the edge
                inside[members] = np.clip(0.5 - signed_distance(shape, u[members], v[members]) * scale[members], 0, 1)
        hue = (colours[:, k] / classes + rng.normal(0, HUE_JITTER, n)) % 1.0
        colour = hsv_to_rgb(hue, rng.uniform(0.8, 1.0, n), rng.uniform(0.85, 1.0, n)).astype(np.float32)
        image += inside[..., None] * (colour[:, None, None, :] - image)
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(0.03)
    np.clip(image, 0, 1, out=image)
    return np.rint(image * 255).astype(np.uint8)


@byte_bounded_cache(64 * MiB)
def generate(config: OddOneOutConfig, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 16, 16, 3), labels int64) of one split; cached, read-only."""
    count = config.train if split == "train" else config.test
    # One independent stream per split (as synthetic's), so the test set does not change with the train size.
    rng = np.random.default_rng([config.seed, 0 if split == "train" else 1])
    labels = balanced_labels(count, config.classes, rng)
    images = rendered_in_chunks(labels, (IMAGE_SIZE, IMAGE_SIZE, 3), lambda part: render(part, config.classes, rng))
    return images, labels
