"""Every example in the README and docs/ runs as written, in document order.

A document's ```console commands and ```python blocks run one after another in one fresh
working folder (so a `train` example leaves the checkpoint that a later `analyze` command
or Python block reads). A shown output line is compared with its numbers masked, because
accuracies and timings differ between machines; the words and the layout must match what
the code prints today. A Python line `print(...)  # value` promises that `value` is printed.

A ```yaml block that starts with `# NAME.yaml` is a file the examples read (tests/_doc_files.py):
it is written into the working folder first.

The search pages' console examples (docs/search.md, replay.md, report.md) have their own runner
(tests/test_search_docs.py, which also checks dry runs verbatim); the README's two set-up commands are what
`.ci/run` does.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _doc_files import mask_numbers, text_for_general_runner, write_doc_files

from archdsl.cli import main

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(console|python)[ \t]*\n(.*?)^```", re.M | re.S)
PROMISE = re.compile(r"^print\(.*\)\s+# (\S+)\s*$", re.M)
CONSOLE_HAS_OWN_RUNNER = {"search.md", "replay.md", "report.md"}


@dataclass
class Example:
    kind: str  # "console" or "python"
    text: str  # the argv joined, or the code
    argv: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)


def _examples(doc: Path) -> list[Example]:
    examples: list[Example] = []
    for kind, block in FENCE.findall(text_for_general_runner(doc)):
        if kind == "python":
            examples.append(Example("python", block))
            continue
        if doc.name in CONSOLE_HAS_OWN_RUNNER:
            continue
        lines = block.splitlines()
        prompted = any(line.startswith("$ ") for line in lines)
        for line in lines:
            command = line[2:] if line.startswith("$ ") else (line if not prompted else None)
            if command is not None:
                words = shlex.split(command)
                argv = words[1:] if words and words[0] == "archdsl" else words
                examples.append(Example("console", command, argv))
            elif examples and line.strip():
                examples[-1].shown.append(line)
    return [e for e in examples if not _is_setup(e)]


def _is_setup(example: Example) -> bool:
    return example.kind == "console" and ("pytest" in example.text or "venv" in example.argv)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CASES = [doc for doc in DOCS if doc.exists() and _examples(doc)]


def test_the_docs_have_examples():
    assert {doc.name for doc in CASES} >= {
        "README.md",
        "compiler.md",
        "data.md",
        "training.md",
        "analysis.md",
        "python.md",
    }


@pytest.mark.slow
@pytest.mark.parametrize("doc", CASES, ids=lambda d: d.name)
def test_examples_run_as_written(doc: Path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_doc_files(doc, tmp_path)
    for number, example in enumerate(_examples(doc)):
        if example.kind == "python":
            exec(compile(example.text, f"{doc.name}[example {number}]", "exec"), {"__name__": "__docs__"})
            printed = capsys.readouterr().out.splitlines()
            for value in PROMISE.findall(example.text):
                assert value in printed, f"{doc.name}: the example promises {value!r}, printed {printed}"
            continue
        status = main(example.argv)
        printed = capsys.readouterr()
        assert status == 0, f"{doc.name}: `{example.text}` exited {status}:\n{printed.err}"
        actual = {mask_numbers(line) for line in (printed.out + printed.err).splitlines()}
        for line in example.shown[:3]:
            assert mask_numbers(line) in actual, f"{doc.name}: `{example.text}` no longer prints {line!r}"
