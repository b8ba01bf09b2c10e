"""Package exports (archdsl.exports) need nothing but the package's code: no source to read."""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_exports_work_where_only_the_bytecode_is_installed(tmp_path):
    # An install with .pyc files alone (a frozen app, a zipapp built that way): exports that read the package's
    # source raised ImportError at `import archdsl`.
    installed = tmp_path / "archdsl"
    shutil.copytree(ROOT / "archdsl", installed, ignore=shutil.ignore_patterns("__pycache__"))  # the links followed
    assert compileall.compile_dir(installed, quiet=1, legacy=True)
    for source in installed.rglob("*.py"):
        source.unlink()
    code = """
        import archdsl
        from archdsl.search import SearchSettings, STRATEGIES
        from archdsl.lang import format_arch
        assert archdsl.__file__.endswith(".pyc")
        print(archdsl.load_spec("tiny").name, callable(archdsl.search), SearchSettings.__name__, len(STRATEGIES) > 1)
        print(format_arch(archdsl.load_spec("tiny")).splitlines()[0].split()[0])
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tiny", "True", "SearchSettings", "True", "arch"]
