"""The build-up rule as IR transforms: placement, order, endpoints, invalid requests."""

from __future__ import annotations

import itertools

import pytest

from archdsl.buildup import buildup, buildup_order, default_heads, layout, max_msa, msa_counts, ratio
from archdsl.errors import UserError
from archdsl.ir import ConvBlock, MSABlock
from archdsl.lang.diagnostics import SpecError
from archdsl.lang.spec import load_spec


@pytest.fixture(scope="module")
def base():
    return load_spec("alter50-base")


def kinds(arch, stage: int) -> str:
    return "".join("M" if isinstance(b, MSABlock) else "C" for b in arch.stages[stage].blocks)


def test_layout_places_msas_at_the_end_of_each_stage(base) -> None:
    arch = layout(base, (0, 1, 3, 2))
    assert [kinds(arch, i) for i in range(4)] == ["CCC", "CCCM", "CMCMCM", "CMCM"]
    assert [max_msa(s) for s in base.stages] == [1, 2, 3, 2]


def test_endpoints_match_the_shipped_specs_by_digest(base) -> None:
    assert ratio(base, 0.0).digest() == base.digest()
    assert ratio(base, 1.0).digest() == load_spec("swinlike50").digest()
    assert layout(base, (0, 1, 1, 2)).digest() == load_spec("alter50").digest()
    assert layout(base, (0, 1, 3, 2)).digest() == load_spec("alter50-code").digest()
    basic = load_spec("resnet18")
    assert layout(basic, (0, 1, 1, 1)).digest() == load_spec("alter18").digest()


def test_buildup_follows_the_papers_curve_and_nests(base) -> None:
    # +1 c4, +1 c4, +1 c3, +1 c2 reaches the paper's Alter-ResNet-50.
    assert buildup_order(base)[:4] == ["c4", "c4", "c3", "c2"]
    counts = [msa_counts(buildup(base, n)) for n in range(len(buildup_order(base)) + 1)]
    assert counts[4] == (0, 1, 1, 2)
    assert counts[-1] == tuple(max_msa(s) for s in base.stages)
    for smaller, larger in itertools.pairwise(counts):
        assert sum(larger) == sum(smaller) + 1
        assert all(a <= b for a, b in zip(smaller, larger, strict=True))
    # ratios pick points on the same path
    assert msa_counts(ratio(base, 0.5)) == counts[4]


def test_msas_are_replaced_not_added_and_convs_are_kept(base) -> None:
    alter = load_spec("alter50")
    assert layout(alter, (0, 0, 0, 0)).digest() == base.digest()
    arch = layout(alter, (1, 0, 0, 1))
    assert msa_counts(arch) == (1, 0, 0, 1)
    assert all(isinstance(b, ConvBlock) for b in arch.stages[2].blocks)


def test_default_heads_and_windows(base) -> None:
    assert [default_heads(w) for w in (16, 32, 64, 128, 256, 512)] == [1, 1, 3, 6, 12, 24]
    arch = ratio(base, 1.0)
    assert [b.heads for s in arch.stages for b in s.blocks if isinstance(b, MSABlock)] == [3, 6, 6, 12, 12, 12, 24, 24]
    assert {b.window for s in arch.stages for b in s.blocks if isinstance(b, MSABlock)} == {4}
    # a 2x2 map cannot take a 4x4 window: the default falls back to global attention
    small = base.model_copy(update={"input": base.input.model_copy(update={"height": 16, "width": 16})})
    c4 = layout(small, (0, 0, 0, 2)).stages[3]
    assert [b.window for b in c4.blocks if isinstance(b, MSABlock)] == [None, None]


def test_explicit_heads_and_window(base) -> None:
    arch = layout(base, (1, 1, 1, 1), heads=[1, 2, 3, 4], window="global")
    msas = [b for s in arch.stages for b in s.blocks if isinstance(b, MSABlock)]
    assert [m.heads for m in msas] == [1, 2, 3, 4]
    assert all(m.window is None for m in msas)
    assert layout(base, (0, 0, 1, 0), heads=5, window=2).stages[2].blocks[-1] == MSABlock(heads=5, window=2)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda b: layout(b, (0, 3, 0, 0)), UserError, "c2 has 4 blocks: it takes 0 to 2 MSAs, not 3"),
        (lambda b: layout(b, (0, -1, 0, 0)), UserError, "not -1"),
        (lambda b: layout(b, (0, 1, 1)), UserError, "3 values but alter50-base has 4 stages"),
        (lambda b: layout(b, (0, 1, 1, 2), heads=[3, 6]), UserError, "heads has 2 values"),
        (lambda b: layout(b, (0, 1, 1, 2), heads=0), UserError, "bad heads"),
        (lambda b: layout(b, (0, 1, 1, 2), window=8), SpecError, "window 8 does not fit the 4x4 map"),
        (lambda b: layout(b, (0, 1, 1, 2), window=3), SpecError, "window 3 does not tile"),
        (lambda b: buildup(b, 9), UserError, "takes 0 to 8 MSAs"),
        (lambda b: ratio(b, 1.5), UserError, "between 0 and 1"),
    ],
)
def test_invalid_requests_raise_user_errors(base, call, error, match) -> None:
    with pytest.raises(error, match=match):
        call(base)


@pytest.mark.parametrize("name", ["vit-ti", "pit-ti", "swin-ti"])
def test_transformer_bases_are_refused_with_the_reason(name: str) -> None:
    transformer = load_spec(name)
    for call in (lambda: layout(transformer, [0] * len(transformer.stages)), lambda: buildup(transformer, 1)):
        with pytest.raises(UserError, match="the build-up rule applies to AlterNet bases of `conv` and `msa` blocks"):
            call()
