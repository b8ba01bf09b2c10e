"""`smooth`: the spatial smoothing of "Blurs Behave Like Ensembles" (Park & Kim, ICML 2022).

A fixed 2x2 box blur, channel by channel: each value becomes the mean of itself and its
neighbours to the right, below and diagonally, with zeros past the bottom and right border
(the reference implementation's `Blur` with the (1, 1) filter and constant "same" padding),
so the map keeps its size. No parameters; the paper reads MSAs as trainable spatial
smoothing, and a spec can put this fixed one where an MSA would go.
"""

import torch
import torch.nn.functional as F
from torch import nn

from archdsl.nn.blocks.tokens import MAP


class SmoothBlock(nn.Module):
    kind = "smooth"
    layout = MAP

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Pad right and bottom by one, then average every 2x2 window at stride 1.
        return F.avg_pool2d(F.pad(x, (0, 1, 0, 1)), kernel_size=2, stride=1)
