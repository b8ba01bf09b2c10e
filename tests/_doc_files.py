"""Helpers of the tests that run the docs' examples.

Files that the examples read (a `--config` file, a spec): a ```yaml or ```arch block whose first line is
the comment `# NAME.yaml` or `# NAME.arch` (a remark may follow: `# tiny.yaml: the run above`) is that file,
written as shown into the examples' working folder. Sections with a runner of their own (docs/tutorials.md's
Fashion-MNIST walk-through, which needs the Debian dataset and runs two workers at once:
tests/test_readme_fashion_mnist.py; the folder of Fashion-MNIST images: tests/test_readme_own_images.py)
are left out of the general runner (`text_for_general_runner`)."""

from __future__ import annotations

import re
from pathlib import Path

NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
OWN_RUNNER_SECTIONS = ("A day on Fashion-MNIST", "Search on your own images")
FILE_BLOCK = re.compile(r"^```(?:yaml|arch)[ \t]*\n(# ([\w.-]+\.(?:ya?ml|arch))\b[^\n]*\n.*?)^```", re.M | re.S)


def write_doc_files(doc: Path, folder: Path) -> list[str]:
    """Write `doc`'s named ```yaml and ```arch blocks into `folder`; their names."""
    names = []
    for text, name in FILE_BLOCK.findall(doc.read_text(encoding="utf-8")):
        (folder / name).write_text(text, encoding="utf-8")
        names.append(name)
    return names


def mask_numbers(line: str) -> str:
    """A shown output line with its numbers masked (accuracies and timings differ between machines)."""
    return NUMBER.sub("#", line).strip()


def section(text: str, title: str) -> str:
    """The Markdown section `## title`, up to the next heading of the same level ("" if none)."""
    match = re.search(rf"^## {re.escape(title)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


CONSOLE_BLOCK = re.compile(r"^```console[ \t]*\n(.*?)^```", re.M | re.S)


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command line, the lines shown under it) for every `$ ` line of `text`'s console blocks, in order."""
    steps: list[tuple[str, list[str]]] = []
    for block in CONSOLE_BLOCK.findall(text):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:].strip(), []))
            elif steps and line.strip():
                steps[-1][1].append(line)
    return steps


def text_for_general_runner(doc: Path) -> str:
    """`doc`'s text without the sections that have their own runner."""
    text = doc.read_text(encoding="utf-8")
    for title in OWN_RUNNER_SECTIONS:
        body = section(text, title)
        if body:
            text = text.replace(body, "")
    return text
