"""Command-line flags made from a settings model: each setting is declared once, as a pydantic field
with its default, bounds and help, and its flag is generated here.

A field takes part when it declares its flag: `Field(..., description=HELP,
json_schema_extra={"flag": "--name"})`; optional extras are `group` (the --help section, also on a
nested model's field for all of its flags), `metavar`, `default_text` (what --help says for a
default that is not a plain value), `choices` (for a text field a validator checks, as search's
`--strategy`), `required` (a field without a default), `comma_list` (a text field the model splits
itself, which a --config file may give as a YAML list) and `dest` (the argparse name, where it is
not the flag's). A bool field is a switch pair, `--x/--no-x`. A field whose type is itself a
settings model (the analysis's `hessian: HessianSettings`) contributes that model's flags. Every
flag defaults to None, "left out": the model's own default applies (so --help, the command and a
Python caller share one default). Values pass the field's own pydantic checks, so `--k 0` exits 2
with the field's message, and `--config` files take the same keys (archdsl.commands.config_file
reads the parser's flags). Light: pydantic only.
"""

from __future__ import annotations

import argparse
import functools
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from archdsl.commands.recording_parser import ArgumentSection, RecordingParser


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


def setting_flags(model: type[BaseModel], *, group: str | None = None, path: tuple[str, ...] = ()) -> list[SettingFlag]:
    """Every flag `model` (and the settings models in its fields) declares, in field order."""
    found = []
    for name, info in _own_fields_first(model):
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        own_group = extra.get("group", group)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) and "flag" not in extra:
            if "group" in extra:  # a nested settings model takes part by naming its --help section
                found += setting_flags(info.annotation, group=str(own_group), path=(*path, name))
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


@functools.cache
def _adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    """The field's type with its constraints (`ge=0`, an AfterValidator), made when a flag is first given."""
    info = model.model_fields[field]
    # The field's constraints (ge=0, lt=1) are its metadata; the rest of its FieldInfo (an alias)
    # means nothing outside the model.
    annotated: Any = typing.Annotated
    parts = (info.annotation, *info.metadata)
    annotation: Any = annotated[parts] if info.metadata else info.annotation
    return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))


def _expected(message: str, *, integer: bool = False) -> str:
    """pydantic's `Input should be greater than 0` as `expected a value greater than 0`."""
    wanted = message.removeprefix("Input should be ")
    if integer and wanted == "greater than or equal to 0":  # a count: `--max-retry -1`, as _args says it
        return "expected an integer >= 0"
    if wanted.startswith(("greater", "less")):
        wanted = "a value " + wanted
    return "expected " + wanted


def _is_fraction(metadata: list[Any]) -> bool:
    """Whether a field's bounds are `gt=0, le=1` (a share: --subset, --test-subset)."""
    bounds = {(type(m).__name__, getattr(m, type(m).__name__.lower(), None)) for m in metadata}
    return bounds == {("Gt", 0), ("Le", 1)}


def value_parser(model: type[BaseModel], field: str, *, comma_list: bool = False) -> Callable[[str], Any]:
    """One command-line word -> the field's value, checked as `model` checks it (`comma_list`: a
    text the model splits itself, marked a list for --config files)."""
    info = model.model_fields[field]
    listed = is_tuple(info.annotation)
    choices = choices_of(info.annotation)
    integer = int in _base_types(info.annotation) and float not in _base_types(info.annotation)
    fraction = _is_fraction(info.metadata)
    numeric_choices = bool(choices) and all(isinstance(c, int) and not isinstance(c, bool) for c in choices or ())

    def parse(text: str) -> Any:
        # (`--aa none` stays the word "none", which TrainConfig reads as "no RandAugment": a None
        # here would mean "left out", the model's default.)
        value: Any = [part.strip() for part in text.split(",") if part.strip()] if listed else text
        if choices and not numeric_choices and text not in choices:
            return text  # argparse refuses it next, as for any flag with choices: "invalid choice: ..."
        if numeric_choices:  # `--landscape-dims 2`: the word as the number argparse's choices hold
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        try:
            return _adapter(model, field).validate_python(value)
        except ValidationError as err:
            error = err.errors()[0]
            if error["type"] == "value_error":  # the field's own validator says it whole (`unknown device 'gpu' ...`)
                raise argparse.ArgumentTypeError(str(error["ctx"]["error"])) from None
            if error["type"] in ("int_parsing", "int_from_float"):  # as argparse's type=int says it
                raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
            if fraction and error["type"] in ("greater_than", "less_than_equal"):  # a share of a dataset
                raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}") from None
            message = _expected(error["msg"], integer=integer)
            raise argparse.ArgumentTypeError(f"{message}, got {text!r}") from None

    parse.__name__ = field  # argparse names the type in some messages
    parse.comma_list = listed or comma_list  # type: ignore[attr-defined]  # a --config file may give a YAML list
    return parse


