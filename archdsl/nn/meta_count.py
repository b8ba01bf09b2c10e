"""A registered block kind's parameters and FLOPs, counted on the meta device.

For a kind whose formulas are not worth writing out (`archdsl.kinds.BlockKind.count`):
`count=meta_count(build)` builds the block where it sits on torch's meta device (no memory,
no arithmetic), counts its parameters and runs one image through torch's `FlopCounterMode`,
which counts convolutions, matmuls and linear layers as archdsl's summary does (2 FLOPs per
multiply-accumulate). Importing this module does not import torch; counting does.
"""

from __future__ import annotations

from archdsl.kinds import BuildRule, CountRule, Placement


def meta_count(build: BuildRule, layout: str = "map") -> CountRule:
    """A `count` rule for `BlockKind` that builds the block with `build` on the meta device and
    feeds it one image in its `layout` (a map, or tokens without a class token)."""

    def count(place: Placement) -> tuple[int, int]:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        with torch.device("meta"):
            module = build(place, 0.0).eval()
            params = sum(parameter.numel() for parameter in module.parameters())
            height, width = place.in_size
            shape = (1, place.in_channels, height, width) if layout == "map" else (1, height * width, place.in_channels)
            x = torch.zeros(shape)
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                module(x)
        return params, counter.get_total_flops() // 2

    return count
