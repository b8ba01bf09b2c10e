"""What a block word is to the language: how it is read, written back and counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock
from archdsl.lang.diagnostics import Span
from archdsl.lang.parser import BlockRef

if TYPE_CHECKING:
    from archdsl.lang.arguments import ArgumentReader


@dataclass
class Lowered:
    """A block with the spans its IR fields came from (keys: "" for the block, then field names)."""

    block: AnyBlock
    spans: dict[str, Span]
    # An `attn` written without `dim_head`: it becomes channels // heads once shapes are known.
    dim_head_unset: bool = False


@dataclass(frozen=True)
class Word:
    """A block word: `lower` reads a written block (reporting its mistakes through the reader, the
    arch's plain `conv` given as `default`), `text` writes an IR block back (`channels`: what it
    receives), `count` gives its (params, multiply-accumulates per image) where it sits (`width`: its
    stage's). The compiler's modules are `archdsl.nn.build`'s."""

    name: str
    lower: Callable[[ArgumentReader, BlockRef, ConvBlock], Lowered]
    text: Callable[[AnyBlock, ConvBlock, int | None], str]
    count: Callable[[Arch, BlockShape, int], tuple[int, int]]
