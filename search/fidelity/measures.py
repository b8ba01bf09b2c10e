"""The measures of one design: the one module of the search that builds, trains and analyses.

Within `archdsl.search`, only this module imports `archdsl.nn` (the model and its cost; the memory
estimate apart), `archdsl.run.train` (training), `archdsl.analysis` (Hessian, robustness) and the
data loaders (`archdsl.data.load_split`, `load_corrupted`); tests/test_layering.py checks it.
The other search modules import archdsl's torch-free core (errors, files, ir, lang, buildup)
and what sets a run up (`data.describe`, `run.device`, `run.distributed`, `run.recipe`,
`run.loader.derive_seed`) and the memory estimate (`nn.summary.ensure_fits`, torch-free) directly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, NonNegativeInt, PositiveInt, field_validator

from archdsl.common_settings import MAX_EPOCHS, MAX_SEEDS, OptimizeSettings, flag_field
from archdsl.data.cards import DEFAULT_DATASET, SMALL_PER_CLASS, card_for, default_text
from archdsl.errors import UserError
from archdsl.ir import Arch
from archdsl.run.recipe import RecipeName  # torch-free
from archdsl.search.time_estimate import StepSeconds

if TYPE_CHECKING:
    from torch import nn

    from archdsl.analysis.settings import AnalysisSettings
    from archdsl.data import CorruptedSet, ImageSet
    from archdsl.run import EpochMetrics
    from archdsl.run.recipe import TrainConfig
    from archdsl.search.studies.record import HeldOutFigures

# A `Fidelity` made in Python takes the card of `archdsl search`'s default dataset (odd-one-out), as the command
# with no arguments does; a study on another dataset takes that dataset's card (archdsl.search.planning.fidelity_for).
_DEFAULT = card_for(DEFAULT_DATASET).search
# Each budget step doubles the epochs: ten take a 2-epoch first rung to 2,048 (and the top rung stays within
# MAX_EPOCHS, archdsl.search.planning checks).
MAX_BUDGET_STEPS = 10


# The settle stage's budgets, in multiples of the epochs of the walk's last budget: 2x first, then 3x (the 24 epochs
# of the main job's reference). Why these: 8 epochs separate odd-one-out's groups but not the designs within a point
# of the best; 18 and 24 rank them (docs/results.md).
SETTLE_FACTORS = (2, 3)


class Fidelity(OptimizeSettings):
    """How hard each candidate is looked at: cheap settings make a search fast, not exact.

    The defaults are `archdsl search`'s (its --help shows them from here). Those that depend on the dataset come
    from its card (archdsl.data.cards: epochs, subset, validation images, budget steps): a study on a dataset takes
    its card's (archdsl.search.planning.fidelity_for), and a `Fidelity()` made directly takes the default dataset's
    (odd-one-out), as `archdsl search` with no arguments does. `optimize`: train and measure the fast version of
    each model (archdsl.optimize_model).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    epochs: PositiveInt = flag_field(
        "--epochs", "training epochs per candidate (at the first budget, when the search raises it)",
        default=_DEFAULT.epochs, le=MAX_EPOCHS, default_text=default_text("epochs"),
    )  # fmt: skip
    subset: float = flag_field(
        "--subset", "class-stratified fraction of the training set (at the first budget)", default=_DEFAULT.subset,
        gt=0, le=1, metavar="FRACTION", default_text=default_text("subset"),
    )  # fmt: skip
    budget_steps: NonNegativeInt = flag_field(
        "--budget-steps", "how many times the build-up walk may raise a verdict's budget while the verdict still "
        "moves, each step doubling the epochs (and the subset while it holds fewer than "
        f"{SMALL_PER_CLASS:,} images a class); 0: one budget (docs/search.md, 'The budget the search finds')",
        default=_DEFAULT.budget_steps, le=MAX_BUDGET_STEPS,
        default_text=default_text("budget_steps") + " (where no budget was measured)",
    )  # fmt: skip
    settle_steps: int = flag_field(
        "--settle-steps", "budgets above the search's at which the build-up walk re-measures its shortlist (the "
        "answer and its strongest rival: the best mean of the designs tied with it, else of the others) on fresh "
        "paired seeds before it names the answer: "
        f"{SETTLE_FACTORS[0]}x, then {SETTLE_FACTORS[1]}x the epochs of its last budget, until the best beats the rest "
        "beyond the noise (or, at the last, the rest are named as its ties); 0: name the walk's answer as it stands",
        default=1, ge=0, le=len(SETTLE_FACTORS), metavar="N",
    )  # fmt: skip
    budgeting: Literal["per-verdict", "calibrate"] = flag_field(
        "--budgeting", "how the walk climbs the budgets: each verdict on its own (per-verdict), or the first "
        "verdict's budget for every later one (calibrate)", default="per-verdict",
    )  # fmt: skip
    seeds: PositiveInt = flag_field(
        "--seeds", "paired seeds each candidate is trained on: its accuracy is their mean (seed index s is "
        "--seed + s for every design: the same training subset, batch order and augmentation draws; 3: the "
        "fewest whose answers agree, docs/results-search.md)", default=3, le=MAX_SEEDS,
    )  # fmt: skip
    # A fraction or a count, kept as written (`0.1`, `5000`): archdsl.data.parse_val_split reads it.
    val_split: str | None = flag_field(
        "--val-split", "validation images held out of the training split: each candidate is trained on the rest "
        "and scored on these (the test set chooses nothing)", default=_DEFAULT.val_split, metavar="FRACTION|N",
        default_text=default_text("val_split") + "; on small data with no measured budget, 769 images where a fifth "
        "of the split holds them (what calls a 5-point difference: docs/search.md)",
    )  # fmt: skip
    val_subset: float = flag_field(
        "--val-subset", "class-stratified fraction of the validation images (and their corrupted copies) "
        "that score each candidate", default=_DEFAULT.subset, gt=0, le=1, metavar="FRACTION",
        default_text="the --subset fraction; 1 on small data (under 1,000 images a class) with no measured budget",
    )  # fmt: skip
    # `fast` learns fastest in few epochs (docs/results.md, "Short recipes"); the paper's `deit` needs hundreds.
    recipe: RecipeName = flag_field(
        "--recipe", "training recipe (fast learns fastest in few epochs: docs/results.md)", default="fast"
    )
    # TrainConfig fields set over the recipe's (`search --opt adamw --lr 0.01`): (field, value) pairs.
    train_settings: tuple[tuple[str, Any], ...] = ()
    # `objectives`: the command line that reproduces a study names the flag only when an objective reads it.
    hessian_batches: PositiveInt = flag_field(
        "--hessian-batches", "batches of 16 for nep/ape", default=2, le=1_000, objectives=("nep", "ape")
    )
    # Lanczos converges in ~15-45 products where power iteration needs hundreds.
    hessian_max_iter: PositiveInt = flag_field(
        "--hessian-iters", "Lanczos steps per batch for nep/ape", default=40, le=1_000, objectives=("nep", "ape")
    )
    hessian_tol: float = 1e-3
    # See benchmarks/hessian.py: Lanczos is 2.0-6.7x faster than PyHessian, and accurate.
    hessian_method: Literal["power", "lanczos"] = "lanczos"
    latency_batch: int = 16
    severities: tuple[Annotated[int, Field(ge=1, le=5)], ...] = flag_field(
        "--severities", "corruption severities for robustness", default=(3,), metavar="S,S", objectives=("robustness",)
    )

    @field_validator("val_split")
    @classmethod
    def _val_split_reads(cls, value: str | None) -> str | None:
        """A --val-split that is no fraction or count is refused with the settings, not by the data."""
        if value is not None:
            from archdsl.data.validation import parse_val_split  # numpy: only when one is given

            parse_val_split(value)
        return value


