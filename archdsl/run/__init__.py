"""Running models: training (recipes from timm parts), checkpoints, data loaders, evaluation, devices.

Knows the compiler (`archdsl.nn`) and the data layer; knows nothing of the command line.
`session` is `archdsl train` (and `archdsl.train`; `archdsl.run.train` is the training loop's
module). The exports below are imported on first use: importing this package pulls in no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.run._run_dir import FINAL_CHECKPOINT as FINAL_CHECKPOINT
    from archdsl.run._run_dir import LAST_CHECKPOINT as LAST_CHECKPOINT
    from archdsl.run._run_dir import TENSORBOARD_DIR as TENSORBOARD_DIR
    from archdsl.run._run_dir import saved_epochs as saved_epochs
    from archdsl.run.checkpoint import load_checkpoint as load_checkpoint
    from archdsl.run.checkpoint import save_checkpoint as save_checkpoint
    from archdsl.run.device import select_device as select_device
    from archdsl.run.distributed import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
    from archdsl.run.distributed import command_scope as command_scope
    from archdsl.run.distributed import quiet_followers as quiet_followers
    from archdsl.run.divergence import TrainingDiverged as TrainingDiverged
    from archdsl.run.epoch_metrics import EpochMetrics as EpochMetrics
    from archdsl.run.importer import ImportedCheckpoint as ImportedCheckpoint
    from archdsl.run.importer import import_checkpoint as import_checkpoint
    from archdsl.run.optimize import optimize_model as optimize_model
    from archdsl.run.recipe import DEFAULT_RECIPE as DEFAULT_RECIPE
    from archdsl.run.recipe import RECIPE_DEFAULTS as RECIPE_DEFAULTS
    from archdsl.run.recipe import RECIPE_FIELDS as RECIPE_FIELDS
    from archdsl.run.recipe import RECIPES as RECIPES
    from archdsl.run.recipe import TrainConfig as TrainConfig
    from archdsl.run.recipe import per_recipe as per_recipe
    from archdsl.run.recipe import recipe_flags as recipe_flags
    from archdsl.run.recipe import recipe_table as recipe_table
    from archdsl.run.session import TrainPlan as TrainPlan
    from archdsl.run.session import TrainSettings as TrainSettings
    from archdsl.run.session import plan_training as plan_training
    from archdsl.run.session import run_training as run_training
    from archdsl.run.train import TrainResult as TrainResult

_EXPORTS = {
    "FINAL_CHECKPOINT": "archdsl.run._run_dir",
    "LAST_CHECKPOINT": "archdsl.run._run_dir",
    "TENSORBOARD_DIR": "archdsl.run._run_dir",
    "saved_epochs": "archdsl.run._run_dir",
    "load_checkpoint": "archdsl.run.checkpoint",
    "save_checkpoint": "archdsl.run.checkpoint",
    "select_device": "archdsl.run.device",
    "DEFAULT_TIMEOUT_S": "archdsl.run.distributed",
    "command_scope": "archdsl.run.distributed",
    "quiet_followers": "archdsl.run.distributed",
    "TrainingDiverged": "archdsl.run.divergence",
    "EpochMetrics": "archdsl.run.epoch_metrics",
    "ImportedCheckpoint": "archdsl.run.importer",
    "import_checkpoint": "archdsl.run.importer",
    "optimize_model": "archdsl.run.optimize",
    "DEFAULT_RECIPE": "archdsl.run.recipe",
    "RECIPE_DEFAULTS": "archdsl.run.recipe",
    "RECIPE_FIELDS": "archdsl.run.recipe",
    "RECIPES": "archdsl.run.recipe",
    "TrainConfig": "archdsl.run.recipe",
    "per_recipe": "archdsl.run.recipe",
    "recipe_flags": "archdsl.run.recipe",
    "recipe_table": "archdsl.run.recipe",
    "TrainPlan": "archdsl.run.session",
    "TrainSettings": "archdsl.run.session",
    "plan_training": "archdsl.run.session",
    "run_training": "archdsl.run.session",
    "TrainResult": "archdsl.run.train",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
