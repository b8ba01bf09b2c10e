"""Strategies: the build-up rule's order, and real (tiny) searches with every sampler."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _search_support as support
import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.lang.spec import load_spec, parse_spec
from archdsl.search.objectives import OBJECTIVES
from archdsl.search.space import make_space
from archdsl.search.studies.record import Measured
from archdsl.search.walk.buildup import PLAIN, walk

pytestmark = pytest.mark.usefixtures("one_thread")


def _fake_trial(value):
    """A design's measurement: its value, or a failure (None)."""
    return Measured("COMPLETE", value) if value is not None else Measured("FAIL", None)


def _play(space, lead, evaluate, rules=PLAIN):
    """The walk as a study plays it: `walk` on what is measured so far asks for the next measurement, which
    `evaluate(params, stage)` answers; the steps once the walk is done."""
    measured = {}
    while (ask := walk(space, measured, lead, rules).next) is not None:
        measured[(space.arch_from_params(ask.params).digest(), ask.rung)] = evaluate(ask.params, ask.stage)
    return walk(space, measured, lead, rules).steps


def test_buildup_walks_from_the_last_stage_back_and_stops_after_the_first():
    space = make_space(load_spec("alter50-base"))  # max k = (1, 2, 3, 2)
    # The paper's curve (Sec. 4.1): c4 twice helps, c3 once helps, a second c3 does not, c2 helps.
    scores = {
        (0, 0, 0, 0): 82.49,
        (0, 0, 0, 1): 83.46,
        (0, 0, 0, 2): 83.67,
        (0, 0, 1, 2): 83.78,
        (0, 0, 2, 2): 83.53,
        (0, 1, 1, 2): 84.03,
        (0, 2, 1, 2): 83.9,
        (1, 1, 1, 2): 83.0,
    }
    asked = []
    changed = []

    def evaluate(params, stage):
        ks = tuple(params[f"k_c{i}"] for i in range(1, 5))
        asked.append(ks)
        changed.append(stage)
        return _fake_trial(scores[ks])

    steps = _play(space, OBJECTIVES["accuracy"], evaluate)
    assert asked == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 0, 0, 2),
        (0, 0, 1, 2),
        (0, 0, 2, 2),
        (0, 1, 1, 2),
        (0, 2, 1, 2),
        (1, 1, 1, 2),
    ]
    # The stage that got one more MSA than the design kept before it (None: the base).
    assert changed == [None, "c4", "c4", "c3", "c3", "c2", "c2", "c1"]
    assert [s.label for s in steps][:3] == ["base", "+1 MSA in c4", "+1 MSA in c4"]
    kept = [s.params for s in steps if s.accepted][-1]
    assert (kept["k_c1"], kept["k_c2"], kept["k_c3"], kept["k_c4"]) == (0, 1, 1, 2)  # the paper's AlterNet


def test_buildup_treats_a_failed_candidate_as_no_better_and_minimises_when_asked():
    space = make_space(load_spec("alter50-base"))
    seen = []

    def evaluate(params, stage):
        ks = tuple(params[f"k_c{i}"] for i in range(1, 5))
        seen.append(ks)
        # params (minimise): every MSA adds parameters, so nothing is ever kept.
        return _fake_trial(None if ks == (0, 0, 0, 1) else 100.0 + sum(ks))

    steps = _play(space, OBJECTIVES["params"], evaluate)
    assert seen == [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0)]
    assert [s.accepted for s in steps] == [True, False, False, False, False]


