"""The ```console examples of the search's pages (docs/search.md, docs/replay.md, docs/report.md) run as
written, in that order in one folder (the report example reads a study that docs/search.md's examples made);
dry runs print exactly what is shown. The folder holds the pages' ```yaml files (tests/_doc_files.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from _doc_files import write_doc_files

from archdsl.cli import main

DOCS = [Path(__file__).resolve().parent.parent / "docs" / name for name in ("search.md", "replay.md", "report.md")]
FENCE = re.compile(r"^```console[ \t]*\n(.*?)^```", re.M | re.S)


def _examples() -> list[tuple[list[str], str]]:
    examples = []
    blocks = [block for doc in DOCS for block in FENCE.findall(doc.read_text(encoding="utf-8"))]
    for block in blocks:
        lines = block.splitlines()
        assert lines[0].startswith("$ archdsl "), lines[0]
        examples.append((shlex.split(lines[0][len("$ archdsl ") :]), "\n".join(lines[1:]) + "\n"))
    return examples


def test_dry_run_examples_print_what_the_doc_shows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for doc in DOCS:
        write_doc_files(doc, tmp_path)
    dry = [(argv, shown) for argv, shown in _examples() if "--dry-run" in argv]
    assert dry
    for argv, shown in dry:
        assert main(argv) == 0
        assert capsys.readouterr().out == shown


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_search_and_report_examples_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for doc in DOCS:
        write_doc_files(doc, tmp_path)
    for argv, shown in _examples():
        if "--dry-run" in argv:
            continue
        assert main(argv) == 0, argv
        printed = capsys.readouterr()
        # Accuracies vary with the machine; the first line and the report path do not.
        assert shown.splitlines()[0] in printed.out + printed.err
        assert shown.splitlines()[-1] in printed.out
