"""Text -> IR: the `.arch` language (grammar, parser, lowering, checks, diagnostics, printer).

Pure Python: nothing here imports torch, so `archdsl check` and `archdsl fmt` answer at once.
"""

from __future__ import annotations

from archdsl.exports import lazy_exports

_EXPORTS = {
    "parse_spec": "archdsl.lang.spec",
    "load_spec": "archdsl.lang.spec",
    "resolve_spec": "archdsl.lang.spec",
    "builtin_names": "archdsl.lang.spec",
    "with_classes": "archdsl.lang.spec",
    "format_arch": "archdsl.lang.printer",
    "format_source": "archdsl.lang.printer",
    "ensure_valid": "archdsl.lang.checks",
    "problems": "archdsl.lang.checks",
    "SpecError": "archdsl.lang.diagnostics",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
