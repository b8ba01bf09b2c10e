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
from collections.abc import Iterator
from dataclasses import dataclass

from archdsl.ir import (
    Arch,
    AttnBlock,
    BlockShape,
    ExtBlock,
    MSABlock,
    PatchStem,
    PoolBlock,
    Stage,
    block_layout,
    block_shapes,
    downsamples,
    placement,
    stem_out_size,
)
from archdsl.lang.diagnostics import Diagnostic, SpecError
from archdsl.lang.limits import MAX_BLOCKS, MAX_NAME_LENGTH, MAX_NUMBER, MAX_STAGES

Path = tuple[str | int, ...]  # a path into the IR, e.g. ("stages", 2, "blocks", 5, "window")

# Stage names become module names (`stages.c3.5`) and search parameter names; arch names
# are printed back as `arch NAME`. Both must read back as one NAME of the grammar.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


@dataclass(frozen=True)
class Problem:
    """A semantic mistake in a design: where in the IR (`path`), what, and a hint."""

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


def limit_problems(arch: Arch) -> list[Problem]:
    """Sizes past the language's limits (`archdsl.lang.limits`): what a spec cannot express.

    Counts are checked before anything walks the stages, and numbers before any check does
    arithmetic with them (a window hint's divisors of a 10^30 map would never finish).
    """
    if len(arch.stages) > MAX_STAGES:
        return [Problem(("stages",), f"{len(arch.stages)} stages: a design has at most {MAX_STAGES}")]
    if arch.n_blocks > MAX_BLOCKS:
        return [Problem(("stages",), f"{arch.n_blocks} blocks: a design has at most {MAX_BLOCKS}")]
    return [
        Problem(path, f"{_path_text(path)} is too large: {value}", f"at most {MAX_NUMBER}")
        for path, value in _numbers(arch.model_dump(), ())
        if value > MAX_NUMBER
    ]


def _numbers(data: object, path: Path) -> Iterator[tuple[Path, int]]:
    """(path, value) of every integer in an IR dump."""
    if isinstance(data, bool):
        return
    if isinstance(data, int):
        yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _numbers(value, path + (key,))
    elif isinstance(data, (list, tuple)):
        for index, value in enumerate(data):
            yield from _numbers(value, path + (index,))


def _name_problem(path: Path, what: str, name: str, hint: str) -> Problem | None:
    if len(name) > MAX_NAME_LENGTH:
        return Problem(path, f"{what} is {len(name)} characters long: at most {MAX_NAME_LENGTH} characters")
    if not NAME_PATTERN.match(name):
        return Problem(path, f"{what} {name!r} is not a valid name", hint)
    return None


def name_problems(arch: Arch) -> list[Problem]:
    """Arch and stage names that would not read back as names, and stage names used twice."""
    found = []
    problem = _name_problem(("name",), "arch name", arch.name, "use letters, digits, `_` and `-`")
    if problem is not None:
        found.append(problem)
    first_seen: dict[str, int] = {}
    for index, stage in enumerate(arch.stages):
        problem = _name_problem(
            ("stages", index, "name"),
            "stage name",
            stage.name,
            "use letters, digits, `_` and `-`, starting with a letter",
        )
        if problem is not None:
            found.append(problem)
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


# How a block is named in messages.
_WORDS = {
    "conv": "a `conv` block",
    "msa": "an MSA",
    "attn": "an `attn` block",
    "mlp": "an `mlp` block",
    "merge": "`merge`",
    "pool": "`pool`",
    "smooth": "`smooth`",
}


def _word(kind: str) -> str:
    """How a block is named in messages; a registered kind is "a `mbconv` block"."""
    return _WORDS.get(kind, f"a `{kind}` block")


def _window_problems(block: MSABlock | AttnBlock, shape: BlockShape, stage: Stage, path: Path) -> list[Problem]:
    """A window must tile its map (both MSA kinds); a shift needs windows to move between."""
    found = []
    h, w = shape.out_size
    if block.window is not None:
        if block.window > h or block.window > w:
            message = f"window {block.window} does not fit the {_size_text(shape.out_size)} map of stage {stage.name}"
            found.append(Problem(path + ("window",), message, _window_hint(shape.out_size)))
        elif h % block.window or w % block.window:
            message = f"window {block.window} does not tile the {_size_text(shape.out_size)} map of stage {stage.name}"
            found.append(Problem(path + ("window",), message, _window_hint(shape.out_size)))
    if not isinstance(block, AttnBlock) or not block.shift:
        return found
    if block.window is None:
        found.append(
            Problem(
                path + ("shift",),
                "a shift moves windows, but this `attn` has none",
                "drop `shift`, or give a window: `attn(H, 4, shift=2)`",
            )
        )
    elif block.shift >= block.window:
        found.append(
            Problem(
                path + ("shift",),
                f"shift {block.shift} must be smaller than the window {block.window}",
                f"Swin shifts by half a window: shift={block.window // 2}",
            )
        )
    elif block.window == h and block.window == w:
        found.append(
            Problem(
                path + ("shift",),
                f"a shifted window on a map of one window: the {_size_text(shape.out_size)} map of stage "
                f"{stage.name} is a single {block.window}x{block.window} window",
                "drop `shift` here (timm's Swin silently does the same)",
            )
        )
    return found


