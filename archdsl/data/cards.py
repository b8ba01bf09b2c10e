"""One card of defaults per dataset: how a model trains on it unless told (over every recipe), and the budget at
which `archdsl search` trains each candidate. `archdsl train`, `archdsl search`, their --help, `--dry-run` and
`archdsl.search.Fidelity` read the same card (`card_for`); tests/test_dataset_cards.py holds them equal.

A search budget is *measured* on a dataset when a reference trained to the end showed that it ranks the designs
as the end does (docs/search.md names where); on every other dataset the search starts from a cheap budget and
raises it while a verdict still moves (`budget_steps`; docs/search.md, "The budget the search finds").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from archdsl.data import odd_one_out

# `archdsl search`'s dataset when none is named: the main job's, built in (no download).
DEFAULT_DATASET = "odd-one-out"
# A budget raised from a small subset raises the data too (each step doubles the epochs, and the subset while it
# holds fewer than this many images a class); and no budget trains on fewer images a class than MIN_PER_CLASS
# (or the whole split, where it holds fewer): a small dataset is never cut below what trains. A thousand, because on
# Fashion-MNIST 16 epochs on 550 images a class rank two designs behind the ResNet that 16 epochs on 1,100 tie with
# it, as the 12-epoch reference does (docs/results.md, "The budget the search finds, on Fashion-MNIST").
SMALL_PER_CLASS = 1000
MIN_PER_CLASS = 50


@dataclass(frozen=True)
class SearchDefaults:
    """The budget a search trains each candidate at unless told (each is `archdsl search`'s flag of that name)."""

    epochs: int
    subset: float  # class-stratified fraction of the training split less its validation images
    val_split: str | None  # validation images held out (a fraction or count); None: a tenth, at most 5,000
    budget_steps: int  # steps up the ladder a verdict may take (0: one budget, measured)
    measured: str = ""  # where docs/ show that this budget ranks the designs as the end of training does


@dataclass(frozen=True)
class DatasetCard:
    """A dataset's defaults: `training` (TrainConfig fields over every recipe's) and `search` (its budget)."""

    name: str
    training: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    search: SearchDefaults = SearchDefaults(epochs=2, subset=0.1, val_split=None, budget_steps=3)


CARDS: Mapping[str, DatasetCard] = MappingProxyType(
    {
        # All its 1,500 training images (2,000 less 500 for validation) for 8 epochs: the two groups the 24-epoch
        # reference ranks (an MSA ending c3 or not) come out in the same order, at 69 % of 12 epochs' CPU, which the
        # main job's 2 minutes need (docs/results.md, "The built-in data's reference").
        "odd-one-out": DatasetCard(
            "odd-one-out",
            odd_one_out.TRAINING_DEFAULTS,
            SearchDefaults(
                epochs=8,
                subset=1.0,
                val_split="500",
                budget_steps=0,
                measured="docs/results.md#the-built-in-datas-reference-odd-one-out",
            ),  # fmt: skip
        ),
        # 1,800 of its 4,500 images for 2 epochs: a small-base candidate in seconds on a laptop CPU; its designs tie.
        "synthetic": DatasetCard(
            "synthetic",
            search=SearchDefaults(
                epochs=2, subset=0.4, val_split=None, budget_steps=0, measured="docs/search.md#fidelity"
            ),
        ),
    }
)
# Every other dataset (CIFAR, Fashion-MNIST, folders, hf:, ImageNet): a tenth of the images for 2 epochs to start
# from, raised while a verdict moves. Fashion-MNIST showed why (docs/results.md): 2 epochs rank the designs with an
# MSA in c2 last, where at the end of training they tie with the rest.
OTHER = DatasetCard("other")


def card_for(dataset: str) -> DatasetCard:
    """The card of `dataset` (its base name decides: `odd-one-out:train=300` is odd-one-out's)."""
    return CARDS.get(dataset.partition(":")[0].strip().lower(), OTHER)


def default_text(attribute: str, unit: str = "") -> str:
    """How --help says a search default that depends on the dataset, read off the cards: `8 on odd-one-out,
    2 otherwise`; cards that agree are named together (`0 on odd-one-out and synthetic`)."""
    other = getattr(OTHER.search, attribute)
    by_value: dict[object, list[str]] = {}
    for name, card in CARDS.items():
        if getattr(card.search, attribute) != other:
            by_value.setdefault(getattr(card.search, attribute), []).append(name)
    parts = [f"{_shown(value)}{unit} on {' and '.join(names)}" for value, names in by_value.items()]
    return ", ".join([*parts, f"{_shown(other)}{unit} otherwise"])


def _shown(value: object) -> str:
    if value is None:
        return "a tenth of the training split, at most 5,000"
    return f"{value:g}" if isinstance(value, float) else str(value)
