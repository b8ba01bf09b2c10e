"""The AlterNet MSA block: non-overlapping window self-attention on a conv feature map.

BN -> GELU -> 1x1 conv (in -> width) -> BN -> window attention -> DropPath -> + input.
There is no MLP: the neighbouring conv blocks play that role.

The attention itself is `attention()`: in inference and on GPUs torch's
`scaled_dot_product_attention` (fused kernels where the hardware has them), in training on the
CPU an explicit baddbmm -> softmax -> bmm.
SDPA cannot give the learned relative-position bias a gradient from its fused kernels, so with
a bias that needs one it takes its math kernel, which on the CPU scales q and k apart, checks
the mask for -inf rows and copies the q, k and v it was given; measured on a 2-core CPU
(benchmarks/attention.py) the explicit form trains MSA blocks markedly faster. Both are
differentiable twice; SDPA's fused kernels are not: wrap Hessian work in `math_attention()`.
An MSA whose heads are wider than its channels (an MSA in a narrow first stage) trains with the
products of the same function in another order (`WindowAttention._narrow_attention`).
"""

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from timm.layers import DropPath
from timm.models import register_notrace_function
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


# A branch on autograd's state: one node in torch.fx graphs (see `in_memory_format_of`).
@register_notrace_function
def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float | None = None
) -> torch.Tensor:
    """softmax(q k^T * scale + bias) v for (B, heads, n, d) q and k and (B, heads, n, e) v (any
    strides); `bias` broadcasts to (B, heads, n, n); `scale` defaults to d^-0.5. Returns (B, heads, n, e).

    Without a bias that needs a gradient, and on devices other than the CPU, torch's SDPA (its
    fused CPU kernel is as fast as this in inference and needs no (B*heads, n, n) bias; on CUDA
    its memory-efficient kernel gives the bias its gradient). With one, on the CPU SDPA falls
    back to its math kernel; this form instead adds the bias inside the first batched product
    (baddbmm) and, with scale 1 (the caller folded it into q's weights), multiplies nothing apart.
    """
    if bias is None or not (q.device.type == "cpu" and torch.is_grad_enabled() and bias.requires_grad):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    b, heads, n, dim_head = q.shape
    scale = dim_head**-0.5 if scale is None else scale
    # Views where the layout allows (one head, or a bias shared by the batch and the heads).
    q3, k3, v3 = (t.reshape(b * heads, n, t.shape[-1]) for t in (q, k, v))
    bias3 = bias.expand(b, heads, n, n).reshape(b * heads, n, n)
    weights = torch.baddbmm(bias3, q3, k3.transpose(1, 2), alpha=scale).softmax(dim=-1)
    return torch.bmm(weights, v3).view(b, heads, n, v.shape[-1])


