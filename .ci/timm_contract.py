#!/usr/bin/env python
"""timm's own model tests (`tests/test_models.py` of the installed timm release) on archdsl's models.

timm's test file is not copied into this repository: it comes from the sdist of the installed
timm version on PyPI (`pip download --no-binary :all: timm==<version>`), which ships `tests/`,
and is cached in `$ARCHDSL_TIMM_TESTS_DIR` (default `~/.cache/archdsl/timm-tests`). Lines
are added to timm's `conftest.py` and two to `test_models.py`, nothing else changes:

- `conftest.py` imports archdsl (which registers the `archdsl_*` models), keeps only the
  tests of the models named in `ARCHDSL_TIMM_MODELS` (exact names: pytest's `-k` matches
  substrings, and `archdsl_alter50` is a substring of `archdsl_alter50_base`), and gives each
  pytest-xdist worker one torch thread (the tests run on a worker per core, `-n auto`, as
  archdsl's own suite: two-thread workers on shared cores spin waiting for each other);
- `test_models.py`'s `NON_STD_FILTERS` (timm's list of models whose `forward_features` returns
  tokens, not an NCHW map: ViT, PiT, ...) gets the archdsl models whose head reads tokens, the
  way timm lists its own ViT and PiT there, and its `FEAT_INTER_FILTERS` (the model modules
  with `forward_intermediates`) gets archdsl's, so that those tests run on archdsl's models too.

Usage:
    .venv/bin/python .ci/timm_contract.py                       # every archdsl_* model
    .venv/bin/python .ci/timm_contract.py --native              # and timm's models of each family
    .venv/bin/python .ci/timm_contract.py --table docs/compiler.md   # rewrite the table there
    .venv/bin/python .ci/timm_contract.py --models archdsl_tiny -- -x   # after --: pytest's args
    .venv/bin/python .ci/timm_contract.py -- -n 0               # in this process, torch's own threads
Exit status: pytest's (0 when every selected test passed or was skipped).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

# timm's own model for each archdsl family: the table compares each archdsl model with it.
NATIVE = {"map": "resnet18", "vit": "vit_tiny_patch16_224", "pit": "pit_ti_224", "swin": "swin_tiny_patch4_window7_224"}
TABLE_BEGIN = "<!-- timm-contract-table: begin (.ci/timm_contract.py --native --table docs/compiler.md) -->"
TABLE_END = "<!-- timm-contract-table: end -->"
NON_STD_ANCHOR = "NUM_NON_STD = len(NON_STD_FILTERS)"
# timm registers archdsl's models under the module name `timm_models` (archdsl.nn.timm_models).
FEAT_INTER_ANCHOR = "# transformer / hybrid models don't support"
CONFTEST_ADDITION = """

# -- added by archdsl's .ci/timm_contract.py ------------------------------------------------
import archdsl.nn.timm_models  # noqa: E402,F401  (importing it registers the archdsl_* models with timm)

if os.environ.get("PYTEST_XDIST_WORKER"):  # one torch thread per worker, as archdsl's tests/conftest.py
    import torch as _torch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    # A model's tests; where timm lists a model with its tags (`resnet18.a1_in1k`), its first tag only.
    keep, seen, selected = set(os.environ["ARCHDSL_TIMM_MODELS"].split(",")), set(), []
    for item in items:
        name = getattr(item, "callspec", None) and item.callspec.params.get("model_name")
        key = (item.originalname, str(name).split(".")[0])
        if name and key[1] in keep and key not in seen:
            seen.add(key)
            selected.append(item)
    config.hook.pytest_deselected(items=[i for i in items if i not in selected])
    items[:] = selected
"""


def timm_version() -> str:
    import timm

    return str(timm.__version__)


def timm_tests(version: str) -> Path:
    """The folder with timm's `tests/` of `version` (downloaded once), archdsl's additions made."""
    root = Path(os.environ.get("ARCHDSL_TIMM_TESTS_DIR", Path.home() / ".cache" / "archdsl" / "timm-tests"))
    folder = root / version
    if not (folder / "tests" / "test_models.py").exists():
        with tempfile.TemporaryDirectory() as download:
            pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
            subprocess.run([*pip, f"timm=={version}", "-d", download], check=True)
            (sdist,) = Path(download).glob("timm-*.tar.gz")
            with tarfile.open(sdist) as archive:
                prefix = f"timm-{version}/"
                members = [m for m in archive.getmembers() if m.name.startswith(prefix + "tests/") and m.isfile()]
                members += [archive.getmember(prefix + "LICENSE")]
                for member in members:
                    member.name = member.name[len(prefix) :]
                folder.mkdir(parents=True, exist_ok=True)
                archive.extractall(folder, members=members, filter="data")
    return folder


def prepare(folder: Path, non_std: list[str]) -> Path:
    """A copy of timm's tests with archdsl's additions; returns its `tests/` folder."""
    work = Path(tempfile.mkdtemp(prefix="timm-contract-"))
    tests = work / "tests"
    tests.mkdir()
    for name in ("__init__.py", "conftest.py", "test_models.py"):
        (tests / name).write_text((folder / "tests" / name).read_text())
    conftest = tests / "conftest.py"
    conftest.write_text("import os\n" + conftest.read_text() + CONFTEST_ADDITION)
    models = tests / "test_models.py"
    text = models.read_text()
    for anchor in (NON_STD_ANCHOR, FEAT_INTER_ANCHOR):
        if anchor not in text:
            raise SystemExit(f"timm's test_models.py has no line {anchor!r}: update .ci/timm_contract.py")
    text = text.replace(NON_STD_ANCHOR, f"NON_STD_FILTERS += {non_std!r}\n{NON_STD_ANCHOR}", 1)
    text = text.replace(FEAT_INTER_ANCHOR, f"FEAT_INTER_FILTERS += ['timm_models']\n{FEAT_INTER_ANCHOR}", 1)
    models.write_text(text)
    return tests


def archdsl_models() -> dict[str, str]:
    """archdsl's timm model name -> its family in `NATIVE`."""
    from archdsl.ir import AttnBlock, MergeBlock, PoolBlock, head_layout
    from archdsl.lang.spec import builtin_names, load_spec
    from archdsl.nn.timm_models import timm_name

    families = {}
    for name in builtin_names():
        arch = load_spec(name)
        blocks = [b for s in arch.stages for b in s.blocks]
        if head_layout(arch) == "map":
            family = "map"
        elif any(isinstance(b, MergeBlock) for b in blocks):
            family = "swin"
        elif any(isinstance(b, PoolBlock) for b in blocks):
            family = "pit"
        else:
            family = "vit" if any(isinstance(b, AttnBlock) for b in blocks) else "map"
        families[timm_name(name)] = family
    return families


