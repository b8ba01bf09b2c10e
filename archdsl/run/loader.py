"""ImageSet -> torch DataLoader of normalised float batches, with the recipe's augmentation.

Images stay uint8 until a whole batch is collated: normalising once per batch is cheaper
than per image. Augmentation follows timm's CIFAR pipeline on PIL images (random crop with
padding, horizontal flip, then RandAugment); without RandAugment they skip PIL (`OnTensors`: the same
pixels), and unaugmented sets are fetched a batch at a time (`__getitems__`).

Determinism: the shuffle order comes from a generator seeded with `seed`; the per-image
augmentation draws from torch's, numpy's and Python's global generators (torchvision and
timm use those), which `seed_everything` resets and DataLoader workers derive from the
loader's generator. So for a fixed seed, the batches are the same on every run. Images read
from disk (`DiskImages`: `folder:`, `imagenet`) are loaded by worker processes by default
(`default_workers`), and each is augmented from a seed of its own (the loader's seed and its
index), so their batches are also the same whatever the number of workers.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from archdsl.data.base import ImageSet
from archdsl.data.image_files import DiskImages
from archdsl.run.recipe import DEFAULT_RECIPE, RecipeName, TrainConfig


def seed_everything(seed: int) -> None:
    """Reset Python's, numpy's and torch's global generators (all the augmentation draws from)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@contextmanager
def globally_seeded(seed: int) -> Iterator[None]:
    """`seed_everything(seed)` for the body, and the global generators put back as they were after it
    (library calls that augment, like the analyses, must not move the caller's random streams)."""
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        seed_everything(seed)
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])


