"""The settings of every measure, as one typed value that a report records beside its results.

Kept apart from the pipeline so that `report` (which stores them) and `pipeline` (which
uses them) both import this module and not each other.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PositiveInt, model_validator

from archdsl.common_settings import flag_field
from archdsl.run.recipe import DEFAULT_RECIPE, RECIPE_DEFAULTS, TrainConfig


class HessianSettings(BaseModel):
    """The Hessian max-eigenvalue spectrum: `batches` augmented training batches of `batch_size`,
    the top-`k` eigenvalues of each (docs/analysis.md, "Definitions, exactly")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batches: PositiveInt = flag_field("--batches", "training batches to pool", default=10)
    batch_size: PositiveInt = flag_field("--hessian-batch-size", "images per batch", default=16)
    k: PositiveInt = flag_field("--k", "top eigenvalues per batch", default=5)
    tol: float = flag_field("--tol", "relative tolerance", default=1e-3, gt=0)
    max_iter: PositiveInt = flag_field(
        "--max-iter",
        "most Hessian-vector products: Lanczos steps per batch, or power iterations per eigenvalue",
        default=100,
    )
    method: Literal["auto", "lanczos", "power"] = flag_field(
        "--method",
        "eigensolver: lanczos (the top-k within --tol, in fewer products than power iteration), power, or auto "
        "(lanczos unless its vectors would take over a quarter of the memory: hessian.choose_method)",
        default="auto",
    )
    hvp: Literal["autograd", "func"] = flag_field("--hvp", "Hessian-vector products", default="autograd")


class LandscapeSettings(BaseModel):
    """The loss landscape: `dims` filter-normalised directions, `points` (odd) per axis over
    [-span, span], the loss on `batches` augmented training batches of `batch_size`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dims: Literal[1, 2] = flag_field("--landscape-dims", "1-D curve or 2-D contour", default=1)
    points: PositiveInt = flag_field("--landscape-points", "grid points per axis, odd", default=21)
    span: float = flag_field(
        "--landscape-span", "the grid covers [-X, X] times each direction", default=1.0, gt=0, metavar="X"
    )
    batches: PositiveInt = flag_field("--landscape-batches", "augmented training batches per loss value", default=4)
    batch_size: PositiveInt = flag_field("--landscape-batch-size", "images per batch", default=64)

    @model_validator(mode="after")
    def _odd(self) -> LandscapeSettings:
        if self.points < 3 or self.points % 2 == 0:
            raise ValueError(f"points must be odd and at least 3 (the centre is a grid point), got {self.points}")
        return self


class CKASettings(BaseModel):
    """Mini-batch CKA: the first `images` test images in batches of `batch_size` (>= 4), unbiased HSIC."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    images: PositiveInt = flag_field("--cka-images", "test images", default=512)
    batch_size: int = flag_field("--cka-batch-size", "images per mini-batch, at least 4", default=64, ge=4)


class AnalysisSettings(BaseModel):
    """Every option of every measure, concrete: what `metrics.json` records as `settings`.

    `recipe` is the training recipe of the model (its augmentation makes the training
    batches; its weight decay is the L2 term of the loss unless `weight_decay` is given).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    recipe: TrainConfig = TrainConfig()
    # L2 term of the loss. Left out (or None), the given recipe's: filled in on construction, so it is
    # always a number; the default below is the default recipe's.
    weight_decay: float = flag_field(
        "--weight-decay",
        "L2 term 0.5*wd*||w||^2 of the loss (hessian, landscape)",
        default=RECIPE_DEFAULTS[DEFAULT_RECIPE]["weight_decay"],
        ge=0,
        metavar="WD",
        default_text=f"the checkpoint's training weight decay, else the {DEFAULT_RECIPE} recipe's, "
        f"{RECIPE_DEFAULTS[DEFAULT_RECIPE]['weight_decay']:g}",
    )
    seed: int = flag_field("--seed", "seed of the training batches, start vectors, directions and subsets", default=0)
    batch_size: PositiveInt = flag_field("--batch-size", "evaluation batch size", default=256)  # changes no number
    # A metrics.json written before the name said which sets it shrinks records it as `subset`, and still reads.
    test_subset: float = flag_field(
        "--test-subset",
        "class-stratified fraction of the test and corrupted sets",
        default=1.0,
        gt=0,
        le=1,
        validation_alias=AliasChoices("test_subset", "subset"),
        metavar="FRACTION",
    )
    hessian: HessianSettings = Field(default=HessianSettings(), json_schema_extra={"group": "hessian"})
    images: PositiveInt = flag_field(
        "--images", "test images for feature maps", default=256, group="fourier / variance"
    )
    train_images: PositiveInt = flag_field(
        "--train-images",
        "augmented training images",
        default=10000,
        group="nll-train",
        default_text="10000, or the whole split if smaller",
    )
    landscape: LandscapeSettings = Field(default=LandscapeSettings(), json_schema_extra={"group": "landscape"})
    cka: CKASettings = Field(default=CKASettings(), json_schema_extra={"group": "cka"})

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
