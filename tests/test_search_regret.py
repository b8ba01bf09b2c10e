"""benchmarks/search_regret.py on tables whose answers are known.

- `resnet-fmnist`'s 8 `k` designs under tests/_replay_support's rule (an MSA at the end of c3 or c2 helps, one in
  c1 hurts): the walk climbs to the best design on every seed, and random search held to the walk's CPU misses it
  whenever its draws leave the best out; so the walk's regret interval lies below random search's.
- A reference in which every design has the same mean (the same four values in another order): no method can do
  better than another, and the difference must not be called.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest

from tests._replay_support import make_table, the_space, write_table
from tests.test_benchmarks import ROOT, load_script


def with_cpu(table):
    """`table` with a training CPU time per run that differs from its wall time (the accounting must read the
    CPU) and grows with the design's MSAs, as a real table's does."""
    designs = []
    for d in table.designs:
        runs = [r.model_copy(update={"train_cpu_seconds": 5.0 * (1 + d.n_msa) + 0.5 * r.seed}) for r in d.runs]
        designs.append(d.model_copy(update={"runs": runs}))
    return table.model_copy(update={"designs": designs})


def jittered(table, scale: float, seed: int):
    """`table` with each run's validation and test top-1 moved by its own noise (uniform in +-scale)."""
    rng = random.Random(seed)
    designs = []
    for d in table.designs:
        runs = []
        for r in d.runs:
            shift = rng.uniform(-scale, scale)
            runs.append(r.model_copy(update={"val_acc": r.val_acc + shift, "test_acc": r.test_acc + shift}))
        designs.append(d.model_copy(update={"runs": runs}))
    return table.model_copy(update={"designs": designs})


def all_alike(table, values: tuple[float, ...]):
    """`table` with every design's runs taking `values` (one per seed), rotated by the design's place: every
    design has the same mean, and no two are alike seed by seed."""
    designs = []
    for i, d in enumerate(table.designs):
        ordered = sorted(d.runs, key=lambda r: r.seed)
        turned = values[i % len(values) :] + values[: i % len(values)]
        runs = [r.model_copy(update={"val_acc": v, "test_acc": v}) for r, v in zip(ordered, turned, strict=True)]
        designs.append(d.model_copy(update={"runs": runs}))
    return table.model_copy(update={"designs": designs})


@pytest.fixture(scope="module")
def space():
    return the_space(("k",))


