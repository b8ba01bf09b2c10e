"""Dataset names as users write them, and where data lives on disk.

A dataset is named by a base name with optional parameters after a colon, e.g.
`synthetic:classes=5,train=2000` or `cifar100-c:corruption=fog,severity=3`. The same
string works in Python (`load_split`) and on the command line (`--dataset`), so one
spelling reaches every option.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from archdsl.errors import UserError, did_you_mean

DATA_ROOT_ENV = "ARCHDSL_DATA"
DEFAULT_DATA_ROOT = Path("data")


@dataclass(frozen=True)
class DatasetName:
    base: str
    params: dict[str, str] = field(default_factory=dict)

    def int_param(self, key: str, default: int) -> int:
        if key not in self.params:
            return default
        try:
            return int(self.params[key])
        except ValueError:
            raise UserError(f"dataset parameter {key}={self.params[key]!r} must be an integer") from None


def parse_dataset_name(text: str, known: tuple[str, ...], allowed_params: dict[str, tuple[str, ...]]) -> DatasetName:
    """Split `base:key=value,...`; raise UserError for an unknown base name or parameter."""
    base, _, tail = text.strip().partition(":")
    base = base.strip().lower()
    if base not in known:
        raise UserError(
            f"unknown dataset {base!r}",
            hint=did_you_mean(base, known) or f"known datasets: {', '.join(known)}",
        )
    params: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in tail.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not value.strip():
            raise UserError(f"dataset parameter {item!r} in {text!r} must be written key=value")
        allowed = allowed_params.get(base, ())
        if key not in allowed:
            options = f"it takes {', '.join(allowed)}" if allowed else f"{base} takes no parameters"
            raise UserError(f"unknown parameter {key!r} for dataset {base}", hint=did_you_mean(key, allowed) or options)
        if key in params:  # silently taking the last one would train on a set the user did not mean
            raise UserError(f"dataset parameter {key!r} is given twice in {text!r}")
        params[key] = value.strip()
    return DatasetName(base, params)


def resolve_data_root(root: str | os.PathLike | None = None) -> Path:
    """`root` if given (the CLI's --data-root), else $ARCHDSL_DATA, else ./data."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(DATA_ROOT_ENV)
    return Path(env).expanduser() if env else DEFAULT_DATA_ROOT
