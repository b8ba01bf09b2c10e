"""The build-up walk's answer at every seed: a seed on which a design fails to learn is stood in for, two designs
at chance are never compared, and the shortlist is settled at higher budgets on fresh seeds before the answer is
named (search/walk/buildup.py)."""

from __future__ import annotations

from archdsl.lang.spec import load_spec
from archdsl.search.objectives import OBJECTIVES
from archdsl.search.seed_stats import Racing
from archdsl.search.space import make_space
from archdsl.search.studies.record import Measured
from archdsl.search.walk.buildup import Rules, walk

ACCURACY = OBJECTIVES["accuracy"]
SPACE = make_space(load_spec("alter-small-base"))  # stages c1, c2, c3 (max k 1, 1, 2), as the main job's


def _layout(params) -> tuple[int, ...]:
    return tuple(int(params[f"k_{s.name}"]) for s in SPACE.stages)


def _play(seed_value, rules):
    """The walk as a study plays it, seed by seed: `seed_value(layout, rung, index)` answers each paired seed a
    trial trains (a first trial its phase's `seeds` indices, an extra seed its own); the walk, once done, and every
    (layout, rung, index) measured."""
    measured: dict[tuple[str, int], Measured] = {}
    asked: list[tuple[tuple[int, ...], int, int]] = []
    seeds = rules.racing.seeds
    while (ask := walk(SPACE, measured, ACCURACY, rules).next) is not None:
        key = (SPACE.arch_from_params(ask.params).digest(), ask.rung)
        if ask.seed_index is not None:
            indices = [ask.seed_index]
        else:
            first = seeds if ask.rung >= rules.rungs else 0  # the settle stage's fresh seeds (planned.PlannedSampler)
            indices = list(range(first, first + seeds))
        values = dict(measured[key].seeds) if key in measured else {}
        for index in indices:
            values[index] = seed_value(_layout(ask.params), ask.rung, index)
            asked.append((_layout(ask.params), ask.rung, index))
        mean = sum(values.values()) / len(values)
        measured[key] = Measured("COMPLETE", measured[key].value if key in measured else mean, values)
    return walk(SPACE, measured, ACCURACY, rules), asked


def _two_groups(layout, rung, index):
    """odd-one-out's two groups at 8 epochs: an MSA ending c3 learns the relation (~0.85), the ResNet does not
    (~0.6); small paired noise per seed index."""
    noise = (0.01, -0.01, 0.0, 0.005, -0.005, 0.0, 0.01, -0.01, 0.0, 0.005)[index % 10]
    return (0.85 if layout[-1] > 0 else 0.60) + 0.01 * sum(layout[:-1]) + noise


def test_a_seed_that_fails_to_learn_is_replaced_for_both_designs_and_the_msa_is_kept():
    """Seed index 2 of the one-MSA design stays far below its other seeds (0.45 where they stand at 0.85, the main
    job's seed 5): without the stand-in, the paired test cannot call the MSA better than the ResNet and the walk
    answers without an MSA ending c3; with it, both designs are measured on a fresh index and the MSA is kept."""

    def failing(layout, rung, index):
        return 0.45 if layout == (0, 0, 1) and index == 2 else _two_groups(layout, rung, index)

    blind = Rules(racing=Racing(3, 3), keep="beyond-noise")
    result, _ = _play(failing, blind)
    assert _layout(result.answer)[-1] == 0 and not result.failed  # the old walk, without chance: no MSA ending c3

    rules = Rules(racing=Racing(3, 3), keep="beyond-noise", chance=0.1)
    result, asked = _play(failing, rules)
    assert [(_layout(f.params), f.index, f.replacement) for f in result.failed] == [((0, 0, 1), 2, 6)]
    assert ((0, 0, 0), 0, 6) in asked and ((0, 0, 1), 0, 6) in asked  # both designs of the pair, on the stand-in
    later = {layout for layout, _, _ in asked[asked.index(((0, 0, 1), 0, 6)) :]}
    assert len(later) > 2 and all((layout, 0, 6) in asked for layout in later)  # and every later design of the walk
    assert result.steps[1].accepted and _layout(result.answer)[-1] > 0


