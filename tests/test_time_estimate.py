"""The time a search takes, as `--dry-run` and the progress line say it (`archdsl.search.time_estimate`): the work of
every budget, raise, settle step and scoring pass, priced at the base and at the dearest design (fake timings here:
no timing is asserted)."""

from __future__ import annotations

import datetime

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from archdsl.search.fidelity import measures
from archdsl.search.fidelity.budget import Budget
from archdsl.search.planning import dearest_design, estimate_time, plan_space
from archdsl.search.report import progress_text
from archdsl.search.runner import study_progress
from archdsl.search.settings import SearchSettings
from archdsl.search.studies.record import RUNG_ATTR
from archdsl.search.time_estimate import UNIT_STEP, FinishedTrial, StepSeconds, Workload, remaining_seconds

# 2 and 4 epochs on 100 training images, a settle budget of 8; 30 validation images scored each epoch, 30 test once
WORK = Workload(
    rungs=(Budget(2, 1.0), Budget(4, 1.0)), settles=(Budget(8, 1.0),), seeds=2, train_images=100,
    validation_images=30, test_images=30, stand_ins=False,
)  # fmt: skip


def test_a_trial_trains_every_epoch_scores_validation_each_epoch_and_test_once():
    step = StepSeconds(train=1.0, score=0.5)
    # per seed: 2 epochs x (100 trained + 30 scored x 0.5) + 30 test scored x 0.5 = 245; two seeds
    assert WORK.trial_seconds(Budget(2, 1.0), step) == pytest.approx(2 * 245)
    assert WORK.trial_seconds(Budget(2, 0.5), step, seeds=1) == pytest.approx(2 * (50 + 15) + 15)


def test_the_range_runs_from_the_shortest_walk_at_the_base_to_the_longest_at_the_dearest_design():
    cheap, dear = StepSeconds(1.0, 0.5), StepSeconds(3.0, 1.0)
    two = WORK.trial_seconds(Budget(2, 1.0), cheap) + WORK.trial_seconds(Budget(4, 1.0), cheap)
    settle = 2 * WORK.trial_seconds(Budget(8, 1.0), cheap)  # the shortlist's two designs
    assert WORK.low(3, cheap) == pytest.approx(3 * two + settle)  # every verdict at two budgets, one settle budget
    longest = 5 * (WORK.trial_seconds(Budget(2, 1.0), dear) + WORK.trial_seconds(Budget(4, 1.0), dear))
    assert WORK.high(5, dear) == pytest.approx(longest + 2 * WORK.trial_seconds(Budget(8, 1.0), dear))
    stand_in = Workload(**{**WORK.__dict__, "stand_ins": True})  # a failed seed's stand-in: one seed more at most
    assert stand_in.high(5, dear) == pytest.approx(WORK.high(5, dear) * 3 / 2)
    chosen = Workload(**{**WORK.__dict__, "shortlist": 3})  # --knobs choose: the answer at the base's knobs too
    assert chosen.low(3, cheap) - WORK.low(3, cheap) == pytest.approx(WORK.trial_seconds(Budget(8, 1.0), cheap))


def test_a_walk_that_chooses_its_windows_prices_a_third_settled_design():
    """`--knobs choose` on a space that searches windows settles the answer at the base's windows too (3 designs);
    `--knobs base`, or a space of k alone, settles 2."""
    from archdsl.lang.spec import load_spec
    from archdsl.search.space import make_space
    from archdsl.search.walk.buildup import settle_size

    base = load_spec("alter-small-base")
    assert settle_size(make_space(base, ("k", "window")), "choose") == 3
    assert settle_size(make_space(base, ("k", "window")), "base") == 2
    assert settle_size(make_space(base, ("k",)), "choose") == 2


