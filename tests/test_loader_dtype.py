"""A float64 run is float64 throughout: its images are normalised in float64, not in float32 and
then widened (which differs by up to a float32 rounding per pixel and shows in the final weights)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from archdsl.data.base import ImageSet
from archdsl.run.loader import ResidentLoader, make_loader


def image_set(n: int = 16, size: int = 8) -> ImageSet:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8)
    labels = rng.integers(0, 4, size=n)
    # Statistics that float32 cannot hold exactly, as a dataset's measured mean and std.
    return ImageSet("toy", images, labels, 4, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))


def normalised(images: torch.Tensor, data: ImageSet, dtype: torch.dtype) -> torch.Tensor:
    """The batch normalised in `dtype` from its uint8 pixels: the computation to match."""
    mean = torch.tensor(data.mean, dtype=dtype).view(1, -1, 1, 1)
    std = torch.tensor(data.std, dtype=dtype).view(1, -1, 1, 1)
    return (images.to(dtype) / 255 - mean) / std


def test_a_float64_loader_normalises_in_float64() -> None:
    data = image_set()
    pixels = torch.from_numpy(data.images).permute(0, 3, 1, 2)
    [(batch, _)] = list(make_loader(data, len(data), augment=False, dtype=torch.float64))
    assert batch.dtype == torch.float64
    assert torch.equal(batch, normalised(pixels, data, torch.float64))
    assert not torch.equal(batch, normalised(pixels, data, torch.float32).double())


def test_the_default_loader_stays_float32() -> None:
    data = image_set()
    [(batch, _)] = list(make_loader(data, len(data), augment=False))
    assert batch.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_resident_loader_normalises_in_the_runs_dtype(dtype: torch.dtype) -> None:
    data = image_set()
    loader = ResidentLoader(data, len(data), device="cpu", padding=0, hflip=0.0, seed=1, dtype=dtype)
    [(batch, _)] = list(loader)
    expected = normalised(loader.images, data, dtype)  # unaugmented: the batch is these rows, shuffled
    assert batch.dtype == dtype
    assert all(any(torch.equal(row, candidate) for candidate in expected) for row in batch)
