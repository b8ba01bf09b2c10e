"""The built-in synthetic dataset: deterministic, balanced, learnable, configurable (the first two for
every generated dataset: odd-one-out's own tests are in tests/test_data_odd_one_out.py)."""

from __future__ import annotations

import numpy as np
import pytest

from archdsl.data import describe, load_split
from archdsl.data.registry import GENERATED
from archdsl.data.synthetic import SHAPES, class_cues
from archdsl.errors import UserError


@pytest.mark.parametrize("base", list(GENERATED))
def test_same_seed_same_images_other_seed_other_images(base):
    a = load_split(f"{base}:train=300,test=50,seed=4", "train")
    GENERATED[base].generate.cache_clear()  # really regenerate, not hit the cache
    b = load_split(f"{base}:train=300,test=50,seed=4", "train")
    c = load_split(f"{base}:train=300,test=50,seed=5", "train")
    assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.images, c.images)


@pytest.mark.parametrize("base", list(GENERATED))
def test_splits_are_balanced_typed_and_disjoint(base):
    train = load_split(f"{base}:classes=7,train=700,test=71", "train")
    test = load_split(f"{base}:classes=7,train=700,test=71", "test")
    assert train.images.shape == (700, *GENERATED[base].image_shape[1:], 3) and train.images.dtype == np.uint8
    assert train.labels.dtype == np.int64 and train.num_classes == 7 and len(train.class_names) == 7
    assert np.bincount(train.labels, minlength=7).tolist() == [100] * 7
    counts = np.bincount(test.labels, minlength=7)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 71
    flat_train = {image.tobytes() for image in train.images}
    assert not any(image.tobytes() in flat_train for image in test.images)


@pytest.mark.parametrize("base", list(GENERATED))
def test_test_split_does_not_depend_on_train_size(base):
    a = load_split(f"{base}:train=100,test=40", "test")
    b = load_split(f"{base}:train=200,test=40", "test")
    assert np.array_equal(a.images, b.images)
    assert not a.images.flags.writeable and not a.labels.flags.writeable  # cached, shared


def test_normalisation_comes_from_the_train_split():
    train = load_split("synthetic:train=400,test=40", "train")
    test = load_split("synthetic:train=400,test=40", "test")
    pixels = train.images.reshape(-1, 3) / 255.0
    assert np.allclose(train.mean, pixels.mean(axis=0)) and np.allclose(train.std, pixels.std(axis=0))
    assert test.mean == train.mean and test.std == train.std


def test_images_vary_within_a_class():
    train = load_split("synthetic:train=200,test=10", "train")
    same_class = train.images[train.labels == 0].astype(float)
    assert same_class.std(axis=0).mean() > 20  # position, scale, rotation, background differ


def _pooled(images: np.ndarray) -> np.ndarray:
    """8x8 average-pooled pixels: coarse colour and layout."""
    return images.reshape(len(images), 8, 4, 8, 4, 3).mean(axis=(2, 4)).reshape(len(images), -1) / 255.0


def _grey_spectrum(images: np.ndarray) -> np.ndarray:
    """Radial power spectrum of the grey image: no colour, blind to position and rotation,
    so it sees only texture frequency and shape."""
    grey = images.astype(np.float32).mean(axis=-1)
    grey -= grey.mean(axis=(1, 2), keepdims=True)
    power = np.abs(np.fft.fft2(grey)) ** 2
    radius = np.minimum((np.hypot(np.fft.fftfreq(32)[:, None], np.fft.fftfreq(32)[None]) * 32).astype(int), 16)
    return np.log1p(np.stack([power[:, radius == k].mean(axis=1) for k in range(1, 17)], axis=1))


