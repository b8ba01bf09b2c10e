"""A recipe cut to a shorter run keeps its shape and ends annealed; at its own length nothing changes."""

from __future__ import annotations

import pytest

from archdsl.run.recipe import RECIPE_DEFAULTS, TrainConfig
from archdsl.run.schedule import LrSchedule, milestones_beyond, run_milestones

STEPS = 3  # steps per epoch
MULTISTEP = [name for name, d in RECIPE_DEFAULTS.items() if d["sched"] == "multistep"]


@pytest.mark.parametrize("recipe", MULTISTEP)
def test_every_cut_of_a_multistep_recipe_ends_at_its_final_rate(recipe):
    own = RECIPE_DEFAULTS[recipe]["epochs"]
    for epochs in range(1, own + 1):
        config = TrainConfig(recipe=recipe, epochs=epochs)
        schedule = LrSchedule.of(config, STEPS)
        final = schedule.lr * schedule.decay_rate ** len(RECIPE_DEFAULTS[recipe]["decay_milestones"])
        last = schedule.lr_at(epochs * STEPS - 1)
        assert last == pytest.approx(final, rel=1e-12), (epochs, schedule.milestones)


def test_weak_milestones_are_fractions_of_the_run_and_unchanged_at_full_length():
    assert run_milestones(TrainConfig(recipe="weak")) == (60, 120, 160)  # the reference's, at 201 epochs
    assert run_milestones(TrainConfig(recipe="weak", epochs=301)) == (60, 120, 160)  # longer: as the reference
    assert run_milestones(TrainConfig(recipe="weak", epochs=21)) == (6, 12, 16)  # 0.3 / 0.6 / 0.8 of 20
    # The shipped table's fidelity (weak, 6 epochs) ended at the peak 0.1; now it ends at 0.1 x 0.2^3.
    six = LrSchedule.of(TrainConfig(recipe="weak", epochs=6, batch_size=128), STEPS)
    assert six.lr_at(6 * STEPS - 1) == pytest.approx(0.1 * 0.2**3)


def test_a_users_milestones_are_kept_and_those_beyond_the_run_named():
    config = TrainConfig(recipe="weak", epochs=6, decay_milestones=(2, 40))
    assert run_milestones(config) == (2, 40)
    assert milestones_beyond(config) == (40,)
    assert milestones_beyond(TrainConfig(recipe="weak", epochs=6)) == ()  # the recipe's own: scaled
    assert milestones_beyond(TrainConfig(recipe="fast", epochs=6, decay_milestones=(40,))) == ()  # cosine
