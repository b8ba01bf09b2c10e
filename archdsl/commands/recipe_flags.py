"""The training recipe's flags of `train` and `search`, made from `TrainConfig` itself.

Each recipe field declares its flag (timm train.py's name) and help once, in
`archdsl.run.recipe.TrainConfig` (the fields of its RECIPE_GROUP); its default per recipe comes
from `RECIPE_DEFAULTS`. They become flags as every setting does (archdsl.commands.settings_flags),
with the default per recipe in --help: values pass the field's own pydantic checks, so
`--weight-decay -1` exits 2 with the field's message, and `--config` files take the same keys.
Light: pydantic only.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from archdsl.commands.recording_parser import RecordingParser
from archdsl.commands.settings_flags import SettingFlag, add_settings_arguments, settings_given, show
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


def _per_recipe(flag: SettingFlag) -> str:
    return per_recipe(flag.field)


def add_recipe_arguments(parser: RecordingParser, *, exclude: Iterable[str] = ()) -> None:
    """One flag per recipe field of TrainConfig (but those in `exclude`), in the recipe's --help
    section, each defaulting to None: left out, the recipe's value."""
    add_settings_arguments(parser, TrainConfig, only=recipe_flags(), exclude=exclude, shown_default=_per_recipe)


def recipe_settings(args: argparse.Namespace, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The recipe fields the command line (or --config) set: TrainConfig keyword arguments."""
    return settings_given(args, TrainConfig, only=recipe_flags(), exclude=exclude)


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
