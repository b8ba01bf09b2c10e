"""The strategy seam (search/walk/strategy.py): one registry of strategies, no module outside search/walk/ asking a
strategy's name, and a new strategy that is one file and one registry line: tests/_strategy_example.py, the file
docs/architecture.md ("Adding a strategy") shows, run here through the real search code."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import _replay_support as replay_support
import _search_support as search_support
import optuna
import pytest
from _strategy_example import BruteForce

from archdsl.search.fidelity.replay import TABLE_PREFIX, load_replay
from archdsl.search.runner import run_search, target_trials
from archdsl.search.settings import SearchSettings, chosen_pruner
from archdsl.search.studies.record import DIGEST_ATTR, is_copy, is_verdict
from archdsl.search.walk.registry import REGISTRY, STRATEGIES, strategy_named, walks

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).with_name("_strategy_example.py")


@pytest.fixture
def brute(monkeypatch) -> BruteForce:
    """The example registered as its registry line would register it (`BruteForce(),` in registry.REGISTRY's list)."""
    strategy = BruteForce()
    monkeypatch.setitem(REGISTRY, strategy.name, strategy)
    return strategy


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # Optuna's word on BruteForceSampler
def test_the_example_strategy_runs_a_search_through_the_seam(tmp_path, brute):
    space = replay_support.the_space()
    table = replay_support.write_table(tmp_path / "table.json", replay_support.make_table(space, noise=0.002))
    replay = load_replay(f"{TABLE_PREFIX}{table}")
    plan = search_support.plan_for(
        tmp_path, "brute", space=space, epochs=replay.epochs, strategy="brute", n_trials=space.n_designs(),
        pruner="none", fidelity_source=f"{TABLE_PREFIX}{replay.source}",
    )  # fmt: skip
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(), study_name="brute")
    study = run_search(dataclasses.replace(plan, replay=replay, study=study, keep_files=False)).study

    assert isinstance(study.sampler, optuna.samplers.BruteForceSampler)
    measured = [t.user_attrs[DIGEST_ATTR] for t in study.trials if is_verdict(t) and not is_copy(t)]
    assert sorted(measured) == sorted(set(measured)) and len(measured) == space.n_designs()  # each design once
    assert {tuple(sorted(t.params.items())) for t in study.trials} <= {
        tuple(sorted(p.items())) for p in _points(space)
    }  # and nothing off the space's points
    assert target_trials(plan) == space.n_designs()  # the defaults of `Strategy` answer the rest
    assert chosen_pruner("auto", "brute", 6) == "hyperband" and not walks("brute")


def _points(space) -> list[dict]:
    import itertools

    choices = space.choices()
    return [dict(zip(choices, values, strict=True)) for values in itertools.product(*choices.values())]


def test_the_registry_is_the_one_list_of_strategies(brute):
    assert STRATEGIES == ("buildup", "tpe", "nsga2", "grid", "random")  # --strategy's choices, the default first
    field = SearchSettings.model_fields["strategy"]
    assert field.default == STRATEGIES[0] and field.json_schema_extra["choices"] == list(STRATEGIES)
    assert SearchSettings(strategy="brute").strategy == "brute"  # a registered strategy is a valid setting
    assert strategy_named("brute") is brute
    with pytest.raises(ValueError, match="unknown strategy 'nope'; choose from buildup, tpe, nsga2, grid, random"):
        SearchSettings(strategy="nope")


def test_a_recorded_strategy_is_read_through_the_registry():
    assert walks("buildup")
    # a study's strategy attr is data: a sampler's, an unknown one, none, or a trial's (race, leaders, redraw)
    assert not any(walks(recorded) for recorded in ("tpe", "random", "nope", None, 3, "race", "leaders", "redraw"))


def test_the_registry_lists_the_names_without_importing_optuna():
    code = (
        "import sys\nfrom archdsl.search.settings import STRATEGIES\n"
        "print(STRATEGIES, sorted(m for m in ('optuna', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('buildup', 'tpe', 'nsga2', 'grid', 'random') []"


# `== "buildup"`, `"tpe" !=`, `strategy in ("grid", ...)`: a comparison with a strategy's name.
_NAMES = "|".join(map(re.escape, STRATEGIES))
NAME_COMPARISON = re.compile(rf'(==|!=|\bin)\s*[(\[{{]?\s*"({_NAMES})"|"({_NAMES})"\s*(==|!=|\bin\b)')


def _sources_outside_the_strategies_folder() -> list[Path]:
    """archdsl/ (less its links to search/, analysis/, specs/), search/ less search/walk/, and analysis/."""
    found = []
    for folder in ("archdsl", "search", "analysis"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if (ROOT / parts[0] / parts[1]).is_symlink() or parts[:2] == ("search", "walk"):
                continue
            found.append(path)
    return found


def test_no_module_outside_the_strategies_folder_asks_a_strategy_name():
    sources = _sources_outside_the_strategies_folder()
    assert ROOT / "search" / "runner.py" in sources and ROOT / "search" / "walk" / "registry.py" not in sources
    outside = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if NAME_COMPARISON.search(line)
    ]
    assert outside == []
    assert NAME_COMPARISON.search('if plan.settings.strategy != "buildup":')  # what it would find
    assert NAME_COMPARISON.search('if strategy in ("tpe", "random"):')


def test_the_architecture_doc_shows_the_example_file_as_the_test_runs_it():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    shown = [block for block in blocks if "class BruteForce(Strategy)" in block]
    if not shown:
        pytest.skip("docs/architecture.md does not show the example strategy yet")
    assert shown[0] == EXAMPLE.read_text(encoding="utf-8")