@pytest.fixture(scope="module")
def rule_tables(space, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rule")
    reference = jittered(with_cpu(make_table(space, noise=0.001, seeds=(0, 1, 2, 3))), 0.0005, seed=1)
    cheap = jittered(with_cpu(make_table(space, noise=0.002, seeds=(0, 1, 2, 3, 4))), 0.0005, seed=2)
    return write_table(folder / "reference.json", reference), write_table(folder / "cheap.json", cheap)


def summarize(script, *argv: str) -> dict:
    return script.summarize(script.parse_args([*argv, "--replays", "6", "--bootstrap", "300"]))


def by_name(summary: dict) -> dict[str, dict]:
    return {m["name"]: m for m in summary["methods"]}


def test_the_walk_finds_the_rule_s_best_where_random_search_at_its_cpu_does_not(rule_tables, monkeypatch):
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    summary = summarize(script, "--reference", str(reference), "--cheap", str(cheap))

    assert summary["reference"]["best"] == "c1:CC c2:CM c3:CM"  # STAGE_GAIN: c3 and c2 help, c1 hurts
    methods = by_name(summary)
    (walk,) = [m for m in methods.values() if m["kind"] == "walk"]
    (rand,) = [m for m in methods.values() if m["kind"] == "random"]
    assert walk["answers"] == {"c1:CC c2:CM c3:CM": 1.0} and walk["designs_measured"] == 4
    assert walk["within"]["value"] == 1.0
    assert walk["regret"]["high"] < rand["regret"]["low"]  # the walk's interval below random search's
    assert rand["regret"]["low"] > 0 and rand["within"]["value"] < 0.9
    (difference,) = [d for d in summary["differences"] if d["second"] == rand["name"]]
    assert difference["called"] and difference["regret"]["high"] < 0
    assert summary["kendall"][0]["tau"] > 0.9  # the cheap table ranks as the reference does


def test_where_every_design_ties_no_difference_is_called(space, tmp_path: Path, monkeypatch):
    script = load_script("search_regret", monkeypatch)
    reference = all_alike(with_cpu(make_table(space, seeds=(0, 1, 2, 3))), (0.80, 0.83, 0.78, 0.81))
    cheap = jittered(with_cpu(make_table(space, seeds=(0, 1, 2, 3, 4))), 0.02, seed=3)  # answers all over
    ref_path, cheap_path = write_table(tmp_path / "r.json", reference), write_table(tmp_path / "c.json", cheap)
    summary = summarize(script, "--reference", str(ref_path), "--cheap", str(cheap_path))

    assert summary["reference"]["share_within_half_a_point"] == 1.0
    for m in summary["methods"]:
        assert m["regret"]["value"] == pytest.approx(0.0, abs=1e-9)
        assert m["regret"]["low"] >= 0 and m["regret"]["high"] > 0  # the reference's noise, resampled: never below 0
    assert len(by_name(summary)[summary["differences"][0]["first"]]["answers"]) > 1  # the walk's answers differ
    assert summary["differences"] and not any(d["called"] for d in summary["differences"])


def test_methods_are_judged_on_the_same_resamples(rule_tables, space, monkeypatch):
    """Paired: a sampler whose every search answers what the walk answered on the same seeds differs from it by
    exactly 0 in every replicate (resampling the two apart would give an interval around 0, not 0)."""
    script = load_script("search_regret", monkeypatch)
    reference_path, cheap_path = rule_tables
    ref_table, cheap_table = script.load(str(reference_path)), script.load(str(cheap_path))
    rung = script.read_rung(str(cheap_path), cheap_table)
    reference = script.read_reference(str(reference_path), ref_table, sorted(rung.val))
    rng = np.random.default_rng(0)
    for pool in (rung.seeds, tuple(range(30))):  # a bootstrap over 5 seeds; 10 disjoint sets of 3
        plan = script.seed_plan(pool, 3, 200, rng)
        walk = {s: [script.Outcome(reference.digests[i % 8], 10.0, 4, 0)] for i, s in enumerate(plan.sets)}
        copy = {s: [o[0]] * 5 for s, o in walk.items()}
        replays = script.Replays(["walk", "copy"], {"walk": "walk", "copy": "random"}, {"copy": "walk"},
                                 {"walk": "", "copy": ""}, {"walk": walk, "copy": copy}, {})  # fmt: skip
        results, (difference,) = script.judge_methods(reference, plan, replays, rng)
        assert (difference.regret.low, difference.regret.value, difference.regret.high) == pytest.approx((0, 0, 0))
        assert not difference.called and results["walk"].regret.high > results["walk"].regret.low


def test_a_regret_interval_is_never_below_0_and_an_interval_is_the_bootstrap_s_percentiles(monkeypatch):
    """A known case: a noiseless reference, one set of seeds; the walk answers the best, random search answers it
    on 5 of its 10 draws and a design 2 points below on the others. Random search's regret is 1.0 point and a
    resample of its draws is 0.2 x Binomial(10, 1/2) points, whose 2.5th and 97.5th percentiles are 0.4 and 1.6;
    the walk's is 0 in every replicate. A t-interval, symmetric, would reach below 0 as soon as a regret's point
    is near it."""
    script = load_script("search_regret", monkeypatch)
    values = np.array([[0.90] * 3, [0.88] * 3, [0.80] * 3])
    designs = ("a", "b", "c")
    reference = script.Reference("r", "24 epochs", designs, designs, (0, 1, 2), (0, 1, 2), values, values)
    rng = np.random.default_rng(0)
    plan = script.seed_plan((0, 1, 2), 3, 10000, rng)
    (seeds,) = plan.sets
    outcome = {d: script.Outcome(d, 10.0, 2, 0) for d in "ab"}
    replays = script.Replays(
        ["walk", "random"], {"walk": "walk", "random": "random"}, {"random": "walk"}, {"walk": "", "random": ""},
        {"walk": {seeds: [outcome["a"]]}, "random": {seeds: [outcome["a"]] * 5 + [outcome["b"]] * 5}}, {},
    )  # fmt: skip
    results, (difference,) = script.judge_methods(reference, plan, replays, rng)

    walk, rand = results["walk"].regret, results["random"].regret
    assert (walk.value, walk.low, walk.high) == pytest.approx((0.0, 0.0, 0.0))
    assert (rand.value, rand.low, rand.high) == pytest.approx((1.0, 0.4, 1.6))
    d = difference.regret
    assert (d.value, d.low, d.high) == pytest.approx((-1.0, -1.6, -0.4)) and difference.called
    assert results["random"].within.high <= 1.0 and results["random"].within.low >= 0.0


def test_the_seed_plan_resamples_seeds_and_never_repeats_one_within_a_search(monkeypatch):
    script = load_script("search_regret", monkeypatch)
    rng = np.random.default_rng(1)
    plan = script.seed_plan((0, 1, 2, 3, 4), 3, 500, rng)
    assert plan.mode == "bootstrap" and len(plan.sets) == 10  # every 3 of 5
    assert all(len(set(s)) == 3 for s in plan.sets)
    assert np.allclose(plan.replicates.sum(axis=1), 1.0)
    assert (plan.replicates == 0).any() and len({tuple(row) for row in plan.replicates}) > 20
    disjoint = script.seed_plan(tuple(range(31)), 3, 50, rng)
    assert disjoint.mode == "disjoint" and len(disjoint.sets) == 10
    assert len({seed for s in disjoint.sets for seed in s}) == 30  # no seed in two sets
    with pytest.raises(script.UserError, match="--seeds 4"):
        script.seed_plan((0, 1, 2), 4, 10, rng)


def test_the_samplers_never_spend_more_than_the_walk_and_the_walk_pays_for_what_it_measured(rule_tables, monkeypatch):
    script = load_script("search_regret", monkeypatch)
    reference_path, cheap_path = rule_tables
    table = script.load(str(cheap_path))
    rung = script.read_rung(str(cheap_path), table)
    space = script.space_of(table)
    plan = script.seed_plan(rung.seeds, 3, 20, np.random.default_rng(0))
    replays = script.replay_all(space, [rung], plan, 8, 0, [0])
    (walk_name,) = [m for m, kind in replays.kinds.items() if kind == "walk"]
    walked = ("c1:CC c2:CC c3:CC", "c1:CC c2:CC c3:CM", "c1:CC c2:CM c3:CM", "c1:CM c2:CM c3:CM")  # its 4 designs
    runs = {d.layout: {r.seed: r.train_cpu_seconds for r in d.runs} for d in table.designs}
    for seeds in plan.sets:
        (walk,) = replays.outcomes[walk_name][seeds]
        assert walk.cpu == pytest.approx(sum(runs[layout][s] for layout in walked for s in seeds))
        for sampler, partner in replays.partner.items():
            outcomes = replays.outcomes[sampler][seeds]
            assert len(outcomes) == 8 and partner == walk_name
            assert all(o.cpu <= walk.cpu for o in outcomes)
            assert max(o.measured for o in outcomes) >= 3  # it spends the budget on designs, not nothing


def test_the_ladder_s_walks_and_their_samplers_measure_at_the_budget_the_answer_settled_at(
    space, tmp_path: Path, monkeypatch
):
    script = load_script("search_regret", monkeypatch)
    reference = with_cpu(make_table(space, noise=0.001, seeds=(0, 1, 2, 3)))
    rungs = [jittered(with_cpu(make_table(space, noise=0.001, seeds=(0, 1, 2))), 0.001, seed=s) for s in (4, 5, 6)]
    paths = [str(write_table(tmp_path / f"rung{i}.json", t)) for i, t in enumerate(rungs)]
    ref_path = write_table(tmp_path / "reference.json", reference)
    summary = summarize(script, "--reference", str(ref_path), "--rungs", *paths)

    labels = [m["label"] for m in summary["methods"] if m["kind"] == "walk"]
    assert len(labels) == 4 and labels[2:] == ["per-verdict ladder", "calibrated ladder"]
    assert not summary["replays"]["seed_noise_in_intervals"]  # 3 seeds in common, 3 a search
    cpu = {m["label"]: m["cpu_seconds"]["value"] for m in summary["methods"] if m["kind"] == "walk"}
    assert cpu["per-verdict ladder"] > cpu[labels[0]]  # every verdict measured at two budgets at least
    assert all(m["answers"] == {"c1:CC c2:CM c3:CM": 1.0} for m in summary["methods"] if m["kind"] == "walk")


def test_the_script_runs_on_the_shipped_odd_one_out_tables(tmp_path: Path, monkeypatch, capsys):
    script = load_script("search_regret", monkeypatch)
    out = tmp_path / "out"
    argv = [
        "--reference", str(ROOT / "search/tables/odd-one-out-k-reference.json"),
        "--cheap", str(ROOT / "search/tables/odd-one-out-k.json"),
        "--replays", "2", "--bootstrap", "100",
        "--json", str(tmp_path / "s.json"), "--markdown", str(tmp_path / "s.md"), "--figures", str(out),
    ]  # fmt: skip
    assert script.main(argv) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [m["kind"] for m in summary["methods"]] == ["walk", "random", "tpe"]
    assert summary["replays"]["seed_sets"] == 10 and summary["reference"]["designs"] == 12
    assert (tmp_path / "s.md").read_text() in capsys.readouterr().out
    assert (out / "search-regret.png").stat().st_size > 20_000


def test_tables_of_other_designs_end_in_one_line(rule_tables, tmp_path: Path, monkeypatch, capsys):
    script = load_script("search_regret", monkeypatch)
    reference, _ = rule_tables
    other = write_table(tmp_path / "other.json", make_table(the_space(("k", "window")), seeds=(0, 1, 2)))
    assert script.main(["--reference", str(reference), "--cheap", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and "searched k,window" in err and "Traceback" not in err


def test_designs_that_share_a_layout_are_named_apart_by_their_other_knobs(tmp_path: Path, monkeypatch):
    """In a `k,window` space several designs put their MSAs in the same places: the tables name each by its
    windows too, or the rows and the answers' shares cannot be told apart."""
    script = load_script("search_regret", monkeypatch)
    path = write_table(tmp_path / "w.json", make_table(the_space(("k", "window")), seeds=(0, 1)))
    table = script.load(str(path))
    reference = script.read_reference(str(path), table, [d.digest for d in table.designs])
    assert len(set(reference.layouts)) == len(table.designs) > len({d.layout for d in table.designs})
    assert "c1:CC c2:CC c3:CC" in reference.layouts  # the ResNet has no window to name


def test_a_space_that_searches_the_init_names_it_once_for_the_whole_design(tmp_path: Path, monkeypatch):
    """`init` is one knob of the whole design (no `init_c3`): the names carry it once, and the table loads."""
    script = load_script("search_regret", monkeypatch)
    path = write_table(tmp_path / "i.json", make_table(the_space(("k", "init")), seeds=(0, 1)))
    table = script.load(str(path))
    reference = script.read_reference(str(path), table, [d.digest for d in table.designs])
    assert len(set(reference.layouts)) == len(table.designs)
    assert {"c1:CC c2:CC c3:CM, init torch", "c1:CC c2:CC c3:CM, init timm"} <= set(reference.layouts)


def test_a_racing_walk_measures_more_seeds_where_three_cannot_tell_and_pays_for_each(tmp_path: Path, monkeypatch):
    """`--max-seeds`: an MSA in c3 gains 3, 1 and 5 points on the first three seeds (a paired test at 5 % cannot
    call it) and 3 on two more. Without racing the walk rejects it; racing to 5 seeds keeps it, and its CPU holds
    the two extra seeds of the base and of the first MSA, nothing else (the later verdicts decide at 3)."""
    script = load_script("search_regret", monkeypatch)
    path = write_table(tmp_path / "t.json", with_cpu(make_table(the_space(("k",)), seeds=(0, 1, 2, 3, 4))))
    table = script.load(str(path))
    space, rung = script.space_of(table), script.read_rung(str(path), table)
    digest = {d.layout: d.digest for d in table.designs}
    base, msa = digest["c1:CC c2:CC c3:CC"], digest["c1:CC c2:CC c3:CM"]
    shift = {0: 0.0, 1: -0.02, 2: 0.02, 3: 0.0, 4: 0.0}  # c3's MSA: +3 points, then +1, +5, +3, +3
    for d in table.designs:  # every design with c3's MSA moves alike: later verdicts keep constant gaps
        if d.layout.endswith("c3:CM"):
            rung.val[d.digest].update({s: v + shift[s] for s, v in rung.val[d.digest].items()})
    variant = script.walk_variants([rung])[0]
    by_digest = {d.digest: d.layout for d in table.designs}

    plain = script.run_walk(space, [rung], (0, 1, 2), variant)
    raced = script.run_walk(space, [rung], (0, 1, 2, 3, 4), variant, paired=3)

    assert by_digest[plain.answer] == "c1:CC c2:CM c3:CC"  # c3's MSA rejected; c2's (+1 on every seed) kept
    assert by_digest[raced.answer] == "c1:CC c2:CM c3:CM"  # c3's MSA kept at the fifth seed
    plain_rule, on_mean = script.walk_variants([rung], ("beyond-noise", "mean"))
    assert (plain_rule, on_mean.label, on_mean.keep) == (variant, f"{variant.label}, keep mean", "mean")
    kept = script.run_walk(space, [rung], (0, 1, 2, 3, 4), on_mean, paired=3)  # a mean has no test to race
    assert by_digest[kept.answer] == "c1:CC c2:CM c3:CM" and kept.cpu < raced.cpu
    first_three = script.run_walk(space, [rung], (0, 1, 2), variant, paired=3)
    assert first_three == plain  # no extra seed to race on: the plain walk
    extra = sum(rung.cpu[d][s] for d in (base, msa) for s in (3, 4))
    walked = ("c1:CC c2:CC c3:CC", "c1:CC c2:CC c3:CM", "c1:CC c2:CM c3:CM", "c1:CM c2:CM c3:CM")
    assert raced.cpu == pytest.approx(sum(rung.cost(digest[layout], (0, 1, 2)) for layout in walked) + extra)
    with pytest.raises(script.UserError, match="--max-seeds 6"):
        script.race_orders((0, 1, 2, 3, 4), (0, 1, 2), 3, 10, "t")
    assert script.race_orders((0, 1, 2, 3, 4), (0, 1, 2), 2, 10, "t") == [(3, 4), (4, 3)]


def test_the_walks_of_two_rules_are_compared_with_each_other_on_the_same_resamples(
    rule_tables, tmp_path: Path, monkeypatch
):
    """With two `--keep` rules, each walk is set against the same walk under the first rule: the first rule's
    regret less the other's in every replicate, called where a gap of a whole design holds on every set of seeds;
    `replay_all` pairs the walks of the same budget, not every two walks."""
    script = load_script("search_regret", monkeypatch)
    reference_path, cheap_path = rule_tables
    ref_table, cheap_table = script.load(str(reference_path)), script.load(str(cheap_path))
    rung = script.read_rung(str(cheap_path), cheap_table)
    reference = script.read_reference(str(reference_path), ref_table, sorted(rung.val))
    best = reference.layouts.index("c1:CC c2:CM c3:CM")
    worse = reference.layouts.index("c1:CM c2:CC c3:CC")  # STAGE_GAIN: c1's MSA hurts
    rng = np.random.default_rng(0)
    plan = script.seed_plan(rung.seeds, 3, 200, rng)
    outcomes = {
        "walk": {s: [script.Outcome(reference.digests[best], 10.0, 4, 0)] for s in plan.sets},
        "walk, keep mean": {s: [script.Outcome(reference.digests[worse], 12.0, 4, 0)] for s in plan.sets},
    }
    replays = script.Replays(list(outcomes), {name: "walk" for name in outcomes}, {}, {name: "" for name in outcomes},
                             outcomes, {}, rivals={"walk, keep mean": "walk"})  # fmt: skip
    results, (difference,) = script.judge_methods(reference, plan, replays, rng)

    assert (difference.first, difference.second) == ("walk", "walk, keep mean")
    gap = results["walk"].regret.value - results["walk, keep mean"].regret.value
    assert difference.regret.value == pytest.approx(gap) and gap < 0
    assert difference.called and difference.regret.high < 0
    summary = {"methods": [{"name": n, "kind": "walk"} for n in outcomes], "differences": [
        {"first": "walk", "second": "walk, keep mean", "regret": dataclasses.asdict(difference.regret), "called": True}
    ]}  # fmt: skip
    (line,) = [row for row in script.difference_lines(summary) if row.startswith("| walk - ")]
    assert line.endswith("| yes: the first walk's is lower |")
    (tmp_path / "top.json").write_bytes(cheap_path.read_bytes())
    ladder = [rung, script.read_rung(str(tmp_path / "top.json"), cheap_table)]  # two rungs: four walks a rule
    replayed = script.replay_all(script.space_of(cheap_table), ladder, plan, 1, 0, [], keeps=("beyond-noise", "mean"))
    walks = [v.label for v in script.walk_variants(ladder)]
    assert len(set(walks)) == 4
    assert replayed.rivals == {f"walk, {label}, keep mean": f"walk, {label}" for label in walks}


def test_a_rule_named_twice_in_keep_ends_in_one_line(rule_tables, monkeypatch, capsys):
    """`--keep mean mean` would replay the same walk twice under one name (one row, twice the CPU): refused."""
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    assert script.main(["--reference", str(reference), "--cheap", str(cheap), "--keep", "mean", "mean"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and "--keep names mean twice" in err and "Traceback" not in err
    assert script.main(["--reference", str(reference), "--cheap", str(cheap), "--knobs", "choose", "choose"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: ") and "--knobs names choose twice" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "where", "said"),
    [
        ("--json", "", "is a folder"),
        ("--markdown", "missing/tables.md", "does not exist"),
        ("--figures", "a-file/figures", "is a file"),
    ],
)
def test_an_output_it_cannot_write_ends_in_one_line_before_any_replay(
    rule_tables, tmp_path: Path, monkeypatch, capsys, flag, where, said
):
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    (tmp_path / "a-file").write_text("")
    replayed = []
    monkeypatch.setattr(script, "summarize", lambda args: replayed.append(args))  # never reached
    assert script.main(["--reference", str(reference), "--cheap", str(cheap), flag, str(tmp_path / where)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"archdsl: error: {flag} ") and said in err and "Traceback" not in err, err
    assert not replayed and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("name", ["../../outside-", "a/b-", "\x1b[2Jcleared-", ".hidden-"])
def test_a_figure_name_that_leaves_its_folder_or_drives_the_terminal_ends_in_one_line(
    rule_tables, tmp_path: Path, monkeypatch, capsys, name
):
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    figures = tmp_path / "deep" / "figures"
    argv = ["--reference", str(reference), "--cheap", str(cheap), "--figures", str(figures), "--name", name]
    assert script.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("archdsl: error: --name ") and "\x1b" not in err and "Traceback" not in err, err
    assert not list(tmp_path.rglob("*.png"))


def test_a_replayed_walk_stands_a_fresh_seed_in_for_one_that_failed_to_learn(tmp_path: Path, monkeypatch):
    """`--chance`: on seed 2 the designs with c3's MSA fail to learn (0.3, where their other seeds stand near 0.9).
    Without stand-ins the paired test rejects c3's MSA; with them seed 2 is left out for the rest of the walk, seed 3
    (the pool's next) stands in for it, the MSA is kept, and the walk pays for the stand-in's runs."""
    script = load_script("search_regret", monkeypatch)
    path = write_table(tmp_path / "t.json", with_cpu(make_table(the_space(("k",)), seeds=(0, 1, 2, 3, 4))))
    table = script.load(str(path))
    space, rung = script.space_of(table), script.read_rung(str(path), table)
    by_digest = {d.digest: d.layout for d in table.designs}
    for d in table.designs:
        if d.layout.endswith("c3:CM"):
            rung.val[d.digest][2] = 0.3
    variant = script.walk_variants([rung])[0]
    blind = script.run_walk(space, [rung], (0, 1, 2), variant)
    stood_in = script.run_walk(space, [rung], (0, 1, 2, 3), variant, 3, chance=0.1, stand_ins=1)
    assert not by_digest[blind.answer].endswith("c3:CM")
    assert by_digest[stood_in.answer].endswith("c3:CM") and stood_in.cpu > blind.cpu


def test_the_settle_stage_is_replayed_for_the_walk_and_for_random_search_on_fresh_seeds(
    rule_tables, space, tmp_path: Path, monkeypatch
):
    """`--settle`: each walk is replayed again followed by its settle stage on the settle table's seeds (its CPU
    counted), random search held to that whole CPU, and random search followed by the same settle stage; a settle
    table that shares a seed with the others is refused in one line."""
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    settle = write_table(tmp_path / "s.json", with_cpu(make_table(space, noise=0.001, seeds=(10, 11, 12))))
    summary = summarize(script, "--reference", str(reference), "--cheap", str(cheap), "--settle", str(settle))
    methods = by_name(summary)
    settled = [m for m in methods.values() if m["label"].endswith("settled")]
    assert {m["kind"] for m in settled} == {"walk", "random", "tpe", "random+settle"}
    (walk,) = [m for m in settled if m["kind"] == "walk"]
    (plain,) = [m for m in methods.values() if m["kind"] == "walk" and m is not walk]
    assert walk["cpu_seconds"]["value"] > plain["cpu_seconds"]["value"]  # the settle stage's runs counted
    assert walk["designs_measured"] > plain["designs_measured"]
    assert walk["answers"] == {"c1:CC c2:CM c3:CM": 1.0}  # the rule's best stays the answer once settled
    overlapping = write_table(tmp_path / "o.json", with_cpu(make_table(space, seeds=(3, 11, 12))))
    with pytest.raises(script.UserError, match="fresh seeds"):
        summarize(script, "--reference", str(reference), "--cheap", str(cheap), "--settle", str(overlapping))


def test_a_settle_table_of_the_walks_path_alone_settles_the_walk_and_leaves_random_search_unsettled(
    rule_tables, space, tmp_path: Path, monkeypatch
):
    """A settle table that lacks designs off the walk's path (as one trained for the walk alone does) settles the
    walk; random search followed by the settle stage, which may pick any design, is left out, not a KeyError."""
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    table = with_cpu(make_table(space, noise=0.001, seeds=(10, 11, 12)))
    path_only = table.model_copy(update={"designs": [d for d in table.designs if d.layout != "c1:CM c2:CC c3:CC"]})
    settle = write_table(tmp_path / "s.json", path_only)
    summary = summarize(script, "--reference", str(reference), "--cheap", str(cheap), "--settle", str(settle))
    kinds = {m["kind"] for m in by_name(summary).values() if m["label"].endswith("settled")}
    assert kinds == {"walk", "random", "tpe"}


def test_a_settle_table_cut_short_settles_the_walk_on_the_designs_it_holds_whole(
    rule_tables, space, tmp_path: Path, monkeypatch
):
    """A settle table being made (`buildup_table.py --designs ... --assemble` before every run is done): designs
    with no run, and one with a run on some of its seeds, are left out (it was refused as a partial table); the
    walk is settled on the designs it holds whole, and the report says how many."""
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    table = with_cpu(make_table(space, noise=0.001, seeds=(10, 11, 12)))
    cut = []
    for d in table.designs:
        if d.layout == "c1:CM c2:CC c3:CC":
            d = d.model_copy(update={"runs": []})  # not trained yet
        elif d.layout == "c1:CM c2:CM c3:CM":
            d = d.model_copy(update={"runs": [r for r in d.runs if r.seed == 10]})  # in training
        cut.append(d)
    settle = write_table(tmp_path / "s.json", table.model_copy(update={"designs": cut}))
    summary = summarize(script, "--reference", str(reference), "--cheap", str(cheap), "--settle", str(settle))
    settled = [m for m in by_name(summary).values() if m["label"].endswith("settled")]
    assert {m["kind"] for m in settled} == {"walk", "random", "tpe"}
    assert summary["replays"]["settle_designs"] == {"held": 6, "of": 8}
    (walk,) = [m for m in settled if m["kind"] == "walk"]
    assert walk["answers"] == {"c1:CC c2:CM c3:CM": 1.0}
    assert "holds 6 of the space's 8 designs" in script.markdown(summary)


def test_list_settle_designs_names_the_shortlists_designs_the_walks_first(rule_tables, tmp_path: Path, monkeypatch):
    """`--list-settle-designs FILE`: no judging; the designs the settle stage's shortlists visit, a digest a line
    (what `buildup_table.py --designs` reads), the settled walks' first: here the walk settles the rule's best and
    its rival on every set, and random search followed by the settle stage two designs a search."""
    script = load_script("search_regret", monkeypatch)
    reference, cheap = rule_tables
    listed = tmp_path / "designs.txt"
    summarize(script, "--reference", str(reference), "--cheap", str(cheap), "--list-settle-designs", str(listed))
    rows = [line.split("\t") for line in listed.read_text().splitlines() if not line.startswith("#")]
    digests = {d.digest: d.layout for d in script.load(str(cheap)).designs}
    assert all(row[0] in digests for row in rows) and len({row[0] for row in rows}) == len(rows)
    sets = 10  # every 3 of the 5 seeds
    walks = [int(row[1]) for row in rows]
    assert walks == sorted(walks, reverse=True) and walks[0] == sets  # the walks' designs first
    assert digests[rows[0][0]] == "c1:CC c2:CM c3:CM" or digests[rows[1][0]] == "c1:CC c2:CM c3:CM"
    assert sum(int(row[2]) for row in rows) == 2 * sets * 6  # two designs a random + settle search (6 a set)


def test_a_walk_that_chooses_its_windows_is_replayed_and_pays_for_every_window_it_measured(tmp_path: Path, monkeypatch):
    """`--knobs choose`: the replayed walk measures each window of a stage's first MSA and answers the window the
    table ranks first; `base` keeps the base's; each walk's CPU counts the designs it measured."""
    script = load_script("search_regret", monkeypatch)
    path = write_table(tmp_path / "w.json", with_cpu(make_table(the_space(("k", "window")), seeds=(0, 1, 2))))
    table = script.load(str(path))
    space, rung = script.space_of(table), script.read_rung(str(path), table)
    global_c1 = {d.digest for d in table.designs if d.params.get("k_c1") and d.params.get("window_c1") == "global"}
    for digest in global_c1:  # a global window in c1 is 5 points ahead of every other design with its MSAs
        rung.val[digest] = {s: v + 0.05 for s, v in rung.val[digest].items()}
    base, chose = script.walk_variants([rung], ("mean",), knobs=("base", "choose"))
    assert (base.knobs, chose.knobs, chose.label) == ("base", "choose", f"{base.label}, knobs choose")
    kept = script.run_walk(space, [rung], (0, 1, 2), base)
    chosen = script.run_walk(space, [rung], (0, 1, 2), chose)
    assert kept.answer not in global_c1 and chosen.answer in global_c1
    assert chosen.measured > kept.measured and chosen.cpu > kept.cpu
