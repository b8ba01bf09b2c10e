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
parse. The flags are those the parser recorded (archdsl.commands.recording_parser), and a value
is converted by declaring its argument again, alone, on a parser of its own: argparse's public
API only, and argparse's own messages. Every mistake in the file is a `UsageError` naming the
file and, where YAML knows it, the line. Light at import: yaml is imported only when a command
line names a file.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archdsl.commands._args import name_list
from archdsl.commands.recording_parser import AddedArgument, RecordingParser
from archdsl.errors import UsageError, did_you_mean
from archdsl.yaml_text import read_settings

CONFIG_FLAG = "--config"
# Flags whose value is a comma-separated list: the file may give them as a YAML list too (so may
# a flag made from a settings field whose type says `comma_list`, as the recipe's `--decay-milestones`).
LIST_TYPES = (name_list,)
# Keys that name an action but set nothing.
_NOT_SETTINGS = ("help", "config")


def add_config_argument(parser: RecordingParser) -> None:
    """`--config FILE.yaml` on `parser`; `CommandParser` reads the file before the command line."""
    parser.add_argument(
        CONFIG_FLAG,
        metavar="FILE.yaml",
        help="read settings from a YAML file: one key per flag, without the dashes (`batch_size: 64` or "
        "`batch-size: 64`); positional arguments and required flags may be keys too; lists as [a, b] or "
        "`a,b`; switches as true or false (`optimize: false` is --no-optimize). "
        "Flags on the command line win over the file",
    )


def settings_from_config(parser: RecordingParser, args: Sequence[str]) -> AbstractContextManager[None]:
    """While inside: the settings of the file `args` name with --config are `parser`'s defaults.

    Nothing happens when `parser` has no --config, `args` name no file or ask for --help.
    """
    has_config = any(CONFIG_FLAG in added.action.option_strings for added in parser.added)
    path = _config_path(args) if has_config else None
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


def _read_settings(parser: RecordingParser, path: str) -> list[_Setting]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"{CONFIG_FLAG} {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{CONFIG_FLAG} {path}: not a UTF-8 text file") from None
    names = _setting_names(parser)
    settings: list[_Setting] = []
    lines: dict[argparse.Action, int] = {}
    for entry in read_settings(text, path):
        added, by_dest = _argument_for(parser, names, entry.key, entry.where)
        action = added.action
        if action in lines:
            raise UsageError(f"{entry.where}: `{entry.key}` sets {_flag(action)} again (line {lines[action]})")
        lines[action] = entry.line
        setting = _convert(added, by_dest, str(entry.key), entry.value, entry.where)
        if setting is not None:
            settings.append(setting)
    return settings


def _setting_names(parser: RecordingParser) -> dict[str, tuple[AddedArgument, bool]]:
    """Each key a file may use -> its argument, and whether the key is the action's dest (the
    value kept) rather than its flag (`no_optimize`, whose true means "the flag is given")."""
    names: dict[str, tuple[AddedArgument, bool]] = {}
    for added in parser.added:
        for flag in added.action.option_strings:
            if flag.startswith("--"):  # (`no_progress: true` is `progress: false`: _convert)
                names[flag[2:].replace("-", "_")] = (added, False)
        names[added.action.dest] = (added, True)
    return names


def _negated(action: argparse.Action, key: str) -> bool:
    """Whether `key` names the `--no-x` half of a switch pair (`no_progress: true` is `--no-progress`)."""
    return f"--{key.replace('_', '-')}" in action.option_strings and key.replace("_", "-").startswith("no-")


def _argument_for(
    parser: RecordingParser, names: dict[str, tuple[AddedArgument, bool]], key: object, where: str
) -> tuple[AddedArgument, bool]:
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


def _convert(added: AddedArgument, by_dest: bool, key: str, value: Any, where: str) -> _Setting | None:
    """The file's `value` as the parsed value of `added`'s action; None for a switch the file leaves off."""
    action = added.action
    pair = isinstance(action, argparse.BooleanOptionalAction)  # --x / --no-x
    switch = added.kind in ("store_true", "store_false", "store_const")
    if (pair or switch) and not isinstance(value, bool):
        raise UsageError(f"{where}: `{key}` is a switch ({_flag(action)}): expected true or false, got {value!r}")
    if pair:
        return _Setting(action, value != (not by_dest and _negated(action, key)))
    if switch:
        # `optimize: false` (the dest) and `no_optimize: true` (the flag) both mean "--no-optimize given".
        given = value == action.const if by_dest else value
        return _Setting(action, action.const) if given else None
    if added.kind != "store" or action.nargs not in (None, "?"):
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
        return _Setting(action, _parsed(added, text))
    except argparse.ArgumentError as err:
        raise UsageError(f"{where}: {err}") from None


def _parsed(added: AddedArgument, text: str) -> object:
    """`text` converted and checked as argparse does a command-line word (its `type=` and
    `choices=`, its messages): the argument declared again as the command declared it, alone,
    on a parser of its own, which raises its `ArgumentError` instead of exiting."""
    probe = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    kept = {name: value for name, value in added.options.items() if name not in ("required", "default", "help")}
    action = probe.add_argument(*added.names, **kept)
    long = [flag for flag in action.option_strings if flag.startswith("--")]
    if long:
        words = [f"{long[0]}={text}"]  # `--lr=-1`: a value that starts with a dash is still the value
    elif action.option_strings:
        words = [action.option_strings[0], text]
    else:
        words = ["--", text]  # a positional argument's value, whatever it looks like
    return getattr(probe.parse_args(words), action.dest)


def _is_scalar(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