def _object_colour(images: np.ndarray) -> np.ndarray:
    """Mean RGB of the saturated pixels (the object; backgrounds are greyish): colour only."""
    pixels = images.reshape(len(images), -1, 3).astype(np.float32) / 255.0
    weight = (pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.3
    return (pixels * weight[..., None]).sum(axis=1) / np.maximum(weight.sum(axis=1), 1)[:, None]


def _nearest_centroid_accuracy(features, labels, test_features, test_labels) -> float:
    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-6
    features, test_features = (features - mean) / std, (test_features - mean) / std
    centroids = np.stack([features[labels == k].mean(axis=0) for k in range(labels.max() + 1)])
    distances = ((test_features[:, None, :] - centroids[None]) ** 2).sum(axis=-1)
    return float((distances.argmin(axis=1) == test_labels).mean())


@pytest.mark.parametrize("features", [_pooled, _grey_spectrum, _object_colour])
def test_learnable_and_each_cue_alone_beats_chance(features):
    train = load_split("synthetic:train=2000,test=500", "train")
    test = load_split("synthetic:train=2000,test=500", "test")
    accuracy = _nearest_centroid_accuracy(features(train.images), train.labels, features(test.images), test.labels)
    assert accuracy > 0.3, accuracy  # chance is 0.10


def test_classes_differ_in_shape_texture_and_colour():
    cues = class_cues(10)
    assert len({c.shape for c in cues}) == len(SHAPES) == 10
    assert len({(c.texture, c.frequency) for c in cues}) >= 9
    assert len({round(c.hue, 6) for c in cues}) == 10
    assert len({(c.shape, c.texture, c.frequency, c.hue) for c in class_cues(40)}) == 40


def test_parameters_are_checked():
    with pytest.raises(UserError, match="classes"):
        load_split("synthetic:classes=1", "train")
    with pytest.raises(UserError, match="integer"):
        load_split("synthetic:train=many", "train")
    with pytest.raises(UserError, match="did you mean `seed`"):
        load_split("synthetic:sed=1", "train")
    with pytest.raises(UserError, match="key=value"):
        load_split("synthetic:classes", "train")
    with pytest.raises(UserError, match="split"):
        load_split("synthetic", "valid")


def test_describe_needs_no_generation():
    info = describe("synthetic:classes=5,test=20")
    assert info.num_classes == 5 and info.split_sizes == {"train": 5000, "test": 20}
    assert info.available and info.source == "generated in memory"


@pytest.mark.parametrize(
    "name, message",
    [
        ("synthetic:seed=-1", "seed must be between 0 and 4294967295, got -1"),
        ("synthetic:seed=4294967296", "seed must be between 0 and 4294967295"),
        ("synthetic:test=2000000000", "test must be between 1 and 10000, got 2000000000"),
        ("synthetic:train=100001", "train must be between 1 and 100000"),
        ("synthetic:train=0", "train must be between 1 and 100000, got 0"),
        ("synthetic:classes=1001", "classes must be between 2 and 1000"),
        ("synthetic:test=" + "9" * 5000, "must be an integer"),
        ("synthetic-c:corruption=fog,severity=9", "severity"),
        ("synthetic-c:corruption=nosuch,severity=1", "corruption"),
    ],
)
def test_every_option_has_limits_and_a_clear_error(name, message):
    # Before: seed=-1 was a ValueError from numpy, test=2e9 a 14.9 GiB allocation.
    with pytest.raises(UserError, match=message):
        load_split(name, "test")
    if not name.startswith("synthetic-c"):
        with pytest.raises(UserError, match=message):
            describe(name)


def test_a_large_set_is_made_in_chunks_and_the_default_sizes_are_unchanged():
    from archdsl.data.synthetic import CHUNK, SyntheticConfig, generate, render

    # Up to one chunk, the images are exactly one render call's (as before chunking).
    config = SyntheticConfig(train=CHUNK, test=10, seed=3)
    images, labels = generate(config, "train")
    rng = np.random.default_rng([3, 0])
    expected_labels = rng.permutation(np.arange(CHUNK) % 10).astype(np.int64)
    assert np.array_equal(labels, expected_labels)
    assert np.array_equal(images[:50], render(expected_labels, class_cues(10), rng)[:50])
    # Beyond, chunk after chunk from the same stream.
    bigger, big_labels = generate(SyntheticConfig(train=CHUNK + 7, test=10, seed=3), "train")
    rng = np.random.default_rng([3, 0])
    expected_labels = rng.permutation(np.arange(CHUNK + 7) % 10).astype(np.int64)
    first = render(expected_labels[:CHUNK], class_cues(10), rng)
    rest = render(expected_labels[CHUNK:], class_cues(10), rng)
    assert np.array_equal(big_labels, expected_labels) and np.array_equal(bigger[CHUNK:], rest)
    assert np.array_equal(bigger[:50], first[:50])


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.13, 0.01])
def test_a_stratified_subset_keeps_each_class_and_its_size_is_known_before_copying(fraction):
    from archdsl.data.base import ImageSet

    labels = np.repeat(np.arange(5), [30, 7, 12, 1, 50])  # uneven classes, one with a single image
    images = np.zeros((len(labels), 2, 2, 3), dtype=np.uint8)
    full = ImageSet("uneven", images, labels, 5, (0.5,) * 3, (0.25,) * 3)
    part = full.subset(fraction, seed=3)
    assert full.subset_size(fraction) == len(part)
    assert set(part.labels.tolist()) == set(range(5))  # every class keeps at least one image


def test_the_normalisation_of_a_large_split_makes_no_float_copy(monkeypatch):
    """The train split's per-channel statistics are counted, not computed on a float64 copy: with
    100,000 images that copy was 2.5 GB (twice, with the division), 5.9 GB at the peak of analyze."""
    import tracemalloc
    from dataclasses import replace

    from archdsl.data import registry

    count = 20_000  # 61 MB of uint8 images; as float64, 491 MB
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
    images[:, :, :, 2] //= 3  # channels that differ
    labels = np.arange(count) % 10
    # The split's images without rendering them (slow): only the statistics are measured here.
    made = replace(registry.GENERATED["synthetic"], generate=lambda config, split: (images, labels))
    monkeypatch.setitem(registry.GENERATED, "synthetic", made)
    tracemalloc.start()
    try:
        test = load_split(f"synthetic:train={count},test=10,seed=987654", "test")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # measured: 9 MB (bincount widens one channel of 1,024 images to int64)
    for c in range(3):  # the statistics numpy gives on the float64 copy
        channel = images[..., c]
        assert test.mean[c] == pytest.approx(float(channel.mean(dtype=np.float64)) / 255, rel=1e-9)
        assert test.std[c] == pytest.approx(float(channel.std(dtype=np.float64)) / 255, rel=1e-9)
