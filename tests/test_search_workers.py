"""Many workers and resumes: every trial that counts is a new design; --n-trials counts designs."""

from __future__ import annotations

import itertools
import threading

import _search_support as support
import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search.fidelity.trial import earlier_twin
from archdsl.search.space import make_space
from archdsl.search.studies.record import CLAIM_ATTR, COPY_ATTR, DIGEST_ATTR, is_verdict, twin_decision

pytestmark = pytest.mark.usefixtures("one_thread")


def counted_designs(study: optuna.Study) -> list[str]:
    """The digest of every trial that counts towards --n-trials (one entry per trial)."""
    return [t.user_attrs["digest"] for t in study.trials if is_verdict(t)]


def test_a_resumed_search_draws_new_designs_not_the_first_ones_again(tmp_path):
    # `params` needs no training: trials take milliseconds. 8 designs in the tiny space.
    first = support.search_args(tmp_path, "resume", "--strategy", "random", "--objectives", "params", "--n-trials", "2")
    assert main(first) == 0
    more = support.search_args(tmp_path, "resume", "--strategy", "random", "--objectives", "params", "--n-trials", "4")
    assert main(more) == 0
    designs = counted_designs(support.load(tmp_path, "resume"))
    assert len(designs) == 4 and len(set(designs)) == 4  # before: the resume redrew trials 0 and 1


def test_the_end_of_the_space_stops_the_search_with_a_clear_message(tmp_path, capsys):
    args = support.search_args(tmp_path, "all", "--strategy", "random", "--objectives", "params", "--n-trials", "20")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "search space exhausted: all 8 designs are measured" in err and "--n-trials 20" in err
    study = support.load(tmp_path, "all")
    designs = counted_designs(study)
    assert len(designs) == 8 and len(set(designs)) == 8
    copies = [t for t in study.trials if "copy_of" in t.user_attrs]
    assert all(t.state == TrialState.FAIL and not is_verdict(t) for t in copies)
    by_number = {t.number: t for t in study.trials}
    for copy in copies:  # a copy names the trial that has its design
        assert by_number[copy.user_attrs["copy_of"]].user_attrs["digest"] == copy.user_attrs["digest"]
    report = (tmp_path / "runs" / "all" / "report" / "report.md").read_text()
    assert "- trials: 8 (8 complete" in report and f"{len(copies)} copies drawn again" in report
    assert main(args) == 0  # the same command again: nothing left to do, no new trial
    assert len(support.load(tmp_path, "all").trials) == len(study.trials)


@pytest.mark.parametrize(
    "searched", [("k",), ("k", "heads"), ("k", "heads", "window", "dim_head"), ("k", "heads", "init")]
)
def test_the_space_counts_its_distinct_designs(searched):
    space = make_space(support_base(), searched)
    choices = space.choices()
    digests = {
        space.arch_from_params(dict(zip(choices, combo, strict=True))).digest()
        for combo in itertools.product(*choices.values())
    }
    assert space.n_designs() == len(digests) <= space.size()


def support_base():
    from archdsl.lang.spec import parse_spec

    return parse_spec(support.TINY_BASE)


class _Claimer:
    """One worker's steps on a trial that drew `digest`, as `TrialObjective` takes them: write the digest,
    look (`twin_decision`; looks again after "wait" once another worker has written something), then write
    the verdict of the look (a copy, or the claim to measure). Each write or look is one step."""

    def __init__(self, storage, study_id: int, trial_id: int, number: int, digest: str) -> None:
        self.storage, self.study_id, self.trial_id, self.number, self.digest = (
            storage,
            study_id,
            trial_id,
            number,
            digest,
        )
        self.steps = self._steps()
        self.outcome: str | None = None  # "copy" or "measure" once done
        self.blocked = False  # its last look said "wait" and nothing was written since

    def _steps(self):
        self.storage.set_trial_user_attr(self.trial_id, DIGEST_ATTR, self.digest)
        yield "write"
        while True:
            decision, twin = twin_decision(
                self.storage.get_all_trials(self.study_id, deepcopy=False), self.number, self.digest
            )
            if decision != "wait":
                break
            self.blocked = True
            yield "look"
        yield "look"
        if decision == "copy":
            self.storage.set_trial_user_attr(self.trial_id, COPY_ATTR, twin.number)
        else:
            self.storage.set_trial_user_attr(self.trial_id, CLAIM_ATTR, "x")
        self.outcome = decision
        yield "write"


def _outcomes(schedule: list[int], workers: int) -> tuple[list[str | None], list[int]]:
    """Runs `workers` claimers of one design, trial numbers 0.., stepping worker schedule[i] at step i while it
    can; returns their outcomes and the workers that may take the next step."""
    storage = optuna.storages.InMemoryStorage()
    study_id = storage.create_new_study([optuna.study.StudyDirection.MAXIMIZE], "race")
    claimers = []
    for number in range(workers):
        trial_id = storage.create_new_trial(study_id)
        claimers.append(_Claimer(storage, study_id, trial_id, number, "design"))
    for index in schedule:
        step = next(claimers[index].steps, None)
        if step == "write":
            for other in claimers:
                other.blocked = False
    ready = [i for i, c in enumerate(claimers) if c.outcome is None and not c.blocked]
    return [c.outcome for c in claimers], ready


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_that_draw_one_design_at_once_measure_it_exactly_once_whatever_the_interleaving(workers):
    """Every order in which the workers' writes and looks can interleave: exactly one measures the design,
    the others are copies, and no worker waits for ever (a look that says "wait" sees a write before the next)."""
    ended = 0
    pending = [[]]
    while pending:
        schedule = pending.pop()
        outcomes, ready = _outcomes(schedule, workers)
        if None in outcomes:
            assert ready, f"schedule {schedule}: every worker waits, {outcomes}"
            pending.extend(schedule + [i] for i in ready)
            continue
        ended += 1
        assert outcomes.count("measure") == 1, f"schedule {schedule}: {outcomes}"
    assert ended > 10


def test_a_trial_waits_for_a_higher_numbered_twins_look_and_defers_to_its_claim():
    # trial 1 wrote the digest and is still looking when trial 0 looks: trial 0 waits, and 1's claim makes it a copy
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    lower, higher = study.ask(), study.ask()
    for trial in (lower, higher):
        trial.set_user_attr(DIGEST_ATTR, "design")
    claim = threading.Timer(0.1, lambda: higher.set_user_attr(CLAIM_ATTR, True))
    claim.start()
    twin = earlier_twin(study, lower.number, "design", patience_s=60)
    claim.join()
    assert twin is not None and twin.number == higher.number


def test_a_trial_stops_waiting_for_a_twin_whose_worker_died_mid_look_and_measures_the_design():
    # trial 1 wrote the digest and never looked (its worker was killed): trial 0 waits `patience_s`, then measures
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    lower, higher = study.ask(), study.ask()
    for trial in (lower, higher):
        trial.set_user_attr(DIGEST_ATTR, "design")
    assert earlier_twin(study, lower.number, "design", patience_s=0.2) is None
    assert earlier_twin(study, higher.number, "design", patience_s=0.2).number == lower.number  # 1 defers to 0
