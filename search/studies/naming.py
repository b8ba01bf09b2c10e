"""Study names: the rule every command checks (a name is a folder, `OUT/STUDY/`), and the default name.

Light on purpose (no Optuna), so that command-line checks stay fast.
"""

from __future__ import annotations

import re
from pathlib import Path

from archdsl.errors import UsageError

# Matched in full (`fullmatch`): with `$`, a name ending in a newline passed.
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_STUDY_NAME = 100  # a folder name, with room for the files in it
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_FOLDERS = re.compile(r"[^:,]*/")  # the folders of a path in a dataset name, up to its last part


def path_part(text: str, limit: int = 40) -> str:
    """`text` made safe as one part of a file name: the study's alphabet only (no `/`, no
    control characters), no leading dots, at most `limit` characters. For every name that
    comes from a storage or a file (a trial's short id) before it becomes a path."""
    return _UNSAFE.sub("_", text).lstrip(".")[:limit] or "_"


REPLAY_SUFFIX = "-replay"  # a replayed study's default name ends so: it is never the trained study of its command


def default_study_name(base: str, dataset: str, strategy: str, *, replayed: bool = False) -> str:
    """`BASE-DATASET-STRATEGY`, e.g. `alter-small-base-synthetic-buildup` (a spec path gives its stem);
    `BASE-DATASET-STRATEGY-replay` for a study answered from a table (`--fidelity table:...`). A dataset
    read from a path (`folder:/data/pets,size=64`) gives the folder's own name (`folder_pets_size_64`):
    the whole path would pass the length a study name may have."""
    without_folders = _FOLDERS.sub("", dataset)
    return f"{Path(base).stem}-{_UNSAFE.sub('_', without_folders)}-{strategy}{REPLAY_SUFFIX if replayed else ''}"


def check_study_name(name: str, *, hint: str | None = None) -> str:
    """`name` if it is a valid study name; a `UsageError` otherwise (with `hint` added)."""
    if not STUDY_NAME.fullmatch(name) or len(name) > MAX_STUDY_NAME:
        rule = f"letters, digits, '.', '_' and '-' only, at most {MAX_STUDY_NAME} characters"
        raise UsageError(f"bad study name {name!r}", hint=f"{rule}; {hint}" if hint else rule)
    return name
