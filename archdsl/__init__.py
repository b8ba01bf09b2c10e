"""archdsl: a language for hybrid CNN/Transformer vision networks.

Curated exports; each is imported on first use, so that `import archdsl` (and the
front end) never pays for torch.

    >>> import archdsl
    >>> arch = archdsl.load_spec("alter50")          # a built-in spec, or a path
    >>> model = archdsl.create_model(arch)            # an nn.Module named after the spec
    >>> ckpt = archdsl.load_checkpoint("final.safetensors")  # .model (eval mode), .arch, .meta

What each command does is a function here, taking the settings the command builds from its
flags (docs/python.md walks through them):

    >>> run = archdsl.train("tiny", dataset="synthetic", config={"recipe": "fast", "epochs": 1})
    >>> report = archdsl.analyze("runs/train/tiny-.../final.safetensors", measures=("acc",))
    >>> found = archdsl.search(n_trials=4, fidelity={"epochs": 1})   # found.study, found.best

Every built-in spec is also a timm model, `archdsl_<name>`, once `archdsl.nn.timm_models` is imported
(timm's convention); `import archdsl` imports it where timm is already imported, and never imports timm itself.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl import search as search
    from archdsl.analysis.evaluation import evaluate as evaluate
    from archdsl.analysis.report import AnalysisReport as AnalysisReport
    from archdsl.analysis.session import analyze_checkpoint as analyze  # noqa: F401 (exported as another name)
    from archdsl.analysis.settings import AnalysisSettings as AnalysisSettings
    from archdsl.analysis.sources import AnalysisSources as AnalysisSources
    from archdsl.analysis.sources import EvalSettings as EvalSettings
    from archdsl.buildup import layout as layout
    from archdsl.buildup import ratio as ratio
    from archdsl.errors import UserError as UserError
    from archdsl.ir import Arch as Arch
    from archdsl.kinds import BlockKind as BlockKind
    from archdsl.kinds import register_block as register_block
    from archdsl.kinds import unregister_block as unregister_block
    from archdsl.lang.diagnostics import SpecError as SpecError
    from archdsl.lang.printer import format_arch as format_arch
    from archdsl.lang.spec import load_spec as load_spec
    from archdsl.lang.spec import parse_spec as parse_spec
    from archdsl.lang.spec import resolve_spec as resolve_spec
    from archdsl.nn.build import create_model as create_model
    from archdsl.nn.summary import summarize as summarize
    from archdsl.nn.timm_models import register_timm as register_timm
    from archdsl.run.checkpoint import load_checkpoint as load_checkpoint
    from archdsl.run.checkpoint import save_checkpoint as save_checkpoint
    from archdsl.run.importer import import_checkpoint as import_checkpoint
    from archdsl.run.optimize import optimize_model as optimize_model
    from archdsl.run.recipe import TrainConfig as TrainConfig
    from archdsl.run.session import TrainSettings as TrainSettings
    from archdsl.run.session import train as train
    from archdsl.search.fidelity.measures import Fidelity as Fidelity
    from archdsl.search.settings import SearchSettings as SearchSettings

# dir(): the curated API only, not the submodules and helpers that importing leaves behind.
_EXPORTS = {
    "search": "archdsl.search",
    "evaluate": "archdsl.analysis.evaluation",
    "AnalysisReport": "archdsl.analysis.report",
    "analyze": "archdsl.analysis.session:analyze_checkpoint",
    "AnalysisSettings": "archdsl.analysis.settings",
    "AnalysisSources": "archdsl.analysis.sources",
    "EvalSettings": "archdsl.analysis.sources",
    "layout": "archdsl.buildup",
    "ratio": "archdsl.buildup",
    "UserError": "archdsl.errors",
    "Arch": "archdsl.ir",
    "BlockKind": "archdsl.kinds",
    "register_block": "archdsl.kinds",
    "unregister_block": "archdsl.kinds",
    "SpecError": "archdsl.lang.diagnostics",
    "format_arch": "archdsl.lang.printer",
    "load_spec": "archdsl.lang.spec",
    "parse_spec": "archdsl.lang.spec",
    "resolve_spec": "archdsl.lang.spec",
    "create_model": "archdsl.nn.build",
    "summarize": "archdsl.nn.summary",
    "register_timm": "archdsl.nn.timm_models",
    "load_checkpoint": "archdsl.run.checkpoint",
    "save_checkpoint": "archdsl.run.checkpoint",
    "import_checkpoint": "archdsl.run.importer",
    "optimize_model": "archdsl.run.optimize",
    "TrainConfig": "archdsl.run.recipe",
    "TrainSettings": "archdsl.run.session",
    "train": "archdsl.run.session",
    "Fidelity": "archdsl.search.fidelity.measures",
    "SearchSettings": "archdsl.search.settings",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, own=("__version__",))

if "timm" in sys.modules:  # timm is loaded (so this costs nothing): make the specs timm models, as timm's own are
    from archdsl.nn import timm_models as _timm_models  # noqa: F401 (importing it registers the models)
