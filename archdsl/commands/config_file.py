"""`--config FILE.yaml`: a command's flags read from a YAML file, as timm's train.py reads its
`--config`; a flag given on the command line wins over the file.

The file is a mapping whose keys are the command's flags without the dashes, spelled with `_`
or `-` (`batch_size: 64` or `batch-size: 64`), or the name the value is kept under (`optimize:
false` is `--no-optimize`). A positional argument (`spec:`) and a flag the command line
requires (`dataset:`) may come from the file too. Each value goes through the flag's own
argparse `type=` and `choices=` checks, so `epochs: 0` is refused as `--epochs 0` is; a list
flag takes a YAML list or the comma string; a switch takes true or false (`sched_on_updates:
false` is `--no-sched-on-updates`, and so is `no_sched_on_updates: true`).

How: before argparse reads the command line, the file's values become the defaults of the
flags they set (and the flags they provide stop being required), for the length of that one
parse. Every mistake in the file is a `UsageError` naming the file and, where YAML knows it,
the line. Light at import: yaml is imported only when a command line names a file.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archdsl.commands._args import name_list
from archdsl.errors import UsageError, did_you_mean

CONFIG_FLAG = "--config"
# Flags whose value is a comma-separated list: the file may give them as a YAML list too (so may
# a flag made from a settings field whose type says `comma_list`, as the recipe's `--decay-milestones`).
LIST_TYPES = (name_list,)
# Keys that name an action but set nothing.
_NOT_SETTINGS = ("help", "config")
# Bounds on what a file may hold, checked on YAML's node tree before any value is built: a
# settings file needs neither deep nesting (yaml's composer recurses, and a RecursionError
# is no message) nor much data, and aliases let 700 bytes stand for gigabytes of lists once
# printed or joined, so the size counts every alias as the data it repeats.
MAX_DEPTH = 20  # levels of lists and mappings
MAX_NODES = 10_000  # values, lists and mappings, each alias counted as what it repeats
MAX_CHARACTERS = 1_000_000  # of all the scalars, counted so too


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """`--config FILE.yaml` on `parser`; `CommandParser` reads the file before the command line."""
    parser.add_argument(
        CONFIG_FLAG,
        metavar="FILE.yaml",
        help="read settings from a YAML file: one key per flag, without the dashes (`batch_size: 64` or "
        "`batch-size: 64`); positional arguments and required flags may be keys too; lists as [a, b] or "
        "`a,b`; switches as true or false (`optimize: false` is --no-optimize). "
        "Flags on the command line win over the file",
    )


def settings_from_config(parser: argparse.ArgumentParser, args: Sequence[str]) -> AbstractContextManager[None]:
    """While inside: the settings of the file `args` name with --config are `parser`'s defaults.

    Nothing happens when `parser` has no --config, `args` name no file or ask for --help.
    """
    path = _config_path(args) if CONFIG_FLAG in parser._option_string_actions else None
    if path is None:
        return nullcontext()
    return _defaults(_read_settings(parser, path))


@dataclass(frozen=True)
class _Setting:
    action: argparse.Action
    value: Any  # converted by the action's type, as a parsed flag's value is


def _config_path(args: Sequence[str]) -> str | None:
    """The file of the last `--config FILE` (or `--config=FILE`) before `--`; None for none or with --help."""
    path = None
    for index, word in enumerate(args):
        if word == "--":
            break
        if word in ("-h", "--help"):
            return None  # the help is printed without reading a file
        if word == CONFIG_FLAG and index + 1 < len(args):
            path = args[index + 1]
        elif word.startswith(CONFIG_FLAG + "="):
            path = word.split("=", 1)[1]
    return path  # `--config` without a file is left to argparse ("expected one argument")


@contextmanager
def _defaults(settings: list[_Setting]) -> Iterator[None]:
    saved = [(s.action, s.action.default, s.action.required, s.action.nargs) for s in settings]
    try:
        for setting in settings:
            action = setting.action
            action.default = setting.value
            action.required = False  # given by the file: `--dataset` or a positional may be left out
            if not action.option_strings and action.nargs is None:
                action.nargs = "?"  # a positional the file gives: optional on the command line
        yield
    finally:
        for action, default, required, nargs in saved:
            action.default, action.required, action.nargs = default, required, nargs


def _read_settings(parser: argparse.ArgumentParser, path: str) -> list[_Setting]:
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"{CONFIG_FLAG} {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{CONFIG_FLAG} {path}: not a UTF-8 text file") from None
    # yaml.safe_load's own two steps (SafeLoader: plain data, no Python objects), keeping the
    # node tree in between: it knows each key's line, and its size is checked before construction.
    loader = None
    try:
        loader = _bounded_loader(yaml)(text)  # refuses control characters (a ReaderError) at once
        node = loader.get_single_node()
        if node is not None:
            _check_size(node, path)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"{_where(path, mark.line + 1 if mark else None)}: not valid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        return []  # an empty file, or one of comments only: no settings
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: expected settings, one `key: value` per line, got a YAML {type(data).__name__}",
            hint="write e.g. `epochs: 3`",
        )
    names = _setting_names(parser)
    settings: list[_Setting] = []
    lines: dict[argparse.Action, int] = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        where = _where(path, line)
        key = loader.construct_object(key_node)  # what safe_load made of it: "epochs", or 1 for `1: x`
        action, by_dest = _action_for(parser, names, key, where)
        if action in lines:
            raise UsageError(f"{where}: `{key}` sets {_flag(action)} again (line {lines[action]})")
        lines[action] = line
        value = loader.construct_object(value_node, deep=True)
        setting = _convert(parser, action, by_dest, key, value, where)
        if setting is not None:
            settings.append(setting)
    return settings


def _bounded_loader(yaml: Any) -> type:
    """yaml's SafeLoader that refuses nesting deeper than `MAX_DEPTH` while it composes the node
    tree (a YAMLError with the line, before the composer's recursion gets deep)."""

    class BoundedLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.depth >= MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def _check_size(root: Any, path: str) -> None:
    """A `UsageError` when the data `root` stands for, aliases expanded, exceeds `MAX_NODES` or
    `MAX_CHARACTERS`. Counted once per node (an alias is the same node object again), so a bomb
    costs as little to measure as to read."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, characters) it expands to
    longest: list[Any] = []  # the longest scalar (a key or a value) met, to name it
    aliased = False  # whether a node was met twice: then it is the aliases that make the file large

    def size(node: Any) -> tuple[int, int]:
        nonlocal aliased
        known = sizes.get(id(node))
        if known is not None:
            aliased = True
            return known
        nodes, characters = 1, 0
        if isinstance(node.value, str):
            characters = len(node.value)
            if not longest or characters > len(longest[0].value):
                longest[:] = [node]
        else:  # a sequence's nodes, or a mapping's (key, value) pairs
            for item in node.value:
                for child in item if isinstance(item, tuple) else (item,):
                    more_nodes, more_characters = size(child)
                    nodes, characters = nodes + more_nodes, characters + more_characters
        sizes[id(node)] = (nodes, characters)
        return nodes, characters

    nodes, characters = size(root)  # recursion bounded by MAX_DEPTH
    if nodes <= MAX_NODES and characters <= MAX_CHARACTERS:
        return
    if not aliased and longest and len(longest[0].value) > MAX_CHARACTERS:
        raise UsageError(
            f"{_where(path, longest[0].start_mark.line + 1)}: too large for a settings file: a key or value of "
            f"{len(longest[0].value):,} characters (at most {MAX_CHARACTERS:,} in the whole file)",
            hint="a setting's value is a number, a name or a path",
        )
    if not aliased:
        raise UsageError(
            f"{path}: too large for a settings file: {nodes:,} values and {characters:,} characters "
            f"(at most {MAX_NODES:,} values and {MAX_CHARACTERS:,} characters)",
            hint="a settings file holds the flags of one command, one `key: value` per line",
        )
    raise UsageError(
        f"{path}: too large for a settings file: its aliases expand to more than "
        f"{MAX_NODES:,} values or {MAX_CHARACTERS:,} characters",
        hint="write the settings out, one `key: value` per line",
    )


def _where(path: str, line: int | None) -> str:
    return f"{path}:{line}" if line else path


def _setting_names(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.Action, bool]]:
    """Each key a file may use -> its action, and whether the key is the action's dest (the
    value kept) rather than its flag (`no_optimize`, whose true means "the flag is given")."""
    names: dict[str, tuple[argparse.Action, bool]] = {}
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--"):  # (`no_progress: true` is `progress: false`: _convert)
                names[flag[2:].replace("-", "_")] = (action, False)
        names[action.dest] = (action, True)
    return names


def _negated(action: argparse.Action, key: str) -> bool:
    """Whether `key` names the `--no-x` half of a switch pair (`no_progress: true` is `--no-progress`)."""
    return f"--{key.replace('_', '-')}" in action.option_strings and key.replace("_", "-").startswith("no-")


def _action_for(
    parser: argparse.ArgumentParser, names: dict[str, tuple[argparse.Action, bool]], key: object, where: str
) -> tuple[argparse.Action, bool]:
    name = key.replace("-", "_") if isinstance(key, str) else None
    if name == "config":
        raise UsageError(f"{where}: a config file cannot name another one (`{key}`)")
    if name == "help":
        raise UsageError(f"{where}: `{key}` is not a setting", hint=f"run `{parser.prog} --help` for the flags")
    if name is None or name not in names:
        known = [n for n in names if n not in _NOT_SETTINGS]
        hint = did_you_mean(name, known) if name else None
        raise UsageError(
            f"{where}: `{key}` is not a setting of `{parser.prog}`",
            hint=hint or f"the keys are its flags without the dashes; see `{parser.prog} --help`",
        )
    return names[name]


def _flag(action: argparse.Action) -> str:
    """`--epochs`, or `spec` for a positional argument."""
    return "/".join(action.option_strings) or action.dest


def _name(action: argparse.Action) -> str:
    """How argparse names the argument in its messages: `argument --epochs`, `argument spec`."""
    return f"argument {_flag(action)}"


def _convert(
    parser: argparse.ArgumentParser, action: argparse.Action, by_dest: bool, key: str, value: Any, where: str
) -> _Setting | None:
    """The file's `value` as the parsed value of `action`; None for a switch the file leaves off."""
    if isinstance(action, argparse.BooleanOptionalAction):  # --x / --no-x: true or false
        if not isinstance(value, bool):
            raise UsageError(f"{where}: `{key}` is a switch ({_flag(action)}): expected true or false, got {value!r}")
        return _Setting(action, value != (not by_dest and _negated(action, key)))
    if isinstance(action, argparse._StoreConstAction):  # store_true, store_false
        if not isinstance(value, bool):
            raise UsageError(f"{where}: `{key}` is a switch ({_flag(action)}): expected true or false, got {value!r}")
        # `optimize: false` (the dest) and `no_optimize: true` (the flag) both mean "--no-optimize given".
        given = value == action.const if by_dest else value
        return _Setting(action, action.const) if given else None
    if type(action) is not argparse._StoreAction or action.nargs not in (None, "?"):
        raise UsageError(f"{where}: {_name(action)} cannot be set in a config file")
    if value is None:
        raise UsageError(f"{where}: `{key}` has no value", hint="leave the key out for the default")
    if isinstance(value, list):
        if action.type not in LIST_TYPES and not getattr(action.type, "comma_list", False):
            raise UsageError(f"{where}: {_name(action)}: expected one value, got a list")
        if not all(_is_scalar(item) for item in value):
            raise UsageError(f"{where}: {_name(action)}: expected a list of names or numbers")
        text = ",".join(str(item) for item in value)
    elif _is_scalar(value):
        text = str(value)
    elif isinstance(value, bool):  # YAML reads yes/no/on/off as booleans too
        raise UsageError(
            f"{where}: {_name(action)}: expected a value, got {str(value).lower()}",
            hint="quote a word YAML reads as true or false: 'yes'",
        )
    else:  # a mapping, a date
        raise UsageError(f"{where}: {_name(action)}: expected a value, got {value!r}")
    try:
        # argparse's own conversion and checks of one command-line word: the same messages.
        return _Setting(action, parser._get_values(action, [text]))
    except argparse.ArgumentError as err:
        raise UsageError(f"{where}: {err}") from None


def _is_scalar(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
