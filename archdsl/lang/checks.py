"""Semantic checks on an IR: does this design make sense as a network?

The IR's types only guarantee positive integers and known kinds. Whether the pieces fit
together (a window tiles its feature map, an MSA does not start a strided stage, stage
names are unique, ...) is decided here, on the IR alone, so that every producer of IRs
gets the same answer: the front end (which maps each problem's `path` back to a source
span), the build-up transforms and the search (which call `ensure_valid`).

The rules every block obeys are here; what only one kind needs (a window that tiles its map,
a kernel with a centre) is its word's `check` (`archdsl.lang.words`, and a registered kind's
`archdsl.kinds.BlockKind.check`), asked for each block in turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from archdsl.ir import (
    Arch,
    AttnBlock,
    BlockShape,
    PatchStem,
    block_shapes,
    stem_out_size,
)
from archdsl.lang import words
from archdsl.lang.diagnostics import Diagnostic, SpecError
from archdsl.lang.limits import MAX_BLOCKS, MAX_NAME_LENGTH, MAX_NUMBER, MAX_STAGES
from archdsl.lang.sites import Path, Problem, Site, divisors, size_text

__all__ = ["ensure_valid", "problems"]

# Stage names become module names (`stages.c3.5`) and search parameter names; arch names
# are printed back as `arch NAME`. Both must read back as one NAME of the grammar.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


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


def _downsampling_problems(site: Site, word: words.Word) -> list[Problem]:
    """The stride of a stage is applied by its first block: that block must downsample, and the map
    must be at least as large as the stride; a block whose one job is to halve starts a stride-2 stage."""
    stage, shape = site.stage, site.shape
    found = []
    if site.starts_strided and min(shape.in_size) < stage.stride:
        if word.halves:
            message = f"{word.name} past 1x1: the map entering stage {stage.name} is {size_text(shape.in_size)}"
            hint = "drop this stage's `merge`/`pool` and give it stride=1, or downsample fewer times"
        else:
            message = (
                f"stride {stage.stride} of stage {stage.name} shrinks its {size_text(shape.in_size)} map below 1x1"
            )
            hint = "use stride=1 here, or fewer strided stages, or a larger input"
        found.append(Problem(site.stage_path + ("stride",), message, hint))
    if site.starts_strided and not shape.block.downsamples:
        message = (
            f"{word.noun} cannot downsample: it is the first block of stage {stage.name}, "
            f"which has stride {stage.stride}"
        )
        found.append(Problem(site.path, message, word.start_hint))
    if word.halves and not site.starts_strided:
        found.append(
            Problem(
                site.path,
                f"`{word.name}` downsamples: it must be the first block of a stage with stride=2",
                f"{word.halves} halves the map; start a stage with it: "
                f"`stage NAME(width=W, stride=2) {{ {word.name} ... }}`",
            )
        )
    elif word.halves and stage.stride != 2:
        found.append(
            Problem(
                site.stage_path + ("stride",),
                f"`{word.name}` halves the map, but stage {stage.name} has stride {stage.stride}",
                f"{word.halves} always halves: give the stage stride=2",
            )
        )
    return found


def _class_token_problems(site: Site, word: words.Word) -> list[Problem]:
    """A class token travels with the tokens: a block that reads a map (or merges patches) drops it."""
    if not site.arch.class_token or (site.shape.block.layout == "tokens" and word.class_token):
        return []
    return [
        Problem(
            site.path,
            f"{word.noun} cannot carry the class token (`head class`)",
            "a class-token net is made of `attn`, `mlp` and `pool`; for hybrids use `head mean`",
        )
    ]


def _width_problems(arch: Arch, shapes: list[BlockShape], positions: list[int]) -> list[Problem]:
    """A stage whose blocks all keep their channels (attn, mlp, smooth) must not claim another width."""
    found = []
    first: dict[int, BlockShape] = {}
    for shape, si in zip(shapes, positions, strict=True):
        first.setdefault(si, shape)
    for si, stage in enumerate(arch.stages):
        # A strided stage must start with a block that uses the width (or is told it cannot downsample).
        if si not in first or stage.stride > 1 or any(b.channels == "width" for b in stage.blocks):
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
    strided below 1x1; each block's own rules come from its word (`archdsl.lang.words`)."""
    found = []
    # Index stages by position, not by name (names may be duplicated in a bad IR).
    positions = [i for i, stage in enumerate(arch.stages) for _ in stage.blocks]
    shapes = block_shapes(arch)
    for shape, si in zip(shapes, positions, strict=True):
        site = Site(arch, arch.stages[si], si, shape)
        word = words.word(shape.block.kind)
        found += _downsampling_problems(site, word)
        found += word.check(site)
        found += _class_token_problems(site, word)
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
                    f"patch {stem.size} does not fit the {size_text(size)} input",
                    "a patch is at most as large as the input",
                )
            )
        elif any((side - stem.size) % stem.stride for side in size):
            if stem.stride == stem.size:
                message = f"patches of {stem.size} do not tile the {size_text(size)} input"
                hint = f"patch sizes that tile it: {', '.join(map(str, divisors(math.gcd(*size))[:8]))}"
            else:
                message = f"patch {stem.size} with stride {stem.stride} leaves part of the {size_text(size)} input out"
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
