"""How the build-up walk keeps a candidate (`buildup.Rules.keep`, `--keep`): its own module, light and importing
nothing, because the settings list the choices for the command line and the walk reads them."""

from __future__ import annotations

from typing import Literal

# Beyond the paired seeds' noise, or on their mean.
Keep = Literal["beyond-noise", "mean"]
KEEPS: tuple[Keep, ...] = ("beyond-noise", "mean")
# The walk's rule when --keep is not given: the mean, the one rule never worse than random search beyond the noise on
# any replayed space and best on the minority ones (docs/results.md); a failed seed is stood in for (walk.buildup).
DEFAULT_KEEP: Keep = "mean"
