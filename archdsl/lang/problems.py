"""What a semantic check reports and what it is told: a `Problem` at a `Path` into the IR, and the
`Site` of a block (for a block word's own checks, `archdsl.lang.words`).

Its own module so that the argument reader (which records a span per path), the words (which
declare their checks) and `archdsl.lang.checks` (which runs them) share it without importing
each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archdsl.ir import Arch, BlockShape, Stage

Path = tuple[str | int, ...]  # a path into the IR, e.g. ("stages", 2, "blocks", 5, "window")


@dataclass(frozen=True)
class Problem:
    """A semantic mistake in a design: where in the IR (`path`), what, and a hint."""

    path: Path
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class Site:
    """Where a block sits, as its word's `check` is told: the design, its stage (by position: names
    may be duplicated in a bad IR) and its shape (channels and map in and out)."""

    arch: Arch
    stage: Stage
    stage_index: int
    shape: BlockShape

    @property
    def path(self) -> Path:
        """The block's path; a problem with one of its fields adds the field's name."""
        return ("stages", self.stage_index, "blocks", self.shape.index)

    @property
    def stage_path(self) -> Path:
        """Its stage's path; a problem with the stage's `width` or `stride` adds that name."""
        return ("stages", self.stage_index)

    @property
    def starts_strided(self) -> bool:
        """Whether the block is the first of a strided stage (so it applies the stride)."""
        return self.shape.index == 0 and self.stage.stride > 1


def size_text(size: tuple[int, int]) -> str:
    """A map size as messages write it: `8x8`."""
    return f"{size[0]}x{size[1]}"


def divisors(n: int) -> list[int]:
    """The divisors of `n` in increasing order (the window and patch sizes that tile a side of `n`)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
