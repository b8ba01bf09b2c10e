"""Curated package exports, imported on first use (PEP 562), as every archdsl package keeps them.

A package lists its public names and where each lives; `import archdsl.search` then costs
nothing (no torch, no Optuna) until a name is used, and `dir()` shows the curated API only.

    __getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], *, own: Sequence[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`: `exports` maps a name to "module" or
    "module:attribute" (where the names differ); a name whose module is `package.name` itself is
    that subpackage. `own` are the names the package defines itself (`__version__`): `__all__`
    lists them first, then the exports sorted; `dir()` shows `__all__` sorted."""
    public = [*own, *sorted(exports)]

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        imported = importlib.import_module(module)
        if module == f"{package}.{name}":  # a subpackage that is also a function (archdsl.search)
            return imported
        return getattr(imported, attribute or name)

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__, public
