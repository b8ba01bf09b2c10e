"""Weight names and shapes: what a design expects, and how a state dict differs from it.

`expected_shapes` builds the model on torch's meta device, so it costs no memory and no
initialisation time whatever the design's size. `compare_weights` names the first
missing, unexpected and mis-shaped keys, with counts: the message a user needs when a
checkpoint or an imported file does not fit a design.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from archdsl.errors import UserError
from archdsl.ir import Arch

Shape = tuple[int, ...]


def expected_shapes(arch: Arch) -> dict[str, Shape]:
    """The state-dict keys of `build(arch)` and their shapes, without allocating any weights."""
    from archdsl.nn.build import build

    with torch.device("meta"):
        model = build(arch)
    return {key: tuple(tensor.shape) for key, tensor in model.state_dict().items()}


@dataclass(frozen=True)
class WeightMismatch:
    """How a state dict differs from the expected names and shapes (sorted key lists)."""

    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    misshaped: tuple[tuple[str, Shape, Shape], ...]  # (key, expected, found)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.misshaped)

    def describe(self, first: int = 5) -> str:
        """One line per kind of difference, naming the first `first` keys of each and the count."""

        def listed(items: list[str]) -> str:
            more = f", ... ({len(items) - first} more)" if len(items) > first else ""
            return ", ".join(items[:first]) + more

        lines = []
        if self.missing:
            lines.append(f"{len(self.missing)} missing: {listed(list(self.missing))}")
        if self.unexpected:
            lines.append(f"{len(self.unexpected)} unexpected: {listed(list(self.unexpected))}")
        if self.misshaped:
            shaped = [f"{key} {_shape(found)} (expected {_shape(want)})" for key, want, found in self.misshaped]
            lines.append(f"{len(self.misshaped)} of the wrong shape: {listed(shaped)}")
        return "\n".join(lines)


def _shape(shape: Shape) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def compare_weights(expected: Mapping[str, Shape], state: Mapping[str, torch.Tensor]) -> WeightMismatch:
    """Compare `state`'s keys and shapes with `expected` (e.g. `expected_shapes(arch)`)."""
    return WeightMismatch(
        missing=tuple(sorted(set(expected) - set(state))),
        unexpected=tuple(sorted(set(state) - set(expected))),
        misshaped=tuple(
            (key, tuple(expected[key]), tuple(state[key].shape))
            for key in sorted(set(expected) & set(state))
            if tuple(state[key].shape) != tuple(expected[key])
        ),
    )


def nonfinite_keys(state: Mapping[str, torch.Tensor]) -> list[str]:
    """The keys of floating-point tensors holding NaN or infinite values, in order: weights no
    model should be built with (a diverged run, a damaged file)."""
    return [key for key, tensor in state.items() if tensor.is_floating_point() and not torch.isfinite(tensor).all()]


def describe_nonfinite(keys: list[str], first: int = 3) -> str:
    """`2 weight tensors hold NaN or infinite values: a, b` (the first `first` keys named)."""
    tensors = "weight tensor holds" if len(keys) == 1 else "weight tensors hold"
    more = ", ..." if len(keys) > first else ""
    return f"{len(keys)} {tensors} NaN or infinite values: {', '.join(keys[:first])}{more}"


def require_fitting_weights(
    arch: Arch, state: Mapping[str, torch.Tensor], *, where: str, what: str, fit_hint: str, finite_hint: str
) -> None:
    """A `UserError` unless `state` has exactly `arch`'s keys and shapes and only finite values.

    `where` starts each message (a file, a flag and a file), `what` names the weights
    (`its weights`, `the timm weights`); the hints say what to do about a mismatch or NaN/inf.
    """
    mismatch = compare_weights(expected_shapes(arch), state)
    if mismatch:
        raise UserError(f"{where}: {what} do not fit {arch.name}:\n{mismatch.describe()}", hint=fit_hint)
    bad = nonfinite_keys(state)
    if bad:
        raise UserError(f"{where}: {describe_nonfinite(bad)}", hint=finite_hint)
