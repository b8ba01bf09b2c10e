"""A spec compiled and proven to run: what `archdsl compile` shows and exports.

`compile_arch` builds the model, runs one dummy image through it and checks the result
against the IR's own count (`summarize`): the logits have the spec's classes and the model
the summary's parameters. `export_onnx` writes the model as an ONNX graph with a dynamic batch.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from archdsl.errors import UserError
from archdsl.files import atomic_path
from archdsl.ir import Arch
from archdsl.nn.build import ArchNet, build
from archdsl.nn.summary import BlockSummary, LayerSummary, ModelSummary, summarize


@dataclass(frozen=True)
class CompiledArch:
    """A design, its model (eval mode, seeded weights) and its per-block summary, which agree."""

    arch: Arch
    model: ArchNet
    summary: ModelSummary

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `archdsl compile --json`: name, digest, totals, init and one entry per layer."""
        return {
            "name": self.arch.name,
            "digest": self.arch.digest(),
            "params": self.summary.params,
            "flops": self.summary.flops,
            "n_msa": self.summary.n_msa,
            "init": self.arch.init,
            "stem": asdict(self.summary.stem),
            "blocks": [asdict(block) for block in self.summary.blocks],
            "head": asdict(self.summary.head),
        }

    def to_text(self) -> str:
        """The table `archdsl compile` prints: one row per layer (stage, index, kind, output shape, params,
        MFLOPs per image), numbers aligned right, then the totals and the spec's `init` scheme."""
        summary = self.summary
        layers: list[tuple[str, str, LayerSummary | BlockSummary]] = [
            ("stem", "", summary.stem),
            *((block.stage, str(block.index), block) for block in summary.blocks),
            ("head", "", summary.head),
        ]
        rows: list[tuple[str, ...]] = [("stage", "index", "kind", "output", "params", "MFLOPs")]
        for stage, index, layer in layers:
            shape, mflops = "x".join(map(str, layer.out_shape)), f"{layer.flops / 1e6:,.1f}"
            rows.append((stage, index, layer.kind, shape, f"{layer.params:,}", mflops))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        rows.insert(1, tuple("-" * width for width in widths))
        right = {1, 4, 5}  # numbers align right
        lines = [
            "  ".join(
                cell.rjust(w) if i in right else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
            for row in rows
        ]
        totals = (
            f"{summary.name}: {len(summary.blocks)} blocks ({summary.n_msa} MSA), {summary.params:,} params, "
            f"{summary.flops / 1e9:.3f} GFLOPs per image ({'x'.join(map(str, summary.input_shape))} input), "
            f"init {self.arch.init}"
        )
        return "\n".join([*lines, "", totals])


def dummy_input(arch: Arch) -> torch.Tensor:
    """One all-zero image of the spec's input shape (a batch of 1)."""
    return torch.zeros(1, arch.input.channels, arch.input.height, arch.input.width)


def compile_arch(arch: Arch, *, seed: int = 0) -> CompiledArch:
    """Build `arch` (checked, weights from `seed`), run one dummy image through it and return it
    with its summary; a model that disagrees with its summary is a compiler bug (RuntimeError)."""
    model = build(arch, seed=seed).eval()
    summary = summarize(arch)
    # The dummy forward proves the model runs end to end on the spec's input.
    with torch.no_grad():
        logits = model(dummy_input(arch))
    built_params = sum(p.numel() for p in model.parameters())
    if tuple(logits.shape) != (1, arch.classes) or built_params != summary.params:
        raise RuntimeError(  # a compiler bug, not a user mistake: keep the traceback
            f"built model disagrees with its summary: logits {tuple(logits.shape)}, "
            f"params {built_params} vs {summary.params}"
        )
    return CompiledArch(arch=arch, model=model, summary=summary)


def require_onnx() -> None:
    """A UserError saying how to install `onnx` if it is missing (check before any work)."""
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        raise UserError(
            "--onnx needs the `onnx` package, which is not installed",
            hint="pip install 'archdsl[export]' (in a clone: pip install -e '.[export]')",
        )


def export_onnx(model: nn.Module, path: str | os.PathLike[str], example: torch.Tensor | None = None) -> Path:
    """Write `model` as an ONNX graph (input `images`, output `logits`, any batch size) to `path`,
    atomically; `example` is an input to trace with (default: the dummy image of `model.arch`, so
    another module needs one: a TypeError says so)."""
    if example is None:
        arch = getattr(model, "arch", None)
        if not isinstance(arch, Arch):
            raise TypeError(f"export_onnx: a {type(model).__name__} has no .arch to make an input from; pass example=")
        example = dummy_input(arch)
    require_onnx()
    path = Path(path)
    with atomic_path(path) as temporary:
        torch.onnx.export(
            model,
            (example,),
            str(temporary),
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
            dynamo=False,
        )
    return path
