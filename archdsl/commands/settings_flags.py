"""Command-line flags made from a settings model: each setting is declared once, as a pydantic field
with its default, bounds, help and flag (`archdsl.common_settings.flag_field`; `setting_flags` reads the
declarations back), and its argparse argument is made here. A bool field is a switch pair,
`--x/--no-x`. Every flag defaults to None, "left out": the model's own default applies (so --help, the
command and a Python caller share one default). Values pass the field's own pydantic checks, so
`--k 0` exits 2 with the field's message, and `--config` files take the same keys
(archdsl.commands.config_file reads the parser's flags). Light: pydantic only.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from archdsl.commands.recording_parser import ArgumentSection, RecordingParser
from archdsl.common_settings import (
    SettingFlag,
    base_types,
    choices_of,
    default_text,
    field_adapter,
    is_bool,
    is_tuple,
    setting_flags,
)


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
    integer = int in base_types(info.annotation) and float not in base_types(info.annotation)
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
            return field_adapter(model, field).validate_python(value)
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


def metavar_of(annotation: Any) -> str:
    kinds = base_types(annotation)
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
    for flag in setting_flags(model, exclude=exclude, only=only):
        container = into or parser
        if flag.group is not None:
            container = parser.section(flag.group)
        add_setting(container, flag, _help_with_default(flag, shown_default))


def _help_with_default(flag: SettingFlag, shown_default: Callable[[SettingFlag], str] | None = None) -> str:
    """The flag's help, its default (none for a required flag) and its upper bound, where it has one."""
    bound = upper_bound_text(flag.model.model_fields[flag.field].metadata)
    if flag.required:
        return f"{flag.help} ({bound})" if bound else flag.help
    return f"{flag.help} (default: {(shown_default or default_text)(flag)}{'; ' + bound if bound else ''})"


def upper_bound_text(metadata: list[Any]) -> str | None:
    """`at most 10,000` (or `below 1`) for a field's `le`/`lt` bound; None without one."""
    for constraint in metadata:
        for name, words in (("le", "at most"), ("lt", "below")):
            value = getattr(constraint, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                number = f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
                return f"{words} {number}"
    return None


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
    for flag in setting_flags(model, exclude=exclude, only=only):
        value = getattr(args, flag.dest, None)
        if value is None:
            continue
        place = given
        for part in flag.path[:-1]:
            place = place.setdefault(part, {})
        place[flag.path[-1]] = value
    return given
