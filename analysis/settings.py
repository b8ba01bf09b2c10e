"""The settings of every measure, as one typed value that a report records beside its results.

Kept apart from the pipeline so that `report` (which stores them) and `pipeline` (which
uses them) both import this module and not each other.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from archdsl.run.recipe import TrainConfig


class HessianSettings(BaseModel):
    """The Hessian max-eigenvalue spectrum: `batches` augmented training batches of `batch_size`,
    the top-`k` eigenvalues of each (docs/analysis.md, "Definitions, exactly")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batches: PositiveInt = 10
    batch_size: PositiveInt = 16
    k: PositiveInt = 5
    tol: float = Field(default=1e-3, gt=0)
    max_iter: PositiveInt = 100
    method: Literal["power", "lanczos"] = "power"
    hvp: Literal["autograd", "func"] = "autograd"


class AnalysisSettings(BaseModel):
    """Every option of every measure, concrete: what `metrics.json` records as `settings`.

    `recipe` is the training recipe of the model (its augmentation makes the training
    batches; its weight decay is the L2 term of the loss unless `weight_decay` is given).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    recipe: TrainConfig = TrainConfig()
    weight_decay: float | None = Field(default=None, ge=0)  # None: the recipe's (filled in on construction)
    seed: int = 0  # training batches, start vectors, subsets
    batch_size: PositiveInt = 256  # evaluation batches (does not change any number)
    subset: float = Field(default=1.0, gt=0, le=1)  # class-stratified fraction of the test and corrupted sets
    hessian: HessianSettings = HessianSettings()
    images: PositiveInt = 256  # test images for the feature-map statistics

    @model_validator(mode="before")
    @classmethod
    def _weight_decay_of_the_recipe(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("weight_decay") is None:
            recipe = data.get("recipe")
            if recipe is None:
                recipe = TrainConfig()
            elif isinstance(recipe, dict):
                recipe = TrainConfig.model_validate(recipe)
            data = {**data, "weight_decay": recipe.weight_decay}
        return data
