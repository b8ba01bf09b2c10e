"""`archdsl.evaluate(checkpoint, ...)`: top-1, NLL and ECE of a checkpoint on a test set, or its
accuracy per corruption and severity on a corrupted (`-c`) set. `archdsl eval` prints what this returns.

The corrupted sets are measured by `archdsl.analysis.robustness.evaluate_robustness`, the same
function `archdsl analyze --metrics robustness` uses (one fast inference copy for all the sets).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from archdsl.analysis.robustness import CorruptionAccuracy
from archdsl.analysis.sources import EvalSettings
from archdsl.common_settings import validated
from archdsl.errors import UsageError, UserError

__all__ = ["CorruptedEvaluation", "TestEvaluation", "evaluate"]


class TestEvaluation(BaseModel):
    """A checkpoint on a test split: top-1 (a fraction), NLL (nats) and ECE."""

    model_config = ConfigDict(frozen=True)

    checkpoint: str
    arch: str  # the design's name
    dataset: str
    images: int
    top1: float
    nll: float
    ece: float

    def to_dict(self) -> dict[str, Any]:
        """What `archdsl eval --json` prints."""
        return self.model_dump(exclude={"arch"})

    def to_text(self) -> str:
        """What `archdsl eval` prints: one line."""
        return (
            f"{self.arch} on {self.dataset} ({self.images} images): "
            f"top-1 {self.top1:.2%}  NLL {self.nll:.4f}  ECE {self.ece:.4f}"
        )


class CorruptedEvaluation(BaseModel):
    """A checkpoint on corrupted sets: top-1 (and NLL) per corruption and severity, and their mean."""

    model_config = ConfigDict(frozen=True)

    checkpoint: str
    arch: str
    dataset: str
    mean_top1: float
    sets: tuple[CorruptionAccuracy, ...]

    def to_dict(self) -> dict[str, Any]:
        """What `archdsl eval --json` prints."""
        rows = [cell.model_dump(include={"corruption", "severity", "top1", "nll"}) for cell in self.sets]
        return {"checkpoint": self.checkpoint, "dataset": self.dataset, "mean_top1": self.mean_top1, "sets": rows}

    def to_text(self) -> str:
        """What `archdsl eval` prints: top-1 % per corruption (rows) and severity (columns), with the means."""
        severities = sorted({cell.severity for cell in self.sets})
        corruptions = list(dict.fromkeys(cell.corruption for cell in self.sets))
        by_key = {(cell.corruption, cell.severity): cell.top1 for cell in self.sets}
        width = max(len(c) for c in [*corruptions, "corruption"])
        lines = [
            f"{self.arch} on {self.dataset}: top-1 % per corruption and severity",
            f"{'corruption':<{width}} " + " ".join(f"{s:>6}" for s in severities) + f" {'mean':>6}",
        ]
        for corruption in corruptions:
            values = [by_key.get((corruption, s)) for s in severities]
            present = [v for v in values if v is not None]
            cells = " ".join(f"{100 * v:6.2f}" if v is not None else f"{'-':>6}" for v in values)
            lines.append(f"{corruption:<{width}} {cells} {100 * sum(present) / len(present):6.2f}")
        columns = [[by_key[(c, s)] for c in corruptions if (c, s) in by_key] for s in severities]
        means = " ".join(f"{100 * sum(column) / len(column):6.2f}" for column in columns)
        return "\n".join([*lines, f"{'mean':<{width}} {means} {100 * self.mean_top1:6.2f}"])


def evaluate(
    checkpoint: str | Path, settings: EvalSettings | None = None, **fields: Any
) -> TestEvaluation | CorruptedEvaluation:
    """Measure `checkpoint` (a file `archdsl train` wrote) as `settings` say, or as keyword
    arguments naming `EvalSettings` fields say (`evaluate(path, dataset="synthetic-c")`).

    A dataset whose name ends in `-c` (`cifar100-c`, `synthetic-c:test=200`) is measured per
    corruption and severity; any other on its test split.
    """
    from archdsl.run.evaluate import checkpoint_named

    given = {**(settings.model_dump() if settings else {}), **fields}
    settings = validated(EvalSettings, given, what="evaluation settings")
    with checkpoint_named(checkpoint):  # a model whose logits are NaN: the message names its file
        return _evaluate(str(checkpoint), settings)


def _evaluate(path: str, settings: EvalSettings) -> TestEvaluation | CorruptedEvaluation:
    from archdsl.data import is_corrupted
    from archdsl.data.image_size import corrupted_for_input, dataset_for_input
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.evaluate import predict_logits

    device = select_device(settings.device)
    checkpoint = load_checkpoint(path, device=device, image_size=settings.image_size)
    trained_on = checkpoint.meta.get("dataset")
    named = settings.dataset or trained_on
    if not named:
        raise UserError(f"{path} does not say which dataset it was trained on", hint="pass --dataset NAME")
    dataset = dataset_for_input(named, checkpoint.arch.input, settings.image_size, settings.data_root)
    predict = functools.partial(predict_logits, amp=device.type == "cuda")
    if settings.corrupted is None and not is_corrupted(dataset):  # e.g. cifar100-c, synthetic-c:test=200
        return _on_test_split(path, checkpoint, dataset, settings, device, predict)

    from archdsl.analysis.robustness import evaluate_robustness
    from archdsl.data import load_corrupted
    from archdsl.run.train import check_compatible

    # The clean dataset a released folder is read as: --dataset beside --corrupted, else the checkpoint's.
    if settings.corrupted:
        clean: str | None = dataset
        dataset = corrupted_for_input(
            settings.corrupted, checkpoint.arch.input, settings.image_size, settings.data_root
        )
    else:
        clean = trained_on and dataset_for_input(
            trained_on, checkpoint.arch.input, settings.image_size, settings.data_root
        )
    sets = load_corrupted(
        dataset,
        root=settings.data_root,
        corruptions=settings.corruptions,
        severities=settings.severities,
        download=settings.download,
        clean=clean,
    )
    if not sets:
        raise UserError(f"{dataset}: no corrupted sets selected")
    for item in sets:  # all checked before the first is measured
        _refuse_empty(item.images, f"{dataset} ({item.corruption}, severity {item.severity})")
        check_compatible(checkpoint.arch, item.images)
    result = evaluate_robustness(
        checkpoint.model, sets, batch_size=settings.batch_size, device=device, progress=settings.progress,
        optimize=settings.optimize, predict=predict, desc=f"eval {dataset}",
    )  # fmt: skip
    return CorruptedEvaluation(
        checkpoint=path, arch=checkpoint.arch.name, dataset=dataset, mean_top1=result.mean, sets=result.cells
    )


def _on_test_split(path: str, checkpoint, dataset: str, settings: EvalSettings, device, predict) -> TestEvaluation:
    from archdsl.analysis.metrics import classification_metrics
    from archdsl.data import load_split
    from archdsl.run.train import check_compatible

    if settings.corruptions or settings.severities:
        raise UsageError("--corruptions/--severities only apply to corrupted (-c) datasets")
    test_set = load_split(dataset, "test", root=settings.data_root, download=settings.download)
    _refuse_empty(test_set, dataset)
    check_compatible(checkpoint.arch, test_set)
    logits = predict(
        checkpoint.model, test_set, batch_size=settings.batch_size, device=device, progress=settings.progress,
        optimize=settings.optimize,
    )  # fmt: skip
    scored = classification_metrics(logits, test_set.labels)
    return TestEvaluation(
        checkpoint=path, arch=checkpoint.arch.name, dataset=dataset, images=len(test_set),
        top1=scored.top1, nll=scored.nll, ece=scored.ece,
    )  # fmt: skip


def _refuse_empty(image_set, what: str) -> None:
    if len(image_set) == 0:  # its accuracy would be NaN, printed as if it were a result
        raise UserError(f"{what}: the test set holds no images")