def results(junit: Path) -> dict[str, dict[str, str]]:
    """model -> test function -> "pass", "fail" or "skip"."""
    table: dict[str, dict[str, str]] = defaultdict(dict)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        function, _, params = name.partition("[")
        model = next((p for p in params.rstrip("]").split("-") if p and not p.isdigit()), "").split(".")[0]
        outcome = "pass"
        if case.find("skipped") is not None:
            outcome = "skip"
        elif case.find("failure") is not None or case.find("error") is not None:
            outcome = "fail"
        table[model][function] = outcome
    return table


def markdown(table: dict[str, dict[str, str]], families: dict[str, str], version: str) -> str:
    """The results as a Markdown table: a column per test that ran on some archdsl model."""
    rows = [m for m in sorted(families) if m in table]
    natives = [NATIVE[f] for f in NATIVE if NATIVE[f] in table]
    tests = sorted({t for m in rows for t in table[m]})
    short = {t: t.removeprefix("test_model_").removeprefix("test_") for t in tests}
    head = ["model", "family", "passed", *[short[t] for t in tests], "others passed"]
    lines = [
        f"timm {version}'s `tests/test_models.py`, per model: `ok` passed, `FAIL` failed, `skip` skipped, "
        "`-` not run for that model (timm's own filters); *others*: the tests timm runs only on",
        "its own model (e.g. its Swin's `set_input_size`).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    mark = {"pass": "ok", "fail": "FAIL", "skip": "skip"}
    for model in natives + rows:
        row = table[model]
        family = families[model] if model in families else "timm " + next(f for f, n in NATIVE.items() if n == model)
        shown = [t for t in tests if t in row]
        others = [t for t in row if t not in tests]
        passed = sum(row[t] == "pass" for t in shown)
        cells = [mark[row[t]] if t in row else "-" for t in tests]
        extra = f"{sum(row[t] == 'pass' for t in others)}/{len(others)}" if others else "-"
        lines.append("| " + " | ".join([f"`{model}`", family, f"{passed}/{len(shown)}", *cells, extra]) + " |")
    return "\n".join(lines)


def write_table(path: Path, text: str) -> None:
    doc = path.read_text()
    begin, end = doc.find(TABLE_BEGIN), doc.find(TABLE_END)
    if begin < 0 or end < begin:
        raise SystemExit(f"{path} has no {TABLE_BEGIN!r} ... {TABLE_END!r} block")
    path.write_text(doc[: begin + len(TABLE_BEGIN)] + "\n" + text + "\n" + doc[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated timm model names (default: every archdsl_* model)")
    parser.add_argument("--native", action="store_true", help="also run timm's model of each archdsl family")
    parser.add_argument("--table", type=Path, help="rewrite the results table in this Markdown file")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args()

    families = archdsl_models()
    models = args.models.split(",") if args.models else sorted(families)
    if args.native:
        models += sorted({NATIVE[families[m]] for m in models if m in families})
    version = timm_version()
    non_std = [m for m, f in families.items() if f in ("vit", "pit", "swin")]
    tests = prepare(timm_tests(version), non_std)
    junit = tests.parent / "junit.xml"
    command = [sys.executable, "-m", "pytest", str(tests / "test_models.py"), "-q", "-p", "no:cacheprovider"]
    command += ["--rootdir", str(tests.parent), "-c", os.devnull, f"--junitxml={junit}", "-n", "auto", "-rfE"]
    env = {**os.environ, "ARCHDSL_TIMM_MODELS": ",".join(models)}
    code = subprocess.run([*command, *args.pytest_args], env=env, cwd=tests.parent).returncode
    if junit.exists():
        table = results(junit)
        summary = markdown(table, families, version)
        print(summary)
        if args.table:
            write_table(args.table, summary)
    return code


if __name__ == "__main__":
    sys.exit(main())
