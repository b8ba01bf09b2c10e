"""The paper's input to the Hessian spectrum: the first augmented training batches, reproducibly."""

from __future__ import annotations

import torch

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.run.loader import globally_seeded, make_loader
from archdsl.run.recipe import DEFAULT_RECIPE, RecipeName, TrainConfig


def training_batches(
    image_set: ImageSet,
    n_batches: int,
    *,
    batch_size: int = 16,
    recipe: RecipeName | TrainConfig = DEFAULT_RECIPE,
    seed: int = 0,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first `n_batches` augmented, shuffled training batches (the paper's input).

    Uses the training loader so the augmentation is the recipe's; Mixup is not applied
    (it lives in the training step), so the labels stay hard and the loss is the NLL.
    The same seed gives the same batches; the global generators are left as they were.
    """
    available = len(image_set) // batch_size  # the training loader drops the last partial batch
    if available < n_batches:
        raise UserError(
            f"{image_set.name} has {len(image_set)} images: {available} batches of {batch_size}, not {n_batches}",
            hint="ask for fewer batches or a smaller batch size",
        )
    # The augmentation draws from the global generators: seed them for the same batches
    # on every call (candidates are compared on the same images), and put them back after.
    with globally_seeded(seed):
        loader = make_loader(image_set, batch_size, augment=True, recipe=recipe, seed=seed, shuffle=True)
        batches = []
        for inputs, targets in loader:
            batches.append((inputs, targets))
            if len(batches) == n_batches:
                break
    return batches
