"""IR -> nn.Module: the compiler (`build`), exact parameter/FLOP counts (`summary`) and the blocks.

Knows the IR and torch/timm; knows nothing of training, data or the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.nn.build import ArchNet as ArchNet
    from archdsl.nn.build import create_model as create_model
    from archdsl.nn.compiled import CompiledArch as CompiledArch
    from archdsl.nn.compiled import compile_arch as compile_arch
    from archdsl.nn.compiled import export_onnx as export_onnx
    from archdsl.nn.compiled import require_onnx as require_onnx
    from archdsl.nn.convert.reference import reference_layout as reference_layout
    from archdsl.nn.convert.timm import timm_to_archdsl as timm_to_archdsl
    from archdsl.nn.summary import ModelSummary as ModelSummary
    from archdsl.nn.summary import ensure_fits as ensure_fits
    from archdsl.nn.summary import summarize as summarize
    from archdsl.nn.timm_models import register_timm as register_timm

_EXPORTS = {
    "ArchNet": "archdsl.nn.build",
    "create_model": "archdsl.nn.build",
    "CompiledArch": "archdsl.nn.compiled",
    "compile_arch": "archdsl.nn.compiled",
    "export_onnx": "archdsl.nn.compiled",
    "require_onnx": "archdsl.nn.compiled",
    "reference_layout": "archdsl.nn.convert.reference",
    "timm_to_archdsl": "archdsl.nn.convert.timm",
    "ModelSummary": "archdsl.nn.summary",
    "ensure_fits": "archdsl.nn.summary",
    "summarize": "archdsl.nn.summary",
    "register_timm": "archdsl.nn.timm_models",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
