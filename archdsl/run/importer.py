"""Weights from other projects' files -> an archdsl model: the library side of `archdsl import`.

`read_source(path)` reads a PyTorch file (`torch.save`, e.g. a `.pth.tar`) with
`torch.load(weights_only=True)`, so loading it cannot run code (a file that needs arbitrary
Python objects is refused), or a plain safetensors file; it finds the state dict inside
(`{"state_dict": ...}` as the reference implementation and timm's training script save it)
and drops DataParallel's `module.` prefix. `import_weights(source, arch)` converts it with a
format of `archdsl.nn.convert` and loads it strictly into `build(arch)`; `import_checkpoint`
does both and writes the archdsl checkpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import re
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from archdsl.errors import UserError, visible
from archdsl.ir import Arch

# Where training scripts keep the weights inside a saved dict, most specific first.
STATE_DICT_KEYS = ("state_dict", "model", "model_state_dict")
_DATA_PARALLEL_PREFIX = "module."
_ZIP_MAGIC = b"PK\x03\x04"


@dataclass
class Source:
    """The weights of a source file and what else it said about itself."""

    path: Path
    state: dict[str, torch.Tensor]
    container: str  # where the weights were: "state_dict", "model", "top level", "safetensors"
    sha256: str
    info: dict[str, Any] = field(default_factory=dict)  # plain-text entries of the saved dict (e.g. "name")


@dataclass
class Imported:
    """What `import_weights` made: the model with the source's weights, and the layout they were in."""

    model: nn.Module
    source_format: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_zip_records(path: Path) -> None:
    """Refuse a zip-format PyTorch file whose records would inflate: decided from the zip's own
    directory before torch reads (and inflates) anything. torch.save stores every record
    uncompressed, so a compressed record, or one that claims more bytes than it occupies, is no
    file torch wrote, and could be a few megabytes standing for gigabytes."""
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable PyTorch file ({err})") from None
    size = path.stat().st_size
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED or record.file_size != record.compress_size:
            raise UserError(
                f"{path}: refused: its record {visible(record.filename)!r} is compressed "
                f"({record.compress_size:,} bytes that inflate to {record.file_size:,}), "
                "which torch.save never does",
                hint="save the weights again with torch.save in a Python session you trust",
            )
    if sum(record.file_size for record in records) > size:
        raise UserError(f"{path}: refused: its records claim more bytes than the file holds (a damaged zip)")


def _torch_load(path: Path) -> Any:
    # argparse.Namespace is how timm's training script saves its arguments; allowing it lets
    # such files load without allowing anything the Namespace may hold.
    try:
        with warnings.catch_warnings():
            # Said of every legacy file of protocol 4 or 5: if it cannot be read, the error below says why.
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            if hasattr(torch.serialization, "safe_globals"):
                with torch.serialization.safe_globals([argparse.Namespace]):
                    return torch.load(path, map_location="cpu", weights_only=True)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Weights only load failed" not in text:
            raise UserError(f"{path}: not a readable PyTorch file ({text.splitlines()[0]})") from None
        if "Unsupported operand" in text:  # an opcode, not an object: protocol 4's FRAME (149) and later ones
            with path.open("rb") as handle:
                protocol = handle.read(2)[1:]  # PROTO, then the protocol's number
            raise UserError(
                f"{path}: torch.save's legacy format with pickle protocol {protocol[0] if protocol else '?'}, "
                "which torch's safe loader cannot read",
                hint="re-save it in torch's own format, in a Python session you trust: "
                "torch.save(torch.load(path, weights_only=False), new_path)",
            ) from None
        culprit = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        raise UserError(
            f"{path}: refused: loading it would unpickle arbitrary Python objects, which can run code"
            + (f" (it needs {culprit.group(1)})" if culprit else ""),
            hint="archdsl only reads tensors and plain containers; save the weights alone, e.g. "
            "torch.save({'state_dict': model.state_dict()}, path), in a Python session you trust",
        ) from None
    except Exception as err:  # torch raises several types for truncated or foreign files
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"{path}: not a readable PyTorch file ({first})") from None


def _read_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (not a dict)
    except Exception as err:
        raise UserError(f"{path}: not a readable safetensors file ({err})") from None
    return tensors, metadata


def _looks_like_safetensors(head: bytes) -> bool:
    # 8-byte little-endian header length, then the JSON header.
    return len(head) > 8 and head[8:9] == b"{"


def _looks_like_legacy_torch_save(head: bytes) -> bool:
    # torch.save's format before 1.6: a pickle (PROTO opcode, then a FRAME from protocol 4 on)
    # whose first object is torch's magic number, an 80-bit LONG1.
    magic = b"\x8a\x0a" + torch.serialization.MAGIC_NUMBER.to_bytes(10, "little")
    return head.startswith(b"\x80") and magic in head


def _is_state_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, torch.Tensor) for v in value.values())


