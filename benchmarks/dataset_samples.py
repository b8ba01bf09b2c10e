"""Not speed: a grid of sample images of a built-in generated dataset, a row per class (docs/data.md's figures).

    python benchmarks/dataset_samples.py --figures docs/figures                  # the docs' odd-one-out figure
    python benchmarks/dataset_samples.py --dataset synthetic:classes=6 --per-class 6

Writes `<base name>-samples.png` under --figures (runs/dataset-samples unless given: a trial run leaves the
shipped figure alone): the first --per-class training images of each class, drawn pixel for pixel
(nearest-neighbour), each row named by its class.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from archdsl.data import load_split
from archdsl.files import save_figure


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="odd-one-out:train=400,test=10", help="a generated dataset's name")
    parser.add_argument("--per-class", type=int, default=8, help="images in each row")
    parser.add_argument(
        "--figures", default="runs/dataset-samples", help="where the figure goes (the docs': --figures docs/figures)"
    )
    return parser.parse_args()


def samples(labels: np.ndarray, classes: int, per_class: int) -> np.ndarray:
    """(classes, per_class) indices of the first images of each class, in order."""
    return np.stack([np.flatnonzero(labels == k)[:per_class] for k in range(classes)])


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = parse_args()
    train = load_split(args.dataset, "train")
    picked = samples(train.labels, train.num_classes, args.per_class)
    rows, columns = picked.shape
    figure, axes = plt.subplots(rows, columns, figsize=(columns * 0.8 + 0.9, rows * 0.8), squeeze=False)
    for row, indices in enumerate(picked):
        for column, index in enumerate(indices):
            axis = axes[row][column]
            axis.imshow(train.images[index], interpolation="nearest")
            axis.set_xticks([])
            axis.set_yticks([])
        axes[row][0].set_ylabel(train.class_names[row], rotation=0, ha="right", va="center")
    figure.tight_layout(pad=0.3)
    base = args.dataset.partition(":")[0]
    path = save_figure(figure, Path(args.figures) / f"{base}-samples.png", dpi=80)
    print(f"wrote {path}: {rows} classes x {columns} images of {train.name}")


if __name__ == "__main__":
    main()
