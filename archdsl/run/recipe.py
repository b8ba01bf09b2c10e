"""The training recipe as typed configuration, and the timm parts it assembles.

Three recipes (docs/training.md has every field of each, and where it comes from):

- `deit`: the paper's, exactly the reference implementation's `configs/cifar100_vit.yaml`
  ("used for both CNNs and ViTs"): AdamW lr 1.25e-4 per 96 images, weight decay 0.05 on every
  parameter, gradient clip 5, 5 warm-up epochs (linear from 0, per iteration) then 300 epochs of
  cosine to 0 stepped per epoch, label smoothing 0.1, Mixup 1.0 / CutMix 0.8 (prob 1.0) with
  soft-target cross-entropy, RandAugment `rand-m9-n2-mstd1.0`, random crop with padding 4,
  horizontal flip, stochastic depth 0.1.
- `weak`: exactly the reference's `configs/cifar100_general.yaml` (weak augmentation): SGD with
  plain momentum 0.9, lr 0.1 per 128 images, weight decay 5e-4 on every parameter, 1 warm-up
  epoch then 200 epochs of MultiStepLR (x0.2 after 60, 120 and 160), crop + flip only.
- `fast`: archdsl's short-run recipe (tests, search fidelities; docs/results.md measures it against
  the other two): Nesterov SGD lr 0.1 per 128 images, weight decay 5e-4 (timm's parameter groups),
  cosine stepped every iteration from the first step, crop + flip only.

`--epochs` counts every epoch the run trains, warm-up included (the reference's 5 + 300 is
`epochs: 305`); the main schedule spans the epochs after the warm-up.

Fields left out take the recipe's default when the config is built, so a `TrainConfig` always
holds concrete values (and is what a run directory records). `RECIPE_DEFAULTS` is the one table
of those defaults; each field's `description` is its help, and `train`'s and `search`'s flags
are generated from both (archdsl.commands.recipe_flags). Light: torch only inside functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import BeforeValidator, ConfigDict, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from archdsl import markdown
from archdsl.common_settings import (
    MAX_BATCH_SIZE,
    MAX_EPOCHS,
    TORCHRUN_GROUP,
    DeviceSettings,
    OptimizeSettings,
    flag_field,
    setting_flags,
    show,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

RecipeName = Literal["deit", "weak", "fast"]
RECIPES: tuple[str, ...] = get_args(RecipeName)
DEFAULT_RECIPE: RecipeName = "deit"
OptimizerName = Literal["adamw", "sgd", "momentum"]  # timm's names: `sgd` is Nesterov, `momentum` plain
ScheduleName = Literal["cosine", "multistep"]
ModelDtype = Literal["float32", "float64"]

# Where each recipe comes from, for docs/training.md's table.
RECIPE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "deit": "xxxnell/how-do-vits-work configs/cifar100_vit.yaml, ops/trains.py, ops/schedulers.py",
        "weak": "xxxnell/how-do-vits-work configs/cifar100_general.yaml, ops/trains.py, ops/schedulers.py",
        "fast": "archdsl's own, for short runs (the `weak` recipe of archdsl before 0.x)",
    }
)

# The regularisation of the SGD recipes (`weak`, `fast`): a random crop and a flip, nothing else.
_CROP_AND_FLIP_ONLY: Mapping[str, Any] = MappingProxyType(
    dict(
        clip_grad=0.0, label_smoothing=0.0, mixup=0.0, cutmix=0.0, mixup_prob=0.0, drop_path=0.0,  # all off
        randaugment=None, crop_padding=4, hflip=0.5,  # the augmentation: crop and flip
    )
)  # fmt: skip
# Per recipe: the defaults of every field the user leaves out. The learning rate is given
# per `lr_batch` images and scaled linearly with the batch size (Goyal et al.).
RECIPE_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "deit": MappingProxyType(
            dict(
                epochs=305,  # 5 warm-up + 300 cosine
                batch_size=96,
                base_lr=1.25e-4,
                lr_batch=96,
                optimizer="adamw",
                weight_decay=0.05,
                weight_decay_params="all",
                momentum=0.9,
                sched="cosine",
                sched_on_updates=False,
                decay_milestones=(),
                decay_rate=0.1,
                warmup_epochs=5,
                warmup_lr=0.0,
                min_lr=0.0,
                clip_grad=5.0,
                label_smoothing=0.1,
                mixup=1.0,
                cutmix=0.8,
                mixup_prob=1.0,
                randaugment="rand-m9-n2-mstd1.0",
                crop_padding=4,
                hflip=0.5,
                drop_path=0.1,
            )
        ),
        "weak": MappingProxyType(
            dict(
                epochs=201,  # 1 warm-up + 200 multistep
                batch_size=128,
                base_lr=0.1,
                lr_batch=128,
                optimizer="momentum",  # nesterov false
                weight_decay=5e-4,
                weight_decay_params="all",
                momentum=0.9,
                sched="multistep",
                sched_on_updates=False,
                decay_milestones=(60, 120, 160),
                decay_rate=0.2,
                warmup_epochs=1,
                warmup_lr=0.0,
                min_lr=0.0,
                **_CROP_AND_FLIP_ONLY,
            )
        ),
        "fast": MappingProxyType(
            dict(
                epochs=200,
                batch_size=128,
                base_lr=0.1,
                lr_batch=128,
                optimizer="sgd",  # timm's "sgd" is Nesterov SGD
                weight_decay=5e-4,
                weight_decay_params="filtered",
                momentum=0.9,
                sched="cosine",
                sched_on_updates=True,
                decay_milestones=(),
                decay_rate=0.1,
                warmup_epochs=0,
                warmup_lr=1e-6,
                min_lr=1e-6,
                **_CROP_AND_FLIP_ONLY,
            )
        ),
    }
)
# The fields the recipe fills in (RECIPE_DEFAULTS less how the learning rate is given).
RECIPE_FIELDS: tuple[str, ...] = tuple(k for k in RECIPE_DEFAULTS["deit"] if k not in ("base_lr", "lr_batch"))
# Fields whose None is a value ("off"), not "the recipe's".
_NONE_IS_A_VALUE = ("randaugment",)

# The --help section (and docs/training.md's table) of the recipe's fields: `train`'s and `search`'s flags.
RECIPE_GROUP = "recipe settings (timm train.py's names; docs/training.md)"


def _recipe_field(flag: str, help: str, **bounds: Any) -> Any:
    """A field the recipe fills in: `flag` is its timm train.py name, `help` its --help text. It declares
    no default: `TrainConfig` fills in the chosen recipe's value before validation (a field left out, or
    None), so a built config holds a concrete value in each, and no reader has to resolve one."""
    return flag_field(flag, help, group=RECIPE_GROUP, **bounds)


def _val_size(value: Any) -> Any:
    """--val-split's value (a text from the command line, or a number), checked as the data split checks it."""
    from archdsl.data.validation import check_val_size, parse_val_split
    from archdsl.errors import UserError

    try:
        if isinstance(value, str):
            return parse_val_split(value)
        if value is not None:
            check_val_size(value)
    except UserError as err:
        raise ValueError(err.message) from None
    return value


