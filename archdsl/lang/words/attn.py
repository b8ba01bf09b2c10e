"""`attn(heads, window, shift, kernel, dim_head, qkv_bias)`: the transformer MSA block."""

from __future__ import annotations

from archdsl.errors import did_you_mean
from archdsl.ir import AnyBlock, Arch, AttnBlock, BlockShape, ConvBlock
from archdsl.lang.arguments import ArgumentReader, describe
from archdsl.lang.parser import BlockRef, Name
from archdsl.lang.problems import Problem, Site, size_text
from archdsl.lang.words.base import Lowered, Word
from archdsl.lang.words.units import linear, ln
from archdsl.lang.words.windows import attention_values, tiling_problems


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    """`attn(heads, window, shift=0, kernel=K, dim_head=D, qkv_bias=true)`: the transformer MSA."""
    spans = {"": ref.span}
    example = "`attn(3, global)`, `attn(3, 4, shift=2)` or `attn(3, kernel=5)`"
    # A placeholder for a broken one: global attention fits every map, so it adds no noise.
    fields: dict[str, int | bool | None] = {"heads": 1, "dim_head": 1}
    unset = True
    if ref.args is None:
        reader.error(ref.span, "`attn` needs heads and a window (or a kernel)", f"e.g. {example}")
        return Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=False)
    bound = reader.bind(ref.args, "attn", ("heads", "window", "shift", "kernel", "dim_head", "qkv_bias"))
    arg = reader.require(bound, "heads", "attn", ref.span, example)
    if arg is not None:
        spans["heads"] = arg.value.span
        fields["heads"] = reader.positive_int(arg.value, "heads") or 1
    if "window" in bound and "kernel" in bound:
        reader.error(
            bound["kernel"].span,
            "`attn` takes a window or a kernel, not both",
            "a window splits the map into tiles; a kernel is each token's own neighbourhood",
        )
    elif "window" in bound:
        value = bound["window"].value
        spans["window"] = value.span
        if isinstance(value, Name):
            if value.text != "global":
                hint = did_you_mean(value.text, ("global",)) or "a window is a number or `global`"
                reader.error(value.span, f"window must be a number or `global`, not {describe(value)}", hint)
        else:
            fields["window"] = reader.positive_int(value, "window")
    elif "kernel" in bound:
        spans["kernel"] = bound["kernel"].value.span
        fields["kernel"] = reader.positive_int(bound["kernel"].value, "kernel")
    elif not reader._bind_failed:
        reader.error(ref.span, "`attn` needs a window or a kernel", f"e.g. {example}")
    if "shift" in bound:
        spans["shift"] = bound["shift"].value.span
        shift = reader.whole_number(bound["shift"].value, "shift")
        fields["shift"] = shift or 0
    if "dim_head" in bound:
        spans["dim_head"] = bound["dim_head"].value.span
        fields["dim_head"] = reader.positive_int(bound["dim_head"].value, "dim_head") or 1
        unset = False
    if "qkv_bias" in bound:
        spans["qkv_bias"] = bound["qkv_bias"].value.span
        qkv_bias = reader.boolean(bound["qkv_bias"].value, "qkv_bias")
        fields["qkv_bias"] = True if qkv_bias is None else qkv_bias
    fields = {key: value for key, value in fields.items() if value is not None}
    return Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=unset)


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    assert isinstance(block, AttnBlock)
    if block.kernel is not None:
        args = [str(block.heads), f"kernel={block.kernel}"]
    else:
        args = [str(block.heads), "global" if block.window is None else str(block.window)]
    if block.shift:
        args.append(f"shift={block.shift}")
    if channels is None or channels % block.heads or channels // block.heads != block.dim_head:
        args.append(f"dim_head={block.dim_head}")  # not the default channels // heads
    if not block.qkv_bias:
        args.append("qkv_bias=false")
    return f"attn({', '.join(args)})"


def count(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    """(params, MACs) of a transformer MSA block (pre-norm, qkv, attention, proj)."""
    block = shape.block
    assert isinstance(block, AttnBlock)
    c = shape.in_channels
    inner = block.heads * block.dim_head
    height, wide = shape.out_size
    patches = height * wide
    tokens = patches + arch.prefix_tokens
    params = ln(c) + linear(c, 3 * inner, block.qkv_bias) + linear(inner, c)
    if arch.pos.kind == "relative":
        if block.kernel is not None:
            entries = block.kernel**2
        else:
            win_h, win_w = (block.window, block.window) if block.window is not None else (height, wide)
            entries = (2 * win_h - 1) * (2 * win_w - 1)
        params += entries * block.heads
    macs = tokens * (c * 3 * inner + inner * c)
    # QK^T and AV: heads x (queries x keys) x dim_head each. Windows attend within themselves;
    # global and local (masked) attention compute the whole tokens x tokens matrix.
    pairs = patches * block.window**2 if block.window is not None else tokens * tokens
    macs += 2 * block.heads * pairs * block.dim_head
    return params, macs


def check(site: Site) -> list[Problem]:
    """Its window tiles the map; a shift moves windows; a local kernel has a centre; the class token
    belongs to no window or neighbourhood."""
    block = site.shape.block
    assert isinstance(block, AttnBlock)
    return (
        tiling_problems(site, block.window)
        + _shift_problems(site, block)
        + _kernel_problems(site, block)
        + _class_token_problems(site, block)
    )


def _shift_problems(site: Site, block: AttnBlock) -> list[Problem]:
    if not block.shift:
        return []
    path = site.path + ("shift",)
    if block.window is None:
        return [
            Problem(
                path,
                "a shift moves windows, but this `attn` has none",
                "drop `shift`, or give a window: `attn(H, 4, shift=2)`",
            )
        ]
    if block.shift >= block.window:
        return [
            Problem(
                path,
                f"shift {block.shift} must be smaller than the window {block.window}",
                f"Swin shifts by half a window: shift={block.window // 2}",
            )
        ]
    size = site.shape.out_size
    if block.window == size[0] and block.window == size[1]:
        return [
            Problem(
                path,
                f"a shifted window on a map of one window: the {size_text(size)} map of stage "
                f"{site.stage.name} is a single {block.window}x{block.window} window",
                "drop `shift` here (timm's Swin silently does the same)",
            )
        ]
    return []


def _kernel_problems(site: Site, block: AttnBlock) -> list[Problem]:
    if block.kernel is None or block.kernel % 2:
        return []
    return [
        Problem(
            site.path + ("kernel",),
            f"kernel {block.kernel} has no centre: a local kernel is centred on its token",
            f"use an odd size: {block.kernel - 1} or {block.kernel + 1}",
        )
    ]


def _class_token_problems(site: Site, block: AttnBlock) -> list[Problem]:
    if not site.arch.class_token or (block.window is None and block.kernel is None):
        return []
    local = "window" if block.window is not None else "kernel"
    return [
        Problem(
            site.path + (local,),
            f"a class token with {'window' if local == 'window' else 'local'} attention: "
            f"the class token belongs to no {'window' if local == 'window' else 'neighbourhood'}",
            "use `attn(H, global)` with `head class`, or `head mean` with local attention",
        )
    ]


def activations(arch: Arch, shape: BlockShape) -> int:
    """Its attention maps: each query sees its window, its neighbourhood (`kernel`) or the whole map."""
    block = shape.block
    assert isinstance(block, AttnBlock)
    return attention_values(block.heads, block.kernel or block.window, shape.out_size)


WORD = Word("attn", lower, text, count, noun="an `attn` block", check=check, activations=activations)
