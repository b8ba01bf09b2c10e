"""CIFAR-10 and CIFAR-100 through torchvision, with errors a user can act on.

torchvision's CIFAR10/CIFAR100 classes read the official "python version" files. They
check the MD5 of every file before loading; archdsl checks only that the files are there
(so that small files in the same format work, as in the tests) and offers the MD5 check
separately (`official_checksums`, shown by `archdsl data info`). Note that these files are
Python pickles, and torchvision unpickles them: only use copies from the official source.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archdsl.data.base import ImageSet
from archdsl.errors import UserError


@dataclass(frozen=True)
class CifarSpec:
    name: str
    title: str
    num_classes: int
    train_size: int
    test_size: int
    # Per-channel statistics of the full training set, images scaled to [0, 1].
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


CIFAR10 = CifarSpec("cifar10", "CIFAR-10", 10, 50000, 10000, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100 = CifarSpec("cifar100", "CIFAR-100", 100, 50000, 10000, (0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))
SPECS = {spec.name: spec for spec in (CIFAR10, CIFAR100)}


def _torchvision_class(spec: CifarSpec):
    from torchvision.datasets import CIFAR10 as TorchCIFAR10
    from torchvision.datasets import CIFAR100 as TorchCIFAR100

    return TorchCIFAR10 if spec.name == "cifar10" else TorchCIFAR100


def _presence_only(cls):
    """The torchvision class with its per-file MD5s dropped (None means "exists" to
    torchvision's check_integrity); the download archive's MD5 is still checked."""
    return type(
        f"Unchecked{cls.__name__}",
        (cls,),
        {
            "train_list": [[name, None] for name, _ in cls.train_list],
            "test_list": [[name, None] for name, _ in cls.test_list],
            "meta": {**cls.meta, "md5": None},
        },
    )


def expected_files(spec: CifarSpec, root: Path) -> list[Path]:
    cls = _torchvision_class(spec)
    folder = root / cls.base_folder
    names = [name for name, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    return [folder / name for name in names]


def official_checksums(spec: CifarSpec, root: Path) -> bool:
    """Whether every file has the MD5 of the official release (reads the files)."""
    from torchvision.datasets.utils import check_integrity

    cls = _torchvision_class(spec)
    folder = root / cls.base_folder
    pairs = cls.train_list + cls.test_list + [[cls.meta["filename"], cls.meta["md5"]]]
    return all(check_integrity(str(folder / name), md5) for name, md5 in pairs)


def matches_official_release(name: str, root: str | os.PathLike[str] | None = None) -> bool:
    """Whether the files of `name` (cifar10 or cifar100) under the data root `root` have the MD5s
    of the official release (reads every file; `archdsl data info --checksums`)."""
    from archdsl.data._names import resolve_data_root

    if name not in SPECS:
        raise UserError(f"only CIFAR files have official checksums, not {name!r}", hint="give cifar10 or cifar100")
    return official_checksums(SPECS[name], resolve_data_root(root))


def _download(spec: CifarSpec, root: Path) -> None:
    cls = _presence_only(_torchvision_class(spec))
    try:
        root.mkdir(parents=True, exist_ok=True)
        cls(str(root), train=False, download=True)
    except (OSError, RuntimeError) as err:  # no network (URLError is an OSError), bad archive
        raise UserError(
            f"could not download {spec.title} into {root}: {err}",
            hint=f"fetch {_torchvision_class(spec).url} yourself and unpack it under {root}",
        ) from None


def load_cifar(spec: CifarSpec, split: str, root: Path, download: bool = False) -> ImageSet:
    cls = _torchvision_class(spec)
    if download:
        _download(spec, root)
    missing = [path for path in expected_files(spec, root) if not path.is_file()]
    if missing:
        folder = root / cls.base_folder
        raise UserError(
            f"{spec.title} not found: missing {', '.join(str(path) for path in missing)}",
            hint=(
                f"unpack the python version ({cls.url}) under {root}, so that {folder}/ holds "
                f"{', '.join(path.name for path in expected_files(spec, root))}; or pass --download "
                f"(download=True); or choose another --data-root or $ARCHDSL_DATA"
            ),
        )
    try:
        dataset = _presence_only(cls)(str(root), train=split == "train", download=False)
        images = np.asarray(dataset.data)
        labels = np.asarray(dataset.targets)
        class_names = tuple(str(name) for name in dataset.classes)
    except (
        pickle.UnpicklingError,
        EOFError,
        KeyError,
        ValueError,
        TypeError,
        IndexError,
        AttributeError,
        UnicodeDecodeError,
        RuntimeError,
        OSError,
    ) as err:
        raise UserError(
            f"could not read {spec.title} from {root / cls.base_folder}: a file is truncated or is not "
            f"the python version of the dataset ({type(err).__name__}: {err})",
            hint=f"unpack {cls.url} again",
        ) from None
    _check_arrays(spec, root / cls.base_folder, images, labels, class_names)
    return ImageSet(
        name=spec.name if split == "train" else f"{spec.name}-test",
        images=np.ascontiguousarray(images),
        labels=labels.astype(np.int64),
        num_classes=spec.num_classes,
        mean=spec.mean,
        std=spec.std,
        class_names=class_names,
    )


def _check_arrays(spec: CifarSpec, folder: Path, images, labels, class_names) -> None:
    problem = None
    if images.dtype != np.uint8 or images.shape[1:] != (32, 32, 3):
        problem = f"images are {images.dtype} {images.shape[1:]}, expected uint8 rows of 3072 bytes"
    elif labels.ndim != 1 or len(labels) != len(images):
        problem = f"{len(images)} images but {labels.size} labels"
    elif labels.size == 0:
        problem = "the split holds no images"
    elif not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() >= spec.num_classes:
        problem = f"labels must be integers in 0..{spec.num_classes - 1}"
    elif len(class_names) != spec.num_classes:
        problem = f"the meta file names {len(class_names)} classes, expected {spec.num_classes}"
    if problem:
        raise UserError(f"{spec.title} in {folder} is not in the expected format: {problem}")
