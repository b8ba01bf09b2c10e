"""A recipe cut to a shorter run keeps its shape and ends annealed; at its own length nothing changes."""

from __future__ import annotations

import math

import pytest

from archdsl.run.recipe import RECIPE_DEFAULTS, TrainConfig
from archdsl.run.schedule import LrSchedule, milestones_beyond, run_milestones

STEPS = 3  # steps per epoch
MULTISTEP = [name for name, d in RECIPE_DEFAULTS.items() if d["sched"] == "multistep"]
COSINE = [name for name, d in RECIPE_DEFAULTS.items() if d["sched"] == "cosine"]


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


@pytest.mark.parametrize("recipe", COSINE)
def test_every_cut_of_a_cosine_recipe_ends_at_its_minimum(recipe):
    own = RECIPE_DEFAULTS[recipe]["epochs"]
    for epochs in range(1, own):
        schedule = LrSchedule.of(TrainConfig(recipe=recipe, epochs=epochs), STEPS)
        rates = [schedule.lr_at(step) for step in range(epochs * STEPS)]
        assert rates[-1] == schedule.min_lr, (epochs, rates[-3:])
        main = rates[schedule.warmup_steps :]
        assert main[0] == pytest.approx(schedule.lr), epochs  # the main schedule still starts at the peak
        assert all(a >= b for a, b in zip(main, main[1:], strict=False)), epochs  # and only goes down


@pytest.mark.parametrize("recipe", COSINE)
def test_a_cosine_recipe_at_its_own_length_is_the_reference_schedule_unchanged(recipe):
    """At full length the last step is one epoch (or step) short of the minimum, as torch's and timm's schedulers
    leave it; the cut-run rule must not touch it (tests/test_train_parity.py checks it step by step)."""
    config = TrainConfig(recipe=recipe)
    schedule = LrSchedule.of(config, STEPS)
    last = schedule.lr_at(config.epochs * STEPS - 1)
    assert not schedule.ends_at_minimum and schedule.min_lr < last < schedule.lr * 1e-3


def test_a_cut_run_of_one_main_epoch_anneals_through_it_step_by_step():
    schedule = LrSchedule.of(TrainConfig(recipe="deit", epochs=2, warmup_epochs=1), 5)
    assert [schedule.lr_at(step) for step in range(5, 10)] == pytest.approx(
        [schedule.lr * (1 + math.cos(math.pi * i / 4)) / 2 for i in range(5)]
    )
