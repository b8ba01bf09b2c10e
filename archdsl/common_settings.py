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

import functools
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidationError,
)

from archdsl import markdown
from archdsl.errors import UsageError, did_you_mean

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEVICES",
    "MAX_BATCH_SIZE",
    "MAX_EPOCHS",
    "MAX_IMAGE_SIZE",
    "MAX_SEEDS",
    "MAX_WAIT_S",
    "TORCHRUN_GROUP",
    "DataSettings",
    "DeviceSettings",
    "DistSettings",
    "OptimizeSettings",
    "ProgressSettings",
    "SettingFlag",
    "Severity",
    "base_types",
    "check_device",
    "choices_of",
    "default_text",
    "field_adapter",
    "flag_field",
    "is_bool",
    "is_tuple",
    "setting_flags",
    "settings_table",
    "show",
    "validated",
]

DEVICES = ("auto", "cpu", "cuda", "mps")
# How long a collective waits for the other ranks before a torchrun run fails (archdsl.run.distributed).
DEFAULT_TIMEOUT_S = 300.0
# The upper bounds of the settings that size work, shared by the commands that take them (--help states each):
# past them a run is a typo or an accident, not a plan (a ladder of budgets doubling 1,100 times, a batch of 10^8).
MAX_EPOCHS = 10_000  # epochs one training run (or one rung of the search's ladder) may train
MAX_BATCH_SIZE = 65_536
MAX_IMAGE_SIZE = 4_096  # pixels a side
MAX_SEEDS = 100  # paired seeds a search measures each design on (--seeds, --max-seeds)
MAX_WAIT_S = 86_400.0  # a day: the longest a rank, a heartbeat or a grace period waits
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


# --------------------------------------------------------------------------- the flags fields declare
# A field takes part when it declares its flag (`flag_field`, or `Field(..., description=HELP,
# json_schema_extra={"flag": "--name"})`); optional extras are `group` (the --help section, also on a nested
# model's field for all of its flags), `metavar`, `default_text` (what --help says for a default that is not
# a plain value), `choices` (for a text field a validator checks, as search's `--strategy`), `required` (a
# field without a default), `comma_list` (a text field the model splits itself, which a --config file may
# give as a YAML list) and `dest` (the argparse name, where it is not the flag's). A field whose type is
# itself a settings model (the analysis's `hessian: HessianSettings`) contributes that model's flags. What
# follows reads the declarations back, for the command line (archdsl.commands.settings_flags makes the
# flags from them) and the docs' tables (`settings_table`).


def show(value: Any) -> str:
    """A default as --help and the docs show it: `none`, `on`, `1,5`, `0.001`."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True)
class SettingFlag:
    """One generated flag: the field it sets (a path into nested models), its flag and help."""

    path: tuple[str, ...]  # ("hessian", "k")
    model: type[BaseModel]  # the model that declares the field
    field: str
    flag: str
    help: str
    group: str | None
    metavar: str | None
    default_text: str | None
    choices: tuple[Any, ...] | None = None
    comma_list: bool = False
    own_dest: str | None = None
    required: bool = False  # a field without a default (train's --dataset)

    @property
    def dest(self) -> str:
        """The argparse destination: the flag's name (`--hessian-batch-size` -> hessian_batch_size)."""
        return self.own_dest or self.flag.lstrip("-").replace("-", "_")

    @property
    def default(self) -> Any:
        """The field's default; None for one the model fills in itself (TrainConfig's recipe fields)."""
        info = self.model.model_fields[self.field]
        return None if info.is_required() else info.default


def setting_flags(
    model: type[BaseModel], *, exclude: Iterable[str] = (), only: Iterable[str] | None = None
) -> list[SettingFlag]:
    """Every flag `model` (and the settings models in its fields) declares, in field order, but those in
    `exclude` and, given `only`, those not in it (field names or dotted paths)."""
    skipped, kept, found = set(exclude), None if only is None else set(only), []
    for flag in _declared(model, None, ()):
        names = {flag.field, ".".join(flag.path)}
        if not names & skipped and (kept is None or names & kept):
            found.append(flag)
    return found


def _declared(model: type[BaseModel], group: str | None, path: tuple[str, ...]) -> list[SettingFlag]:
    """The flags `model`'s fields declare (`group`: the --help section a nested model's field names)."""
    found = []
    for name, info in _own_fields_first(model):
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        own_group = extra.get("group", group)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) and "flag" not in extra:
            if "group" in extra:  # a nested settings model takes part by naming its --help section
                found += _declared(info.annotation, str(own_group), (*path, name))
            continue
        if "flag" not in extra:
            continue
        found.append(
            SettingFlag(
                path=(*path, name),
                model=model,
                field=name,
                flag=str(extra["flag"]),
                help=info.description or "",
                group=None if own_group is None else str(own_group),
                metavar=None if "metavar" not in extra else str(extra["metavar"]),
                default_text=None if "default_text" not in extra else str(extra["default_text"]),
                choices=tuple(extra["choices"]) if "choices" in extra else None,  # type: ignore[arg-type]
                comma_list=bool(extra.get("comma_list", False)),
                own_dest=None if "dest" not in extra else str(extra["dest"]),
                required=bool(extra.get("required", False)),
            )  # fmt: skip
        )
    return found


