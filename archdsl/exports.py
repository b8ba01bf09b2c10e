"""Curated package exports, imported on first use (PEP 562), the way Optuna's `optuna.integration` keeps them.

A package names each export and the module that defines it in a plain dict, and imports the same names under
`if TYPE_CHECKING:` for type checkers and editors (tests/test_layering.py checks that the two agree):

    if TYPE_CHECKING:
        from archdsl.search.planning import plan_space, search

    _EXPORTS = {"plan_space": "archdsl.search.planning", "search": "archdsl.search.planning"}
    __getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)

`import archdsl.search` then costs nothing (no torch, no Optuna) until a name is used, and `dir()` shows the
curated API only. Nothing is read from the package's source: the table is the dict.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], *, own: Sequence[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`, whose `exports` map each exported name to where it
    is defined: `"module"` (the module's attribute of that name), `"module:attribute"` (exported under another
    name), or the package's own submodule `f"{package}.{name}"` (the module itself: `archdsl.search`). `own` are
    the names the package defines or imports itself (`__version__`): `__all__` lists them first, then the exports
    sorted; `dir()` shows `__all__` sorted."""
    public = [*own, *sorted(exports)]

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        if module == f"{package}.{name}":  # a subpackage that is also a function (archdsl.search)
            return importlib.import_module(module)
        return getattr(importlib.import_module(module), attribute or name)

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__, public
