"""`archdsl.train(spec, dataset, ...)`: train a design into a run directory, resumably; `archdsl train`
prints what this plans and returns.

Two steps, so that a caller can say what will happen before it happens: `plan_training` checks
everything a run needs (the settings, the resume policy, the data, the output folder) and loads
the data; `run_training` trains. `train` does both. Every refusal is a `UserError` (a bad
setting a `UsageError`), raised before the first epoch.

Resuming: settings left out mean "as the run was started"; a setting that changes the result
is refused (`archdsl.run._run_dir.resumed_config`), except a larger `epochs`, which extends the run.

Under torchrun (docs/training.md: Data-parallel training), `plan_training` joins the process group
(`archdsl.run.distributed`) and every rank trains its share of each global batch; only rank 0
writes the run directory. The group stays open for the caller (`archdsl train` closes it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, PositiveInt

from archdsl.common_settings import DataSettings, DistSettings, ProgressSettings, validated
from archdsl.errors import UsageError, UserError
from archdsl.files import what_is_there
from archdsl.ir import Arch
from archdsl.outputs import RUNS_DIR

if TYPE_CHECKING:
    from archdsl.data import ImageSet
    from archdsl.run.distributed import Ranks
    from archdsl.run.recipe import TrainConfig
    from archdsl.run.train import TrainResult

__all__ = ["TrainPlan", "TrainSettings", "default_run_dir", "plan_training", "run_training", "train"]


class TrainSettings(DataSettings, ProgressSettings, DistSettings):
    """A training run besides its recipe (`TrainConfig`): the data, the run directory, what to keep
    (and, from the shared settings, where the data lives, progress bars, the torchrun timeout)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A field with a flag is `archdsl train`'s flag (archdsl.commands.settings_flags makes it).
    dataset: str = Field(
        description="dataset name (e.g. synthetic, cifar100)",
        json_schema_extra={"flag": "--dataset", "metavar": "NAME", "required": True},
    )
    classes: PositiveInt | None = Field(
        default=None,
        description="override the spec's number of classes (must match the dataset's)",
        json_schema_extra={"flag": "--classes", "metavar": "N", "default_text": "the spec's"},
    )
    out: str | None = Field(
        default=None,
        description="run directory",
        json_schema_extra={"flag": "--out", "metavar": "DIR", "default_text": f"{RUNS_DIR}/train/<spec>-<id>"},
    )
    resume: bool = Field(
        default=False,
        description="continue the run in --out from its last checkpoint (with a larger --epochs: extend it)",
        json_schema_extra={"flag": "--resume"},
    )
    save_every: PositiveInt | None = Field(
        default=None,
        description="also keep the weights after every N-th epoch (epoch-NNNN.safetensors), e.g. for "
        "`archdsl analyze RUN_DIR --metrics hessian` over training",
        json_schema_extra={"flag": "--save-every", "metavar": "N"},
    )
    log: Literal["tensorboard"] | None = Field(
        default=None,
        description="also log each epoch's metrics as TensorBoard scalars in DIR/tensorboard (needs the extra: "
        "pip install 'archdsl[tensorboard]', or pip install -e '.[tensorboard]' in a clone); metrics.csv is "
        "written either way",
        json_schema_extra={"flag": "--log"},
    )


