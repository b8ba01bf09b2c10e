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

Every built-in spec is also a timm model, `archdsl_<name>`, from the moment timm is imported
(`archdsl.nn.timm_models`: `import archdsl` only installs the hook, it does not import timm).
"""

from __future__ import annotations

from archdsl.exports import lazy_exports
from archdsl.nn import timm_models as _timm_models

__version__ = "0.1.0"

_EXPORTS = {
    # front end (pure Python)
    "parse_spec": "archdsl.lang.spec",
    "load_spec": "archdsl.lang.spec",
    "resolve_spec": "archdsl.lang.spec",
    "format_arch": "archdsl.lang.printer",
    "SpecError": "archdsl.lang.diagnostics",
    "UserError": "archdsl.errors",
    "Arch": "archdsl.ir",
    # block kinds from outside the package (docs/language.md, "Your own block kinds")
    "register_block": "archdsl.kinds",
    "unregister_block": "archdsl.kinds",
    "BlockKind": "archdsl.kinds",
    # build-up transforms
    # (`buildup` and `build` are also module names, so they are not exported as functions:
    # use archdsl.buildup.buildup and archdsl.nn.build.build.)
    "layout": "archdsl.buildup",
    "ratio": "archdsl.buildup",
    # compiler (imports torch)
    "create_model": "archdsl.nn.build",
    "summarize": "archdsl.nn.summary",
    "register_timm": "archdsl.nn.timm_models",
    # checkpoints (safetensors + IR; `archdsl train` and `archdsl import` write them)
    "load_checkpoint": "archdsl.run.checkpoint",
    "save_checkpoint": "archdsl.run.checkpoint",
    "import_checkpoint": "archdsl.run.importer",
    # running models
    "optimize_model": "archdsl.run.optimize",
    # what the commands do, as functions (the CLI only parses, calls these and prints)
    "train": "archdsl.run.session",
    "TrainSettings": "archdsl.run.session",
    "TrainConfig": "archdsl.run.recipe",
    "analyze": "archdsl.analysis.session:analyze_checkpoint",
    "AnalysisReport": "archdsl.analysis.report",
    "AnalysisSettings": "archdsl.analysis.settings",
    "AnalysisSources": "archdsl.analysis.sources",
    "evaluate": "archdsl.analysis.evaluation",
    "search": "archdsl.search",  # the package, callable: archdsl.search(...) runs a study
    "SearchSettings": "archdsl.search.session",
    "Fidelity": "archdsl.search.measures",
    "EvalSettings": "archdsl.analysis.sources",
}

# dir(): the curated API only, not the submodules and helpers that importing leaves behind.
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, own=("__version__",))

_timm_models.install_timm_hook()
