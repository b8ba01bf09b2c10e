"""The training recipe's flags of `train` and `search`, made from `TrainConfig` itself.

Each recipe field declares its flag (timm train.py's name) and help once, in
`archdsl.run.recipe.TrainConfig` (the fields of its RECIPE_GROUP); its default per recipe comes
from `RECIPE_DEFAULTS` (`archdsl.run.recipe.per_recipe` says it). They become flags as every
setting does (archdsl.commands.settings_flags), with the default per recipe in --help: values pass
the field's own pydantic checks, so `--weight-decay -1` exits 2 with the field's message, and
`--config` files take the same keys. Light: pydantic only.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from archdsl.commands.recording_parser import RecordingParser
from archdsl.commands.settings_flags import add_settings_arguments, settings_given
from archdsl.common_settings import SettingFlag
from archdsl.run import TrainConfig, per_recipe, recipe_flags


def add_recipe_arguments(
    parser: RecordingParser, *, exclude: Iterable[str] = (), defaults_said: Mapping[str, str] | None = None
) -> None:
    """One flag per recipe field of TrainConfig (but those in `exclude`), in the recipe's --help
    section, each defaulting to None: left out, the recipe's value (and what `defaults_said` adds for a
    field: how the command changes that default, as the search chooses a batch size from the data)."""
    said = dict(defaults_said or {})

    def shown(flag: SettingFlag) -> str:
        return per_recipe(flag.field) + (f"; {said[flag.field]}" if flag.field in said else "")

    add_settings_arguments(parser, TrainConfig, only=recipe_flags(), exclude=exclude, shown_default=shown)


def recipe_settings(args: argparse.Namespace, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The recipe fields the command line (or --config) set: TrainConfig keyword arguments."""
    return settings_given(args, TrainConfig, only=recipe_flags(), exclude=exclude)
