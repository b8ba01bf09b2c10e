"""Semantic checks on an IR: does this design make sense as a network?

The IR's types only guarantee positive integers and known kinds. Whether the pieces fit
together (a window tiles its feature map, an MSA does not start a strided stage, stage
names are unique, ...) is decided here, on the IR alone, so that every producer of IRs
gets the same answer: the front end (which maps each problem's `path` back to a source
span), the build-up transforms and the search (which call `ensure_valid`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from archdsl.ir import Arch, MSABlock, block_shapes
from archdsl.lang.diagnostics import Diagnostic, SpecError

Path = tuple  # a path into the IR, e.g. ("stages", 2, "blocks", 5, "window")

# Stage names become module names (`stages.c3.5`) and search parameter names; arch names
# are printed back as `arch NAME`. Both must read back as one NAME of the grammar.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


@dataclass(frozen=True)
class Problem:
    path: Path
    message: str
    hint: str | None = None


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _size_text(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def _window_hint(size: tuple[int, int]) -> str:
    fitting = _divisors(math.gcd(*size))
    if len(fitting) > 8:
        fitting = fitting[:4] + fitting[-3:]
    return f"windows that tile the {_size_text(size)} map: {', '.join(map(str, fitting))}, or `global`"


def name_problems(arch: Arch) -> list[Problem]:
    found = []
    if not NAME_PATTERN.match(arch.name):
        found.append(
            Problem(("name",), f"arch name {arch.name!r} is not a valid name", "use letters, digits, `_` and `-`")
        )
    first_seen: dict[str, int] = {}
    for index, stage in enumerate(arch.stages):
        if not NAME_PATTERN.match(stage.name):
            found.append(
                Problem(
                    ("stages", index, "name"),
                    f"stage name {stage.name!r} is not a valid name",
                    "use letters, digits, `_` and `-`, starting with a letter",
                )
            )
        elif stage.name in first_seen:
            found.append(
                Problem(
                    ("stages", index, "name"),
                    f"duplicate stage name `{stage.name}`",
                    f"stage names name the model's modules; the first `{stage.name}` is stage "
                    f"{first_seen[stage.name] + 1}",
                )
            )
        else:
            first_seen[stage.name] = index
        if not stage.blocks:
            found.append(
                Problem(
                    ("stages", index, "blocks"),
                    f"stage {stage.name} has no blocks",
                    "give it at least one block, e.g. `{ conv }`",
                )
            )
    return found


def shape_problems(arch: Arch) -> list[Problem]:
    found = []
    # Index stages by position, not by name (names may be duplicated in a bad IR).
    positions = [i for i, stage in enumerate(arch.stages) for _ in stage.blocks]
    for shape, si in zip(block_shapes(arch), positions, strict=True):
        stage = arch.stages[si]
        path = ("stages", si, "blocks", shape.index)
        if shape.index == 0 and stage.stride > 1:
            h, w = shape.in_size
            if min(h, w) < stage.stride:
                found.append(
                    Problem(
                        ("stages", si, "stride"),
                        f"stride {stage.stride} of stage {stage.name} shrinks its "
                        f"{_size_text(shape.in_size)} map below 1x1",
                        "use stride=1 here, or fewer strided stages, or a larger input",
                    )
                )
            if isinstance(shape.block, MSABlock):
                found.append(
                    Problem(
                        path,
                        f"an MSA cannot downsample: it is the first block of stage {stage.name}, "
                        f"which has stride {stage.stride}",
                        "start the stage with a `conv`, or give it stride=1",
                    )
                )
        block = shape.block
        if isinstance(block, MSABlock) and block.window is not None:
            h, w = shape.out_size
            if block.window > h or block.window > w:
                found.append(
                    Problem(
                        path + ("window",),
                        f"window {block.window} does not fit the "
                        f"{_size_text(shape.out_size)} map of stage {stage.name}",
                        _window_hint(shape.out_size),
                    )
                )
            elif h % block.window or w % block.window:
                found.append(
                    Problem(
                        path + ("window",),
                        f"window {block.window} does not tile the "
                        f"{_size_text(shape.out_size)} map of stage {stage.name}",
                        _window_hint(shape.out_size),
                    )
                )
    return found


def problems(arch: Arch) -> list[Problem]:
    """Every semantic problem of the design, in model order; empty when it is valid."""
    return name_problems(arch) + shape_problems(arch)


def _path_text(path: Path) -> str:
    return ".".join(str(part) for part in path)


def ensure_valid(arch: Arch) -> Arch:
    """Return `arch` unchanged if it is valid, else raise `SpecError` (without source spans)."""
    found = problems(arch)
    if found:
        diagnostics = [Diagnostic(None, f"{p.message} (at {_path_text(p.path)})", p.hint) for p in found]
        raise SpecError(diagnostics, path=f"arch {arch.name}")
    return arch
