"""Many workers and resumes: every trial that counts is a new design; --n-trials counts designs."""

from __future__ import annotations

import itertools

import _search_support as support
import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search.space import make_space
from archdsl.search.storage import is_verdict

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
