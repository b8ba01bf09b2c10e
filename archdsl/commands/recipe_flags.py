"""The training recipe's flags of `train` and `search`, made from `TrainConfig` itself.

Each recipe field declares its flag (timm train.py's name) and help once, in
`archdsl.run.recipe.TrainConfig`; its default per recipe comes from `RECIPE_DEFAULTS`. Here they
become argparse flags whose values pass the field's own pydantic checks, so `--weight-decay -1`
exits 2 with the field's message, and `--config` files take the same keys (archdsl.commands.config_file).
Light: pydantic only.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from archdsl.commands.settings_flags import choices_of, is_bool, metavar_of, show, value_parser
from archdsl.run import RECIPE_DEFAULTS, RECIPE_FIELDS, RECIPES, TrainConfig, recipe_flags


def per_recipe(field: str) -> str:
    """`96 deit, 128 weak, 128 fast`: a field's default in each recipe, for --help and the docs."""
    if field == "lr":
        return ", ".join(
            f"{show(RECIPE_DEFAULTS[r]['base_lr'])} x batch/{RECIPE_DEFAULTS[r]['lr_batch']} {r}" for r in RECIPES
        )
    if field not in RECIPE_FIELDS:
        return show(TrainConfig.model_fields[field].default)
    values = [show(RECIPE_DEFAULTS[r][field]) for r in RECIPES]
    if len(set(values)) == 1:
        return values[0]  # the same in every recipe
    return ", ".join(f"{value} {r}" for value, r in zip(values, RECIPES, strict=True))


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
        if is_bool(annotation):
            parser.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None, help=shown)
            continue
        choices = choices_of(annotation)
        metavar = None if choices else metavar_of(annotation)
        parser.add_argument(
            flag,
            dest=field,
            type=value_parser(TrainConfig, field),
            choices=choices,
            metavar=metavar,
            default=None,
            help=shown,
        )


def recipe_settings(args: argparse.Namespace, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The recipe fields the command line (or --config) set: TrainConfig keyword arguments."""
    return {
        field: getattr(args, field)
        for field in recipe_flags()
        if field not in exclude and getattr(args, field, None) is not None
    }


def recipe_table() -> str:
    """docs/training.md's table of every recipe field's flag and value per recipe (a test holds the
    page to this text)."""
    head = f"| flag | {' | '.join(f'`{r}`' for r in RECIPES)} | meaning |"
    lines = [head, "|---" * (len(RECIPES) + 2) + "|"]
    for field, (flag, help_text) in recipe_flags().items():
        if field == "lr":
            values = [
                f"{show(RECIPE_DEFAULTS[r]['base_lr'])} x batch/{RECIPE_DEFAULTS[r]['lr_batch']}" for r in RECIPES
            ]
        elif field in RECIPE_FIELDS:
            values = [show(RECIPE_DEFAULTS[r][field]) for r in RECIPES]
        else:
            values = [show(TrainConfig.model_fields[field].default)] * len(RECIPES)
        meaning = help_text.replace("|", "\\|")
        lines.append(f"| `{flag}` | {' | '.join(values)} | {meaning} |")
    return "\n".join(lines) + "\n"
