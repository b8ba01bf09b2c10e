"""What a reader meets first and follows: the README's first screen holds the commands a new user
runs, and every link between the README and docs/ leads to a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _doc_files import CONSOLE_BLOCK

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FIRST_SCREEN = 24  # lines of a terminal
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _console_blocks(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each ```console block, lines counted from 1."""
    return [
        (text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end()) + 1, m.group(1))
        for m in CONSOLE_BLOCK.finditer(text)
    ]


def test_the_readme_opens_with_the_set_up_and_the_main_job_then_the_tests() -> None:
    (setup_start, _, setup), (_, tests_end, tests) = _console_blocks(README.read_text(encoding="utf-8"))[:2]
    assert setup_start < 15  # the command itself on line 15 at the latest
    assert "pip install -e '.[dev]'" in setup and setup.strip().endswith("archdsl search")
    assert "pytest" in tests and tests_end <= FIRST_SCREEN


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors of `doc`'s headings: lower case, punctuation dropped, spaces as hyphens,
    `-1`, `-2` ... after a repeated one."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", doc.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, repeat = slug, 0
        while anchor in anchors:
            repeat += 1
            anchor = f"{slug}-{repeat}"
        anchors.add(anchor)
    return anchors


def _links(doc: Path) -> list[str]:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]  # not https:, mailto: ...


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_each_link_leads_to_a_file_and_heading_that_exist(doc: Path) -> None:
    for link in _links(doc):
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        assert target.exists(), f"{doc.name}: {link} leads to no file"
        if anchor and target.suffix == ".md":
            assert anchor in _anchors(target), f"{doc.name}: {link} leads to no heading of {target.name}"


def test_each_measured_budget_the_search_prints_leads_to_a_heading_that_exists() -> None:
    """`search --dry-run` names where the docs measured a dataset's budget (`docs/PAGE.md#anchor`)."""
    from archdsl.data.cards import CARDS

    links = [card.search.measured for card in CARDS.values() if card.search.measured]
    assert links
    for link in links:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).is_file(), link
        assert anchor in _anchors(ROOT / path), f"{link} leads to no heading"