def test_the_dry_run_prices_the_high_end_at_the_design_with_the_most_msas(monkeypatch):
    """Before, the base alone was timed: the main job's dry run said 2:21-2:38 min where it used 3:12-4:40."""

    def fake(arch, fidelity, *, device, steps=4):  # an MSA doubles the price of a training image
        return StepSeconds(train=0.001 * 2**arch.n_msa, score=0.0002)

    monkeypatch.setattr(measures, "step_seconds_per_image", fake)
    plan = plan_space(SearchSettings())  # the main job
    assert dearest_design(plan).n_msa == 4
    estimate = estimate_time(plan)
    work, (few, most) = plan.workload, estimate.designs
    assert estimate.low == pytest.approx(work.low(few, StepSeconds(0.001, 0.0002)))
    assert estimate.high == pytest.approx(work.high(most, StepSeconds(0.016, 0.0002)))
    assert estimate.high > 16 * work.high(most, StepSeconds(0.001, 0)) * 0.99  # not the base's price
    assert work.validation_images == 500 and work.test_images > 0 and work.stand_ins  # what the main job scores
    assert "0.001 to 0.016 ms" not in estimate.text() and "1 to 16 ms a training image" in estimate.text()


def test_the_eta_counts_what_a_raised_budget_trains_not_designs():
    """One trial at the first budget (460 image-steps in 46 s: 0.1 s each) prices the rest: 1 to 3 designs left,
    each at two budgets at least (1,360), the last verdict's raise (2 x 900), the settle stage (2 x 1,780)."""
    first = [FinishedTrial(rung=0, seeds=2, seconds=46.0)]
    low, high = remaining_seconds(WORK, first, (1, 3))
    assert low == pytest.approx(0.1 * (1360 + 3560))
    assert high == pytest.approx(0.1 * (3 * 1360 + 1800 + 3560))
    # the raise ran (90 s for 900): nothing of it is left, and the pace holds
    raised = [*first, FinishedTrial(rung=1, seeds=2, seconds=90.0)]
    assert remaining_seconds(WORK, raised, (1, 3)) == pytest.approx((low, 0.1 * (3 * 1360 + 3560)))
    # the walk done, one settle trial run: one left, whatever the designs say
    settling = [*raised, FinishedTrial(rung=2, seeds=2, seconds=178.0)]
    assert remaining_seconds(WORK, settling, (0, 0)) == pytest.approx((178.0, 178.0))
    # a walk shorter than the longest (the 400-image folder's: 4 designs of 5) left no design behind it: its last
    # settle trial's line said `ETA 0.0 s to 3:10 min`
    assert remaining_seconds(WORK, settling, (0, 1)) == pytest.approx((178.0, 178.0))
    assert remaining_seconds(WORK, [FinishedTrial(0, 2, 0.0)], (1, 3)) is None  # no pace yet


def _trial(study: optuna.Study, seconds: float, rung: int, digest: str) -> None:
    start = datetime.datetime(2026, 1, 1)
    study.add_trial(
        FrozenTrial(
            number=0, trial_id=0, state=TrialState.COMPLETE, value=1.0, datetime_start=start,
            datetime_complete=start + datetime.timedelta(seconds=seconds), params={}, distributions={},
            user_attrs={"digest": digest, RUNG_ATTR: rung}, system_attrs={}, intermediate_values={},
        )
    )  # fmt: skip


def test_the_progress_line_of_a_laddered_walk_says_a_range_that_counts_raises_and_the_settle_stage():
    plan = plan_space(SearchSettings(), {"budget_steps": 1})  # the main job on a two-rung ladder
    work = plan.workload
    study = optuna.create_study()
    seconds = work.trial_seconds(work.rungs[0], UNIT_STEP) / 100  # 100 image-steps a second
    _trial(study, seconds, 0, "base")
    _trial(study, 2 * seconds, 1, "base")  # the base raised: a trial, no new design
    progress = study_progress(study, 5, plan)
    assert (progress.done, progress.total) == (1, 5)
    expected = remaining_seconds(work, [FinishedTrial(0, 3, seconds), FinishedTrial(1, 3, 2 * seconds)], (3, 4))
    assert (progress.eta_seconds, progress.eta_high) == pytest.approx(expected)
    assert progress.eta_high > progress.eta_seconds > 4 * 1.5 * seconds  # not the mean trial time x designs left
    assert progress_text(progress).startswith("[1/5, ETA ") and " to " in progress_text(progress)
