"""A trial's record has one home (`archdsl.search.studies.record`): the one scan of a study's trials, every attr
name a search writes, and the rules that tell what a trial is. Checked on the source: no other module
of archdsl scans a study's trials or spells an attr's name."""

from __future__ import annotations

import ast
from pathlib import Path

import optuna
from optuna.trial import TrialState

from archdsl.search.studies import record

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "search" / "studies" / "record.py"
SOURCES = sorted(p for folder in ("archdsl", "search", "analysis") for p in (ROOT / folder).rglob("*.py"))
# Optuna's own system attrs (retries, enqueued parameters), reached where every private Optuna use is.
OPTUNA_PRIVATE = ROOT / "search" / "_optuna_private.py"
# Reading a study's trials: Optuna's scans (`best_trial(s)` and `trials` scan them too).
SCANS = {"get_trials", "best_trial", "best_trials"}
# Writing or reading a trial's or a study's attrs by name.
ATTR_CALLS = {"set_user_attr", "set_trial_user_attr", "set_trial_system_attr", "set_study_user_attr"}


def scans(source: str) -> list[str]:
    """Where `source` reads a study's trials: `line: what`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and (
            node.attr in SCANS or (node.attr == "trials" and "study" in ast.unparse(node.value))
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def spelled_attrs(source: str) -> list[str]:
    """Where `source` names an attr with a string of its own: `x.set_user_attr("digest", ...)`,
    `t.user_attrs.get("digest")`, `t.user_attrs["digest"]`, or a module-level `X_ATTR = "..."`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ATTR_CALLS:
                keys = node.args[:2]  # (key, value), or a storage's (trial id, key, value)
            elif node.func.attr == "get" and ast.unparse(node.func.value).endswith(("user_attrs", "system_attrs")):
                keys = node.args[:1]
            else:
                keys = []
            if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in keys):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value).endswith(("user_attrs", "system_attrs"))
            and isinstance(node.slice, ast.Constant)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.endswith("_ATTR")]
            found += [f"{node.lineno}: {name}" for name in names]
    return found


def _offenders(check, skipped: tuple[Path, ...]) -> dict[str, list[str]]:
    found = {str(p.relative_to(ROOT)): check(p.read_text(encoding="utf-8")) for p in SOURCES if p not in skipped}
    return {path: where for path, where in found.items() if where}


def test_no_module_but_the_record_scans_a_studys_trials():
    assert _offenders(scans, (RECORD,)) == {}, "scan a study's trials with archdsl.search.studies.record.trials"


def test_no_module_but_the_record_spells_an_attr():
    assert _offenders(spelled_attrs, (RECORD, OPTUNA_PRIVATE)) == {}, "name the attr from archdsl.search.studies.record"


def test_the_checks_see_a_scan_and_an_attr_spelled_out():
    source = (
        'X_ATTR = "x"\n'
        "def f(study, trial):\n"
        "    trial.set_user_attr('digest', 1)\n"
        "    trial.user_attrs.get('metrics')\n"
        "    trial.user_attrs['copy_of']\n"
        "    return study.get_trials(), study.trials, study.best_trial\n"
    )
    assert len(scans(source)) == 3
    assert len(spelled_attrs(source)) == 4
    assert scans(RECORD.read_text(encoding="utf-8"))  # the one scan is there


def _numbered(*specs: tuple[TrialState, dict]) -> list[optuna.trial.FrozenTrial]:
    trials = []
    for number, (state, attrs) in enumerate(specs):
        value = 0.5 if state == TrialState.COMPLETE else None
        trial = optuna.trial.create_trial(state=state, value=value, user_attrs=attrs)
        trial.number = number
        trials.append(trial)
    return trials


def test_what_counts_towards_n_trials_and_what_a_design_is_measured_on():
    d, e = record.DIGEST_ATTR, "e"
    metrics = {record.SEED_VALUES_KEY: [0.5, 0.7], "accuracy": 0.6}
    trials = _numbered(
        (TrialState.COMPLETE, {d: "a", record.METRICS_ATTR: metrics}),
        (TrialState.FAIL, {d: "a", record.COPY_ATTR: 0}),  # a copy
        (TrialState.COMPLETE, {d: "a", record.SEED_INDICES_ATTR: [2], record.METRICS_ATTR: metrics}),  # an extra seed
        (TrialState.FAIL, {d: "b", record.FAIL_REASON_ATTR: f"{record.WORKER_STOPPED} (killed or lost)"}),
        (TrialState.FAIL, {d: "c", record.FAIL_REASON_ATTR: "training diverged"}),
        (TrialState.RUNNING, {d: e}),
    )
    assert record.measured_designs(trials) == 2  # a, and c's own failure; not the copy, not b's lost worker
    assert record.taken_designs(trials) == {"a", "c", "e"}
    assert record.seed_values_by_design(trials) == {"a": {0: 0.5, 1: 0.7, 2: 0.5}}  # the extra seed at index 2
    assert list(record.first_trials(trials)) == ["a"] and record.first_trials(trials)["a"].number == 0
    assert record.claimed_seed_indices(trials, "a") == ({2}, False)
    assert record.is_measuring(trials, e, None) and not record.is_measuring(trials, "a", None)
    assert not record.search_ended(trials) and record.search_ended(trials[:5])
    assert record.twin_decision(trials, 6, "a") == ("copy", trials[0])
