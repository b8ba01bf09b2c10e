"""Lesion study: test accuracy with one block's residual branch removed (Park & Kim, Fig. 11b).

A residual block computes `shortcut(x) + drop_path(branch(x))`; every archdsl block with a
residual branch (`conv`, `msa`, `attn`, `mlp`) applies its `drop_path` module to the
branch's output, last. Removing the branch is making that output zero: a forward hook on
`drop_path` returns zeros, so the block passes on its shortcut alone (the identity, or the
projection where the shape changes). Blocks without a residual branch (`merge`, `pool`,
`smooth`) cannot be removed and are left out.

Park & Kim remove one unit at a time (the 3x3 conv of a bottleneck in ResNets, an MSA or an
MLP block in ViTs, following Bhojanapalli et al., 2021); here the unit is always the whole
residual branch of a block, which for `attn` and `mlp` blocks is the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn as nn
from pydantic import BaseModel, ConfigDict

from archdsl.ir import block_path


class LesionedBlock(BaseModel):
    """Test top-1 and NLL with one block's residual branch removed, and where the block sits."""

    model_config = ConfigDict(frozen=True)

    name: str  # "stages.<stage>.<index>"
    stage: str
    index: int
    kind: str
    depth: int  # 1, 2, ... in model order (0 would be the stem)
    top1: float  # test top-1 without this block's residual branch (a fraction)
    nll: float


class LesionResult(BaseModel):
    """The intact model's test top-1 and NLL, and each residual block's lesion, in model order."""

    model_config = ConfigDict(frozen=True)

    top1: float  # the intact model's
    nll: float
    blocks: tuple[LesionedBlock, ...]
    images: int


def residual_blocks(model: nn.Module) -> list[tuple[str, str, int, int, nn.Module]]:
    """(name, stage, index, depth, block) of every block with a residual branch, in model order."""
    stages: Any = getattr(model, "stages", None)
    if stages is None:
        raise ValueError("the model has no `.stages`: lesions are made on archdsl models")
    found = []
    depth = 0
    for stage, blocks in stages.items():
        for index, block in enumerate(blocks):
            depth += 1
            if isinstance(getattr(block, "drop_path", None), nn.Module):
                found.append((block_path(stage, index), stage, index, depth, block))
    return found


@contextmanager
def without_residual_branch(block: nn.Module) -> Iterator[None]:
    """Inside the block, the residual branch's output is zero (the shortcut alone goes on)."""
    branch_end: Any = block.drop_path
    handle = branch_end.register_forward_hook(lambda module, args, output: torch.zeros_like(output))
    try:
        yield
    finally:
        handle.remove()


def lesion_study(
    model: nn.Module,
    test_set,
    *,
    batch_size: int = 256,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> LesionResult:
    """Test top-1 and NLL of the intact model and with each residual branch removed in turn."""
    from archdsl.progress import progress_bar
    from archdsl.run.evaluate import predict_logits, require_finite_logits, score_logits

    def score(intact: bool = False):
        logits = predict_logits(model, test_set, batch_size=batch_size, device=device)
        if intact:  # a branch removed may overflow; the intact model must not
            require_finite_logits(logits, test_set.name)
        return score_logits(logits, test_set.labels)

    intact = score(intact=True)
    lesioned = []
    for name, stage, index, depth, block in progress_bar(
        residual_blocks(model), desc="lesions", unit="block", show=progress
    ):
        with without_residual_branch(block):
            result = score()
        kind = getattr(block, "kind", "block")
        lesioned.append(
            LesionedBlock(name=name, stage=stage, index=index, kind=kind, depth=depth, top1=result.top1, nll=result.nll)
        )
    return LesionResult(top1=intact.top1, nll=intact.nll, blocks=tuple(lesioned), images=len(test_set))
