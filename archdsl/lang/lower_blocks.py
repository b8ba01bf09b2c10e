"""Lowering one block of a stage body: the built-in words and the registered kinds (`archdsl.kinds`)."""

from __future__ import annotations

from dataclasses import dataclass

from archdsl import kinds
from archdsl.errors import did_you_mean
from archdsl.ir import AnyBlock, AttnBlock, ConvBlock, ExtBlock, MergeBlock, MLPBlock, MSABlock, PoolBlock, SmoothBlock
from archdsl.lang.arguments import ArgumentReader, describe
from archdsl.lang.diagnostics import Span
from archdsl.lang.lower_settings import CONV_VARIANTS, conv_variant
from archdsl.lang.parser import BlockRef, Name, Value

BLOCK_KINDS = kinds.BUILTIN_KINDS
# Blocks without arguments: what each one is, for the "takes no arguments" hint.
PLAIN_BLOCKS = {
    "merge": "Swin's patch merging",
    "pool": "PiT's pooling",
    "smooth": "a fixed 2x2 blur",
}


@dataclass
class Lowered:
    """A block with the spans its IR fields came from (keys: "" for the block, then field names)."""

    block: AnyBlock
    spans: dict[str, Span]
    # An `attn` written without `dim_head`: it becomes channels // heads once shapes are known.
    dim_head_unset: bool = False


