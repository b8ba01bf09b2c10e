"""One analysis pipeline: `analyze(model, data, measures, settings) -> AnalysisReport`.

`archdsl analyze` and the search (`search/fidelity/measures.py`) both call `analyze`, so a measure
means the same thing everywhere: the same loss (NLL + 0.5 * weight decay * ||w||^2, with the
weight decay of the recipe the model was trained with unless told otherwise), the same
augmented training batches, the same solver settings. The settings are concrete values
(nothing is left to a default decided later) and the report records them beside the results.

Each measure is one entry of `MEASURES`: the data splits it reads and a function of
(model, data, settings, context) that returns the report fields it fills. A faster
implementation of a measure replaces its function; the pipeline stays as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from archdsl.analysis.settings import AnalysisSettings
from archdsl.progress import Stages

if TYPE_CHECKING:
    from archdsl.analysis.robustness import RobustnessResult
    from archdsl.data import CorruptedSet, ImageSet

__all__ = ["DEFAULT_MEASURES", "MEASURES", "AnalysisData", "analyze"]

Split = Literal["scored", "train", "corrupted"]  # the fields of AnalysisData a measure reads
ScoredSplit = Literal["test", "validation"]  # where the scored images come from


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class AnalysisData:
    """The images a measure reads: the images it scores (`scored`, from the split `scored_split` names:
    the test split for `archdsl analyze`, validation images for a search's trial), the training split
    (augmented by the recipe where a measure says so) and corrupted copies of the scored split. Leave
    out what is not needed."""

    name: str
    scored: ImageSet | None = None  # what acc, fourier, variance, cka and lesion run on
    scored_split: ScoredSplit = "test"
    train: ImageSet | None = None
    corrupted: Sequence[CorruptedSet] | None = None  # one per corruption and severity


@dataclass
class Context:
    """What one `analyze` call shares between measures (computed once, used by several)."""

    device: Any
    progress: bool
    baseline: RobustnessResult | None = None  # to compute mCE against
    cache: dict[str, Any] = field(default_factory=dict)
    optimize: bool = False  # run the inference measures on `archdsl.optimize_model`'s fast copy
    images: int | None = None  # how many images the inference measures will see (decides compiling)

    def inference_model(self, model):
        """The model the inference measures (acc, robustness, fourier, variance) run: one fast
        copy (`optimize_model(training=False)`: the same function), made on first use and shared,
        or the model as built when `optimize` is off."""
        if not self.optimize:
            return model
        if "inference_model" not in self.cache:
            from archdsl.run.optimize import optimize_model

            self.cache["inference_model"] = optimize_model(
                model, training=False, device=self.device, images=self.images
            )
        return self.cache["inference_model"]


MeasureFn = Callable[[Any, AnalysisData, AnalysisSettings, Context], dict[str, Any]]


@dataclass(frozen=True)
class Measure:
    """One measure of the pipeline: its name, the data splits it reads and the function that measures."""

    name: str
    needs: tuple[Split, ...]
    run: MeasureFn
    description: str


# --------------------------------------------------------------------------- the measures


def _scored_set(data: AnalysisData, settings: AnalysisSettings) -> ImageSet:
    """The scored images, their `--test-subset` fraction (of the test split: `archdsl analyze`'s setting)."""
    assert data.scored is not None, "analyze refuses a measure whose split was not given"
    return data.scored.subset(settings.test_subset, seed=settings.seed)


def _accuracy(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.metrics import classification_metrics
    from archdsl.run.evaluate import predict_logits

    scored = _scored_set(data, settings)
    logits = predict_logits(
        context.inference_model(model), scored, batch_size=settings.batch_size, device=context.device,
        progress=context.progress, optimize=False,
    )  # fmt: skip
    return {"classification": classification_metrics(logits, scored.labels)}


def _robustness(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.robustness import evaluate_robustness, mce

    sets = list(data.corrupted or ())
    if settings.test_subset < 1:
        sets = [dataclasses.replace(s, images=s.images.subset(settings.test_subset, seed=settings.seed)) for s in sets]
    result = evaluate_robustness(
        context.inference_model(model), sets, batch_size=settings.batch_size, device=context.device,
        progress=context.progress, optimize=False, desc="robustness",
    )  # fmt: skip
    fields: dict[str, Any] = {"robustness": result}
    if context.baseline is not None:
        fields["corruption_errors"] = mce(result, context.baseline)
    return fields


def training_batches_for(data: AnalysisData, settings: AnalysisSettings, n_batches: int, batch_size: int):
    """The first `n_batches` augmented training batches (the recipe's augmentation, `settings.seed`)."""
    from archdsl.analysis._hessian_batches import training_batches

    assert data.train is not None, "analyze refuses a measure whose split was not given"
    return training_batches(data.train, n_batches, batch_size=batch_size, recipe=settings.recipe, seed=settings.seed)


def _as_built_layout(model):
    """The model with its weights in the layout it is built (and saved) with.

    A training version from `optimize_model` keeps channels_last weights; their products round
    differently, so the search (which measures the model it just trained) and `archdsl analyze`
    (which reads the checkpoint) would report different spectra for one model. A copy, so the
    caller's model is left as it was.
    """
    import copy

    import torch

    if all(p.is_contiguous() for p in model.parameters()):
        return model
    return copy.deepcopy(model).to(memory_format=torch.contiguous_format)


def _hessian(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.hessian import hessian_spectrum

    h = settings.hessian
    batches = training_batches_for(data, settings, h.batches, h.batch_size)
    spectrum = hessian_spectrum(
        _as_built_layout(model), batches, k=h.k, max_iter=h.max_iter, tol=h.tol, weight_decay=settings.weight_decay,
        method=h.method, hvp=h.hvp, seed=settings.seed, device=context.device, progress=context.progress,
    )  # fmt: skip
    return {"hessian": spectrum}


def _feature_maps(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.fourier import feature_map_statistics

    images = scored_images(data, settings, settings.images)
    statistics = feature_map_statistics(
        context.inference_model(model), images, batch_size=64, device=context.device, progress=context.progress
    )
    return {"feature_maps": statistics}


def scored_images(data: AnalysisData, settings: AnalysisSettings, count: int):
    """The first `count` of the (subset) scored images, normalised, as one float tensor (N, C, H, W)."""
    import numpy as np
    import torch

    from archdsl.run.loader import make_loader

    scored = _scored_set(data, settings)
    sample = scored.take(np.arange(min(count, len(scored))))
    return torch.cat([x for x, _ in make_loader(sample, settings.batch_size, augment=False, shuffle=False)])


def _training_nll(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.metrics import augmented_training_nll

    result = augmented_training_nll(
        model, data.train, settings.recipe, images=settings.train_images, batch_size=settings.batch_size,
        seed=settings.seed, device=context.device, progress=context.progress,
    )  # fmt: skip
    return {"training_nll": result}


def _landscape(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.landscape import loss_landscape

    s = settings.landscape
    batches = training_batches_for(data, settings, s.batches, s.batch_size)
    result = loss_landscape(
        model, batches, dims=s.dims, points=s.points, span=s.span, weight_decay=settings.weight_decay,
        seed=settings.seed, device=context.device, progress=context.progress,
    )  # fmt: skip
    return {"landscape": result}


def _cka(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.cka import minibatch_cka

    images = scored_images(data, settings, settings.cka.images)
    result = minibatch_cka(
        model, images, batch_size=min(settings.cka.batch_size, len(images)), device=context.device,
        progress=context.progress,
    )  # fmt: skip
    return {"cka": result}


def _lesion(model, data: AnalysisData, settings: AnalysisSettings, context: Context) -> dict[str, Any]:
    from archdsl.analysis.lesion import lesion_study

    result = lesion_study(
        model, _scored_set(data, settings), batch_size=settings.batch_size, device=context.device,
        progress=context.progress,
    )  # fmt: skip
    return {"lesion": result}


MEASURES: dict[str, Measure] = {
    m.name: m
    for m in (
        Measure("acc", ("scored",), _accuracy, "top-1, NLL and ECE on the test split"),
        Measure("robustness", ("corrupted",), _robustness, "mean top-1 over the corrupted test sets"),
        Measure("hessian", ("train",), _hessian, "Hessian max-eigenvalue spectrum (NEP, APE)"),
        Measure("fourier", ("scored",), _feature_maps, "Delta log amplitude of the feature maps per block"),
        Measure("variance", ("scored",), _feature_maps, "feature-map variance per block"),
        Measure("nll-train", ("train",), _training_nll, "NLL on augmented training images (NLL_train)"),
        Measure("landscape", ("train",), _landscape, "filter-normalised loss landscape, 1-D or 2-D"),
        Measure("cka", ("scored",), _cka, "mini-batch linear CKA between every pair of blocks"),
        Measure("lesion", ("scored",), _lesion, "test top-1 with each block's residual branch removed"),
    )
}
DEFAULT_MEASURES: tuple[str, ...] = ("acc", "robustness", "hessian", "fourier", "variance")


def needed_splits(measures: Iterable[str]) -> set[Split]:
    """The data splits `measures` read (what a caller has to load)."""
    return {split for name in measures for split in MEASURES[name].needs}


def check_measures(measures: Iterable[str]) -> tuple[str, ...]:
    """The measures without repeats, in the order given; ValueError naming any unknown one."""
    chosen = tuple(dict.fromkeys(measures))
    unknown = [name for name in chosen if name not in MEASURES]
    if unknown:
        raise ValueError(f"unknown measure {', '.join(map(repr, unknown))}; choose from {', '.join(MEASURES)}")
    return chosen


# --------------------------------------------------------------------------- the entry point


def analyze(
    model,
    data: AnalysisData,
    measures: Iterable[str] = DEFAULT_MEASURES,
    settings: AnalysisSettings | None = None,
    *,
    device=None,
    progress: bool = False,
    baseline=None,
    checkpoint: str | None = None,
    optimize: bool = True,
    stages: Stages | None = None,
):
    """Measure `model` (an ArchNet, or any module with `.arch` for the report's name) on `data`.

    Returns an `AnalysisReport` with one field per measure, the settings used and each measure's seconds
    (`stage_seconds`, after those of `stages`: the stages a caller timed before, such as loading the data; with
    `progress`, a log gets a line as each starts and ends). `baseline`
    (a `RobustnessResult`) adds Hendrycks' mCE beside the robustness. `optimize`: acc,
    robustness, fourier and variance run on one fast inference copy (`archdsl.optimize_model`);
    the Hessian, landscape, nll-train, cka and lesion always run on the model as built (they
    differentiate with respect to the weights, or change the model). Nothing is printed or written.
    """
    from archdsl.analysis.report import AnalysisReport

    settings = settings or AnalysisSettings()
    chosen = check_measures(measures)
    missing = sorted(s for s in needed_splits(chosen) if _split(data, s) is None)
    if missing:
        raise ValueError(f"{', '.join(chosen)} need the {' and '.join(missing)} data, which was not given")
    context = Context(
        device=device, progress=progress, baseline=baseline, optimize=optimize,
        images=_inference_images(data, settings, chosen),
    )  # fmt: skip
    stages = stages or Stages("analyze", show=progress)
    results: dict[str, Any] = {}
    done: set[MeasureFn] = set()
    for name in chosen:
        measure = MEASURES[name]
        if measure.run in done:  # fourier and variance come from one pass
            continue
        together = "+".join(other for other in chosen if MEASURES[other].run is measure.run)
        with stages.stage(together, measure.description):
            results.update(measure.run(model, data, settings, context))
        done.add(measure.run)
    arch = getattr(model, "arch", None)
    return AnalysisReport(
        checkpoint=checkpoint,
        arch=arch.name if arch is not None else type(model).__name__,
        arch_digest=arch.digest() if arch is not None else "",
        dataset=data.name,
        measures=chosen,
        settings=settings,
        stage_seconds=dict(stages.seconds),
        **results,
    )


def _inference_images(data: AnalysisData, settings: AnalysisSettings, measures: Sequence[str]) -> int:
    """About how many images the inference measures among `measures` will run (for compiling)."""
    images = 0
    if "acc" in measures and data.scored is not None:
        images += round(len(data.scored) * settings.test_subset)
    if "robustness" in measures and data.corrupted:
        images += round(sum(len(s.images) for s in data.corrupted) * settings.test_subset)
    if {"fourier", "variance"} & set(measures):
        images += settings.images
    return images


def _split(data: AnalysisData, split: Split):
    return {"scored": data.scored, "train": data.train, "corrupted": data.corrupted}[split]


def hessian_over_training(
    checkpoints: Iterable[tuple[int, str, Any]],
    data: AnalysisData,
    settings: AnalysisSettings | None = None,
    *,
    device=None,
    progress: bool = False,
):
    """The Hessian spectrum of each (epoch, name, model) in turn, on the same training batches
    and settings: a `HessianTrajectory`. `checkpoints` may be a generator that loads each model
    when it is its turn (only one is held at a time)."""
    from archdsl.analysis.trajectory import HessianTrajectory, TrajectoryPoint
    from archdsl.run.evaluate import checkpoint_named

    settings = settings or AnalysisSettings()
    points = []
    for epoch, name, model in checkpoints:
        with checkpoint_named(name):  # a model whose loss is NaN: the message says which checkpoint
            spectrum = analyze(model, data, ["hessian"], settings, device=device, progress=progress).hessian
        points.append(TrajectoryPoint(epoch=epoch, checkpoint=name, spectrum=spectrum))
    if not points:
        raise ValueError("no checkpoint to measure")
    return HessianTrajectory(points=tuple(points))
