"""The corruption generator: every corruption changes images in range, grows with severity,
and is fixed by its seed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from archdsl.data import load_split
from archdsl.data.corruptions import CORRUPTIONS, EXTRA_CORRUPTIONS, SEVERITIES, corrupt
from archdsl.errors import UserError

ALL = CORRUPTIONS + EXTRA_CORRUPTIONS


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.asarray(load_split("synthetic:test=48,seed=3", "test").images)


@pytest.fixture(scope="module")
def corrupted(images) -> dict[tuple[str, int], np.ndarray]:
    # One seed for every severity: severities then differ only by their parameters.
    return {(name, s): corrupt(images, name, s, seed=7) for name in ALL for s in SEVERITIES}


def mean_abs_diff(clean: np.ndarray, other: np.ndarray) -> float:
    return float(np.abs(other.astype(np.float64) - clean).mean())


def decorrelation(clean: np.ndarray, other: np.ndarray) -> float:
    """1 - Pearson correlation between each clean image and its corrupted copy, averaged.

    For frost, whose severities both dim the image and add more frost: the pixel distance
    can fall as the image darkens, the share of frost in the result does not."""
    a = clean.astype(np.float64).reshape(len(clean), -1)
    b = other.astype(np.float64).reshape(len(other), -1)
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    corr = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1) + 1e-12)
    return float(1 - corr.mean())


def test_the_fifteen_are_the_cifar_c_set():
    assert len(CORRUPTIONS) == 15 and len(set(CORRUPTIONS + EXTRA_CORRUPTIONS)) == 19
    assert CORRUPTIONS[0] == "gaussian_noise" and CORRUPTIONS[-1] == "jpeg_compression"


@pytest.mark.parametrize("name", ALL)
def test_corruption_keeps_shape_dtype_and_changes_the_image(name, images, corrupted):
    for severity in SEVERITIES:
        out = corrupted[name, severity]
        assert out.shape == images.shape and out.dtype == np.uint8
        assert np.abs(out.astype(int) - images).mean() > 0.2, (name, severity)
    assert not np.shares_memory(out, images)


# Corruptions whose parameters are not ordered by one quantity, and how they are checked
# instead (the reasons are in docs/data.md).
_GROUPED = {"saturate": [(1, 2), (3, 4, 5)], "spatter": [(1, 2, 3), (4, 5)]}
_SPECIAL = {"glass_blur", "elastic_transform"}


@pytest.mark.parametrize("name", [n for n in ALL if n not in _SPECIAL])
def test_distance_from_clean_grows_with_severity(name, images, corrupted):
    measure = decorrelation if name == "frost" else mean_abs_diff
    distance = {s: measure(images, corrupted[name, s]) for s in SEVERITIES}
    for group in _GROUPED.get(name, [SEVERITIES]):
        values = [distance[s] for s in group]
        # Near-ties the parameters make: motion_blur 3 and 4 differ only in taps weighing
        # < 1e-8 (equal); frost 3 and 4 differ by 6 % in frost share, about what clipping at
        # white takes back. Elsewhere a later severity must not fall.
        slack = 0.02 if name == "frost" else 1e-9
        assert all(later >= earlier * (1 - slack) for earlier, later in itertools.pairwise(values)), (name, distance)
        assert values[-1] > values[0], (name, distance)


def test_glass_blur_more_iterations_distort_more(images, corrupted):
    distance = {s: mean_abs_diff(images, corrupted["glass_blur", s]) for s in SEVERITIES}
    # Severities 4 and 5 repeat 2 and 3's blur with a second round of pixel swaps.
    assert distance[4] > distance[2] and distance[5] > distance[3]


def test_elastic_transform_global_warp_shrinks_with_severity(images, corrupted):
    # CIFAR's parameters shrink the affine part (2.6 -> 1.0 px) as the local jitter grows.
    distance = [mean_abs_diff(images, corrupted["elastic_transform", s]) for s in SEVERITIES]
    assert all(a > b for a, b in itertools.pairwise(distance)), distance


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_output(name, images, corrupted):
    assert np.array_equal(corrupt(images, name, 3, seed=7), corrupted[name, 3])


_DETERMINISTIC = {
    "defocus_blur",
    "gaussian_blur",
    "zoom_blur",
    "brightness",
    "contrast",
    "pixelate",
    "jpeg_compression",
    "saturate",
}


@pytest.mark.parametrize("name", [n for n in ALL if n not in _DETERMINISTIC])
def test_other_seed_other_output(name, images, corrupted):
    assert not np.array_equal(corrupt(images, name, 3, seed=8), corrupted[name, 3])


def test_corrupting_does_not_touch_the_input(images):
    before = images.copy()
    corrupt(images, "glass_blur", 5, seed=0)
    assert np.array_equal(images, before)


def test_unknown_corruption_and_severity_are_user_errors(images):
    with pytest.raises(UserError, match="did you mean `fog`"):
        corrupt(images, "fogg", 1)
    with pytest.raises(UserError, match="severity"):
        corrupt(images, "fog", 6)


def test_bad_input_array_is_rejected():
    with pytest.raises(ValueError, match="uint8"):
        corrupt(np.zeros((2, 32, 32, 3), dtype=np.float32), "fog", 1)


def test_frost_without_its_photographs_is_a_clear_error_before_any_work(images, monkeypatch, tmp_path):
    import importlib.util

    from archdsl.data import _frost as frost
    from archdsl.data import write_corrupted
    from archdsl.data.base import ImageSet

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "imagecorruptions" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(frost, "photos", frost.photos.__wrapped__)  # no cached photographs
    with pytest.raises(UserError, match="frost photographs") as caught:
        corrupt(images[:2], "frost", 1)
    assert "archdsl[frost]" in str(caught.value) and "pip install -e '.[frost]'" in str(caught.value)
    clean = ImageSet("clean", images, np.zeros(len(images), dtype=np.int64), 1, (0.5,) * 3, (0.2,) * 3)
    with pytest.raises(UserError, match="frost photographs"):
        write_corrupted(tmp_path / "out", clean, corruptions=["fog", "frost"], progress=False)
    assert not (tmp_path / "out" / "fog.npy").exists()  # refused before fog was generated
    assert corrupt(images[:2], "fog", 1).shape == (2, 32, 32, 3)  # the others need nothing
