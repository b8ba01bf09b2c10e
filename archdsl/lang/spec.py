"""Specs in, IRs out: the front end's public entry points.

    parse_spec(text, path)  text -> valid `Arch` (or `SpecError` with every mistake)
    load_spec(name_or_path) a file, or a built-in spec by bare name (`alter50`)
    resolve_spec(...)       where that spec lives

A spec is data: it is parsed and lowered, never executed, and nothing in it can make
archdsl import or run code.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from archdsl.errors import UsageError, UserError, did_you_mean
from archdsl.ir import Arch, InputShape
from archdsl.lang.checks import ensure_valid
from archdsl.lang.lower import lower
from archdsl.lang.parser import check_size, parse

SPEC_SUFFIX = ".arch"


def parse_spec(text: str, path: str = "<string>") -> Arch:
    """Parse and lower spec text; `path` only names the source in error messages."""
    return lower(parse(text, path), source=text, path=path)


def _builtin_dir() -> Path:
    # `specs/` at the top of the repository is installed as the package `archdsl.specs`.
    return Path(str(importlib.resources.files("archdsl.specs")))


def builtin_names() -> list[str]:
    """The names of the specs that ship with archdsl (`alter50`, `tiny`, ...)."""
    return sorted(p.stem for p in _builtin_dir().glob(f"*{SPEC_SUFFIX}"))


def is_builtin_name(name_or_path: str | os.PathLike[str]) -> bool:
    """A bare name (no `/`, no `.arch`) refers to a built-in spec, not to a file."""
    if not isinstance(name_or_path, str):
        return False
    return "/" not in name_or_path and "\\" not in name_or_path and not name_or_path.endswith(SPEC_SUFFIX)


def resolve_spec(name_or_path: str | os.PathLike[str]) -> Path:
    """The file of a spec: a path as given, or `archdsl/specs/<name>.arch` for a bare name."""
    names = builtin_names()
    listing = f"built-in specs: {', '.join(names)}" if names else "no built-in specs are installed"
    # A bare name is a built-in spec, unless there is none by that name but a file or folder
    # here is: then the user meant that path (`archdsl check myspec`, `train run.safetensors`).
    if is_builtin_name(name_or_path) and not (str(name_or_path) not in names and Path(name_or_path).exists()):
        name = str(name_or_path)
        path = _builtin_dir() / f"{name}{SPEC_SUFFIX}"
        if not path.is_file():
            suggestion = did_you_mean(name, names)
            hint = f"{suggestion} {listing}" if suggestion else f"{listing}; or give a path to a .arch file"
            raise UserError(f"no built-in spec named `{name}`", hint=hint)
        return path
    path = Path(name_or_path)
    if not path.is_file():
        what = (
            "is a directory, not a spec file"
            if path.is_dir()
            else "is not a regular file"
            if path.exists()
            else "does not exist"
        )
        raise UserError(f"spec file {str(path)!r} {what}", hint=listing)
    return path


def load_spec(name_or_path: str | os.PathLike[str]) -> Arch:
    """Read, parse and lower a spec file or a built-in spec."""
    path = resolve_spec(name_or_path)
    try:
        check_size(path.stat().st_size, str(path))  # before reading: a 10 MB file is not read at all
        text = path.read_text(encoding="utf-8-sig")  # -sig: a byte-order mark some editors write is not text
    except UnicodeDecodeError as err:
        hint = None
        if path.suffix == ".safetensors":
            hint = "that is a checkpoint: give it to `archdsl eval` or `archdsl analyze`; a spec is a .arch text file"
        raise UserError(f"spec file {str(path)!r} is not UTF-8 text ({err.reason})", hint=hint) from None
    except OSError as err:
        raise UserError(f"cannot read spec file {str(path)!r}: {err.strerror}") from None
    return parse_spec(text, str(path))


def with_classes(arch: Arch, classes: int | None) -> Arch:
    """`arch` with `classes` outputs, checked as a spec is (`classes` None: `arch` as it is): the
    `--classes` of `compile`, `import` and `train`."""
    if classes is None:
        return arch
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 1:
        # model_copy skips the IR's own validation (classes: PositiveInt)
        raise UserError(f"classes must be a positive integer, not {classes!r}")
    return ensure_valid(arch.model_copy(update={"classes": classes}))


def with_input_size(arch: Arch, size: int | None) -> Arch:
    """`arch` taking size x size images (`size` None: `arch` as it is), checked as a spec is: the
    `--image-size` of the commands that read a dataset. A size the design cannot take (a window
    that no longer tiles its map, a stride that shrinks a map below 1x1) is one UsageError."""
    if size is None:
        return arch
    shape = InputShape(channels=arch.input.channels, height=size, width=size)
    try:
        return ensure_valid(arch.model_copy(update={"input": shape}))
    except UserError as err:
        raise UsageError(
            f"--image-size {size}: design {arch.name!r} cannot take {size}x{size} images ({err.message})",
            hint=f"its own input is {arch.input.height}x{arch.input.width}; choose a size its stages and windows fit",
        ) from None
