"""The documentation site and the files every project has (issue 56).

mkdocs.yml's nav holds every page of docs/, docs/api.md documents every function and class the public
packages export, the README's site command is what CI runs, and CITATION.cff is valid CFF 1.2.0 that cites the
paper as the README does. With the `docs` extra installed, `mkdocs build --strict` runs too (CI runs it in
.ci/run's second step)."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE_COMMAND = "mkdocs build --strict"
PUBLIC_PACKAGES = ("archdsl", "archdsl.search", "archdsl.analysis", "archdsl.data")


class _ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml as data: its `!!python/...` tags (the slug function) read as None."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    return []


def test_the_site_nav_holds_every_page_of_docs_once() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_ConfigLoader)
    pages = _nav_pages(config["nav"])
    assert config["strict"] is True
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))


def test_the_api_page_documents_every_public_function_and_class() -> None:
    listed = set(re.findall(r"^::: ([\w.]+)$", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.M))
    for name in PUBLIC_PACKAGES:
        package = importlib.import_module(name)
        exported = {
            f"{name}.{export}"
            for export in package.__all__
            if inspect.isfunction(getattr(package, export)) or inspect.isclass(getattr(package, export))
        }
        assert exported <= listed, f"docs/api.md lacks {sorted(exported - listed)}"


def test_the_readme_and_contributing_give_the_site_command_that_ci_runs() -> None:
    assert '"$VENV/bin/mkdocs" build --strict' in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for doc in ("README.md", "CONTRIBUTING.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert f".venv/bin/pip install -e '.[docs]' && .venv/bin/{SITE_COMMAND}" in text, doc


def test_the_citation_file_is_cff_1_2_0_and_cites_the_paper_as_the_readme_does() -> None:
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(citation)
    assert all("name" in author or "family-names" in author for author in citation["authors"])
    paper = citation["preferred-citation"]
    assert paper["title"] == "How Do Vision Transformers Work?" and paper["year"] == 2022
    authors = [f"{a['given-names']} {a['family-names']}" for a in paper["authors"]]
    assert authors == ["Namuk Park", "Songkuk Kim"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [bibtex] = re.findall(r"^```bibtex\n(.*?)^```", readme, re.M | re.S)
    assert "{How Do Vision Transformers Work?}" in bibtex and "{Namuk Park and Songkuk Kim}" in bibtex
    assert "year      = {2022}" in bibtex


def test_the_readme_points_to_the_license_the_citation_and_contributing() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "MIT License" in readme
    for name in ("LICENSE", "CITATION.cff", "CONTRIBUTING.md", "CHANGELOG.md"):
        assert f"]({name})" in readme, name


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
                    reason="needs the docs extra: pip install -e '.[docs]'")  # fmt: skip
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    command = [str(mkdocs) if mkdocs.exists() else "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "api" / "index.html").read_text(encoding="utf-8").count('id="archdsl.load_spec"') == 1
