"""Block kinds from outside the package: their declarations and the registry that holds them.

A plug-in kind is declared once, here, and every stage reads the declaration: the front end
binds and checks its arguments (with the messages of the built-in words: positions, carets,
did-you-mean), the IR keeps it as an `archdsl.ir.ExtBlock`, shape inference applies its
`channels` and `downsamples` rule, the semantic checks ask its `check` (each `Issue` reported at
the argument or stage setting it names), the summary asks its `count` and `activations`, the
printer writes it back and the compiler calls its `build`. Register a kind from Python with `register_block(...)`, or
from an installed package with an entry point in the group `archdsl.blocks` (the entry point
names a `BlockKind` or a function returning one or several); entry points are read the first
time a kind is looked up.

This module stays torch-free (it is part of the language core): a kind's `build` may import
torch and timm inside itself, and `count` may be `archdsl.nn.meta_count.meta_count(build)`,
which builds the block on the meta device only when a summary asks for it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal

from archdsl.errors import UserError

ENTRY_POINT_GROUP = "archdsl.blocks"
Scalar = int | float | bool | str
# The built-in words of a stage body; a plug-in kind cannot take one of them.
BUILTIN_KINDS = ("conv", "msa", "attn", "mlp", "merge", "pool", "smooth")
_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")


@dataclass(frozen=True)
class Arg:
    """One argument of a block kind: its name, type, bounds and default (None: required).

    `type` is `int`, `float`, `bool` or `str`; a `str` argument takes one of `choices`,
    written as a bare word (`act=gelu`). Numbers must lie within `low`..`high` (either may be None).
    """

    name: str
    type: type = int
    default: Scalar | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class Placement:
    """What a block's `count`, `check`, `activations` and `build` are told: its arguments (every
    default filled in) and where it sits (channels and map size in and out, the stage's width, the
    stride it applies, the spec's LayerNorm eps, the stage's name for messages)."""

    args: Mapping[str, Scalar]
    in_channels: int
    out_channels: int
    width: int
    stride: int
    in_size: tuple[int, int]
    out_size: tuple[int, int]
    eps: float = 1e-6
    stage: str = ""


@dataclass(frozen=True)
class Issue:
    """A problem a kind's `check` finds where a block sits, reported as the built-in words' are: at
    the value of its argument `arg`, or at its stage's `width` or `stride` setting (`stage`), or
    (neither) at the block; `hint` says how to fix it."""

    message: str
    hint: str | None = None
    arg: str | None = None
    stage: Literal["width", "stride"] | None = None


# (params, multiply-accumulates per image) of a block where it sits.
CountRule = Callable[[Placement], tuple[int, int]]
# The module of a block where it sits, with its stochastic-depth rate.
BuildRule = Callable[[Placement, float], Any]
# Problems of a block where it sits: `Issue`s, or (argument name or None for the block, message, hint).
CheckRule = Callable[[Placement], Iterable[Issue | tuple[str | None, str, str | None]]]
# Values one image keeps in the block besides its output (hidden layers, attention maps).
ActivationsRule = Callable[[Placement], int]


@dataclass(frozen=True)
class BlockKind:
    """A block kind a spec can write inside a stage, e.g. `mbconv(6, kernel=5)`.

    - `args`: its arguments, in positional order.
    - `layout`: what it reads and writes, feature maps (`"map"`, B x C x H x W) or tokens.
    - `channels`: its output channels, the stage's `"width"` or the input's (`"keep"`).
    - `downsamples`: whether it applies its stage's stride (then it may start a strided stage;
      its map becomes ceil(size / stride), as a 3x3 conv with padding 1 does).
    - `count`: (params, MACs) where it sits; `build`: the torch module (a callable, or
      `"module:function"` imported on first use).
    - `check`: its own problems where it sits (`Issue`s: an even kernel, a width it cannot split),
      beyond its arguments' bounds and the rules every block obeys.
    - `activations`: the values one image keeps in it besides its output, for the memory
      estimate (`archdsl.nn.summary.ensure_fits`); None: none.
    - `description`: a few words for messages (`an inverted residual`).
    """

    name: str
    args: tuple[Arg, ...]
    count: CountRule
    build: BuildRule | str
    layout: Literal["map", "tokens"] = "map"
    channels: Literal["width", "keep"] = "width"
    downsamples: bool = False
    check: CheckRule | None = None
    activations: ActivationsRule | None = None
    description: str = ""
    example: str = ""  # a call that reads well in hints, e.g. `mbconv(6)`; made up from the args if empty
    module: str = field(default="", compare=False)  # who registered it, for messages

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"block kind name {self.name!r}: use lower-case letters, digits and `_`")
        if self.name in BUILTIN_KINDS:
            raise ValueError(f"`{self.name}` is a built-in block kind")
        names = [arg.name for arg in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"block kind `{self.name}`: an argument is declared twice: {names}")
        for arg in self.args:
            if arg.type not in (int, float, bool, str):
                raise ValueError(f"argument `{arg.name}` of `{self.name}`: type must be int, float, bool or str")
            if arg.type is str and not arg.choices:
                raise ValueError(f"argument `{arg.name}` of `{self.name}`: a str argument needs its `choices`")
        seen_optional = False
        for arg in self.args:
            if arg.required and seen_optional:
                raise ValueError(f"block kind `{self.name}`: required `{arg.name}` after an argument with a default")
            seen_optional = seen_optional or not arg.required

    def arg(self, name: str) -> Arg:
        return next(arg for arg in self.args if arg.name == name)

    def builder(self) -> BuildRule:
        """`build`, imported if it was given as `"module:function"`."""
        if not isinstance(self.build, str):
            return self.build
        module, _, attr = self.build.partition(":")
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]

    def issues(self, place: Placement) -> list[Issue]:
        """What `check` finds where a block sits, as `Issue`s (a tuple `(arg, message, hint)` read as one)."""
        if self.check is None:
            return []
        return [
            found if isinstance(found, Issue) else Issue(found[1], found[2], arg=found[0])
            for found in self.check(place)
        ]

    def hint_example(self) -> str:
        if self.example:
            return self.example
        required = [str(_example_value(arg)) for arg in self.args if arg.required]
        return f"`{self.name}({', '.join(required)})`" if required else f"`{self.name}`"


def initial(arg: Arg) -> Scalar:
    """An argument's default (as its type, so that `0` and `0.0` make one IR), or for a required one a
    neutral value that stands in for a wrong one while the rest of the spec is checked."""
    value = arg.default if arg.default is not None else _example_value(arg) if arg.type is not bool else True
    return float(value) if arg.type is float else value


def _example_value(arg: Arg) -> Scalar:
    if arg.choices:
        return arg.choices[0]
    if arg.type is bool:
        return "true"
    low = arg.low if arg.low is not None and arg.low > 0 else 1
    return float(low) if arg.type is float else int(low)


_REGISTRY: dict[str, BlockKind] = {}
_entry_points_read = False


def register_block(kind: BlockKind, *, replace: bool = False) -> BlockKind:
    """Make `kind` a word of the language (and a block of every stage after it); returns it.

    Registering another kind under a taken name raises `ValueError` unless `replace=True`.
    """
    if not isinstance(kind, BlockKind):
        raise TypeError(f"register_block takes an archdsl.kinds.BlockKind, not {type(kind).__name__}")
    old = _REGISTRY.get(kind.name)
    if old is not None and old != kind and not replace:
        raise ValueError(f"block kind `{kind.name}` is already registered (pass replace=True to replace it)")
    _REGISTRY[kind.name] = kind
    return kind


def unregister_block(name: str) -> None:
    """Forget a registered kind (specs using it no longer parse)."""
    _REGISTRY.pop(name, None)


def _read_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
            declared = loaded() if callable(loaded) and not isinstance(loaded, BlockKind) else loaded
        except Exception as err:  # a broken plug-in is the user's to fix: say which one, not a traceback
            raise UserError(
                f"the block kinds of entry point `{point.name}` ({point.value}) could not be loaded: {err}"
            ) from err
        for kind in [declared] if isinstance(declared, BlockKind) else list(declared):
            if kind.name not in _REGISTRY:
                register_block(kind)


def block_kind(name: str) -> BlockKind | None:
    """The registered kind called `name`, or None (built-in words are not in the registry)."""
    if name not in _REGISTRY:
        _read_entry_points()
    return _REGISTRY.get(name)


def registered_kinds() -> tuple[str, ...]:
    """The names of the registered (plug-in) kinds, in registration order."""
    _read_entry_points()
    return tuple(_REGISTRY)


def require_kind(name: str) -> BlockKind:
    """The registered kind called `name`, or a `UserError` saying how to make it known."""
    kind = block_kind(name)
    if kind is None:
        raise UserError(
            f"unknown block kind `{name}`",
            hint="register it first (archdsl.register_block) or install the package that declares it",
        )
    return kind
