"""The settings several commands share, each declared once: where the data lives, the device,
the fast model copy, progress bars and the torchrun timeout.

Each is a small pydantic model with one or two fields, and the settings models of the library
inherit the ones they take (`TrainSettings(DataSettings, ProgressSettings, DistSettings)`), so a
field's default, bounds, help and flag are written here only; `archdsl.commands.settings_flags`
makes the flags (`--data-root`, `--device`, ...) from them, as it does for every other setting.

Progress bars are on by default, for the library as for the commands: `archdsl.progress` draws
them only when stderr is a terminal, and into a log (a pipe, a notebook) writes one plain line
per epoch instead; `progress=False` (`--no-progress`) keeps a call quiet.

Light: pydantic only (the commands read these defaults to build their --help).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
)

from archdsl.errors import UsageError, did_you_mean

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEVICES",
    "TORCHRUN_GROUP",
    "DataSettings",
    "DeviceSettings",
    "DistSettings",
    "OptimizeSettings",
    "ProgressSettings",
    "Severity",
    "check_device",
    "flag_field",
    "validated",
]

DEVICES = ("auto", "cpu", "cuda", "mps")
# How long a collective waits for the other ranks before a torchrun run fails (archdsl.run.distributed).
DEFAULT_TIMEOUT_S = 300.0
# The --help section of the settings that matter only under torchrun.
TORCHRUN_GROUP = "under torchrun (docs/training.md: Data-parallel training)"


def check_device(name: str) -> str:
    """`name` if it names a device archdsl can pick (auto, cpu, cuda, cuda:N, mps), else ValueError."""
    kind, _, index = name.partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise ValueError(f"unknown device {name!r} (choose from {', '.join(DEVICES)}, or cuda:N)")
    return name


Model = TypeVar("Model", bound=BaseModel)


# What `flag_field` hands pydantic's Field; every other keyword describes the flag.
_FIELD_ARGUMENTS = ("default", "default_factory", "gt", "ge", "lt", "le", "validation_alias")


def flag_field(flag: str, help: str, **options: Any) -> Any:
    """A settings field that declares its command-line flag (archdsl.commands.settings_flags makes the flag):
    its default and bounds (`default`, `ge`, `le`, ...) go to pydantic's `Field`, every other option to the
    flag (`group`, `metavar`, `default_text`, `choices`, `comma_list`, `dest`, `objectives`; None: left out)."""
    field = {key: options.pop(key) for key in _FIELD_ARGUMENTS if key in options}
    extra = {key: list(value) if key == "choices" else value for key, value in options.items() if value is not None}
    return Field(description=help, json_schema_extra={"flag": flag, **extra}, **field)


def validated(
    model: type[Model], fields: Mapping[str, Any], *, what: str, elsewhere: Mapping[str, str] | None = None
) -> Model:
    """`model` from `fields`, or a `UsageError` naming every problem (the library's settings, as the
    commands' flags are checked): a missing or bad value; an unknown name with its hint, which is
    `elsewhere[name]` (where that setting goes instead) or the field it probably misspells."""
    try:
        return model.model_validate(dict(fields))
    except ValidationError as err:
        problems, hints = [], []
        for error in err.errors():
            name = ".".join(map(str, error["loc"])) or what
            if error["type"] != "extra_forbidden":
                problems.append(f"{name}: {error['msg']}")
                continue
            problems.append(f"{name}: unknown setting")
            hint = (elsewhere or {}).get(name) or did_you_mean(name, model.model_fields)
            if hint:
                hints.append(hint)
        raise UsageError(f"bad {what}: {'; '.join(problems)}", hint="; ".join(hints) or None) from None


def _severity(value: object) -> int:
    """A corruption severity of CIFAR-C, 1 (mild) to 5 (strong), from a number or a word."""
    if isinstance(value, bool) or str(value).strip() not in ("1", "2", "3", "4", "5"):
        raise ValueError(f"expected a severity from 1 to 5, got {value!r}")
    return int(str(value))


# A corruption severity (eval's, analyze's and search's `--severities 1,5`).
Severity = Annotated[int, BeforeValidator(_severity)]


class _Shared(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DataSettings(_Shared):
    """Where datasets live, and whether a missing one is downloaded."""

    data_root: str | None = Field(
        default=None,
        description="where datasets live",
        json_schema_extra={"flag": "--data-root", "metavar": "DIR", "default_text": "$ARCHDSL_DATA or ./data"},
    )
    download: bool = Field(
        default=False, description="download the dataset if it is missing", json_schema_extra={"flag": "--download"}
    )
    image_size: PositiveInt | None = Field(
        default=None,
        description="read a folder:, hf: or imagenet dataset's images at NxN (its size=), and give the spec "
        "NxN inputs where it can take them",
        json_schema_extra={
            "flag": "--image-size",
            "metavar": "N",
            "default_text": "the spec's input size (eval, analyze: the checkpoint's); search, data: the dataset's "
            "size=",
        },
    )


class DeviceSettings(_Shared):
    """The device a command computes on."""

    device: Annotated[str, AfterValidator(check_device)] = Field(
        default="auto",
        description="auto (CUDA, else MPS, else the CPU), cpu, cuda, cuda:N or mps",
        json_schema_extra={"flag": "--device", "metavar": "DEVICE"},
    )


class OptimizeSettings(_Shared):
    """Whether the model runs as `archdsl.optimize_model`'s fast copy."""

    optimize: bool = Field(
        default=True,
        description="run archdsl.optimize_model's fast copy of the model (channels_last, folded BatchNorm, "
        "micro-batches, torch.compile) where it computes the same numbers; --no-optimize: the model as built",
        json_schema_extra={"flag": "--optimize"},
    )


class ProgressSettings(_Shared):
    """Progress: a bar on a terminal; in a log, one plain line per training epoch (archdsl.progress)."""

    progress: bool = Field(
        default=True,
        description="progress on stderr: a bar on a terminal; elsewhere (a log file, a pipe) "
        "one plain line per training epoch",
        json_schema_extra={"flag": "--progress"},
    )


class DistSettings(_Shared):
    """How a torchrun group waits for its ranks."""

    dist_timeout: PositiveFloat = Field(
        default=DEFAULT_TIMEOUT_S,
        description="how long a rank waits for the others before the run fails with an error",
        json_schema_extra={"flag": "--dist-timeout", "metavar": "SECONDS", "group": TORCHRUN_GROUP},
    )
