"""Analysis of trained candidates (imported as `archdsl.analysis`).

`analyze(model, data, measures, settings) -> AnalysisReport` (from `pipeline`) is the one
entry point that `archdsl analyze` and the search call. One module per measurement, each a
pure function of model + data + options returning a frozen pydantic result: `metrics`
(top-1, NLL, ECE), `robustness` (corrupted sets), `hessian` (max-eigenvalue spectrum: NEP,
APE), `fourier` (Delta log amplitude and variance per block); `plots` draws them and
`report` gathers them into JSON and Markdown. Importing this package pulls in neither
torch nor matplotlib (the measures import them when they run).
"""

from archdsl.analysis.pipeline import DEFAULT_MEASURES, MEASURES, AnalysisData, analyze
from archdsl.analysis.settings import AnalysisSettings, HessianSettings

__all__ = ["DEFAULT_MEASURES", "MEASURES", "AnalysisData", "AnalysisSettings", "HessianSettings", "analyze"]
