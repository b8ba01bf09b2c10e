"""The build-up search space: valid designs only, stable parameter names, endpoints."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archdsl.errors import UserError
from archdsl.ir import MSABlock, stage_shapes
from archdsl.lang.spec import load_spec, parse_spec
from archdsl.search.space import GLOBAL, make_space, parse_searched

ALL = ("k", "heads", "window", "dim_head", "init")


@pytest.fixture(scope="module")
def base50():
    return load_spec("alter50-base")


def test_parameters_are_named_after_stages_and_k_ranges_follow_max_msa(base50):
    space = make_space(base50, ("k",))
    assert space.choices() == {"k_c1": (0, 1), "k_c2": (0, 1, 2), "k_c3": (0, 1, 2, 3), "k_c4": (0, 1, 2)}
    assert space.size() == 2 * 3 * 4 * 3


def test_endpoints_are_resnet_paper_alternet_and_swin_like(base50):
    space = make_space(base50, ALL)
    ends = {e.name: space.arch_from_params(e.params) for e in space.endpoints()}
    assert set(ends) == {"resnet", "alternet", "swin-like"}
    assert ends["resnet"].n_msa == 0
    counts = {name: tuple(sum(isinstance(b, MSABlock) for b in s.blocks) for s in a.stages) for name, a in ends.items()}
    assert counts["alternet"] == (0, 1, 1, 2)
    assert counts["swin-like"] == (1, 2, 3, 2)
    # The paper's layout: the MSAs end their stages (c3: CCCCCM), and it equals the built-in spec.
    assert ends["alternet"].digest() == load_spec("alter50").digest()


def test_placement_is_convs_then_conv_msa_pairs(base50):
    space = make_space(base50)
    arch = space.arch_from_params({"k_c1": 0, "k_c2": 2, "k_c3": 1, "k_c4": 1})
    layout = {s.name: "".join("M" if isinstance(b, MSABlock) else "C" for b in s.blocks) for s in arch.stages}
    assert layout == {"c1": "CCC", "c2": "CMCM", "c3": "CCCCCM", "c4": "CCCM"}


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_every_point_of_the_space_is_a_valid_design_with_non_decreasing_heads(rnd):
    space = _full_space()
    params = {name: rnd.choice(values) for name, values in space.choices().items()}
    arch = space.arch_from_params(params)  # runs archdsl.lang.checks.ensure_valid
    heads = [b.heads for s in arch.stages for b in s.blocks if isinstance(b, MSABlock)]
    assert heads == sorted(heads)
    sizes = {sh.name: sh.out_size for sh in stage_shapes(arch)}
    for stage in arch.stages:
        for block in stage.blocks:
            if isinstance(block, MSABlock) and block.window is not None:
                assert sizes[stage.name][0] % block.window == 0
    # The canonical parameters of the design name the same design.
    again = space.arch_from_params(space.params_from_arch(arch))
    assert again.digest() == arch.digest()


@functools.lru_cache(maxsize=1)
def _full_space():
    return make_space(load_spec("alter50-base"), ALL)


def test_window_choices_tile_the_stage_map(base50):
    space = make_space(base50, ("k", "window"))
    windows = {s.name: s.windows for s in space.stages}
    assert windows["c1"][-1] == GLOBAL and 32 % windows["c1"][0] == 0
    assert all(w == GLOBAL or 4 % w == 0 for w in windows["c4"])  # c4's map is 4x4


def test_heads_repair_lifts_a_later_stage_to_the_earlier_heads(base50):
    space = make_space(base50, ("k", "heads"))
    arch = space.arch_from_params(
        {"k_c1": 0, "heads_c1": 6, "k_c2": 1, "heads_c2": 12, "k_c3": 1, "heads_c3": 6, "k_c4": 1, "heads_c4": 12}
    )
    heads = {s.name: [b.heads for b in s.blocks if isinstance(b, MSABlock)] for s in arch.stages}
    # c1 has no MSA, so its heads do not count; c3 asked for 6 but must not drop below c2's 12.
    assert heads == {"c1": [], "c2": [12], "c3": [12], "c4": [12]}


def test_a_design_outside_the_space_is_refused(base50):
    space = make_space(base50)
    with pytest.raises(UserError, match="not in this search space"):
        space.params_from_arch(load_spec("resnet50"))  # (3, 4, 6, 3) blocks, another base
    with pytest.raises(UserError):
        space.arch_from_params({"k_c4": 3})
    with pytest.raises(UserError):
        space.arch_from_params({"k_c9": 1})


def test_tiny_base_collapses_equal_endpoints():
    base = parse_spec(
        "arch b { input 3x32x32 classes 10 stem conv3x3(8) conv = basic\n"
        "stage c1(width=8) { conv } stage c2(width=16, stride=2) { conv*2 } }"
    )
    space = make_space(base)
    assert "k_c1" not in space.choices()  # one block: no MSA fits
    names = [e.name for e in space.endpoints()]
    assert names == ["resnet", "swin-like"]


def test_parse_searched_always_includes_k_and_rejects_unknown_knobs():
    assert parse_searched("heads") == ("k", "heads")
    with pytest.raises(UserError, match="cannot search"):
        parse_searched("k,depth")


def test_a_transformer_base_is_refused():
    with pytest.raises(UserError, match="AlterNet bases"):
        make_space(load_spec("vit-ti"))


def test_init_is_one_knob_of_the_whole_design(base50):
    space = make_space(base50, parse_searched("init"))
    assert parse_searched("init") == ("k", "init")
    assert space.choices()["init"] == ("torch", "timm")
    assert space.size() == 2 * 3 * 4 * 3 * 2
    assert space.n_designs() == 2 * make_space(base50).n_designs()
    params = {"k_c1": 0, "k_c2": 1, "k_c3": 1, "k_c4": 2, "init": "timm"}
    arch = space.arch_from_params(params)
    assert arch.init == "timm" and arch.digest() != load_spec("alter50").digest()
    assert space.params_from_arch(arch) == params
    assert all(e.params["init"] == base50.init for e in space.endpoints())
    with pytest.raises(UserError, match="init='jax'"):
        space.arch_from_params({**params, "init": "jax"})
    # Without the knob every design keeps the base's scheme: another is not in the space.
    assert make_space(base50).arch_from_params({"k_c4": 1}).init == base50.init
    with pytest.raises(UserError, match="not in this search space"):
        make_space(base50).params_from_arch(arch)


@pytest.mark.parametrize(("base", "dataset"), [("alter-small-base", "odd-one-out"), ("alter50-base", "synthetic")])
def test_no_two_window_choices_hold_the_whole_map(base, dataset):
    """A window that holds the whole map is global attention: offered twice (the layout's default 4 beside `global`
    on a 4x4 map), the space held every design with an MSA there twice, trained twice to the same figures."""
    from archdsl.data import describe
    from archdsl.search.fidelity.measures import fit_to_data, load_base

    info = describe(dataset)
    space = make_space(fit_to_data(load_base(base), info.image_shape, info.num_classes), ("k", "window"))
    sizes = {s.name: s.out_size for s in stage_shapes(space.base)}
    for stage in space.stages:
        h, w = sizes[stage.name]
        whole = [x for x in stage.windows if x == GLOBAL or x >= max(h, w)]
        assert len(whole) == 1, (stage.name, (h, w), stage.windows)


@functools.cache
def _odd_one_out_space(searched: tuple[str, ...]):
    """`resnet-fmnist` fitted to odd-one-out's 16x16 images, as `archdsl search --base resnet-fmnist` searches it."""
    from archdsl.data import describe
    from archdsl.search.fidelity.measures import fit_to_data, load_base

    info = describe("odd-one-out")
    return make_space(fit_to_data(load_base("resnet-fmnist"), info.image_shape, info.num_classes), searched)


