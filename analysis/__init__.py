"""Analysis of trained candidates (imported as `archdsl.analysis`).

`analyze(model, data, measures, settings) -> AnalysisReport` (from `pipeline`) is the one
entry point that `archdsl analyze` and the search call. One module per measurement, each a
pure function of model + data + options returning a frozen pydantic result: `metrics`
(top-1, NLL, ECE), `robustness` (corrupted sets), `hessian` (max-eigenvalue spectrum: NEP,
APE), `fourier` (Delta log amplitude and variance per block); `plots` draws them and
`report` gathers them into JSON and Markdown. `evaluation` is `archdsl eval` (and
`archdsl.evaluate`). Importing this package pulls in neither torch nor matplotlib: the
exports below are imported on first use.
"""

from __future__ import annotations

from archdsl.exports import lazy_exports

_EXPORTS = {
    "DEFAULT_MEASURES": "archdsl.analysis.pipeline",
    "MEASURES": "archdsl.analysis.pipeline",
    "AnalysisData": "archdsl.analysis.pipeline",
    "analyze": "archdsl.analysis.pipeline",
    "AnalysisSettings": "archdsl.analysis.settings",
    "HessianSettings": "archdsl.analysis.settings",
    "hessian_operator": "archdsl.analysis._hessian_operator",
    "training_batches": "archdsl.analysis._hessian_batches",
    "AnalysisReport": "archdsl.analysis.report",
    "EvalSettings": "archdsl.analysis.sources",
    "TestEvaluation": "archdsl.analysis.evaluation",
    "CorruptedEvaluation": "archdsl.analysis.evaluation",
    "evaluate": "archdsl.analysis.evaluation",
    "render_text": "archdsl.analysis.report",
    "render_markdown": "archdsl.analysis.report",
    "AnalysisSources": "archdsl.analysis.sources",
    "analyze_checkpoint": "archdsl.analysis.session",
    "default_out": "archdsl.analysis.session",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
