"""The AlterNet MSA block: non-overlapping window self-attention on a conv feature map.

BN -> GELU -> 1x1 conv (in -> width) -> BN -> window attention -> DropPath -> + input.
There is no MLP: the neighbouring conv blocks play that role.

Attention runs through `torch.nn.functional.scaled_dot_product_attention`, with the
relative-position bias passed as an additive float mask, so fused kernels are used where
the hardware has them. Fused kernels have no double backward: wrap Hessian work in
`math_attention()`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from timm.layers import DropPath, trunc_normal_
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from archdsl.ir import MSABlock
from archdsl.nn.blocks.tokens import MAP


@contextlib.contextmanager
def math_attention() -> Iterator[None]:
    """Force the plain-math SDPA kernel (differentiable twice, counted by FLOP counters)."""
    with sdpa_kernel(SDPBackend.MATH):
        yield


def relative_position_index(window: tuple[int, int]) -> torch.Tensor:
    """(n, n) indices into a flattened (2h-1) x (2w-1) table, n = h*w: the offset between two tokens."""
    h, w = window
    coords = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")).flatten(1)  # (2, n)
    offset = coords[:, None, :] - coords[:, :, None]  # (2, n, n): key position minus query position
    return (offset[0] + h - 1) * (2 * w - 1) + (offset[1] + w - 1)


class WindowAttention(nn.Module):
    """Multi-head self-attention inside non-overlapping windows of a (B, C, H, W) map.

    q from a 1x1 conv and k, v from one 1x1 conv, both without bias; `heads x dim_head`
    inner dims; output projection 1x1 conv (heads*dim_head -> out_channels) with bias.
    One relative-position bias table of (2h-1)(2w-1) entries is shared by all heads.
    `window` is (h, w); global attention is simply a window the size of the map.
    """

    rel_pos_index: torch.Tensor  # a buffer

    def __init__(self, in_channels: int, out_channels: int, *, heads: int, dim_head: int, window: tuple[int, int]):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head, self.window = heads, dim_head, window
        self.q = nn.Conv2d(in_channels, inner, 1, bias=False)
        self.kv = nn.Conv2d(in_channels, 2 * inner, 1, bias=False)
        self.proj = nn.Conv2d(inner, out_channels, 1)
        self.rel_pos_bias = nn.Parameter(torch.zeros((2 * window[0] - 1) * (2 * window[1] - 1)))
        # Derived from `window`, so not part of the state dict.
        self.register_buffer("rel_pos_index", relative_position_index(window), persistent=False)

    def _to_windows(self, t: torch.Tensor) -> torch.Tensor:
        """(B, heads*d, H, W) -> (B * windows, heads, tokens per window, d)."""
        b, _, height, width = t.shape
        wh, ww = self.window
        t = t.reshape(b, self.heads, self.dim_head, height // wh, wh, width // ww, ww)
        t = t.permute(0, 3, 5, 1, 4, 6, 2)  # B, nH, nW, heads, wh, ww, d
        return t.reshape(-1, self.heads, wh * ww, self.dim_head)

    def _from_windows(self, t: torch.Tensor, b: int, height: int, width: int) -> torch.Tensor:
        wh, ww = self.window
        t = t.reshape(b, height // wh, width // ww, self.heads, wh, ww, self.dim_head)
        t = t.permute(0, 3, 6, 1, 4, 2, 5)  # B, heads, d, nH, wh, nW, ww
        return t.reshape(b, self.heads * self.dim_head, height, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, height, width = x.shape
        if height % self.window[0] or width % self.window[1]:
            # Only reachable by feeding a built model another input size than its spec's.
            raise ValueError(f"a {height}x{width} map cannot be split into {self.window[0]}x{self.window[1]} windows")
        q = self._to_windows(self.q(x))
        k, v = (self._to_windows(t) for t in self.kv(x).chunk(2, dim=1))
        n = self.window[0] * self.window[1]
        bias = self.rel_pos_bias[self.rel_pos_index.reshape(-1)].reshape(n, n).to(q.dtype)
        # The default scale of SDPA is dim_head^-0.5, as in the reference.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.proj(self._from_windows(out, b, height, width))


class AlterMSABlock(nn.Module):
    """BN -> GELU -> 1x1 conv (in -> width) -> BN -> window attention -> DropPath -> + input.

    An MSA block never changes resolution. Where its input and output channels differ
    (not in the reference layouts, possible in custom ones, e.g. an MSA right after the
    stem), the shortcut is a 1x1 conv on the activated input, like the conv blocks'
    projection shortcut (and like the reference implementation).
    """

    kind = "msa"
    layout = MAP

    def __init__(
        self,
        block: MSABlock,
        in_channels: int,
        width: int,
        out_channels: int,
        *,
        map_size: tuple[int, int],
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        window = (block.window, block.window) if block.window is not None else map_size
        self.norm1 = nn.BatchNorm2d(in_channels)
        self.act = nn.GELU()
        self.shortcut = nn.Conv2d(in_channels, out_channels, 1, bias=False) if in_channels != out_channels else None
        self.conv = nn.Conv2d(in_channels, width, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(width)
        self.attn = WindowAttention(width, out_channels, heads=block.heads, dim_head=block.dim_head, window=window)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.norm1(x))
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.attn(self.norm2(self.conv(out)))
        return self.drop_path(out) + skip

    def init_weights(self) -> None:
        """Transformer-style init for the attention projections and the bias table."""
        for module in (self.attn.q, self.attn.kv, self.attn.proj):
            trunc_normal_(module.weight, std=0.02)
        if self.attn.proj.bias is not None:
            nn.init.zeros_(self.attn.proj.bias)
        trunc_normal_(self.attn.rel_pos_bias, std=0.02)
