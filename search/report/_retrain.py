"""The `archdsl train` command that trains a design of the study exactly as its trial trained it: the same data,
validation images, recipe and settings, budget and seed (from the study's `record.Protocol`)."""

from __future__ import annotations

from archdsl.search.studies.record import Protocol


def recipe_words(protocol: Protocol) -> list[str]:
    """`--batch-size 32 --crop-padding 0`: the recipe settings the study gave (the dataset's card included), as
    flags of `archdsl train` and `archdsl search`."""
    from archdsl.run.recipe import recipe_command_words, recipe_flags  # torch-free

    flags = recipe_flags()
    # a JSON record holds a tuple (--decay-milestones) as a list
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in sorted(protocol.train_settings.items())}
    return recipe_command_words({k: v for k, v in given.items() if k in flags})
