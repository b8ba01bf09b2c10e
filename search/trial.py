"""One trial: a design from the space, measured in stages, recorded in the study.

The order of work keeps a search cheap and honest:
1. the design (IR) and its digest; a design the study already measured, or another
   worker is measuring, makes this trial a copy: it ends at once (FAIL, `copy_of` names
   the trial with the design), does not count towards --n-trials, and the search draws
   again (`archdsl.search.runner`);
2. the constraints (`max_params`, `max_flops`) from the IR, before any training;
3. the cheap measures (params, FLOPs, latency), then training (accuracy);
4. the expensive analyses (Hessian NEP/APE, robustness) only for candidates that no
   finished trial dominates on the cheap objectives.
Only what a design can cause fails a trial (its reason in the `fail_reason` user attr)
and lets the study go on: training that diverges (`archdsl.run.divergence`), running out
of memory (on the device or the host), and a design whose estimated memory is over the
limit (`archdsl.nn.summary`), refused before it is built. A mistake in the settings
(`UserError`) stops the search; so does any other exception, a bug, after the trial says so (`SEARCH_STOPPED`)
and its design is queued again for the next run.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UserError
from archdsl.files import ensure_dir, write_json, write_text
from archdsl.ir import Arch
from archdsl.search import measures as measure
from archdsl.search.objectives import Cost, Objective, dominates
from archdsl.search.optuna_private import storage_of, trial_id
from archdsl.search.space import Space, layout_text
from archdsl.search.storage import (
    COPY_ATTR,
    FAIL_REASON_ATTR,
    SEARCH_STOPPED,
    StorageOptions,
    WorkerHeartbeat,
    fail_stale_trials,
    is_copy,
    is_verdict,
    requeue,
)

DIGEST_ATTR = "digest"
SPEC_ATTR = "spec"  # the canonical .arch text, so that any machine can report the design
METRICS_ATTR = "metrics"
PRUNED_REASON_ATTR = "pruned_reason"
RANK_DIGESTS_ATTR = "rank_digests"  # under torchrun: the digest of the design each rank of the group trained
LAYOUT_ATTR = "layout"  # `c1:CC c2:CM ...`: where the MSAs are (space.layout_text), for reports and the dashboard


class TrialFailed(Exception):
    """A candidate that could not be measured; `study.optimize` records FAIL and goes on."""


class DesignCopy(TrialFailed):
    """The trial drew a design the study has measured or is measuring: it is not measured again."""


@dataclass
class TrialSettings:
    """How a search measures each trial: objectives, fidelity, device, seed, constraints, where trial files go."""

    objectives: tuple[Objective, ...]
    fidelity: measure.Fidelity
    device: str = "cpu"
    seed: int = 0
    max_params: float | None = None
    max_flops: float | None = None
    out_dir: Path | None = None  # runs/<study>: trial folders go under trials/
    storage: StorageOptions = field(default_factory=lambda: StorageOptions(url=None))
    progress: bool = False
    replay: Any = None  # a `search.replay.Replay`: trials are answered from its table, not trained


class TrialObjective:
    """The callable handed to `study.optimize`."""

    def __init__(self, space: Space, data: measure.DataContext, settings: TrialSettings) -> None:
        self.space = space
        self.data = data
        self.settings = settings

    # -- the objective ---------------------------------------------------------------------
    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        study = trial.study
        fail_stale_trials(study, self.settings.storage)
        params = self.space.suggest(trial)
        try:
            arch = self.space.arch_from_params(params)
        except UserError as err:  # cannot happen for a valid space; recorded, not raised
            return self._fail(trial, f"invalid design: {err}")
        digest = arch.digest()
        trial.set_user_attr(DIGEST_ATTR, digest)
        twin = earlier_twin(study, trial.number, digest)
        if twin is not None:
            trial.set_user_attr(COPY_ATTR, twin.number)
            raise DesignCopy(f"copy of trial {twin.number}'s design")
        trial.set_user_attr("short_id", arch.short_id)
        trial.set_user_attr("n_msa", arch.n_msa)
        trial.set_user_attr(LAYOUT_ATTR, layout_text(arch))
        trial.set_user_attr(SPEC_ATTR, measure.format_arch(arch.model_copy(update={"name": _arch_name(trial, arch)})))
        beat = self.settings.storage.heartbeat_interval
        with WorkerHeartbeat(storage_of(study), trial_id(trial), beat, keep_beating=self.settings.replay is None):
            return self._measure(trial, arch)

    def _measure(self, trial: optuna.Trial, arch: Arch) -> float | tuple[float, ...]:
        s = self.settings
        wanted = {o.name for o in s.objectives}
        metrics: dict[str, Any] = dict(measure.static_costs(arch))
        for name, limit in (("params", s.max_params), ("flops", s.max_flops)):
            if limit is not None and metrics[name] > limit:
                trial.set_user_attr(METRICS_ATTR, metrics)
                return self._prune(trial, f"{name} {metrics[name]:.4g} > --max-{name} {limit:.4g}")
        trial.set_user_attr(METRICS_ATTR, metrics)
        try:
            measure.ensure_fits(arch)  # a design that cannot be built is no result, whatever the objectives
            model = None
            if "latency" in wanted:
                model = measure.build_model(arch, s.seed)
                metrics["latency"] = measure.latency_ms(arch, self.data, s.fidelity, s.device, s.seed, model)
            # Staging: rule a candidate out on the cheap objectives as early as they are known.
            cheap_before_training = self._prune_if_dominated_before_training(trial, metrics)
            if max(o.cost for o in s.objectives) >= Cost.TRAINED:
                trained = measure.train_candidate(
                    arch,
                    self.data,
                    s.fidelity,
                    device=s.device,
                    seed=s.seed,
                    run_dir=self._trial_dir(trial, arch),
                    on_epoch=lambda epoch, top1: self._report(trial, epoch, top1),
                    progress=s.progress,
                )
                model = trained.model
                if trained.rank_digests:  # trained by a torchrun group: what each rank built
                    trial.set_user_attr(RANK_DIGESTS_ATTR, list(trained.rank_digests))
                metrics["accuracy"] = trained.accuracy
                metrics["history"] = trained.history
                trial.set_user_attr(METRICS_ATTR, _without_history(metrics))
                better = None if cheap_before_training else self._dominated_on_cheap(trial, metrics)
                if better is not None:
                    return self._prune(trial, f"dominated on the cheap objectives by trial {better}")
                if "robustness" in wanted:
                    metrics["robustness"] = measure.robustness(
                        model, self.data, s.fidelity, seed=s.seed, device=s.device
                    )
                if {"nep", "ape"} & wanted:
                    metrics["nep"], metrics["ape"] = measure.hessian(
                        model, self.data, s.fidelity, seed=s.seed, device=s.device
                    )
        except optuna.TrialPruned:
            raise
        except measure.Diverged as err:
            return self._fail(trial, f"training diverged: {err}")
        except measure.DesignTooLarge as err:  # estimated before any allocation (docs/compiler.md)
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
            trial.set_user_attr(FAIL_REASON_ATTR, f"{SEARCH_STOPPED}: {type(err).__name__}: {err} ({where})")
            requeue(trial.study, storage_of(trial.study).get_trial(trial_id(trial)), s.storage.max_retry)
            raise
        return self._finish(trial, arch, metrics)

    # -- outcomes ----------------------------------------------------------------------------
    def _finish(self, trial: optuna.Trial, arch: Arch, metrics: dict[str, Any]) -> Any:
        missing = [o.name for o in self.settings.objectives if o.name not in metrics]
        if missing:
            return self._fail(trial, f"no value for {', '.join(missing)}")
        trial.set_user_attr(METRICS_ATTR, _without_history(metrics))
        self._write_trial_files(trial, arch, metrics)
        values = tuple(float(metrics[o.name]) for o in self.settings.objectives)
        return values[0] if len(values) == 1 else values

    def _prune_if_dominated_before_training(self, trial: optuna.Trial, metrics: dict[str, Any]) -> bool:
        """Staging: when every cheap objective is known before training, a candidate a finished trial
        dominates on them is pruned now (raises). Returns whether they were all known."""
        objectives = self.settings.objectives
        cheap_before_training = all(o.cost < Cost.TRAINED for o in objectives if o.cost <= Cost.TRAINED)
        if cheap_before_training:
            better = self._dominated_on_cheap(trial, metrics)
            if better is not None:
                self._prune(trial, f"dominated on the cheap objectives by trial {better}")
        return cheap_before_training

    def _prune(self, trial: optuna.Trial, reason: str) -> Any:
        trial.set_user_attr(PRUNED_REASON_ATTR, reason)
        raise optuna.TrialPruned(reason)

    def _fail(self, trial: optuna.Trial, reason: str) -> Any:
        trial.set_user_attr(FAIL_REASON_ATTR, reason)
        raise TrialFailed(reason)

    def _report(self, trial: optuna.Trial, epoch: int, top1: float) -> None:
        if len(self.settings.objectives) == 1 and self.settings.objectives[0].name == "accuracy":
            trial.report(top1, epoch)
            # Never at the last epoch: the training is done, and stopping it would lose its measured result.
            if epoch < self.settings.fidelity.epochs and trial.should_prune():
                self._prune(trial, f"{prune_reason(trial.study.pruner)} at epoch {epoch}")

    # -- the study's memory --------------------------------------------------------------------
    def _dominated_on_cheap(self, trial: optuna.Trial, metrics: dict[str, Any]) -> int | None:
        """The number of a finished trial that dominates this one on the cheap objectives.

        Staging only applies when the study has both cheap and expensive objectives.
        """
        cheap = tuple(o for o in self.settings.objectives if o.cost <= Cost.TRAINED)
        if not cheap or len(cheap) == len(self.settings.objectives):
            return None
        for t in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            other = t.user_attrs.get(METRICS_ATTR, {})
            if all(o.name in other for o in cheap) and dominates(other, metrics, cheap):
                return t.number
        return None

    # -- files --------------------------------------------------------------------------------
    def _trial_dir(self, trial: optuna.Trial, arch: Arch) -> Path | None:
        if self.settings.out_dir is None:
            return None
        path = ensure_dir(trial_dir(self.settings.out_dir, trial.number, arch.short_id), within=self.settings.out_dir)
        trial.set_user_attr("dir", str(path))
        return path

    def _write_trial_files(self, trial: optuna.Trial, arch: Arch, metrics: dict[str, Any]) -> None:
        path = self._trial_dir(trial, arch)
        if path is None:
            return
        write_text(path / "spec.arch", trial.user_attrs[SPEC_ATTR], within=self.settings.out_dir)
        record = {
            "trial": trial.number,
            "digest": arch.digest(),
            "params": trial.params,
            "objectives": {o.name: metrics[o.name] for o in self.settings.objectives},
            "metrics": metrics,
        }
        write_json(path / "metrics.json", record, within=self.settings.out_dir)


def earlier_twin(study: optuna.Study, number: int, digest: str) -> FrozenTrial | None:
    """The trial that has trial `number`'s design already, if any: one with a verdict on it,
    one that is measuring it, or one with a lower number that is waiting to (a retry).

    Every trial writes its digest, then looks, then (if it is no copy) writes its `short_id`.
    A running twin counts if it has a lower number or has passed its own look (`short_id`):
    of two workers that draw one design at once, exactly one measures it, unless the second
    writes its digest between the other's look and its `short_id` (milliseconds); then both
    measure it and it still counts once (`runner` counts distinct designs).
    """
    for t in study.get_trials(deepcopy=False):
        if t.number == number or t.user_attrs.get(DIGEST_ATTR) != digest or is_copy(t):
            continue
        if is_verdict(t):
            return t
        earlier = t.number < number
        if (t.state == TrialState.RUNNING and (earlier or "short_id" in t.user_attrs)) or (
            t.state == TrialState.WAITING and earlier
        ):
            return t
    return None


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
