"""The batch size chosen from the data where nobody gave one (`search/fidelity/batch.py`): enough optimizer steps at
the first budget for a design to leave chance (issue 58: 4 steps on a 400-image folder, every design at chance)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from archdsl.cli import main
from archdsl.run.recipe import RECIPE_DEFAULTS
from archdsl.search.fidelity.batch import FEW_FIRST_STEPS, batch_for_steps, optimizer_steps
from archdsl.search.fidelity.measures import train_config
from archdsl.search.planning import plan_space
from archdsl.search.settings import SearchSettings
from archdsl.search.studies.for_report import protocol


def _folder(root: Path, classes: int = 10, train: int = 40, test: int = 2) -> Path:
    """A folder dataset of flat colours, `train` images a class (400 in all with the defaults)."""
    for split, count in (("train", train), ("val", test)):
        for c in range(classes):
            folder = root / split / f"class{c:02d}"
            folder.mkdir(parents=True)
            for k in range(count):
                Image.new("RGB", (16, 16), (25 * c, 3 * k, 100)).save(folder / f"{k}.png")
    return root


@pytest.mark.parametrize(
    ("images", "epochs", "largest", "chosen"),
    [
        (360, 2, 128, 16),  # the 400-image folder: 4 steps at 128, 22 at 32, 44 at 16
        (5500, 2, 128, 128),  # Fashion-MNIST's first budget: 84 steps already
        (360, 2, 96, 16),  # a recipe's batch that is no power of two: the powers below it
        (100, 1, 128, 8),  # none gives enough: the smallest, never below it
        (100, 1, 4, 4),  # a batch already below the smallest stays
    ],
)
def test_the_largest_power_of_two_that_gives_enough_steps(images, epochs, largest, chosen):
    assert batch_for_steps(images, epochs, largest) == chosen
    if chosen < largest and chosen > 8:
        assert optimizer_steps(images, chosen, epochs) >= FEW_FIRST_STEPS > optimizer_steps(images, 2 * chosen, epochs)


def test_a_small_folder_trains_in_batches_chosen_from_the_data_and_says_so(tmp_path, capsys):
    root = _folder(tmp_path / "small")
    plan = plan_space(SearchSettings(dataset=f"folder:{root}"))
    config = train_config(plan.fidelity, device="cpu", seed=0)
    fast = RECIPE_DEFAULTS["fast"]
    assert plan.batch is not None and (plan.batch.default, plan.batch.chosen) == (fast["batch_size"], 16)
    assert config.batch_size == 16 and config.lr == pytest.approx(fast["base_lr"] * 16 / fast["lr_batch"])
    assert protocol(plan).batch_chosen == plan.batch.text()  # what report.md's checklist says
    assert main(["search", "--dry-run", "--dataset", f"folder:{root}"]) == 0
    out = capsys.readouterr().out
    assert "batch 16, chosen from the data: 360 training images for 2 epochs at the first budget give 44" in out
    assert "steps:" not in out  # enough of them now


def test_a_batch_size_given_always_wins(tmp_path, capsys):
    root = _folder(tmp_path / "small")
    plan = plan_space(SearchSettings(dataset=f"folder:{root}"), {"train_settings": {"batch_size": 128}})
    assert plan.batch is None and train_config(plan.fidelity, device="cpu", seed=0).batch_size == 128
    assert main(["search", "--dry-run", "--dataset", f"folder:{root}", "--batch-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "chosen from the data" not in out
    assert "steps: 4 optimizer steps a design at the first budget (360 images in batches of 128 a step" in out
    assert "--batch-size 16 gives 44" in out


@pytest.mark.parametrize(("dataset", "batch"), [("odd-one-out", 64), ("fashion-mnist", 128)])
def test_the_main_job_and_fashion_mnist_keep_their_batch(dataset, batch):
    """The main job's batch is its card's (its 15 measured runs in docs describe it); Fashion-MNIST's first budget
    gives 84 steps in the recipe's 128."""
    plan = plan_space(SearchSettings(dataset=dataset))
    assert plan.batch is None and train_config(plan.fidelity, device="cpu", seed=0).batch_size == batch
