"""timm state dicts of ViT, PiT and Swin -> archdsl state dicts.

The paper's ViT-Ti, PiT-Ti and Swin-Ti checkpoints are timm models
(`VisionTransformer`, `PoolingVisionTransformer`, `SwinTransformer`). archdsl writes each of
timm's blocks as two blocks (an `attn` and an `mlp`), so block i of a timm stage becomes
blocks o + 2i and o + 2i + 1 of the archdsl stage (o = 1 when the stage starts with `merge` or
`pool`, timm's `downsample` and `pool`):

    timm                                   archdsl
    patch_embed.proj / .conv, .norm        stem.proj, stem.norm
    cls_token, pos_embed                   stem.cls_token, stem.pos_embed (PiT's (1, C, H, W) flattened)
    blocks.i / transformers.j.blocks.i /   stages.<stage>.<o + 2i>   norm1 -> norm, attn -> attn
      layers.j.blocks.i                    stages.<stage>.<o + 2i + 1>  norm2 -> norm, mlp -> mlp
    transformers.j.pool, layers.j.downsample   stages.<stage>.0
    norm, head (Swin: head.fc)             head.norm, head.fc

Older timm versions named some of this differently (Swin downsampled at the end of a stage
and had a bare `head`, PiT had `pools.j`, ViT a `pre_logits` layer, buffers were saved):
timm's own `checkpoint_filter_fn` of each family renames those first. They need a timm model
to read target shapes from; it is built from the spec on the meta device (no memory), which
also checks that the spec is the timm model the weights belong to.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

import torch

from archdsl.errors import UserError
from archdsl.ir import Arch, AttnBlock, MergeBlock, MLPBlock, PatchStem, PoolBlock, Stage, block_path, block_shapes
from archdsl.nn.convert import SourceFormat, StateDict

FAMILIES = ("vit", "pit", "swin")


def family_of(keys: Collection[str]) -> str | None:
    """Which timm family a state dict's keys come from (old or new key names), or None."""
    if not any(key.startswith("patch_embed.") for key in keys):
        return None
    if any(key.startswith("layers.") for key in keys):
        return "swin"
    if any(key.startswith(("transformers.", "pools.")) for key in keys):
        return "pit"
    if any(key.startswith("blocks.") for key in keys):
        return "vit"
    return None


# --- the timm model a spec is ------------------------------------------------------------


class NotTimmLayout(UserError):
    pass


def _stage_units(arch: Arch, stage: Stage, family: str) -> tuple[bool, list[AttnBlock], MLPBlock]:
    """(starts with a downsampling block, its attn blocks, its mlp) of a `[down] [attn mlp]*n` stage."""
    blocks = list(stage.blocks)
    down = bool(blocks) and isinstance(blocks[0], (MergeBlock, PoolBlock))
    pairs = blocks[1:] if down else blocks
    attns = [b for b in pairs[0::2] if isinstance(b, AttnBlock)]
    mlps = [b for b in pairs[1::2] if isinstance(b, MLPBlock)]
    if not attns or len(attns) != len(pairs[0::2]) or len(mlps) != len(pairs[1::2]) or len(attns) != len(mlps):
        raise NotTimmLayout(
            f"stage {stage.name} of {arch.name} is not a timm {family} stage",
            hint="a timm stage reads `[attn mlp]*n` (after `merge` or `pool` past the first stage), one mlp ratio",
        )
    if len({b.ratio for b in mlps}) != 1:
        raise NotTimmLayout(
            f"stage {stage.name} of {arch.name} is not a timm {family} stage",
            hint="a timm stage reads `[attn mlp]*n` (after `merge` or `pool` past the first stage), one mlp ratio",
        )
    return down, attns, mlps[0]


def _uniform(values: list, what: str, arch: Arch, family: str) -> Any:
    if len(set(values)) != 1:
        found = ", ".join(sorted({str(value) for value in values}))
        raise NotTimmLayout(f"{arch.name}: timm's {family} has one {what} per stage, the spec has {found}")
    return values[0]


def _need(condition: bool, arch: Arch, family: str, what: str) -> None:
    if not condition:
        raise NotTimmLayout(f"{arch.name} is not a timm {family}: {what}")


