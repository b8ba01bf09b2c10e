"""An argparse parser that keeps its own table of the arguments it was given.

`--config FILE.yaml` (archdsl.commands.config_file) and the "did you mean" of an unknown flag
need every argument of a command: its flags, its kind (`store`, `store_true`, a switch pair) and
how it was declared. argparse keeps that list private, so each archdsl parser records what its
public `add_argument` returns, and its --help sections (`section`) and exclusive groups
(`exclusive`) record theirs into the same table. An argument added to a group made with
argparse's own `add_argument_group` would miss the table: archdsl's commands use `section`
(tests/test_settings_flags.py holds every command's table to its parser).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class AddedArgument:
    """One `add_argument` call: the action argparse made, and the names and options it was given."""

    action: argparse.Action
    names: tuple[str, ...]  # `("-o", "--output")`, or a positional argument's name
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> object:
        """What the call's `action=` named: "store" (the default), "store_true", a class (a switch pair)."""
        return self.options.get("action", "store")


class _ArgumentAdder(Protocol):
    """What a section needs of argparse's group: its (public) `add_argument`."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...


class ArgumentSection:
    """A --help section, or a group of exclusive flags, of a `RecordingParser`: argparse's group,
    whose arguments are recorded in the parser's table too."""

    def __init__(self, group: _ArgumentAdder, parser: RecordingParser) -> None:
        self.group, self.parser = group, parser

    def add_argument(self, *names: str, **options: Any) -> argparse.Action:
        action = self.group.add_argument(*names, **options)
        self.parser.added.append(AddedArgument(action, names, options))
        return action


class RecordingParser(argparse.ArgumentParser):
    """argparse's parser, with `added`: every argument it and its sections were given, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.added: list[AddedArgument] = []  # before argparse's own __init__ adds -h/--help
        self.sections: dict[str, ArgumentSection] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *names: str, **options: Any) -> argparse.Action:  # type: ignore[override]
        action = super().add_argument(*names, **options)
        self.added.append(AddedArgument(action, names, options))
        return action

    def section(self, title: str) -> ArgumentSection:
        """The --help section `title`, made on first use."""
        if title not in self.sections:
            self.sections[title] = ArgumentSection(self.add_argument_group(title), self)
        return self.sections[title]

    def exclusive(self, *, required: bool = False) -> ArgumentSection:
        """A group of flags of which at most one (with `required`, exactly one) may be given."""
        return ArgumentSection(self.add_mutually_exclusive_group(required=required), self)

    def long_flags(self) -> list[str]:
        """Every `--flag` spelling the parser knows."""
        return [name for added in self.added for name in added.action.option_strings if name.startswith("--")]


class Subcommands(Protocol):
    """What a command's `register` uses of `add_subparsers`' answer (whose class argparse keeps private)."""

    def add_parser(self, name: str, **kwargs: Any) -> RecordingParser: ...
