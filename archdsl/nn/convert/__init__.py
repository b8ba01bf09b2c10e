"""Other projects' state dicts -> archdsl state dicts: a registry of source formats.

A `SourceFormat` names a layout of weights (the reference implementation's, timm's, archdsl's
own), recognises it from a state dict's keys, and converts such a state dict, given the IR
of the archdsl model it should fill, into that model's state dict. The conversions are pure
functions on tensors: reading files, loading the result into a model and reporting
mismatches are the caller's job (`archdsl import`, `archdsl.commands.import_`).

Formats live one module per source in this package; every public module defines `FORMATS`,
a tuple of `SourceFormat`s, and is found by `formats()` without being listed anywhere, so a
new source is one new file.
"""

from __future__ import annotations

__all__ = ["SourceFormat", "convert_state_dict", "detect_format", "formats", "get_format"]

import importlib
import pkgutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache

import torch

from archdsl.errors import UserError
from archdsl.ir import Arch

StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class SourceFormat:
    """One source layout of weights.

    `recognises(keys)` says whether a state dict with these keys is in this layout (it must
    not claim another format's state dicts: detection insists on exactly one match).
    `convert(arch, state)` returns the state dict of `build(arch)` holding the same function;
    it may return extra or missing keys (the caller names them), but raises `UserError` for
    a state dict that cannot be a model of `arch` in this layout.
    """

    name: str
    description: str
    recognises: Callable[[Collection[str]], bool]
    convert: Callable[[Arch, Mapping[str, torch.Tensor]], StateDict]


@cache
def formats() -> dict[str, SourceFormat]:
    """Every registered format by name (imports each module of this package once)."""
    found: dict[str, SourceFormat] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for fmt in getattr(module, "FORMATS", ()):
            if fmt.name in found:
                raise RuntimeError(f"two source formats named {fmt.name!r}")  # a bug in archdsl, not the user's
            found[fmt.name] = fmt
    return found


def get_format(name: str) -> SourceFormat:
    known = formats()
    if name not in known:
        raise UserError(f"unknown checkpoint format {name!r}", hint=f"known formats: {', '.join(sorted(known))}")
    return known[name]


def detect_format(state: Mapping[str, torch.Tensor]) -> SourceFormat:
    """The one format whose keys `state` has; `UserError` when none or several claim it."""
    keys = frozenset(state)
    matches = [fmt for fmt in formats().values() if fmt.recognises(keys)]
    if len(matches) == 1:
        return matches[0]
    names = ", ".join(sorted(formats()))
    if not matches:
        sample = ", ".join(sorted(keys)[:5]) or "no keys at all"
        raise UserError(
            f"the weights are in no known layout (first keys: {sample})",
            hint=f"known formats: {names}; give one with --format if you know it",
        )
    raise UserError(
        f"the weights fit several layouts: {', '.join(fmt.name for fmt in matches)}",
        hint="say which with --format NAME",
    )


def convert_state_dict(
    arch: Arch, state: Mapping[str, torch.Tensor], source: str | None = None
) -> tuple[SourceFormat, StateDict]:
    """Convert `state` (in format `source`, detected when None) into `build(arch)`'s layout."""
    fmt = get_format(source) if source is not None else detect_format(state)
    return fmt, fmt.convert(arch, state)
