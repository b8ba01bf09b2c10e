"""`archdsl.analyze(checkpoint, ...)`: measure a checkpoint (or the checkpoints a run kept) and,
given a folder, save the report there; `archdsl analyze` prints what this returns.

`analysis.pipeline.analyze` measures a model on data already loaded; this module does the rest
a checkpoint needs: loading it and the data it was trained on, taking its training recipe for the
augmented batches and the weight decay, and a baseline's robustness for the mCE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archdsl.analysis.report import AnalysisReport
from archdsl.analysis.settings import AnalysisSettings
from archdsl.analysis.sources import AnalysisSources
from archdsl.common_settings import validated
from archdsl.errors import UsageError, UserError
from archdsl.progress import Stages

if TYPE_CHECKING:
    from archdsl.run.checkpoint import Checkpoint

__all__ = ["analyze_checkpoint", "default_out", "load_data", "settings_for"]

# A keyword of analyze() that is an AnalysisSettings field belongs in settings={...}.
_SETTINGS_FIELDS = {
    name: f"`{name}` is an AnalysisSettings field: put it in settings={{...}}" for name in AnalysisSettings.model_fields
}


def settings_for(meta: Mapping[str, Any], given: AnalysisSettings | Mapping[str, Any] | None) -> AnalysisSettings:
    """The analysis settings of a checkpoint whose metadata is `meta`: `given` whole when it is an
    `AnalysisSettings`; otherwise its fields (nested: `{"hessian": {"k": 3}}`) with the
    checkpoint's training recipe (the augmentation, and the weight decay unless `given` sets one)."""
    if isinstance(given, AnalysisSettings):
        return given
    return validated(AnalysisSettings, {"recipe": _training_config(meta), **(given or {})}, what="analysis settings")


def _training_config(meta: Mapping[str, Any]):
    """The checkpoint's training config (for the same augmentation and weight decay), or the default recipe's."""
    from pydantic import ValidationError

    from archdsl.run.recipe import TrainConfig

    try:
        return TrainConfig.model_validate(meta.get("config") or {})
    except ValidationError:
        return TrainConfig()


def load_data(dataset: str, sources: AnalysisSources, measures: Sequence[str], arch, stages: Stages | None = None):
    """The splits `measures` read, checked against the design's input shape and classes; `stages` times the
    loading (`data`) and the corrupted copies (`corrupted copies`: in a log, a line as they are made)."""
    from archdsl.analysis.pipeline import AnalysisData, needed_splits
    from archdsl.data import corrupted_name, load_corrupted, load_split
    from archdsl.data.image_size import corrupted_for_input
    from archdsl.run.train import check_compatible

    stages = stages or Stages("analyze", show=False)
    splits = needed_splits(measures)
    loaded: dict = {}
    with stages.stage("data"):
        for field, split in (("scored", "test"), ("train", "train")):  # a checkpoint is scored on the test split
            if field in splits:
                loaded[field] = load_split(dataset, split, root=sources.data_root, download=sources.download)
                check_compatible(arch, loaded[field])
    if "corrupted" in splits:
        # --corrupted folder:CLEAN (copies generated from it) at the design's size, as the dataset is read
        given = sources.corrupted and corrupted_for_input(
            sources.corrupted, arch.input, sources.image_size, sources.data_root
        )
        corrupted = given or corrupted_name(dataset)
        count = _corrupted_count(sources)
        with stages.stage("corrupted copies", f"{count} sets"), _copies_progress(count, stages.show) as made:
            sets = load_corrupted(
                corrupted, root=sources.data_root, corruptions=sources.corruptions, severities=sources.severities,
                clean=dataset, on_each=made,
            )  # fmt: skip
        for item in sets[:1]:
            check_compatible(arch, item.images)
        loaded["corrupted"] = sets
    return AnalysisData(name=dataset, scored_split="test", **loaded)


def _corrupted_count(sources: AnalysisSources) -> int:
    """How many corrupted sets the sources ask for (every corruption and severity by default)."""
    from archdsl.data.corruptions import CORRUPTIONS, SEVERITIES

    return len(sources.corruptions or CORRUPTIONS) * len(sources.severities or SEVERITIES)


@contextmanager
def _copies_progress(count: int, show: bool) -> Iterator[Callable[[Any], None]]:
    """A callback for each corrupted copy made: a bar on a terminal, a line now and then in a log."""
    from archdsl.progress import StepLog, progress_bar

    log = StepLog("corrupted copies", count, show=show)
    with progress_bar(total=count, desc="corrupted copies", unit="set", show=show) as bar:

        def made(item) -> None:
            bar.update(1)
            log.step(f"{item.corruption} {item.severity}")

        yield made