@dataclass
class DataContext:
    """The data of a search, loaded once per worker: the training split less its validation part, the
    validation part that scores, prunes and compares the candidates, and the test split, which scores each
    trained model once for the trial to seal (`test_accuracy`): nothing that chooses reads it (designs chosen
    on test images would be scored on what chose them)."""

    name: str
    root: Path | None
    train_set: ImageSet  # the training split less `validation`: what each trial trains on (its --subset of it)
    validation: ImageSet
    test: ImageSet | None = None  # the whole test split (None: a caller that measures no test figures)
    # The whole training split, validation part included: the Hessian's batches (NEP/APE) are drawn from
    # it as `archdsl analyze` draws them from a checkpoint's dataset, so both report the same spectrum.
    train_split: ImageSet | None = None
    _corrupted: list[CorruptedSet] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Trained:
    """A trained candidate: the model, its validation top-1 (a fraction) and its per-epoch history."""

    model: nn.Module | None  # None: a replayed trial's (the table measured it)
    accuracy: float  # validation top-1, a fraction (a replayed one: the table's)
    history: list[dict[str, float]]
    seed_accuracies: tuple[float, ...] = ()  # with --seeds N > 1: each paired seed's; `accuracy` is their mean
    # Each seed's test top-1, for the trial to seal on the study (record.seal_test): never a value, never chosen on.
    sealed: HeldOutFigures | None = None
    rank_digests: tuple[
        str, ...
    ] = ()  # under torchrun: the design's digest on each rank (archdsl.search.fidelity.distributed)


