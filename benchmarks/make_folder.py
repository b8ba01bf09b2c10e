"""Not speed: a small image folder of your own kind, for the own-data measurements (docs/results-own-data.md).

    python benchmarks/make_folder.py runs/shapes400                      # 10 classes x 40 training images, 32x32
    python benchmarks/make_folder.py runs/shapes2000 --per-class 200

Each class is one shape (circle, square, triangle, cross, bar) in one colour (10 pairs), drawn at a random place
and size on a noisy grey ground, so a design must look at the shape and the colour: what issue 58's 400-image folder
was. Writes an ImageFolder tree, `OUT/train/CLASS/*.png` and `OUT/val/CLASS/*.png` (`--test-per-class` images a
class; archdsl reads `val/` as the test split: `archdsl search --dataset folder:OUT`). Seeded: the same images on
every machine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from script_args import output_folder, positive_int

from archdsl.errors import UserError, visible_lines

SHAPES = ("circle", "square", "triangle", "cross", "bar")
COLOURS = ((220, 40, 40), (40, 170, 60), (50, 80, 220), (230, 200, 40), (170, 60, 200))
# 10 classes: each shape in two colours, no two classes alike in both
CLASSES = tuple((SHAPES[k % 5], COLOURS[(k + k // 5 * 2) % 5]) for k in range(10))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (train/ and val/ under it)")
    parser.add_argument("--per-class", type=positive_int, default=40, help="training images a class (40: 400 in all)")
    parser.add_argument("--test-per-class", type=positive_int, default=20, help="test images a class, under val/")
    parser.add_argument("--size", type=positive_int, default=32, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    output_folder(str(args.out), "OUT")
    return args


def draw(shape: str, colour: tuple[int, int, int], size: int, rng: np.random.Generator):
    """One image: `shape` in `colour` at a random place and size on a noisy grey ground."""
    from PIL import Image, ImageDraw

    ground = rng.integers(90, 150, size=(size, size, 3), dtype=np.uint8)
    image = Image.fromarray(ground)
    pen = ImageDraw.Draw(image)
    side = int(rng.integers(size // 3, size * 2 // 3 + 1))
    x, y = (int(v) for v in rng.integers(0, size - side + 1, size=2))
    box = (x, y, x + side - 1, y + side - 1)
    fill = tuple(int(np.clip(c + rng.integers(-25, 26), 0, 255)) for c in colour)
    if shape == "circle":
        pen.ellipse(box, fill=fill)
    elif shape == "square":
        pen.rectangle(box, fill=fill)
    elif shape == "triangle":
        pen.polygon([(x + side // 2, y), (x, y + side - 1), (x + side - 1, y + side - 1)], fill=fill)
    elif shape == "cross":
        third = max(1, side // 3)
        pen.rectangle((x + third, y, x + 2 * third, y + side - 1), fill=fill)
        pen.rectangle((x, y + third, x + side - 1, y + 2 * third), fill=fill)
    else:  # a bar, across
        pen.rectangle((x, y + side // 3, x + side - 1, y + 2 * side // 3), fill=fill)
    return image


def write(out: Path, per_class: int, test_per_class: int, size: int, seed: int) -> int:
    """Write the tree; the number of images written."""
    rng = np.random.default_rng(seed)
    written = 0
    for split, count in (("train", per_class), ("val", test_per_class)):
        for index, (shape, colour) in enumerate(CLASSES):
            folder = out / split / f"{index:02d}-{shape}"
            folder.mkdir(parents=True, exist_ok=True)
            for k in range(count):
                draw(shape, colour, size, rng).save(folder / f"{k:04d}.png")
                written += 1
    return written


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except UserError as err:
        print(visible_lines(f"archdsl: error: {err}"), file=sys.stderr)
        return err.exit_code
    written = write(args.out, args.per_class, args.test_per_class, args.size, args.seed)
    print(f"{written} images under {args.out} ({len(CLASSES)} classes; --dataset folder:{args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