def _own_fields_first(model: type[BaseModel]) -> list[tuple[str, Any]]:
    """`model`'s fields, those it declares itself before those of the shared settings it inherits
    (archdsl.common_settings), which pydantic lists first: the command's own flags lead its --help."""
    # "Own": not a field of any base model (read from pydantic, not from `__annotations__`, which
    # Python 3.14 fills lazily).
    inherited = {name for base in model.__mro__[1:] if issubclass(base, BaseModel) for name in base.model_fields}
    own = {name for name in model.model_fields if name not in inherited}
    fields = list(model.model_fields.items())
    return [item for item in fields if item[0] in own] + [item for item in fields if item[0] not in own]


def choices_of(annotation: Any) -> tuple[Any, ...] | None:
    """The values of a Literal (inside an Optional), for argparse's choices (none for a list)."""
    if is_tuple(annotation):
        return None
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return None


def is_tuple(annotation: Any) -> bool:
    """A tuple, also inside Optional[...] and Annotated[...] (analyze's checked `--metrics`)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return is_tuple(typing.get_args(annotation)[0])
    return typing.get_origin(annotation) is tuple or any(map(is_tuple, _union_args(annotation)))


def _union_args(annotation: Any) -> tuple[Any, ...]:
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return typing.get_args(annotation) if union else ()


def is_bool(annotation: Any) -> bool:
    return annotation is bool or bool in typing.get_args(annotation)


def base_types(annotation: Any) -> set[Any]:
    """int, float, ... inside Optional[...] and Annotated[...] (pydantic's PositiveInt)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return base_types(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(base_types(arg) for arg in typing.get_args(annotation)))
    return {annotation}


@functools.cache
def field_adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    """The field's type with its constraints (`ge=0`, an AfterValidator): a value checked as `model` checks
    it, alone (a flag's word). Made when first asked for."""
    info = model.model_fields[field]
    # The field's constraints (ge=0, lt=1) are its metadata; the rest of its FieldInfo (an alias)
    # means nothing outside the model.
    annotated: Any = typing.Annotated
    parts = (info.annotation, *info.metadata)
    annotation: Any = annotated[parts] if info.metadata else info.annotation
    return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))


def default_text(flag: SettingFlag) -> str:
    """The default as --help and the docs' tables show it."""
    if flag.required:
        return "required"
    return flag.default_text if flag.default_text is not None else show(flag.default)


def settings_table(model: type[BaseModel], *, exclude: Iterable[str] = ()) -> str:
    """A Markdown table of `model`'s flags (but those in `exclude`), defaults and meanings, for the
    docs (a test holds the page to it)."""
    rows = [[f"`{flag.flag}`", default_text(flag), flag.help] for flag in setting_flags(model, exclude=exclude)]
    return "\n".join(markdown.table(["flag", "default", "meaning"], rows)) + "\n"


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

    data_root: str | None = flag_field(
        "--data-root", "where datasets live", default=None, metavar="DIR", default_text="$ARCHDSL_DATA or ./data"
    )
    download: bool = flag_field("--download", "download the dataset if it is missing", default=False)
    image_size: PositiveInt | None = flag_field(
        "--image-size",
        "read a folder:, hf: or imagenet dataset's images at NxN (its size=), and give the spec NxN inputs where "
        "it can take them",
        default=None,
        le=MAX_IMAGE_SIZE,
        metavar="N",
        default_text="the spec's input size (eval, analyze: the checkpoint's); search, data: the dataset's size=",
    )


class DeviceSettings(_Shared):
    """The device a command computes on."""

    device: Annotated[str, AfterValidator(check_device)] = flag_field(
        "--device", "auto (CUDA, else MPS, else the CPU), cpu, cuda, cuda:N or mps", default="auto", metavar="DEVICE"
    )


class OptimizeSettings(_Shared):
    """Whether the model runs as `archdsl.optimize_model`'s fast copy."""

    optimize: bool = flag_field(
        "--optimize",
        "run archdsl.optimize_model's fast copy of the model (channels_last, folded BatchNorm, micro-batches, "
        "torch.compile) where it computes the same numbers; --no-optimize: the model as built",
        default=True,
    )


class ProgressSettings(_Shared):
    """Progress: a bar on a terminal; in a log, one plain line per training epoch (archdsl.progress)."""

    progress: bool = flag_field(
        "--progress",
        "progress on stderr: a bar on a terminal; elsewhere (a log file, a pipe) one plain line per training epoch",
        default=True,
    )


class DistSettings(_Shared):
    """How a torchrun group waits for its ranks."""

    dist_timeout: PositiveFloat = flag_field(
        "--dist-timeout",
        "how long a rank waits for the others before the run fails with an error",
        default=DEFAULT_TIMEOUT_S,
        le=MAX_WAIT_S,
        metavar="SECONDS",
        group=TORCHRUN_GROUP,
    )
