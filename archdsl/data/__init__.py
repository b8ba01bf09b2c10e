"""Datasets: CIFAR-10/100, CIFAR-10-C/100-C, the built-in generated sets (synthetic, odd-one-out) and their corruptions,
Fashion-MNIST, MNIST, ImageNet, your own folders and Hugging Face datasets.

from archdsl.data import load_split, load_corrupted
train = load_split("synthetic", "train")
rest, validation = split_validation(train, 0.1)  # fixed, stratified, disjoint
sets = load_corrupted("cifar100-c", root="data", corruptions=["fog"], severities=[5])
"""

from archdsl.data._names import resolve_data_root
from archdsl.data.base import CorruptedSet, ImageSet
from archdsl.data.cifar import matches_official_release
from archdsl.data.cifar_c import write_corrupted
from archdsl.data.corrupted_copy import CorruptedCopy, corrupt_dataset, corruption_names
from archdsl.data.image_size import sized_name
from archdsl.data.overview import About, about
from archdsl.data.registry import (
    DatasetInfo,
    corrupted_name,
    count_images,
    dataset_descriptions,
    dataset_names,
    describe,
    fetch_dataset,
    is_corrupted,
    load_corrupted,
    load_split,
    training_defaults,
    why_missing,
)
from archdsl.data.validation import (
    VALIDATION_SEED,
    default_val_size,
    parse_val_split,
    split_validation,
)

__all__ = [
    "About",
    "about",
    "CorruptedCopy",
    "CorruptedSet",
    "DatasetInfo",
    "corrupted_name",
    "count_images",
    "corrupt_dataset",
    "corruption_names",
    "ImageSet",
    "dataset_descriptions",
    "dataset_names",
    "default_val_size",
    "describe",
    "fetch_dataset",
    "is_corrupted",
    "load_corrupted",
    "load_split",
    "matches_official_release",
    "parse_val_split",
    "resolve_data_root",
    "sized_name",
    "split_validation",
    "training_defaults",
    "VALIDATION_SEED",
    "why_missing",
    "write_corrupted",
]
