"""The transformer blocks: `attn` (pre-norm MSA) and `mlp` (pre-norm MLP), as two blocks.

timm's ViT/PiT `Block` and Swin's `SwinTransformerBlock` are one attention half and one MLP
half; here each half is its own block (`stages.<stage>.<index>`), so a spec, the analyses and
the search see MSAs and MLPs apart, as Park & Kim's figures do. Both halves read and write
token sequences (B, P + H*W, C) and keep C:

    attn:  x + DropPath(Attention(LayerNorm(x)))
    mlp:   x + DropPath(Mlp(LayerNorm(x)))       Mlp = Linear(C, rC) -> GELU -> Linear(rC, C)

The attention follows timm's (`timm.layers.Attention`, `timm.models.swin_transformer.
WindowAttention`) to the key names: one `qkv` Linear, scale dim_head^-0.5, `proj` Linear with
bias, and with relative positions a `relative_position_bias_table` of ((2h-1)(2w-1), heads)
indexed by timm's `get_relative_position_index`. Windows are cut and shifted as in Swin:
a cyclic roll by -shift, window_partition, attention with the -100 mask between regions the
roll brought together, window_reverse, roll back.
"""

import torch
import torch.nn.functional as F
from timm.layers import DropPath, LayerNorm, Mlp
from timm.models.swin_transformer import get_relative_position_index, window_partition, window_reverse
from torch import nn

from archdsl.ir import AttnBlock, MLPBlock
from archdsl.nn.blocks.tokens import TOKENS, TokenOutput

# Swin masks attention between regions that the cyclic shift made neighbours with -100, not
# -inf (exp(-100) is 4e-44): the same number keeps the function equal to timm's.
SHIFT_MASK = -100.0


def shift_mask(size: tuple[int, int], window: int, shift: int) -> torch.Tensor:
    """(windows, t, t) additive mask of Swin's shifted windows (0 within a region, -100 across)."""
    height, width = size
    regions = torch.zeros(1, height, width, 1)
    label = 0
    for rows in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
        for cols in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            regions[:, rows, cols, :] = label
            label += 1
    per_window = window_partition(regions, (window, window)).reshape(-1, window * window)
    differ = per_window.unsqueeze(1) != per_window.unsqueeze(2)
    return torch.zeros(differ.shape).masked_fill(differ, SHIFT_MASK)