@pytest.mark.parametrize(("searched", "draws"), [(("k", "window"), 3000), (("k", "heads"), 1600)])
def test_a_random_design_is_drawn_uniformly_over_the_distinct_designs(searched, draws):
    """k,window: 60 designs in 192 points, 24 of them the ResNet's (a window does not matter where k is 0); k,heads:
    the heads repair names one design by several points too. Each design comes up about draws / designs times (50),
    the ResNet no more often than the others; drawn over the parameters it came up 1 time in 8 (375 of 3000)."""
    import random
    from collections import Counter

    space = _odd_one_out_space(searched)
    rng = random.Random(0)
    drawn = [space.random_design(rng) for _ in range(draws)]
    choices = space.choices()
    assert all(set(p) == set(choices) and all(p[n] in choices[n] for n in p) for p in drawn)
    counts = Counter(space.arch_from_params(p).digest() for p in drawn)
    assert len(counts) == space.n_designs()  # every design drawn, none outside the space
    expected = draws / space.n_designs()
    assert min(counts.values()) > 0.5 * expected and max(counts.values()) < 1.7 * expected  # ~4 standard deviations
    resnet = space.arch_from_params({n: v[0] for n, v in choices.items() if not n.startswith("k_")}).digest()
    assert counts[resnet] < 1.7 * expected


def test_the_random_strategy_draws_designs_not_parameters():
    """`--strategy random`'s sampler, asked through Optuna as a study asks it: the ResNet 1 time in 60 (the
    designs' share), not 1 in 8 (its points' share)."""
    from types import SimpleNamespace

    import optuna

    from archdsl.search.walk.registry import strategy_named

    space = _odd_one_out_space(("k", "window"))
    plan = SimpleNamespace(space=space, settings=SimpleNamespace(seed=0))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=strategy_named("random").sampler(plan))
    resnets = 0
    for _ in range(480):
        trial = study.ask()
        resnets += space.arch_from_params(space.suggest(trial)).n_msa == 0
        study.tell(trial, 0.0)
    assert resnets < 24  # expected 8 (1/60); over the parameters 60 (1/8)
