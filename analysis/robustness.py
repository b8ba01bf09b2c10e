"""Corruption robustness: top-1 accuracy on every corrupted test set (CIFAR-100-C style).

The paper's robustness number is the plain mean top-1 accuracy over the 15 corruptions x
5 severities (75 sets), *not* Hendrycks' mCE; `mce` is offered beside it for comparison
with a baseline run. Every set is weighted equally (they are all the size of the test set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Protocol

import torch
from pydantic import BaseModel, ConfigDict

from archdsl.data.base import ImageSet
from archdsl.data.corruptions import CORRUPTIONS, SEVERITIES  # the benchmark's 15 x 5
from archdsl.errors import UserError
from archdsl.run.evaluate import require_finite_logits, score_logits


class CorruptedImages(Protocol):
    """What `archdsl.data.load_corrupted` returns per set (`CorruptedSet`)."""

    @property
    def corruption(self) -> str: ...
    @property
    def severity(self) -> int: ...
    @property
    def images(self) -> ImageSet: ...


class CorruptionAccuracy(BaseModel):
    """Top-1 (a fraction) on one corrupted set: a corruption at one severity, over `count` images."""

    model_config = ConfigDict(frozen=True)

    corruption: str
    severity: int
    top1: float  # fraction in [0, 1]
    count: int
    nll: float | None = None  # mean NLL (nats); None in reports written before it was kept


class RobustnessResult(BaseModel):
    """Accuracy per corruption x severity and its means (fractions in [0, 1])."""

    model_config = ConfigDict(frozen=True)

    cells: tuple[CorruptionAccuracy, ...]
    per_corruption: dict[str, float]  # mean over the severities measured
    per_severity: dict[int, float]  # mean over the corruptions measured
    mean: float  # mean over all cells: the paper's robustness when `complete`
    complete: bool  # all 15 benchmark corruptions at all 5 severities were measured

    @classmethod
    def from_cells(cls, cells: Sequence[CorruptionAccuracy]) -> RobustnessResult:
        if not cells:
            raise ValueError("no corrupted sets were measured")
        seen = set()
        for cell in cells:
            if (cell.corruption, cell.severity) in seen:
                raise ValueError(f"{cell.corruption} severity {cell.severity} was measured twice")
            seen.add((cell.corruption, cell.severity))
        corruptions = list(dict.fromkeys(cell.corruption for cell in cells))
        severities = sorted({cell.severity for cell in cells})
        return cls(
            cells=tuple(cells),
            per_corruption={c: fmean(x.top1 for x in cells if x.corruption == c) for c in corruptions},
            per_severity={s: fmean(x.top1 for x in cells if x.severity == s) for s in severities},
            mean=fmean(cell.top1 for cell in cells),
            complete={(c, s) for c in CORRUPTIONS for s in SEVERITIES} <= seen,
        )

    def accuracy(self, corruption: str, severity: int) -> float:
        for cell in self.cells:
            if (cell.corruption, cell.severity) == (corruption, severity):
                return cell.top1
        raise KeyError((corruption, severity))


def evaluate_robustness(
    model: torch.nn.Module,
    corrupted_sets: Sequence[CorruptedImages],
    *,
    batch_size: int = 256,
    device: str | torch.device | None = None,
    progress: bool = False,
    optimize: bool = True,
    predict: Callable[..., torch.Tensor] | None = None,
    desc: str = "corruptions",
) -> RobustnessResult:
    """Top-1 of `model` on each corrupted set; `predict` defaults to `archdsl.run.evaluate.predict_logits`.

    `optimize`: all sets run through one fast inference copy of the model
    (`archdsl.optimize_model`), made once, so that compiling is judged on all their images.
    """
    from archdsl.progress import StepLog, progress_bar

    if predict is None:
        from archdsl.run.evaluate import predict_logits

        predict = predict_logits
    if optimize:
        from archdsl.run.optimize import optimize_model

        images = sum(len(item.images) for item in corrupted_sets)
        model = optimize_model(model, training=False, device=device, images=images)
    cells = []
    log = StepLog(desc, len(corrupted_sets), show=progress)  # a log's lines, where the bar is not drawn
    for item in progress_bar(corrupted_sets, desc=desc, unit="set", show=progress):
        logits = predict(model, item.images, batch_size=batch_size, device=device, optimize=False)
        scored = score_logits(require_finite_logits(logits, item.images.name), item.images.labels)
        log.step(f"{item.corruption} {item.severity}: top-1 {scored.top1:.3f}")
        cells.append(
            CorruptionAccuracy(
                corruption=item.corruption,
                severity=int(item.severity),
                top1=scored.top1,
                count=len(logits),
                nll=scored.nll,
            )
        )
    return RobustnessResult.from_cells(cells)


class CorruptionErrors(BaseModel):
    """Hendrycks' corruption error normalised by a baseline: 1.0 means as bad as the baseline."""

    model_config = ConfigDict(frozen=True)

    per_corruption: dict[str, float]  # CE_c = sum_s err(c, s) / sum_s err_baseline(c, s)
    mce: float  # mean of CE_c over the corruptions


def mce(result: RobustnessResult, baseline: RobustnessResult) -> CorruptionErrors:
    """mCE of `result` relative to `baseline` over the cells `result` measured."""
    per_corruption = {}
    for corruption in result.per_corruption:
        severities = [c.severity for c in result.cells if c.corruption == corruption]
        try:
            errors = sum(1 - result.accuracy(corruption, s) for s in severities)
            base = sum(1 - baseline.accuracy(corruption, s) for s in severities)
        except KeyError as missing:
            raise UserError(
                f"the baseline has no accuracy for {missing.args[0][0]} at severity {missing.args[0][1]}",
                hint="measure the baseline on the same corruptions and severities",
            ) from None
        if base == 0:
            raise UserError(f"the baseline makes no error on {corruption}: its corruption error is undefined")
        per_corruption[corruption] = errors / base
    return CorruptionErrors(per_corruption=per_corruption, mce=fmean(per_corruption.values()))