class Diverged(Exception):
    """Training blew up (NaN loss); the candidate fails, the search goes on. Its message is the trial's reason
    whole, "training diverged: ..." (the training's own `TrainingDiverged` says it so)."""


def seed_of(seed: int, index: int) -> int:
    """The training seed of paired seed `index` (0 is `--seed` itself): one value for every design, so
    that seed index s trains each design on the same subset, batch order and augmentation draws."""
    return seed + index


def load_data(
    name: str,
    root: Path | None,
    *,
    seed: int,
    val_subset: float = 1.0,
    val_split: str | None = None,
    download: bool = False,
) -> DataContext:
    """The training split of `name` (downloaded if missing and asked), split into the images trials train
    on and the fixed, class-stratified validation images (`val_split`: a fraction or a count; None: the
    search's default, `archdsl.data.default_val_size`) that score them, shrunk to a class-stratified
    `val_subset`, and the whole test split. Each trial's training shrinks the rest further (`Fidelity.subset`)."""
    from archdsl.data import load_split, parse_val_split, split_validation

    train_set = load_split(name, "train", root, download=download)
    rest, validation = split_validation(train_set, None if val_split is None else parse_val_split(val_split))
    if val_subset < 1:
        _warn_if_below_one_a_class(validation, val_subset)
        validation = validation.subset(val_subset, seed=seed)
    test = load_split(name, "test", root, download=download)
    return DataContext(name=name, root=root, train_set=rest, validation=validation, test=test, train_split=train_set)


def data_not_here(name: str, root: str | None, *, download: bool) -> str | None:
    """Why dataset `name` is not here to load (None: it is): what loading it would say, or that --download fetches
    it when the search starts. Data archdsl cannot fetch (ImageNet, given out after sign-up) with `download`: the
    loader's UserError, as the search meets it."""
    from archdsl.data import describe, load_split, why_missing

    info = describe(name, root)
    if info.available:
        return None
    if download and info.name.startswith("imagenet"):
        load_split(name, "train", root, download=True)  # refuses at once: nothing is fetched
    if download:
        return f"{name} is not here yet: --download fetches it when the search starts"
    missing = why_missing(name, root)
    return None if missing is None else f"{missing.message}: the search refuses it until it is there"


def _warn_if_below_one_a_class(validation: ImageSet, fraction: float) -> None:
    """A warning that says how many validation images score when `fraction` of a class is less than one image: the
    class-stratified subset keeps one of each class even then (--val-subset 1e-9 scores on one a class)."""
    import warnings

    import numpy as np

    from archdsl.errors import ArchdslWarning

    _, counts = np.unique(validation.labels, return_counts=True)
    short = sum(round(int(n) * fraction) < 1 for n in counts)
    if short:
        warnings.warn(
            f"--val-subset {fraction:g} keeps less than one validation image of {short} of the {len(counts)} "
            f"classes: each candidate is scored on {validation.subset_size(fraction)} of the {len(validation)} "
            "validation images (at least one of each class)",
            ArchdslWarning,
            stacklevel=3,
        )


def fit_to_data(base: Arch, image_shape: tuple[int, int, int], num_classes: int) -> Arch:
    """The base network with the dataset's input shape (C, H, W) and class count (from
    `archdsl.data.describe`, so that a dry run fits the space as the run does)."""
    from archdsl.ir import InputShape

    c, h, w = image_shape
    return base.model_copy(update={"input": InputShape(channels=c, height=h, width=w), "classes": num_classes})