def timm_kwargs(arch: Arch, family: str) -> dict[str, Any]:
    """The constructor arguments of the timm model that computes the same function as `arch`."""
    stem = arch.stem
    _need(isinstance(stem, PatchStem), arch, family, "it has no patch stem")
    assert isinstance(stem, PatchStem)
    units = [_stage_units(arch, stage, family) for stage in arch.stages]
    _need(bool(units) and not units[0][0], arch, family, "its first stage starts with a downsampling block")
    ratio = _uniform([mlp.ratio for _, _, mlp in units], "mlp ratio", arch, family)
    common = dict(in_chans=arch.input.channels, num_classes=arch.classes, mlp_ratio=ratio)
    if family == "vit":
        _need(len(units) == 1, arch, family, "ViT has one stage")
        _need(stem.stride == stem.size, arch, family, "ViT's patches do not overlap")
        _need(arch.pos.kind != "relative", arch, family, "ViT has no relative positions")
        _need(arch.norm.eps == 1e-6, arch, family, "timm's ViT LayerNorm has eps 1e-6")
        attns = units[0][1]
        _need(all(a.window is None and a.kernel is None for a in attns), arch, family, "its attention is global")
        heads = _uniform([a.heads for a in attns], "head count", arch, family)
        _need(all(a.dim_head * heads == stem.channels for a in attns), arch, family, "dim_head is channels // heads")
        return dict(
            common,
            img_size=(arch.input.height, arch.input.width),
            patch_size=stem.size,
            embed_dim=stem.channels,
            depth=len(attns),
            num_heads=heads,
            qkv_bias=_uniform([a.qkv_bias for a in attns], "qkv bias", arch, family),
            class_token=arch.class_token,
            global_pool="token" if arch.class_token else "avg",
            fc_norm=False,  # LayerNorm before pooling, as archdsl's head
            pos_embed="learn" if arch.pos.kind == "absolute" else "none",
            no_embed_class=arch.class_token and not arch.pos.class_token,
        )
    if family == "pit":
        _need(arch.class_token and arch.pos.kind == "absolute", arch, family, "PiT has a class token and positions")
        _need(not arch.pos.class_token, arch, family, "PiT's class token has no position: `pos absolute(class=false)`")
        _need(arch.norm.eps == 1e-6, arch, family, "timm's PiT LayerNorm has eps 1e-6")
        _need(arch.input.height == arch.input.width, arch, family, "timm's PiT takes square images")
        _need(all(down for down, _, _ in units[1:]), arch, family, "every later stage starts with `pool`")
        heads, base_dims = [], []
        for stage, (_, attns, _) in zip(arch.stages, units, strict=True):
            _need(all(a.window is None and a.kernel is None and a.qkv_bias for a in attns), arch, family, "global attn")
            heads.append(_uniform([a.heads for a in attns], "head count", arch, family))
            base_dims.append(_uniform([a.dim_head for a in attns], "dim_head", arch, family))
            _need(heads[-1] * base_dims[-1] == stage.width, arch, family, "width = heads x dim_head")
        return dict(
            common,
            img_size=arch.input.height,
            patch_size=stem.size,
            stride=stem.stride,
            base_dims=base_dims,
            depth=[len(attns) for _, attns, _ in units],
            heads=heads,
        )
    _need(family == "swin", arch, family, "unknown family")
    _need(stem.stride == stem.size and stem.norm, arch, family, "Swin's patch stem is LayerNorm-ed: `norm=true`")
    _need(not arch.class_token and arch.pos.kind == "relative", arch, family, "Swin: `head mean` and `pos relative`")
    _need(arch.norm.eps == 1e-5, arch, family, "timm's Swin LayerNorm has eps 1e-5: `norm = layernorm(eps=1e-5)`")
    _need(all(down for down, _, _ in units[1:]), arch, family, "every later stage starts with `merge`")
    widths = [stage.width for stage in arch.stages]
    _need(widths == [widths[0] * 2**i for i in range(len(widths))], arch, family, "its widths double stage by stage")
    heads, windows, head_dims = [], [], []
    sizes = {(shape.stage, shape.index): shape.out_size for shape in block_shapes(arch)}
    for stage, (down, attns, _) in zip(arch.stages, units, strict=True):
        heads.append(_uniform([a.heads for a in attns], "head count", arch, family))
        windows.append(_uniform([a.window for a in attns], "window", arch, family))
        head_dims.append(_uniform([a.dim_head for a in attns], "dim_head", arch, family))
        window = windows[-1]
        _need(window is not None, arch, family, f"stage {stage.name} has no windows")
        # timm shifts every second block by half a window, except where the map is one window.
        size = sizes[(stage.name, 1 if down else 0)]
        shifts = [window // 2 if i % 2 and max(size) > window else 0 for i in range(len(attns))]
        _need([a.shift for a in attns] == shifts, arch, family, f"stage {stage.name}'s shifts are {shifts}")
    return dict(
        common,
        img_size=(arch.input.height, arch.input.width),
        patch_size=stem.size,
        embed_dim=arch.stages[0].width,
        depths=tuple(len(attns) for _, attns, _ in units),
        num_heads=tuple(heads),
        head_dim=tuple(head_dims),
        window_size=tuple((window, window) for window in windows),
        qkv_bias=_uniform([a.qkv_bias for _, attns, _ in units for a in attns], "qkv bias", arch, family),
    )


def timm_model(arch: Arch, family: str, device: str | torch.device = "meta") -> torch.nn.Module:
    """The timm model `arch` is, on `device` (meta: shapes without memory)."""
    from timm.models.pit import PoolingVisionTransformer
    from timm.models.swin_transformer import SwinTransformer
    from timm.models.vision_transformer import VisionTransformer

    cls = {"vit": VisionTransformer, "pit": PoolingVisionTransformer, "swin": SwinTransformer}[family]
    with torch.device(device):
        return cls(**timm_kwargs(arch, family))


# --- key names ------------------------------------------------------------------------------

_BLOCK = re.compile(r"(?P<half>norm1|attn|norm2|mlp)\.(?P<rest>.+)")


def _block_key(stage: Stage, down: bool, index: int, rest: str) -> str | None:
    match = _BLOCK.fullmatch(rest)
    if match is None:
        return None
    half = match["half"]
    position = (1 if down else 0) + 2 * index + (1 if half in ("norm2", "mlp") else 0)
    module = "norm" if half in ("norm1", "norm2") else half
    return f"{block_path(stage.name, position)}.{module}.{match['rest']}"


_STEM = {"patch_embed.proj.": "stem.proj.", "patch_embed.conv.": "stem.proj.", "patch_embed.norm.": "stem.norm."}
_TOP = {"cls_token": "stem.cls_token", "pos_embed": "stem.pos_embed"}
_STAGE_BLOCK = re.compile(
    r"(?:blocks|transformers\.(?P<t>\d+)\.blocks|layers\.(?P<l>\d+)\.blocks)\.(?P<i>\d+)\.(?P<rest>.+)"
)
_DOWN = re.compile(r"(?:transformers\.(?P<t>\d+)\.pool|layers\.(?P<l>\d+)\.downsample)\.(?P<rest>.+)")


def archdsl_key(arch: Arch, key: str) -> str | None:
    """The archdsl name of a (current timm) key, or None if it has none in this spec."""
    if key in _TOP:
        return _TOP[key]
    for prefix, target in _STEM.items():
        if key.startswith(prefix):
            return target + key[len(prefix) :]
    for prefix, target in (("norm.", "head.norm."), ("head.fc.", "head.fc."), ("head.", "head.fc.")):
        if key.startswith(prefix) and not key.startswith("head_"):
            return target + key[len(prefix) :]
    match = _STAGE_BLOCK.fullmatch(key)
    if match is not None:
        j = int(match["t"] or match["l"] or 0)
        if j >= len(arch.stages):
            return None
        stage = arch.stages[j]
        down = bool(stage.blocks) and isinstance(stage.blocks[0], (MergeBlock, PoolBlock))
        return _block_key(stage, down, int(match["i"]), match["rest"])
    match = _DOWN.fullmatch(key)
    if match is not None:
        j = int(match["t"] or match["l"])
        return f"{block_path(arch.stages[j].name, 0)}.{match['rest']}" if j < len(arch.stages) else None
    return None


def timm_to_archdsl(arch: Arch, state_dict: Mapping[str, torch.Tensor]) -> StateDict:
    """The state dict of `build(arch)` from a timm ViT, PiT or Swin state dict of the same model.

    Keys timm's filters drop (saved buffers) are dropped; keys with no archdsl name are kept
    as they are, for the caller to report. Raises `UserError` if the state dict is none of the
    three families or the spec is not the timm model the weights belong to.
    """
    state = dict(state_dict)
    family = family_of(state)
    if family is None:
        raise UserError(
            "not a timm ViT, PiT or Swin state dict", hint="expected keys such as patch_embed.proj.weight, blocks.0..."
        )
    model = timm_model(arch, family)
    state = dict(_filter(family)(state, model))
    converted: StateDict = {}
    for key, tensor in state.items():
        target = archdsl_key(arch, key)
        if target == "stem.pos_embed" and tensor.ndim == 4:  # PiT keeps positions as a (1, C, H, W) map
            tensor = tensor.flatten(2).transpose(1, 2).contiguous()
        converted[target or key] = tensor
    return converted


def _filter(family: str) -> Any:
    import importlib

    module = {"vit": "vision_transformer", "pit": "pit"}.get(family, "swin_transformer")
    return importlib.import_module(f"timm.models.{module}").checkpoint_filter_fn


FORMATS = (
    SourceFormat(
        name="timm",
        description="a timm VisionTransformer, PoolingVisionTransformer or SwinTransformer state dict "
        "(the paper's ViT-Ti, PiT-Ti, Swin-Ti; current or older timm key names)",
        recognises=lambda keys: family_of(keys) is not None,
        convert=timm_to_archdsl,
    ),
)
