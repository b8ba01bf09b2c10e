"""Checkpoints: one safetensors file that knows how to rebuild its model.

The weights are the model's state dict; the safetensors metadata (strings only) carries
`archdsl.ir` (the design as IR JSON, from which `load_checkpoint` rebuilds the model), its
digest `archdsl.ir_digest` (checked on loading: an edited design is refused) and
`archdsl.meta` (free JSON: dataset, epoch, accuracy, config...). A checkpoint written
during training may also carry the state needed to resume (`TrainState`): the optimizer's
state dict (the schedule is a function of the step: no scheduler state is kept), taken apart
by `archdsl.run.statedict` into tensors (under
the `train_state/` prefix) and JSON, with the epoch and history, in `archdsl.train_state`.
Nothing is ever unpickled, so loading an untrusted file cannot run code. Files are written
to a temporary name and renamed, so a crash (or Ctrl-C) mid-write leaves the previous
checkpoint intact.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from archdsl import json_text
from archdsl.errors import UserError
from archdsl.files import atomic_path
from archdsl.ir import Arch
from archdsl.run import statedict

FORMAT_VERSION = "1"
_KEY_FORMAT = "archdsl.format"
_KEY_IR = "archdsl.ir"
# The design's digest (`Arch.digest`) when it was saved: a stored design edited since (to another
# design whose weights have the same shapes: 2 heads of 64 made 1 of 128) no longer matches it.
_KEY_IR_DIGEST = "archdsl.ir_digest"
_KEY_META = "archdsl.meta"
_KEY_TRAIN_STATE = "archdsl.train_state"
_TRAIN_PREFIX = "train_state/"


_STATE_DICTS = "state_dicts"  # the key of `TrainState.info` that holds the encoded state dicts


@dataclass
class TrainState:
    """What a resumed run needs besides the weights: state dicts (the optimizer's) and free JSON.

    `tensors` are stored in the checkpoint's safetensors, `info` as JSON in its metadata.
    """

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def pack(cls, state_dicts: dict[str, Any], **info: Any) -> TrainState:
        """Any torch state dicts by name (`optimizer=optimizer.state_dict()`, ...) plus JSON `info`."""
        tensors: dict[str, torch.Tensor] = {}
        structures = {}
        for name, state in state_dicts.items():
            structures[name], found = statedict.encode(state, prefix=f"{name}/")
            tensors.update(found)
        return cls(tensors=tensors, info={**info, _STATE_DICTS: structures})

    def has(self, name: str) -> bool:
        """Whether a state dict was stored as `name`."""
        return name in self.info.get(_STATE_DICTS, {})

    def unpack(self, name: str) -> Any:
        """The state dict stored as `name`, ready for `load_state_dict`; KeyError if there is none."""
        structures = self.info.get(_STATE_DICTS)
        if structures is None or name not in structures:
            raise KeyError(name)
        # Own copies: tensors read from the file sit at unaligned offsets of one buffer, and
        # `load_state_dict` keeps them as they are; vectorised reductions (LBFGS's dot products)
        # then round differently, and a resumed run would drift from an uninterrupted one.
        return statedict.decode(structures[name], {key: t.clone() for key, t in self.tensors.items()})


@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt model (eval mode), its design, its metadata, and the training state when asked
    for."""

    model: nn.Module
    arch: Arch
    meta: dict[str, Any]
    train_state: TrainState | None = None


def _plain_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses tensors that share storage and non-contiguous views.
    result: dict[str, torch.Tensor] = {}
    seen: set[tuple[int, int]] = set()
    for key, tensor in state.items():
        tensor = tensor.detach().to("cpu")
        ident = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if ident in seen or not tensor.is_contiguous():
            tensor = tensor.contiguous().clone()
        seen.add((tensor.untyped_storage().data_ptr(), int(tensor.storage_offset())))
        result[key] = tensor
    return result


def save_checkpoint(
    path: str | os.PathLike[str],
    model: nn.Module,
    arch: Arch,
    meta: dict[str, Any] | None = None,
    *,
    train_state: TrainState | None = None,
    within: str | os.PathLike[str] | None = None,
) -> Path:
    """Write `model`'s weights, its IR and `meta` to `path` atomically; returns the path. With
    `within` (a run folder), a symbolic link on the way is refused (`archdsl.files.check_within`)."""
    from safetensors.torch import save_file

    path = Path(path)
    tensors = _plain_tensors(model.state_dict())
    metadata = {
        _KEY_FORMAT: FORMAT_VERSION,
        _KEY_IR: arch.model_dump_json(),
        _KEY_IR_DIGEST: arch.digest(),
        _KEY_META: json.dumps(meta or {}, sort_keys=True),
    }
    if train_state is not None:
        for key, tensor in _plain_tensors(train_state.tensors).items():
            tensors[_TRAIN_PREFIX + key] = tensor
        metadata[_KEY_TRAIN_STATE] = json.dumps(train_state.info, sort_keys=True)
    with atomic_path(path, within=within) as temporary:
        save_file(tensors, str(temporary), metadata=metadata)
    return path


def checkpoint_meta(metadata: dict[str, str], path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint's `meta` (the run's record) from its file's metadata; a UserError if it is no JSON object."""
    return _json_object(metadata.get(_KEY_META, "{}"), "metadata", path)


def is_archdsl_checkpoint(metadata: dict[str, str]) -> bool:
    """Whether a safetensors file's metadata is an archdsl checkpoint's (it carries the design)."""
    return _KEY_IR in metadata


def is_checkpoint_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a readable archdsl checkpoint (a safetensors file carrying a design); quiet:
    False for anything else, which the caller's reader then explains."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            return is_archdsl_checkpoint(handle.metadata() or {})
    except Exception:  # not a file, not safetensors, truncated: not a checkpoint
        return False


def model_weights(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's weights among a checkpoint file's tensors (the training state has its own prefix)."""
    return {k: v for k, v in tensors.items() if not k.startswith(_TRAIN_PREFIX)}


def read_checkpoint_file(path: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The raw tensors and metadata of an archdsl checkpoint; `UserError` for anything else."""
    from safetensors import safe_open

    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.safetensors"))
        hint = (
            f"a run directory: give one of its checkpoints, e.g. {path / inside[0]}"
            if inside
            else "give the path of a .safetensors file written by `archdsl train`"
        )
        raise UserError(f"{path}: is a folder, not a checkpoint file", hint=hint)
    if not path.is_file():
        raise UserError(f"{path}: not a regular file" if path.exists() else f"{path}: no such checkpoint file")
    if path.suffix == ".arch":
        raise UserError(
            f"{path}: a spec, not a checkpoint",
            hint=f"train it first (`archdsl train {path} --dataset NAME`), then give its final.safetensors",
        )
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (a safe_open handle, not a dict)
    except Exception as err:  # safetensors raises several types for truncated/garbled files
        raise UserError(
            f"{path}: not a readable safetensors checkpoint ({err})",
            hint="the file may be truncated or not a checkpoint; archdsl writes *.safetensors files",
        ) from None
    if not is_archdsl_checkpoint(metadata):
        raise UserError(f"{path}: a safetensors file, but not an archdsl checkpoint (no {_KEY_IR} metadata)")
    return tensors, metadata


def train_state_info(metadata: dict[str, str], path: str | os.PathLike[str] = "checkpoint") -> dict[str, Any]:
    """The JSON part of the training state in a checkpoint's metadata (epoch, history, config,
    encoded state dicts); empty when the checkpoint holds none. `UserError` (naming `path`)
    when it is no JSON object."""
    return _json_object(metadata.get(_KEY_TRAIN_STATE, "{}"), "training state", path)


def checked_design(ir_json: str, where: str) -> Arch:
    """The design stored in a file (IR JSON), held to exactly the rules of a spec: the
    language's limits and checks (`archdsl.lang.checks.ensure_valid`) and the memory limit
    (`archdsl.nn.summary.ensure_fits`), before anything is built. `UserError` otherwise,
    naming `where` (the file). For every reader of stored designs (checkpoints, imports)."""
    from pydantic import ValidationError

    from archdsl.lang.checks import ensure_valid
    from archdsl.nn.summary import DesignTooLarge, ensure_fits

    try:
        arch = Arch.model_validate_json(ir_json)
    except ValidationError as err:
        first = err.errors()[0]
        place = ".".join(map(str, first["loc"])) or "the design"
        raise UserError(f"{where}: the checkpoint's design does not parse: {place}: {first['msg']}") from None
    try:
        ensure_valid(arch)
        ensure_fits(arch)
    except DesignTooLarge as err:
        raise UserError(f"{where}: the checkpoint's design is refused: {err.message}", hint=err.hint) from None
    except UserError as err:  # SpecError: every problem, without source spans
        raise UserError(f"{where}: the checkpoint's design is invalid:\n{err}") from None
    return arch


def check_digest(arch: Arch, metadata: dict[str, str], where: str) -> None:
    """The stored design is the one saved with the weights: `UserError` when it no longer
    matches the digest recorded beside it. (Checkpoints written before the digest was
    recorded have none, and load as before.)"""
    recorded = metadata.get(_KEY_IR_DIGEST)
    if recorded is not None and recorded != arch.digest():
        raise UserError(
            f"{where}: the checkpoint's design was changed after it was saved (its digest is "
            f"{arch.short_id}, the one recorded with the weights {recorded[:12]!r}); the weights "
            "belong to another design",
            hint="use the checkpoint as `archdsl train` wrote it; to try another design, train it",
        )


def check_weights(arch: Arch, weights: dict[str, torch.Tensor], where: str) -> None:
    """Weights that fit `arch` by name and shape (compared before building it) and hold only
    finite numbers; `UserError` naming the first missing, unexpected and mis-shaped keys."""
    from archdsl.nn.weights import compare_weights, describe_nonfinite, expected_shapes, nonfinite_keys

    mismatch = compare_weights(expected_shapes(arch), weights)
    if mismatch:
        raise UserError(f"{where}: the weights do not fit the design stored with them", hint=mismatch.describe())
    bad = nonfinite_keys(weights)
    if bad:
        raise UserError(
            f"{where}: {describe_nonfinite(bad)}",
            hint="a run that diverged? archdsl never saves such weights; use an earlier checkpoint",
        )


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    device: str | torch.device = "cpu",
    with_train_state: bool = False,
    image_size: int | None = None,
) -> Checkpoint:
    """Rebuild the model from the IR stored in the checkpoint and load its weights (in eval mode);
    with `image_size` (`--image-size`), the design taking image_size x image_size inputs.

    Nothing in the file is trusted: the design is checked like a spec and its memory
    estimated, the metadata must be JSON objects, and the weights are compared with the
    design (names, shapes, finite values) before the model is built.
    """
    from archdsl.lang.spec import with_input_size
    from archdsl.nn.build import build

    tensors, metadata = read_checkpoint_file(path)
    arch = checked_design(metadata[_KEY_IR], str(path))
    check_digest(arch, metadata, str(path))
    arch = with_input_size(arch, image_size)
    meta = checkpoint_meta(metadata, path)
    weights = model_weights(tensors)
    check_weights(arch, weights, str(path))
    model = build(arch)
    # The weights' own precision (a float64 run's stay float64); load_state_dict would round them.
    stored = next((w.dtype for w in weights.values() if w.is_floating_point()), torch.float32)
    model.to(stored)
    model.load_state_dict(weights, strict=True)
    model.to(device).eval()
    train_state = _train_state(tensors, metadata, path) if with_train_state else None
    return Checkpoint(model=model, arch=arch, meta=meta, train_state=train_state)


def read_train_state(path: str | os.PathLike[str]) -> TrainState | None:
    """The training state of an archdsl checkpoint (None when it holds none), without building its model."""
    return _train_state(*read_checkpoint_file(path), path)


def _train_state(
    tensors: dict[str, torch.Tensor], metadata: dict[str, str], path: str | os.PathLike[str]
) -> TrainState | None:
    if _KEY_TRAIN_STATE not in metadata:
        return None
    return TrainState(
        tensors={k[len(_TRAIN_PREFIX) :]: v for k, v in tensors.items() if k.startswith(_TRAIN_PREFIX)},
        info=train_state_info(metadata, path),
    )


def _json_object(text: str, what: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        value = json_text.parse(text)
    except json_text.TooDeepJSON as err:
        raise UserError(f"{path}: the checkpoint's {what} is {err}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: the checkpoint's {what} is not JSON ({err})") from None
    if not isinstance(value, dict):
        kind = {"list": "list", "str": "string"}.get(type(value).__name__, type(value).__name__)
        raise UserError(f"{path}: the checkpoint's {what} is a JSON {kind}, not an object")
    return value
