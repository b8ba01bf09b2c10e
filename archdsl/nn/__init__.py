"""IR -> nn.Module: the compiler (`build`), exact parameter/FLOP counts (`summary`) and the blocks.

Knows the IR and torch/timm; knows nothing of training, data or the command line.
"""

from __future__ import annotations

from archdsl.exports import lazy_exports

_EXPORTS = {
    "ArchNet": "archdsl.nn.build",
    "create_model": "archdsl.nn.build",
    "summarize": "archdsl.nn.summary",
    "ensure_fits": "archdsl.nn.summary",
    "ModelSummary": "archdsl.nn.summary",
    "compile_arch": "archdsl.nn.compiled",
    "CompiledArch": "archdsl.nn.compiled",
    "export_onnx": "archdsl.nn.compiled",
    "require_onnx": "archdsl.nn.compiled",
    "register_timm": "archdsl.nn.timm_models",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
