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
import math
import numbers
import re
import reprlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal, TypeVar

from archdsl.errors import UserError

ENTRY_POINT_GROUP = "archdsl.blocks"
Scalar = int | float | bool | str
# The built-in words of a stage body; a plug-in kind cannot take one of them.
BUILTIN_KINDS = ("conv", "msa", "attn", "mlp", "merge", "pool", "smooth")
_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
# `build` given as text: an importable module and a function in it (`"package.module:function"`).
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
# The largest count a `count` or `activations` hook may return: a 64-bit integer's, what numpy and torch
# keep a count in. Beyond it the memory estimate's bytes no longer fit a float (10**400: OverflowError).
MAX_COUNT = 2**63 - 1
MAX_COUNT_TEXT = "2**63 - 1"
# What a user reads after a plug-in's hook or module misbehaved.
PLUGIN_BUG_HINT = "the plug-in that declares it has a bug: report it to its author"
_T = TypeVar("_T")


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

    def problem(self, value: object) -> str | None:
        """Why `value` cannot be this argument (its type, bounds or choices), or None. What the IR
        checks of a stored block (a checkpoint, a trial) and `BlockKind` of a declared default; the
        front end reads a spec's values with messages of its own."""
        if self.type is bool:
            return None if isinstance(value, bool) else f"{self.name} must be true or false, got {shown(value)}"
        if self.type is str:
            if value in self.choices:
                return None
            return f"{self.name} must be one of {', '.join(self.choices)}, got {shown(value)}"
        # bool is an int to Python, not to a spec; an int widens to a float argument only.
        number = (int, float) if self.type is float else (int,)
        # Only a float can be infinite or NaN; an int may be too large for one (a stored 10**400).
        if (
            isinstance(value, bool)
            or not isinstance(value, number)
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            return f"{self.name} must be {'a number' if self.type is float else 'a whole number'}, got {shown(value)}"
        if self.low is not None and value < self.low:
            return f"{self.name} must be at least {self.low:g}, got {shown(value)}"
        if self.high is not None and value > self.high:
            return f"{self.name} must be at most {self.high:g}, got {shown(value)}"
        return None


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
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"block kind name {self.name!r}: use lower-case letters, digits and `_`")
        if self.name in BUILTIN_KINDS:
            raise ValueError(f"`{self.name}` is a built-in block kind")
        if self.layout not in ("map", "tokens"):
            raise ValueError(f'block kind `{self.name}`: layout must be "map" or "tokens", got {self.layout!r}')
        if self.channels not in ("width", "keep"):
            raise ValueError(f'block kind `{self.name}`: channels must be "width" or "keep", got {self.channels!r}')
        if isinstance(self.build, str) and not _IMPORT_PATH.match(self.build):
            raise ValueError(
                f'block kind `{self.name}`: build {self.build!r} is not "module:function"'
                ' (e.g. "my_blocks:build_dsconv"); or pass the function itself'
            )
        if not self.module:  # who declared it, for messages about its hooks
            object.__setattr__(self, "module", _declaring_module())
        names = [arg.name for arg in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"block kind `{self.name}`: an argument is declared twice: {names}")
        for arg in self.args:
            _check_declared(self.name, arg)
        seen_optional = False
        for arg in self.args:
            if arg.required and seen_optional:
                raise ValueError(f"block kind `{self.name}`: required `{arg.name}` after an argument with a default")
            seen_optional = seen_optional or not arg.required

    def arg(self, name: str) -> Arg:
        return next(arg for arg in self.args if arg.name == name)

    @property
    def title(self) -> str:
        """How messages name it: "block kind `mbconv` (declared in archdsl_timm_blocks)"."""
        return f"block kind `{self.name}`" + (f" (declared in {self.module})" if self.module else "")

    def builder(self) -> BuildRule:
        """`build`, imported if it was given as `"module:function"` (a `UserError` if it cannot be)."""
        if not isinstance(self.build, str):
            return self.build
        return call_hook(self, f"build `{self.build}`", _imported, self.build)

    def counts(self, place: Placement) -> tuple[int, int]:
        """(params, MACs) where a block sits, as `count` says."""
        return call_hook(self, "count", _counted, self.count, place)

    def activation_count(self, place: Placement) -> int:
        """The values one image keeps in a block besides its output, as `activations` says (0 if not given)."""
        if self.activations is None:
            return 0
        return call_hook(self, "activations", _whole, self.activations, place)

    def issues(self, place: Placement) -> list[Issue]:
        """What `check` finds where a block sits, as `Issue`s (a tuple `(arg, message, hint)` read as one)."""
        if self.check is None:
            return []
        return call_hook(self, "check", _issues, self.check, place)

    def hint_example(self) -> str:
        if self.example:
            return self.example
        required = [str(_example_value(arg)) for arg in self.args if arg.required]
        return f"`{self.name}({', '.join(required)})`" if required else f"`{self.name}`"


