"""Which accelerator to run on, and the precision settings that go with it.

`"auto"` picks CUDA, then Apple's MPS, then the CPU. Asking for a device this machine does
not have is a user mistake (a `UserError` with a hint), not a torch traceback later on.
"""

from __future__ import annotations

import contextlib

import torch

from archdsl.common_settings import check_device
from archdsl.errors import UserError


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend and backend.is_available())


def select_device(name: str = "auto") -> torch.device:
    """The torch device for `name` ("auto", "cpu", "cuda", "cuda:1", "mps")."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        check_device(name)  # the names the --device flag takes (archdsl.common_settings)
    except ValueError as err:
        raise UserError(str(err)) from None
    kind, _, index = name.partition(":")
    if kind == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' was asked for but torch sees no CUDA GPU", hint="use --device auto or cpu")
    if kind == "cuda" and index and int(index) >= torch.cuda.device_count():
        raise UserError(f"no CUDA device {name!r}", hint=f"this machine has {torch.cuda.device_count()} GPU(s)")
    if kind == "mps" and not _mps_available():
        raise UserError("device 'mps' was asked for but MPS is not available here", hint="use --device auto or cpu")
    return torch.device(name)


def autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on accelerators (no loss scaler needed, unlike fp16); a no-op elsewhere."""
    if not enabled or device.type == "cpu":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device a model's parameters live on (CPU for a parameterless module)."""
    for parameter in model.parameters():
        return parameter.device
    return torch.device("cpu")


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The floating dtype of a model's parameters (float32 for a parameterless module)."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.float32