def local_mask(size: tuple[int, int], kernel: int) -> torch.Tensor:
    """(t, t) additive mask: 0 where the key lies in the query's kernel x kernel neighbourhood, -inf elsewhere."""
    rows, cols = torch.meshgrid(torch.arange(size[0]), torch.arange(size[1]), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    reach = kernel // 2
    near = ((rows[:, None] - rows[None, :]).abs() <= reach) & ((cols[:, None] - cols[None, :]).abs() <= reach)
    return torch.zeros(near.shape).masked_fill(~near, float("-inf"))


def local_position_index(size: tuple[int, int], kernel: int) -> torch.Tensor:
    """(t, t) index into a kernel x kernel table of offsets (query minus key, as timm's); 0 outside the kernel."""
    rows, cols = torch.meshgrid(torch.arange(size[0]), torch.arange(size[1]), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    reach = kernel // 2
    dy = rows[:, None] - rows[None, :] + reach
    dx = cols[:, None] - cols[None, :] + reach
    inside = (dy >= 0) & (dy < kernel) & (dx >= 0) & (dx < kernel)
    return torch.where(inside, dy * kernel + dx, torch.zeros_like(dy))


class TokenAttention(nn.Module):
    """Multi-head self-attention over a token sequence: global, in (shifted) windows, or local.

    `size` is the patch map (H, W) behind the sequence, `prefix` the tokens before it (only
    global attention takes them). With `relative`, a learned bias per head and offset is added
    to the logits; its table spans a window (window attention), the whole map (global) or the
    kernel (local attention).
    """

    # Set in __init__ (buffers through register_buffer): declared for the type checker.
    mask: torch.Tensor | None
    relative_position_index: torch.Tensor
    relative_position_bias_table: nn.Parameter | None

    def __init__(
        self,
        channels: int,
        block: AttnBlock,
        *,
        size: tuple[int, int],
        prefix: int,
        relative: bool,
    ) -> None:
        super().__init__()
        inner = block.heads * block.dim_head
        self.heads, self.dim_head, self.size, self.prefix = block.heads, block.dim_head, size, prefix
        self.window = block.window
        self.shift = block.shift
        self.qkv = nn.Linear(channels, 3 * inner, bias=block.qkv_bias)
        self.proj = nn.Linear(inner, channels)
        span = (block.window, block.window) if block.window is not None else size
        # Buffers derived from the IR are rebuilt with the model, so they stay out of the state dict.
        if block.kernel is not None:
            self.register_buffer("mask", local_mask(size, block.kernel), persistent=False)
            index, entries = local_position_index(size, block.kernel), block.kernel**2
        else:
            mask = None
            if block.shift:
                assert block.window is not None  # the checks allow a shift only inside windows
                mask = shift_mask(size, block.window, block.shift)
            self.register_buffer("mask", mask, persistent=False)
            index, entries = get_relative_position_index(*span), (2 * span[0] - 1) * (2 * span[1] - 1)
        if relative:
            self.relative_position_bias_table = nn.Parameter(torch.zeros(entries, block.heads))
            self.register_buffer("relative_position_index", index, persistent=False)
        else:
            self.relative_position_bias_table = None

    def _logit_bias(self, windows: int, dtype: torch.dtype) -> torch.Tensor | None:
        """The additive attention mask: relative bias (1, heads, t, t) plus the shift or local mask."""
        # Optional attributes read into locals first: TorchScript narrows `is not None` on locals only.
        bias: torch.Tensor | None = None
        relative, stored_mask = self.relative_position_bias_table, self.mask
        # The index buffer exists with the table only (`hasattr` is settled when TorchScript compiles).
        if relative is not None and hasattr(self, "relative_position_index"):
            t = self.relative_position_index.shape[0]
            table = relative[self.relative_position_index.reshape(-1)]
            bias = table.reshape(t, t, self.heads).permute(2, 0, 1).unsqueeze(0)
        if stored_mask is not None:
            mask = stored_mask.to(dtype)
            if self.shift:  # one mask per window (built so at init): repeated over the batch as windows are
                mask = mask.unsqueeze(1).repeat(windows // mask.shape[0], 1, 1, 1)
            bias = mask if bias is None else bias + mask
        return None if bias is None else bias.to(dtype)

    def _attend(self, x: torch.Tensor) -> torch.Tensor:
        """(B', t, C) -> (B', t, C): attention within each of the B' sequences."""
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, self.dim_head).permute(2, 0, 3, 1, 4).unbind(0)
        # SDPA's default scale is dim_head^-0.5, as timm's.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self._logit_bias(b, q.dtype))
        return self.proj(out.transpose(1, 2).reshape(b, t, self.heads * self.dim_head))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.window is None:
            return self._attend(x)
        b, _, channels = x.shape
        height, width = self.size
        window = (self.window, self.window)
        x = x.reshape(b, height, width, channels)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        windows = window_partition(x, window).reshape(-1, self.window * self.window, channels)
        x = window_reverse(self._attend(windows).reshape(-1, window[0], window[1], channels), window, height, width)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        return x.reshape(b, height * width, channels)


class _PreNormResidual(TokenOutput, nn.Module):
    """x + DropPath(branch(LayerNorm(x))) on tokens: what `attn` and `mlp` share."""

    layout = TOKENS

    def __init__(self, channels: int, *, size: tuple[int, int], prefix: int, eps: float, drop_path: float) -> None:
        super().__init__()
        self.out_size, self.prefix = size, prefix
        self.norm = LayerNorm(channels, eps=eps)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop_path(self.branch(self.norm(x)))


class TransformerAttnBlock(_PreNormResidual):
    """`attn`: x + DropPath(Attention(LayerNorm(x))), on tokens; keeps the channels."""

    kind = "attn"

    def __init__(
        self,
        block: AttnBlock,
        channels: int,
        *,
        size: tuple[int, int],
        prefix: int,
        relative: bool,
        eps: float,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__(channels, size=size, prefix=prefix, eps=eps, drop_path=drop_path)
        self.attn = TokenAttention(channels, block, size=size, prefix=prefix, relative=relative)

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x)


class TransformerMLPBlock(_PreNormResidual):
    """`mlp`: x + DropPath(Mlp(LayerNorm(x))), on tokens (the class token too); keeps the channels."""

    kind = "mlp"

    def __init__(
        self,
        block: MLPBlock,
        channels: int,
        *,
        size: tuple[int, int],
        prefix: int,
        eps: float,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__(channels, size=size, prefix=prefix, eps=eps, drop_path=drop_path)
        self.mlp = Mlp(in_features=channels, hidden_features=channels * block.ratio, act_layer=nn.GELU)

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)
