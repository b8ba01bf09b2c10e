"""Robustness means and mCE with a model whose predictions are written into the images."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from archdsl.analysis.robustness import (
    CorruptionAccuracy,
    RobustnessResult,
    evaluate_robustness,
    mce,
)
from archdsl.data.base import ImageSet
from archdsl.data.corruptions import CORRUPTIONS
from archdsl.errors import UserError

CLASSES = 4


class ReadsItsAnswer(nn.Module):
    """Predicts the class written in the first pixel (images are normalised with mean 0, std 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        answer = torch.round(x[:, 0, 0, 0] * 255).long()
        return F.one_hot(answer, CLASSES).float() + self.unused


@dataclass(frozen=True)
class Corrupted:
    corruption: str
    severity: int
    images: ImageSet


def corrupted(corruption: str, severity: int, right: int, total: int = 10) -> Corrupted:
    """A set of `total` images of which the model gets exactly `right` right."""
    labels = np.arange(total) % CLASSES
    answers = labels.copy()
    answers[right:] = (labels[right:] + 1) % CLASSES
    images = np.zeros((total, 4, 4, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = answers
    image_set = ImageSet(f"{corruption}-{severity}", images, labels.astype(np.int64), CLASSES, (0, 0, 0), (1, 1, 1))
    return Corrupted(corruption, severity, image_set)


def test_accuracy_table_and_means_follow_the_predictions():
    sets = [corrupted("fog", 1, 9), corrupted("fog", 2, 7), corrupted("snow", 1, 5), corrupted("snow", 2, 1)]
    result = evaluate_robustness(ReadsItsAnswer(), sets, batch_size=3)
    assert result.accuracy("fog", 2) == pytest.approx(0.7)
    assert result.per_corruption == pytest.approx({"fog": 0.8, "snow": 0.3})
    assert result.per_severity == pytest.approx({1: 0.7, 2: 0.4})
    assert result.mean == pytest.approx(0.55)
    assert not result.complete
    assert RobustnessResult.model_validate_json(result.model_dump_json()) == result


def test_the_full_benchmark_is_complete_and_its_mean_is_over_75_sets():
    cells = [
        CorruptionAccuracy(corruption=c, severity=s, top1=(i + s) / 100, count=10)
        for i, c in enumerate(CORRUPTIONS)
        for s in range(1, 6)
    ]
    result = RobustnessResult.from_cells(cells)
    assert result.complete
    assert result.mean == pytest.approx(np.mean([(i + s) / 100 for i in range(15) for s in range(1, 6)]))
    assert not RobustnessResult.from_cells(cells[:-1]).complete


def test_mce_normalises_errors_by_the_baseline():
    model = RobustnessResult.from_cells(
        [CorruptionAccuracy(corruption="fog", severity=s, top1=a, count=10) for s, a in [(1, 0.8), (2, 0.6)]]
        + [CorruptionAccuracy(corruption="snow", severity=1, top1=0.5, count=10)]
    )
    baseline = RobustnessResult.from_cells(
        [CorruptionAccuracy(corruption="fog", severity=s, top1=a, count=10) for s, a in [(1, 0.6), (2, 0.2)]]
        + [CorruptionAccuracy(corruption="snow", severity=1, top1=0.75, count=10)]
    )
    errors = mce(model, baseline)
    assert errors.per_corruption["fog"] == pytest.approx((0.2 + 0.4) / (0.4 + 0.8))
    assert errors.per_corruption["snow"] == pytest.approx(0.5 / 0.25)
    assert errors.mce == pytest.approx((0.5 + 2.0) / 2)
    with pytest.raises(UserError, match="snow"):
        mce(model, RobustnessResult.from_cells(baseline.cells[:2]))


def test_a_set_measured_twice_is_refused():
    cell = CorruptionAccuracy(corruption="fog", severity=1, top1=0.5, count=1)
    with pytest.raises(ValueError, match="twice"):
        RobustnessResult.from_cells([cell, cell])
