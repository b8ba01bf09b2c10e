"""archdsl's own layout: a plain state dict of a compiled model (e.g. `torch.save(model.state_dict())`).

The conversion is the identity; what it adds is a name, so `archdsl import` can turn such a
file plus its spec into a checkpoint that knows its design.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import torch

from archdsl.ir import Arch
from archdsl.nn.convert import SourceFormat, StateDict

# The top-level modules of `archdsl.nn.build.ArchNet`.
_TOP_LEVEL = ("stem.", "stages.", "head.")


def recognises(keys: Collection[str]) -> bool:
    return bool(keys) and all(key.startswith(_TOP_LEVEL) for key in keys) and any(k.startswith("stages.") for k in keys)


def convert(arch: Arch, state: Mapping[str, torch.Tensor]) -> StateDict:
    return dict(state)


FORMATS = (
    SourceFormat(
        name="archdsl",
        description="a plain state dict of an archdsl model (keys stem.*, stages.*, head.*)",
        recognises=recognises,
        convert=convert,
    ),
)
