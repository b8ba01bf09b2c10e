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

from archdsl import kinds
from archdsl.errors import closest, did_you_mean
from archdsl.ir import DEFAULT_INIT, Arch, AttnBlock, ConvBlock, InputShape, Norm, Position, Stage, Stem, block_shapes
from archdsl.lang import checks, words
from archdsl.lang._lower_settings import SettingLowering
from archdsl.lang.arguments import describe
from archdsl.lang.diagnostics import Span, SpecError
from archdsl.lang.limits import MAX_BLOCKS, MAX_GROUP_DEPTH, MAX_STAGES
from archdsl.lang.parser import ArchNode, BlockRef, Call, Element, Group, Number, Setting
from archdsl.lang.sites import Path
from archdsl.lang.words import Lowered

SETTINGS = ("input", "classes", "stem", "conv", "head", "pos", "norm", "init", "stage")


class _Lowering(SettingLowering):
    def __init__(self) -> None:
        super().__init__()
        # False when the feature-map sizes cannot be known (no or bad `input`): the
        # shape-dependent checks would only report noise then.
        self.shapes_known = True
        # (stage index, block index) of each `attn` whose dim_head is channels // heads.
        self.unset_dim_heads: list[tuple[int, int]] = []
        self.n_blocks = 0  # blocks of the stages lowered so far (the design's limit is MAX_BLOCKS)

    def lower_block(self, ref: BlockRef, default: ConvBlock) -> Lowered:
        """One block, read by its word (`archdsl.lang.words`); an unknown word becomes the plain `conv`."""
        kind = ref.name.text
        if words.known(kind):
            return words.word(kind).lower(self, ref, default)
        known = kinds.BUILTIN_KINDS + kinds.registered_kinds()
        # A close word is the likely fix; otherwise say how kinds are added. An entry point that failed to
        # load may have declared this one: either way its failure is told here, where it matters.
        suggestion = did_you_mean(kind, known)
        if suggestion is None:
            hint = f"blocks are: {', '.join(known)}; {kinds.unknown_kind_hint()}"
        else:
            hint = "; ".join([suggestion, *kinds.entry_point_failures()])
        self.error(ref.name.span, f"unknown block `{kind}`", hint)
        return Lowered(default, {"": ref.span})

    def lower_elements(self, elements: tuple[Element, ...], default: ConvBlock, depth: int = 0) -> list[Lowered]:
        out: list[Lowered] = []
        for element in elements:
            atom = element.atom
            if isinstance(atom, Group):
                if depth >= MAX_GROUP_DEPTH:
                    self.error(atom.span, "`[...]` nested too deeply", f"at most {MAX_GROUP_DEPTH} levels")
                    items = [Lowered(default, {"": atom.span})]  # a placeholder: no "empty stage" echo
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
                value.span, f"a stage needs a name, not {describe(value)}", "e.g. `stage c1(width=64) { conv*3 }`"
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

    def span_of(self, path: Path) -> Span | None:
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