class BlockLowering(ArgumentReader):
    """The `lower_*_block` of each block word; `lower_block` picks one by the word."""

    def no_arguments(self, ref: BlockRef) -> None:
        if ref.args:
            what = PLAIN_BLOCKS[ref.name.text]
            self.error(ref.span, f"`{ref.name.text}` takes no arguments", f"it is {what}: write `{ref.name.text}`")

    def lower_conv_block(self, ref: BlockRef, default: ConvBlock) -> Lowered:
        spans = {"": ref.span}
        if not ref.args:
            return Lowered(default, spans)
        bound = self.bind(ref.args, "conv", ("variant", "expansion", "preact"))
        variant, expansion, preact = default.variant, default.expansion, default.preact
        if "variant" in bound:
            value = bound["variant"].value
            named = conv_variant(value.text) if isinstance(value, Name) else None
            if named is not None:
                variant = named
                expansion = CONV_VARIANTS[variant]
            else:
                hint = did_you_mean(value.text, tuple(CONV_VARIANTS)) if isinstance(value, Name) else None
                self.error(
                    value.span,
                    f"conv variant must be `bottleneck` or `basic`, not {describe(value)}",
                    hint or "e.g. `conv(basic)` or `conv(expansion=2)`",
                )
        if "expansion" in bound:
            arg = bound["expansion"]
            spans["expansion"] = arg.value.span
            number = self.positive_int(arg.value, "expansion")
            if number is not None:
                expansion = number
        if "preact" in bound:
            given = self.boolean(bound["preact"].value, "preact")
            preact = default.preact if given is None else given
        return Lowered(ConvBlock(variant=variant, expansion=expansion, preact=preact), spans)

    def lower_msa_block(self, ref: BlockRef) -> Lowered:
        spans = {"": ref.span}
        # A placeholder for a broken MSA: global attention fits every map, so it adds no noise.
        heads, window, dim_head = 1, None, 64
        if ref.args is None:
            self.error(ref.span, "`msa` needs heads and a window", "e.g. `msa(6, 4)` or `msa(6, window=global)`")
            return Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)
        bound = self.bind(ref.args, "msa", ("heads", "window", "dim_head"))
        arg = self.require(bound, "heads", "msa", ref.span, "`msa(6, 4)`")
        if arg is not None:
            spans["heads"] = arg.value.span
            heads = self.positive_int(arg.value, "heads") or heads
        arg = self.require(bound, "window", "msa", ref.span, "`msa(6, 4)` or `msa(6, window=global)`")
        if arg is not None:
            spans["window"] = arg.value.span
            value = arg.value
            if isinstance(value, Name):
                if value.text != "global":
                    hint = did_you_mean(value.text, ("global",)) or "a window is a number or `global`"
                    self.error(value.span, f"window must be a number or `global`, not {describe(value)}", hint)
            else:
                window = self.positive_int(value, "window")
        if "dim_head" in bound:
            arg = bound["dim_head"]
            spans["dim_head"] = arg.value.span
            dim_head = self.positive_int(arg.value, "dim_head") or dim_head
        return Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)

    def lower_attn_block(self, ref: BlockRef) -> Lowered:
        """`attn(heads, window, shift=0, kernel=K, dim_head=D, qkv_bias=true)`: the transformer MSA."""
        spans = {"": ref.span}
        example = "`attn(3, global)`, `attn(3, 4, shift=2)` or `attn(3, kernel=5)`"
        # A placeholder for a broken one: global attention fits every map, so it adds no noise.
        fields: dict[str, int | bool | None] = {"heads": 1, "dim_head": 1}
        unset = True
        if ref.args is None:
            self.error(ref.span, "`attn` needs heads and a window (or a kernel)", f"e.g. {example}")
            return Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=False)
        bound = self.bind(ref.args, "attn", ("heads", "window", "shift", "kernel", "dim_head", "qkv_bias"))
        arg = self.require(bound, "heads", "attn", ref.span, example)
        if arg is not None:
            spans["heads"] = arg.value.span
            fields["heads"] = self.positive_int(arg.value, "heads") or 1
        if "window" in bound and "kernel" in bound:
            self.error(
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
                    self.error(value.span, f"window must be a number or `global`, not {describe(value)}", hint)
            else:
                fields["window"] = self.positive_int(value, "window")
        elif "kernel" in bound:
            spans["kernel"] = bound["kernel"].value.span
            fields["kernel"] = self.positive_int(bound["kernel"].value, "kernel")
        elif not self._bind_failed:
            self.error(ref.span, "`attn` needs a window or a kernel", f"e.g. {example}")
        if "shift" in bound:
            spans["shift"] = bound["shift"].value.span
            shift = self.whole_number(bound["shift"].value, "shift")
            fields["shift"] = shift or 0
        if "dim_head" in bound:
            spans["dim_head"] = bound["dim_head"].value.span
            fields["dim_head"] = self.positive_int(bound["dim_head"].value, "dim_head") or 1
            unset = False
        if "qkv_bias" in bound:
            spans["qkv_bias"] = bound["qkv_bias"].value.span
            qkv_bias = self.boolean(bound["qkv_bias"].value, "qkv_bias")
            fields["qkv_bias"] = True if qkv_bias is None else qkv_bias
        fields = {key: value for key, value in fields.items() if value is not None}
        return Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=unset)

    def lower_mlp_block(self, ref: BlockRef) -> Lowered:
        spans = {"": ref.span}
        bound = self.bind(ref.args or (), "mlp", ("ratio",))
        ratio = 4
        if "ratio" in bound:
            spans["ratio"] = bound["ratio"].value.span
            ratio = self.positive_int(bound["ratio"].value, "mlp ratio") or ratio
        return Lowered(MLPBlock(ratio=ratio), spans)

    def lower_block(self, ref: BlockRef, default: ConvBlock) -> Lowered:
        kind = ref.name.text
        if kind == "conv":
            return self.lower_conv_block(ref, default)
        if kind == "msa":
            return self.lower_msa_block(ref)
        if kind == "attn":
            return self.lower_attn_block(ref)
        if kind == "mlp":
            return self.lower_mlp_block(ref)
        if kind in PLAIN_BLOCKS:
            self.no_arguments(ref)
            block = {"merge": MergeBlock, "pool": PoolBlock, "smooth": SmoothBlock}[kind]()
            return Lowered(block, {"": ref.span})
        declared = kinds.block_kind(kind)
        if declared is not None:
            return self.lower_ext_block(ref, declared)
        known = BLOCK_KINDS + kinds.registered_kinds()
        self.error(
            ref.name.span,
            f"unknown block `{kind}`",
            did_you_mean(kind, known) or f"blocks are: {', '.join(known)}",
        )
        return Lowered(default, {"": ref.span})

    def lower_ext_block(self, ref: BlockRef, kind: kinds.BlockKind) -> Lowered:
        """A registered kind (`archdsl.kinds`): its arguments read as its declaration says, each bad one
        reported and replaced by its default (or a neutral value, for a required one)."""
        spans = {"": ref.span}
        name, example = kind.name, kind.hint_example()
        values = {arg.name: kinds.initial(arg) for arg in kind.args}
        required = [arg.name for arg in kind.args if arg.required]
        if not kind.args and ref.args:
            what = f"it is {kind.description}: " if kind.description else ""
            self.error(ref.span, f"`{name}` takes no arguments", f"{what}write `{name}`")
        elif ref.args is None and required:
            listed = " and ".join(f"`{arg}`" for arg in required)
            self.error(ref.span, f"`{name}` needs {listed}", f"e.g. {example}")
        else:
            bound = self.bind(ref.args or (), name, tuple(arg.name for arg in kind.args))
            for arg in kind.args:
                given = self.require(bound, arg.name, name, ref.span, example) if arg.required else bound.get(arg.name)
                if given is None:
                    continue
                spans[arg.name] = given.value.span
                value = self.argument(given.value, arg)
                if value is not None:
                    values[arg.name] = value
        block = ExtBlock(kind=name, args=tuple(values.items()))
        return Lowered(block, spans)

    def argument(self, value: Value, arg: kinds.Arg) -> int | float | bool | str | None:
        """One argument of a registered kind, read by its declared type and bounds."""
        if arg.type is bool:
            return self.boolean(value, arg.name)
        if arg.type is str:
            name = self.choice(value, arg.choices, arg.name, f"e.g. `{arg.name}={arg.choices[0]}`")
            return None if name is None else name.text
        if arg.type is float:
            return self.real(value, arg.name, arg.low, arg.high)
        return self.integer(value, arg.name, arg.low, arg.high)
