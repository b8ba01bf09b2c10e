"""Which eigensolver fits the device: Lanczos unless its basis would crowd the memory."""

from __future__ import annotations

import os
from typing import Literal

import torch
import torch.nn as nn

from archdsl.analysis.eigensolvers import SOLVERS, Method

MethodChoice = Literal["auto", "power", "lanczos"]  # auto: see `choose_method`

# Lanczos keeps one parameter-sized vector per step; `auto` lets its basis (max_iter of them)
# take at most this share of the device's memory, and uses power iteration beyond.
LANCZOS_MEMORY_SHARE = 0.25


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of a CUDA device, or of the machine for the CPU; None if unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    return None


def choose_method(model: nn.Module, max_iter: int, method: MethodChoice = "auto") -> Method:
    """The eigensolver for `method`: `auto` is Lanczos (the same top-k in fewer products,
    closer to the exact values) unless its basis would not fit `LANCZOS_MEMORY_SHARE` of the
    device's memory, then power iteration (a few vectors whatever the step count)."""
    if method not in ("auto", *SOLVERS):
        raise ValueError(f"unknown eigensolver {method!r} (auto, power or lanczos)")
    if method != "auto":
        return method
    params = [p for p in model.parameters() if p.requires_grad]
    basis = max_iter * sum(p.numel() for p in params) * (params[0].element_size() if params else 4)
    memory = device_memory_bytes(params[0].device) if params else None
    return "lanczos" if memory is None or basis <= LANCZOS_MEMORY_SHARE * memory else "power"
