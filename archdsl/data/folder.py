"""Your own images in the torchvision/timm folder layout: `folder:PATH`.

PATH holds `train/<class>/<image>` and `val/<class>/<image>` (or `test/`): class names are the
folder names, sorted, so every split has the same class order (a class missing from one split is
refused rather than silently renumbering the others). Images are decoded with Pillow, resized so
the shorter side is `size` pixels (bicubic, as timm's eval transform) and centre-cropped to
size x size when they are indexed: the images stay on disk (`archdsl.data.image_files.DiskImages`,
paths and labels, never the pixels of the whole folder), and DataLoader workers decode them.
The training images' mean and std are computed on the first read and cached
(`archdsl.data.stats_cache`).

Every mistake in the tree ends in one `UserError` naming the file or folder: an image that does
not decode, one so large it may be a decompression bomb (Pillow's MAX_IMAGE_PIXELS), an empty
class folder, class folders that differ between splits, a split with no images, a symlink loop.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archdsl.data._names import DatasetName, parse_dataset_name
from archdsl.data.base import STATS_CHUNK, ImageSet, channel_stats, stratified_indices
from archdsl.data.image_files import DiskImages, image_channels
from archdsl.data.stats_cache import cached_stats
from archdsl.errors import UserError, visible

KIND = "folder"
PARAMS = ("size", "train", "test")  # train=N/test=N keep a stratified N images of a split
DEFAULT_SIZE = 32  # the input size of the CIFAR-sized specs archdsl ships
# torchvision's IMG_EXTENSIONS: the files ImageFolder reads; anything else in a class folder is skipped.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
TEST_FOLDERS = ("val", "test")  # the first present is the test split (ImageNet's and torchvision's names)
DESCRIPTION = "your images in the layout PATH/train/<class>/*, PATH/val/<class>/* (or test/); folder:PATH,size=64"


@dataclass(frozen=True)
class FolderName:
    """How to read one image folder: `folder:PATH,size=N,train=N,test=N` split into the path and the
    options, or what `imagenet` fixes (crop_pct, the published statistics). Hashable: decoded splits
    are cached by it."""

    path: Path
    size: int
    limit_pairs: tuple[tuple[str, int], ...] = ()  # (split, N): keep a stratified N images of the split
    crop_pct: float = 1.0  # resize the shorter side to size / crop_pct, then centre-crop size x size (timm's)
    stats: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # mean, std; None: from the train split
    label: str = ""  # the dataset name to show; "" for folder:PATH's canonical form

    @property
    def limits(self) -> dict[str, int]:
        return dict(self.limit_pairs)

    @property
    def canonical(self) -> str:
        if self.label:
            return self.label
        options = [f"size={self.size}"] if self.size != DEFAULT_SIZE else []
        options += [f"{split}={n}" for split, n in sorted(self.limit_pairs)]
        return ",".join([f"{KIND}:{self.path}", *options])


def is_folder_name(name: str) -> bool:
    return name.strip().lower().startswith(KIND + ":")


def parse_folder_name(name: str) -> FolderName:
    """The path is everything after `folder:` up to the first comma; options follow as key=value."""
    tail = name.strip()[len(KIND) + 1 :]
    path, _, options = tail.partition(",")
    if not path.strip():
        raise UserError(f"dataset {name!r} names no folder", hint="write folder:PATH, e.g. folder:~/photos")
    parsed: DatasetName = parse_dataset_name(f"{KIND}:{options}", (KIND,), {KIND: PARAMS})
    size = parsed.int_param("size", DEFAULT_SIZE)
    limits: dict[str, int] = {s: parsed.int_param(s, 0) for s in ("train", "test") if s in parsed.params}
    if size < 1 or any(n < 1 for n in limits.values()):
        raise UserError(f"dataset {name!r}: size=, train= and test= must be positive numbers")
    return FolderName(Path(path.strip()).expanduser(), size, tuple(sorted(limits.items())))


@dataclass(frozen=True)
class FolderSplit:
    """One split on disk: its folder, and each image file with its class index (in file order)."""

    folder: Path
    files: tuple[Path, ...]
    labels: tuple[int, ...]


@dataclass(frozen=True)
class FolderLayout:
    root: Path
    class_names: tuple[str, ...]
    splits: dict[str, FolderSplit]  # "train" and "test"


def scan(root: Path) -> FolderLayout:
    """The classes and image files of `root` (no image is opened); a UserError for a tree that
    would not make a dataset."""
    if not root.is_dir():
        raise UserError(f"{visible(root)}: no such folder", hint="folder:PATH needs PATH/train/<class>/ and PATH/val/")
    train = root / "train"
    tests = [root / name for name in TEST_FOLDERS if (root / name).is_dir()]
    if not train.is_dir() or not tests:
        raise UserError(
            f"{visible(root)}: expected the folders train/ and val/ (or test/), each with one folder per class",
        )
    classes = class_folders(train)
    test_classes = class_folders(tests[0])
    if test_classes != classes:
        only_train = sorted(set(classes) - set(test_classes))
        only_test = sorted(set(test_classes) - set(classes))
        differences = [f"only in train/: {', '.join(map(visible, only_train))}"] if only_train else []
        differences += [f"only in {tests[0].name}/: {', '.join(map(visible, only_test))}"] if only_test else []
        raise UserError(f"{visible(root)}: the class folders differ between splits ({'; '.join(differences)})")
    splits = {split: split_files(folder, classes) for split, folder in (("train", train), ("test", tests[0]))}
    return FolderLayout(root, classes, splits)


def class_folders(split: Path) -> tuple[str, ...]:
    """The names of the class folders in `split`, sorted; a UserError when there is none."""
    classes = tuple(sorted(entry.name for entry in os.scandir(split) if entry.is_dir()))
    if not classes:
        raise UserError(f"{visible(split)}: no class folders (expected {split.name}/<class>/<image>)")
    return classes


def split_files(folder: Path, classes: tuple[str, ...]) -> FolderSplit:
    """The images under `folder/<class>/` for each of `classes`, labelled by its place in `classes`;
    a UserError naming an empty class folder."""
    files: list[Path] = []
    labels: list[int] = []
    for index, name in enumerate(classes):
        found = sorted(_images_under(folder / name))
        if not found:
            raise UserError(f"{visible(folder / name)}: empty class folder (no {', '.join(IMAGE_EXTENSIONS)} files)")
        files += found
        labels += [index] * len(found)
    return FolderSplit(folder, tuple(files), tuple(labels))


def _images_under(folder: Path) -> Iterator[Path]:
    """The image files under `folder`, following symbolic links as ImageFolder does, but refusing a
    link back into a folder already being walked (os.walk would recurse until the path is too long)."""
    seen: set[str] = set()
    for current, subfolders, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(current)
        if real in seen:
            raise UserError(f"{visible(current)}: symbolic link loop (it leads back to {visible(real)})")
        seen.add(real)
        subfolders.sort()
        for name in names:
            if name.lower().endswith(IMAGE_EXTENSIONS):
                yield Path(current) / name


def load(name: str, split: str) -> ImageSet:
    """The `split` ("train" or "test") of `folder:PATH,...`, on disk; mean/std from the train split."""
    return load_folder(parse_folder_name(name), split)


def load_folder(parsed: FolderName, split: str) -> ImageSet:
    """The `split` ("train" or "test") of the folder `parsed` describes: its images stay on disk
    (`DiskImages`, decoded when indexed). The first time a folder is read, every image of both
    splits is decoded once (the training images' mean and std, kept in the stats cache; and the
    check that each file decodes, before any run starts); later starts open none of them."""
    layout = scan(parsed.path)
    train_images, train_labels = _on_disk(parsed, layout, "train")
    test_images, test_labels = _on_disk(parsed, layout, "test")
    if parsed.stats is None:
        key = hashlib.blake2b(f"{train_images.digest()} {test_images.digest()}".encode(), digest_size=8).hexdigest()
        mean, std = cached_stats(key, lambda: _first_read(train_images, test_images))
    else:
        mean, std = parsed.stats
    images, labels = (train_images, train_labels) if split == "train" else (test_images, test_labels)
    return ImageSet(
        name=parsed.canonical if split == "train" else f"{parsed.canonical}-test",
        images=images,
        labels=labels,
        num_classes=len(layout.class_names),
        mean=mean,
        std=std,
        class_names=layout.class_names,
    )


def _on_disk(parsed: FolderName, layout: FolderLayout, split: str) -> tuple[DiskImages, np.ndarray]:
    """A split's kept images (all, or a stratified `train=N`/`test=N`) and their labels; nothing decoded."""
    on_disk = layout.splits[split]
    labels = np.asarray(on_disk.labels, dtype=np.int64)
    keep = stratified_indices(labels, parsed.limits[split]) if split in parsed.limits else np.arange(len(labels))
    everything = DiskImages(on_disk.files, parsed.size, channels_of(layout), parsed.crop_pct)
    return everything.select(keep), labels[keep]


def _first_read(train: DiskImages, test: DiskImages) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The training images' statistics, read a chunk at a time; the test images decoded and
    dropped, so that a file that does not decode is refused before a run starts."""
    for start in range(0, len(test), STATS_CHUNK):
        test[start : start + STATS_CHUNK]
    return channel_stats(train)


def channels_of(layout: FolderLayout) -> int:
    """1 if the first training image is grey, else 3; every image is converted to that."""
    return image_channels(layout.splits["train"].files[0])


def split_sizes(parsed: FolderName) -> dict[str, int]:
    """The images `load_folder` would return per split, counted on disk (no image is opened)."""
    layout = scan(parsed.path)
    counts = {split: len(on_disk.files) for split, on_disk in layout.splits.items()}
    return {split: min(n, parsed.limits.get(split, n)) for split, n in counts.items()}
