"""Hugging Face datasets: `--dataset hf:NAME[:CONFIG][,image=COL,label=COL,size=N,train=N,test=N]`.

NAME is a folder written by `datasets`' `save_to_disk` (read with `load_from_disk`), or the name
of a dataset already in the local Hugging Face cache (`load_dataset`, with the hub switched off:
archdsl never downloads it). The training split is `train`; the test split is `validation` if
there is one, else `test` (ImageNet's `test` has no labels). The image column is the one of
type `Image` (or `image=`), the label column the one of type `ClassLabel`, else `label`
(or `label=`); its class names come from the ClassLabel. Images are resized and centre-cropped
to `size` (default 32) as `folder:` does, grey if the first training image is grey; mean/std
from the training split. Needs the extra `hf` (`pip install 'archdsl[hf]'`); `datasets` is
imported only when such a dataset is read.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archdsl.data._cache import MiB, byte_bounded_cache
from archdsl.data._names import parse_dataset_name
from archdsl.data.base import ImageSet, channel_stats, stratified_indices
from archdsl.data.image_files import GREY_MODES, files_digest, fit_image
from archdsl.errors import UserError, visible

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

KIND = "hf"
PARAMS = ("image", "label", "size", "train", "test")
DEFAULT_SIZE = 32
TEST_SPLITS = ("validation", "test")
DECODED_CACHE_BYTES = 256 * MiB  # decoded splits kept per process: the test split needs the train split's statistics
DESCRIPTION = (
    "a Hugging Face dataset saved to disk or in the local cache: hf:NAME[:CONFIG],image=COL,label=COL (extra hf)"
)


@dataclass(frozen=True)
class HfName:
    source: str  # a save_to_disk folder, or a cached dataset's name
    config: str | None
    image: str | None
    label: str | None
    size: int
    limit_pairs: tuple[tuple[str, int], ...]

    @property
    def canonical(self) -> str:
        options = [f"{k}={v}" for k, v in (("image", self.image), ("label", self.label)) if v]
        options += [f"size={self.size}"] if self.size != DEFAULT_SIZE else []
        options += [f"{split}={n}" for split, n in self.limit_pairs]
        head = f"{KIND}:{self.source}" + (f":{self.config}" if self.config else "")
        return ",".join([head, *options])


def is_hf_name(name: str) -> bool:
    return name.strip().lower().startswith(KIND + ":")


def parse_hf_name(name: str) -> HfName:
    tail = name.strip()[len(KIND) + 1 :]
    head, _, options = tail.partition(",")
    source, _, config = head.strip().partition(":")
    if not source:
        raise UserError(f"dataset {name!r} names no dataset", hint="write hf:NAME[:CONFIG] or hf:PATH of save_to_disk")
    parsed = parse_dataset_name(f"{KIND}:{options}", (KIND,), {KIND: PARAMS})
    size = parsed.int_param("size", DEFAULT_SIZE)
    limits = tuple((s, parsed.int_param(s, 0)) for s in ("test", "train") if s in parsed.params)
    if size < 1 or any(n < 1 for _, n in limits):
        raise UserError(f"dataset {name!r}: size=, train= and test= must be positive numbers")
    params = parsed.params
    return HfName(source, config or None, params.get("image"), params.get("label"), size, limits)


def _open(parsed: HfName) -> DatasetDict:
    try:
        import datasets
    except ImportError:
        raise UserError(f"{KIND}: datasets need the package 'datasets'", hint="pip install 'archdsl[hf]'") from None
    path = Path(parsed.source).expanduser()
    try:
        if path.exists():
            loaded = datasets.load_from_disk(str(path))
        else:
            os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # the local cache only: never a download
            loaded = datasets.load_dataset(parsed.source, parsed.config)
    except Exception as err:  # datasets raises many types (FileNotFoundError, ValueError, ConnectionError, ...)
        raise UserError(
            f"{KIND}: cannot read {visible(parsed.source)}: {visible(str(err).splitlines()[0] if str(err) else err)}",
            hint="give a folder written by save_to_disk, or a dataset already in the local Hugging Face cache",
        ) from None
    if isinstance(loaded, datasets.Dataset):
        raise UserError(f"{visible(path)}: one split saved; archdsl needs a DatasetDict with train and validation/test")
    return loaded


def _split_of(parsed: HfName, splits: DatasetDict, split: str) -> Dataset:
    wanted = ("train",) if split == "train" else TEST_SPLITS
    for key in wanted:
        if key in splits:
            return splits[key]
    raise UserError(f"{visible(parsed.source)} has no {' or '.join(wanted)} split (it has {', '.join(splits)})")


@dataclass(frozen=True)
class _Columns:
    image: str
    label: str
    class_names: tuple[str, ...]


def _columns(parsed: HfName, table: Dataset) -> _Columns:
    import datasets

    features = table.features
    image = parsed.image or next((k for k, v in features.items() if isinstance(v, datasets.Image)), None)
    label = parsed.label or next((k for k, v in features.items() if isinstance(v, datasets.ClassLabel)), None)
    label = label or next((k for k in ("label", "labels") if k in features), None)
    for role, column in (("image", image), ("label", label)):
        if column is None or column not in features:
            shown = f"no column {visible(column)!r}" if column else f"no {role} column found"
            raise UserError(
                f"{visible(parsed.source)}: {shown} (columns: {', '.join(map(visible, features))})",
                hint=f"name it: hf:{parsed.source},{role}=COLUMN",
            )
    assert image is not None and label is not None
    kind = features[label]
    if isinstance(kind, datasets.ClassLabel):
        return _Columns(image, label, tuple(kind.names))
    if not (isinstance(kind, datasets.Value) and kind.dtype.startswith(("int", "uint"))):
        raise UserError(f"{visible(parsed.source)}: label column {visible(label)!r} holds {kind}, not integer classes")
    return _Columns(image, label, ())


@dataclass(frozen=True)
class _Decoded:
    images: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]


@byte_bounded_cache(DECODED_CACHE_BYTES)
def _decoded(parsed: HfName, split: str) -> _Decoded:
    from PIL import Image

    splits = _open(parsed)
    train = _split_of(parsed, splits, "train")
    columns = _columns(parsed, train)
    table = _split_of(parsed, splits, split)
    labels = np.asarray(table[columns.label], dtype=np.int64)
    if len(labels) == 0:
        raise UserError(f"{visible(parsed.source)}: the {split} split is empty")
    if labels.min() < 0:
        raise UserError(f"{visible(parsed.source)}: the {split} split has unlabelled rows (label {labels.min()})")
    limits = dict(parsed.limit_pairs)
    keep = stratified_indices(labels, limits[split]) if split in limits else np.arange(len(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        channels = 1 if _image(parsed, train, columns, 0).mode in GREY_MODES else 3
        images = np.empty((len(keep), parsed.size, parsed.size, channels), dtype=np.uint8)
        for slot, row in enumerate(keep.tolist()):
            images[slot] = fit_image(_image(parsed, table, columns, row), parsed.size, channels)
    images.setflags(write=False)
    return _Decoded(images, labels[keep], columns.class_names)


def _image(parsed: HfName, table: Dataset, columns: _Columns, row: int):
    from PIL import Image

    try:
        return table[row][columns.image]
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise UserError(
            f"{visible(parsed.source)}: row {row} refused as a possible decompression bomb ({err})"
        ) from None
    except OSError as err:
        raise UserError(f"{visible(parsed.source)}: row {row}: the image does not decode ({err})") from None


def load(name: str, split: str) -> ImageSet:
    """The `split` ("train" or "test") of `hf:...`; mean/std from the train split."""
    parsed = parse_hf_name(name)
    train = _decoded(parsed, "train")
    chosen = train if split == "train" else _decoded(parsed, "test")
    num_classes = len(train.class_names) or int(max(train.labels.max(), chosen.labels.max())) + 1
    if chosen.labels.max() >= num_classes:
        raise UserError(f"{visible(parsed.source)}: label {chosen.labels.max()} is beyond its {num_classes} classes")
    mean, std = channel_stats(train.images)
    return ImageSet(
        name=parsed.canonical if split == "train" else f"{parsed.canonical}-test",
        images=chosen.images,
        labels=chosen.labels,
        num_classes=num_classes,
        mean=mean,
        std=std,
        class_names=train.class_names or tuple(str(i) for i in range(num_classes)),
    )


def source_digest(name: str) -> str:
    """16 hex digits of what `hf:...` reads: every split's Arrow files (paths, sizes, modification
    times; a dataset saved again over the same folder changes them) and how they are read (the
    canonical name: columns, size, limits). Opens the dataset without decoding an image."""
    parsed = parse_hf_name(name)
    splits = _open(parsed)
    files = sorted({Path(entry["filename"]) for table in splits.values() for entry in table.cache_files})
    fingerprints = tuple(table._fingerprint for table in splits.values())  # the identity of a set without files
    return files_digest(files, (parsed.canonical, fingerprints))