def check_described(data: DataContext, image_shape: tuple[int, int, int], num_classes: int) -> None:
    """The loaded data is what its description said (the space was fitted to the description)."""
    found = (data.train_set.image_shape, data.train_set.num_classes)
    if found != (tuple(image_shape), num_classes):
        raise UserError(
            f"dataset {data.name}: the files hold {found[0]} images in {found[1]} classes, "
            f"not the {tuple(image_shape)} in {num_classes} of its description"
        )


def static_costs(arch: Arch) -> dict[str, float]:
    """Parameter count and FLOPs per image, from the IR alone."""
    from archdsl.nn.summary import summarize

    summary = summarize(arch)
    return {"params": float(summary.params), "flops": float(summary.flops)}


def latency_ms(arch: Arch, data: DataContext, fidelity: Fidelity, device: str, seed: int) -> float:
    """Median inference time per image (ms) of a batch of validation images, after one warm-up pass, of the
    design built with weights fixed by `seed`."""
    import numpy as np
    import torch

    from archdsl.nn.build import build
    from archdsl.run.device import select_device

    dev = select_device(device)
    model: torch.nn.Module = build(arch, seed=seed).to(dev).eval()
    if fidelity.optimize:  # the latency of the model as it would be run, without compiling (a few batches)
        from archdsl.run.optimize import optimize_model

        model = optimize_model(model, training=False, device=dev, compile=False)
    batch = np.array(data.validation.images[: fidelity.latency_batch])  # a writable copy
    images = torch.from_numpy(batch).permute(0, 3, 1, 2).float().div(255)
    images = images.to(dev)
    times = []
    with torch.inference_mode():
        for _ in range(4):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            start = time.perf_counter()
            model(images)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - start)
    times = sorted(times[1:])
    return 1000 * times[len(times) // 2] / len(images)


def training_seconds_per_image(arch: Arch, fidelity: Fidelity, *, device: str, steps: int = 4) -> float:
    """Seconds a training step of `arch` takes per image here (`step_seconds_per_image`'s `train`)."""
    return step_seconds_per_image(arch, fidelity, device=device, steps=steps).train


_TIMED: dict[tuple[str, int, str], StepSeconds] = {}  # one short timing per design, batch and device, per process


def step_seconds_per_image(arch: Arch, fidelity: Fidelity, *, device: str, steps: int = 4) -> StepSeconds:
    """Seconds per image of a training step of `arch` here and of a scoring pass (forward, no gradient), at the
    fidelity's batch sizes: random images of its input shape, one step to warm up, then the fastest of `steps`. On
    the CPU it is the CPU time of one torch thread (`time.thread_time`), which other work on the machine does not
    inflate as it does the wall time; on a GPU the wall time. Timed once per design (cached). What `--dry-run`'s time
    estimate grows from (`time_estimate`)."""
    import torch

    from archdsl.nn.build import build
    from archdsl.run.device import select_device

    config = train_config(fidelity, device=device, seed=0)
    key = (arch.digest(), config.batch_size, device)
    if key in _TIMED:
        return _TIMED[key]
    dev = select_device(device)
    model = build(arch, seed=0).to(dev).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    clock = time.perf_counter if dev.type == "cuda" else time.thread_time

    def images(batch: int) -> torch.Tensor:
        return torch.rand((batch, arch.input.channels, arch.input.height, arch.input.width), device=dev)

    def fastest(step: Callable[[], object], batch: int) -> float:
        times = []
        for _ in range(steps + 1):
            start = clock()
            step()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(clock() - start)
        return min(times[1:]) / batch

    batch, scored = images(config.batch_size), images(config.eval_batch_size)
    labels = torch.randint(0, arch.classes, (config.batch_size,), device=dev)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(batch), labels).backward()
        optimizer.step()

    def score_pass() -> None:
        with torch.inference_mode():
            model(scored)

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # one thread's work, whatever the cores do meanwhile
        train = fastest(train_step, config.batch_size)
        model.eval()
        score = fastest(score_pass, config.eval_batch_size)
    finally:
        torch.set_num_threads(threads)
    _TIMED[key] = StepSeconds(train=train, score=score)
    return _TIMED[key]


def train_config(fidelity: Fidelity, *, device: str, seed: int) -> TrainConfig:
    """The `TrainConfig` every candidate of the search trains with."""
    from archdsl.run.recipe import TrainConfig

    return TrainConfig(
        **dict(fidelity.train_settings),
        recipe=fidelity.recipe,
        epochs=fidelity.epochs,
        subset=fidelity.subset,
        seed=seed,
        device=device,
        optimize=fidelity.optimize,
    )


