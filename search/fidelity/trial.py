"""One trial: a design from the space, measured in stages, recorded in the study.

In order, cheapest first: the design and its digest (a design the study already has makes the trial a copy),
the constraints from the IR, the cheap measures, training on the paired seeds (validation chooses; each seed's
test figures are sealed for the final test alone, `record.seal_test`), then the analyses for the candidates no
finished trial dominates. docs/architecture.md ("The path of one trial") follows these steps through the code;
docs/search.md ("Fidelity") says which failures a design can cause (they fail its trial alone) and which stop
the search.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UserError
from archdsl.files import ensure_dir, write_json, write_text
from archdsl.ir import Arch
from archdsl.lang.printer import format_arch
from archdsl.nn.summary import DesignTooLarge, ensure_fits  # torch-free: the memory estimate, before any build
from archdsl.search._optuna_private import storage_of, trial_id
from archdsl.search.fidelity import measures as measure
from archdsl.search.fidelity.seeds_aside import SeedAsideFailed, SeedFigures, cpu_seconds  # torch-free till training
from archdsl.search.objectives import Cost, dominates
from archdsl.search.seed_stats import mean_and_stderr
from archdsl.search.space import layout_text
from archdsl.search.studies.record import (
    CLAIM_ATTR,
    COPY_ATTR,
    CPU_SECONDS_ATTR,
    DIGEST_ATTR,
    DIR_ATTR,
    FAIL_REASON_ATTR,
    LAYOUT_ATTR,
    METRICS_ATTR,
    N_MSA_ATTR,
    PRUNED_REASON_ATTR,
    RANK_DIGESTS_ATTR,
    SEARCH_STOPPED,
    SEED_INDICES_ATTR,
    SEED_VALUES_KEY,
    SHORT_ID_ATTR,
    SPEC_ATTR,
    STDERR_KEY,
    WORKER_STOPPED,
    HeldOutFigures,
    rung_of,
    seal_test,
    seed_indices,
    trials,
    twin_decision,
)
from archdsl.search.studies.storage import WorkerHeartbeat, fail_stale_trials, requeue

if TYPE_CHECKING:
    from archdsl.search.plan import SearchPlan

CLAIM_PATIENCE_S = 10.0  # the longest a trial waits for a twin's look (milliseconds, unless its worker died)


class TrialFailed(Exception):
    """A candidate that could not be measured; `study.optimize` records FAIL and goes on."""


class DesignCopy(TrialFailed):
    """The trial drew a design the study has measured or is measuring: it is not measured again."""


class DesignAnswers(Protocol):
    """What one trial's design measures to, stage by stage: `Training` trains it, a replay table
    (`archdsl.search.fidelity.replaying.Replaying`) looks its run up. `TrialObjective` stages, constrains,
    prunes and records alike for both."""

    def fits(self) -> None:
        """`DesignTooLarge` if the design cannot be built."""

    def latency(self) -> float:
        """Inference time per image (ms)."""
        ...

    def train(self, on_epoch: Callable[[int, float], None], run_dir: Callable[[], Path | None]) -> measure.Trained:
        """The trained design; `on_epoch(epoch, top1)` after each epoch (it may prune); `run_dir()`
        makes the trial's folder for training's files."""
        ...

    def analyses(self, trained: measure.Trained, names: set[str]) -> dict[str, float]:
        """The values of `names` (robustness, nep, ape) of the trained design."""
        ...

    def close(self) -> None:
        """The trial ended (finished, pruned or failed)."""


class Measurer(Protocol):
    """Where a search's trials get their answers (`Training`, or `archdsl.search.fidelity.replaying.Replaying`)."""

    def start(self, trial: optuna.Trial, arch: Arch, plan: SearchPlan) -> DesignAnswers:
        """The answers of trial `trial`'s design, measured as `plan` says."""
        ...


@dataclass(frozen=True)
class Training:
    """Trials answered by training each design on the search's data (`archdsl.search.fidelity.measures`)."""

    data: measure.DataContext

    def start(self, trial: optuna.Trial, arch: Arch, plan: SearchPlan) -> DesignAnswers:
        fidelity = plan.fidelity_at(rung_of(trial))  # the budget the walk asks for (the study's, unless raised)
        return _TrainedDesign(self.data, plan, fidelity, arch, seed_indices(trial, plan.fidelity.seeds))


