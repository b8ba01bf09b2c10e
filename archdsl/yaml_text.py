"""YAML read from a user's settings file (`--config FILE.yaml`): a mapping of plain values, each key
with the line it stands on, bounded before any value is built.

yaml.safe_load's own two steps (SafeLoader: plain data, no Python objects), keeping the node tree in
between: it knows each key's line, and its size is checked before construction. A settings file needs
neither deep nesting (yaml's composer recurses, and a RecursionError is no message) nor much data,
and aliases let 700 bytes stand for gigabytes of lists once printed or joined, so the size counts
every alias as the data it repeats. Every mistake is a `UsageError` naming the file and, where YAML
knows it, the line. Light at import: yaml is imported when a file is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archdsl.errors import UsageError

__all__ = ["MAX_CHARACTERS", "MAX_DEPTH", "MAX_NODES", "SettingsEntry", "read_settings"]

MAX_DEPTH = 20  # levels of lists and mappings
MAX_NODES = 10_000  # values, lists and mappings, each alias counted as what it repeats
MAX_CHARACTERS = 1_000_000  # of all the scalars, counted so too


@dataclass(frozen=True)
class SettingsEntry:
    """One `key: value` of a settings file, as yaml.safe_load makes them, and where the key stands."""

    key: object  # "epochs", or 1 for `1: x`
    value: object
    path: str
    line: int  # 1-based

    @property
    def where(self) -> str:
        """`path:line`, as the file's mistakes are named."""
        return _where(self.path, self.line)


def _where(path: str, line: int | None) -> str:
    return f"{path}:{line}" if line else path


def read_settings(text: str, path: str) -> list[SettingsEntry]:
    """The entries of the settings file `path` holding `text`, in the file's order; [] for an empty file
    (or one of comments only). A `UsageError` for YAML that is not valid, too large or not a mapping."""
    import yaml

    loader = None
    try:
        loader = _bounded_loader(yaml)(text)  # refuses control characters (a ReaderError) at once
        node = loader.get_single_node()
        if node is not None:
            _check_size(node, path)
        data = loader.construct_document(node) if node is not None else None
        if data is None:
            return []
        if not isinstance(data, dict):
            raise UsageError(
                f"{path}: expected settings, one `key: value` per line, got a YAML {type(data).__name__}",
                hint="write e.g. `epochs: 3`",
            )
        # What safe_load made of each key and value (construct_document built them all, once).
        return [
            SettingsEntry(
                loader.construct_object(key), loader.construct_object(value, deep=True), path, key.start_mark.line + 1
            )
            for key, value in node.value
        ]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"{_where(path, mark.line + 1 if mark else None)}: not valid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()


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
