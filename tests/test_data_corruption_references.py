"""The corruption generator against independent references: imagecorruptions (Hendrycks'
generator, at equal parameters and random numbers), scikit-image, OpenCV, scipy.ndimage and
matplotlib. docs/data.md reports the same comparisons as numbers (tests/_corruption_reference.py).
"""

from __future__ import annotations

import cv2
import matplotlib.colors
import numpy as np
import pytest
from _corruption_reference import IMAGENET_C, mean_absolute_difference, patched, recipe_difference, sample_images
from scipy import ndimage
from skimage.util import random_noise

from archdsl.data import _frost as frost
from archdsl.data import _image_ops as ops
from archdsl.data import corruptions

# Equal pixel for pixel to imagecorruptions at its parameters and random numbers.
EXACT = (
    "gaussian_noise",
    "shot_noise",
    "speckle_noise",
    "gaussian_blur",
    "glass_blur",
    "defocus_blur",
    "zoom_blur",
    "fog",
    "brightness",
    "contrast",
    "saturate",
    "jpeg_compression",
    "pixelate",
)


@pytest.fixture(scope="module")
def reference():
    with patched() as module:
        yield module


@pytest.fixture(scope="module")
def images():
    return sample_images(4)


@pytest.mark.parametrize("name", EXACT)
def test_equal_to_the_published_generator(reference, images, name):
    for severity in range(1, 6):
        assert mean_absolute_difference(reference, name, images, severity) == 0, f"{name} severity {severity}"


def test_motion_blur_is_imagemagicks_kernel_rounded_to_8_bits(reference, images):
    # imagecorruptions re-implements ImageMagick's MotionBlurImage without Wand; the sums agree.
    # (It stops at taps that leave the image, which ImageMagick does not: kernels shorter than
    # the image only.) The CIFAR generator reads ImageMagick's 8-bit result: rounded, not truncated.
    for radius, sigma in IMAGENET_C["motion_blur"][:4]:
        for angle in (-40.0, 7.5, 33.0):
            image = images[0].astype(np.float64)
            expected = reference._motion_blur(images[0], radius=radius, sigma=sigma, angle=angle)
            actual = ops.line_blur(image[None], radius, sigma, np.array([angle]))[0]
            np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-9)
    assert 0.45 < mean_absolute_difference(reference, "motion_blur", images, 1) < 0.55  # rounding vs truncation


def test_snow_differs_only_by_the_cifar_generators_8_bit_flakes(reference, images):
    # imagecorruptions blurs the float flake layer; the CIFAR generator blurs an 8-bit PNG of it.
    # (At severity 4, imagecorruptions' zoom of 4.5 also keeps the top-left, not the centre.)
    for severity in (1, 2, 3, 5):
        assert mean_absolute_difference(reference, "snow", images, severity) < 1.0


def test_spatter_mud_equal_but_for_a_float32_colour(reference, images):
    # Mud is computed alike; imagecorruptions' mud colour is float64 where the CIFAR generator's is float32.
    for severity in (4, 5):
        assert mean_absolute_difference(reference, "spatter", images, severity) < 1e-3


def test_impulse_noise_is_skimages_salt_and_pepper(images):
    # imagecorruptions calls skimage.util.random_noise without a seed; call it with one.
    for amount in IMAGENET_C["gaussian_noise"]:  # any amounts in (0, 1)
        expected = np.uint8(
            np.clip(random_noise(images / 255.0, mode="s&p", amount=amount, rng=np.random.default_rng(3)), 0, 1) * 255
        )
        actual = corruptions.apply(images, "impulse_noise", amount, np.random.default_rng(3))
        assert np.array_equal(actual, expected)


def test_frost_is_the_cifar_generators_from_the_photographs(images):
    for severity in range(1, 6):
        assert recipe_difference("frost", images, severity) == 0, f"severity {severity}"


def test_elastic_transform_is_the_cifar_generators_but_for_opencvs_fixed_point_warp(images):
    # cv2.warpAffine rounds its source coordinates to 1/32 pixel; a rare pixel lands one step apart.
    for severity in range(1, 6):
        assert recipe_difference("elastic_transform", images, severity) < 1e-3, f"severity {severity}"


def test_frost_photographs_read_and_scale_as_opencv_does():
    folder = frost.photo_folder()
    for name, scaled in zip(frost.FILES, frost.photos(), strict=True):
        photo = cv2.imread(str(folder / name))
        assert np.array_equal(scaled, cv2.resize(photo, (0, 0), fx=0.2, fy=0.2)[..., ::-1])
    photo = cv2.imread(str(folder / frost.FILES[0]))
    for scale in (0.5, 0.37):  # resize_linear is OpenCV's bilinear rule at any scale, up to rounding
        ours = frost.resize_linear(photo, scale).astype(int)
        assert np.abs(ours - cv2.resize(photo, (0, 0), fx=scale, fy=scale)).max() <= 1


