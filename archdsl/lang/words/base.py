"""What a block word is to the language: how it is read, written back, checked and counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock
from archdsl.lang.diagnostics import Span
from archdsl.lang.parser import BlockRef
from archdsl.lang.problems import Problem, Site

if TYPE_CHECKING:
    from archdsl.lang.arguments import ArgumentReader


@dataclass
class Lowered:
    """A block with the spans its IR fields came from (keys: "" for the block, then field names)."""

    block: AnyBlock
    spans: dict[str, Span]
    # An `attn` written without `dim_head`: it becomes channels // heads once shapes are known.
    dim_head_unset: bool = False


# The hint for a block that cannot start a strided stage, unless its word says otherwise.
START_WITH_A_DOWNSAMPLER = "start the stage with `merge` or `pool` (or a `conv`), or give it stride=1"


def no_problems(site: Site) -> list[Problem]:
    return []


def no_activations(arch: Arch, shape: BlockShape) -> int:
    return 0


@dataclass(frozen=True)
class Word:
    """A block word: `lower` reads a written block (reporting its mistakes through the reader, the
    arch's plain `conv` given as `default`), `text` writes an IR block back (`channels`: what it
    receives), `count` gives its (params, multiply-accumulates per image) where it sits (`width`: its
    stage's). The compiler's modules are `archdsl.nn.build`'s.

    What `archdsl.lang.checks` asks of it, beside the rules every block obeys (`checks.shape_problems`):
    - `noun`: how messages name it (`an MSA`, "an MSA cannot downsample: ...");
    - `check(site)`: its own problems where it sits (a window that does not tile the map);
    - `start_hint`: the hint when it is the first block of a strided stage but does not downsample;
    - `halves`: what it is (`Swin's patch merging`) if its one job is to halve the map: then it
      must start a stage with stride 2;
    - `class_token`: whether it can carry a class token (among the token blocks; a map block never can).

    `activations(arch, shape)`: the values it keeps per image besides its output (hidden layers,
    attention maps), for the summary's memory estimate.
    """

    name: str
    lower: Callable[[ArgumentReader, BlockRef, ConvBlock], Lowered]
    text: Callable[[AnyBlock, ConvBlock, int | None], str]
    count: Callable[[Arch, BlockShape, int], tuple[int, int]]
    noun: str = field(kw_only=True)
    check: Callable[[Site], list[Problem]] = field(default=no_problems, kw_only=True)
    start_hint: str = field(default=START_WITH_A_DOWNSAMPLER, kw_only=True)
    halves: str = field(default="", kw_only=True)
    class_token: bool = field(default=True, kw_only=True)
    activations: Callable[[Arch, BlockShape], int] = field(default=no_activations, kw_only=True)