def _downsampling_problems(shape: BlockShape, stage: Stage, si: int, path: Path) -> list[Problem]:
    kind = shape.block.kind
    found = []
    starts_strided = shape.index == 0 and stage.stride > 1
    if starts_strided and min(shape.in_size) < stage.stride:
        if kind in ("merge", "pool"):
            message = f"{kind} past 1x1: the map entering stage {stage.name} is {_size_text(shape.in_size)}"
            hint = "drop this stage's `merge`/`pool` and give it stride=1, or downsample fewer times"
        else:
            message = (
                f"stride {stage.stride} of stage {stage.name} shrinks its {_size_text(shape.in_size)} map below 1x1"
            )
            hint = "use stride=1 here, or fewer strided stages, or a larger input"
        found.append(Problem(("stages", si, "stride"), message, hint))
    if starts_strided and not downsamples(shape.block):
        if kind == "msa":
            message = (
                f"an MSA cannot downsample: it is the first block of stage {stage.name}, "
                f"which has stride {stage.stride}"
            )
            hint = "start the stage with a `conv`, or give it stride=1"
        else:
            message = (
                f"{_word(kind)} cannot downsample: it is the first block of stage {stage.name}, "
                f"which has stride {stage.stride}"
            )
            hint = (
                "start the stage with a `conv` or another block that downsamples, or give it stride=1"
                if isinstance(shape.block, ExtBlock) and shape.block.declaration.layout == "map"
                else "start the stage with `merge` or `pool` (or a `conv`), or give it stride=1"
            )
        found.append(Problem(path, message, hint))
    if kind in ("merge", "pool"):
        what = "Swin's patch merging" if kind == "merge" else "PiT's pooling"
        if not starts_strided:
            found.append(
                Problem(
                    path,
                    f"`{kind}` downsamples: it must be the first block of a stage with stride=2",
                    f"{what} halves the map; start a stage with it: `stage NAME(width=W, stride=2) {{ {kind} ... }}`",
                )
            )
        elif stage.stride != 2:
            found.append(
                Problem(
                    ("stages", si, "stride"),
                    f"`{kind}` halves the map, but stage {stage.name} has stride {stage.stride}",
                    f"{what} always halves: give the stage stride=2",
                )
            )
    return found


def _class_token_problems(arch: Arch, shape: BlockShape, path: Path) -> list[Problem]:
    if not arch.class_token:
        return []
    block = shape.block
    hint = "a class-token net is made of `attn`, `mlp` and `pool`; for hybrids use `head mean`"
    if block_layout(block) == "map" or block.kind == "merge":
        return [Problem(path, f"{_word(block.kind)} cannot carry the class token (`head class`)", hint)]
    if isinstance(block, AttnBlock) and (block.window is not None or block.kernel is not None):
        local = "window" if block.window is not None else "kernel"
        return [
            Problem(
                path + (local,),
                f"a class token with {'window' if local == 'window' else 'local'} attention: "
                f"the class token belongs to no {'window' if local == 'window' else 'neighbourhood'}",
                "use `attn(H, global)` with `head class`, or `head mean` with local attention",
            )
        ]
    return []


def _uses_width(block: object) -> bool:
    """Whether a block's output channels come from its stage's width."""
    if isinstance(block, ExtBlock):
        return block.declaration.channels == "width"
    return getattr(block, "kind", None) in ("conv", "msa", "merge", "pool")


def _width_problems(arch: Arch, shapes: list[BlockShape], positions: list[int]) -> list[Problem]:
    """A stage whose blocks all keep their channels (attn, mlp, smooth) must not claim another width."""
    found = []
    first: dict[int, BlockShape] = {}
    for shape, si in zip(shapes, positions, strict=True):
        first.setdefault(si, shape)
    for si, stage in enumerate(arch.stages):
        # A strided stage must start with a block that uses the width (or is told it cannot downsample).
        if si not in first or stage.stride > 1 or any(_uses_width(b) for b in stage.blocks):
            continue
        channels = first[si].in_channels
        if stage.width != channels:
            found.append(
                Problem(
                    ("stages", si, "width"),
                    f"mismatched dims: stage {stage.name} has width {stage.width}, but its blocks keep the "
                    f"{channels} channels they receive",
                    f"set width={channels}, or start the stage with `merge` or `pool` to change the channels",
                )
            )
    return found