@dataclass(frozen=True)
class _TrainedDesign:
    data: measure.DataContext
    plan: SearchPlan
    fidelity: measure.Fidelity  # the trial's: the plan's at the trial's budget rung
    arch: Arch
    indices: tuple[int, ...]  # the paired seed indices to train (seed_indices)

    def fits(self) -> None:
        ensure_fits(self.arch)

    def latency(self) -> float:
        s = self.plan.settings
        return measure.latency_ms(self.arch, self.data, self.fidelity, s.device, s.seed)

    def train(self, on_epoch: Callable[[int, float], None], run_dir: Callable[[], Path | None]) -> measure.Trained:
        """Trained on each of its paired seeds; the first seed's curve goes to the pruner and its model to the
        analyses, the accuracy is the seeds' mean. Each seed's model, once trained (not pruned), is scored once on
        the test split, for the trial to seal. On a CPU with cores to spare the later seeds train beside the
        first, in processes of their own (`seeds_aside`: the same values, sooner); else in turn."""
        from archdsl.run.device import select_device
        from archdsl.run.distributed import current
        from archdsl.search.fidelity import seeds_aside

        s = self.plan.settings
        seeds = [measure.seed_of(s.seed, index) for index in self.indices]
        if seeds_aside.can_train_aside(select_device(s.device).type, len(seeds), distributed=current() is not None):
            with seeds_aside.seeds_aside(functools.partial(self._later_seed, progress=False), seeds[1:]) as aside:
                first, first_test = self._seed(seeds[0], progress=s.progress, on_epoch=on_epoch, run_dir=run_dir())
                later = aside.figures()
        else:
            first, first_test = self._seed(seeds[0], progress=s.progress, on_epoch=on_epoch, run_dir=run_dir())
            later = [self._later_seed(seed, progress=s.progress) for seed in seeds[1:]]
        tests = [first_test, *(f.test for f in later)]
        sealed = HeldOutFigures(seeds=seeds, accuracy=tests, indices=list(self.indices))
        if not later:
            return dataclasses.replace(first, sealed=sealed)
        per_seed = (first.accuracy, *(f.accuracy for f in later))
        mean, _ = mean_and_stderr(per_seed)
        return dataclasses.replace(first, accuracy=mean, seed_accuracies=per_seed, sealed=sealed)

    def _seed(
        self,
        seed: int,
        *,
        progress: bool,
        on_epoch: Callable[[int, float], None] | None = None,
        run_dir: Path | None = None,
    ) -> tuple[measure.Trained, float]:
        """One paired seed, trained, then scored once on the test split. The first (given `on_epoch`) is scored
        after every epoch, for the pruner, and keeps its folder and model (for the analyses); a later one is
        scored after its last epoch alone."""
        s = self.plan.settings
        one = measure.train_candidate(
            self.arch, self.data, self.fidelity, device=s.device, seed=seed, run_dir=run_dir,
            on_epoch=on_epoch or (lambda epoch, top1: None), progress=progress, curve=on_epoch is not None,
        )  # fmt: skip
        assert one.model is not None, "a trained design has its model"
        return one, measure.test_accuracy(one.model, self.data, self.fidelity, device=s.device)

    def _later_seed(self, seed: int, *, progress: bool) -> SeedFigures:
        """A later paired seed: only its figures are kept."""
        one, test = self._seed(seed, progress=progress)
        return SeedFigures(one.accuracy, test)

    def analyses(self, trained: measure.Trained, names: set[str]) -> dict[str, float]:
        s, fidelity, values = self.plan.settings, self.fidelity, {}
        assert trained.model is not None, "a trained design has its model"
        if "robustness" in names:
            values["robustness"] = measure.robustness(trained.model, self.data, fidelity, seed=s.seed, device=s.device)
        if {"nep", "ape"} & names:
            values["nep"], values["ape"] = measure.hessian(
                trained.model, self.data, fidelity, seed=s.seed, device=s.device
            )
        return values

    def close(self) -> None:
        pass