def check_fidelity(arch: Arch, data: DataContext, fidelity: Fidelity, *, device: str, seed: int) -> None:
    """The `UserError` every trial would end in (a batch larger than the training set, a device this
    machine lacks, a plug-in block that breaks its declared shape), raised once before the search
    starts (and makes its folder) instead."""
    from archdsl.nn.build import check_registered_blocks
    from archdsl.run.train import check_trainable

    check_trainable(arch, data.train_set, data.test, train_config(fidelity, device=device, seed=seed), data.validation)
    check_registered_blocks(arch)  # a plug-in block that breaks its shape rule fails every trial


def train_candidate(
    arch: Arch,
    data: DataContext,
    fidelity: Fidelity,
    *,
    device: str,
    seed: int,
    run_dir: Path | None,
    on_epoch: Callable[[int, float], None],
    progress: bool,
    curve: bool = True,
) -> Trained:
    """Train at the search's fidelity on the training images, scored on the validation images after each
    epoch: `on_epoch(epoch, validation top-1)` may raise to prune. Without `curve`, scored after the last epoch
    alone (a later paired seed: the pruner reads the first seed's curve; the training is the same)."""
    from archdsl.lang.printer import format_arch
    from archdsl.run.distributed import current, from_leader
    from archdsl.run.divergence import TrainingDiverged
    from archdsl.run.train import train

    config = train_config(fidelity, device=device, seed=seed)
    ranks = current()
    if ranks is not None and ranks.leader:  # what to train, to the group's other ranks (search.fidelity.distributed)
        from_leader(json.dumps({"spec": format_arch(arch), "epochs": fidelity.epochs, "subset": fidelity.subset,
                                "curve": curve}))  # fmt: skip

    def report(metrics: EpochMetrics) -> None:
        if metrics.val_acc is not None:  # (every epoch with a curve; else the last alone)
            on_epoch(int(metrics.epoch), metrics.val_acc)

    try:  # scored on the validation images alone: a trial has no test set
        result = train(
            arch, data.train_set, None, config, val_set=data.validation, run_dir=run_dir, on_epoch=report,
            progress=progress, scored_last_only=not curve,
        )  # fmt: skip
    except TrainingDiverged as err:
        raise Diverged(err.message) from err
    accuracy = float(result.val_acc)
    if not math.isfinite(accuracy):
        raise Diverged("training diverged: the validation accuracy is not a number")
    history = [{k: v for k, v in dataclasses.asdict(m).items() if v is not None} for m in result.history]
    return Trained(model=result.model, accuracy=accuracy, history=history, rank_digests=result.rank_digests)


def test_accuracy(model: nn.Module, data: DataContext, fidelity: Fidelity, *, device: str) -> float:
    """A trained model's top-1 on the whole test split, scored once for its trial to seal (`record.seal_test`)."""
    from archdsl.run.device import select_device
    from archdsl.run.evaluate import evaluate

    assert data.test is not None, "a trained search loads its test split"
    return float(evaluate(model, data.test, device=select_device(device), optimize=fidelity.optimize).top1)


def analysis_settings(fidelity: Fidelity, *, seed: int) -> AnalysisSettings:
    """The analysis settings of a search: the recipe it trains with (so the Hessian's L2 term is
    that recipe's weight decay, as `archdsl analyze` takes it from the checkpoint) and its fidelity."""
    from archdsl.analysis.settings import AnalysisSettings, HessianSettings
    from archdsl.run.recipe import TrainConfig

    recipe = TrainConfig(**dict(fidelity.train_settings), recipe=fidelity.recipe, epochs=fidelity.epochs)
    hessian = HessianSettings(
        batches=fidelity.hessian_batches,
        max_iter=fidelity.hessian_max_iter,
        tol=fidelity.hessian_tol,
        method=fidelity.hessian_method,
    )
    return AnalysisSettings(recipe=recipe, seed=seed, hessian=hessian)


