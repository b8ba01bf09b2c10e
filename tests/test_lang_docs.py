"""Every spec the project shows parses: `specs/*.arch` and each ```arch block in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archdsl.ir import Arch
from archdsl.lang.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```arch[ \t]*\n(.*?)^```", re.M | re.S)


def _doc_blocks() -> list[tuple[str, str]]:
    # README.md may not exist yet; docs/ grows as the areas write their how-tos.
    documents = sorted((ROOT / "docs").glob("*.md")) + [p for p in [ROOT / "README.md"] if p.exists()]
    blocks = []
    for doc in documents:
        text = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            blocks.append((f"{doc.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


SPEC_FILES = sorted((ROOT / "specs").glob("*.arch"))
DOC_BLOCKS = _doc_blocks()


def test_there_is_something_to_check():
    assert SPEC_FILES and any(where.startswith("docs/language.md") for where, _ in DOC_BLOCKS)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_file_parses(path: Path):
    assert isinstance(parse_spec(path.read_text(encoding="utf-8"), str(path)), Arch)


@pytest.mark.parametrize("where,text", DOC_BLOCKS, ids=[where for where, _ in DOC_BLOCKS])
def test_doc_arch_block_parses(where: str, text: str):
    assert isinstance(parse_spec(text, where), Arch)


# The source of the error example in docs/language.md ("What is checked").
DOC_ERROR_EXAMPLE = """arch small {
    input   3x32x32
    classes 10
    stem    conv3x3(16)

    stage c1(width=16)           { conv*2 }
    stage c2(width=32, stride=2) { conv mas(2, 4) }
    stage c3(width=64, stride=2) { [conv msa(4, 16)]*2 }
}
"""


def test_error_example_in_language_doc_is_what_check_prints():
    from archdsl.lang.diagnostics import SpecError

    with pytest.raises(SpecError) as info:
        parse_spec(DOC_ERROR_EXAMPLE, "bad.arch")
    doc = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    assert str(info.value) in doc