class TrialObjective:
    """The callable handed to `study.optimize`: one trial of a design of `plan.space`, measured as `plan` says
    and answered by `measurer`."""

    def __init__(self, plan: SearchPlan, measurer: Measurer) -> None:
        self.plan = plan
        self.measurer = measurer

    # -- the objective ---------------------------------------------------------------------
    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        study = trial.study
        fail_stale_trials(study, self.plan.storage)
        params = self.plan.space.suggest(trial)
        try:
            arch = self.plan.space.arch_from_params(params)
        except UserError as err:  # cannot happen for a valid space; recorded, not raised
            return self._fail(trial, f"invalid design: {err}")
        digest = arch.digest()
        beat = self.plan.storage.heartbeat_interval
        # The heartbeat starts before the digest is written: a worker killed while its trial looks for a twin (or
        # waits on one) leaves a trial that `fail_stale_trials` fails and retries, not one that twins defer to for ever.
        with WorkerHeartbeat(storage_of(study), trial_id(trial), beat, keep_beating=self.plan.replay is None):
            try:
                return self._claimed(trial, arch, digest)
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (archdsl.commands._signals): no verdict on the design
                self._stopped(trial, f"{WORKER_STOPPED} (interrupted)")
                raise

    def _claimed(self, trial: optuna.Trial, arch: Arch, digest: str) -> float | tuple[float, ...]:
        """The trial's design, measured unless the study has it (a copy)."""
        study = trial.study
        trial.set_user_attr(DIGEST_ATTR, digest)
        twin = earlier_twin(study, trial.number, digest, trial.user_attrs.get(SEED_INDICES_ATTR), rung_of(trial))
        if twin is not None:
            trial.set_user_attr(COPY_ATTR, twin.number)
            raise DesignCopy(f"copy of trial {twin.number}'s design")
        trial.set_user_attr(CLAIM_ATTR, True)
        trial.set_user_attr(SHORT_ID_ATTR, arch.short_id)
        trial.set_user_attr(N_MSA_ATTR, arch.n_msa)
        trial.set_user_attr(LAYOUT_ATTR, layout_text(arch))
        trial.set_user_attr(SPEC_ATTR, format_arch(arch.model_copy(update={"name": _arch_name(trial, arch)})))
        return self._measure(trial, arch)

    def _measure(self, trial: optuna.Trial, arch: Arch) -> float | tuple[float, ...]:
        answers = self.measurer.start(trial, arch, self.plan)
        started = cpu_seconds()  # every thread of this process and its later seeds' processes: all the trial's
        try:
            return self._staged(trial, arch, answers)
        finally:
            answers.close()
            if self.plan.replay is None:  # a replayed trial's CPU is its table runs' (replaying.Replaying)
                trial.set_user_attr(CPU_SECONDS_ATTR, cpu_seconds() - started)

    def _staged(self, trial: optuna.Trial, arch: Arch, answers: DesignAnswers) -> float | tuple[float, ...]:
        """The stages of the module's docstring, whatever answers them (training or a table)."""
        objectives, s = self.plan.objectives, self.plan.settings
        wanted = {o.name for o in objectives}
        metrics: dict[str, Any] = dict(measure.static_costs(arch))
        for name, limit in (("params", s.max_params), ("flops", s.max_flops)):
            if limit is not None and metrics[name] > limit:
                trial.set_user_attr(METRICS_ATTR, metrics)
                return self._prune(trial, f"{name} {metrics[name]:.4g} > --max-{name} {limit:.4g}")
        trial.set_user_attr(METRICS_ATTR, metrics)
        sealed: HeldOutFigures | None = None  # the test figures training measures, for the study's seal
        try:
            answers.fits()  # a design that cannot be built is no result, whatever the objectives
            if "latency" in wanted:
                metrics["latency"] = answers.latency()
            # Staging: rule a candidate out on the cheap objectives as early as they are known.
            cheap_before_training = self._prune_if_dominated_before_training(trial, metrics)
            if max(o.cost for o in objectives) >= Cost.TRAINED:
                trained = answers.train(
                    lambda epoch, top1: self._report(trial, epoch, top1), lambda: self._trial_dir(trial, arch)
                )
                if trained.rank_digests:  # trained by a torchrun group: what each rank built
                    trial.set_user_attr(RANK_DIGESTS_ATTR, list(trained.rank_digests))
                metrics["accuracy"] = trained.accuracy
                sealed = trained.sealed  # not a metric: nothing that chooses reads it
                if trained.seed_accuracies:  # --seeds N: each paired seed's value and the mean's standard error
                    metrics[SEED_VALUES_KEY] = list(trained.seed_accuracies)
                    metrics[STDERR_KEY] = mean_and_stderr(trained.seed_accuracies)[1]
                metrics["history"] = trained.history
                trial.set_user_attr(METRICS_ATTR, _without_history(metrics))
                better = None if cheap_before_training else self._dominated_on_cheap(trial, metrics)
                if better is not None:
                    return self._prune(trial, f"dominated on the cheap objectives by trial {better}")
                analyses = wanted & {"robustness", "nep", "ape"}
                if analyses:
                    metrics.update(answers.analyses(trained, analyses))
        except optuna.TrialPruned:
            raise
        except measure.Diverged as err:
            return self._fail(trial, str(err))  # "training diverged: ..."
        except SeedAsideFailed as err:  # a paired seed's process killed (the OOM killer, a kill): not the design's
            self._stopped(trial, f"{WORKER_STOPPED}: {err}")
            raise TrialFailed(str(err)) from None
        except DesignTooLarge as err:  # estimated before any allocation (docs/compiler.md)
            return self._fail(trial, f"too large: {err.message}")
        except UserError:
            raise  # a mistake in the search's settings (e.g. a batch larger than the data): stop the search
        except Exception as err:
            first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
            if measure.is_out_of_memory(err):
                return self._fail(trial, f"out of memory: {first_line}")
            if measure.is_unsupported_by_device(err):
                return self._fail(trial, f"the device cannot run it: {first_line}")
            # Anything else is not the design's doing but a bug (or a broken machine): failing
            # the trial and going on would fill the study with "failed designs". Say why on the
            # trial, queue its design again (it is no verdict on it), then stop.
            last = traceback.extract_tb(err.__traceback__)[-1]
            where = f"{Path(last.filename).name}:{last.lineno}"
            self._stopped(trial, f"{SEARCH_STOPPED}: {type(err).__name__}: {err} ({where})")
            raise
        return self._finish(trial, arch, metrics, sealed)

    # -- outcomes ----------------------------------------------------------------------------
    def _finish(
        self, trial: optuna.Trial, arch: Arch, metrics: dict[str, Any], sealed: HeldOutFigures | None
    ) -> float | tuple[float, ...]:
        missing = [o.name for o in self.plan.objectives if o.name not in metrics]
        if missing:
            return self._fail(trial, f"no value for {', '.join(missing)}")
        trial.set_user_attr(METRICS_ATTR, _without_history(metrics))
        self._write_trial_files(trial, arch, metrics)
        if sealed is not None:  # a complete trial's test figures, on the study: the final test alone opens them
            seal_test(trial, sealed)
        values = tuple(float(metrics[o.name]) for o in self.plan.objectives)
        return values[0] if len(values) == 1 else values

    def _prune_if_dominated_before_training(self, trial: optuna.Trial, metrics: dict[str, Any]) -> bool:
        """Staging: when every cheap objective is known before training, a candidate a finished trial
        dominates on them is pruned now (raises). Returns whether they were all known."""
        objectives = self.plan.objectives
        cheap_before_training = all(o.cost < Cost.TRAINED for o in objectives if o.cost <= Cost.TRAINED)
        if cheap_before_training:
            better = self._dominated_on_cheap(trial, metrics)
            if better is not None:
                self._prune(trial, f"dominated on the cheap objectives by trial {better}")
        return cheap_before_training

    def _prune(self, trial: optuna.Trial, reason: str) -> NoReturn:
        trial.set_user_attr(PRUNED_REASON_ATTR, reason)
        raise optuna.TrialPruned(reason)

    def _fail(self, trial: optuna.Trial, reason: str) -> NoReturn:
        trial.set_user_attr(FAIL_REASON_ATTR, reason)
        raise TrialFailed(reason)

    def _stopped(self, trial: optuna.Trial, reason: str) -> None:
        """The trial ends for a reason that is no verdict on its design (`record.is_verdict`): say why on it, and
        queue its design again (at most --max-retry times), for this search or the same command's resume."""
        trial.set_user_attr(FAIL_REASON_ATTR, reason)
        requeue(trial.study, storage_of(trial.study).get_trial(trial_id(trial)), self.plan.storage.max_retry)

    def _report(self, trial: optuna.Trial, epoch: int, top1: float) -> None:
        objectives = self.plan.objectives
        if SEED_INDICES_ATTR in trial.user_attrs:
            return  # a race's extra seed: its design was not pruned, and its curve is no new design's for the pruner
        if len(objectives) == 1 and objectives[0].name == "accuracy":
            trial.report(top1, epoch)
            # Never at the last epoch: the training is done, and stopping it would lose its measured result.
            if epoch < self.plan.fidelity_at(rung_of(trial)).epochs and trial.should_prune():
                self._prune(trial, f"{prune_reason(trial.study.pruner)} at epoch {epoch}")

    # -- the study's memory --------------------------------------------------------------------
    def _dominated_on_cheap(self, trial: optuna.Trial, metrics: dict[str, Any]) -> int | None:
        """The number of a finished trial that dominates this one on the cheap objectives.

        Staging only applies when the study has both cheap and expensive objectives.
        """
        cheap = tuple(o for o in self.plan.objectives if o.cost <= Cost.TRAINED)
        if not cheap or len(cheap) == len(self.plan.objectives):
            return None
        for t in trials(trial.study, states=(TrialState.COMPLETE,)):
            other = t.user_attrs.get(METRICS_ATTR, {})
            if all(o.name in other for o in cheap) and dominates(other, metrics, cheap):
                return t.number
        return None

    # -- files --------------------------------------------------------------------------------
    def _trial_dir(self, trial: optuna.Trial, arch: Arch) -> Path | None:
        root = self.plan.trial_root
        if root is None:
            return None
        path = ensure_dir(trial_dir(root, trial.number, arch.short_id), within=root)
        trial.set_user_attr(DIR_ATTR, str(path))
        return path

    def _write_trial_files(self, trial: optuna.Trial, arch: Arch, metrics: dict[str, Any]) -> None:
        path, root = self._trial_dir(trial, arch), self.plan.trial_root
        if path is None:
            return
        write_text(path / "spec.arch", trial.user_attrs[SPEC_ATTR], within=root)
        record = {
            "trial": trial.number,
            "digest": arch.digest(),
            "params": trial.params,
            "objectives": {o.name: metrics[o.name] for o in self.plan.objectives},
            "metrics": metrics,
        }
        write_json(path / "metrics.json", record, within=root)


