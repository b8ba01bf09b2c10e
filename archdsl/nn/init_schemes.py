"""A new model's weights, drawn as the spec's `init` setting says (`archdsl.ir.INIT_SCHEMES`).

`torch`: every conv, Linear and norm as PyTorch's constructors draw them (`reset_parameters()`):
weights `kaiming_uniform_(a=sqrt(5))`, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases
U(-1/sqrt(fan_in), 1/sqrt(fan_in)), norms weight 1 and bias 0. The reference implementation of
AlterNet and its ResNets (xxxnell/how-do-vits-work) has no init of its own, so its models start
so; timm's PiT too (it sets only its position embedding and class token). The learned position
terms are drawn as their origin draws them: the AlterNet MSA's relative-position table
`randn * 0.02` (a plain normal, as the reference), PiT's position embedding and class token
`trunc_normal_(std=0.02)` (timm), a transformer `attn`'s relative table `trunc_normal_(std=0.02)`
(timm's Swin).

`timm`: what archdsl drew for every spec before `init` existed, and what timm's ViT and Swin
draw: Linear weights `trunc_normal_(std=0.02)` with zero biases, position embeddings and
relative tables `trunc_normal_(std=0.02)`, the class token normal(1e-6), patch and pooling convs
PyTorch's default; other convs as timm's ResNets, `kaiming_normal_(mode="fan_out",
nonlinearity="relu")` with zero biases, except the AlterNet MSA's q, kv and output projections
(1x1 convs, but attention projections), which are drawn as Linear weights. BatchNorm 1/0.

timm's `trunc_normal_` cuts at -2 and 2 (absolute), a hundred standard deviations of 0.02: its
draws are a normal(0, 0.02) in all but name.
"""

from __future__ import annotations

from timm.layers import trunc_normal_
from torch import nn

from archdsl.ir import InitScheme
from archdsl.nn.blocks.attention import WindowAttention
from archdsl.nn.blocks.downsample import PoolBlock
from archdsl.nn.blocks.layers import PatchEmbedding
from archdsl.nn.blocks.transformer import TokenAttention

# The standard deviation of every learned position term and of timm's Linear weights.
STD = 0.02
# The layers every scheme draws by the same rule wherever they sit.
LAYERS = (nn.Conv2d, nn.Linear, nn.BatchNorm2d, nn.LayerNorm)


def initialise(model: nn.Module, scheme: InitScheme) -> None:
    """Draw all of `model`'s weights afresh by `scheme`: the layers first, then what their
    origins draw otherwise (position terms, attention projections), both in model order."""
    for module in model.modules():
        if isinstance(module, LAYERS):
            init_layer(module, scheme)
    for module in model.modules():
        if isinstance(module, PatchEmbedding):
            _patch_embedding(module, scheme)
        elif isinstance(module, WindowAttention):
            _alter_attention(module, scheme)
        elif isinstance(module, TokenAttention) and module.relative_position_bias_table is not None:
            trunc_normal_(module.relative_position_bias_table, std=STD)
        elif isinstance(module, PoolBlock) and scheme == "timm":
            module.conv.reset_parameters()  # PyTorch's default, as timm's PiT


def init_layer(module: nn.Module, scheme: InitScheme) -> None:
    """One conv, Linear or norm layer (also a new classifier, `ArchNet.reset_classifier`)."""
    if scheme == "torch" or isinstance(module, nn.LayerNorm):
        module.reset_parameters()  # type: ignore[operator]
        return
    if isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=STD)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _patch_embedding(stem: PatchEmbedding, scheme: InitScheme) -> None:
    if scheme == "timm":
        stem.proj.reset_parameters()  # ViT's and Swin's patch conv: PyTorch's default
    if stem.pos_embed is not None:
        trunc_normal_(stem.pos_embed, std=STD)
    if stem.cls_token is not None:
        if scheme == "timm":
            nn.init.normal_(stem.cls_token, std=1e-6)  # timm's ViT
        else:
            trunc_normal_(stem.cls_token, std=STD)  # timm's PiT


def _alter_attention(attn: WindowAttention, scheme: InitScheme) -> None:
    if scheme == "torch":
        nn.init.normal_(attn.rel_pos_bias, std=STD)  # the reference's `randn * 0.02`
        return
    for projection in (attn.q, attn.kv, attn.proj):
        trunc_normal_(projection.weight, std=STD)
    if attn.proj.bias is not None:
        nn.init.zeros_(attn.proj.bias)
    trunc_normal_(attn.rel_pos_bias, std=STD)