# A branch on the memory format: one node in torch.fx graphs (a public name: fx wraps no `_name`).
@register_notrace_function
def in_memory_format_of(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """`out` channels_last if `x` is, else contiguous."""
    return out if x.is_contiguous(memory_format=torch.channels_last) else out.contiguous()


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
        # Heads wider than the block's channels (an MSA in a narrow early stage: 16 channels, heads
        # of 64) train through `_narrow_attention`, which never makes the wide q, k and v: whenever
        # its order takes fewer multiply-adds per token and head than the reference's.
        n, c, out = window[0] * window[1], in_channels, out_channels
        self.narrow = c * c + c * out + n * (c + out) < dim_head * (3 * c + out + 2 * n)
        # Derived from `window`, so not part of the state dict.
        self.register_buffer("rel_pos_index", relative_position_index(window), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, height, width = x.shape
        wh, ww = self.window
        # The spec's checks make the windows tile the map; no check here keeps forward traceable.
        nh, nw, n = height // wh, width // ww, wh * ww
        # The map as tokens, cut into windows on its `c` input channels (fewer than q, k, v's
        # 3 x heads x dim_head): (B*nh*nw, n, c), one copy; for a global window (nh = nw = 1) on a
        # channels_last map a view.
        tokens = x.permute(0, 2, 3, 1).reshape(b, nh, wh, nw, ww, c).transpose(2, 3).reshape(-1, n, c)
        bias = self.rel_pos_bias[self.rel_pos_index.reshape(-1)].reshape(n, n).to(tokens.dtype)
        # By the mode, not by autograd's state: torch.fx bakes a branch in when it traces, and a
        # model traced in eval mode must compute what it computes in eval mode.
        if self.narrow and self.training:
            out = self._narrow_attention(tokens, bias)
        else:
            out = self._wide_attention(tokens, bias)
        # Windows back into the map: the second and last copy; channels_last like the windows.
        out = out.reshape(b, nh, nw, wh, ww, -1).transpose(2, 3)
        out = out.reshape(b, height, width, -1).permute(0, 3, 1, 2)
        return in_memory_format_of(out, x)

    def _wide_attention(self, tokens: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """(windows, n, c) tokens -> (windows, n, out): q, k, v, attention, projection, as the reference."""
        n = tokens.shape[1]
        # The 1x1 convs as matrix products on the tokens (the state dict keeps `q` and `kv`): q, k and
        # v come out contiguous, with no split or stack whose backward copies them. The scale
        # dim_head^-0.5 of the reference multiplies q's weights (heads*dim_head x c numbers), not q.
        q = F.linear(tokens, self.q.weight.flatten(1) * self.dim_head**-0.5)
        k_weight, v_weight = self.kv.weight.flatten(1).chunk(2)  # the reference's `k, v = kv.chunk(2)`
        k, v = F.linear(tokens, k_weight), F.linear(tokens, v_weight)
        q, k, v = (t.view(-1, n, self.heads, self.dim_head).transpose(1, 2) for t in (q, k, v))
        out = attention(q, k, v, bias, scale=1.0)  # (windows, heads, n, dim_head)
        out = out.transpose(1, 2).reshape(-1, n, self.heads * self.dim_head)
        return F.linear(out, self.proj.weight.flatten(1), self.proj.bias)

    def _narrow_attention(self, tokens: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The same function as `_wide_attention`, its products taken in another order: for heads
        wider than the channels far fewer operations and smaller tensors (`self.narrow` compares:
        c^2 + c*out + n(c + out) multiply-adds per token and head here, dim_head(3c + out + 2n) there).

        Per head h, q_h k_h^T = x (Wq_h^T Wk_h) x^T and proj(attention_h v_h) = attention_h x (Wv_h^T
        Wp_h^T): two (c, c) and (c, out) matrices made from the weights replace the (n, dim_head) q,
        k and v, and the projection. Used in training mode; in eval mode (inference, Hessians,
        FLOP counts) the block keeps the reference's order.
        """
        heads, dim_head, n, c = self.heads, self.dim_head, tokens.shape[1], tokens.shape[2]
        c_out = self.proj.out_channels
        w_q = self.q.weight.view(heads, dim_head, c)
        w_k, w_v = self.kv.weight.view(2, heads, dim_head, c).unbind(0)
        w_p = self.proj.weight.view(c_out, heads, dim_head).permute(1, 2, 0)  # (heads, dim_head, out)
        scores = w_q.transpose(1, 2) @ w_k * dim_head**-0.5  # (heads, c, c)
        values = w_v.transpose(1, 2) @ w_p  # (heads, c, out)
        q = F.linear(tokens, scores.transpose(1, 2).reshape(heads * c, c)).view(-1, n, heads, c).transpose(1, 2)
        v = F.linear(tokens, values.transpose(1, 2).reshape(heads * c_out, c)).view(-1, n, heads, c_out)
        k = tokens.unsqueeze(1).expand(-1, heads, n, c)
        out = attention(q, k, v.transpose(1, 2), bias, scale=1.0).sum(dim=1)  # (windows, n, out)
        proj_bias = self.proj.bias  # a local: TorchScript narrows `is not None` on locals only
        return out + proj_bias if proj_bias is not None else out


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

    def conv_norm_pairs(self) -> list[tuple[str, str]]:
        """(conv, norm2): the BN before the attention reads only that conv (foldable in eval mode)."""
        return [("conv", "norm2")]
