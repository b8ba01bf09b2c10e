"""Any torch `state_dict()` as tensors + JSON, and back, without pickle.

Optimizer and scheduler state dicts are trees of dicts (keys: strings or ints, as the
parameter ids of `optimizer.state_dict()["state"]`), lists, tuples (Adam's `betas`),
tensors and plain values (numbers, including inf and nan, strings, booleans, None).
`encode` walks such a tree, moves every tensor out into a flat `{name: tensor}` mapping (for
safetensors) and returns the rest as JSON-safe data in which each tensor is a reference
to its name; `decode` puts the tree back together, with the same Python types. Values of
any other type are refused with the path where they sit, rather than stored as text that
would not load back.

Tagged forms (only where plain JSON would lose something):
    {"$tensor": name}    a tensor, stored under `name`
    {"$tuple": [...]}    a tuple
    {"$dict": [[k, v], ...]}  a dict whose keys are not all plain strings (ints, say)
    {"$counter": [[k, n], ...]}  a collections.Counter (MultiStepLR's milestones)
    {"$float": "inf" | "-inf" | "nan"}  a float JSON cannot hold
Other dict types (OrderedDict, defaultdict) come back as plain dicts.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

_TAGS = ("$tensor", "$tuple", "$dict", "$counter", "$float")


def encode(state: Any, prefix: str = "") -> tuple[Any, dict[str, torch.Tensor]]:
    """(JSON-safe structure, tensors by name); tensor names start with `prefix`."""
    tensors: dict[str, torch.Tensor] = {}

    def walk(value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, torch.Tensor):
            name = prefix + "/".join(path)
            while name in tensors:  # two keys that print alike ("1" and 1): keep both
                name += "'"
            tensors[name] = value
            return {"$tensor": name}
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else {"$float": repr(float(value))}
        if isinstance(value, (list, tuple)):
            items = [walk(item, (*path, str(index))) for index, item in enumerate(value)]
            return {"$tuple": items} if isinstance(value, tuple) else items
        if isinstance(value, Counter):
            return {"$counter": [[walk(key, (*path, "key")), walk(n, (*path, str(key)))] for key, n in value.items()]}
        if isinstance(value, dict):
            if all(isinstance(key, str) and key not in _TAGS for key in value):
                return {key: walk(item, (*path, key)) for key, item in value.items()}
            return {
                "$dict": [[walk(key, (*path, "key")), walk(item, (*path, str(key)))] for key, item in value.items()]
            }
        where = "/".join(path) or "the top level"
        raise TypeError(f"cannot store a {type(value).__name__} at {where} of a state dict without pickle")

    return walk(state, ()), tensors


def decode(structure: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The state `encode` took apart; every tensor must be in `tensors`."""

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            if len(value) == 1:
                ((tag, inner),) = value.items()
                if tag == "$tensor":
                    return tensors[inner]
                if tag == "$tuple":
                    return tuple(walk(item) for item in inner)
                if tag == "$dict":
                    return {walk(key): walk(item) for key, item in inner}
                if tag == "$counter":
                    return Counter({walk(key): walk(count) for key, count in inner})
                if tag == "$float":
                    return float(inner)
            return {key: walk(item) for key, item in value.items()}
        return value

    return walk(structure)
