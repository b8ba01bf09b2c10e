"""Trials answered from a replay table (`--fidelity table:PATH`): `Replaying`, the table's `trial.Measurer`, looks
each trial's runs up where `trial.Training` trains them, and `make_objective` gives the runner the one or the other.
Apart from the table itself (`replay`: its models, loading and checks), which the study's plan holds: the plan is
below the trial (docs/architecture.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna

from archdsl.ir import Arch
from archdsl.search.fidelity import measures as measure
from archdsl.search.fidelity.replay import CurvePoint, Replay, TableRun, paired_runs
from archdsl.search.fidelity.trial import Training, TrialObjective
from archdsl.search.seed_stats import mean_and_stderr
from archdsl.search.studies.record import (
    CPU_SECONDS_ATTR,
    NO_TABLE_FIGURES,
    SIM_SECONDS_ATTR,
    TABLE_SEED_ATTR,
    HeldOutFigures,
    seed_indices,
)

if TYPE_CHECKING:
    from archdsl.search.plan import SearchPlan


@dataclass(frozen=True)
class Replaying:
    """Trials answered from the table: each trial draws one of its design's runs (`Replay.draw`),
    and `TrialObjective` stages, constrains and prunes it as a trained one; its simulated time
    (the run's own) is the trial's `sim_seconds`."""

    replay: Replay

    def start(self, trial: optuna.Trial, arch: Arch, plan: SearchPlan) -> _ReplayedDesign:
        design = self.replay.design(arch)
        indices = seed_indices(trial, plan.fidelity.seeds)
        if plan.max_seeds == 1:
            runs: tuple[TableRun, ...] = (self.replay.draw(design, plan.settings.seed, trial.number),)
        else:  # paired: seed index s is the run of the seed a trained search trains it with, for every design
            # check_replay made sure every design has runs for plan.max_seeds paired seeds
            runs = paired_runs(design, plan.settings.seed, indices)
        trial.set_user_attr(TABLE_SEED_ATTR, runs[0].seed)
        return _ReplayedDesign(runs, indices, plan.fidelity.epochs, _Clock(trial))


@dataclass(frozen=True)
class _ReplayedDesign:
    runs: tuple[TableRun, ...]  # one per paired seed; the first answers the pruner and the analyses
    indices: tuple[int, ...]  # their paired seed indices
    epochs: int  # the fidelity's
    clock: _Clock

    @property
    def run(self) -> TableRun:
        return self.runs[0]

    def fits(self) -> None:
        pass  # the table measured it

    def latency(self) -> float:
        assert self.run.latency is not None, "check_replay refuses a table without latency for a latency search"
        return self.run.latency

    def train(self, on_epoch: Callable[[int, float], None], run_dir: Callable[[], Path | None]) -> measure.Trained:
        run = self.run
        epochs = min(self.epochs, len(run.curve))
        curve = run.curve[:epochs]
        total = sum(p.seconds for p in run.curve)
        for n, point in enumerate(curve, start=1):
            # The run's training time (set-up included) shared out by the epochs' own times.
            share = point.seconds / total if total > 0 else 1 / len(run.curve)
            self.clock.add(run.train_time * share, _times(run.train_cpu_seconds, share))
            on_epoch(n, point.val_acc)
        self.clock.add(0.0, run.test_cpu_seconds)  # trained, its model is scored once on the test split
        history = [_validation_only(p) for p in curve]
        first = measure.Trained(model=None, accuracy=run.accuracy_after(epochs), history=history, sealed=self._tested())
        if len(self.runs) == 1:
            return first
        for other in self.runs[1:]:  # trained one after another on a worker
            self.clock.add(other.train_time * min(1.0, epochs / len(other.curve)), other.cpu_seconds(epochs))
        per_seed = tuple(r.accuracy_after(min(self.epochs, len(r.curve))) for r in self.runs)
        return dataclasses.replace(first, accuracy=mean_and_stderr(per_seed)[0], seed_accuracies=per_seed)

    def _tested(self) -> HeldOutFigures:
        """The test figures the table recorded for the runs that answer the trial, after the fidelity's epochs."""
        seeds, indices = [run.seed for run in self.runs], list(self.indices[: len(self.runs)])
        values = [_test_accuracy(run, self.epochs) for run in self.runs]
        if any(v is None for v in values):
            return HeldOutFigures(seeds=seeds, accuracy=[], indices=indices, source="table", note=NO_TABLE_FIGURES)
        return HeldOutFigures(
            seeds=seeds, accuracy=[v for v in values if v is not None], indices=indices, source="table"
        )

    def analyses(self, trained: measure.Trained, names: set[str]) -> dict[str, float]:
        self.clock.add(self.run.measure_time, self.run.measure_cpu_seconds)
        return {name: getattr(self.run, name) for name in names}

    def close(self) -> None:
        self.clock.stop()


def _test_accuracy(run: TableRun, epochs: int) -> float | None:
    """A run's test top-1 after `epochs` (its final one when they are all), where the table recorded one."""
    return run.curve[epochs - 1].test_acc if epochs < len(run.curve) else run.test_acc


def _validation_only(point: CurvePoint) -> dict[str, Any]:
    """An epoch of a run as a replayed trial's history keeps it: its test figures left out."""
    return point.model_dump(exclude={"test_acc", "test_nll"})


def _times(seconds: float | None, share: float) -> float | None:
    return None if seconds is None else seconds * share


class _Clock:
    """A trial's simulated time and the CPU its runs recorded (None once a part of them is known as wall time
    only), written to the trial when it ends (finished, pruned or failed)."""

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial
        self.seconds = 0.0
        self.cpu: float | None = 0.0

    def add(self, seconds: float, cpu: float | None) -> None:
        self.seconds += seconds
        self.cpu = None if self.cpu is None or cpu is None else self.cpu + cpu

    def stop(self) -> None:
        self.trial.set_user_attr(SIM_SECONDS_ATTR, self.seconds)
        if self.cpu is not None:  # the table's CPU: what training these runs took (the trained search's own count)
            self.trial.set_user_attr(CPU_SECONDS_ATTR, self.cpu)


def make_objective(plan: SearchPlan) -> TrialObjective:
    """The callable of `study.optimize`: trained trials, or replayed ones when `plan.replay` holds a table."""
    if plan.replay is not None:
        return TrialObjective(plan, Replaying(plan.replay))
    if plan.data is None:
        raise ValueError("a trained search needs its data")  # a bug: plan_search loads it
    return TrialObjective(plan, Training(plan.data))
