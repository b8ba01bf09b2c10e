"""Curated package exports, imported on first use (PEP 562), the way Optuna's `optuna.integration` keeps them.

A package imports each export under `if TYPE_CHECKING:`, which a type checker and an editor follow to its
definition, and lets `lazy_exports` import it when it is first used: those imports are the one table of
the package's API. `import archdsl.search` then costs nothing (no torch, no Optuna) until a name is used,
and `dir()` shows the curated API only.

    if TYPE_CHECKING:
        from archdsl.search.planning import SearchPlan, search

    __getattr__, __dir__, __all__ = lazy_exports(__name__)
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any


def lazy_exports(
    package: str, *, own: Sequence[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`: its exports are the names it imports under `if
    TYPE_CHECKING:` (`from M import a` exports M's `a`, `from M import a as b` exports it as `b`, and a name
    imported from the package itself is its submodule), read from the package's source. `own` are the names
    the package defines or imports itself (`__version__`): `__all__` lists them first, then the exports
    sorted; `dir()` shows `__all__` sorted."""
    exports = _type_checking_imports(package)
    public = [*own, *sorted(exports)]

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where
        if module == package:  # a subpackage that is also a function (archdsl.search)
            return importlib.import_module(f"{package}.{attribute}")
        return getattr(importlib.import_module(module), attribute)

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__, public


def _type_checking_imports(package: str) -> dict[str, tuple[str, str]]:
    """Name -> (module, attribute) of each `from M import a [as b]` under the package's `if TYPE_CHECKING:`."""
    module = sys.modules[package]
    source = module.__loader__.get_source(package) if module.__loader__ is not None else None  # type: ignore[attr-defined]
    if source is None:
        raise ImportError(f"{package}: its exports are read from its source, which is not installed")
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
                    found.update({a.asname or a.name: (statement.module, a.name) for a in statement.names})
    return found
