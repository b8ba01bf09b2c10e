"""Every ```console example in the README and docs/ runs as written and prints what is shown.

Commands run in order, one fresh working folder per document (so a `train` example leaves
the checkpoint the next `analyze` example reads). A shown output line is compared with
its numbers masked, because accuracies and timings differ between machines; everything
else (the words, the layout) must match what the code prints today.

docs/search.md has its own runner (tests/test_search_docs.py) that also checks dry runs
verbatim; the README's two set-up commands are what `.ci/run` itself does.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from archdsl.cli import main

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```console[ \t]*\n(.*?)^```", re.M | re.S)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
OWN_RUNNER = {"search.md"}


def _mask(line: str) -> str:
    return NUMBER.sub("#", line).strip()


def _examples(doc: Path) -> list[tuple[list[str], list[str]]]:
    """(argv, shown output lines) for each `archdsl` command of the document's console blocks."""
    examples: list[tuple[list[str], list[str]]] = []
    for block in FENCE.findall(doc.read_text(encoding="utf-8")):
        lines = block.splitlines()
        prompted = any(line.startswith("$ ") for line in lines)
        for line in lines:
            command = line[2:] if line.startswith("$ ") else (line if not prompted else None)
            if command is not None:
                words = shlex.split(command)
                examples.append((words[1:] if words and words[0] == "archdsl" else words, []))
            elif examples and line.strip():
                examples[-1][1].append(line)
    return examples


def _is_setup(argv: list[str]) -> bool:
    return "pytest" in " ".join(argv) or "venv" in argv


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CASES = [doc for doc in DOCS if doc.name not in OWN_RUNNER and doc.exists() and _examples(doc)]


def test_the_docs_have_examples():
    assert {doc.name for doc in CASES} >= {"README.md", "compiler.md", "data.md", "training.md"}


@pytest.mark.slow
@pytest.mark.parametrize("doc", CASES, ids=lambda d: d.name)
def test_console_examples_run_as_written(doc: Path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv, shown in _examples(doc):
        if _is_setup(argv):
            continue
        status = main(argv)
        printed = capsys.readouterr()
        assert status == 0, f"{doc.name}: `archdsl {' '.join(argv)}` exited {status}:\n{printed.err}"
        actual = {_mask(line) for line in (printed.out + printed.err).splitlines()}
        for line in shown[:3]:
            assert _mask(line) in actual, f"{doc.name}: `archdsl {' '.join(argv)}` no longer prints {line!r}"
