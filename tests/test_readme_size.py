"""The README stays a first page (issue 56): at most 150 lines, and its prose's median sentence at most 20 words.

Prose is the text outside code blocks, tables and headings. A sentence ends at `.`, `!` or `?` followed by a
space or the end of a paragraph; a list item or a paragraph without a full stop is one sentence too.
`python tests/test_readme_size.py` prints the figures."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
MAX_LINES = 150
MAX_MEDIAN_WORDS = 20
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def prose_paragraphs(text: str) -> list[str]:
    """The README's prose: paragraphs and list items, without code blocks, tables, headings and images."""
    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", FENCE.sub("", text)):
        lines = [line for line in block.splitlines() if line.strip()]
        lines = [line for line in lines if not line.lstrip().startswith(("|", "#", "![", "<!--"))]
        items = re.split(r"\n(?=\s*[-*] |\s*\d+\. )", "\n".join(lines))
        items = [re.sub(r"^\s*(?:[-*]|\d+\.)\s+", "", item) for item in items]  # a list marker is no word
        paragraphs += [" ".join(item.split()) for item in items if item.strip()]
    return paragraphs


def sentence_lengths(text: str) -> list[int]:
    """Words in each sentence of the prose."""
    return [
        len(sentence.split())
        for paragraph in prose_paragraphs(text)
        for sentence in SENTENCE_END.split(paragraph)
        if sentence.strip()
    ]


def test_the_readme_is_at_most_150_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_the_readmes_median_sentence_is_at_most_20_words() -> None:
    assert statistics.median(sentence_lengths(README.read_text(encoding="utf-8"))) <= MAX_MEDIAN_WORDS


def test_a_long_paragraph_counts_as_its_sentences() -> None:
    text = "# Title\n\nOne two three. Four five six seven!\n\n```console\nnot prose at all here\n```\n\n- an item\n"
    assert sentence_lengths(text) == [3, 4, 2]


if __name__ == "__main__":
    text = README.read_text(encoding="utf-8")
    lengths = sentence_lengths(text)
    print(f"lines {len(text.splitlines())}, sentences {len(lengths)}, median words {statistics.median(lengths)}")