@pytest.mark.slow
def test_buildup_search_follows_the_rule_on_real_training(tmp_path):
    assert main(support.search_args(tmp_path, "bu", "--strategy", "buildup", "--n-trials", "6")) == 0
    study = support.load(tmp_path, "bu")
    trials = [t for t in study.trials if t.state == TrialState.COMPLETE]
    ks = [tuple(t.params[f"k_c{i}"] for i in (1, 2, 3)) for t in trials]
    assert ks[0] == (0, 0, 0) and ks[1] == (0, 0, 1)  # the base first, then the end of the last stage
    assert trials[0].user_attrs["buildup_step"] == "base"
    assert trials[0].user_attrs["layout"] == "c1:CC c2:CC c3:CC"
    assert study.metric_names == ["accuracy"]  # optuna-dashboard names the objective
    best, best_value, stage = ks[0], trials[0].values[0], 2
    for k, trial in zip(ks[1:], trials[1:], strict=True):
        grown = [i for i in range(3) if k[i] == best[i] + 1]
        assert len(grown) == 1 and all(k[i] == best[i] for i in range(3) if i != grown[0])  # one MSA added
        assert grown[0] <= stage  # never back to a later stage
        # What the dashboard shows of the step: the stage that changed, and the layout.
        assert trial.user_attrs["buildup_step"] == f"+1 MSA in c{grown[0] + 1}"
        assert trial.user_attrs["layout"].split()[grown[0]].count("M") == k[grown[0]]
        stage = grown[0]
        if trial.values[0] > best_value:
            best, best_value = k, trial.values[0]
        else:
            stage -= 1
    # Every trial left its spec, metrics and checkpoint; the report names the winner.
    run = tmp_path / "runs" / "bu"
    for t in trials:
        folder = run / "trials" / f"{t.number}-{t.user_attrs['short_id']}"
        assert json.loads((folder / "metrics.json").read_text())["objectives"]["accuracy"] == t.values[0]
        assert parse_spec((folder / "spec.arch").read_text()).digest() == t.user_attrs["digest"]
        assert list(folder.glob("*.safetensors"))
    assert (run / "report" / "report.md").read_text().count("```arch") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy, objectives, n_trials",
    [
        ("tpe", "accuracy", 3),
        ("random", "accuracy", 3),
        ("grid", "accuracy,params", 3),
        ("nsga2", "accuracy,latency", 3),
    ],
)
def test_each_strategy_runs_a_study_and_reports_it(tmp_path, strategy, objectives, n_trials):
    args = support.search_args(
        tmp_path,
        strategy,
        "--strategy",
        strategy,
        "--objectives",
        objectives,
        "--n-trials",
        str(n_trials),
        "--seed-endpoints",
    )
    assert main(args) == 0
    study = support.load(tmp_path, strategy)
    finished = [t for t in study.trials if t.state.is_finished()]
    complete = [t for t in finished if t.state == TrialState.COMPLETE]
    assert complete and all(len(t.values) == len(objectives.split(",")) for t in complete)
    assert complete[0].user_attrs.get("endpoint") == "resnet"  # --seed-endpoints goes first
    # A design is measured once: a trial that drew it again is a copy, not a finished trial.
    counted = [t for t in finished if "copy_of" not in t.user_attrs]
    assert len(counted) == n_trials and len({t.user_attrs["digest"] for t in counted}) == n_trials
    best = sorted((tmp_path / "runs" / strategy / "best").glob("*.arch"))
    assert best and all(parse_spec(p.read_text()).n_blocks == 6 for p in best)
    assert (tmp_path / "runs" / strategy / "report" / "history.png").stat().st_size > 1000
    # Running the same command again resumes a finished study: no new trial.
    assert main(args) == 0
    assert len(support.load(tmp_path, strategy).trials) == len(study.trials)


def test_a_trial_is_never_pruned_at_its_last_epoch():
    """Pruning after the last epoch saves nothing and loses a measured result."""
    from optuna.distributions import IntDistribution
    from optuna.trial import TrialState

    from archdsl.search.fidelity.trial import TrialObjective
    from archdsl.search.walk.samplers import make_pruner

    plan = support.plan_for(Path("unused"), "s", space=make_space(load_spec("alter50-base")), epochs=2)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(plan.objectives, 2))
    for value in (0.8, 0.9, 0.85):  # the pruner's startup trials, all far better
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, value=value, intermediate_values={1: value, 2: value},
            params={"k": 0}, distributions={"k": IntDistribution(0, 1)},
        ))  # fmt: skip
    objective = TrialObjective(plan, None)  # type: ignore[arg-type]
    with pytest.raises(optuna.TrialPruned, match="below the median at epoch 1"):
        objective._report(study.ask(), 1, 0.1)
    last = study.ask()
    objective._report(last, 2, 0.1)  # the last epoch: reported, not pruned
    assert last.should_prune()  # (the pruner would have)