def _scaled_lr(defaults: Mapping[str, Any], batch_size: int) -> float:
    """A recipe's learning rate at `batch_size`: its rate per `lr_batch` images, scaled linearly."""
    return defaults["base_lr"] * batch_size / defaults["lr_batch"]


class TrainConfig(DeviceSettings, OptimizeSettings):
    """Everything that decides a training run's result (plus where it runs: `device`, `optimize`
    and the other RUNTIME_FIELDS), resolved: each field of the recipe holds the value the run uses
    (given, else the recipe's), filled in once, when the config is built. A field with a flag is
    `archdsl train`'s flag; those of the RECIPE_GROUP are `archdsl search`'s too
    (archdsl.commands.recipe_flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    recipe: RecipeName = flag_field(
        "--recipe",
        "training recipe: deit (the paper's), weak (the reference's SGD one) or fast (short runs); each "
        "recipe setting defaults to the recipe's value",
        default=DEFAULT_RECIPE,
    )
    epochs: PositiveInt = _recipe_field(
        "--epochs",
        "epochs in all, warm-up included (the main schedule spans the rest); with --resume, more than the run's "
        "extends it",
        le=MAX_EPOCHS,
    )
    # Epochs after which a resumed run was lengthened (`train --resume --epochs N`): from each, the
    # learning-rate schedule is the one a run planned for the new length has at that step.
    extended_at: tuple[PositiveInt, ...] = ()
    batch_size: PositiveInt = _recipe_field(
        "--batch-size", "batch size (Mixup/CutMix need an even one)", le=MAX_BATCH_SIZE
    )
    lr: float = _recipe_field(
        "--lr", "peak learning rate; left out, the recipe's scaled linearly with the batch size", gt=0
    )
    optimizer: OptimizerName = _recipe_field(
        "--opt", "optimizer: adamw, sgd (Nesterov momentum, timm's name) or momentum (plain SGD with momentum)"
    )
    weight_decay: NonNegativeFloat = _recipe_field(
        "--weight-decay", "weight decay (decoupled for adamw, added to the gradient for SGD)"
    )
    weight_decay_params: Literal["all", "filtered"] = _recipe_field(
        "--weight-decay-params",
        "which parameters weight decay applies to: all (the reference's optimizers) or filtered (timm's "
        "create_optimizer_v2: none on 1-d tensors such as biases and norms, nor on what the model's "
        "no_weight_decay() names)",
    )
    momentum: NonNegativeFloat = _recipe_field("--momentum", "SGD momentum (ignored by adamw)")
    sched: ScheduleName = _recipe_field(
        "--sched",
        "learning-rate schedule after the warm-up: cosine (from --lr down to --min-lr over the main epochs) "
        "or multistep (x --decay-rate at each of --decay-milestones)",
    )
    sched_on_updates: bool = _recipe_field(
        "--sched-on-updates", "step the schedule after every iteration instead of every epoch"
    )
    decay_milestones: tuple[NonNegativeInt, ...] = _recipe_field(
        "--decay-milestones", "multistep: epochs after the warm-up at which the learning rate drops (comma-separated)"
    )
    decay_rate: NonNegativeFloat = _recipe_field("--decay-rate", "multistep: the factor at each milestone")
    warmup_epochs: NonNegativeInt = _recipe_field(
        "--warmup-epochs",
        "epochs of linear warm-up, stepped every iteration, from --warmup-lr to --lr (counted in --epochs; "
        "at most --epochs - 1)",
    )
    warmup_lr: NonNegativeFloat = _recipe_field("--warmup-lr", "learning rate of the first warm-up step (at most --lr)")
    min_lr: NonNegativeFloat = _recipe_field("--min-lr", "cosine: the learning rate it ends at (at most --lr)")
    clip_grad: NonNegativeFloat = _recipe_field(
        "--clip-grad", "clip the gradient's global L2 norm to this (0: no clipping)"
    )
    label_smoothing: float = _recipe_field("--smoothing", "label smoothing", ge=0, lt=1)
    mixup: NonNegativeFloat = _recipe_field("--mixup", "Mixup's Beta(alpha, alpha); 0: off")
    cutmix: NonNegativeFloat = _recipe_field("--cutmix", "CutMix's Beta(alpha, alpha); 0: off")
    mixup_prob: float = _recipe_field(
        "--mixup-prob", "probability of mixing a batch (Mixup or CutMix, one of the two at random)", ge=0, le=1
    )
    # None is a value here: no RandAugment (`--aa none`).
    randaugment: str | None = _recipe_field("--aa", "timm RandAugment string (e.g. rand-m9-n2-mstd1.0), or none")
    crop_padding: NonNegativeInt = _recipe_field(
        "--crop-padding",
        "random crop of the image size from the image zero-padded by this much; 0: no crop (the default on "
        "odd-one-out, whose objects a crop would cut)",
    )
    hflip: float = _recipe_field("--hflip", "probability of a horizontal flip", ge=0, le=1)
    drop_path: float = _recipe_field(
        "--drop-path", "stochastic depth rate, growing linearly over the blocks", ge=0, lt=1
    )
    # float64 on the CPU is for step-for-step comparisons (tests/test_train_parity.py); it turns autocast off.
    model_dtype: ModelDtype = flag_field(
        "--model-dtype",
        "the dtype of the model's parameters and inputs (float64: exact comparisons, slow)",
        default="float32",
        group=RECIPE_GROUP,
    )
    # The weights the run started from, as given; None: a fresh model.
    initial_checkpoint: str | None = flag_field(
        "--initial-checkpoint",
        "start from these weights instead of a fresh model: an archdsl checkpoint, or any file `archdsl import` "
        "reads (the reference's .pth.tar, a timm file, a state dict); with --resume, only the run's own",
        default=None,
        metavar="FILE",
    )
    seed: int = flag_field(
        "--seed", "random seed: the weights, shuffling, augmentation and Mixup all follow it", default=0, metavar="N"
    )
    subset: float = flag_field(
        "--subset",
        "train on a class-stratified fraction of the training set (the test set stays whole)",
        default=1.0,
        gt=0,
        le=1,
        metavar="FRACTION",
    )
    val_split: Annotated[float | int, BeforeValidator(_val_size)] | None = flag_field(
        "--val-split",
        "hold out a fixed, class-stratified validation split of the training set (a fraction such as 0.1 "
        "or a count such as 5000) and report its loss and top-1 every epoch; off by default",
        default=None,
        metavar="SIZE",
    )
    # Under torchrun (archdsl.run.distributed): nothing in one process.
    sync_bn: bool = flag_field(
        "--sync-bn",
        "normalise BatchNorm with the global batch's statistics (torch's SyncBatchNorm; CUDA only)",
        default=False,
        group=TORCHRUN_GROUP,
    )
    # Where and how fast it runs (with `device` and `optimize`); none of these change the numbers on the CPU.
    workers: NonNegativeInt | None = flag_field(  # None: archdsl.run.loader.default_workers, shown as "auto"
        "--workers",
        "data-loading worker processes (RandAugment and decoding run there); at most 4 per CPU core; "
        "auto: min(4, CPU cores) for images read from disk (folder:, imagenet), 0 for sets held in memory",
        default=None,
        metavar="N",
        default_text="auto",
    )
    # No DataLoader: RandAugment needs PIL images.
    resident: bool = flag_field(
        "--resident",
        "keep the training set on the device and crop and flip there (recipes without RandAugment: weak, fast, "
        "or --aa none)",
        default=False,
    )
    channels_last: bool | None = None  # None: as `optimize` decides (archdsl.run.optimize), else as built (NCHW)
    amp: bool | None = None  # bf16 autocast; None: on for CUDA with float32 models
    eval_batch_size: PositiveInt = 256

    @model_validator(mode="before")
    @classmethod
    def _fill_recipe_defaults(cls, data: Any) -> Any:
        """The one place a recipe's defaults are resolved: every recipe field left out (or None) takes the
        chosen recipe's value, the learning rate scaled to the batch size."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        # An unknown recipe is the Literal's to report; the default recipe's values keep its fields from
        # being reported missing besides.
        defaults = RECIPE_DEFAULTS.get(data.get("recipe") or DEFAULT_RECIPE, RECIPE_DEFAULTS[DEFAULT_RECIPE])
        for key in RECIPE_FIELDS:
            if key in _NONE_IS_A_VALUE:
                continue
            if data.get(key) is None:
                data[key] = defaults[key]
        # "none" spells "no RandAugment" on the command line.
        if "randaugment" not in data:
            data["randaugment"] = defaults["randaugment"]
        elif data["randaugment"] in ("", "none"):
            data["randaugment"] = None
        if data.get("lr") is None:
            data["lr"] = _scaled_lr(defaults, int(data["batch_size"]))
        return data

    @property
    def uses_mixup(self) -> bool:
        return bool(self.mixup_prob) and bool(self.mixup or self.cutmix)

    def effective_warmup(self) -> int:
        """Warm-up epochs, clamped so that at least one epoch follows the warm-up."""
        return min(self.warmup_epochs, self.epochs - 1)

    # Fields that may differ when a run is resumed: they decide where it runs, not what it computes.
    RUNTIME_FIELDS: ClassVar[tuple[str, ...]] = ("device", "workers", "eval_batch_size", "optimize")

    @model_validator(mode="after")
    def _resident_needs_tensor_augmentation(self) -> TrainConfig:
        if self.resident and self.randaugment:
            raise ValueError("resident data cannot use RandAugment (it runs on PIL images); set randaugment=None")
        return self

    def result_fields(self) -> dict[str, Any]:
        return self.model_dump(exclude=set(self.RUNTIME_FIELDS))


