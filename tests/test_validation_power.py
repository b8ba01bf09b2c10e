"""What a study's validation can call (`search/fidelity/validation_power.py`), and the validation small data is given
(issue 58.2: 40 validation images held a design at 0.67 "tied" beside the best at 0.96, and nothing said so)."""

from __future__ import annotations

import math

import pytest

from archdsl.search.fidelity.validation_power import (
    difference_text,
    held_out_for_target,
    images_for,
    smallest_difference,
)
from archdsl.search.planning import describe_space, plan_space
from archdsl.search.report._checklist import _validation
from archdsl.search.settings import SearchSettings
from archdsl.search.studies.record import Protocol


def test_the_smallest_difference_is_196_binomial_errors_of_a_difference():
    assert smallest_difference(500) == pytest.approx(1.96 * math.sqrt(0.5 / 500))  # 6.2 points at 50 %
    adjusted = (0.9 * 500 + 2) / 504  # Agresti and Coull's p
    assert smallest_difference(500, 0.9) == pytest.approx(1.96 * math.sqrt(2 * adjusted * (1 - adjusted) / 500))
    assert images_for() == 769  # 5 points at 50 %
    assert smallest_difference(769) <= 0.05 < smallest_difference(768)


def test_small_data_holds_out_enough_to_call_five_points_where_a_fifth_of_it_can():
    assert held_out_for_target(5000, 500) == 769  # 15 % of a 5,000-image split
    assert held_out_for_target(400, 40) is None  # 769 is more than a fifth of 400: the default stays
    assert held_out_for_target(9000, 900) is None  # the default reaches it already


def test_the_text_says_the_difference_one_image_and_where_the_target_is_not_reached():
    text = difference_text(40, 3)
    assert text.startswith(
        "validation: 40 images call a difference of 22 points of top-1 or more at 50 % accuracy, 15 at"
    )
    assert "one image is 2.5 points a seed, 0.83 of the mean over 3 seeds" in text
    assert "5 points would need 290 images at 90 %: designs closer than 15 points are tied by the validation's" in text
    assert "would need" not in difference_text(500, 3)  # the main job's, Fashion-MNIST's: 3.8 points at 90 %
    assert "would need" not in difference_text(1000, 3, 0.8)  # 3.5 points at the answer's 80 %


@pytest.mark.parametrize(
    ("dataset", "validation", "val_subset"),
    [
        ("fashion-mnist:train=2000", 200, 1.0),  # small: every held-out image scores, not the first budget's 28 %
        ("fashion-mnist:train=5000", 769, 1.0),  # small, and a fifth holds 769: raised from 500
        ("fashion-mnist", 500, 0.1),  # not small: as before (6.2 points at 50 %, said)
        ("odd-one-out", 500, 1.0),  # the main job: its card's measured budget, unchanged
        ("synthetic", 200, 0.4),  # a measured budget keeps the validation it was measured with
    ],
)
def test_the_validation_a_study_scores_on(dataset, validation, val_subset):
    plan = plan_space(SearchSettings(dataset=dataset))
    assert (plan.validation_images, plan.fidelity.val_subset) == (validation, val_subset)
    assert f"validation: {validation:,} images call a difference of" in describe_space(plan)


def test_the_report_says_what_the_validation_calls_at_the_answers_accuracy():
    protocol = Protocol(
        dataset="folder:x", seed=0, seeds=3, max_seeds=3, training_seeds=[0, 1, 2], budgets=[],
        train_images=360, held_out=40, validation_images=40, test_images=20,
    )  # fmt: skip
    text = _validation(protocol, 0.8)
    assert "the 40 images call a difference of 18 points of top-1 or more at the answer's 80 %" in text
    assert "designs closer than 18 points are tied by the validation's size, not shown equal" in text


def test_an_answer_at_100_percent_still_has_a_difference_it_cannot_call():
    """The 400-image folder's answer scored 1.000 on its 40 validation images: a binomial error at p = 1 is 0, which
    would say the validation calls any difference; the adjusted p (Agresti-Coull, (pn + 2) / (n + 4)) says 9 points."""
    assert smallest_difference(40, 1.0) == pytest.approx(1.96 * math.sqrt(2 * (42 / 44) * (2 / 44) / 40))
    assert "call a difference of 9.1 points of top-1 or more at the answer's 100 %" in difference_text(40, 3, 1.0)


def test_the_images_an_answer_at_100_percent_would_need_are_more_than_none():
    needed = images_for(accuracy=1.0)
    assert needed > 40 and smallest_difference(needed, 1.0) <= 0.05 < smallest_difference(needed - 1, 1.0)
    assert f"5 points would need {needed} images at 100 %" in difference_text(40, 3, 1.0)
