"""One format for a figure and its interval (search/report/_numbers.py), used by the terminal and report.md:
as many digits as the interval supports (issue 56, item 5: it printed `0.8187 ± 0.2 [0.6137, 1]`)."""

from __future__ import annotations

import pytest

from archdsl.search.objectives import OBJECTIVES
from archdsl.search.report._numbers import estimate_text, mean_text
from archdsl.search.seed_stats import estimate

ACCURACY = OBJECTIVES["accuracy"]


@pytest.mark.parametrize(
    "seeds, shown",
    [
        ((0.808, 0.906, 0.742), "0.82 ± 0.20 [0.61, 1.00] (3 seeds)"),
        ((0.8853, 0.8794, 0.8912), "0.885 ± 0.015 [0.871, 0.900] (3 seeds)"),
        ((0.1, 0.1, 0.1), "0.1 ± 0 [0.1, 0.1] (3 seeds)"),
        ((0.72,), "0.72 (1 seed: no interval)"),
        ((0.60, 0.62), "0.61 ± 0.13 [0.48, 0.74] (2 seeds)"),
    ],
)
def test_a_figure_has_the_digits_its_interval_supports(seeds, shown):
    assert estimate_text(estimate(seeds, ACCURACY.bounds)) == shown


def test_the_short_form_is_the_long_forms_start():
    found = estimate((0.808, 0.906, 0.742), ACCURACY.bounds)
    assert mean_text(found) == "0.82" and mean_text(found, interval=True) == "0.82 ± 0.20"
    assert estimate_text(found).startswith(mean_text(found, interval=True) + " [")


def test_a_half_width_that_rounds_up_a_decade_keeps_two_digits():
    # 0.0996 is 0.10 at two significant digits: the mean is written to 2 places, not 3
    found = estimate((0.5, 0.5 + 2 * 0.0996 / 12.706204736174698), None)
    assert mean_text(found, interval=True).endswith(" ± 0.10")


def test_large_figures_round_to_their_interval_too():
    found = estimate((310_000.0, 335_000.0, 322_000.0), None)
    assert mean_text(found, interval=True) == "322000 ± 31000"


def test_a_trial_line_writes_its_accuracy_as_the_summary_does():
    import optuna
    from optuna.trial import TrialState

    from archdsl.search import trial_line
    from archdsl.search.studies.record import METRICS_ATTR, SEED_VALUES_KEY

    study = optuna.create_study(direction="maximize", study_name="lines")
    study.set_user_attr("objectives", "accuracy")
    for seeds in ((0.808, 0.906, 0.742), (0.5,)):
        metrics = {"accuracy": sum(seeds) / len(seeds), **({SEED_VALUES_KEY: list(seeds)} if len(seeds) > 1 else {})}
        study.add_trial(optuna.create_trial(state=TrialState.COMPLETE, value=metrics["accuracy"],
                                            user_attrs={METRICS_ATTR: metrics}))  # fmt: skip
    three, one = study.trials
    assert "accuracy=0.82 ± 0.20 " in trial_line(study, three)  # was accuracy=0.8187
    assert "accuracy=0.5 " in trial_line(study, one)
