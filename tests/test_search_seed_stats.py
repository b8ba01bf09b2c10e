"""The report's statistics over paired seeds: a design's mean with its 95 % t-interval (clipped to the
metric's range), the designs tied with the best by the walk's own rule, and how the report shows them
(terminal, report.md, trials.csv, error bars in the plots)."""

from __future__ import annotations

import csv
import io
import math
import statistics

import optuna
import pytest
from matplotlib.container import ErrorbarContainer
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from archdsl.search.objectives import OBJECTIVES
from archdsl.search.report._csv import CHOSEN_COLUMN, INTERVAL_COLUMNS, trials_csv
from archdsl.search.report._figures import make_figures
from archdsl.search.report._lines import summary_text
from archdsl.search.report._markdown import markdown
from archdsl.search.report._numbers import estimate_text
from archdsl.search.report._summary import summarize_study
from archdsl.search.seed_stats import estimate, improves_beyond_noise, tied_with
from archdsl.search.studies.record import DIGEST_ATTR, LAYOUT_ATTR, METRICS_ATTR, SEED_INDICES_ATTR, SEED_VALUES_KEY

ACCURACY = OBJECTIVES["accuracy"]


def _t_two_sided_95(df: int) -> float:
    """Student's t quantile at 0.975 in closed form, for the degrees of freedom that have one:
    df 1 is the Cauchy distribution (tan), df 2 has t_p = (2p - 1) / sqrt(2 p (1 - p))."""
    p = 0.975
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    assert df == 2
    return (2 * p - 1) / math.sqrt(2 * p * (1 - p))


@pytest.mark.parametrize("values", [(0.70, 0.74), (0.70, 0.74, 0.75), (0.31, 0.29, 0.36)])
def test_the_interval_is_the_mean_plus_minus_t_times_the_standard_error(values):
    mean = sum(values) / len(values)
    stderr = statistics.stdev(values) / math.sqrt(len(values))
    half = _t_two_sided_95(len(values) - 1) * stderr
    found = estimate(values)
    assert found.mean == pytest.approx(mean)
    assert found.half_width == pytest.approx(half, rel=1e-9)
    assert (found.low, found.high) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert found.seeds == len(values)


def test_one_seed_gives_a_mean_and_no_interval():
    found = estimate((0.7,), ACCURACY.bounds)
    assert found.mean == 0.7 and found.half_width is None and found.low is None and found.high is None


def test_an_accuracys_interval_is_clipped_to_0_and_1_and_keeps_its_half_width():
    values = (0.98, 1.0)
    half = _t_two_sided_95(1) * statistics.stdev(values) / math.sqrt(2)  # 12.7 x 0.01: far past 1
    found = estimate(values, ACCURACY.bounds)
    assert found.high == 1.0 and found.low == pytest.approx(0.99 - half)
    assert found.half_width == pytest.approx(half)
    low = estimate((0.0, 0.02), ACCURACY.bounds)
    assert low.low == 0.0 and low.high == pytest.approx(0.01 + half)
    assert estimate(values).high == pytest.approx(0.99 + half)  # no range: not clipped


def test_ties_are_the_designs_the_best_does_not_beat_beyond_the_noise():
    best = (0.80, 0.82, 0.84)
    # One-sided 5 % with 3 seeds: the best beats a design when its mean paired difference exceeds
    # t(0.95, 2) x the differences' standard error; t(0.95, 2) = 0.9 / sqrt(2 x 0.95 x 0.05) in closed form.
    critical = 0.9 / math.sqrt(2 * 0.95 * 0.05)
    spread = (0.01, -0.01, 0.0)  # differences around their mean: standard error 0.01 / sqrt(3)
    stderr = statistics.stdev(spread) / math.sqrt(3)
    just_beaten = tuple(b - (critical * stderr * 1.05 + s) for b, s in zip(best, spread, strict=True))
    just_tied = tuple(b - (critical * stderr * 0.95 + s) for b, s in zip(best, spread, strict=True))
    others = {
        "worse everywhere": tuple(v - 0.1 for v in best),  # no noise in the difference: beaten
        "noisy": (0.81, 0.80, 0.85),  # paired differences -0.01, 0.02, -0.01: no better
        "just beaten": just_beaten,
        "just tied": just_tied,
        "other seeds": (0.80, 0.82),  # not paired with the best's three
    }
    assert tied_with(best, others, ACCURACY) == ["noisy", "just tied"]
    # the walk's rule, the same call: a tie is a design the best would not have been kept over
    assert all(not improves_beyond_noise(best, others[k], ACCURACY) for k in ("noisy", "just tied"))
    assert tied_with((0.8,), {"any": (0.8,)}, ACCURACY) == []  # one seed tells nothing from noise


def _seeded_study(per_seed: list[tuple[float, ...]]) -> optuna.Study:
    """A single-objective accuracy study whose trial n has the per-seed accuracies per_seed[n]."""
    study = optuna.create_study(direction="maximize", study_name="seeded")
    study.set_user_attr("objectives", "accuracy")
    study.set_user_attr("strategy", "random")
    for number, values in enumerate(per_seed):
        metrics = {"accuracy": sum(values) / len(values)}
        if len(values) > 1:
            metrics[SEED_VALUES_KEY] = list(values)
        study.add_trial(
            optuna.create_trial(
                state=TrialState.COMPLETE,
                value=metrics["accuracy"],
                params={"k_c1": number % 2},
                distributions={"k_c1": IntDistribution(0, 1)},
                user_attrs={
                    DIGEST_ATTR: f"d{number}",
                    "short_id": f"id{number}",
                    "n_msa": number % 2,
                    LAYOUT_ATTR: f"c1:{'CM' if number % 2 else 'CC'}",
                    METRICS_ATTR: metrics,
                },
            )
        )
    return study