def _paired_walk_decisions(true_gain: float, runs: int, seeds: int = 5, noise: float = 0.01) -> float:
    """How often the walk's rule keeps a candidate whose true accuracy is `true_gain` above the
    incumbent's, on generated paired seeds: each seed shifts both designs alike (its subset and
    batch order), and each design-seed pair adds its own noise of standard deviation `noise`."""
    import numpy as np

    from archdsl.search.objectives import OBJECTIVES
    from archdsl.search.seed_stats import improves_beyond_noise

    rng = np.random.default_rng(0)
    kept = 0
    for _ in range(runs):
        shared = rng.normal(0, 0.05, seeds)  # the seeds' own effect, common to both designs
        incumbent = 0.6 + shared + rng.normal(0, noise, seeds)
        candidate = 0.6 + true_gain + shared + rng.normal(0, noise, seeds)
        kept += improves_beyond_noise(tuple(candidate), tuple(incumbent), OBJECTIVES["accuracy"])
    return kept / runs


def test_the_walk_keeps_a_true_improvement_beyond_the_noise():
    # a gain of three times the paired noise, on 5 seeds whose common effect is five times larger
    assert _paired_walk_decisions(true_gain=0.03, runs=400) > 0.9


def test_the_walk_keeps_a_null_improvement_at_its_stated_rate():
    from archdsl.search.seed_stats import KEEP_LEVEL

    rate = _paired_walk_decisions(true_gain=0.0, runs=4000)
    # binomial: 4000 draws at 5 % have a standard deviation of 0.35 %
    assert abs(rate - KEEP_LEVEL) < 0.015, rate


def test_the_walk_compares_on_the_objectives_direction():
    from archdsl.search.objectives import OBJECTIVES
    from archdsl.search.seed_stats import improves_beyond_noise

    lower = (0.10, 0.11, 0.09)
    higher = (0.20, 0.22, 0.19)
    assert improves_beyond_noise(higher, lower, OBJECTIVES["accuracy"])
    assert not improves_beyond_noise(lower, higher, OBJECTIVES["accuracy"])


def test_with_paired_seeds_the_walk_keeps_an_msa_only_beyond_the_noise():
    space = make_space(load_spec("alter50-base"))

    def seeded(values):
        return Measured("COMPLETE", sum(values) / len(values), dict(enumerate(values)))

    base = (0.60, 0.70, 0.50)
    # a higher mean from one lucky seed (its differences: +0.06, -0.02, -0.01): not beyond the noise
    noisy = {(0, 0, 0, 0): base, (0, 0, 0, 1): (0.66, 0.68, 0.49)}
    steps = _play(
        space, OBJECTIVES["accuracy"], lambda p, s: seeded(noisy.get(tuple(p[f"k_c{i}"] for i in range(1, 5)), base))
    )
    assert steps[1].value > steps[0].value and not steps[1].accepted
    # the same small gain on every seed is kept
    steady = (0.61, 0.71, 0.51)
    steps = _play(
        space, OBJECTIVES["accuracy"],
        lambda p, s: seeded(steady if tuple(p[f"k_c{i}"] for i in range(1, 5)) == (0, 0, 0, 1) else base),
    )  # fmt: skip
    assert steps[1].accepted