def shape_problems(arch: Arch) -> list[Problem]:
    """Designs that cannot be built: windows that do not fit or tile their map, MSAs starting a strided stage, maps
    strided below 1x1."""
    found = []
    # Index stages by position, not by name (names may be duplicated in a bad IR).
    positions = [i for i, stage in enumerate(arch.stages) for _ in stage.blocks]
    shapes = block_shapes(arch)
    for shape, si in zip(shapes, positions, strict=True):
        stage = arch.stages[si]
        path = ("stages", si, "blocks", shape.index)
        block = shape.block
        found += _downsampling_problems(shape, stage, si, path)
        if isinstance(block, (MSABlock, AttnBlock)):
            found += _window_problems(block, shape, stage, path)
        if isinstance(block, AttnBlock) and block.kernel is not None and block.kernel % 2 == 0:
            found.append(
                Problem(
                    path + ("kernel",),
                    f"kernel {block.kernel} has no centre: a local kernel is centred on its token",
                    f"use an odd size: {block.kernel - 1} or {block.kernel + 1}",
                )
            )
        if isinstance(block, PoolBlock) and shape.out_channels % shape.in_channels:
            found.append(
                Problem(
                    ("stages", si, "width"),
                    f"mismatched dims: PiT's pooling maps {shape.in_channels} channels to {shape.out_channels} with "
                    f"a depthwise conv, so the width must be a multiple of {shape.in_channels}",
                    f"e.g. width={2 * shape.in_channels}",
                )
            )
        found += _class_token_problems(arch, shape, path)
        if isinstance(block, ExtBlock) and block.declaration.check is not None:
            found += [
                Problem(path + ((arg,) if arg else ()), message, hint)
                for arg, message, hint in block.declaration.check(placement(arch, shape))
            ]
    found += _width_problems(arch, shapes, positions)
    return found


def design_problems(arch: Arch) -> list[Problem]:
    """The arch-wide settings: stem, head, position terms."""
    found = []
    stem = arch.stem
    patch = isinstance(stem, PatchStem)
    if isinstance(stem, PatchStem):
        size = (arch.input.height, arch.input.width)
        if stem.size > min(size):
            found.append(
                Problem(
                    ("stem",),
                    f"patch {stem.size} does not fit the {_size_text(size)} input",
                    "a patch is at most as large as the input",
                )
            )
        elif any((side - stem.size) % stem.stride for side in size):
            if stem.stride == stem.size:
                message = f"patches of {stem.size} do not tile the {_size_text(size)} input"
                hint = f"patch sizes that tile it: {', '.join(map(str, _divisors(math.gcd(*size))[:8]))}"
            else:
                message = f"patch {stem.size} with stride {stem.stride} leaves part of the {_size_text(size)} input out"
                hint = "the input minus the patch size must be a multiple of the stride"
            found.append(Problem(("stem",), message, hint))
    if arch.class_token and not patch:
        found.append(
            Problem(("head",), "a class token needs a patch stem", "use `stem patch(size, C)`, or `head mean`")
        )
    pos = arch.pos
    if pos.kind == "absolute" and not patch:
        found.append(
            Problem(("pos",), "absolute positions are added to a patch stem's tokens", "use `stem patch(size, C)`")
        )
    if pos.kind == "absolute" and not pos.class_token and not arch.class_token:
        found.append(
            Problem(
                ("pos", "class_token"),
                "`class=false` only matters with a class token (`head class`)",
                "write `pos absolute`",
            )
        )
    if pos.kind != "absolute" and not pos.class_token:
        found.append(Problem(("pos",), f"`{pos.kind}` positions take no `class` option", f"write `pos {pos.kind}`"))
    if pos.kind == "relative":
        if arch.class_token:
            found.append(
                Problem(
                    ("pos",),
                    "relative positions with a class token: the class token has no offset to the patches",
                    "use `pos absolute` with `head class`, or `head mean`",
                )
            )
        if not any(isinstance(b, AttnBlock) for st in arch.stages for b in st.blocks):
            found.append(
                Problem(
                    ("pos",),
                    "`pos relative` gives each `attn` a relative-position bias, but there is no `attn`",
                    "the AlterNet `msa` always has its own relative table; drop `pos relative`",
                )
            )
    return found


def problems(arch: Arch) -> list[Problem]:
    """Every problem of the design, in model order; empty when it is valid.

    Past a limit, only that is reported: the other checks would be slow or meaningless.
    """
    limits = limit_problems(arch)
    if limits:
        return limits
    found = name_problems(arch) + design_problems(arch)
    # Shapes after a stem that does not fit the input would only report noise.
    if min(stem_out_size(arch)) > 0:
        found += shape_problems(arch)
    return found


def _path_text(path: Path) -> str:
    return ".".join(str(part) for part in path)


def ensure_valid(arch: Arch) -> Arch:
    """Return `arch` unchanged if it is valid, else raise `SpecError` (without source spans)."""
    found = problems(arch)
    if found:
        diagnostics = [Diagnostic(None, f"{p.message} (at {_path_text(p.path)})", p.hint) for p in found]
        raise SpecError(diagnostics, path=f"arch {arch.name}")
    return arch