def _base_types(annotation: Any) -> set[Any]:
    """int, float, ... inside Optional[...] and Annotated[...] (pydantic's PositiveInt)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _base_types(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(_base_types(arg) for arg in typing.get_args(annotation)))
    return {annotation}


def metavar_of(annotation: Any) -> str:
    kinds = _base_types(annotation)
    if is_tuple(annotation):
        return "N,N"
    if int in kinds:
        return "N"
    return "X" if float in kinds else "TEXT"


Container = RecordingParser | ArgumentSection


def add_setting(container: Container, flag: SettingFlag, help_text: str) -> None:
    """`flag` on `container` (default None: left out), with `help_text` as its help."""
    annotation = flag.model.model_fields[flag.field].annotation
    shown = help_text.replace("%", "%%")
    if is_bool(annotation):
        container.add_argument(
            flag.flag, dest=flag.dest, action=argparse.BooleanOptionalAction, default=None, help=shown
        )
        return
    choices = flag.choices or choices_of(annotation)
    metavar = flag.metavar or (None if choices else metavar_of(annotation))
    parse = value_parser(flag.model, flag.field, comma_list=flag.comma_list)
    container.add_argument(
        flag.flag, dest=flag.dest, type=parse, choices=choices, metavar=metavar,
        default=None, help=shown, required=flag.required,
    )  # fmt: skip


def add_settings_arguments(
    parser: RecordingParser,
    model: type[BaseModel],
    *,
    exclude: Iterable[str] = (),
    only: Iterable[str] | None = None,
    into: Container | None = None,
    shown_default: Callable[[SettingFlag], str] | None = None,
) -> None:
    """One flag per field of `model` that declares one (but those in `exclude`, and, given `only`,
    those not in it: field names or dotted paths), in `into` (default: `parser`) or in the --help
    section its `group` names. `shown_default`: the default --help shows (the recipe's per recipe)."""
    for flag in _chosen(model, exclude, only):
        container = into or parser
        if flag.group is not None:
            container = parser.section(flag.group)
        add_setting(container, flag, _help_with_default(flag, shown_default))


def _chosen(model: type[BaseModel], exclude: Iterable[str], only: Iterable[str] | None) -> Iterator[SettingFlag]:
    skipped = set(exclude)
    kept = None if only is None else set(only)
    for flag in setting_flags(model):
        names = {flag.field, ".".join(flag.path)}
        if names & skipped or (kept is not None and not names & kept):
            continue
        yield flag


def _help_with_default(flag: SettingFlag, shown_default: Callable[[SettingFlag], str] | None = None) -> str:
    """The flag's help and its default (none for a required flag)."""
    if flag.required:
        return flag.help
    return f"{flag.help} (default: {(shown_default or default_text)(flag)})"


def default_text(flag: SettingFlag) -> str:
    """The default as --help and the docs' tables show it."""
    if flag.required:
        return "required"
    return flag.default_text if flag.default_text is not None else show(flag.default)


def settings_given(
    args: argparse.Namespace,
    model: type[BaseModel],
    *,
    exclude: Iterable[str] = (),
    only: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The fields of `model` the command line (or --config) set, nested as the model nests them:
    `{"seed": 1, "hessian": {"k": 3}}`; what was left out is not there (the model's default)."""
    given: dict[str, Any] = {}
    for flag in _chosen(model, exclude, only):
        value = getattr(args, flag.dest, None)
        if value is None:
            continue
        place = given
        for part in flag.path[:-1]:
            place = place.setdefault(part, {})
        place[flag.path[-1]] = value
    return given


def settings_table(model: type[BaseModel], *, exclude: Iterable[str] = ()) -> str:
    """A Markdown table of `model`'s flags (but those in `exclude`), defaults and meanings, for the
    docs (a test holds the page to it)."""
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    for flag in _chosen(model, exclude, None):
        cells = [f"`{flag.flag}`", default_text(flag), flag.help]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
