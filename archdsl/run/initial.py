"""The weights a training run starts from (`archdsl train --initial-checkpoint FILE`, timm's name).

An archdsl checkpoint (`.safetensors` written by `train` or `import`) gives its weights as they
are; anything `archdsl import` reads (the reference implementation's `.pth.tar`, a timm file, a
plain state dict) goes through the same conversion (`archdsl.run.importer.import_weights`). Either
way the weights must fit the design being trained, key for key and shape for shape: a `UserError`
names the missing, unexpected and mis-shaped keys otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from archdsl.errors import UserError
from archdsl.ir import Arch

FLAG = "--initial-checkpoint"


def initial_weights(path: str | os.PathLike[str], arch: Arch) -> dict[str, torch.Tensor]:
    """The state dict of `arch` that the file at `path` holds (CPU tensors)."""
    from archdsl.nn.weights import require_fitting_weights
    from archdsl.run.checkpoint import is_checkpoint_file, model_weights, read_checkpoint_file
    from archdsl.run.importer import import_weights, read_source

    path = Path(path)
    if not is_checkpoint_file(path):
        try:  # a foreign file: converted as `archdsl import` converts it
            return import_weights(read_source(path), arch).model.state_dict()
        except UserError as err:
            where = "" if err.message.startswith(str(path)) else f"{path}: "
            raise UserError(f"{FLAG} {where}{err.message}", hint=err.hint) from None
    weights = model_weights(read_checkpoint_file(path)[0])
    require_fitting_weights(
        arch,
        weights,
        where=f"{FLAG} {path}",
        what="its weights",
        fit_hint="train the design the checkpoint holds (its run's spec.arch), or give another file",
        finite_hint="use a checkpoint of an earlier epoch",
    )
    return weights