def call_hook(kind: BlockKind, hook: str, function: Callable[..., _T], *args: Any) -> _T:
    """`function(*args)`, one of `kind`'s plug-in callables: what it raises becomes a `UserError` naming
    the kind, the hook, the module that declared it and the error. A broken plug-in is its author's
    mistake, not archdsl's: the user gets a message and an exit status, not a traceback. A `UserError`
    it raises itself passes as it is; so does Ctrl-C (KeyboardInterrupt), the one way to stop a hook
    that hangs, which then names the hook and the kind ("interrupted in the count of block kind ...": the
    one that hangs). `sys.exit` in a hook is a failure too: it would end archdsl with no word and status 0."""
    try:
        return function(*args)
    except UserError:
        raise
    except KeyboardInterrupt as err:
        if err.args:  # already says where (a hook called from another's)
            raise
        raise KeyboardInterrupt(f"in the {hook} of {kind.title}") from None
    except BaseException as err:
        raise UserError(f"{kind.title}: its {hook} failed: {failure(err)}", hint=PLUGIN_BUG_HINT) from err


def failure(err: BaseException) -> str:
    """What a plug-in's error says, for a message: "it called sys.exit(2)" for an exit, else the
    error's type and text."""
    if isinstance(err, SystemExit):
        return f"it called sys.exit({'' if err.code is None else shown(err.code)})"
    return f"{type(err).__name__}: {err}"


class _Brief(reprlib.Repr):
    """`repr` cut short for messages, and safe for an integer too long for Python to write out (4,300
    digits and more raise ValueError): one of more than 30 digits is written as its power of ten."""

    def repr_int(self, x: int, level: int) -> str:
        if abs(x) < 10**30:
            return repr(x)
        return f"{'-' if x < 0 else ''}about 10^{math.log10(abs(x)):.0f}"


_BRIEF = _Brief()
_BRIEF.maxstring = _BRIEF.maxother = 80


def shown(value: object) -> str:
    """`value` (what a hook returned, a stored argument) as a message quotes it: `repr`, shortened."""
    return _BRIEF.repr(value)


def _declaring_module() -> str:
    """The module whose code makes a `BlockKind`: the first caller outside this module (its
    `__post_init__` and dataclass `__init__`) and `dataclasses` (`replace`). Not the module of its
    hooks: `count` may come from a helper (`archdsl.nn.meta_count`)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") in (__name__, "dataclasses"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", ""))


def _imported(path: str) -> BuildRule:
    module, _, attr = path.partition(":")
    found: Any = importlib.import_module(module)
    for part in attr.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{path} is a {type(found).__name__}, not a function")
    return found  # type: ignore[no-any-return]


def _counted(rule: CountRule, place: Placement) -> tuple[int, int]:
    counted = rule(place)
    if not (isinstance(counted, tuple) and len(counted) == 2 and all(_is_whole(n) and n >= 0 for n in counted)):
        raise TypeError(f"it returned {shown(counted)}, not (params, MACs): two whole numbers, at least 0")
    for what, number in zip(("params", "MACs"), counted, strict=True):
        _within_bound(counted, what, number)
    return int(counted[0]), int(counted[1])


def _whole(rule: ActivationsRule, place: Placement) -> int:
    counted = rule(place)
    if not (_is_whole(counted) and counted >= 0):
        raise TypeError(f"it returned {shown(counted)}, not a whole number at least 0")
    _within_bound(counted, "values", counted)
    return int(counted)


def _within_bound(returned: object, what: str, number: int) -> None:
    if number > MAX_COUNT:
        raise ValueError(
            f"it returned {shown(returned)}: {what} more than {MAX_COUNT_TEXT}, the largest count archdsl keeps"
        )


def _is_whole(value: object) -> bool:
    """A whole number a hook may return: an int or numpy's (any `numbers.Integral`); not a bool, and
    not a torch tensor (`.item()` turns one into an int)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _issues(rule: CheckRule, place: Placement) -> list[Issue]:
    found: list[Issue] = []
    for item in rule(place) or ():
        if isinstance(item, Issue):
            found.append(item)
        elif isinstance(item, tuple) and len(item) == 3:
            found.append(Issue(str(item[1]), None if item[2] is None else str(item[2]), arg=item[0]))
        else:
            raise TypeError(f"it gave {shown(item)}, not an Issue or a tuple (argument or None, message, hint)")
    return found