def analyze_checkpoint(
    checkpoint: str | Path,
    settings: AnalysisSettings | Mapping[str, Any] | None = None,
    sources: AnalysisSources | None = None,
    *,
    out: str | Path | None = None,
    force: bool = False,
    **fields: Any,
) -> AnalysisReport:
    """Measure `checkpoint` (a .safetensors file `archdsl train` wrote) and return the report; a run
    directory gets the Hessian spectrum of every checkpoint it kept (`train --save-every`).

    `settings`: an `AnalysisSettings`, or the fields to set (the rest default; the recipe is the
    checkpoint's). `sources` (or keyword arguments naming its fields: `measures=("acc",)`) say
    what to measure on which data. With `out`, the report is saved there (`AnalysisReport.save`);
    an earlier analysis in `out` is refused unless `force`, before anything is measured.

        >>> report = archdsl.analyze("runs/tiny/final.safetensors", measures=("acc", "hessian"))
    """
    given = {**(sources.model_dump() if sources else {}), **fields}
    sources = validated(AnalysisSources, given, what="analysis sources", elsewhere=_SETTINGS_FIELDS)
    path = Path(checkpoint)
    if out is not None:
        from archdsl.outputs import output_dir

        with output_dir(out, "--out"):  # a missing dataset or baseline leaves no empty --out behind
            earlier = AnalysisReport.earlier_files(out, force=force)  # refused before the long work
            report = _measure(path, settings, sources)
        return report.save(out, replacing=earlier)
    return _measure(path, settings, sources)


def _measure(path: Path, settings, sources: AnalysisSources) -> AnalysisReport:
    if path.is_dir():
        return _run_directory(path, settings, sources)
    from archdsl.analysis.pipeline import DEFAULT_MEASURES, analyze
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device
    from archdsl.run.evaluate import checkpoint_named

    device = select_device(sources.device)
    baseline = _baseline(sources.baseline) if sources.baseline else None
    checkpoint = load_checkpoint(path, device=device, image_size=sources.image_size)
    dataset = _dataset_for(checkpoint, sources)
    measures = sources.measures or DEFAULT_MEASURES
    chosen = settings_for(checkpoint.meta, settings)
    stages = Stages("analyze", show=sources.progress)
    data = load_data(dataset, sources, measures, checkpoint.arch, stages)
    with checkpoint_named(path):  # a model whose logits are NaN: refused, and no empty --out is left
        return analyze(
            checkpoint.model, data, measures, chosen, device=device, progress=sources.progress, baseline=baseline,
            checkpoint=str(path), optimize=sources.optimize, stages=stages,
        )  # fmt: skip


def _run_directory(run_dir: Path, settings, sources: AnalysisSources) -> AnalysisReport:
    """The Hessian spectrum of every checkpoint a run kept, against the epoch."""
    from archdsl.analysis.pipeline import hessian_over_training
    from archdsl.run import saved_epochs
    from archdsl.run.checkpoint import load_checkpoint
    from archdsl.run.device import select_device

    measures = sources.measures or ("hessian",)
    if tuple(measures) != ("hessian",):
        raise UsageError(
            f"{run_dir} is a run directory: it is measured with --metrics hessian (the spectrum over training)",
            hint="pass one checkpoint (e.g. final.safetensors) for the other measures",
        )
    epochs = saved_epochs(run_dir)
    if not epochs:
        raise UserError(
            f"{run_dir} holds no checkpoint of a finished epoch (epoch-NNNN.safetensors or final.safetensors)",
            hint="train with --save-every N to keep checkpoints along the way",
        )
    device = select_device(sources.device)
    first = load_checkpoint(epochs[-1][1], device=device, image_size=sources.image_size)
    dataset = _dataset_for(first, sources)
    chosen = settings_for(first.meta, settings)
    data = load_data(dataset, sources, ("hessian",), first.arch)

    def models():
        for epoch, checkpoint_path in epochs:
            yield (
                epoch,
                checkpoint_path.name,
                load_checkpoint(checkpoint_path, device=device, image_size=sources.image_size).model,
            )

    trajectory = hessian_over_training(models(), data, chosen, device=device, progress=sources.progress)
    return AnalysisReport(
        checkpoint=str(run_dir), arch=first.arch.name, arch_digest=first.arch.digest(), dataset=dataset,
        measures=("hessian",), settings=chosen, hessian_trajectory=trajectory,
    )  # fmt: skip


def _dataset_for(checkpoint: Checkpoint, sources: AnalysisSources) -> str:
    """The dataset to measure on (--dataset, else the checkpoint's, else synthetic), read at the
    design's input size (--image-size, or the checkpoint's)."""
    from archdsl.data.image_size import dataset_for_input

    dataset = sources.dataset or checkpoint.meta.get("dataset") or "synthetic"
    return dataset_for_input(dataset, checkpoint.arch.input, sources.image_size, sources.data_root)


def default_out(checkpoint: str | Path) -> Path:
    """Where `archdsl analyze` saves a report by default: beside the checkpoint, or in the run directory."""
    path = Path(checkpoint)
    return path / "hessian-analysis" if path.is_dir() else path.with_name(f"{path.stem}-analysis")


def _baseline(path_text: str):
    """The robustness result stored in an earlier analysis's metrics.json, or a UserError saying why not."""
    baseline = AnalysisReport.load(path_text, option="--baseline")
    if baseline.robustness is None:
        raise UserError(
            f"--baseline {path_text!r} holds no robustness result",
            hint="analyse the baseline with --metrics robustness",
        )
    return baseline.robustness