def earlier_twin(
    study: optuna.Study,
    number: int,
    digest: str,
    indices: list[int] | None = None,
    rung: int = 0,
    patience_s: float = CLAIM_PATIENCE_S,
) -> FrozenTrial | None:
    """The trial that has trial `number`'s design (on the same seed indices: `indices`, an extra-seed
    trial's; at the same budget, `rung`) already, if any, after waiting (up to `patience_s`) for the twins that
    are deciding (`record.twin_decision`); None: trial `number` measures the design."""
    give_up = time.monotonic() + patience_s
    while True:
        decision, twin = twin_decision(trials(study), number, digest, indices, rung)
        if decision == "copy":
            return twin
        if decision == "measure" or time.monotonic() > give_up:  # a twin's worker died mid-look: measure it too
            return None
        time.sleep(0.02)


def prune_reason(pruner: optuna.pruners.BasePruner) -> str:
    """Why a pruner stops a trial, in words (the report's note on a pruned trial)."""
    if isinstance(pruner, optuna.pruners.MedianPruner):
        return "median pruner: below the median"
    if isinstance(pruner, optuna.pruners.HyperbandPruner):
        return "hyperband: not promoted"
    if isinstance(pruner, optuna.pruners.SuccessiveHalvingPruner):
        return "successive halving: not promoted"
    return f"{type(pruner).__name__}: pruned"


def trial_dir(out_dir: Path, number: int, short_id: str) -> Path:
    """The folder of one trial's files: OUT_DIR/trials/<number>-<design id>."""
    return out_dir / "trials" / f"{number}-{short_id}"


def _arch_name(trial: optuna.Trial, arch: Arch) -> str:
    return f"trial{trial.number}_{arch.short_id}"


def _without_history(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k != "history"}