@dataclass(frozen=True)
class TrainPlan:
    """A checked training run, its data loaded: what `run_training` trains."""

    arch: Arch
    settings: TrainSettings
    config: TrainConfig
    run_dir: Path
    train_set: ImageSet
    test_set: ImageSet
    finished: int = 0  # epochs a resumed run has done
    planned: int | None = None  # the epochs a resumed run was planned for
    ranks: Ranks | None = None  # under torchrun: this process's place in the group

    def describe(self) -> list[str]:
        """What is about to happen, one line each (the command prints them)."""
        config, lines = self.config, []
        if self.settings.resume and self.planned is not None and config.epochs > self.planned:
            lines.append(
                f"extending {self.run_dir} from {self.planned} to {config.epochs} epochs after epoch {self.finished}: "
                f"the learning rate follows a {config.epochs}-epoch schedule from here"
            )
        elif self.settings.resume:
            lines.append(f"resuming {self.run_dir} after epoch {self.finished} of {config.epochs}")
        lines.append(
            f"training {self.arch.name} ({self.arch.short_id}) on {self.settings.dataset}: recipe {config.recipe}, "
            f"{config.epochs} epoch(s), batch {config.batch_size}{self._shared()}, lr {config.lr:g} -> {self.run_dir}"
        )
        return lines

    def summary(self, result: TrainResult) -> list[str]:
        """What the run trained, one line each (the command prints them): the last epoch's test figures and,
        with validation images, theirs and the best epoch on them (no epoch is ever picked on the test set)."""
        from archdsl.run._run_dir import FINAL_CHECKPOINT, METRICS_CSV

        history, last = result.history, result.history[-1]
        epochs = f"{len(history)} epoch{'s' if len(history) != 1 else ''}"
        lines = [
            f"{self.arch.name} on {self.settings.dataset}: {epochs} in {sum(m.seconds for m in history):.1f} s",
            f"  final test top-1 {last.test_acc:.2%}  NLL {last.test_loss:.4f}",
        ]
        best = result.best_on_validation()  # --val-split: the held-out training images
        if best is not None:
            lines.append(f"  final val  top-1 {last.val_acc:.2%}  NLL {last.val_loss:.4f}")
            lines.append(
                f"  best  val  top-1 {best.val_acc:.2%} (epoch {best.epoch}; its test top-1 {best.test_acc:.2%})"
            )
        return [
            *lines,
            f"  training speed   {sum(m.img_per_s for m in history) / len(history):.0f} img/s",
            f"  run directory    {self.run_dir} ({FINAL_CHECKPOINT}, {METRICS_CSV})",
        ]

    def _shared(self) -> str:
        """How the global batch is shared under torchrun, for the header line."""
        return "" if self.ranks is None else f" over {self.ranks.world_size} ranks"


def default_run_dir(arch: Arch) -> Path:
    """Where a run of `arch` goes when no directory is given."""
    return Path(RUNS_DIR) / "train" / f"{arch.name}-{arch.short_id}"


def train(
    spec: str | Path | Arch,
    settings: TrainSettings | None = None,
    config: Mapping[str, Any] | TrainConfig | None = None,
    *,
    on_epoch: Callable | None = None,
    **fields: Any,
):
    """Train `spec` (a built-in name, a .arch path or an `Arch`) and return the `TrainResult`.

    `settings` (or keyword arguments naming `TrainSettings` fields: `dataset="synthetic"`) say
    where; `config` is a `TrainConfig` or the `TrainConfig` fields to set (`{"recipe": "fast",
    "epochs": 2}`; the rest are the dataset's (`archdsl.data.training_defaults`: no crop on odd-one-out),
    else the recipe's, or on resume the run's own).

        >>> result = archdsl.train("tiny", dataset="synthetic", config={"recipe": "fast", "epochs": 1})
    """
    from archdsl.run.recipe import TrainConfig

    elsewhere = {
        name: f"`{name}` is a TrainConfig field: put it in config={{...}}" for name in TrainConfig.model_fields
    }
    given = {**(settings.model_dump() if settings else {}), **fields}
    settings = validated(TrainSettings, given, what="training settings", elsewhere=elsewhere)
    return run_training(plan_training(spec, settings, config), on_epoch=on_epoch)


def _given(config: Mapping[str, Any] | TrainConfig | None) -> dict[str, Any]:
    """The TrainConfig fields the caller set."""
    from archdsl.run.recipe import TrainConfig

    if config is None:
        return {}
    if isinstance(config, TrainConfig):
        return config.model_dump(mode="json")
    return dict(config)


