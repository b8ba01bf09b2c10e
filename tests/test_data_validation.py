"""The validation split: stratified, disjoint from training, the same images every time, bad sizes refused."""

from __future__ import annotations

import numpy as np
import pytest

from archdsl.data import default_val_size, load_split, parse_val_split, split_validation
from archdsl.data.base import ImageSet
from archdsl.errors import UserError


def _image_set(counts: list[int], name: str = "toy") -> ImageSet:
    """A set with `counts[c]` images of class c, each image's first pixel holding its index (to trace it)."""
    labels = np.concatenate([np.full(n, c, dtype=np.int64) for c, n in enumerate(counts)])
    order = np.random.default_rng(1).permutation(len(labels))
    labels = labels[order]
    images = np.zeros((len(labels), 4, 4, 1), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(len(labels)) % 256
    images[:, 0, 1, 0] = np.arange(len(labels)) // 256
    return ImageSet(name, images, labels, len(counts), (0.5,), (0.25,))


def _ids(part: ImageSet) -> set[int]:
    return set((part.images[:, 0, 0, 0].astype(int) + 256 * part.images[:, 0, 1, 0].astype(int)).tolist())


def test_validation_is_stratified_in_proportion():
    train = _image_set([600, 300, 100])
    rest, val = split_validation(train, 0.1)
    assert len(val) == 100 and len(rest) == 900
    assert np.bincount(val.labels).tolist() == [60, 30, 10]
    assert np.bincount(rest.labels).tolist() == [540, 270, 90]


def test_validation_is_disjoint_from_every_training_subset():
    train = _image_set([200, 200, 200])
    rest, val = split_validation(train, 60)
    assert _ids(rest).isdisjoint(_ids(val))
    assert _ids(rest) | _ids(val) == _ids(train)
    for seed in range(3):  # a trial's subset is drawn from the rest: never a validation image
        assert _ids(rest.subset(0.3, seed=seed)).isdisjoint(_ids(val))


def test_validation_is_the_same_whatever_the_seed_or_call():
    train = load_split("synthetic:train=300,test=30,seed=4", "train")
    _, first = split_validation(train, 0.2)
    _, again = split_validation(train, 0.2)
    assert first.fingerprint() == again.fingerprint()
    np.random.seed(123)  # the global generator must not matter either
    _, third = split_validation(train, 60)
    assert third.fingerprint() == first.fingerprint()  # 0.2 of 300 is the count 60


def test_default_is_a_tenth_capped_at_5000_and_keeps_every_class_in_both_parts():
    assert default_val_size(_image_set([5000] * 10)) == 5000  # CIFAR-10's 50,000 -> 5,000
    assert default_val_size(_image_set([6000] * 10)) == 5000  # Fashion-MNIST's 60,000 -> 5,000
    small = _image_set([3] * 10)  # a tiny train=30 subset: a tenth would be 3 images for 10 classes
    rest, val = split_validation(small)
    assert set(val.labels.tolist()) == set(rest.labels.tolist()) == set(range(10))


@pytest.mark.parametrize("text", ["0", "-3", "-0.1", "1.0", "1.5", "abc", "nan", ""])
def test_bad_val_split_is_one_clear_line(text):
    with pytest.raises(UserError) as caught:
        parse_val_split(text)
    assert "--val-split" in caught.value.message and "\n" not in caught.value.message


def test_val_split_parses_fraction_and_count():
    assert parse_val_split("0.1") == 0.1
    assert parse_val_split("5000") == 5000 and isinstance(parse_val_split("5000"), int)


@pytest.mark.parametrize("size", [1000, 2000, 0.9999])
def test_val_split_not_smaller_than_the_training_set_is_refused(size):
    with pytest.raises(UserError, match="leaves no training images|empty"):
        split_validation(_image_set([500, 500]), size)


def test_val_split_that_empties_a_class_is_refused():
    with pytest.raises(UserError, match="class 2 empty in the validation part"):
        split_validation(_image_set([500, 480, 20]), 10)  # 10 images: class 2's share rounds to none
    with pytest.raises(UserError, match="empty in the training part"):
        split_validation(_image_set([2, 2, 1]), 4)  # all of class 0's two images go to validation
