"""`--knobs choose`: when a stage takes its first MSA, the walk chooses its searched knobs (window here) on the paired
seeds' mean before the verdict judges it; `base` keeps the base's (search/walk/buildup.py, `Rules.knobs`)."""

from __future__ import annotations

from archdsl.lang.spec import load_spec
from archdsl.search.objectives import OBJECTIVES
from archdsl.search.seed_stats import Racing
from archdsl.search.space import make_space
from archdsl.search.studies.record import Measured
from archdsl.search.walk.buildup import Rules, longest_walk, walk

ACCURACY = OBJECTIVES["accuracy"]
SPACE = make_space(load_spec("alter-small-base"), ("k", "window"))  # c1, c2, c3 (max k 1, 1, 2), windows searched
BASE_WINDOW = {s.name: s.default_window for s in SPACE.stages}


def _play(value, rules):
    """The walk, each paired seed answered by `value(params, index)` (`value(params, index, rung)` where it takes
    three); the walk once done, and the designs asked."""
    measured: dict[tuple[str, int], Measured] = {}
    asked = []
    while (ask := walk(SPACE, measured, ACCURACY, rules).next) is not None:
        key = (SPACE.arch_from_params(ask.params).digest(), ask.rung)
        first = rules.racing.seeds if ask.rung >= rules.rungs else 0  # the settle stage's fresh seeds
        indices = [ask.seed_index] if ask.seed_index is not None else list(range(first, first + rules.racing.seeds))
        values = dict(measured[key].seeds) if key in measured else {}
        at = (lambda p, i: value(p, i, ask.rung)) if value.__code__.co_argcount == 3 else value
        values.update({i: at(ask.params, i) for i in indices})
        measured[key] = Measured("COMPLETE", sum(values.values()) / len(values), values)
        asked.append(dict(ask.params))
    return walk(SPACE, measured, ACCURACY, rules), asked


def _global_c1_wins(params, index):
    """An MSA anywhere helps a little; an MSA in c1 with a global window helps most (resnet-fmnist's best designs on
    odd-one-out need one); small paired noise."""
    msas = sum(int(params[f"k_{s.name}"]) for s in SPACE.stages)
    c1_global = int(params["k_c1"]) > 0 and params["window_c1"] == "global"
    return 0.6 + 0.02 * msas + (0.1 if c1_global else 0.0) + (0.003, -0.003, 0.0)[index % 3]


def test_base_keeps_the_bases_windows_and_choose_finds_the_window_that_helps():
    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1)
    kept, _ = _play(_global_c1_wins, rules)
    assert int(kept.answer["k_c1"]) == 1 and kept.answer["window_c1"] == BASE_WINDOW["c1"] and not kept.choices

    chose, asked = _play(_global_c1_wins, Rules(racing=Racing(3, 3), keep="mean", chance=0.1, knobs="choose"))
    assert chose.answer["window_c1"] == "global" and int(chose.answer["k_c1"]) == 1
    c1 = next(c for c in chose.choices if c.stage == "c1")
    assert c1.chosen == "global" and {v for v, _ in c1.values} == set(SPACE.stages[0].windows)
    # each stage chose once, at its first MSA: c3's second MSA kept the window c3's first chose
    assert sorted(c.stage for c in chose.choices) == ["c1", "c2", "c3"]
    assert len(asked) == longest_walk(SPACE, "choose") > longest_walk(SPACE)


def test_a_tie_keeps_the_base_window():
    """Every window scores alike: the value the candidate had first (the base's) is kept."""

    def windows_alike(params, index):
        return 0.6 + 0.02 * sum(int(params[f"k_{s.name}"]) for s in SPACE.stages) + (0.003, -0.003, 0.0)[index % 3]

    result, _ = _play(windows_alike, Rules(racing=Racing(3, 3), keep="mean", chance=0.1, knobs="choose"))
    assert all(result.answer[f"window_{s}"] == w for s, w in BASE_WINDOW.items())
    assert all(c.chosen == BASE_WINDOW[c.stage] for c in result.choices)