def _check_declared(kind: str, arg: Arg) -> None:
    """A declaration's mistakes in one argument, found when it is declared (not when a spec uses it)."""
    where = f"argument {arg.name!r} of `{kind}`"
    if not isinstance(arg.name, str) or not _NAME.match(arg.name):
        raise ValueError(f"{where}: use lower-case letters, digits and `_` (it is written `name=value`)")
    if arg.type not in (int, float, bool, str):
        raise ValueError(f"{where}: type must be int, float, bool or str")
    if arg.type is str and not arg.choices:
        raise ValueError(f"{where}: a str argument needs its `choices`")
    if arg.choices and arg.type is not str:
        raise ValueError(f"{where}: only a str argument takes `choices`")
    if not all(isinstance(choice, str) for choice in arg.choices):
        raise ValueError(f"{where}: choices are words (str), got {arg.choices!r}")
    for bound in ("low", "high"):
        value = getattr(arg, bound)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{where}: {bound} must be a number, got {value!r}")
    if arg.low is not None and arg.high is not None and arg.low > arg.high:
        raise ValueError(f"{where}: low {arg.low:g} is above high {arg.high:g}")
    if arg.default is not None:
        problem = arg.problem(arg.default)
        if problem is not None:
            raise ValueError(f"{where}: its default does not fit: {problem}")


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
    value: float = arg.low if arg.low is not None and arg.low > 0 else 1
    if arg.high is not None and value > arg.high:
        value = arg.high  # a neutral value stays within the bounds, so that the IR holding it is valid
    if arg.type is float:
        return float(value)
    # A whole number within the bounds: up from a fractional low, down from a fractional high.
    return math.ceil(value) if value == arg.low else math.floor(value)


_REGISTRY: dict[str, BlockKind] = {}
_entry_points_read = False
_entry_point_failures: list[str] = []  # why each entry point that failed to load failed, for hints


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
    """Register the kinds of every entry point in `ENTRY_POINT_GROUP`, each on its own: one that
    fails to load is noted (`_entry_point_failures`) and the others still load. Its failure is told
    only where it matters, in the hint of a block name that stays unknown (`unknown_kind_hint`): a
    broken plug-in the spec does not use must not stop it, nor hide a typo's did-you-mean."""
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            declared = _declared_kinds(point.load())
            for kind in declared:
                if kind.name not in _REGISTRY:
                    register_block(kind)
        except KeyboardInterrupt:  # a plug-in that hangs as it loads: say which
            raise KeyboardInterrupt(f"while loading {_entry_point_title(point)}") from None
        # A broken plug-in is its author's to fix: say which one, not a traceback. `sys.exit` while
        # loading too: it would end archdsl with no word and status 0.
        except BaseException as err:
            _entry_point_failures.append(f"{_entry_point_title(point)} could not be loaded: {failure(err)}")


def _entry_point_title(point: EntryPoint) -> str:
    """How messages name an entry point: "the archdsl.blocks entry point `timm` (pkg:kinds) of the distribution
    pkg"."""
    dist = getattr(getattr(point, "dist", None), "name", None)  # None: not from an installed distribution
    source = f" of the distribution {dist}" if dist else ""
    return f"the {ENTRY_POINT_GROUP} entry point `{point.name}` ({point.value}){source}"


def _declared_kinds(loaded: object) -> list[BlockKind]:
    """What an entry point names, as the kinds it declares: a `BlockKind`, a list of them, or a
    function returning either."""
    declared = loaded() if callable(loaded) and not isinstance(loaded, BlockKind) else loaded
    if isinstance(declared, BlockKind):
        return [declared]
    if isinstance(declared, str | bytes | Mapping) or not isinstance(declared, Iterable):
        raise TypeError(f"it gave {type(declared).__name__}, not a BlockKind or a list of them")
    found = list(declared)
    wrong = [type(item).__name__ for item in found if not isinstance(item, BlockKind)]
    if wrong:
        raise TypeError(f"it gave {', '.join(wrong)} among its kinds, not BlockKind")
    return found


def entry_point_failures() -> tuple[str, ...]:
    """Why each entry point in `ENTRY_POINT_GROUP` that failed to load failed (read now if not yet)."""
    _read_entry_points()
    return tuple(_entry_point_failures)


def unknown_kind_hint() -> str:
    """How a block kind becomes known, and which entry points failed to load (they may have declared it)."""
    how = (
        "a block kind is added from Python (archdsl.register_block) or by an installed package's"
        f' `{ENTRY_POINT_GROUP}` entry point; see docs/language.md, "Your own block kinds"'
    )
    return "; ".join([how, *entry_point_failures()])


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
        raise UserError(f"unknown block kind `{name}`", hint=unknown_kind_hint())
    return kind
