"""Files that the docs' examples read (a `--config` file): a ```yaml block whose first line is the
comment `# NAME.yaml` (a remark may follow: `# tiny.yaml: the run above`) is that file, written
as shown into the examples' working folder."""

from __future__ import annotations

import re
from pathlib import Path

FILE_BLOCK = re.compile(r"^```yaml[ \t]*\n(# ([\w.-]+\.ya?ml)\b[^\n]*\n.*?)^```", re.M | re.S)


def write_doc_files(doc: Path, folder: Path) -> list[str]:
    """Write `doc`'s named ```yaml blocks into `folder`; their names."""
    names = []
    for text, name in FILE_BLOCK.findall(doc.read_text(encoding="utf-8")):
        (folder / name).write_text(text, encoding="utf-8")
        names.append(name)
    return names
