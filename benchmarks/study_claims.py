"""The paper's claims as numbers, and a verdict on each over several seeds.

Each claim is a statistic of the three study models' analysis reports (ResNet, AlterNet,
Swin-like) that is positive when the claim holds in that seed: for "MSAs are low-pass
filters", minus the mean change of Delta log amplitude across the MSA blocks; for "AlterNet
is more robust", AlterNet's robustness minus the ResNet's; and so on (`CLAIMS`). Over the
seeds, a claim **holds** when its statistic is positive in every seed or the 95 % t-interval
of its mean lies above 0, **the opposite holds** in the mirrored case, and otherwise it is
**not settled** (the seeds disagree). Pure functions: `benchmarks/fashion_mnist_study.py`
feeds them the reports and writes the table; `tests/test_study_claims.py` checks the rules.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archdsl.ir import ATTENTION_KINDS

# Two-sided 95 % Student t quantiles by degrees of freedom (n - 1 seeds); beyond the table, 1.96.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}

Reports = Mapping[str, Any]  # model label -> AnalysisReport of one seed


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def block_changes(report: Any) -> dict[str, list[tuple[float, float, float]]]:
    """kind -> (change of Delta log amplitude, log variance ratio, lesion drop in points) per block.

    A stage's first block (after the first stage) also halves the map, so its frequencies and
    variance change for that reason too: it is its own kind, `conv (downsamples)`.
    """
    amp = report.feature_maps.delta_log_amplitude.layers
    var = report.feature_maps.variance.layers
    lesion = {b.name: b.top1 for b in report.lesion.blocks}
    changes: dict[str, list[tuple[float, float, float]]] = {}
    first_stage = amp[1].stage
    for i in range(1, len(amp)):
        kind = amp[i].kind + (" (downsamples)" if amp[i].index == 0 and amp[i].stage != first_stage else "")
        drop = 100 * (report.lesion.top1 - lesion[amp[i].name]) if amp[i].name in lesion else float("nan")
        ratio = math.log(var[i].value / var[i - 1].value)
        changes.setdefault(kind, []).append((amp[i].value - amp[i - 1].value, ratio, drop))
    return changes


def _msa_amp(label: str) -> Callable[[Reports], float]:
    return lambda r: -_mean([c[0] for c in block_changes(r[label]).get("msa", [])])


def _conv_amp(label: str) -> Callable[[Reports], float]:
    return lambda r: _mean([c[0] for c in block_changes(r[label]).get("conv", [])])


def _msa_var(label: str) -> Callable[[Reports], float]:
    return lambda r: -_mean([c[1] for c in block_changes(r[label]).get("msa", [])])


def _conv_var(label: str) -> Callable[[Reports], float]:
    return lambda r: _mean([c[1] for c in block_changes(r[label]).get("conv", [])])


def _ape(report: Any) -> float:
    return report.hessian.ape if report.hessian.ape is not None else 0.0


def _last_msa_lesion(label: str) -> Callable[[Reports], float]:
    """Points lost by removing the MSA that ends the last stage, minus the mean over the other MSAs."""

    def statistic(r: Reports) -> float:
        lesion = r[label].lesion
        msas = [b for b in lesion.blocks if b.kind in ATTENTION_KINDS]
        last, others = msas[-1], msas[:-1]
        drop = lambda b: 100 * (lesion.top1 - b.top1)  # noqa: E731
        return drop(last) - _mean([drop(b) for b in others])

    return statistic


def _stage_start_lesion(label: str) -> Callable[[Reports], float]:
    """Mean points lost by removing a conv that starts a stage (the first stage's too), minus the
    mean over the other convs."""

    def statistic(r: Reports) -> float:
        lesion = r[label].lesion
        convs = [b for b in lesion.blocks if b.kind == "conv"]
        drop = lambda b: 100 * (lesion.top1 - b.top1)  # noqa: E731
        return _mean([drop(b) for b in convs if b.index == 0]) - _mean([drop(b) for b in convs if b.index > 0])

    return statistic


def _nll_train_orders_error(r: Reports) -> float:
    """Pearson correlation over the models of NLL_train and test error (positive: they rise together)."""
    xs = [rep.training_nll.nll for rep in r.values()]
    ys = [1 - rep.classification.top1 for rep in r.values()]
    mx, my = _mean(xs), _mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else 0.0


@dataclass(frozen=True)
class Claim:
    """A claim of the paper and the statistic (positive: it holds) that tests it on one seed's reports."""

    text: str
    statistic: str  # what the number is, in words
    unit: str
    measure: Callable[[Reports], float]


CLAIMS: tuple[Claim, ...] = (
    Claim("AlterNet is more accurate than the ResNet", "top-1 AlterNet - ResNet", "points",
          lambda r: 100 * (r["AlterNet"].classification.top1 - r["ResNet"].classification.top1)),
    Claim("AlterNet is more robust than the ResNet", "robustness AlterNet - ResNet", "points",
          lambda r: 100 * (r["AlterNet"].robustness.mean - r["ResNet"].robustness.mean)),
    Claim("The Swin-like endpoint is less accurate than AlterNet", "top-1 AlterNet - Swin-like", "points",
          lambda r: 100 * (r["AlterNet"].classification.top1 - r["Swin-like"].classification.top1)),
    Claim("MSAs are low-pass filters (AlterNet)", "- mean change of dLogAmp across MSAs", "",
          _msa_amp("AlterNet")),
    Claim("MSAs are low-pass filters (Swin-like)", "- mean change of dLogAmp across MSAs", "",
          _msa_amp("Swin-like")),
    Claim("Convs are high-pass filters (ResNet)", "mean change of dLogAmp across same-size convs", "",
          _conv_amp("ResNet")),
    Claim("MSAs reduce the feature-map variance (AlterNet)", "- mean log variance ratio across MSAs", "",
          _msa_var("AlterNet")),
    Claim("MSAs reduce the feature-map variance (Swin-like)", "- mean log variance ratio across MSAs", "",
          _msa_var("Swin-like")),
    Claim("Convs raise the feature-map variance (ResNet)", "mean log variance ratio across same-size convs", "",
          _conv_var("ResNet")),
    Claim("Lower NLL_train goes with lower test error", "correlation of NLL_train and test error", "",
          _nll_train_orders_error),
    Claim("MSAs flatten the loss (AlterNet)", "APE ResNet - AlterNet", "",
          lambda r: _ape(r["ResNet"]) - _ape(r["AlterNet"])),
    Claim("MSAs flatten the loss (Swin-like)", "APE ResNet - Swin-like", "",
          lambda r: _ape(r["ResNet"]) - _ape(r["Swin-like"])),
    Claim("MSAs bring negative eigenvalues (AlterNet)", "NEP AlterNet - ResNet", "points",
          lambda r: 100 * (r["AlterNet"].hessian.nep - r["ResNet"].hessian.nep)),
    Claim("MSAs bring negative eigenvalues (Swin-like)", "NEP Swin-like - ResNet", "points",
          lambda r: 100 * (r["Swin-like"].hessian.nep - r["ResNet"].hessian.nep)),
    Claim("The MSA that ends the network matters most (AlterNet)", "lesion drop: last MSA - other MSAs", "points",
          _last_msa_lesion("AlterNet")),
    Claim("The MSA that ends the network matters most (Swin-like)", "lesion drop: last MSA - other MSAs", "points",
          _last_msa_lesion("Swin-like")),
    Claim("Convs at stage starts matter most (ResNet)", "lesion drop: stage-start convs - other convs", "points",
          _stage_start_lesion("ResNet")),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """A claim's statistic in every seed, their mean and spread, and what they say."""

    claim: Claim
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return _mean(self.values)

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    @property
    def half_width(self) -> float:
        """Half the 95 % t-interval of the mean (infinite with one seed: one seed settles nothing)."""
        n = len(self.values)
        if n < 2:
            return math.inf
        return _T95.get(n - 1, 1.96) * self.std / math.sqrt(n)

    @property
    def outcome(self) -> str:
        """`holds`, `opposite` or `not settled`."""
        if all(v > 0 for v in self.values) or self.mean - self.half_width > 0:
            return "holds"
        if all(v < 0 for v in self.values) or self.mean + self.half_width < 0:
            return "opposite"
        return "not settled"


def verdicts(reports_by_seed: Sequence[Reports], claims: Sequence[Claim] = CLAIMS) -> list[Verdict]:
    """Every claim's verdict over the seeds (each item: one seed's model label -> report)."""
    return [Verdict(claim, tuple(claim.measure(reports) for reports in reports_by_seed)) for claim in claims]


def verdict_table(rows: Sequence[Verdict]) -> list[str]:
    """The verdicts as Markdown table lines."""
    lines = [
        "| claim | statistic (positive: holds) | per seed | mean +- std | verdict |",
        "|---|---|---|---|---|",
    ]
    for v in rows:
        unit = f" {v.claim.unit}" if v.claim.unit else ""
        seeds = ", ".join(f"{x:+.3g}" for x in v.values)
        lines.append(
            f"| {v.claim.text} | {v.claim.statistic}{unit} | {seeds} | {v.mean:+.3g} +- {v.std:.2g} | {v.outcome} |"
        )
    return lines
