"""The settings of every measure, as one typed value that a report records beside its results.

Kept apart from the pipeline so that `report` (which stores them) and `pipeline` (which
uses them) both import this module and not each other.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PositiveInt, model_validator

from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS, TrainConfig


class HessianSettings(BaseModel):
    """The Hessian max-eigenvalue spectrum: `batches` augmented training batches of `batch_size`,
    the top-`k` eigenvalues of each (docs/analysis.md, "Definitions, exactly")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batches: PositiveInt = 10
    batch_size: PositiveInt = 16
    k: PositiveInt = 5
    tol: float = Field(default=1e-3, gt=0)
    max_iter: PositiveInt = 100
    method: Literal["auto", "lanczos", "power"] = "auto"  # auto: hessian.choose_method (Lanczos where it fits)
    hvp: Literal["autograd", "func"] = "autograd"


class LandscapeSettings(BaseModel):
    """The loss landscape: `dims` filter-normalised directions, `points` (odd) per axis over
    [-span, span], the loss on `batches` augmented training batches of `batch_size`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dims: Literal[1, 2] = 1
    points: PositiveInt = 21
    span: float = Field(default=1.0, gt=0)
    batches: PositiveInt = 4
    batch_size: PositiveInt = 64

    @model_validator(mode="after")
    def _odd(self) -> LandscapeSettings:
        if self.points < 3 or self.points % 2 == 0:
            raise ValueError(f"points must be odd and at least 3 (the centre is a grid point), got {self.points}")
        return self


class CKASettings(BaseModel):
    """Mini-batch CKA: the first `images` test images in batches of `batch_size` (>= 4), unbiased HSIC."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    images: PositiveInt = 512
    batch_size: int = Field(default=64, ge=4)


class AnalysisSettings(BaseModel):
    """Every option of every measure, concrete: what `metrics.json` records as `settings`.

    `recipe` is the training recipe of the model (its augmentation makes the training
    batches; its weight decay is the L2 term of the loss unless `weight_decay` is given).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    recipe: TrainConfig = TrainConfig()
    # L2 term of the loss. Left out (or None), the given recipe's: filled in on construction, so it is
    # always a number; the default below is the default recipe's.
    weight_decay: float = Field(default=RECIPE_DEFAULTS[DEFAULT_RECIPE]["weight_decay"], ge=0)
    seed: int = 0  # training batches, start vectors, subsets
    batch_size: PositiveInt = 256  # evaluation batches (does not change any number)
    # Class-stratified fraction of the test and corrupted sets; a metrics.json written before the
    # name said which sets it shrinks records it as `subset`, and still reads.
    test_subset: float = Field(default=1.0, gt=0, le=1, validation_alias=AliasChoices("test_subset", "subset"))
    hessian: HessianSettings = HessianSettings()
    images: PositiveInt = 256  # test images for the feature-map statistics
    train_images: PositiveInt = 10000  # augmented training images for nll-train
    landscape: LandscapeSettings = LandscapeSettings()
    cka: CKASettings = CKASettings()

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
