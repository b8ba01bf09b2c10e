"""Study names: the rule every command checks, and the default name `archdsl search` gives.

A study name is also a folder name (`OUT/STUDY/`), so it is kept to a safe alphabet.
Light on purpose (no Optuna), so that command-line checks stay fast.
"""

from __future__ import annotations

import re
from pathlib import Path

from archdsl.errors import UsageError

STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_study_name(base: str, dataset: str, strategy: str) -> str:
    """`BASE-DATASET-STRATEGY`, e.g. `alter-small-base-synthetic-buildup` (a spec path gives its stem)."""
    return f"{Path(base).stem}-{_UNSAFE.sub('_', dataset)}-{strategy}"


def check_study_name(name: str, *, hint: str | None = None) -> str:
    """`name` if it is a valid study name; a `UsageError` otherwise (with `hint` added)."""
    if not STUDY_NAME.match(name):
        rule = "letters, digits, '.', '_' and '-' only"
        raise UsageError(f"bad study name {name!r}", hint=f"{rule}; {hint}" if hint else rule)
    return name
