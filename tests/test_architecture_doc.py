"""docs/architecture.md's path of one search trial is the code's: every name it gives resolves to what
the code has, and a call it spells with arguments takes those parameters first."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import _search_support as support
import optuna
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
START, END = "The path of one trial", "no setting is copied"
PATH = DOC[DOC.index(START) : DOC.index(END, DOC.index(START))]
NAMES = sorted(set(re.findall(r"`([^`]+)`", PATH)) - {"archdsl search"})
SEARCH_MODULES = sorted(
    ".".join(p.relative_to(ROOT / "search").with_suffix("").parts)
    for p in (ROOT / "search").rglob("*.py")
    if p.stem != "__init__"
)


def _module(dotted: str):
    for name in (f"archdsl.search.{dotted}", f"archdsl.{dotted}"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    return None


def _resolve(name: str, plan) -> object:
    """What a dotted name of the doc is: `plan.x` on a study's plan, `study.x` on an Optuna study, a
    module's (archdsl.search.X or archdsl.X) attribute, or a search class's attribute."""
    first, *rest = name.split(".")
    if first == "plan":
        return eval(name, {"plan": plan})  # the attribute path works on a real plan
    if first == "study":
        found: object = optuna.Study
    else:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest module prefix
            module = _module(".".join(parts[:cut]))
            if module is not None:
                found, rest = module, parts[cut:]
                break
        else:
            owners = [importlib.import_module(f"archdsl.search.{m}") for m in SEARCH_MODULES]
            classes = [getattr(m, first) for m in owners if inspect.isclass(getattr(m, first, None))]
            assert classes, f"{first} is no module nor a class of archdsl.search"
            found = classes[0]
    for attr in rest:
        found = getattr(found, attr)
    return found


@pytest.mark.parametrize("name", NAMES)
def test_each_name_of_the_trial_path_is_the_codes(name, tmp_path):
    if name.endswith(".py"):
        assert (ROOT / "archdsl" / name).is_file()
        return
    call = re.fullmatch(r"([\w.]+)\(([^)]*)\)", name)
    target = _resolve(call.group(1) if call else name, support.plan_for(tmp_path, "s"))
    if call:
        given = [a.strip() for a in call.group(2).split(",")]
        taken = [p for p in inspect.signature(target).parameters if p != "self"]
        assert taken[: len(given)] == given, f"{call.group(1)} takes {taken}"


def test_the_path_names_the_steps():
    assert len(re.findall(r"^\d\. ", PATH, flags=re.MULTILINE)) in (5, 6)
    assert {"planning.plan_space", "runner.run_search(plan)", "fidelity.trial.TrialObjective(plan, measurer)"} <= set(
        NAMES
    )
