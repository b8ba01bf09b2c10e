"""A design's later paired seeds train beside its first in forked processes (`search.fidelity.seeds_aside`): the
same values as training them in turn, sooner; a failure in a later seed fails the trial as it would in turn, and a
trial that ends early (pruned) stops them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _search_support as support
import pytest
import torch
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.search.fidelity import seeds_aside
from archdsl.search.fidelity.measures import Diverged
from archdsl.search.studies.record import CPU_SECONDS_ATTR, FAIL_REASON_ATTR, WORKER_STOPPED, seed_values

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
    with (
        pytest.raises(seeds_aside.SeedAsideFailed, match="exited with code 3"),
        seeds_aside.seeds_aside(_dies, [5]) as aside,
    ):
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


@needs_two_cores
@pytest.mark.usefixtures("one_thread")
def test_a_diverged_later_seed_says_training_diverged_once(tmp_path):
    assert main(support.search_args(tmp_path, "nan", "--seeds", "2", "--n-trials", "1", "--lr", "1e12")) == 0
    reasons = [t.user_attrs[FAIL_REASON_ATTR] for t in support.load(tmp_path, "nan").trials]
    assert reasons and all(r.startswith("training diverged: ") for r in reasons), reasons
    assert not any("training diverged: training diverged" in r for r in reasons), reasons


def _killed_once(flag: Path):
    """A later seed's training that the kernel kills (SIGKILL, as the OOM killer does) the first time only."""

    def later_seed(self, seed: int, *, progress: bool) -> seeds_aside.SeedFigures:
        if not flag.exists():
            flag.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return seeds_aside.SeedFigures(0.5, 0.5)

    return later_seed


@needs_two_cores
@pytest.mark.usefixtures("one_thread")
def test_a_killed_seed_process_fails_its_trial_in_one_line_and_its_design_runs_again(tmp_path, capsys, monkeypatch):
    from archdsl.search.fidelity import trial as trial_module

    monkeypatch.setattr(trial_module._TrainedDesign, "_later_seed", _killed_once(tmp_path / "killed"))
    args = support.search_args(tmp_path, "kill", "--seeds", "2", "--n-trials", "1", "--strategy", "random")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "SeedAsideFailed" not in err, err
    said = [line for line in err.splitlines() if "killed" in line]
    assert len(said) == 1 and "SIGKILL" in said[0], err
    trials = support.load(tmp_path, "kill").trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[0].user_attrs[FAIL_REASON_ATTR].startswith(WORKER_STOPPED)  # no verdict on the design
    assert trials[1].params == trials[0].params  # the same design, measured again


_SLEEPING_SEEDS = """\
import sys, time
from archdsl.cli import program
from archdsl.search.fidelity import seeds_aside, trial

def later_seed(self, seed, *, progress):
    time.sleep(300)  # a long training: the search is stopped meanwhile

def first_seed(self, seed, **kwargs):
    time.sleep(300)

trial._TrainedDesign._later_seed = later_seed
trial._TrainedDesign._seed = first_seed
sys.argv = ["archdsl", *sys.argv[1:]]
program()
"""


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended (its parent, pytest's init, reaps it)


def _stop_search(tmp_path: Path, study: str, how: signal.Signals) -> tuple[int, str, list[int]]:
    """Start a search whose three paired seeds train for minutes, send it `how` once its two seed processes run;
    its exit status, its output, and those of its seed processes still running once it has ended."""
    script = tmp_path / "sleeping_seeds.py"
    script.write_text(_SLEEPING_SEEDS)
    args = support.search_args(tmp_path, study, "--seeds", "3", "--n-trials", "1", "--strategy", "random")
    here = str(Path(__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / f"{study}.log"  # a file, not a pipe: seed processes left running would hold a pipe open
    with log.open("w") as out:
        search = subprocess.Popen([sys.executable, str(script), *args], stdout=out, stderr=subprocess.STDOUT, env=env)
    seeds: set[int] = set()
    try:
        give_up = time.monotonic() + 120
        while len(seeds := _children(search.pid)) < 2 and time.monotonic() < give_up and search.poll() is None:
            time.sleep(0.2)
        assert len(seeds) == 2, log.read_text()
        search.send_signal(how)
        search.wait(timeout=60)
        give_up = time.monotonic() + 10  # the kernel's parent-death signal, after SIGKILL: delivered at once
        while (left := [pid for pid in seeds if _alive(pid)]) and how == signal.SIGKILL and time.monotonic() < give_up:
            time.sleep(0.1)
    finally:
        search.kill()
        for pid in seeds:  # what a failure left running, stopped (only the seeds this test saw start)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    return search.returncode, log.read_text(), left


@needs_two_cores
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts processes through Linux's /proc")
def test_sigterm_ends_the_search_with_its_seed_processes_and_queues_the_trial_again(tmp_path):
    status, output, left = _stop_search(tmp_path, "term", signal.SIGTERM)  # how SLURM, Kubernetes, systemd stop a job
    assert not left, output
    assert status == 128 + signal.SIGTERM, output
    assert "Traceback" not in output and "archdsl: interrupted by SIGTERM; the finished trials" in output, output
    trials = support.load(tmp_path, "term").trials
    assert TrialState.RUNNING not in [t.state for t in trials]
    assert trials[0].state == TrialState.FAIL and trials[0].user_attrs[FAIL_REASON_ATTR].startswith(WORKER_STOPPED)
    assert [t.state for t in trials[1:]] == [TrialState.WAITING]  # queued again: the same command retries it
    assert trials[1].system_attrs["fixed_params"] == trials[0].params


@needs_two_cores
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts processes through Linux's /proc")
def test_a_search_killed_by_sigkill_takes_its_seed_processes_with_it(tmp_path):
    status, output, left = _stop_search(tmp_path, "kill", signal.SIGKILL)  # no finally runs: the kernel ends them
    assert status == -signal.SIGKILL and not left, output
