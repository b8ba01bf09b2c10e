"""A design's later paired seeds train beside its first in forked processes (`search.fidelity.seeds_aside`): the
same values as training them in turn, sooner; a failure in a later seed fails the trial as it would in turn, and a
trial that ends early (pruned) stops them."""

from __future__ import annotations

import os
import time

import _search_support as support
import pytest
import torch

from archdsl.cli import main
from archdsl.search.fidelity import seeds_aside
from archdsl.search.fidelity.measures import Diverged
from archdsl.search.studies.record import CPU_SECONDS_ATTR, seed_values

needs_two_cores = pytest.mark.skipif(
    not seeds_aside.can_train_aside("cpu", 3, distributed=False), reason="trains aside only with 2+ cores and fork"
)


def _figures(seed: int) -> seeds_aside.SeedFigures:
    """A little training whose result depends on the seed and on every step (a stand-in for a candidate's)."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 2)
    data, labels = torch.randn(64, 8), torch.randint(0, 2, (64,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(20):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), labels).backward()
        optimizer.step()
    accuracy = float((model(data).argmax(1) == labels).float().mean())
    return seeds_aside.SeedFigures(accuracy=accuracy, test=float(model.bias.detach().sum()))


@needs_two_cores
def test_each_seed_comes_back_in_order_with_the_figures_of_training_it_in_turn():
    with seeds_aside.seeds_aside(_figures, [5, 6, 7]) as aside:
        mine = _figures(4)
        theirs = aside.figures()
    assert [mine, *theirs] == [_figures(seed) for seed in (4, 5, 6, 7)]
    assert len({f.test for f in theirs}) == 3  # three seeds, three trainings


def _diverges_at_six(seed: int) -> seeds_aside.SeedFigures:
    if seed == 6:
        raise Diverged("the loss became NaN at epoch 2")
    return _figures(seed)


@needs_two_cores
def test_a_later_seed_that_diverges_fails_the_trial_with_its_own_error():
    with pytest.raises(Diverged, match="NaN at epoch 2"), seeds_aside.seeds_aside(_diverges_at_six, [5, 6]) as aside:
        aside.figures()


def _dies(seed: int) -> seeds_aside.SeedFigures:
    os._exit(3)  # killed from within: no figures, no error sent


@needs_two_cores
def test_a_later_seed_whose_process_dies_is_an_error_that_says_so():
    with pytest.raises(seeds_aside.SeedAsideFailed, match="exit code 3"), seeds_aside.seeds_aside(_dies, [5]) as aside:
        aside.figures()


def _sleeps(seed: int) -> seeds_aside.SeedFigures:
    time.sleep(60)
    return seeds_aside.SeedFigures(0.0, 0.0)


@needs_two_cores
def test_leaving_early_stops_the_later_seeds_and_gives_back_the_threads():
    before = torch.get_num_threads()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="pruned"), seeds_aside.seeds_aside(_sleeps, [5, 6]) as aside:
        children = [child for child, _ in aside._children]
        assert torch.get_num_threads() == seeds_aside.threads_each(3)
        raise RuntimeError("pruned at epoch 1")  # as the first seed's pruner stops a trial
    assert not any(child.is_alive() for child in children) and time.monotonic() - started < 30
    assert torch.get_num_threads() == before


@needs_two_cores
@pytest.mark.usefixtures("one_thread")
def test_a_search_trains_the_same_seed_values_aside_as_in_turn(tmp_path, monkeypatch):
    """End to end: paired seeds trained aside give each trial exactly the values of the same search training them
    in turn, one thread each (what each seed's process has on two cores)."""
    assert seeds_aside.threads_each(3) == 1 or os.cpu_count() != 2
    args = ["--seeds", "3", "--n-trials", "2", "--pruner", "none"]
    assert main(support.search_args(tmp_path, "aside", *args)) == 0
    monkeypatch.setattr(seeds_aside, "can_train_aside", lambda *args, **kwargs: False)
    torch.set_num_threads(seeds_aside.threads_each(3))
    assert main(support.search_args(tmp_path, "in-turn", *args)) == 0
    aside, in_turn = (support.load(tmp_path, name).trials for name in ("aside", "in-turn"))
    assert [seed_values(t) for t in aside] == [seed_values(t) for t in in_turn]
    assert all(len(seed_values(t)) == 3 for t in aside)
    # each trial's CPU counts its later seeds' processes: about what training them in turn took, not a third of it
    cpu = [sum(t.user_attrs[CPU_SECONDS_ATTR] for t in trials) for trials in (aside, in_turn)]
    assert cpu[0] > 0.6 * cpu[1]