def derive_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from several integers (e.g. run seed and epoch)."""
    sequence = np.random.SeedSequence([p % 2**32 for p in parts])
    high, low = (int(word) for word in sequence.generate_state(2, dtype=np.uint32))
    return ((high << 32) | low) & (2**63 - 1)


def _train_transform(image_size: int, padding: int, hflip: float, randaugment: str | None, mean) -> Any:
    from torchvision import transforms

    steps: list[Any] = []
    if padding:
        steps.append(transforms.RandomCrop(image_size, padding=padding))
    if hflip:
        steps.append(transforms.RandomHorizontalFlip(p=hflip))
    if not randaugment:
        return OnTensors(transforms.Compose(steps))
    from timm.data.auto_augment import rand_augment_transform

    # RandAugment fills uncovered pixels (rotate, shear, translate) with the mean colour
    # (one number for a grey image, which PIL keeps in mode "L").
    fill = tuple(round(255 * m) for m in mean)
    fill = fill[0] if len(fill) == 1 else fill
    steps.append(rand_augment_transform(randaugment, {"translate_const": int(image_size * 0.45), "img_mean": fill}))
    steps.append(transforms.PILToTensor())
    return transforms.Compose(steps)


class OnTensors:
    """Crop and flip (no RandAugment) applied to a uint8 (C, H, W) tensor rather than a PIL image.

    Why: torchvision's RandomCrop and RandomHorizontalFlip take tensors too and draw the same numbers from the same
    generators (the crop's offsets, the flip's `torch.rand(1)`), so a seed gives the same pixels either way; the
    round trip through PIL costs more than the augmentation (about a tenth of a small CNN's CPU training step).
    """

    def __init__(self, steps: Any) -> None:
        self.steps = steps

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return self.steps(image)


MAX_DEFAULT_WORKERS = 4  # worker processes that read images from disk unless told otherwise


def default_workers(image_set: ImageSet) -> int:
    """The DataLoader workers a set gets unless the run names a number: min(4, CPU cores) for images
    decoded from disk, 0 for a set in memory (a batch is one fancy-index; workers would only copy it)."""
    return min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1) if isinstance(image_set.images, DiskImages) else 0


class ImageSetDataset(Dataset):
    """Yields uint8 (C, H, W) tensors and int64 labels; augmented if a transform is given (through PIL where it
    holds RandAugment, else on the tensor: `OnTensors`).

    With `item_seed`, image `i` is augmented from the global generators seeded with
    derive_seed(item_seed, i) (and the caller's streams put back), so the draws do not depend on
    which process reads it. Pickled for a worker it is what the set holds: for `DiskImages`, paths.
    """

    def __init__(self, image_set: ImageSet, transform: Any = None, item_seed: int | None = None) -> None:
        self.images = image_set.images
        self.labels = torch.tensor(np.asarray(image_set.labels), dtype=torch.int64)  # a copy: labels may be read-only
        self.transform = transform
        self.item_seed = item_seed

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.transform is None or isinstance(self.transform, OnTensors):
            source: Any = torch.tensor(np.asarray(self.images[index])).permute(2, 0, 1)
        else:
            from PIL import Image

            pixels = np.asarray(self.images[index])
            # A grey image (H, W, 1) is a PIL image of mode "L"; PILToTensor gives it back as (1, H, W).
            source = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
        if self.transform is None:
            image = source
        elif self.item_seed is None:
            image = self.transform(source)
        else:
            with globally_seeded(derive_seed(self.item_seed, int(index))):
                image = self.transform(source)
        return image, self.labels[index]

    def __getitems__(self, indices: list[int]) -> Any:
        if self.transform is not None:
            return [self[i] for i in indices]
        # One fancy-index for the whole batch (also fast on memory-mapped CIFAR-C arrays).
        batch = torch.from_numpy(np.ascontiguousarray(self.images[np.asarray(indices)])).permute(0, 3, 1, 2)
        return batch, self.labels[indices]


class Normalize:
    """Collate function: stack uint8 images, scale to [0, 1] and normalise per channel in `dtype`
    (the run's: a float64 run's images never pass through float32)."""

    def __init__(self, mean, std, dtype: torch.dtype = torch.float32) -> None:
        self.mean = torch.tensor(mean, dtype=dtype).view(1, -1, 1, 1)
        self.std = torch.tensor(std, dtype=dtype).view(1, -1, 1, 1)

    def __call__(self, items: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(items, tuple):  # a whole batch from __getitems__
            images, labels = items
        else:
            images = torch.stack([image for image, _ in items])
            labels = torch.stack([label for _, label in items])
        images = (images.to(self.mean.dtype).div_(255) - self.mean) / self.std
        return images.contiguous(), labels


def make_loader(
    image_set: ImageSet,
    batch_size: int,
    *,
    augment: bool,
    recipe: RecipeName | TrainConfig = DEFAULT_RECIPE,
    seed: int = 0,
    shuffle: bool | None = None,
    workers: int | None = None,
    drop_last: bool | None = None,
    pin_memory: bool = False,
    sampler: Iterable[int] | None = None,
    dtype: torch.dtype = torch.float32,
) -> DataLoader:
    """A DataLoader of (`dtype` (N, 3, H, W) normalised images, int64 labels).

    `augment=True` applies the recipe's augmentation (`recipe` is a recipe name or a
    `TrainConfig`) and, by default, shuffles and drops the last incomplete batch (Mixup
    needs even, full batches). Mixup/CutMix are not applied here: they act on whole
    batches in the training step. A `sampler` (one rank's share of a data-parallel run,
    archdsl.run.distributed.ShardSampler) replaces the shuffle. `workers` None: `default_workers`.
    """
    config = recipe if isinstance(recipe, TrainConfig) else TrainConfig(recipe=recipe)
    transform = None
    if augment:
        height = image_set.images.shape[1]
        transform = _train_transform(height, config.crop_padding, config.hflip, config.randaugment, image_set.mean)
    shuffle = augment if shuffle is None else shuffle
    if sampler is not None:
        shuffle = False  # the sampler's order
    generator = torch.Generator()
    generator.manual_seed(seed)
    on_disk = isinstance(image_set.images, DiskImages)
    return DataLoader(
        ImageSetDataset(image_set, transform, item_seed=seed if on_disk else None),
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        drop_last=augment if drop_last is None else drop_last,
        num_workers=default_workers(image_set) if workers is None else workers,
        collate_fn=Normalize(image_set.mean, image_set.std, dtype),
        generator=generator,
        persistent_workers=False,
        pin_memory=pin_memory,  # page-locked batches copy to a GPU asynchronously
    )


class ResidentLoader:
    """Training batches cut from one uint8 tensor kept on the device: no workers, no PIL.

    Augmentation is what the recipes without RandAugment need, done on whole batches: random
    crop with zero padding (as torchvision's RandomCrop) and horizontal flip (with probability
    `hflip`). Every draw comes from a CPU generator seeded with `seed`, so batches are the same
    on any device. Images are normalised in `dtype`, the run's.
    """

    def __init__(
        self,
        image_set: ImageSet,
        batch_size: int,
        *,
        device,
        padding: int,
        hflip: float,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.images = torch.tensor(np.asarray(image_set.images)).to(device).permute(0, 3, 1, 2)
        self.labels = torch.tensor(np.asarray(image_set.labels), dtype=torch.int64).to(device)
        self.mean = torch.tensor(image_set.mean, dtype=dtype, device=device).view(1, -1, 1, 1)
        self.std = torch.tensor(image_set.std, dtype=dtype, device=device).view(1, -1, 1, 1)
        self.batch_size, self.padding, self.hflip = batch_size, padding, hflip
        self.generator = torch.Generator().manual_seed(seed)

    def reseed(self, seed: int) -> ResidentLoader:
        """Restart the draws (a new epoch) without copying the images again."""
        self.generator.manual_seed(seed)
        return self

    def __len__(self) -> int:
        return len(self.labels) // self.batch_size  # full batches only, as the DataLoader's drop_last

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator).to(self.labels.device)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            index = order[start : start + self.batch_size]
            yield self._augment(self.images[index]), self.labels[index]

    def _augment(self, images: torch.Tensor) -> torch.Tensor:
        count, _, height, width = images.shape
        device = images.device
        if self.padding:
            pad = self.padding
            padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
            offsets = torch.randint(0, 2 * pad + 1, (count, 2), generator=self.generator).to(device)
            rows = (offsets[:, :1] + torch.arange(height, device=device))[:, None, :, None]
            cols = (offsets[:, 1:] + torch.arange(width, device=device))[:, None, None, :]
            batch = torch.arange(count, device=device)[:, None, None, None]
            channel = torch.arange(images.shape[1], device=device)[None, :, None, None]
            images = padded[batch, channel, rows, cols]
        if self.hflip:
            flip = (torch.rand(count, generator=self.generator) < self.hflip).to(device)
            images = torch.where(flip[:, None, None, None], images.flip(-1), images)
        return (images.to(self.mean.dtype).div_(255) - self.mean) / self.std
