"""Top-1, NLL and ECE on predictions built to have known values."""

from __future__ import annotations

import math

import pytest
import torch

from archdsl.analysis.metrics import classification_metrics, expected_calibration_error


def two_class_logits(confidence: float, predicted: torch.Tensor) -> torch.Tensor:
    """Logits whose softmax gives `confidence` to class `predicted` (0 or 1) of two."""
    margin = math.log(confidence / (1 - confidence))
    logits = torch.zeros(len(predicted), 2, dtype=torch.float64)
    logits[torch.arange(len(predicted)), predicted] = margin
    return logits


def test_calibrated_predictions_have_zero_ece():
    # Every prediction says 0.8, and 80 of 100 are right.
    predicted = torch.zeros(100, dtype=torch.long)
    labels = torch.cat([torch.zeros(80), torch.ones(20)]).long()
    metrics = classification_metrics(two_class_logits(0.8, predicted), labels)
    assert metrics.top1 == pytest.approx(0.8)
    assert metrics.ece == pytest.approx(0.0, abs=1e-9)
    # NLL: 80 x -log 0.8 and 20 x -log 0.2, averaged.
    assert metrics.nll == pytest.approx(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2)), rel=1e-9)
    assert (metrics.count, metrics.n_bins) == (100, 15)


def test_miscalibrated_predictions_have_the_ece_of_their_gaps():
    # Half say 0.9 and are all right (gap 0.1), half say 0.6 and are all wrong (gap 0.6).
    confident = two_class_logits(0.9, torch.zeros(50, dtype=torch.long))
    unsure = two_class_logits(0.6, torch.zeros(50, dtype=torch.long))
    labels = torch.cat([torch.zeros(50), torch.ones(50)]).long()
    metrics = classification_metrics(torch.cat([confident, unsure]), labels)
    assert metrics.top1 == pytest.approx(0.5)
    assert metrics.ece == pytest.approx(0.5 * 0.1 + 0.5 * 0.6, abs=1e-9)


def test_overconfidence_in_one_bin():
    # All at confidence 0.95, 60 % right: ECE = 0.35.
    confidence = torch.full((10,), 0.95)
    correct = torch.tensor([1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.bool)
    assert expected_calibration_error(confidence, correct) == pytest.approx(0.35)


def test_bins_are_right_closed():
    # 2 bins: 0.5 falls in (0, 0.5], 0.75 in (0.5, 1]; each bin's gap is 0.5 and 0.25.
    confidence = torch.tensor([0.5, 0.75])
    correct = torch.tensor([False, True])
    assert expected_calibration_error(confidence, correct, n_bins=2) == pytest.approx(0.5 * 0.5 + 0.5 * 0.25)
    # With one bin the gaps average out first: |0.5 - 0.625| = 0.125.
    assert expected_calibration_error(confidence, correct, n_bins=1) == pytest.approx(0.125)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="expected logits"):
        classification_metrics(torch.zeros(3, 2), torch.zeros(4, dtype=torch.long))
