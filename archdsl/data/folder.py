"""Your own images in the torchvision/timm folder layout: `folder:PATH`.

PATH holds `train/<class>/<image>` and `val/<class>/<image>` (or `test/`): class names are the
folder names, sorted, so every split has the same class order (a class missing from one split is
refused rather than silently renumbering the others). Images are decoded with Pillow, resized so
the shorter side is `size` pixels (bicubic, as timm's eval transform) and centre-cropped to
size x size, then held as one uint8 array like every other dataset (`ImageSet`): a folder of
10^5 images at size=32 takes 300 MB. Decoding runs on a pool of threads (Pillow releases the
GIL while it decodes and resizes).

Every mistake in the tree ends in one `UserError` naming the file or folder: an image that does
not decode, one so large it may be a decompression bomb (Pillow's MAX_IMAGE_PIXELS), an empty
class folder, class folders that differ between splits, a split with no images, a symlink loop.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archdsl.data._cache import MiB, byte_bounded_cache
from archdsl.data._names import DatasetName, parse_dataset_name
from archdsl.data.base import ImageSet, channel_stats, stratified_indices
from archdsl.errors import UserError, visible

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

KIND = "folder"
PARAMS = ("size", "train", "test")  # train=N/test=N keep a stratified N images of a split
DEFAULT_SIZE = 32  # the input size of the CIFAR-sized specs archdsl ships
# torchvision's IMG_EXTENSIONS: the files ImageFolder reads; anything else in a class folder is skipped.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
TEST_FOLDERS = ("val", "test")  # the first present is the test split (ImageNet's and torchvision's names)
GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")
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
    classes = _class_folders(train)
    test_classes = _class_folders(tests[0])
    if test_classes != classes:
        only_train = sorted(set(classes) - set(test_classes))
        only_test = sorted(set(test_classes) - set(classes))
        differences = [f"only in train/: {', '.join(map(visible, only_train))}"] if only_train else []
        differences += [f"only in {tests[0].name}/: {', '.join(map(visible, only_test))}"] if only_test else []
        raise UserError(f"{visible(root)}: the class folders differ between splits ({'; '.join(differences)})")
    splits = {split: _split(folder, classes) for split, folder in (("train", train), ("test", tests[0]))}
    return FolderLayout(root, classes, splits)


def _class_folders(split: Path) -> tuple[str, ...]:
    classes = tuple(sorted(entry.name for entry in os.scandir(split) if entry.is_dir()))
    if not classes:
        raise UserError(f"{visible(split)}: no class folders (expected {split.name}/<class>/<image>)")
    return classes


def _split(folder: Path, classes: tuple[str, ...]) -> FolderSplit:
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
    """The `split` ("train" or "test") of `folder:PATH,...`, decoded; mean/std from the train split."""
    return load_folder(parse_folder_name(name), split)


def load_folder(parsed: FolderName, split: str) -> ImageSet:
    """The `split` ("train" or "test") of the folder `parsed` describes, decoded."""
    layout = scan(parsed.path)
    if parsed.stats is None:
        mean, std = channel_stats(_decoded(parsed, "train").images)
    else:
        mean, std = parsed.stats
    chosen = _decoded(parsed, split)
    return ImageSet(
        name=parsed.canonical if split == "train" else f"{parsed.canonical}-test",
        images=chosen.images,
        labels=chosen.labels,
        num_classes=len(layout.class_names),
        mean=mean,
        std=std,
        class_names=layout.class_names,
    )


@dataclass(frozen=True)
class _Decoded:
    images: np.ndarray
    labels: np.ndarray


DECODED_CACHE_BYTES = 256 * MiB  # decoded splits kept per process: the test split needs the train split's statistics


@byte_bounded_cache(DECODED_CACHE_BYTES)
def _decoded(parsed: FolderName, split: str) -> _Decoded:
    layout = scan(parsed.path)
    return _decode(parsed, layout, split, channels_of(layout))


def _decode(parsed: FolderName, layout: FolderLayout, split: str, channels: int) -> _Decoded:
    on_disk = layout.splits[split]
    labels = np.asarray(on_disk.labels, dtype=np.int64)
    keep = stratified_indices(labels, parsed.limits[split]) if split in parsed.limits else np.arange(len(labels))
    images = np.empty((len(keep), parsed.size, parsed.size, channels), dtype=np.uint8)

    def fill(slot: int) -> None:
        images[slot] = read_image(on_disk.files[keep[slot]], parsed.size, channels, parsed.crop_pct)

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        list(pool.map(fill, range(len(keep))))  # list(): the first error is raised here
    images.setflags(write=False)
    return _Decoded(images, labels[keep])


def channels_of(layout: FolderLayout) -> int:
    """1 if the first training image is grey, else 3; every image is converted to that."""
    with _opened(layout.splits["train"].files[0]) as image:
        return 1 if image.mode in GREY_MODES else 3


def read_image(path: Path, size: int, channels: int, crop_pct: float = 1.0) -> np.ndarray:
    """One image as uint8 (size, size, channels): shorter side resized to `size / crop_pct` (bicubic;
    timm's eval transform, whose ImageNet default 0.875 takes 256 for 224), centre-cropped to `size`."""
    with _opened(path) as image:
        try:
            return fit_image(image, size, channels, crop_pct)
        except OSError as err:  # a truncated or corrupt file fails when its pixels are read
            raise UserError(f"{visible(path)}: the image does not decode ({err})") from None


def fit_image(image: PILImage, size: int, channels: int, crop_pct: float = 1.0) -> np.ndarray:
    """A decoded Pillow image as uint8 (size, size, channels), resized and centre-cropped as `read_image`."""
    from PIL import Image

    image = image.convert("L" if channels == 1 else "RGB")
    width, height = image.size
    scale = math.floor(size / crop_pct) / min(width, height)
    resized = (max(size, round(width * scale)), max(size, round(height * scale)))
    image = image.resize(resized, Image.Resampling.BICUBIC)
    left, top = (resized[0] - size) // 2, (resized[1] - size) // 2
    pixels = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.uint8)
    return pixels.reshape(size, size, channels)


class _opened:
    """`Image.open(path)` as a context manager whose failures are one UserError naming the file;
    Pillow's decompression-bomb warning (an image over MAX_IMAGE_PIXELS) is an error too."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self):
        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                self.image = Image.open(self.path)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
            raise UserError(
                f"{visible(self.path)}: refused as a possible decompression bomb ({err})",
                hint="shrink the image, or raise PIL.Image.MAX_IMAGE_PIXELS in Python if you trust it",
            ) from None
        except OSError as err:  # UnidentifiedImageError is an OSError
            raise UserError(f"{visible(self.path)}: not an image Pillow can read ({err})") from None
        return self.image

    def __exit__(self, *exc: object) -> None:
        self.image.close()


def split_sizes(parsed: FolderName) -> dict[str, int]:
    """The images `load_folder` would return per split, counted on disk (no image is opened)."""
    layout = scan(parsed.path)
    counts = {split: len(on_disk.files) for split, on_disk in layout.splits.items()}
    return {split: min(n, parsed.limits.get(split, n)) for split, n in counts.items()}
