"""IR -> canonical `.arch` text (what `archdsl fmt` writes and `archdsl morph` prints).

The output always parses back to the same IR: `parse_spec(format_arch(a)) == a` for every
valid `a`. Defaults are left out where the language fills them in (a stage's default
stride, an MSA's `dim_head=64`), and runs of blocks are compressed into the fewest written
blocks (`conv*5 msa(12, 4)`, `conv*2 [conv msa(6, 4)]*2`) so a printed spec stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from archdsl.ir import AnyBlock, Arch, ConvBlock, Norm, PatchStem, block_shapes
from archdsl.lang import words
from archdsl.lang._lower_settings import CONV_VARIANTS
from archdsl.lang.lower import lower
from archdsl.lang.numbers import format_float
from archdsl.lang.parser import ArchNode, parse
from archdsl.lang.parser import comments as parser_comments


def _flag(name: str, value: bool) -> str:
    return f"{name}={'true' if value else 'false'}"


def format_conv_setting(conv: ConvBlock) -> str:
    """`bottleneck(expansion=4)`, `basic`, `bottleneck(expansion=4, preact=false)`: the right side of `conv = ...`."""
    args = []
    # A bottleneck's expansion is worth seeing; a basic block's only when it is not 1.
    if conv.variant == "bottleneck" or conv.expansion != CONV_VARIANTS[conv.variant]:
        args.append(f"expansion={conv.expansion}")
    if not conv.preact:
        args.append(_flag("preact", conv.preact))
    return f"{conv.variant}({', '.join(args)})" if args else conv.variant


def format_block(block: AnyBlock, default_conv: ConvBlock, channels: int | None = None) -> str:
    """One block as written inside a stage: `conv`, `conv(basic)`, `msa(6, 4)`, `msa(3, window=global)`,
    `attn(3, 4, shift=2)`, `mlp(4)`, `merge`. `channels` (what the block receives) decides whether an
    `attn`'s dim_head is the default channels // heads."""
    return words.word(block.kind).text(block, default_conv, channels)


def format_stem(arch: Arch) -> str:
    """The stem as a spec writes it: `conv3x3(C)`, `conv7x7(C)` or `patch(...)`."""
    stem = arch.stem
    if not isinstance(stem, PatchStem):
        return f"{stem.kind}({stem.channels}, norm=true)" if stem.norm else f"{stem.kind}({stem.channels})"
    args = [str(stem.size), str(stem.channels)]
    if stem.stride != stem.size:
        args.append(f"stride={stem.stride}")
    if stem.norm:
        args.append("norm=true")
    return f"patch({', '.join(args)})"


@dataclass(frozen=True)
class _Run:
    """`unit` repeated `count` times; written `b*count` or `[b1 b2]*count`."""

    unit: tuple[str, ...]
    count: int

    @property
    def cost(self) -> tuple[int, int]:
        # Fewest blocks written first, then fewest elements: `conv*2 [conv msa]*2` beats
        # `conv*3 msa conv msa`.
        return (len(self.unit), 1)

    def text(self) -> str:
        if len(self.unit) == 1:
            return self.unit[0] if self.count == 1 else f"{self.unit[0]}*{self.count}"
        return f"[{' '.join(self.unit)}]*{self.count}"


