"""Numbers as a spec writes them."""

from __future__ import annotations


def format_float(value: float) -> str:
    """The shortest text that reads back as `value`: `1e-6`, `0.5`, `2`."""
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
        return f"{mantissa}e{'-' if exponent.startswith('-') else '+'}{int(exponent.lstrip('+-'))}"
    return text[:-2] if text.endswith(".0") else text
