"""The Fashion-MNIST study's verdicts (benchmarks/study_claims.py): a claim holds only when every seed or the
95 % interval of the mean says so, and each statistic reads the reports the way its claim says."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from study_claims import CLAIMS, Claim, Verdict, block_changes, verdict_table, verdicts  # noqa: E402


def _claim(name: str = "x") -> Claim:
    return Claim(name, "statistic", "", lambda r: r["value"])


@pytest.mark.parametrize(
    ("values", "outcome"),
    [
        ((0.1, 0.2, 0.3), "holds"),
        ((-0.1, -0.5, -0.2), "opposite"),
        ((1.0, -1.0, 0.5), "not settled"),
        ((0.0, 0.0, 0.0), "not settled"),  # no effect at all is no evidence either way
        ((5.0, 5.1, 4.9, 5.0, -0.01), "holds"),  # one seed against, but the interval lies far above 0
        ((0.3,), "holds"),  # a single seed that agrees is "every seed"
    ],
)
def test_a_claim_holds_only_when_every_seed_or_the_interval_says_so(values: tuple[float, ...], outcome: str) -> None:
    assert Verdict(_claim(), values).outcome == outcome


def test_the_interval_is_students_t_over_the_seeds() -> None:
    verdict = Verdict(_claim(), (1.0, 2.0, 3.0))
    assert verdict.mean == 2.0 and verdict.std == pytest.approx(1.0)
    assert verdict.half_width == pytest.approx(4.303 / math.sqrt(3))
    assert Verdict(_claim(), (1.0,)).half_width == math.inf


def _layer(name: str, stage: str, index: int, kind: str, value: float) -> NS:
    return NS(name=name, stage=stage, index=index, kind=kind, value=value)


def _report(amp: list[float], var: list[float], lesion: list[float], top1: float = 0.9) -> NS:
    """stem, c1.0 conv, c1.1 msa, c2.0 conv (downsamples), c2.1 msa."""
    where = [("stem", "stem", 0, "stem"), ("stages.c1.0", "c1", 0, "conv"), ("stages.c1.1", "c1", 1, "msa"),
             ("stages.c2.0", "c2", 0, "conv"), ("stages.c2.1", "c2", 1, "msa")]  # fmt: skip
    blocks = [NS(name=n, index=i, kind=k, top1=t) for (n, _, i, k), t in zip(where[1:], lesion, strict=True)]
    return NS(
        feature_maps=NS(
            delta_log_amplitude=NS(layers=[_layer(*w, a) for w, a in zip(where, amp, strict=True)]),
            variance=NS(layers=[_layer(*w, v) for w, v in zip(where, var, strict=True)]),
        ),
        lesion=NS(top1=top1, blocks=blocks),
    )


def test_block_changes_separate_the_downsampling_convs_and_measure_each_block_against_its_input() -> None:
    report = _report(amp=[1.0, 1.5, 1.2, 2.0, 1.0], var=[1.0, math.e, math.e, 1.0, math.e**2],
                     lesion=[0.5, 0.8, 0.2, 0.6])  # fmt: skip
    changes = block_changes(report)
    assert sorted(changes) == ["conv", "conv (downsamples)", "msa"]
    assert changes["conv"] == [pytest.approx((0.5, 1.0, 40.0))]
    assert changes["conv (downsamples)"] == [pytest.approx((0.8, -1.0, 70.0))]
    assert changes["msa"] == [pytest.approx((-0.3, 0.0, 10.0)), pytest.approx((-1.0, 2.0, 30.0))]


def test_each_claim_reads_its_models_and_the_sign_means_holds() -> None:
    low_pass = next(c for c in CLAIMS if c.text == "MSAs are low-pass filters (AlterNet)")
    last_msa = next(c for c in CLAIMS if c.text == "The MSA that ends the network matters most (AlterNet)")
    report = _report(amp=[1.0, 1.5, 1.2, 2.0, 1.0], var=[1.0] * 5, lesion=[0.5, 0.8, 0.2, 0.6])
    reports = {"AlterNet": report}
    assert low_pass.measure(reports) == pytest.approx(0.65)  # both MSAs lower dLogAmp: positive
    assert last_msa.measure(reports) == pytest.approx(30.0 - 10.0)
    starts = next(c for c in CLAIMS if c.text == "Convs at stage starts matter most (ResNet)")
    resnet = _report(amp=[1.0] * 5, var=[1.0] * 5, lesion=[0.5, 0.8, 0.2, 0.6])  # c1.0 and c2.0 start stages
    resnet.lesion.blocks[1].kind = resnet.lesion.blocks[3].kind = "conv"  # c1.1 and c2.1 as convs
    assert starts.measure({"ResNet": resnet}) == pytest.approx((40.0 + 70.0) / 2 - (10.0 + 30.0) / 2)
    accuracy = next(c for c in CLAIMS if c.text == "AlterNet is more accurate than the ResNet")
    two = {"AlterNet": NS(classification=NS(top1=0.80)), "ResNet": NS(classification=NS(top1=0.85))}
    assert accuracy.measure(two) == pytest.approx(-5.0)


def test_verdicts_run_every_claim_on_every_seed_and_the_table_shows_them() -> None:
    claims = [_claim("up"), _claim("down")]
    seeds = [{"value": 1.0}, {"value": 2.0}]
    rows = verdicts(seeds, claims)
    assert [r.values for r in rows] == [(1.0, 2.0), (1.0, 2.0)]
    table = verdict_table(rows)
    assert table[2].startswith("| up | statistic | +1, +2 | +1.5 +- 0.71 | holds |")
