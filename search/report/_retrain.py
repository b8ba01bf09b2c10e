"""The `archdsl train` command that trains a design of the study exactly as its trial trained it: the same data,
validation images, recipe and settings, budget and seed (from the study's `record.Protocol`)."""

from __future__ import annotations

import shlex

from archdsl.search.report._summary import StudySummary, TrialRow
from archdsl.search.settings import flag_number
from archdsl.search.studies.record import Protocol


def recipe_words(protocol: Protocol) -> list[str]:
    """`--batch-size 32 --crop-padding 0`: the recipe settings the study gave (the dataset's card included), as
    flags of `archdsl train` and `archdsl search`."""
    from archdsl.run.recipe import recipe_command_words, recipe_flags  # torch-free

    flags = recipe_flags()
    # a JSON record holds a tuple (--decay-milestones) as a list
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in sorted(protocol.train_settings.items())}
    # the budget's epochs are the command's own flag
    return recipe_command_words({k: v for k, v in given.items() if k in flags and k != "epochs"})


def retrain_command(protocol: Protocol, rung: int, spec_path: str, index: int = 0) -> str | None:
    """`[OMP_NUM_THREADS=N] archdsl train SPEC --dataset ... --seed ...`: trains the design of `spec_path` as its
    trial trained it at budget rung `rung`, on paired seed index `index` (the same data and held-out validation
    images, recipe and settings, epochs, subset, seed and CPU threads); None for a replayed study (the table's runs
    were trained elsewhere)."""
    if protocol.table is not None or rung >= len(protocol.budgets) or index >= len(protocol.training_seeds):
        return None
    budget = protocol.budgets[rung]
    # CPU training's figures depend on the intra-op threads: the trial's count, set as torch reads it at start
    words = [f"OMP_NUM_THREADS={protocol.threads}"] if protocol.threads is not None else []
    words += ["archdsl", "train", spec_path, "--dataset", protocol.dataset]
    words += ["--data-root", protocol.data_root] if protocol.data_root else []
    words += ["--recipe", protocol.recipe, *recipe_words(protocol)]
    words += ["--epochs", str(budget.epochs), "--subset", flag_number(budget.subset)]
    # the count the search held out (its default too): the same class-stratified images (data.split_validation)
    words += ["--val-split", str(protocol.held_out)] if protocol.held_out else []
    words += ["--seed", str(protocol.training_seeds[index]), "--device", protocol.device]
    words += ["--optimize" if protocol.optimize else "--no-optimize"]
    return shlex.join(words)


def retrain_text(summary: StudySummary, row: TrialRow, spec_path: str | None) -> str | None:
    """The command that retrains a best design (`row`, whose .arch file is `spec_path`) as its trial trained seed
    index 0, at its budget; None without a file, a protocol, or for a replayed study."""
    if spec_path is None or summary.protocol is None:
        return None
    return retrain_command(summary.protocol, row.rung, spec_path)


def retrain_note(summary: StudySummary, row: TrialRow) -> str:
    """What the command gives: its trial's validation top-1 on seed index 0 (on all the held-out images where the
    trial scored a --val-subset of them)."""
    protocol = summary.protocol
    figure = f"{row.own_seeds[0]:.4g}" if row.own_seeds else "none recorded"
    text = f"trial {row.number}'s validation top-1 on seed index 0 is {figure}"
    if protocol is not None and protocol.validation_images != protocol.held_out:
        text += (
            f", scored on {protocol.validation_images} of the {protocol.held_out} held-out images "
            "(--val-subset); the command scores all of them"
        )
    return text