def test_the_defocus_disk_is_opencvs(reference):
    for radius, alias_blur in corruptions.PARAMS["defocus_blur"] + IMAGENET_C["defocus_blur"]:
        expected = reference.disk(radius=radius, alias_blur=alias_blur)
        ours = corruptions._disk_kernel(radius, alias_blur)  # cropped to its support
        full = np.zeros_like(expected)
        top, left = (np.array(expected.shape) - ours.shape) // 2
        full[top : top + ours.shape[0], left : left + ours.shape[1]] = ours
        np.testing.assert_allclose(full, expected, rtol=1e-6, atol=1e-12)  # OpenCV's rim holds ~1e-23


def test_correlation_borders_are_opencvs_reflect_101():
    x = np.random.default_rng(0).random((2, 9, 7, 3))
    kernel = np.random.default_rng(1).random((5, 5))
    ours = ops.correlate_each(x, kernel)
    for n in range(2):
        for c in range(3):
            np.testing.assert_allclose(ours[n, ..., c], cv2.filter2D(x[n, ..., c], -1, kernel), rtol=1e-12)


def _bilinear_on_padded(image, rows, cols, pad_mode):
    """An independent bilinear sampler: pad the image by numpy's rule, then interpolate by hand."""
    pad = 8
    padded = np.pad(image, pad, mode=pad_mode)
    r, c = rows + pad, cols + pad
    r0, c0 = np.floor(r).astype(int), np.floor(c).astype(int)
    fr, fc = r - r0, c - c0
    top = padded[r0, c0] * (1 - fc) + padded[r0, c0 + 1] * fc
    bottom = padded[r0 + 1, c0] * (1 - fc) + padded[r0 + 1, c0 + 1] * fc
    return top * (1 - fr) + bottom * fr


@pytest.mark.parametrize(("mode", "numpy_pad"), [("mirror", "reflect"), ("reflect", "symmetric")])
def test_sampling_borders(mode, numpy_pad):
    # scipy "mirror" is OpenCV's BORDER_REFLECT_101 (numpy "reflect"); scipy "reflect" is numpy "symmetric".
    rng = np.random.default_rng(2)
    x = rng.random((3, 8, 8, 2))
    rows = rng.uniform(-5, 12, (3, 8, 8))
    cols = rng.uniform(-5, 12, (3, 8, 8))
    ours = ops.sample(x, rows, cols, mode)
    for n in range(3):
        for c in range(2):
            expected = _bilinear_on_padded(x[n, ..., c], rows[n], cols[n], numpy_pad)
            np.testing.assert_allclose(ours[n, ..., c], expected, rtol=0, atol=1e-12)


def test_the_elastic_affine_warp_is_opencvs_up_to_its_fixed_point_coordinates():
    # cv2.warpAffine rounds source coordinates to 1/32 pixel; the warp here samples exactly.
    rng = np.random.default_rng(4)
    x = rng.random((1, 32, 32, 3)).astype(np.float32)
    src = np.float32([[26, 26], [26, 6], [6, 6]])
    dst = src + rng.uniform(-2.5, 2.5, (3, 2)).astype(np.float32)
    expected = cv2.warpAffine(x[0], cv2.getAffineTransform(src, dst), (32, 32), borderMode=cv2.BORDER_REFLECT_101)
    inverse = np.linalg.solve(np.c_[dst, np.ones(3)].astype(np.float64), src.astype(np.float64))
    rows, cols = ops.pixel_grid(1, 32, 32)
    source_x = cols * inverse[0, 0] + rows * inverse[1, 0] + inverse[2, 0]
    source_y = cols * inverse[0, 1] + rows * inverse[1, 1] + inverse[2, 1]
    ours = ops.sample(x, source_y, source_x, mode="mirror")[0]
    assert np.abs(ours - expected).max() < 1 / 32


def test_hsv_round_trip_matches_matplotlib():
    x = np.random.default_rng(5).random((4, 16, 16, 3))
    x[0, 0, 0] = (0.5, 0.5, 0.5)  # grey
    x[0, 0, 1] = (0.7, 0.7, 0.2)  # two channels tie for the maximum
    hsv = ops.rgb_to_hsv(x)
    np.testing.assert_allclose(hsv, matplotlib.colors.rgb_to_hsv(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ops.hsv_to_rgb(hsv), matplotlib.colors.hsv_to_rgb(hsv), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ops.hsv_to_rgb(hsv), x, rtol=0, atol=1e-12)


def test_gray_is_opencvs():
    x = np.random.default_rng(6).random((2, 8, 8, 3)).astype(np.float32)
    for n in range(2):
        np.testing.assert_allclose(ops.rgb_to_gray(x)[n, ..., 0], cv2.cvtColor(x[n], cv2.COLOR_RGB2GRAY), rtol=1e-6)


def test_zoom_is_scipys_zoom_of_the_centre():
    x = np.random.default_rng(7).random((2, 32, 32, 3)).astype(np.float32)
    for zoom in (1.01, 1.13, 1.75, 2.25):
        crop = int(np.ceil(32 / zoom))
        top = (32 - crop) // 2
        for n in range(2):
            zoomed = ndimage.zoom(x[n, top : top + crop, top : top + crop], (zoom, zoom, 1), order=1)
            trim = (zoomed.shape[0] - 32) // 2
            assert np.array_equal(ops.clipped_zoom(x, zoom)[n], zoomed[trim : trim + 32, trim : trim + 32])