def compress(items: Sequence[str]) -> list[str]:
    """The shortest run-length writing of a block sequence (dynamic programming, O(n^3))."""
    n = len(items)
    best: list[tuple[tuple[int, int], list[_Run]] | None] = [None] * (n + 1)
    best[n] = ((0, 0), [])
    for i in range(n - 1, -1, -1):
        candidates = []
        for period in range(1, (n - i) // 2 + 1 if n - i > 1 else 2):
            unit = tuple(items[i : i + period])
            if len(unit) < period:
                break
            count = 1
            while tuple(items[i + count * period : i + (count + 1) * period]) == unit:
                count += 1
            # Every repeat count up to the maximum is a candidate (a shorter run may let
            # the rest compress better).
            for c in range(1, count + 1):
                if period > 1 and c == 1:
                    continue  # `[a b]*1` is never shorter than `a b`
                run = _Run(unit, c)
                rest_cost, rest = best[i + period * c]  # type: ignore[misc]
                cost = (run.cost[0] + rest_cost[0], run.cost[1] + rest_cost[1])
                candidates.append((cost, [run, *rest]))
        best[i] = min(candidates, key=lambda cand: cand[0])
    return [run.text() for run in best[0][1]]  # type: ignore[index]


@dataclass
class Comments:
    """Comments to keep when re-printing a file (`archdsl fmt`), attached to what they precede.

    `before[key]`: whole-line comments written above a line; `after[key]`: a comment at
    the end of it. Keys: "arch", "input", "classes", "stem", "conv", "init", ("stage", i), "end".
    """

    before: dict[object, list[str]] = field(default_factory=dict)
    after: dict[object, str] = field(default_factory=dict)


def format_arch(arch: Arch, comments: Comments | None = None) -> str:
    """Canonical text of an IR (ending in a newline)."""
    comments = comments or Comments()
    lines: list[str] = []

    def emit(key: object, text: str, indent: str = "") -> None:
        lines.extend(indent + c for c in comments.before.get(key, []))
        trailing = comments.after.get(key)
        lines.append(indent + text + (f"  {trailing}" if trailing else ""))

    emit("arch", f"arch {arch.name} {{")
    i4 = "    "
    emit("input", f"input   {arch.input.channels}x{arch.input.height}x{arch.input.width}", i4)
    emit("classes", f"classes {arch.classes}", i4)
    emit("stem", f"stem    {format_stem(arch)}", i4)
    # A token net has no block that reads `conv`: it is only said when it matters.
    if arch.conv != ConvBlock() or any(b.follows_conv for st in arch.stages for b in st.blocks):
        emit("conv", f"conv  = {format_conv_setting(arch.conv)}", i4)
    if arch.head != "mean" or not arch.head_norm:
        emit("head", f"head    {arch.head}" + ("" if arch.head_norm else "(norm=false)"), i4)
    if arch.pos.kind != "none":
        emit("pos", f"pos     {arch.pos.kind}" + ("" if arch.pos.class_token else "(class=false)"), i4)
    if arch.norm != Norm():
        emit("norm", f"norm  = {arch.norm.kind}(eps={format_float(arch.norm.eps)})", i4)
    # Always said, default or not: where training starts is worth seeing.
    emit("init", f"init    {arch.init}", i4)
    if arch.stages:
        lines.append("")
    heads = []
    for index, stage in enumerate(arch.stages):
        # The first stage's stride=1 goes unsaid; later strides are always written, as
        # hand-written specs do, since they decide every map size after them.
        shown = not (index == 0 and stage.stride == 1)
        params = f"width={stage.width}" + (f", stride={stage.stride}" if shown else "")
        heads.append(f"stage {stage.name}({params})")
    # Stage bodies line up in one column, as in hand-written specs.
    column = max((len(h) for h in heads), default=0)
    shapes = iter(block_shapes(arch))
    for index, (head, stage) in enumerate(zip(heads, arch.stages, strict=True)):
        written = [format_block(b, arch.conv, next(shapes).in_channels) for b in stage.blocks]
        body = " ".join(compress(written))
        emit(("stage", index), f"{head.ljust(column)} {{ {body} }}" if body else f"{head.ljust(column)} {{ }}", i4)
    lines.extend(i4 + c for c in comments.before.get("end", []))
    emit("close", "}")
    lines.extend(comments.before.get("footer", []))
    return "\n".join(lines) + "\n"


def _attach_comments(text: str, node: ArchNode) -> Comments:
    """Attach each comment to the line it ends or to the next item below it; none is lost."""
    items: list[tuple[object, int, int]] = [("arch", node.keyword.span.line, node.keyword.span.line)]
    seen: set[str] = set()
    stage_index = 0
    for setting in node.settings:
        keyword = setting.keyword.text
        end = setting.body_span.end_line if setting.body_span else setting.span.end_line
        if keyword == "stage":
            items.append((("stage", stage_index), setting.span.line, end))
            stage_index += 1
        elif keyword not in seen:
            seen.add(keyword)
            items.append((keyword, setting.span.line, end))
    source_lines = text.splitlines()
    close_line = len(source_lines)
    while close_line > 1 and "}" not in source_lines[close_line - 1].split("#", 1)[0]:
        close_line -= 1
    result = Comments()
    for line, comment in parser_comments(text):
        whole_line = source_lines[line - 1].lstrip().startswith("#")
        owner = next((key for key, first, last in items if first <= line <= last), None)
        if owner is None and line == close_line and not whole_line:
            owner = "close"
        if (
            owner is not None
            and not whole_line
            and line == next(f for k, f, _ in items + [("close", close_line, 0)] if k == owner)
        ):
            result.after[owner] = f"{result.after[owner]}  {comment}" if owner in result.after else comment
            continue
        if owner is None:
            following = [key for key, first, _ in items if first > line]
            owner = following[0] if following else ("footer" if line > close_line else "end")
        result.before.setdefault(owner, []).append(comment)
    return result


def format_source(text: str, path: str = "<string>") -> str:
    """Canonical text of a spec file, keeping its comments (`archdsl fmt`). Raises `SpecError`.

    The text returned means what `text` means (its IR is equal): that is checked on every call,
    since a formatter that changed a design would do it silently."""
    node = parse(text, path)
    arch = lower(node, source=text, path=path)
    formatted = format_arch(arch, _attach_comments(text, node))
    if formatted != text and lower(parse(formatted, path), source=formatted, path=path) != arch:
        raise AssertionError(f"fmt changed the meaning of {path}")  # a bug in the printer: keep the traceback
    return formatted
