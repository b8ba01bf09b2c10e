"""Editors and mypy find every archdsl.* module as a file in the checkout: they read files and run no
import hook, so each folder that pyproject's package-dir installs under another name (search/ as
archdsl.search) is also a committed link inside archdsl/ (docs/architecture.md, "The map")."""

from __future__ import annotations

import os
from importlib.machinery import PathFinder
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _find_file(module: str) -> Path | None:
    """Where a tool that reads only the file system finds `module` from the checkout's root: the
    path-based finder alone, one dotted step at a time (no sys.meta_path, so no editable-install hook)."""
    search_path = [str(ROOT)]
    spec = None
    for depth in range(1, module.count(".") + 2):
        spec = PathFinder.find_spec(".".join(module.split(".")[:depth]), search_path)
        if spec is None:
            return None
        search_path = list(spec.submodule_search_locations or [])
    return Path(spec.origin) if spec and spec.origin else None


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("archdsl.search.planning", "search/planning.py"),
        ("archdsl.search.fidelity.measures", "search/fidelity/measures.py"),
        ("archdsl.analysis.pipeline", "analysis/pipeline.py"),
        ("archdsl.specs", "specs/__init__.py"),
        ("archdsl.lang.spec", "archdsl/lang/spec.py"),
    ],
)
def test_a_tool_reading_the_checkout_finds_each_module_at_its_source(module: str, source: str) -> None:
    found = _find_file(module)
    assert found is not None, f"{module}: no file under {ROOT / 'archdsl'}"
    assert found.resolve() == ROOT / source


def test_each_folder_package_dir_renames_is_linked_inside_archdsl() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir = pyproject["tool"]["setuptools"]["package-dir"]
    renamed = {name: folder for name, folder in package_dir.items() if name != "archdsl"}
    assert renamed  # search/, analysis/, specs/
    for name, folder in renamed.items():
        parent, _, leaf = name.rpartition(".")
        link = ROOT / package_dir[parent] / leaf
        assert link.is_symlink(), f"{link.relative_to(ROOT)} should be a link to {folder}/"
        # Relative, so that it holds in any clone wherever it lies.
        assert not os.path.isabs(os.readlink(link)) and link.resolve() == ROOT / folder