def _analyze(
    model: nn.Module, data: DataContext, measures: tuple[str, ...], fidelity: Fidelity, *, seed: int, device: str
):
    from archdsl.analysis.pipeline import AnalysisData, analyze
    from archdsl.run.device import select_device

    corrupted = _corrupted_sets(data, fidelity) if "robustness" in measures else None
    analysis_data = AnalysisData(
        name=data.name, scored=data.validation, scored_split="validation", train=data.train_split or data.train_set,
        corrupted=corrupted,
    )  # fmt: skip
    settings = analysis_settings(fidelity, seed=seed)
    return analyze(model, analysis_data, measures, settings, device=select_device(device), optimize=fidelity.optimize)


def _corrupted_sets(data: DataContext, fidelity: Fidelity) -> list[CorruptedSet]:
    """Corrupted copies of the validation images (the dataset's corruptions at the fidelity's severities,
    each drawn as the dataset's -C sets draw theirs); made once per worker."""
    from archdsl.data import CorruptedSet, corruption_names
    from archdsl.data.cifar_c import corruption_seed
    from archdsl.data.corruptions import check_can_generate
    from archdsl.data.registry import corrupted_copy

    if data._corrupted is None:
        names = corruption_names(None)
        check_can_generate(names)  # frost without its photographs: refused before any is made
        data._corrupted = [
            CorruptedSet(c, s, corrupted_copy(data.validation, c, s, corruption_seed(0, c, s), f"{data.name}[val]"))
            for c in names
            for s in fidelity.severities
        ]
    return data._corrupted


def robustness(model: nn.Module, data: DataContext, fidelity: Fidelity, *, seed: int, device: str) -> float:
    """Mean top-1 (a fraction) over the corrupted copies of the validation images."""
    report = _analyze(model, data, ("robustness",), fidelity, seed=seed, device=device)
    return float(report.robustness.mean)


def hessian(model: nn.Module, data: DataContext, fidelity: Fidelity, *, seed: int, device: str) -> tuple[float, float]:
    """(NEP, APE) of the Hessian max-eigenvalue spectrum on a few augmented training batches."""
    spectrum = _analyze(model, data, ("hessian",), fidelity, seed=seed, device=device).hessian
    ape = spectrum.ape if spectrum.ape is not None else 0.0
    return float(spectrum.nep), float(ape)


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is a failed allocation: torch's OutOfMemoryError (CUDA), MemoryError, or
    the RuntimeError that torch raises when the host (CPU) or MPS allocator gives up."""
    import torch

    if isinstance(err, (getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), MemoryError)):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


# What torch says when this hardware has no way to run what a design asks of it: cuDNN or
# cuBLAS refuse the configuration, MPS lacks an operator, sizes past a kernel's 32-bit index
# arithmetic, a CUDA launch grid the design's sizes make too large.
_DEVICE_CANNOT = (
    "CUDNN_STATUS_NOT_SUPPORTED",
    "unable to find an engine",  # cuDNN's v8/v9 API: "FIND was unable to find an engine to execute ..."
    "CUBLAS_STATUS_NOT_SUPPORTED",
    "canUse32BitIndexMath",
    "not currently implemented for the MPS device",
    "MPS does not support",
    "invalid configuration argument",
    "too many resources requested for launch",
)
# A kernel missing for a reduced-precision type on this device (`"linalg_eigh_cpu" not
# implemented for 'BFloat16'`), as mixed precision meets it. Integer or bool types are left
# out on purpose: a float op on integers is a bug in archdsl, not a limit of the hardware.
_NO_LOW_PRECISION_KERNEL = re.compile(r"not implemented for '(Half|BFloat16|Float8\w*)'")


def is_unsupported_by_device(err: BaseException) -> bool:
    """Whether `err` says the device cannot run the design (see `_DEVICE_CANNOT`): a failure of
    the design on this hardware, like running out of memory, not a bug in archdsl."""
    if not isinstance(err, RuntimeError):  # torch's NotImplementedError and AcceleratorError are RuntimeErrors
        return False
    text = str(err)
    return any(marker in text for marker in _DEVICE_CANNOT) or _NO_LOW_PRECISION_KERNEL.search(text) is not None


def load_base(name_or_path: str) -> Arch:
    """The base of a build-up search; refused now, before any data loads, if the rule cannot apply."""
    from archdsl.buildup import ensure_alternet_base
    from archdsl.lang.spec import load_spec

    base = load_spec(name_or_path)
    ensure_alternet_base(base)
    return base
