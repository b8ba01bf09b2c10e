"""Running models: training (recipes from timm parts), checkpoints, data loaders, evaluation, devices.

Knows the compiler (`archdsl.nn`) and the data layer; knows nothing of the command line.
`session` is `archdsl train` (and `archdsl.train`; `archdsl.run.train` is the training loop's
module). The exports below are imported on first use: importing this package pulls in no torch.
"""

from __future__ import annotations

from archdsl.exports import lazy_exports

_EXPORTS = {
    "TrainConfig": "archdsl.run.recipe",
    "RECIPES": "archdsl.run.recipe",
    "DEFAULT_RECIPE": "archdsl.run.recipe",
    "RECIPE_DEFAULTS": "archdsl.run.recipe",
    "RECIPE_FIELDS": "archdsl.run.recipe",
    "recipe_flags": "archdsl.run.recipe",
    "TrainSettings": "archdsl.run.session",
    "TrainPlan": "archdsl.run.session",
    "plan_training": "archdsl.run.session",
    "run_training": "archdsl.run.session",
    "TrainResult": "archdsl.run.train",
    "EpochMetrics": "archdsl.run._run_dir",
    "TrainingDiverged": "archdsl.run.divergence",
    "FINAL_CHECKPOINT": "archdsl.run._run_dir",
    "LAST_CHECKPOINT": "archdsl.run._run_dir",
    "TENSORBOARD_DIR": "archdsl.run._run_dir",
    "saved_epochs": "archdsl.run._run_dir",
    "load_checkpoint": "archdsl.run.checkpoint",
    "save_checkpoint": "archdsl.run.checkpoint",
    "import_checkpoint": "archdsl.run.importer",
    "ImportedCheckpoint": "archdsl.run.importer",
    "optimize_model": "archdsl.run.optimize",
    "select_device": "archdsl.run.device",
    "DEFAULT_TIMEOUT_S": "archdsl.run.distributed",
    "command_scope": "archdsl.run.distributed",
    "quiet_followers": "archdsl.run.distributed",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
