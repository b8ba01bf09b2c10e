"""The training recipe as typed configuration, and the timm parts it assembles.

Two recipes:

- `deit` (the paper's; docs/reference.md, "Training recipe"): AdamW, lr 1.25e-4 per 96 images,
  weight decay 0.05, gradient clip 5, 5 warm-up epochs then cosine, label smoothing 0.1,
  Mixup 1.0 / CutMix 0.8 (prob 1.0) with soft-target cross-entropy, RandAugment
  `rand-m9-n2-mstd1.0`, random crop 32 pad 4, horizontal flip, no random erasing,
  stochastic depth 0.1.
- `weak`: the classic CIFAR ResNet recipe, for short runs (tests, search fidelities):
  Nesterov SGD lr 0.1 per 128 images, momentum 0.9, weight decay 5e-4, cosine without
  warm-up, crop + flip only, plain cross-entropy.

Fields left at `None` take the recipe's default when the config is built, so a
`TrainConfig` always holds concrete values (and is what a run directory records).
`RECIPE_DEFAULTS` is the one table of those defaults; the command line's help reads it too,
which is why this module imports torch only inside the functions that need it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

if TYPE_CHECKING:
    import torch
    from torch import nn

T = TypeVar("T")
RecipeName = Literal["deit", "weak"]
RECIPES: tuple[str, ...] = get_args(RecipeName)
DEFAULT_RECIPE: RecipeName = "deit"
DEFAULT_EPOCHS = 300  # the paper's schedule (after 5 warm-up epochs)

# Per recipe: the defaults of every field the user leaves out. The learning rate is given
# per `lr_batch` images and scaled linearly with the batch size (Goyal et al.).
RECIPE_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "deit": MappingProxyType(
            dict(
                batch_size=96,
                optimizer="adamw",
                base_lr=1.25e-4,
                lr_batch=96,
                weight_decay=0.05,
                momentum=0.9,
                clip_grad=5.0,
                warmup_epochs=5,
                label_smoothing=0.1,
                mixup=1.0,
                cutmix=0.8,
                mixup_prob=1.0,
                randaugment="rand-m9-n2-mstd1.0",
                drop_path=0.1,
            )
        ),
        "weak": MappingProxyType(
            dict(
                batch_size=128,
                optimizer="sgd",  # timm's "sgd" is Nesterov SGD
                base_lr=0.1,
                lr_batch=128,
                weight_decay=5e-4,
                momentum=0.9,
                clip_grad=None,
                warmup_epochs=0,
                label_smoothing=0.0,
                mixup=0.0,
                cutmix=0.0,
                mixup_prob=0.0,
                randaugment=None,
                drop_path=0.0,
            )
        ),
    }
)


class TrainConfig(BaseModel):
    """Everything that decides a training run's result (plus where it runs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    recipe: RecipeName = DEFAULT_RECIPE
    epochs: PositiveInt = DEFAULT_EPOCHS
    # Epochs after which a resumed run was lengthened (`train --resume --epochs N`): from each, the
    # learning-rate schedule is the one a run planned for the new length has at that step.
    extended_at: tuple[PositiveInt, ...] = ()
    batch_size: PositiveInt | None = None
    lr: float | None = Field(default=None, gt=0)
    optimizer: Literal["adamw", "sgd"] | None = None
    weight_decay: NonNegativeFloat | None = None
    momentum: NonNegativeFloat | None = None
    clip_grad: float | None = Field(default=None, gt=0)
    warmup_epochs: NonNegativeInt | None = None
    label_smoothing: float | None = Field(default=None, ge=0, lt=1)
    mixup: NonNegativeFloat | None = None  # Beta(alpha, alpha) of Mixup; 0 = off
    cutmix: NonNegativeFloat | None = None  # Beta(alpha, alpha) of CutMix; 0 = off
    mixup_prob: float | None = Field(default=None, ge=0, le=1)
    randaugment: str | None = None  # a timm RandAugment config string, or None
    crop_padding: NonNegativeInt = 4
    hflip: bool = True
    drop_path: float | None = Field(default=None, ge=0, lt=1)
    seed: int = 0
    subset: float = Field(default=1.0, gt=0, le=1)  # fraction of the training set (class-stratified)
    # Where and how fast it runs; none of these change the numbers on the CPU.
    device: str = "auto"
    workers: NonNegativeInt = 0
    # Keep the whole (small) training set as one uint8 tensor on the device and crop/flip
    # there, with no DataLoader: for recipes without RandAugment (which needs PIL).
    resident: bool = False
    channels_last: bool | None = None  # None: as `optimize` decides (archdsl.run.optimize), else as built (NCHW)
    amp: bool | None = None  # bf16 autocast; None: on for CUDA
    eval_batch_size: PositiveInt = 256
    optimize: bool = True  # train and evaluate the fast version of the model (archdsl.optimize_model)

    @model_validator(mode="before")
    @classmethod
    def _fill_recipe_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        recipe = data.get("recipe") or DEFAULT_RECIPE
        defaults = RECIPE_DEFAULTS.get(recipe)
        if defaults is None:  # let the Literal report the bad name
            return data
        for key in (
            "batch_size",
            "optimizer",
            "weight_decay",
            "momentum",
            "clip_grad",
            "warmup_epochs",
            "label_smoothing",
            "mixup",
            "cutmix",
            "mixup_prob",
            "drop_path",
        ):
            if data.get(key) is None:
                data[key] = defaults[key]
        # "none" spells "no RandAugment" on the command line.
        if "randaugment" not in data:
            data["randaugment"] = defaults["randaugment"]
        elif data["randaugment"] in ("", "none"):
            data["randaugment"] = None
        if data.get("lr") is None:
            data["lr"] = defaults["base_lr"] * int(data["batch_size"]) / defaults["lr_batch"]
        return data

    @property
    def uses_mixup(self) -> bool:
        return bool(self.mixup_prob) and bool(self.mixup or self.cutmix)

    def effective_warmup(self) -> int:
        """Warm-up epochs, clamped so that at least one epoch follows the warm-up."""
        return min(int(self.warmup_epochs or 0), self.epochs - 1)

    # Fields that may differ when a run is resumed: they decide where it runs, not what it computes.
    RUNTIME_FIELDS: ClassVar[tuple[str, ...]] = ("device", "workers", "eval_batch_size", "optimize")

    @model_validator(mode="after")
    def _resident_needs_tensor_augmentation(self) -> TrainConfig:
        if self.resident and self.randaugment:
            raise ValueError("resident data cannot use RandAugment (it runs on PIL images); set randaugment=None")
        return self

    def result_fields(self) -> dict[str, Any]:
        return self.model_dump(exclude=set(self.RUNTIME_FIELDS))


