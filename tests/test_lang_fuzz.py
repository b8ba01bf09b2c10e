"""Mutation fuzzing: any text ends in an `Arch` or a `SpecError`, never another exception."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archdsl.ir import Arch
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import builtin_names, parse_spec, resolve_spec

SEEDS = [resolve_spec(name).read_text() for name in builtin_names()]
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*|[0-9][A-Za-z0-9_.]*|\S")
# Characters that matter to the grammar, plus a few it has never heard of.
ALPHABET = st.sampled_from(list("{}[](),*=#x0123456789 \n\t-+.;%é") + ["msa", "conv", "global", "stage", "window="])


@st.composite
def mutated_specs(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        tokens = [m.span() for m in TOKEN.finditer(text)]
        kind = draw(st.sampled_from(["insert", "delete", "replace", "drop_token", "dup_token", "swap_tokens"]))
        if kind in ("insert", "delete", "replace"):
            at = draw(st.integers(0, len(text)))
            end = min(len(text), at + draw(st.integers(1, 6)))
            piece = draw(ALPHABET) if kind != "delete" else ""
            text = text[:at] + piece + (text[end:] if kind != "insert" else text[at:])
        elif tokens:
            i = draw(st.integers(0, len(tokens) - 1))
            start, end = tokens[i]
            if kind == "drop_token":
                text = text[:start] + text[end:]
            elif kind == "dup_token":
                text = text[:end] + " " + text[start:end] + text[end:]
            else:
                j = draw(st.integers(0, len(tokens) - 1))
                (a, b), (c, d) = sorted([tokens[i], tokens[j]])
                if b <= c:
                    text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
    return text


def _assert_arch_or_spec_error(text: str) -> None:
    try:
        result = parse_spec(text, "fuzz.arch")
    except SpecError as err:
        rendered = str(err)  # rendering must not fail either
        n_lines = max(1, len(text.splitlines()))
        for diag in err.diagnostics:
            assert diag.span is None or 1 <= diag.span.line <= n_lines + 1
        assert rendered.endswith("error" if len(err.diagnostics) == 1 else "errors")
    else:
        assert isinstance(result, Arch)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
def test_mutated_specs_end_in_arch_or_spec_error(text: str):
    _assert_arch_or_spec_error(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_ends_in_arch_or_spec_error(text: str):
    _assert_arch_or_spec_error(text)


def test_pathological_inputs():
    base = "arch t { input 3x32x32 classes 10 stem conv3x3(8) stage a(width=8) { %s } }"
    for body in [
        "[" * 200 + "conv" + "]" * 200,
        "[[[[conv]*1000]*1000]*1000]*1000",
        "conv*" + "9" * 400,
        "msa(1, " + "9" * 40 + ")",
        "conv " * 3000,
    ]:
        _assert_arch_or_spec_error(base % body)
    _assert_arch_or_spec_error(
        "arch t { input 3x" + "9" * 30 + "x5 classes 1 stem conv3x3(1) stage a(width=1) { msa(1, 3) } }"
    )
    _assert_arch_or_spec_error("\x00\ufeffarch")
