"""AST -> IR: give the generic syntax its meaning, fill defaults, expand repeats, check.

Lowering reports *every* independent mistake of a file, not just the first: each bad
piece records a diagnostic and is replaced by a neutral placeholder (the arch's default
`conv`, a global-window MSA, ...) so that the rest can still be lowered and checked.
Numbers are checked with their spans *before* any pydantic object is built, so no
`ValidationError` ever reaches the user. Finally the semantic checks of
`archdsl.lang.checks` run on the IR, and each problem's IR path is mapped back to the source
span it came from (`self.spans`, filled while lowering).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from archdsl.errors import closest, did_you_mean
from archdsl.ir import (
    DEFAULT_INIT,
    INIT_SCHEMES,
    AnyBlock,
    AnyStem,
    Arch,
    AttnBlock,
    ConvBlock,
    ConvVariant,
    InitScheme,
    InputShape,
    MergeBlock,
    MLPBlock,
    MSABlock,
    Norm,
    PatchStem,
    PoolBlock,
    Position,
    SmoothBlock,
    Stage,
    Stem,
    block_shapes,
)
from archdsl.lang import checks
from archdsl.lang.diagnostics import Diagnostic, Span, SpecError
from archdsl.lang.limits import MAX_BLOCKS, MAX_GROUP_DEPTH, MAX_NUMBER, MAX_STAGES
from archdsl.lang.parser import ArchNode, Arg, BlockRef, Call, Element, Group, Name, Number, Setting, Value
from archdsl.lang.parser import _one_of as one_of  # "a, b or c", as the syntax errors list tokens

SETTINGS = ("input", "classes", "stem", "conv", "head", "pos", "norm", "init", "stage")
BLOCK_KINDS = ("conv", "msa", "attn", "mlp", "merge", "pool", "smooth")
STEM_KINDS = ("conv3x3", "patch")
HEAD_KINDS = ("mean", "class")
POSITION_KINDS = ("none", "absolute", "relative")
NORM_KINDS = ("layernorm",)
BOOLEANS = {"true": True, "false": False}
# Blocks without arguments: what each one is, for the "takes no arguments" hint.
PLAIN_BLOCKS = {
    "merge": "Swin's patch merging",
    "pool": "PiT's pooling",
    "smooth": "a fixed 2x2 blur",
}
# A conv variant and the expansion it has unless one is given (`basic` means expansion 1).
CONV_VARIANTS: dict[ConvVariant, int] = {"bottleneck": 4, "basic": 1}

# Guards against inputs that are valid syntax but absurd (`conv*999999999`, numbers past
# int32, ...) live in `archdsl.lang.limits`; they are reported here with their spans.

_INTEGER = re.compile(r"[+\-]?[0-9]+\Z")
_DECIMAL = re.compile(r"[+\-]?[0-9]*\.[0-9]*([eE][+\-]?[0-9]+)?\Z|[+\-]?[0-9]+[eE][+\-]?[0-9]+\Z")
_DIMS = re.compile(r"[0-9]+(x[0-9]+)*\Z")


def _conv_variant(text: str) -> ConvVariant | None:
    """`text` as a conv variant of the IR, or None if it names none."""
    return next((variant for variant in CONV_VARIANTS if variant == text), None)


def _describe(value: Value) -> str:
    if isinstance(value, Call):
        return f"`{value.name.text}(...)`"
    return f"`{value.text}`"


@dataclass
class _Lowered:
    """A block with the spans its IR fields came from (keys: "" for the block, then field names)."""

    block: AnyBlock
    spans: dict[str, Span]
    # An `attn` written without `dim_head`: it becomes channels // heads once shapes are known.
    dim_head_unset: bool = False


class _Lowering:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.spans: dict[checks.Path, Span] = {}
        # False when the feature-map sizes cannot be known (no or bad `input`): the
        # shape-dependent checks would only report noise then.
        self.shapes_known = True
        self._bind_failed = False  # whether the latest `bind` reported a bad argument
        # (stage index, block index) of each `attn` whose dim_head is channels // heads.
        self.unset_dim_heads: list[tuple[int, int]] = []
        self.n_blocks = 0  # blocks of the stages lowered so far (the design's limit is MAX_BLOCKS)

    # --- helpers ---------------------------------------------------------------------

    def error(self, span: Span | None, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(span, message, hint))

    def positive_int(self, value: Value, what: str) -> int | None:
        """The value as a whole number >= 1, or None after reporting why it is not one."""
        if not isinstance(value, Number):
            self.error(value.span, f"{what} must be a number, not {_describe(value)}")
            return None
        text = value.text
        if _INTEGER.match(text):
            number = int(text)
            if number < 1:
                self.error(value.span, f"{what} must be at least 1, got {number}")
                return None
            if number > MAX_NUMBER:
                self.error(value.span, f"{what} is too large: {text}", f"at most {MAX_NUMBER}")
                return None
            return number
        if _DECIMAL.match(text):
            self.error(value.span, f"{what} must be a whole number, got {text}")
        else:
            self.error(value.span, f"bad number `{text}`", f"{what} is written with digits only, e.g. 64")
        return None

    def whole_number(self, value: Value, what: str) -> int | None:
        """A number >= 0 (`shift=0` is no shift), or None after reporting why it is not one."""
        if isinstance(value, Number) and _INTEGER.match(value.text) and int(value.text) == 0:
            return 0
        return self.positive_int(value, what)

    def boolean(self, value: Value, what: str) -> bool | None:
        """`true` or `false`, or None after reporting why the value is neither."""
        if isinstance(value, Name) and value.text in BOOLEANS:
            return BOOLEANS[value.text]
        hint = did_you_mean(value.text, tuple(BOOLEANS)) if isinstance(value, Name) else None
        self.error(value.span, f"{what} must be `true` or `false`, not {_describe(value)}", hint)
        return None

    def positive_float(self, value: Value, what: str) -> float | None:
        """A number above 0 (`1e-6`, `0.5`, `2`), or None after reporting why it is not one."""
        text = value.text if isinstance(value, Number) else None
        if text is None or not (_INTEGER.match(text) or _DECIMAL.match(text)):
            hint = f"{what} is written like 1e-6 or 0.5"
            self.error(value.span, f"{what} must be a number, not {_describe(value)}", hint)
            return None
        number = float(text)
        if not math.isfinite(number) or number <= 0:
            self.error(value.span, f"{what} must be above 0, got {text}")
            return None
        return number

    def no_arguments(self, ref: BlockRef) -> None:
        if ref.args:
            what = PLAIN_BLOCKS[ref.name.text]
            self.error(ref.span, f"`{ref.name.text}` takes no arguments", f"it is {what}: write `{ref.name.text}`")

    def bind(self, args: tuple[Arg, ...], callee: str, params: tuple[str, ...]) -> dict[str, Arg]:
        """Match arguments to parameter names like Python does (by position, in the order of
        `params`, then by keyword); report every mismatch."""
        positional = len(params)
        errors_before = len(self.diagnostics)
        bound: dict[str, Arg] = {}
        seen_keyword = False
        n_positional = 0
        for arg in args:
            if arg.keyword is None:
                if seen_keyword:
                    self.error(
                        arg.span,
                        f"positional argument after a keyword argument in `{callee}(...)`",
                        "write positional arguments first",
                    )
                    continue
                if n_positional >= positional:
                    plural = "s" if positional != 1 else ""
                    self.error(
                        arg.span,
                        f"`{callee}` takes at most {positional} positional argument{plural} ({', '.join(params)})",
                    )
                    continue
                name = params[n_positional]
                n_positional += 1
            else:
                seen_keyword = True
                name = arg.keyword.text
                if name not in params:
                    hint = did_you_mean(name, params) or f"`{callee}` takes: {', '.join(params)}"
                    self.error(arg.keyword.span, f"unknown argument `{name}` for `{callee}`", hint)
                    continue
            if name in bound:
                self.error(arg.span, f"argument `{name}` of `{callee}` given twice")
                continue
            bound[name] = arg
        self._bind_failed = len(self.diagnostics) > errors_before
        return bound

    def require(self, bound: dict[str, Arg], name: str, callee: str, span: Span, example: str) -> Arg | None:
        # After a bad argument (`windw=4`) the missing one is its echo: report only the cause.
        if name not in bound:
            if not self._bind_failed:
                self.error(span, f"`{callee}` needs `{name}`", f"e.g. {example}")
            return None
        return bound[name]

    # --- settings --------------------------------------------------------------------

    def lower_input(self, setting: Setting) -> InputShape | None:
        value = setting.value
        if not isinstance(value, Number) or not _DIMS.match(value.text) or value.text.count("x") != 2:
            self.error(
                value.span, f"input must be channels x height x width, not {_describe(value)}", "e.g. `input 3x32x32`"
            )
            return None
        sizes = []
        for part, what in zip(value.text.split("x"), ("input channels", "input height", "input width"), strict=True):
            number = self.positive_int(Number(part, value.span), what)
            if number is None:
                return None
            sizes.append(number)
        return InputShape(channels=sizes[0], height=sizes[1], width=sizes[2])

    def lower_stem(self, setting: Setting) -> AnyStem | None:
        value = setting.value
        if isinstance(value, Number):
            self.error(
                value.span,
                f"stem must be `conv3x3(C)` or `patch(size, C)`, not {_describe(value)}",
                "e.g. `stem conv3x3(64)` or `stem patch(2, 192)`",
            )
            return None
        name = value.name if isinstance(value, Call) else value
        if name.text not in STEM_KINDS:
            self.error(
                name.span,
                f"unknown stem `{name.text}`",
                did_you_mean(name.text, STEM_KINDS) or "stems are `conv3x3(C)` and `patch(size, C)`",
            )
            return None
        if name.text == "patch":
            return self.lower_patch_stem(value)
        if not isinstance(value, Call):
            self.error(value.span, "stem `conv3x3` needs its channels", "e.g. `stem conv3x3(64)`")
            return None
        bound = self.bind(value.args, name.text, ("channels", "norm"))
        arg = self.require(bound, "channels", name.text, value.span, "`stem conv3x3(64)`")
        channels = self.positive_int(arg.value, "stem channels") if arg else None
        # `norm=true`: BN-ReLU after the conv, the post-activation ResNet's stem.
        norm = self.boolean(bound["norm"].value, "norm") if "norm" in bound else False
        return Stem(channels=channels, norm=norm) if channels is not None and norm is not None else None

    def lower_patch_stem(self, value: Name | Call) -> PatchStem | None:
        """`patch(size, channels, stride=size, norm=false)`: ViT's, PiT's and Swin's patch embedding."""
        example = "`stem patch(2, 192)` or `stem patch(2, 64, stride=1)`"
        if not isinstance(value, Call):
            self.error(value.span, "stem `patch` needs a patch size and channels", f"e.g. {example}")
            return None
        bound = self.bind(value.args, "patch", ("size", "channels", "stride", "norm"))
        numbers: dict[str, int | None] = {}
        for key, what in (("size", "patch size"), ("channels", "stem channels")):
            arg = self.require(bound, key, "patch", value.span, example)
            numbers[key] = self.positive_int(arg.value, what) if arg else None
        size, channels, stride = numbers["size"], numbers["channels"], numbers["size"]
        if "stride" in bound:
            stride = self.positive_int(bound["stride"].value, "patch stride")
            self.spans[("stem", "stride")] = bound["stride"].span
        norm = self.boolean(bound["norm"].value, "norm") if "norm" in bound else False
        if size is None or channels is None or stride is None or norm is None:
            return None
        return PatchStem(size=size, channels=channels, stride=stride, norm=norm)

    def choice(self, value: Value, options: tuple[str, ...], what: str, example: str) -> Name | None:
        """The name a setting's value is called by, if it is one of `options`; else None after reporting it."""
        name = value.name if isinstance(value, Call) else value
        if isinstance(name, Name) and name.text in options:
            return name
        hint = did_you_mean(name.text, options) if isinstance(name, Name) else None
        listed = one_of([f"`{option}`" for option in options])
        self.error(name.span, f"{what} must be {listed}, not {_describe(value)}", hint or example)
        return None

    def lower_head(self, setting: Setting) -> tuple[Literal["mean", "class"], bool] | None:
        """`head mean`, `head class`, each optionally `(norm=false)`: (the pooling, whether a norm comes first)."""
        example = "`head mean` averages the final map; `head class` reads a class token"
        name = self.choice(setting.value, HEAD_KINDS, "head", example)
        if name is None:
            return None
        norm: bool | None = True
        if isinstance(setting.value, Call):
            bound = self.bind(setting.value.args, name.text, ("norm",))
            if "norm" in bound:
                self.spans[("head_norm",)] = bound["norm"].span
                norm = self.boolean(bound["norm"].value, "norm")
        if norm is None:
            return None
        return ("class" if name.text == "class" else "mean"), norm

    def lower_init(self, setting: Setting) -> InitScheme | None:
        example = "`init torch` (PyTorch's layer defaults) or `init timm` (timm's ViT/Swin init)"
        name = self.choice(setting.value, INIT_SCHEMES, "init", example)
        if name is None:
            return None
        if isinstance(setting.value, Call):
            self.error(setting.value.span, f"`{name.text}` takes no arguments", f"write `init {name.text}`")
            return None
        return next(scheme for scheme in INIT_SCHEMES if scheme == name.text)

    def lower_pos(self, setting: Setting) -> Position | None:
        value = setting.value
        name = self.choice(value, POSITION_KINDS, "pos", "e.g. `pos absolute` (ViT, PiT) or `pos relative` (Swin)")
        if name is None:
            return None
        if not isinstance(value, Call):
            return Position.model_validate({"kind": name.text})
        if name.text != "absolute":
            self.error(value.span, f"`{name.text}` takes no arguments", f"write `pos {name.text}`")
            return None
        bound = self.bind(value.args, "absolute", ("class",))
        class_token: bool | None = True
        if "class" in bound:
            self.spans[("pos", "class_token")] = bound["class"].span
            class_token = self.boolean(bound["class"].value, "class")
        if class_token is None:
            return None
        return Position(kind="absolute", class_token=class_token)

    def lower_norm(self, setting: Setting) -> Norm | None:
        value = setting.value
        name = self.choice(value, NORM_KINDS, "norm", "e.g. `norm = layernorm(eps=1e-5)`")
        if name is None:
            return None
        if not isinstance(value, Call):
            return Norm()
        bound = self.bind(value.args, name.text, ("eps",))
        if "eps" not in bound:
            return Norm()
        eps = self.positive_float(bound["eps"].value, "eps")
        return Norm(eps=eps) if eps is not None else None

    def lower_conv_kind(self, value: Value) -> ConvBlock | None:
        """`bottleneck`, `bottleneck(expansion=4)`, `basic`, `basic(2)`, `bottleneck(preact=false)`: the arch's plain
        `conv`."""
        if isinstance(value, Number):
            self.error(
                value.span,
                f"conv must be `bottleneck` or `basic`, not {_describe(value)}",
                "e.g. `conv = bottleneck(expansion=4)`",
            )
            return None
        name = value.name if isinstance(value, Call) else value
        variant = _conv_variant(name.text)
        if variant is None:
            self.error(
                name.span,
                f"unknown conv variant `{name.text}`",
                did_you_mean(name.text, tuple(CONV_VARIANTS)) or "variants: `bottleneck`, `basic`",
            )
            return None
        expansion = CONV_VARIANTS[variant]
        preact: bool | None = True
        if isinstance(value, Call):
            bound = self.bind(value.args, name.text, ("expansion", "preact"))
            if "expansion" in bound:
                given = self.positive_int(bound["expansion"].value, "expansion")
                if given is None:
                    return None
                expansion = given
            if "preact" in bound:
                preact = self.boolean(bound["preact"].value, "preact")
        if preact is None:
            return None
        return ConvBlock(variant=variant, expansion=expansion, preact=preact)

    # --- blocks ----------------------------------------------------------------------

    def lower_conv_block(self, ref: BlockRef, default: ConvBlock) -> _Lowered:
        spans = {"": ref.span}
        if not ref.args:
            return _Lowered(default, spans)
        bound = self.bind(ref.args, "conv", ("variant", "expansion", "preact"))
        variant, expansion, preact = default.variant, default.expansion, default.preact
        if "variant" in bound:
            value = bound["variant"].value
            named = _conv_variant(value.text) if isinstance(value, Name) else None
            if named is not None:
                variant = named
                expansion = CONV_VARIANTS[variant]
            else:
                hint = did_you_mean(value.text, tuple(CONV_VARIANTS)) if isinstance(value, Name) else None
                self.error(
                    value.span,
                    f"conv variant must be `bottleneck` or `basic`, not {_describe(value)}",
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
        return _Lowered(ConvBlock(variant=variant, expansion=expansion, preact=preact), spans)

    def lower_msa_block(self, ref: BlockRef) -> _Lowered:
        spans = {"": ref.span}
        # A placeholder for a broken MSA: global attention fits every map, so it adds no noise.
        heads, window, dim_head = 1, None, 64
        if ref.args is None:
            self.error(ref.span, "`msa` needs heads and a window", "e.g. `msa(6, 4)` or `msa(6, window=global)`")
            return _Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)
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
                    self.error(value.span, f"window must be a number or `global`, not {_describe(value)}", hint)
            else:
                window = self.positive_int(value, "window")
        if "dim_head" in bound:
            arg = bound["dim_head"]
            spans["dim_head"] = arg.value.span
            dim_head = self.positive_int(arg.value, "dim_head") or dim_head
        return _Lowered(MSABlock(heads=heads, window=window, dim_head=dim_head), spans)

    def lower_attn_block(self, ref: BlockRef) -> _Lowered:
        """`attn(heads, window, shift=0, kernel=K, dim_head=D, qkv_bias=true)`: the transformer MSA."""
        spans = {"": ref.span}
        example = "`attn(3, global)`, `attn(3, 4, shift=2)` or `attn(3, kernel=5)`"
        # A placeholder for a broken one: global attention fits every map, so it adds no noise.
        fields: dict[str, int | bool | None] = {"heads": 1, "dim_head": 1}
        unset = True
        if ref.args is None:
            self.error(ref.span, "`attn` needs heads and a window (or a kernel)", f"e.g. {example}")
            return _Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=False)
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
                    self.error(value.span, f"window must be a number or `global`, not {_describe(value)}", hint)
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
        return _Lowered(AttnBlock.model_validate(fields), spans, dim_head_unset=unset)

    def lower_mlp_block(self, ref: BlockRef) -> _Lowered:
        spans = {"": ref.span}
        bound = self.bind(ref.args or (), "mlp", ("ratio",))
        ratio = 4
        if "ratio" in bound:
            spans["ratio"] = bound["ratio"].value.span
            ratio = self.positive_int(bound["ratio"].value, "mlp ratio") or ratio
        return _Lowered(MLPBlock(ratio=ratio), spans)

    def lower_block(self, ref: BlockRef, default: ConvBlock) -> _Lowered:
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
            return _Lowered(block, {"": ref.span})
        self.error(
            ref.name.span,
            f"unknown block `{kind}`",
            did_you_mean(kind, BLOCK_KINDS) or f"blocks are: {', '.join(BLOCK_KINDS)}",
        )
        return _Lowered(default, {"": ref.span})

    def lower_elements(self, elements: tuple[Element, ...], default: ConvBlock, depth: int = 0) -> list[_Lowered]:
        out: list[_Lowered] = []
        for element in elements:
            atom = element.atom
            if isinstance(atom, Group):
                if depth >= MAX_GROUP_DEPTH:
                    self.error(atom.span, "`[...]` nested too deeply", f"at most {MAX_GROUP_DEPTH} levels")
                    items = [_Lowered(default, {"": atom.span})]  # a placeholder: no "empty stage" echo
                    out.extend(items)
                    continue
                items = self.lower_elements(atom.elements, default, depth + 1)
                if not atom.elements:
                    self.error(atom.span, "empty `[]`", "put blocks inside, e.g. `[conv msa(6, 4)]*2`")
            else:
                items = [self.lower_block(atom, default)]
            count = 1
            if element.count is not None:
                count = self.positive_int(element.count, "a repeat count") or 1
                if len(items) * count > MAX_BLOCKS:
                    self.error(
                        element.span,
                        f"this repeat makes {len(items) * count} blocks",
                        f"a design has at most {MAX_BLOCKS}",
                    )
                    count = 1
            out.extend(items * count)
            if len(out) > MAX_BLOCKS:
                self.error(element.span, f"more than {MAX_BLOCKS} blocks in one stage")
                return out[:MAX_BLOCKS]
        return out

    # --- stages ----------------------------------------------------------------------

    def lower_stage(self, setting: Setting, index: int, default: ConvBlock) -> Stage | None:
        value = setting.value
        if isinstance(value, Number):
            self.error(
                value.span, f"a stage needs a name, not {_describe(value)}", "e.g. `stage c1(width=64) { conv*3 }`"
            )
            return None
        name = value.name if isinstance(value, Call) else value
        path = ("stages", index)
        self.spans[path] = setting.span
        self.spans[path + ("name",)] = name.span
        self.spans[path + ("stride",)] = value.span
        self.spans[path + ("width",)] = value.span
        args = value.args if isinstance(value, Call) else ()
        bound = self.bind(args, f"stage {name.text}", ("width", "stride"))
        width = None
        arg = self.require(bound, "width", f"stage {name.text}", value.span, f"`stage {name.text}(width=64) {{ ... }}`")
        if arg is not None:
            self.spans[path + ("width",)] = arg.span
            width = self.positive_int(arg.value, "width")
        stride = 1 if index == 0 else 2
        if "stride" in bound:
            arg = bound["stride"]
            self.spans[path + ("stride",)] = arg.span
            number = self.positive_int(arg.value, "stride")
            if number is None:
                self.shapes_known = False  # the maps after this stage are unknown
            else:
                stride = number
        if setting.body is None:
            self.error(
                setting.span, f"stage {name.text} has no block list", f"e.g. `stage {name.text}(width=64) {{ conv*3 }}`"
            )
            return None
        self.spans[path + ("blocks",)] = setting.body_span or setting.span
        lowered = self.lower_elements(setting.body, default)
        room = MAX_BLOCKS - self.n_blocks
        if len(lowered) > room:
            if self.n_blocks < MAX_BLOCKS:  # reported once, at the stage that crosses the limit
                self.error(
                    setting.body_span or setting.span,
                    f"this stage brings the design to {self.n_blocks + len(lowered)} blocks",
                    f"a design has at most {MAX_BLOCKS}",
                )
            self.n_blocks = MAX_BLOCKS
            if room <= 0:
                return None
            lowered = lowered[:room]
        else:
            self.n_blocks += len(lowered)
        for j, item in enumerate(lowered):
            for field, span in item.spans.items():
                self.spans[path + ("blocks", j) + ((field,) if field else ())] = span
            if item.dim_head_unset:
                self.unset_dim_heads.append((index, j))
        return Stage(name=name.text, width=width or 1, stride=stride, blocks=tuple(item.block for item in lowered))

    # --- the whole file --------------------------------------------------------------

    def lower(self, node: ArchNode) -> Arch:
        if node.keyword.text != "arch":
            hint = did_you_mean(node.keyword.text, ("arch",)) or "a spec starts with `arch NAME {`"
            self.error(node.keyword.span, f"expected `arch`, found `{node.keyword.text}`", hint)
        self.spans[("name",)] = node.name.span
        once: dict[str, Setting] = {}
        stage_settings: list[Setting] = []
        misspelt: set[str] = set()  # settings a typo probably meant: not also "missing"
        for setting in node.settings:
            keyword = setting.keyword.text
            if keyword not in SETTINGS:
                if (meant := closest(keyword, SETTINGS)) is not None:
                    misspelt.add(meant)
                hint = did_you_mean(keyword, SETTINGS) or f"settings are: {', '.join(SETTINGS)}"
                self.error(setting.keyword.span, f"unknown setting `{keyword}`", hint)
                continue
            if keyword == "stage":
                stage_settings.append(setting)
                continue
            if setting.body is not None:
                self.error(setting.body_span, f"`{keyword}` takes no block list")
            if keyword in once:
                self.error(
                    setting.keyword.span, f"`{keyword}` is set twice", f"first set on line {once[keyword].span.line}"
                )
                continue
            once[keyword] = setting
            self.spans[(keyword,)] = setting.span

        shape = self.lower_input(once["input"]) if "input" in once else None
        if "input" not in once and "input" not in misspelt:
            self.error(node.span, "missing `input`", "add `input 3x32x32` (channels x height x width)")
        if shape is None:
            self.shapes_known = False
        classes = None
        if "classes" in once:
            classes = self.positive_int(once["classes"].value, "classes")
        elif "classes" not in misspelt:
            self.error(node.span, "missing `classes`", "add e.g. `classes 100`")
        stem = self.lower_stem(once["stem"]) if "stem" in once else None
        if "stem" not in once and "stem" not in misspelt:
            self.error(node.span, "missing `stem`", "add e.g. `stem conv3x3(64)`")
        conv = ConvBlock()
        if "conv" in once:
            conv = self.lower_conv_kind(once["conv"].value) or conv
            self.spans[("conv",)] = once["conv"].span
        head, head_norm = (self.lower_head(once["head"]) if "head" in once else None) or (None, True)
        pos = self.lower_pos(once["pos"]) if "pos" in once else None
        norm = self.lower_norm(once["norm"]) if "norm" in once else None
        init = self.lower_init(once["init"]) if "init" in once else None
        if not stage_settings and "stage" not in misspelt:
            self.error(node.span, f"arch {node.name.text} has no stages", "add e.g. `stage c1(width=64) { conv*3 }`")
        stages: list[Stage] = []
        if len(stage_settings) > MAX_STAGES:
            first_extra = stage_settings[MAX_STAGES]
            self.error(
                first_extra.span,
                f"{len(stage_settings)} stages: a design has at most {MAX_STAGES}",
                f"stages after the {MAX_STAGES}th are not read",
            )
            stage_settings = stage_settings[:MAX_STAGES]
        for setting in stage_settings:
            stage = self.lower_stage(setting, len(stages), conv)
            if stage is not None:
                stages.append(stage)

        # Placeholders keep the IR constructible for the semantic checks; the result is
        # only returned when nothing was reported.
        arch = Arch(
            name=node.name.text,
            input=shape or InputShape(channels=1, height=1, width=1),
            classes=classes or 1,
            stem=stem or Stem(channels=1),
            conv=conv,
            stages=tuple(stages),
            head=head or "mean",
            pos=pos or Position(),
            norm=norm or Norm(),
            init=init or DEFAULT_INIT,
            head_norm=head_norm,
        )
        arch = self.fill_dim_heads(arch)
        found = checks.problems(arch) if self.shapes_known else checks.name_problems(arch)
        for problem in found:
            self.error(self.span_of(problem.path) or node.span, problem.message, problem.hint)
        return arch

    def fill_dim_heads(self, arch: Arch) -> Arch:
        """Give each `attn` written without `dim_head` its channels // heads (ViT's, Swin's rule)."""
        if not self.unset_dim_heads or not self.shapes_known:
            return arch
        shapes = {(shape.stage, shape.index): shape for shape in block_shapes(arch)}
        stages = list(arch.stages)
        for si, bi in self.unset_dim_heads:
            if si >= len(stages):
                continue
            stage = stages[si]
            block = stage.blocks[bi]
            assert isinstance(block, AttnBlock)  # only attn blocks are listed
            channels = shapes[(stage.name, bi)].in_channels
            if channels % block.heads:
                path = ("stages", si, "blocks", bi, "heads")
                fitting = [h for h in range(1, min(channels, 64) + 1) if channels % h == 0]
                self.error(
                    self.span_of(path),
                    f"mismatched dims: the {channels} channels of this `attn` do not split into {block.heads} heads",
                    f"heads that divide {channels}: {', '.join(map(str, fitting[:12]))}; or give `dim_head`",
                )
                continue
            blocks = list(stage.blocks)
            blocks[bi] = block.model_copy(update={"dim_head": channels // block.heads})
            stages[si] = stage = stage.model_copy(update={"blocks": tuple(blocks)})
        return arch.model_copy(update={"stages": tuple(stages)})

    def span_of(self, path: checks.Path) -> Span | None:
        """The span recorded for the longest prefix of an IR path."""
        for end in range(len(path), 0, -1):
            span = self.spans.get(tuple(path[:end]))
            if span is not None:
                return span
        return None


def lower(node: ArchNode, *, source: str | None = None, path: str = "<string>") -> Arch:
    """Lower a parsed spec to a valid IR, or raise `SpecError` with every mistake found."""
    lowering = _Lowering()
    arch = lowering.lower(node)
    if lowering.diagnostics:
        # Repeats expand one source block into many IR blocks: report each mistake once.
        unique = list(dict.fromkeys(lowering.diagnostics))
        raise SpecError(unique, source=source, path=path)
    return arch
