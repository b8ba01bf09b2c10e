"""A run directory: what `archdsl train` keeps in it, and the policy for going on from it (`--resume`).

    spec.arch            the design (canonical text)
    config.json          the full TrainConfig, and `world_size`: the number of processes that trained it
                         (torchrun's ranks; 1 for one process), on which BatchNorm's statistics depend
    metrics.jsonl/.csv   one row per finished epoch (`EpochMetrics`)
    last.safetensors     weights + optimizer state after the latest epoch (for --resume)
    final.safetensors    weights only, written when the run completes
    epoch-NNNN.safetensors  the weights after epoch N, with `save_every`
    tensorboard/         event files, with `--log tensorboard` (archdsl.run.tensorboard)

The training loop (archdsl.run.train) calls these; the checks here run before anything is trained.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from archdsl.data.base import ImageSet
from archdsl.errors import UserError
from archdsl.files import atomic_writer, check_within, write_text
from archdsl.ir import Arch
from archdsl.lang.printer import format_arch
from archdsl.run.checkpoint import TrainState, load_checkpoint
from archdsl.run.epoch_metrics import EpochMetrics
from archdsl.run.recipe import TrainConfig

# What a run directory holds.
SPEC_FILE = "spec.arch"
CONFIG_FILE = "config.json"
WORLD_SIZE = "world_size"  # config.json's key beside the settings: the number of processes that trained the run
METRICS_JSONL = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
LAST_CHECKPOINT = "last.safetensors"
FINAL_CHECKPOINT = "final.safetensors"
RUN_FILES = (SPEC_FILE, CONFIG_FILE, METRICS_JSONL, METRICS_CSV, LAST_CHECKPOINT, FINAL_CHECKPOINT)
TENSORBOARD_DIR = "tensorboard"  # event files of `--log tensorboard` (archdsl.run.tensorboard)
# Weights after epoch N, kept with `save_every` (for measures over training, e.g. the Hessian spectrum).
EPOCH_CHECKPOINT = re.compile(r"epoch-(\d+)\.safetensors")


def epoch_checkpoint_name(epoch: int) -> str:
    """The file name of the weights kept after `epoch` (`epoch-0005.safetensors`)."""
    return f"epoch-{epoch:04d}.safetensors"


def is_run_file(name: str) -> bool:
    """Whether a file of this name belongs to a run directory (what `archdsl train` writes there)."""
    return name in RUN_FILES or name == TENSORBOARD_DIR or EPOCH_CHECKPOINT.fullmatch(name) is not None


def finished_work(run_dir: Path) -> list[str]:
    """The files in `run_dir` that record finished epochs (weights, metrics): a new run must never
    write over them, even when the user deleted `last.safetensors` (the big file with the optimizer's
    state). spec.arch and config.json alone (a first epoch that never finished) record none."""
    if not run_dir.is_dir():
        return []
    return sorted(
        path.name
        for path in run_dir.iterdir()
        if path.name in (LAST_CHECKPOINT, FINAL_CHECKPOINT, METRICS_JSONL, METRICS_CSV)
        or EPOCH_CHECKPOINT.fullmatch(path.name)
    )


def refuse_new_run_over(run_dir: Path, *, directory: str = "pass another --out") -> None:
    """A UserError when `run_dir` holds another run's finished work (`finished_work`)."""
    kept = finished_work(run_dir)
    if not kept:
        return
    shown = ", ".join(kept[:3]) + (", ..." if len(kept) > 3 else "")
    resume = "add --resume to continue it, or " if LAST_CHECKPOINT in kept else ""
    raise UserError(f"{run_dir} already holds a run ({shown})", hint=f"{resume}{directory}")


def saved_epochs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(epoch, path) of the checkpoints a run kept along the way, by epoch; the final weights count
    as the last epoch's when no intermediate checkpoint of that epoch exists."""
    run_dir = Path(run_dir)
    found = {}
    for path in run_dir.glob("epoch-*.safetensors"):
        match = EPOCH_CHECKPOINT.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = path
    final = run_dir / FINAL_CHECKPOINT
    if final.is_file():
        from archdsl.run.checkpoint import checkpoint_meta, read_checkpoint_file

        _, metadata = read_checkpoint_file(final)
        epoch = checkpoint_meta(metadata, final).get("epoch")
        if isinstance(epoch, int) and epoch not in found:
            found[epoch] = final
    return sorted(found.items())


