"""The training recipe's flags of `train` and `search`, made from `TrainConfig` itself.

Each recipe field declares its flag (timm train.py's name) and help once, in
`archdsl.run.recipe.TrainConfig`; its default per recipe comes from `RECIPE_DEFAULTS`. Here they
become argparse flags whose values pass the field's own pydantic checks, so `--weight-decay -1`
exits 2 with the field's message, and `--config` files take the same keys (archdsl.commands.config_file).
Light: pydantic only.
"""

from __future__ import annotations

import argparse
import functools
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from archdsl.run.recipe import RECIPE_DEFAULTS, RECIPE_FIELDS, RECIPES, TrainConfig, recipe_flags


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def per_recipe(field: str) -> str:
    """`96 deit, 128 weak, 128 fast`: a field's default in each recipe, for --help and the docs."""
    if field == "lr":
        return ", ".join(
            f"{_show(RECIPE_DEFAULTS[r]['base_lr'])} x batch/{RECIPE_DEFAULTS[r]['lr_batch']} {r}" for r in RECIPES
        )
    if field not in RECIPE_FIELDS:
        return _show(TrainConfig.model_fields[field].default)
    values = [_show(RECIPE_DEFAULTS[r][field]) for r in RECIPES]
    if len(set(values)) == 1:
        return values[0]  # the same in every recipe
    return ", ".join(f"{value} {r}" for value, r in zip(values, RECIPES, strict=True))


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    """The values of a Literal (inside an Optional), for argparse's choices."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return None


def _is_tuple(annotation: Any) -> bool:
    return any(typing.get_origin(arg) is tuple for arg in (annotation, *typing.get_args(annotation)))


def _is_bool(annotation: Any) -> bool:
    return annotation is bool or bool in typing.get_args(annotation)


@functools.cache
def _adapter(field: str) -> TypeAdapter[Any]:
    """The field's type with its constraints (`ge=0`, ...), made when a flag is first given."""
    info = TrainConfig.model_fields[field]
    # The field's own FieldInfo carries its constraints (ge=0, lt=1) into the adapter.
    annotation: Any = typing.Annotated[info.annotation, info]
    return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))


def _expected(message: str) -> str:
    """pydantic's `Input should be greater than 0` as `expected a value greater than 0`."""
    wanted = message.removeprefix("Input should be ")
    if wanted.startswith(("greater", "less")):
        wanted = "a value " + wanted
    return "expected " + wanted


def _parser(field: str) -> Callable[[str], Any]:
    """One command-line word -> the field's value, checked as TrainConfig checks it."""
    info = TrainConfig.model_fields[field]
    listed = _is_tuple(info.annotation)

    def parse(text: str) -> Any:
        # (`--aa none` stays the word "none", which TrainConfig reads as "no RandAugment": a None
        # here would mean "left out", the recipe's.)
        value: Any = [part.strip() for part in text.split(",") if part.strip()] if listed else text
        try:
            return _adapter(field).validate_python(value)
        except ValidationError as err:
            raise argparse.ArgumentTypeError(f"{_expected(err.errors()[0]['msg'])}, got {text!r}") from None

    parse.__name__ = field  # argparse names the type in some messages
    parse.comma_list = listed  # type: ignore[attr-defined]  # a --config file may give a YAML list
    return parse


def _base_types(annotation: Any) -> set[Any]:
    """int, float, ... inside Optional[...] and Annotated[...] (pydantic's PositiveInt)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _base_types(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(_base_types(arg) for arg in typing.get_args(annotation)))
    return {annotation}


def _metavar(annotation: Any) -> str:
    kinds = _base_types(annotation)
    if _is_tuple(annotation):
        return "N,N"
    if int in kinds:
        return "N"
    return "X" if float in kinds else "TEXT"


def add_recipe_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, exclude: Iterable[str] = ()
) -> None:
    """One flag per TrainConfig field that declares one (but those in `exclude`), default None:
    left out, the recipe's value."""
    for field, (flag, help_text) in recipe_flags().items():
        if field in exclude:
            continue
        annotation = TrainConfig.model_fields[field].annotation
        shown = f"{help_text} (default: {per_recipe(field)})".replace("%", "%%")
        if _is_bool(annotation):
            parser.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None, help=shown)
            continue
        choices = _choices(annotation)
        metavar = None if choices else _metavar(annotation)
        parser.add_argument(
            flag, dest=field, type=_parser(field), choices=choices, metavar=metavar, default=None, help=shown
        )


def recipe_settings(args: argparse.Namespace, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The recipe fields the command line (or --config) set: TrainConfig keyword arguments."""
    return {
        field: getattr(args, field)
        for field in recipe_flags()
        if field not in exclude and getattr(args, field, None) is not None
    }


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


def recipe_table() -> str:
    """docs/training.md's table of every recipe field's flag and value per recipe (a test holds the
    page to this text)."""
    head = f"| flag | {' | '.join(f'`{r}`' for r in RECIPES)} | meaning |"
    lines = [head, "|---" * (len(RECIPES) + 2) + "|"]
    for field, (flag, help_text) in recipe_flags().items():
        if field == "lr":
            values = [
                f"{_show(RECIPE_DEFAULTS[r]['base_lr'])} x batch/{RECIPE_DEFAULTS[r]['lr_batch']}" for r in RECIPES
            ]
        elif field in RECIPE_FIELDS:
            values = [_show(RECIPE_DEFAULTS[r][field]) for r in RECIPES]
        else:
            values = [_show(TrainConfig.model_fields[field].default)] * len(RECIPES)
        meaning = help_text.replace("|", "\\|")
        lines.append(f"| `{flag}` | {' | '.join(values)} | {meaning} |")
    return "\n".join(lines) + "\n"