def plan_training(
    spec: str | Path | Arch, settings: TrainSettings, config: Mapping[str, Any] | TrainConfig | None = None
) -> TrainPlan:
    """Everything a run needs, checked (nothing is trained): the design, the config (with the
    resume policy applied), the run directory and the data."""
    from archdsl.data.image_size import dataset_for_input
    from archdsl.lang.spec import load_spec, with_classes, with_input_size
    from archdsl.nn.build import check_registered_blocks
    from archdsl.run.distributed import join_if_launched

    given = _given(config)
    _refuse_too_many_workers(given.get("workers"))
    arch = spec if isinstance(spec, Arch) else load_spec(str(spec))
    arch = with_input_size(with_classes(arch, settings.classes), settings.image_size)
    dataset = dataset_for_input(settings.dataset, arch.input, settings.image_size, settings.data_root)
    settings = settings.model_copy(update={"dataset": dataset})
    run_dir = Path(settings.out) if settings.out else default_run_dir(arch)
    saved, finished = _saved_config(run_dir) if settings.resume else ({}, 0)
    train_config = _chosen_config(given, saved, settings, run_dir, finished=finished)
    ranks = join_if_launched(train_config.device, timeout_s=settings.dist_timeout)
    if settings.log == "tensorboard":
        from archdsl.run.tensorboard import require_tensorboard

        require_tensorboard()
    check_registered_blocks(arch)  # a plug-in block that breaks its shape rule: refused before the run folder is made
    train_set, test_set = _load_checked_data(arch, settings, train_config, run_dir)
    return TrainPlan(
        arch=arch, settings=settings, config=train_config, run_dir=run_dir, train_set=train_set, test_set=test_set,
        finished=finished, planned=saved.get("epochs"), ranks=ranks,
    )  # fmt: skip


def _refuse_too_many_workers(workers: int | None) -> None:
    cores = os.cpu_count() or 1
    if workers is not None and workers > 4 * cores:
        # torch would only warn, then fork them all and bring the machine to a halt.
        raise UsageError(
            f"--workers {workers} is more than 4 per CPU core ({cores} here)",
            hint=f"use at most {cores} (0 loads data in the main process)",
        )


def _chosen_config(
    given: dict[str, Any], saved: dict[str, Any], settings: TrainSettings, run_dir: Path, *, finished: int
) -> TrainConfig:
    """The run's config: `given` over the resumed run's `saved` one, or over the dataset's training defaults
    (odd-one-out: no crop) for a new run; settings a resumed run cannot go on with are refused here,
    before anything is printed."""
    from archdsl.data import training_defaults
    from archdsl.run._run_dir import resumed_config
    from archdsl.run.recipe import TrainConfig

    if settings.resume:
        given = _same_start_dropped(given, saved)
    initial = given.get("initial_checkpoint")
    if initial is not None and not Path(initial).is_file():
        raise UsageError(
            f"--initial-checkpoint {initial}: {what_is_there(initial)}",
            hint="give a checkpoint file, such as RUN/final.safetensors",
        )
    if settings.resume:
        chosen = {**saved, **given}
    else:
        _refuse_existing_run(run_dir)
        chosen = {**training_defaults(settings.dataset), **given}
    if chosen.get("resident"):  # the flags that fix it named (TrainConfig refuses it too, in the library's words)
        recipe = validated(TrainConfig, {**chosen, "resident": False}, what="training settings")
        if recipe.randaugment is not None:
            raise UsageError(
                f"--resident cannot be used with the {recipe.recipe} recipe: its RandAugment works on PIL images",
                hint="add --recipe weak or --recipe fast, or --aa none, or leave out --resident",
            )
    train_config = validated(TrainConfig, chosen, what="training settings")
    if settings.resume:
        resumed_config(run_dir, TrainConfig.model_validate(saved), train_config, finished=finished)
    return train_config


def _load_checked_data(arch: Arch, settings: TrainSettings, config, run_dir: Path):
    from archdsl.data import load_split
    from archdsl.outputs import output_dir
    from archdsl.run._run_dir import check_run_files
    from archdsl.run.train import check_trainable

    # The run directory before the data (a bad one should not wait for CIFAR to load); a missing
    # dataset leaves no empty folder.
    with output_dir(run_dir, "--out"):
        train_set = load_split(settings.dataset, "train", root=settings.data_root, download=settings.download)
        test_set = load_split(settings.dataset, "test", root=settings.data_root, download=settings.download)
        _check_classes(arch, settings, train_set.num_classes)
        check_trainable(arch, train_set, test_set, config)
        check_run_files(run_dir)
        if config.initial_checkpoint is not None and not settings.resume:  # weights that do not fit: refused now
            from archdsl.run.initial import initial_weights

            initial_weights(config.initial_checkpoint, arch)
    return train_set, test_set


