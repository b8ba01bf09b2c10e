"""The test set's figures of a study's chosen designs, held out of every choice: measured once, after
the search, for the report only (`archdsl.search.final_test` measures them).

They live on the study, not on its trials (a study user attr `test:<trial number>` per design), so
nothing that chooses (Optuna's best trial, the samplers, the build-up walk, the ties) can read them:
a trial's values and attrs are all the search ever compares.
"""

from __future__ import annotations

from typing import Literal

import optuna
from pydantic import BaseModel, ConfigDict, ValidationError

from archdsl.search.record import TEST_ATTR_PREFIX, numbered_attrs

NOT_USED = "not used for selection"  # how every rendering labels the figures
NO_TABLE_FIGURES = "no test figures in this table"


class HeldOutFigures(BaseModel):
    """One design's test top-1 on each of its trial's paired seeds, trained again as the trial trained it
    (or read from a replayed study's table)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    seeds: list[int]  # the training seeds (a replayed design's: the table runs' seeds)
    accuracy: list[float]  # test top-1 per seed, a fraction; empty when there is none (`note` says why)
    validation: list[float] = []  # the retrained validation top-1 per seed: the trial's again, if training repeats
    source: Literal["trained", "table"] = "trained"
    note: str = ""


def final_test_attr(number: int) -> str:
    """The study user attr holding trial `number`'s design's test figures."""
    return f"{TEST_ATTR_PREFIX}{number}"


def read_held_out(study: optuna.Study) -> dict[int, HeldOutFigures]:
    """Trial number -> its design's test figures, as stored on `study` (a record that does not read is
    left out: the storage may be another version's)."""
    found: dict[int, HeldOutFigures] = {}
    for number, value in numbered_attrs(study, TEST_ATTR_PREFIX).items():
        try:
            found[number] = HeldOutFigures.model_validate(value)
        except ValidationError:
            continue
    return found