def test_keeping_on_the_mean_keeps_a_higher_mean_the_paired_test_cannot_call_and_never_a_lower_one():
    """`--keep mean` (Rules.keep): the paper's own rule, a higher mean over the paired seeds, with no test and no
    race: a gain from one lucky seed is kept (the default rule rejects it); a lower mean is not."""
    from archdsl.search.seed_stats import Racing
    from archdsl.search.walk.buildup import Rules

    space = make_space(load_spec("alter50-base"))
    on_mean, beyond_noise = Rules(Racing(3, 3), keep="mean"), Rules(Racing(3, 3))

    def play(candidate, rules):
        """The first verdict: an MSA at the end of c4 with seed values `candidate`, every other design the base's."""
        asked = []

        def evaluate(params, stage):
            ks = tuple(params[f"k_c{i}"] for i in range(1, 5))
            asked.append(ks)
            values = candidate if ks == (0, 0, 0, 1) else (0.60, 0.70, 0.50)
            return Measured("COMPLETE", sum(values) / 3, dict(enumerate(values)))

        return _play(space, OBJECTIVES["accuracy"], evaluate, rules)[1].accepted, asked

    lucky = (0.66, 0.68, 0.49)  # +0.06, -0.02, -0.01: a higher mean, not beyond the noise
    kept, asked = play(lucky, on_mean)
    assert kept and len(asked) == len(set(asked))  # kept, and no design measured twice (no race)
    assert not play(lucky, beyond_noise)[0]
    assert not play((0.70, 0.66, 0.42), on_mean)[0]  # +0.10, -0.04, -0.08: a lower mean


def test_a_race_asks_for_more_seeds_only_while_its_test_cannot_decide_and_stops_at_max_seeds():
    from archdsl.search.seed_stats import Racing, race_decision

    lead, racing = OBJECTIVES["accuracy"], Racing(seeds=2, max_seeds=4)
    assert racing.level == pytest.approx(0.05 / 3)  # Bonferroni over the looks at 2, 3 and 4 seeds
    base = {0: 0.70, 1: 0.60}
    assert race_decision({0: 0.75, 1: 0.65}, base, lead, racing) is True  # the same gain on both seeds: decided
    assert race_decision({0: 0.65, 1: 0.55}, base, lead, racing) is False  # the same loss: decided
    noisy = {0: 0.74, 1: 0.59}  # +0.04, -0.01: cannot tell
    assert race_decision(noisy, base, lead, racing) == (0, 2)  # the candidate's seed index 2 first
    assert race_decision({**noisy, 2: 0.80}, base, lead, racing) == (1, 2)  # then the incumbent's
    full = ({**noisy, 2: 0.71, 3: 0.60}, {**base, 2: 0.70, 3: 0.61})  # still undecided at 4 = --max-seeds
    assert race_decision(*full, lead, racing) is False
    assert race_decision(noisy, base, lead, Racing(2, 2)) is False  # no racing: not beyond the noise
    lost = ({2}, set())  # the race's trial of the candidate's seed index 2 failed: no more seeds to look at
    assert race_decision(noisy, base, lead, racing, lost=lost) is False


def test_racing_keeps_a_true_gain_more_often_and_a_null_one_no_more_than_the_stated_rate(monkeypatch):
    """benchmarks/racing_rates.py on generated seeds with today's noise (200 races per cell, seeded)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "racing_rates.py"
    spec = importlib.util.spec_from_file_location("racing_rates", path)
    rates = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, rates)  # its dataclass looks its module up
    spec.loader.exec_module(rates)
    plain_gain, plain_null, raced_gain, raced_null = (
        rates.keep_rate(2, most, gain, races=200) for most in (2, 6) for gain in (rates.GAIN, 0.0)
    )
    tolerance = 0.04  # 200 races: the rate's standard error at 5 % is 1.5 points
    assert plain_null.keep <= 0.05 + tolerance and raced_null.keep <= 0.05 + tolerance
    assert raced_gain.keep > plain_gain.keep + 0.2  # more seeds where two cannot tell
    assert plain_gain.mean_seeds == 2 and 2 < raced_gain.mean_seeds <= 6