def run_training(plan: TrainPlan, *, on_epoch: Callable | None = None):
    """Train what `plan_training` checked; the `TrainResult`. With `settings.log == "tensorboard"`,
    each epoch is also logged to TensorBoard (besides `on_epoch`), by rank 0 under torchrun."""
    from archdsl.run._run_dir import LAST_CHECKPOINT
    from archdsl.run.divergence import TrainingDiverged
    from archdsl.run.train import train

    callbacks = [on_epoch] if on_epoch is not None else []
    log = None
    if plan.settings.log == "tensorboard" and (plan.ranks is None or plan.ranks.leader):
        from archdsl.run.tensorboard import TensorBoardLog

        log = TensorBoardLog(plan.run_dir, first_epoch=plan.finished + 1)
        callbacks.append(log)
    last = plan.run_dir / LAST_CHECKPOINT
    try:
        return train(
            plan.arch, plan.train_set, plan.test_set, plan.config, run_dir=plan.run_dir, resume=plan.settings.resume,
            progress=plan.settings.progress, save_every=plan.settings.save_every,
            on_epoch=_each(callbacks) if callbacks else None,
        )  # fmt: skip
    except TrainingDiverged as err:
        kept = _train_state(last).get("epoch") if last.is_file() else None
        if kept:
            err.hint = f"{err.hint}; the last good epoch ({kept}) is kept in {last}"
        raise
    finally:
        if log is not None:
            log.close()


def _each(callbacks: list[Callable]) -> Callable:
    def call(*args: Any, **kwargs: Any) -> None:
        for callback in callbacks:
            callback(*args, **kwargs)

    return call


def _train_state(path: Path) -> dict:
    """The JSON training state of a run's checkpoint (config, epoch, history); {} if none."""
    from archdsl.run.checkpoint import read_checkpoint_file, train_state_info

    _, metadata = read_checkpoint_file(path)
    return train_state_info(metadata, path)


def _saved_config(run_dir: Path) -> tuple[dict, int]:
    """The config a run was started with and the epochs it has finished (its last checkpoint)."""
    from archdsl.run._run_dir import LAST_CHECKPOINT, checked_resume
    from archdsl.run.checkpoint import read_train_state

    path = run_dir / LAST_CHECKPOINT
    if not path.is_file():
        raise UserError(f"nothing to resume: {path} does not exist", hint="start the run without --resume")
    state = read_train_state(path)
    if state is None or "config" not in state.info:
        raise UserError(f"{path} holds no training state (was it written by `archdsl train`?)")
    info, _ = checked_resume(state, path)  # all of it checked before anything is printed
    return info.config.model_dump(mode="json"), info.epoch


def _same_start_dropped(given: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """`given` without its initial_checkpoint when it is the one the resumed run started from (the
    command that started a run resumes it); a different one is refused."""
    initial = given.get("initial_checkpoint")
    if initial is None:
        return given
    recorded = saved.get("initial_checkpoint")
    if recorded is not None and Path(str(initial)) == Path(recorded):
        return {name: value for name, value in given.items() if name != "initial_checkpoint"}
    started = f"started from {recorded}" if recorded is not None else "started from a fresh model"
    raise UsageError(
        f"--initial-checkpoint {initial} cannot be combined with --resume: the run {started}, "
        "and a resumed run goes on from its own last checkpoint",
        hint="leave out --initial-checkpoint to resume, or start a new run in another --out",
    )


def _refuse_existing_run(run_dir: Path) -> None:
    """A new run writes config.json, metrics.csv, ... into its directory: never over another run,
    nor over someone else's files."""
    from archdsl.run._run_dir import is_run_file, refuse_new_run_over  # what a run directory holds

    refuse_new_run_over(run_dir)
    if not run_dir.is_dir():
        return
    foreign = sorted(p.name for p in run_dir.iterdir() if not is_run_file(p.name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(
            f"--out {run_dir} is not empty ({shown}) and holds no run", hint="give --out a new or empty folder"
        )


def _check_classes(arch: Arch, settings: TrainSettings, dataset_classes: int) -> None:
    """The design's class count (the spec's, or `classes`) against the dataset's, naming the flag that fixes it."""
    if arch.classes == dataset_classes:
        return
    given = settings.classes is not None
    source = f"--classes {settings.classes}" if given else f"design {arch.name!r} has {arch.classes} classes"
    error = UsageError if given else UserError  # a bad flag exits 2, a spec that does not fit the data 1
    raise error(
        f"{source}, but {settings.dataset!r} has {dataset_classes} classes",
        hint=f"pass --classes {dataset_classes}, or set `classes {dataset_classes}` in the spec",
    )