def test_a_design_low_on_every_seed_is_no_failed_seed():
    """A design whose seeds all stand low has not failed on one: no stand-in (the rule looks at a seed against its
    design's other seeds, never against another design)."""
    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1)
    result, asked = _play(_two_groups, rules)
    assert not result.failed and all(index < 3 for _, _, index in asked)


def test_two_designs_at_chance_are_not_compared_but_raised_a_budget():
    """At the first budget both designs stand at chance (0.10 and 0.12 of 10 classes); a verdict there would be a
    coin's. The walk measures both a budget up and decides there; with no budget left the MSA is not kept and the
    verdict is marked moving (train longer)."""

    def slow(layout, rung, index):
        if rung == 0:
            return 0.10 + (0.02 if layout[-1] else 0.0) + 0.001 * index
        return _two_groups(layout, rung, index)

    one_budget = Rules(racing=Racing(3, 3), keep="mean", chance=0.1)
    result, _ = _play(slow, one_budget)
    assert not result.steps[1].accepted and result.steps[1].moving and _layout(result.answer) == (0, 0, 0)

    ladder = Rules(racing=Racing(3, 3), keep="mean", chance=0.1, rungs=2)
    result, _ = _play(slow, ladder)
    assert result.steps[1].accepted and result.steps[1].rung == 1 and result.steps[1].standings[0][0] == 1


def test_the_settle_stage_measures_the_shortlist_on_fresh_seeds_and_names_the_best_it_calls():
    """The walk keeps `c1:CM c2:CM c3:CM` on its mean at the search's budget; one budget up (rung 1, the settle
    stage's first), on fresh seed indices 3-5, `c2:CM c3:CM`, the runner-up, beats it beyond the noise: it is the
    answer, at that budget, and the settle stage stops there (its second budget is never trained)."""

    def settling(layout, rung, index):
        if rung == 0:
            return _two_groups(layout, rung, index)
        best = 0.99 if layout == (0, 1, 1) else 0.95
        return best + (0.002, -0.002, 0.0, 0.001, -0.001, 0.0)[index % 6]

    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1, settle=2)
    result, asked = _play(settling, rules)
    assert _layout(result.steps[-1].params) == (1, 1, 1) and result.steps[-1].accepted  # the walk's own answer
    assert result.settled and result.settled[0].rung == 1 and result.settled[0].called
    assert _layout(result.answer) == (0, 1, 1) and result.answer_rung == 1
    assert {index for _, rung, index in asked if rung == 1} == {3, 4, 5}  # fresh seeds, never the walk's
    assert not any(rung == 2 for _, rung, _ in asked)
    assert 2 <= len({layout for layout, rung, _ in asked if rung == 1}) <= 3  # the shortlist


def test_a_shortlist_still_tied_at_the_last_budget_names_the_best_mean_with_its_ties():
    def tied(layout, rung, index):
        if rung == 0:
            return _two_groups(layout, rung, index)
        return 0.97 + 0.01 * ((index + sum(layout)) % 3)  # within the noise of each other

    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1, settle=2)
    result, asked = _play(tied, rules)
    assert [s.rung for s in result.settled] == [1, 2] and not result.settled[-1].called
    assert result.answer_rung == 2 and result.ties
    best = max(result.settled[-1].values, key=lambda pv: pv[1] or 0)[0]
    assert result.answer == best


def test_a_shortlist_at_chance_at_the_settle_budget_leaves_the_walk_s_answer():
    """Every design stands at chance at the settle budget too (10 classes, 0.10-0.12): the settle stage ranks
    nothing there and the walk's answer stands, never the best of coin flips."""

    def chance(layout, rung, index):
        if rung == 0:
            return _two_groups(layout, rung, index)
        return 0.10 + 0.02 * (layout == (0, 1, 1)) + 0.001 * index

    rules = Rules(racing=Racing(3, 3), keep="mean", chance=0.1, settle=1)
    result, _ = _play(chance, rules)
    walked = result.steps[-1].params if result.steps[-1].accepted else None
    assert result.answer_rung == 0 and result.answer == walked and not result.settled
