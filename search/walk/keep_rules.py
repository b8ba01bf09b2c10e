"""How the build-up walk keeps a candidate (`buildup.Rules.keep`, `--keep`) and sets a new MSA's other knobs
(`buildup.Rules.knobs`, `--knobs`): its own module, light and importing
nothing, because the settings list the choices for the command line and the walk reads them."""

from __future__ import annotations

from typing import Literal

# Beyond the paired seeds' noise, or on their mean.
Keep = Literal["beyond-noise", "mean"]
KEEPS: tuple[Keep, ...] = ("beyond-noise", "mean")
# The walk's rule when --keep is not given: the mean, the one rule never worse than random search beyond the noise on
# any replayed space and best on the minority ones (docs/results.md); a failed seed is stood in for (walk.buildup).
DEFAULT_KEEP: Keep = "mean"

# What an added MSA's other searched knobs (heads, window, dim_head) are: the base's (`base`), or, when a stage takes
# its first MSA, each knob chosen in turn among its values on the paired seeds' mean (`choose`).
Knobs = Literal["base", "choose"]
KNOBS: tuple[Knobs, ...] = ("base", "choose")
# The default: choose. On resnet-fmnist's k,window space (odd-one-out, 35 seed sets) the settled walk lands within 0.5
# points of the best on 57 % of the sets (0 % keeping the base's windows: the best designs need a global window in
# c1); docs/results-walk.md ("Choosing a new MSA's window") measures both minority spaces.
DEFAULT_KNOBS: Knobs = "choose"
