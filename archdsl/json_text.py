"""JSON read from a user's file (a replay table, a journal record, a checkpoint's metadata), with one
guard: a value nested deeper than Python's JSON reader can follow (it recurses once per level and
stops near 1,000 levels with a RecursionError) is a `TooDeepJSON`, which says how deep it nests.

The depth is measured only when the reader gave up, so well-formed files cost nothing extra. A reader
that must bound the memory a file takes once parsed bounds its values first (`most_values`).
"""

from __future__ import annotations

import json
import re
from typing import Any

# A JSON string, its escapes included: brackets inside one do not nest.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


class TooDeepJSON(ValueError):
    """JSON nested deeper than the reader follows; `depth` is how deep it goes."""

    def __init__(self, depth: int) -> None:
        super().__init__(f"JSON nested {depth:,} levels deep, more than a JSON reader follows")
        self.depth = depth


def parse(text: str | bytes) -> Any:
    """`json.loads(text)`; a `TooDeepJSON` instead of a RecursionError. Other errors as json's."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeepJSON(nesting_depth(text)) from None


def nesting_depth(text: str | bytes) -> int:
    """How deep the arrays and objects of `text` nest (strings skipped), without recursing."""
    import numpy as np

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    codes = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    opens = (codes == ord("[")).astype(np.int64) + (codes == ord("{"))
    closes = (codes == ord("]")).astype(np.int64) + (codes == ord("}"))
    return int(np.cumsum(opens - closes).max(initial=0))


def most_values(data: bytes) -> int:
    """The most values `data` can hold as JSON, every element of an array and every member of an object counted,
    without parsing it: what its parse would make into as many Python objects. A non-empty array or object holds
    one element more than the commas in it, so it is at most 1 + the commas + the brackets that open; those
    inside strings count too (a bound that costs no copy of the text: real files hold few in their strings)."""
    return 1 + data.count(b",") + data.count(b"[") + data.count(b"{")
