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

import re
from dataclasses import dataclass

from archdsl.errors import closest, did_you_mean
from archdsl.ir import Arch, ConvBlock, InputShape, MSABlock, Stage, Stem
from archdsl.lang import checks
from archdsl.lang.diagnostics import Diagnostic, Span, SpecError
from archdsl.lang.parser import ArchNode, Arg, BlockRef, Call, Element, Group, Name, Number, Setting, Value

SETTINGS = ("input", "classes", "stem", "conv", "stage")
BLOCK_KINDS = ("conv", "msa")
STEM_KINDS = ("conv3x3",)
# A conv variant and the expansion it has unless one is given (`basic` means expansion 1).
CONV_VARIANTS = {"bottleneck": 4, "basic": 1}

# Guards against inputs that are valid syntax but absurd: they would exhaust memory
# (`conv*999999999`) or make no sense for a network; also keeps numbers within int32.
MAX_NUMBER = 2**31 - 1
MAX_BLOCKS_PER_STAGE = 1000
MAX_GROUP_DEPTH = 32

_INTEGER = re.compile(r"[+\-]?[0-9]+\Z")
_DECIMAL = re.compile(r"[+\-]?[0-9]*\.[0-9]*([eE][+\-]?[0-9]+)?\Z|[+\-]?[0-9]+[eE][+\-]?[0-9]+\Z")
_DIMS = re.compile(r"[0-9]+(x[0-9]+)*\Z")


def _describe(value: Value) -> str:
    if isinstance(value, Call):
        return f"`{value.name.text}(...)`"
    return f"`{value.text}`"


@dataclass
class _Lowered:
    """A block with the spans its IR fields came from (keys: "" for the block, then field names)."""

    block: ConvBlock | MSABlock
    spans: dict[str, Span]


class _Lowering:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.spans: dict[tuple, Span] = {}
        # False when the feature-map sizes cannot be known (no or bad `input`): the
        # shape-dependent checks would only report noise then.
        self.shapes_known = True
        self._bind_failed = False  # whether the latest `bind` reported a bad argument

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

    def lower_stem(self, setting: Setting) -> Stem | None:
        value = setting.value
        if isinstance(value, Number):
            self.error(value.span, f"stem must be `conv3x3(C)`, not {_describe(value)}", "e.g. `stem conv3x3(64)`")
            return None
        name = value.name if isinstance(value, Call) else value
        if name.text not in STEM_KINDS:
            self.error(
                name.span,
                f"unknown stem `{name.text}`",
                did_you_mean(name.text, STEM_KINDS) or "the stem is `conv3x3(C)`",
            )
            return None
        if not isinstance(value, Call):
            self.error(value.span, "stem `conv3x3` needs its channels", "e.g. `stem conv3x3(64)`")
            return None
        bound = self.bind(value.args, name.text, ("channels",))
        arg = self.require(bound, "channels", name.text, value.span, "`stem conv3x3(64)`")
        channels = self.positive_int(arg.value, "stem channels") if arg else None
        return Stem(channels=channels) if channels is not None else None

    def lower_conv_kind(self, value: Value) -> ConvBlock | None:
        """`bottleneck`, `bottleneck(expansion=4)`, `basic`, `basic(2)`: the arch's plain `conv`."""
        if isinstance(value, Number):
            self.error(
                value.span,
                f"conv must be `bottleneck` or `basic`, not {_describe(value)}",
                "e.g. `conv = bottleneck(expansion=4)`",
            )
            return None
        name = value.name if isinstance(value, Call) else value
        if name.text not in CONV_VARIANTS:
            self.error(
                name.span,
                f"unknown conv variant `{name.text}`",
                did_you_mean(name.text, tuple(CONV_VARIANTS)) or "variants: `bottleneck`, `basic`",
            )
            return None
        expansion = CONV_VARIANTS[name.text]
        if isinstance(value, Call):
            bound = self.bind(value.args, name.text, ("expansion",))
            if "expansion" in bound:
                arg = bound["expansion"]
                expansion = self.positive_int(arg.value, "expansion")
                if expansion is None:
                    return None
        return ConvBlock(variant=name.text, expansion=expansion)

    # --- blocks ----------------------------------------------------------------------

    def lower_conv_block(self, ref: BlockRef, default: ConvBlock) -> _Lowered:
        spans = {"": ref.span}
        if not ref.args:
            return _Lowered(default, spans)
        bound = self.bind(ref.args, "conv", ("variant", "expansion"))
        variant, expansion = default.variant, default.expansion
        if "variant" in bound:
            value = bound["variant"].value
            if isinstance(value, Name) and value.text in CONV_VARIANTS:
                variant = value.text
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
        return _Lowered(ConvBlock(variant=variant, expansion=expansion), spans)

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

    def lower_block(self, ref: BlockRef, default: ConvBlock) -> _Lowered:
        kind = ref.name.text
        if kind == "conv":
            return self.lower_conv_block(ref, default)
        if kind == "msa":
            return self.lower_msa_block(ref)
        self.error(
            ref.name.span,
            f"unknown block `{kind}`",
            did_you_mean(kind, BLOCK_KINDS) or "blocks are `conv` and `msa(heads, window)`",
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
                if len(items) * count > MAX_BLOCKS_PER_STAGE:
                    self.error(
                        element.span,
                        f"this repeat makes {len(items) * count} blocks",
                        f"a stage has at most {MAX_BLOCKS_PER_STAGE}",
                    )
                    count = 1
            out.extend(items * count)
            if len(out) > MAX_BLOCKS_PER_STAGE:
                self.error(element.span, f"more than {MAX_BLOCKS_PER_STAGE} blocks in one stage")
                return out[:MAX_BLOCKS_PER_STAGE]
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
        for j, item in enumerate(lowered):
            for field, span in item.spans.items():
                self.spans[path + ("blocks", j) + ((field,) if field else ())] = span
        return Stage(name=name.text, width=width or 1, stride=stride, blocks=tuple(item.block for item in lowered))

    # --- the whole file --------------------------------------------------------------

    def lower(self, node: ArchNode) -> Arch | None:
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
        if not stage_settings and "stage" not in misspelt:
            self.error(node.span, f"arch {node.name.text} has no stages", "add e.g. `stage c1(width=64) { conv*3 }`")
        stages = []
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
        )
        found = checks.problems(arch) if self.shapes_known else checks.name_problems(arch)
        for problem in found:
            self.error(self.span_of(problem.path) or node.span, problem.message, problem.hint)
        return arch

    def span_of(self, path: tuple) -> Span | None:
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