def test_no_window_is_chosen_among_designs_at_chance():
    """A global window at c1 stands highest but every design is at chance (10 classes): nothing ranks there, the
    base's window is kept."""

    def at_chance(params, index):
        return 0.1 + (0.02 if int(params["k_c1"]) and params["window_c1"] == "global" else 0.0) + 0.001 * index

    result, _ = _play(at_chance, Rules(racing=Racing(3, 3), keep="mean", chance=0.1, knobs="choose"))
    assert result.choices and all(c.chosen == BASE_WINDOW[c.stage] for c in result.choices)


def test_the_settle_stage_measures_the_answer_at_the_bases_window_beside_the_chosen_one():
    """A global window in c1 leads at the walk's budget and falls behind the base's window at the settle budget
    (odd-one-out alter-small's c1, 8 against 16-24 epochs): the settle stage re-measures the answer at the base's
    windows too, and answers it."""

    def global_fades(params, index, rung):
        c1 = int(params["k_c1"]) > 0
        lead = 0.1 if rung == 0 else -0.05  # global's lead at the walk's budget, its deficit at the settle budget
        bonus = lead if c1 and params["window_c1"] == "global" else 0.0
        msas = sum(int(params[f"k_{s.name}"]) for s in SPACE.stages)
        return 0.6 + 0.02 * msas + bonus + (0.003, -0.003, 0.0)[index % 3]

    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1, knobs="choose", settle=1)
    result, _ = _play(global_fades, rules)
    assert [c.chosen for c in result.choices if c.stage == "c1"] == ["global"]
    [settled] = result.settled
    shortlisted = [p["window_c1"] for p, _ in settled.values if int(p["k_c1"])]
    assert "global" in shortlisted and BASE_WINDOW["c1"] in shortlisted
    assert result.answer["window_c1"] == BASE_WINDOW["c1"] and int(result.answer["k_c1"]) == 1


def test_a_search_that_chooses_its_windows_is_not_cut_short_by_the_default_n_trials(tmp_path, capsys):
    """`archdsl search --search k,window` on resnet-fmnist's space, replayed: the walk measures the base, then each
    stage's first MSA at every window (2 + 3 + 4), 10 designs; the default --n-trials (8) stopped it at 8, in the
    middle of c1's windows, and the settle stage never ran."""
    import _replay_support as support
    import optuna

    from archdsl.cli import main
    from archdsl.search.studies.record import DIGEST_ATTR
    from archdsl.search.walk.buildup import longest_walk

    space = support.the_space(("k", "window"))
    table = support.write_table(tmp_path / "t.json", support.make_table(space, noise=0.002))
    out = tmp_path / "runs"
    argv = [
        "search", "--dataset", support.DATASET, "--base", support.BASE, "--search", "k,window",
        "--fidelity", f"table:{table}", "--study-name", "s", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    study = optuna.load_study(
        study_name="s", storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(out / "s" / "study.journal"))
        ),
    )  # fmt: skip
    designs = {t.user_attrs.get(DIGEST_ATTR) for t in study.trials if t.state.name == "COMPLETE"}
    assert len(designs) == longest_walk(space, "choose") == 10
    assert "chose window" in printed.out and "for c1's first MSA" in printed.out


def test_the_stop_rule_lets_the_settle_stage_measure_a_design_the_walk_did_not():
    """The answer at the base's windows can be a design the walk never measured (c2 chose window 2, so c1's windows
    were tried beside c2's 2): with the study at its count of designs, the stop rule stopped the search before the
    settle stage measured it, and the search answered the unsettled walk."""
    import optuna

    from archdsl.search.runner import _StopAt
    from archdsl.search.walk.buildup import Ask
    from archdsl.search.walk.planned import PlannedSampler

    rules = Rules(racing=Racing(3, 3), keep="mean", knobs="choose", settle=1)
    sampler = PlannedSampler(SPACE, ACCURACY, 0, rules)
    unmeasured = dict(SPACE.endpoints()[-1].params)
    sampler.walk = lambda study: type("W", (), {"next": Ask(unmeasured, "c1", rung=1)})()  # type: ignore[method-assign]
    study = optuna.create_study(direction="maximize")
    assert not _StopAt(0, SPACE, 0, sampler).done(study)  # at its count (0 designs), a settle ask still runs
    sampler.walk = lambda study: type("W", (), {"next": Ask(unmeasured, "c1", rung=0)})()  # type: ignore[method-assign]
    assert _StopAt(0, SPACE, 0, sampler).done(study)  # a walk's new design past the count: stopped, as before
