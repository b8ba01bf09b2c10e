"""The words of registered kinds (`archdsl.kinds`): read, written, checked and counted as their declaration says."""

from __future__ import annotations

from archdsl import kinds
from archdsl.ir import AnyBlock, Arch, BlockShape, ConvBlock, ExtBlock, placement
from archdsl.lang.arguments import ArgumentReader
from archdsl.lang.numbers import format_float
from archdsl.lang.parser import BlockRef, Value
from archdsl.lang.sites import Problem, Site
from archdsl.lang.words.base import START_WITH_A_DOWNSAMPLER, Lowered, Word


def lower(reader: ArgumentReader, ref: BlockRef, default: ConvBlock) -> Lowered:
    """A registered kind (`archdsl.kinds`): its arguments read as its declaration says, each bad one
    reported and replaced by its default (or a neutral value, for a required one)."""
    kind = kinds.require_kind(ref.name.text)
    spans = {"": ref.span}
    name, example = kind.name, kind.hint_example()
    values = {arg.name: kinds.initial(arg) for arg in kind.args}
    required = [arg.name for arg in kind.args if arg.required]
    if not kind.args and ref.args:
        what = f"it is {kind.description}: " if kind.description else ""
        reader.error(ref.span, f"`{name}` takes no arguments", f"{what}write `{name}`")
    elif ref.args is None and required:
        listed = " and ".join(f"`{arg}`" for arg in required)
        reader.error(ref.span, f"`{name}` needs {listed}", f"e.g. {example}")
    else:
        bound = reader.bind(ref.args or (), name, tuple(arg.name for arg in kind.args))
        for arg in kind.args:
            given = reader.require(bound, arg.name, name, ref.span, example) if arg.required else bound.get(arg.name)
            if given is None:
                continue
            spans[arg.name] = given.value.span
            value = _argument(reader, given.value, arg)
            if value is not None:
                values[arg.name] = value
    block = ExtBlock(kind=name, args=tuple(values.items()))
    return Lowered(block, spans)


def _argument(reader: ArgumentReader, value: Value, arg: kinds.Arg) -> int | float | bool | str | None:
    """One argument of a registered kind, read by its declared type and bounds."""
    if arg.type is bool:
        return reader.boolean(value, arg.name)
    if arg.type is str:
        name = reader.choice(value, arg.choices, arg.name, f"e.g. `{arg.name}={arg.choices[0]}`")
        return None if name is None else name.text
    if arg.type is float:
        return reader.real(value, arg.name, arg.low, arg.high)
    return reader.integer(value, arg.name, arg.low, arg.high)


def text(block: AnyBlock, default_conv: ConvBlock, channels: int | None) -> str:
    """A registered kind as written: its required arguments by position, then the others that are
    not at their default by keyword (`mbconv(24, kernel=5)`), or the bare word."""
    assert isinstance(block, ExtBlock)
    written = []
    for arg in block.declaration.args:
        value = block.arguments[arg.name]
        text = "true" if value is True else "false" if value is False else _value_text(value)
        if arg.required:
            written.append(text)
        elif value != kinds.initial(arg) or type(value) is not type(kinds.initial(arg)):
            written.append(f"{arg.name}={text}")
    return f"{block.kind}({', '.join(written)})" if written else block.kind


def _value_text(value: int | float | str) -> str:
    return format_float(value) if isinstance(value, float) else str(value)


def count(arch: Arch, shape: BlockShape, width: int) -> tuple[int, int]:
    assert isinstance(shape.block, ExtBlock)
    return shape.block.declaration.counts(placement(arch, shape))


def check(site: Site) -> list[Problem]:
    """The declaration's `Issue`s, each at the path of what it names (an argument, the stage's width
    or stride, or the block): the front end underlines that value."""
    block = site.shape.block
    assert isinstance(block, ExtBlock)
    found = []
    for issue in block.declaration.issues(placement(site.arch, site.shape)):
        if issue.stage is not None:
            path = site.stage_path + (issue.stage,)
        else:
            path = site.path + ((issue.arg,) if issue.arg else ())
        found.append(Problem(path, issue.message, issue.hint))
    return found


def activations(arch: Arch, shape: BlockShape) -> int:
    assert isinstance(shape.block, ExtBlock)
    return shape.block.declaration.activation_count(placement(arch, shape))


def word(name: str) -> Word:
    kind = kinds.require_kind(name)
    # A map block that cannot downsample is followed by one that can: a `conv`, or a plug-in like itself.
    start_hint = (
        "start the stage with a `conv` or another block that downsamples, or give it stride=1"
        if kind.layout == "map"
        else START_WITH_A_DOWNSAMPLER
    )
    # class_token=False: a registered kind is not told of a class token before the patches (its
    # Placement has none), so a `head class` net must not hand it 1 + HW tokens.
    return Word(
        name, lower, text, count, noun=f"a `{name}` block", check=check, start_hint=start_hint,
        activations=activations, class_token=False,
    )  # fmt: skip
