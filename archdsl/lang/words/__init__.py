"""The block words of the language, one module each: how a block is read (`lower`), written back
(`text`) and counted (`count`). The built-in words are listed here; a registered kind
(`archdsl.kinds`) is a word of `plugin`. The lowering, the printer and the summary look a word up
here instead of branching on kinds.
"""

from __future__ import annotations

from archdsl import kinds
from archdsl.lang.words import attn, conv, mlp, msa, plain, plugin
from archdsl.lang.words.base import Lowered, Word

__all__ = ["BUILTIN", "Lowered", "Word", "word"]

BUILTIN: dict[str, Word] = {
    w.name: w for w in (conv.WORD, msa.WORD, attn.WORD, mlp.WORD, plain.MERGE, plain.POOL, plain.SMOOTH)
}
assert tuple(BUILTIN) == kinds.BUILTIN_KINDS  # one list of the built-in words


def word(kind: str) -> Word:
    """The word of a block kind: built-in, or registered (`UserError` if neither)."""
    found = BUILTIN.get(kind)
    if found is not None:
        return found
    kinds.require_kind(kind)
    return plugin.word(kind)


def known(kind: str) -> bool:
    """Whether `kind` is a word (built-in or registered)."""
    return kind in BUILTIN or kinds.block_kind(kind) is not None
