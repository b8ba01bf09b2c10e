"""Crop and flip without RandAugment run on uint8 tensors (`loader.OnTensors`), skipping PIL: for the same seed they
give exactly the pixels the PIL pipeline gives, colour and grey, padded or not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms

from archdsl.data.base import ImageSet
from archdsl.run.loader import ImageSetDataset, OnTensors, _train_transform, seed_everything


def _through_pil(pixels: np.ndarray, padding: int, hflip: float) -> torch.Tensor:
    """The pipeline as it was: a PIL image, torchvision's crop and flip, PILToTensor."""
    steps: list[object] = [transforms.RandomCrop(pixels.shape[0], padding=padding)] if padding else []
    steps += [transforms.RandomHorizontalFlip(p=hflip)] if hflip else []
    picture = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
    return transforms.Compose([*steps, transforms.PILToTensor()])(picture)


@pytest.mark.parametrize(("channels", "padding", "hflip"), [(3, 4, 0.5), (1, 2, 0.5), (3, 0, 0.5), (1, 4, 0.0)])
def test_crop_and_flip_on_tensors_give_the_pixels_of_the_pil_pipeline(channels, padding, hflip):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(24, 12, 12, channels), dtype=np.uint8)
    mean = (0.5,) * channels
    image_set = ImageSet("t", images=images, labels=np.arange(24) % 3, num_classes=3, mean=mean, std=mean)
    transform = _train_transform(12, padding, hflip, None, image_set.mean)
    assert isinstance(transform, OnTensors)
    dataset = ImageSetDataset(image_set, transform)
    seed_everything(7)
    on_tensors = [dataset[i][0] for i in range(24)]
    seed_everything(7)
    through_pil = [_through_pil(images[i], padding, hflip) for i in range(24)]
    assert all(torch.equal(a, b) for a, b in zip(on_tensors, through_pil, strict=True))
    assert on_tensors[0].shape == (channels, 12, 12) and on_tensors[0].dtype == torch.uint8
    if padding:  # the draws moved something: a crop or flip that did nothing would pass the comparison too
        assert any(not torch.equal(a, torch.from_numpy(images[i]).permute(2, 0, 1)) for i, a in enumerate(on_tensors))


def test_randaugment_still_goes_through_pil():
    images, mean = np.zeros((4, 12, 12, 3), np.uint8), (0.5, 0.5, 0.5)
    image_set = ImageSet("t", images=images, labels=np.arange(4) % 2, num_classes=2, mean=mean, std=mean)
    transform = _train_transform(12, 4, 0.5, "rand-m9-mstd0.5", image_set.mean)
    assert not isinstance(transform, OnTensors)
    image, _ = ImageSetDataset(image_set, transform)[0]
    assert image.shape == (3, 12, 12) and image.dtype == torch.uint8
