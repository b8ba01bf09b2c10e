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

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.analysis._hessian_batches import training_batches as training_batches
    from archdsl.analysis._hessian_operator import hessian_operator as hessian_operator
    from archdsl.analysis.evaluation import CorruptedEvaluation as CorruptedEvaluation
    from archdsl.analysis.evaluation import TestEvaluation as TestEvaluation
    from archdsl.analysis.evaluation import evaluate as evaluate
    from archdsl.analysis.pipeline import DEFAULT_MEASURES as DEFAULT_MEASURES
    from archdsl.analysis.pipeline import MEASURES as MEASURES
    from archdsl.analysis.pipeline import AnalysisData as AnalysisData
    from archdsl.analysis.pipeline import analyze as analyze
    from archdsl.analysis.report import AnalysisReport as AnalysisReport
    from archdsl.analysis.report import render_markdown as render_markdown
    from archdsl.analysis.report import render_text as render_text
    from archdsl.analysis.session import analyze_checkpoint as analyze_checkpoint
    from archdsl.analysis.session import default_out as default_out
    from archdsl.analysis.settings import AnalysisSettings as AnalysisSettings
    from archdsl.analysis.settings import HessianSettings as HessianSettings
    from archdsl.analysis.sources import AnalysisSources as AnalysisSources
    from archdsl.analysis.sources import EvalSettings as EvalSettings

_EXPORTS = {
    "training_batches": "archdsl.analysis._hessian_batches",
    "hessian_operator": "archdsl.analysis._hessian_operator",
    "CorruptedEvaluation": "archdsl.analysis.evaluation",
    "TestEvaluation": "archdsl.analysis.evaluation",
    "evaluate": "archdsl.analysis.evaluation",
    "DEFAULT_MEASURES": "archdsl.analysis.pipeline",
    "MEASURES": "archdsl.analysis.pipeline",
    "AnalysisData": "archdsl.analysis.pipeline",
    "analyze": "archdsl.analysis.pipeline",
    "AnalysisReport": "archdsl.analysis.report",
    "render_markdown": "archdsl.analysis.report",
    "render_text": "archdsl.analysis.report",
    "analyze_checkpoint": "archdsl.analysis.session",
    "default_out": "archdsl.analysis.session",
    "AnalysisSettings": "archdsl.analysis.settings",
    "HessianSettings": "archdsl.analysis.settings",
    "AnalysisSources": "archdsl.analysis.sources",
    "EvalSettings": "archdsl.analysis.sources",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