def check_run_files(run_dir: Path) -> None:
    """A UserError unless the run's files can be written into `run_dir`: checked before anything is
    trained, so that no epoch is trained that cannot be recorded (a folder where metrics.csv goes
    once stopped a resumed run after its checkpoint, with `last` and `final` at different epochs)."""
    if run_dir.is_dir():  # a link among the run's files would make a write land outside the run
        for entry in run_dir.iterdir():
            if is_run_file(entry.name):
                check_within(entry, run_dir)
    for name in RUN_FILES:
        path = run_dir / name
        if path.exists() and not path.is_file():
            what = "a folder" if path.is_dir() else "not a regular file"
            raise UserError(
                f"cannot write the run's {name}: {path} is {what}",
                hint=f"move it out of {run_dir}: archdsl writes its own {name} there",
            )
    if run_dir.is_dir() and not os.access(run_dir, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into the run directory {run_dir}: permission denied")


def write_metrics(run_dir: Path, history: list[EpochMetrics]) -> None:
    """metrics.jsonl and metrics.csv: one row per finished epoch."""
    names = [f.name for f in fields(EpochMetrics)]
    write_text(run_dir / METRICS_JSONL, "".join(json.dumps(asdict(row)) + "\n" for row in history), within=run_dir)
    with atomic_writer(run_dir / METRICS_CSV, within=run_dir) as out:
        writer = csv.DictWriter(out, fieldnames=names)
        writer.writeheader()
        writer.writerows(asdict(row) for row in history)


def data_record(train_set: ImageSet, test_set: ImageSet | None) -> dict[str, dict[str, str]]:
    """What a run was trained and tested on, for the resume check: names and fingerprints."""
    sets = {"train": train_set, "test": test_set}
    return {split: {"name": s.name, "fingerprint": s.fingerprint()} for split, s in sets.items() if s is not None}


def check_same_data(run_dir: Path, saved: dict, given: dict) -> None:
    """A UserError unless the data given to a resumed run is what it was trained on (`data_record`)."""
    for split, what in (("train", "the training set"), ("test", "the test set")):
        before, now = saved[split], given[split]
        if before == now:
            continue
        why = "other images" if before["name"] == now["name"] else f"was {before['name']!r}"
        raise UserError(
            f"cannot resume {run_dir} with different data: {what} {now['name']!r} ({why})",
            hint="resume with the --dataset (and options) the run was started with (see its config.json)",
        )


class ResumeInfo(BaseModel):
    """The JSON part of a checkpoint's training state, as `--resume` goes on from it: a file can be
    edited, so all of it is checked (types, bounds, agreement) before any of it is used."""

    model_config = ConfigDict(strict=True, extra="ignore")  # the state dicts are checked as they load

    epoch: StrictInt = Field(ge=1)  # epochs finished
    config: TrainConfig
    history: list[EpochMetrics]
    start_loss: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    data: dict[Literal["train", "test"], dict[Literal["name", "fingerprint"], str]]

    @model_validator(mode="after")
    def _agrees(self) -> ResumeInfo:
        if self.epoch > self.config.epochs:
            raise ValueError(f"epoch {self.epoch} is past the {self.config.epochs} epoch(s) the run was planned for")
        if [row.epoch for row in self.history] != list(range(1, self.epoch + 1)):
            raise ValueError(f"the history does not list epochs 1 to {self.epoch}")
        if any(len(self.data.get(split, {})) != 2 for split in ("train", "test")):
            raise ValueError("the data record lacks the training or the test set")
        return self


def resume_info(info: dict, path: Path) -> ResumeInfo:
    """`info` (a checkpoint's training state) checked whole; a `UserError` naming `path` otherwise.
    A state that lacks a part of today's record (an older archdsl's) is refused, not read with
    today's defaults in its place: a setting filled in so would resume another run than it began."""
    missing = _unrecorded(info)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise UserError(
            f"{path}: written by an older archdsl: its training state does not record {shown}",
            hint="start the run again without --resume (its weights still load for eval and analyze)",
        )
    try:
        return ResumeInfo.model_validate_json(json.dumps(info))  # JSON mode: strict, yet lists are tuples
    except ValidationError as err:
        first = err.errors()[0]
        place = ".".join(map(str, first["loc"]))
        raise UserError(
            f"{path}: the training state is damaged: {place + ': ' if place else ''}{first['msg']}",
            hint="resume from an intact copy of the run, or start it again without --resume",
        ) from None


def _unrecorded(info: dict) -> list[str]:
    """The parts of today's training state that `info` lacks: the data and each of TrainConfig's fields."""
    config = info.get("config")
    missing = [] if "data" in info else ["data"]
    if isinstance(config, dict):  # (anything else is refused as damaged)
        missing += [f"config.{name}" for name in TrainConfig.model_fields if name not in config]
    return missing


def resume_state(run_dir: Path, arch: Arch, config: TrainConfig, data: dict):
    """The weights, training state (checked) and state dicts to resume from, and the config to go on
    with: the given one, or, when it asks for more epochs than planned, the extension of the saved one."""
    path = run_dir / LAST_CHECKPOINT
    if not path.is_file():
        raise UserError(f"nothing to resume: {path} does not exist", hint="start the run without --resume")
    checkpoint = load_checkpoint(path, with_train_state=True)
    state = checkpoint.train_state
    if state is None:
        raise UserError(f"{path} holds no training state (was it written by `archdsl train`?)")
    if checkpoint.arch.digest() != arch.digest():
        raise UserError(f"{path} was trained from a different design than the one given")
    info, state_dicts = checked_resume(state, path)
    check_same_data(run_dir, info.data, data)
    config = resumed_config(run_dir, info.config, config, finished=info.epoch)
    return checkpoint.model.state_dict(), info, state_dicts, config


def checked_resume(state: TrainState, path: Path) -> tuple[ResumeInfo, dict[str, Any]]:
    """A checkpoint's training state checked whole: its JSON (`resume_info`) and the optimizer's
    state dict, complete; a `UserError` naming `path` otherwise."""
    return resume_info(state.info, path), _state_dicts(state, path)


def _state_dicts(state: TrainState, path: Path) -> dict[str, Any]:
    try:
        found = {"optimizer": state.unpack("optimizer")}
        entries = list(found["optimizer"]["state"].values())
        if any(set(entry) != set(entries[0]) for entry in entries):  # a tensor taken out of one parameter's state
            raise KeyError("a parameter's state")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise UserError(
            f"{path}: the training state is damaged: the optimizer's state is incomplete ({err})",
            hint="resume from an intact copy of the run, or start it again without --resume",
        ) from None
    return found


def load_resumed(path: Path, target: Any, state: dict[str, Any]) -> None:
    """`target.load_state_dict(state)` (the optimizer's); `UserError` naming `path` when it does not fit."""
    try:
        target.load_state_dict(state)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise UserError(f"{path}: the training state does not fit the run: {err}") from None


def _recorded_config(run_dir: Path) -> TrainConfig | None:
    """The settings the run's config.json records (less the world size beside them), or None where
    it is missing or unreadable."""
    try:
        record = json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
        settings = {key: value for key, value in record.items() if key != WORLD_SIZE}
        return TrainConfig.model_validate(settings)
    except (OSError, ValueError, AttributeError):  # (AttributeError: a record that is not an object)
        return None


def resumed_config(run_dir: Path, saved: TrainConfig, given: TrainConfig, *, finished: int) -> TrainConfig:
    """The config a run saved with `saved` (after `finished` epochs) goes on with when resumed with
    `given`: the same, or extended when `given` asks for more epochs (recorded in `extended_at`).
    A `UserError` for anything else that would change the result, or fewer epochs."""
    # The length may grow; nothing else that changes the result may.
    planned = {"epochs", "extended_at"}
    changed = sorted(
        k for k, v in given.result_fields().items() if k not in planned and saved.result_fields().get(k) != v
    )
    recorded = _recorded_config(run_dir)
    if (
        changed
        and recorded is not None
        and all(recorded.result_fields().get(k) == given.result_fields()[k] for k in changed)
    ):
        # The command agrees with the run's own record: it is the checkpoint that came from elsewhere.
        theirs = ", ".join(f"{k}={saved.result_fields().get(k)}" for k in changed)
        ours = ", ".join(f"{k}={recorded.result_fields().get(k)}" for k in changed)
        raise UserError(
            f"{run_dir / LAST_CHECKPOINT} does not belong to this run: it was trained with {theirs}, "
            f"but {run_dir / CONFIG_FILE} records {ours}",
            hint="put back the run's own last.safetensors, or start a new run in another --out",
        )
    if changed:
        raise UserError(
            f"cannot resume {run_dir} with different settings: {', '.join(changed)}",
            hint="resume with the settings of the original run (see its config.json)",
        )
    if given.epochs < saved.epochs:
        raise UserError(
            f"cannot shorten {run_dir} to {given.epochs} epoch(s): it was planned for {saved.epochs} "
            f"and has finished {finished}",
            hint=f"resume with --epochs {saved.epochs} or more",
        )
    extended_at = saved.extended_at + ((finished,) if given.epochs > saved.epochs else ())
    return given.model_copy(update={"extended_at": extended_at})


def write_design(run_dir: Path, arch: Arch, config: TrainConfig, *, world_size: int) -> None:
    """The run's design and full config, with the number of ranks that train it, written before its
    first epoch (and again by a resumed run: the record is the latest invocation's)."""
    write_text(run_dir / SPEC_FILE, format_arch(arch), within=run_dir)
    record = {**config.model_dump(mode="json"), WORLD_SIZE: world_size}
    write_text(run_dir / CONFIG_FILE, json.dumps(record, indent=2) + "\n", within=run_dir)
