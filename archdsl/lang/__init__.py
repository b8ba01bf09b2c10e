"""Text -> IR: the `.arch` language (grammar, parser, lowering, checks, diagnostics, printer).

Pure Python: nothing here imports torch, so `archdsl check` and `archdsl fmt` answer at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.lang.checks import ensure_valid as ensure_valid
    from archdsl.lang.checks import problems as problems
    from archdsl.lang.diagnostics import SpecError as SpecError
    from archdsl.lang.printer import format_arch as format_arch
    from archdsl.lang.printer import format_source as format_source
    from archdsl.lang.spec import builtin_names as builtin_names
    from archdsl.lang.spec import load_spec as load_spec
    from archdsl.lang.spec import parse_spec as parse_spec
    from archdsl.lang.spec import resolve_spec as resolve_spec
    from archdsl.lang.spec import with_classes as with_classes

_EXPORTS = {
    "ensure_valid": "archdsl.lang.checks",
    "problems": "archdsl.lang.checks",
    "SpecError": "archdsl.lang.diagnostics",
    "format_arch": "archdsl.lang.printer",
    "format_source": "archdsl.lang.printer",
    "builtin_names": "archdsl.lang.spec",
    "load_spec": "archdsl.lang.spec",
    "parse_spec": "archdsl.lang.spec",
    "resolve_spec": "archdsl.lang.spec",
    "with_classes": "archdsl.lang.spec",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