SEEDED = [(0.60, 0.62), (0.80, 0.84), (0.78, 0.84), (0.50, 0.52)]  # trial 1 best; 2 tied; 0 and 3 beaten


def test_the_report_gives_the_best_designs_interval_and_lists_its_ties():
    summary = summarize_study(_seeded_study(SEEDED))
    assert [r.number for r in summary.best] == [1] and [r.number for r in summary.ties] == [2]
    found = estimate(SEEDED[1], ACCURACY.bounds)
    assert found.low is not None and found.high is not None and found.half_width is not None
    shown = f"accuracy={estimate_text(found)}"  # one format everywhere (report/_numbers.py)
    assert shown == "accuracy=0.82 ± 0.25 [0.57, 1.00] (2 seeds)"
    text = summary_text(summary)
    assert shown in text and "tied within the noise: trial 2 (0.81 ± 0.38)" in text
    md = markdown(summary, {}, {})
    assert shown.replace("accuracy=", "accuracy = ") in md
    assert "Validation accuracy on each paired seed: 0.8, 0.84" in md
    ties = md.split("## Tied with the best within the noise")[1].split("\n## ")[0]
    assert [line.split("|")[1].strip() for line in ties.splitlines() if line.startswith("| ")][1:] == ["2"]
    rows = {r["trial"]: r for r in csv.DictReader(io.StringIO(trials_csv(summary)))}
    assert [rows[n][CHOSEN_COLUMN] for n in "0123"] == ["", "best", "tied", ""]
    assert float(rows["1"][INTERVAL_COLUMNS[0]]) == pytest.approx(found.low)
    assert float(rows["1"][INTERVAL_COLUMNS[1]]) == pytest.approx(found.high)


def test_one_seed_says_it_has_no_interval_and_tells_no_ties():
    summary = summarize_study(_seeded_study([(0.6,), (0.8,)]))
    assert summary.ties == ()
    text = summary_text(summary)
    assert "accuracy=0.8 (1 seed: no interval)" in text and "not told with 1 seed" in text
    assert CHOSEN_COLUMN not in trials_csv(summary).splitlines()[0]


def test_the_plots_carry_the_seeds_error_bars():
    summary = summarize_study(_seeded_study(SEEDED))
    figures = make_figures(_seeded_study(SEEDED), summary)
    for name, ax in (("history", figures["history"].axes[0]), ("msa", figures["msa"].axes[0])):
        [bars] = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        [segments] = bars.lines[2]
        spans = sorted((float(s[0][1]), float(s[1][1])) for s in segments.get_segments())
        expected = sorted((e.low, e.high) for e in (estimate(v, ACCURACY.bounds) for v in SEEDED))
        assert spans == [pytest.approx(e) for e in expected], name
    one_seed = summarize_study(_seeded_study([(0.6,), (0.8,)]))
    history = make_figures(_seeded_study([(0.6,), (0.8,)]), one_seed)["history"].axes[0]
    assert not [c for c in history.containers if isinstance(c, ErrorbarContainer)]


@pytest.mark.parametrize("value", [0.1, 0.7, 1 / 3])
def test_equal_seeds_have_no_spread_at_all(value):
    # Three seeds at 0.1 gave "0.1 ± 4.2e-17" in the report: the float mean of equal values is not the value,
    # and the deviations from it were not 0.
    from archdsl.search.seed_stats import mean_and_stderr

    assert mean_and_stderr((value, value, value)) == (value, 0.0)
    assert estimate((value, value, value)).half_width == 0.0


def test_a_tie_is_shown_with_its_mean_over_every_seed_it_was_measured_on():
    # the best and trial 2's design raced to a third seed (extra-seed trials): the ties line shows the pooled
    # mean, as the best's interval is pooled, not the first trial's two seeds
    study = _seeded_study(SEEDED)
    for digest, value in (("d1", 0.82), ("d2", 0.70)):
        study.add_trial(
            optuna.create_trial(
                state=TrialState.COMPLETE,
                value=value,
                params={"k_c1": 0},
                distributions={"k_c1": IntDistribution(0, 1)},
                user_attrs={DIGEST_ATTR: digest, SEED_INDICES_ATTR: [2], METRICS_ATTR: {"accuracy": value}},
            )
        )
    summary = summarize_study(study)
    assert [r.number for r in summary.ties] == [2]
    assert "tied within the noise: trial 2 (0.77 ± 0.17)" in summary_text(summary)  # (0.78 + 0.84 + 0.70) / 3


def test_trials_csv_has_plain_column_names_and_one_precision():
    # `test_accuracy (not used for selection)` was awkward in pandas and R, and `accuracy` was written at full
    # float precision beside the 6-digit seeds and interval (issue 58, item 6)
    import dataclasses
    import re

    from archdsl.search.studies.record import HeldOutFigures

    summary = summarize_study(_seeded_study([(0.6, 0.6, 0.7), (0.8, 0.9, 0.8), (0.5, 0.6, 0.6)]))
    held = HeldOutFigures(seeds=[0, 1, 2], accuracy=[0.7, 0.7, 0.8], indices=[0, 1, 2], trial=1, digest="d1")
    text = trials_csv(dataclasses.replace(summary, held_out={1: held}))
    header = text.splitlines()[0].split(",")
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", name) for name in header), header
    assert {"test_accuracy", "test_accuracy_seeds"} <= set(header)
    rows = {r["trial"]: r for r in csv.DictReader(io.StringIO(text))}
    assert rows["1"]["accuracy"] == "0.833333" and rows["0"]["accuracy"] == "0.633333"
    assert rows["1"]["test_accuracy"] == "0.733333" and rows["1"]["test_accuracy_seeds"] == "0.7;0.7;0.8"