def recipe_flags() -> dict[str, tuple[str, str]]:
    """TrainConfig field -> (its command-line flag, its help) for every field of the recipe (the RECIPE_GROUP)."""
    return {flag.field: (flag.flag, flag.help) for flag in setting_flags(TrainConfig) if flag.group == RECIPE_GROUP}


def recipe_values(field: str) -> list[str]:
    """A field of the RECIPE_GROUP as each recipe sets it (in RECIPES' order), as --help and the docs show it."""
    if field == "lr":
        return [f"{show(RECIPE_DEFAULTS[r]['base_lr'])} x batch/{RECIPE_DEFAULTS[r]['lr_batch']}" for r in RECIPES]
    if field not in RECIPE_FIELDS:  # one default for every recipe (model_dtype)
        return [show(TrainConfig.model_fields[field].default)] * len(RECIPES)
    return [show(RECIPE_DEFAULTS[r][field]) for r in RECIPES]


def per_recipe(field: str) -> str:
    """`96 deit, 128 weak, 128 fast`: a field's default in each recipe (one value when they agree), for --help."""
    values = recipe_values(field)
    if len(set(values)) == 1:
        return values[0]
    return ", ".join(f"{value} {recipe}" for value, recipe in zip(values, RECIPES, strict=True))


def recipe_table() -> str:
    """docs/training.md's table of every recipe field's flag and value per recipe (a test holds the
    page to this text)."""
    header = ["flag", *(f"`{recipe}`" for recipe in RECIPES), "meaning"]
    rows = [[f"`{flag}`", *recipe_values(field), help_text] for field, (flag, help_text) in recipe_flags().items()]
    return "\n".join(markdown.table(header, rows)) + "\n"


def recipe_command_words(settings: dict[str, Any]) -> list[str]:
    """`--opt adamw --decay-milestones 60,120`: the flags that give `settings` back."""
    flags = recipe_flags()
    words: list[str] = []
    for field, value in settings.items():
        flag = flags[field][0]
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, tuple):
            words += [flag, ",".join(map(str, value))]
        else:
            words += [flag, "none" if value is None else str(value)]
    return words


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
    """timm's optimizer for the recipe (`adamw`, Nesterov `sgd`, plain `momentum`), decaying every
    parameter (one group, as the reference's `optim.AdamW(model.parameters(), ...)`) or as timm
    spares them (`weight_decay_params="filtered"`)."""
    from timm.optim import create_optimizer_v2

    # Given a module, timm makes groups: no weight decay on 1-d parameters (BN, biases, AlterNet's
    # relative-position bias) nor on what the model's `no_weight_decay()` names (position embeddings,
    # class tokens, Swin's tables). Given the parameters, it makes one group that decays them all.
    target = model if config.weight_decay_params == "filtered" else list(model.parameters())
    return create_optimizer_v2(
        target,
        opt=config.optimizer,
        lr=config.lr,
        weight_decay=config.weight_decay,
        momentum=config.momentum,
    )