def find_state_dict(obj: Any, path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """The weights inside a loaded object (a state dict, or a dict holding one under a known key)."""
    if _is_state_dict(obj):
        return dict(obj), "top level"
    if isinstance(obj, Mapping):
        for key in STATE_DICT_KEYS:
            if _is_state_dict(obj.get(key)):
                return dict(obj[key]), key
        keys = ", ".join(repr(k) for k in list(obj)[:8]) or "none"
        raise UserError(
            f"{path}: found no state dict (a dict of tensors) in the file; its top-level keys: {keys}",
            hint=f"archdsl looks for the weights at the top level or under {', '.join(STATE_DICT_KEYS)}",
        )
    raise UserError(f"{path}: holds a {type(obj).__name__}, not a state dict")


def strip_data_parallel(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop the `module.` prefix that torch's DataParallel/DDP put on every key."""
    if state and all(key.startswith(_DATA_PARALLEL_PREFIX) for key in state):
        return {key[len(_DATA_PARALLEL_PREFIX) :]: value for key, value in state.items()}
    return state


def read_source(path: str | os.PathLike[str]) -> Source:
    """Read the weights of a PyTorch or safetensors file; `UserError` for anything else."""
    from archdsl.run.checkpoint import is_archdsl_checkpoint

    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a checkpoint file")
    if not path.is_file():
        raise UserError(f"{path}: not a regular file" if path.exists() else f"{path}: no such file")
    with path.open("rb") as handle:
        head = handle.read(32)
    info: dict[str, Any] = {}
    if not head.startswith(_ZIP_MAGIC) and _looks_like_safetensors(head):
        state, metadata = _read_safetensors(path)
        if is_archdsl_checkpoint(metadata):
            raise UserError(
                f"{path}: already an archdsl checkpoint: there is nothing to import",
                hint="use it as it is: archdsl eval/analyze take it, and archdsl.load_checkpoint(path) loads it",
            )
        container = "safetensors"
    else:
        if not (head.startswith(_ZIP_MAGIC) or _looks_like_legacy_torch_save(head)):
            # Before torch.load: any other file would fail as a pickle, and be called a dangerous one.
            raise UserError(
                f"{path}: not a PyTorch or safetensors file (neither a zip archive nor a torch.save pickle)",
                hint="give a file torch.save wrote (.pth, .pth.tar, .pt) or a .safetensors file",
            )
        if head.startswith(_ZIP_MAGIC):
            _check_zip_records(path)
        obj = _torch_load(path)
        state, container = find_state_dict(obj, path)
        if isinstance(obj, Mapping) and container != "top level":
            info = {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool))}
    return Source(path=path, state=strip_data_parallel(state), container=container, sha256=_sha256(path), info=info)


def import_weights(source: Source, arch: Arch, *, source_format: str | None = None) -> Imported:
    """Convert `source`'s weights to `arch`'s layout and load them strictly into a new model (eval mode).

    The keys are compared before the model is built, so a mismatch costs no allocation and
    the error names the first missing, unexpected and mis-shaped keys; weights holding NaN or
    infinite values are refused (`archdsl.load_checkpoint` would refuse them).
    """
    from archdsl.nn.build import build
    from archdsl.nn.convert import convert_state_dict
    from archdsl.nn.weights import require_fitting_weights

    fmt, state = convert_state_dict(arch, source.state, source_format)
    require_fitting_weights(  # archdsl.load_checkpoint would refuse NaN/inf in the checkpoint written
        arch,
        state,
        where=str(source.path),
        what=f"the {fmt.name} weights",
        fit_hint="is --spec the design the file was trained as? (blocks, widths, heads, windows, classes)",
        finite_hint="the run that saved it diverged, or the file is damaged: import an earlier checkpoint",
    )
    model = build(arch, seed=0)
    model.load_state_dict(state, strict=True)
    return Imported(model=model.eval(), source_format=fmt.name)


@dataclass(frozen=True)
class ImportedCheckpoint:
    """What `import_checkpoint` wrote: the archdsl checkpoint and what it was made from."""

    path: Path  # the archdsl checkpoint (.safetensors)
    model: nn.Module  # the model with the imported weights (eval mode)
    arch: Arch
    source_name: str  # the source file's name
    source_format: str  # the layout its weights were in (archdsl.nn.convert)
    tensors: int  # how many tensors the source held

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def import_checkpoint(
    source: str | os.PathLike[str],
    arch: Arch,
    out: str | os.PathLike[str],
    *,
    source_format: str | None = None,
    dataset: str | None = None,
) -> ImportedCheckpoint:
    """Another project's checkpoint `source` -> the archdsl checkpoint `out` for `arch` (`archdsl import`).

    The design's size and `source_format` (default: recognised from the weights' names) are
    checked before the file is read; the weights are loaded strictly (`import_weights`) and
    written with `arch`'s IR and where they came from (file name, SHA-256, layout, and the
    `dataset` they were trained on, which eval and analyze then default to). `out` is replaced
    if it exists: the caller decides whether it may be.
    """
    from archdsl.nn.convert import get_format
    from archdsl.nn.summary import ensure_fits
    from archdsl.run.checkpoint import save_checkpoint

    ensure_fits(arch)  # a design over the memory limit is refused before the source is read
    if source_format is not None:
        get_format(source_format)  # an unknown name fails before the file is read
    read = read_source(source)
    imported = import_weights(read, arch, source_format=source_format)
    meta = {
        "source": "archdsl import",
        "imported_from": read.path.name,
        "source_sha256": read.sha256,
        "source_format": imported.source_format,
        **({"source_name": read.info["name"]} if isinstance(read.info.get("name"), str) else {}),
        **({"dataset": dataset} if dataset else {}),
    }
    return ImportedCheckpoint(
        path=save_checkpoint(out, imported.model, arch, meta),
        model=imported.model,
        arch=arch,
        source_name=read.path.name,
        source_format=imported.source_format,
        tensors=len(read.state),
    )
