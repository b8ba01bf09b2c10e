"""What the two attention words (`msa`, `attn`) share: a window must tile its map, and the
attention maps they hold (for the memory estimate)."""

from __future__ import annotations

import math

from archdsl.lang.problems import Problem, Site, divisors, size_text


def window_hint(size: tuple[int, int]) -> str:
    fitting = divisors(math.gcd(*size))
    if len(fitting) > 8:
        fitting = fitting[:4] + fitting[-3:]
    return f"windows that tile the {size_text(size)} map: {', '.join(map(str, fitting))}, or `global`"


def tiling_problems(site: Site, window: int | None) -> list[Problem]:
    """A window (None: global attention) must fit its block's map and tile it."""
    size = site.shape.out_size
    h, w = size
    if window is None:
        return []
    if window > h or window > w:
        message = f"window {window} does not fit the {size_text(size)} map of stage {site.stage.name}"
    elif h % window or w % window:
        message = f"window {window} does not tile the {size_text(size)} map of stage {site.stage.name}"
    else:
        return []
    return [Problem(site.path + ("window",), message, window_hint(size))]


def attention_values(heads: int, side: int | None, size: tuple[int, int]) -> int:
    """The attention maps of one image: heads x queries x keys, each query seeing a `side` x `side`
    window or neighbourhood (None: the whole map)."""
    height, width = size
    keys = side * side if side is not None else height * width
    return heads * keys * height * width