def filled(value: T | None) -> T:
    """A field the recipe fills in, read as the value it always holds once the config is built
    (`TrainConfig` declares them optional only so that the user may leave them out)."""
    if value is None:
        raise ValueError("a recipe field of TrainConfig is unset: build configs through TrainConfig(...)")
    return value


def make_loss(config: TrainConfig) -> nn.Module:
    """The training loss: soft-target cross-entropy with Mixup/CutMix, label smoothing, or plain cross-entropy."""
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
    from torch import nn

    if config.uses_mixup:
        return SoftTargetCrossEntropy()  # Mixup makes the (smoothed) soft targets
    if config.label_smoothing:
        return LabelSmoothingCrossEntropy(smoothing=config.label_smoothing)
    return nn.CrossEntropyLoss()


def make_mixup(config: TrainConfig, num_classes: int):
    """timm's Mixup/CutMix for the recipe, or None when it has none."""
    if not config.uses_mixup:
        return None
    from timm.data import Mixup

    return Mixup(
        mixup_alpha=config.mixup,
        cutmix_alpha=config.cutmix,
        prob=config.mixup_prob,
        label_smoothing=config.label_smoothing,
        num_classes=num_classes,
    )


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """timm's optimizer for the recipe (`adamw` or Nesterov `sgd`); weight decay as timm spares it (below)."""
    from timm.optim import create_optimizer_v2

    # timm's convention: no weight decay on 1-d parameters (BN, biases, AlterNet's relative-position
    # bias) nor on what the model's `no_weight_decay()` names (position embeddings, class tokens, Swin's tables).
    return create_optimizer_v2(
        model,
        opt=filled(config.optimizer),
        lr=filled(config.lr),
        weight_decay=filled(config.weight_decay),
        momentum=filled(config.momentum),
    )


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, steps_per_epoch: int):
    """timm's cosine schedule with linear warm-up, stepped per iteration (`step_update`)."""
    from timm.scheduler import CosineLRScheduler

    warmup = config.effective_warmup()
    # Stepped per iteration (smoother than per epoch for short runs); cosine after the warm-up.
    return CosineLRScheduler(
        optimizer,
        # At least 2: a one-step cosine is a constant anyway, and timm warns about it.
        t_initial=max(2, (config.epochs - warmup) * steps_per_epoch),
        warmup_t=warmup * steps_per_epoch,
        warmup_lr_init=min(1e-6, filled(config.lr)),
        warmup_prefix=True,
        lr_min=min(1e-6, filled(config.lr)),
        t_in_epochs=False,
    )
