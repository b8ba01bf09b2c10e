"""Lowering the arch-wide settings: `input`, `stem`, `conv`, `head`, `pos`, `norm`, `init`."""

from __future__ import annotations

from typing import Literal

from archdsl.errors import did_you_mean
from archdsl.ir import (
    INIT_SCHEMES,
    AnyStem,
    ConvBlock,
    ConvVariant,
    InitScheme,
    InputShape,
    Norm,
    PatchStem,
    Position,
    Stem,
)
from archdsl.lang.arguments import DIMS, ArgumentReader, describe
from archdsl.lang.parser import Call, Name, Number, Setting, Value

STEM_KINDS = ("conv3x3", "conv7x7", "patch")
HEAD_KINDS = ("mean", "class")
POSITION_KINDS = ("none", "absolute", "relative")
NORM_KINDS = ("layernorm",)
# A conv variant and the expansion it has unless one is given (`basic` means expansion 1).
CONV_VARIANTS: dict[ConvVariant, int] = {"bottleneck": 4, "basic": 1}


def conv_variant(text: str) -> ConvVariant | None:
    """`text` as a conv variant of the IR, or None if it names none."""
    return next((variant for variant in CONV_VARIANTS if variant == text), None)


class SettingLowering(ArgumentReader):
    """The `lower_*` of each arch-wide setting (each returns None after reporting a mistake)."""

    def kind_name(
        self, value: Value, options: tuple[str, ...], *, must_be: str, example: str, unknown: str, known: str
    ) -> Name | None:
        """The name a setting's value is called by (`patch` of `stem patch(2, 192)`) if it is one of
        `options`; else None after reporting a number (`must_be`, with the `example`) or an unknown
        name (`unknown stem ...`, with a did-you-mean or else what is `known`)."""
        if isinstance(value, Number):
            self.error(value.span, f"{must_be}, not {describe(value)}", example)
            return None
        name = value.name if isinstance(value, Call) else value
        if name.text not in options:
            self.error(name.span, f"unknown {unknown} `{name.text}`", did_you_mean(name.text, options) or known)
            return None
        return name

    def lower_input(self, setting: Setting) -> InputShape | None:
        value = setting.value
        if not isinstance(value, Number) or not DIMS.match(value.text) or value.text.count("x") != 2:
            self.error(
                value.span, f"input must be channels x height x width, not {describe(value)}", "e.g. `input 3x32x32`"
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
        name = self.kind_name(
            value,
            STEM_KINDS,
            must_be="stem must be `conv3x3(C)`, `conv7x7(C)` or `patch(size, C)`",
            example="e.g. `stem conv3x3(64)` or `stem patch(2, 192)`",
            unknown="stem",
            known="stems are `conv3x3(C)`, `conv7x7(C)` (ImageNet's) and `patch(size, C)`",
        )
        if name is None:
            return None
        if name.text == "patch":
            return self.lower_patch_stem(value)
        if not isinstance(value, Call):
            self.error(value.span, f"stem `{name.text}` needs its channels", f"e.g. `stem {name.text}(64)`")
            return None
        bound = self.bind(value.args, name.text, ("channels", "norm"))
        arg = self.require(bound, "channels", name.text, value.span, f"`stem {name.text}(64)`")
        channels = self.positive_int(arg.value, "stem channels") if arg else None
        # `norm=true`: BN-ReLU after the conv, the post-activation ResNet's stem.
        norm = self.boolean(bound["norm"].value, "norm") if "norm" in bound else False
        if channels is None or norm is None:
            return None
        return Stem(kind="conv7x7" if name.text == "conv7x7" else "conv3x3", channels=channels, norm=norm)

    def lower_patch_stem(self, value: Value) -> PatchStem | None:
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
        name = self.kind_name(
            value,
            tuple(CONV_VARIANTS),
            must_be="conv must be `bottleneck` or `basic`",
            example="e.g. `conv = bottleneck(expansion=4)`",
            unknown="conv variant",
            known="variants: `bottleneck`, `basic`",
        )
        variant = None if name is None else conv_variant(name.text)
        if name is None or variant is None:
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
