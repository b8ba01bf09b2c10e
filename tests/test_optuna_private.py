"""The Optuna internals archdsl relies on (all in archdsl.search._optuna_private) still behave as
that module says. A failure here means the installed Optuna changed them: update the module,
and the version range in pyproject.toml, together."""

from __future__ import annotations

import copy
import warnings
from importlib.metadata import requires

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from packaging.requirements import Requirement

from archdsl.search import _optuna_private as private


def _journal_study(tmp_path) -> optuna.Study:
    return optuna.create_study(storage=JournalStorage(JournalFileBackend(str(tmp_path / "j.log"))))


def _rdb(tmp_path, **heartbeat) -> RDBStorage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RDBStorage(f"sqlite:///{tmp_path / 'study.db'}", **heartbeat)


def test_the_installed_optuna_is_in_the_range_archdsl_declares():
    [declared] = [Requirement(r) for r in requires("archdsl") or () if Requirement(r).name == "optuna"]
    assert declared.specifier.contains(optuna.__version__), (
        f"Optuna {optuna.__version__} is outside {declared.specifier}, the range archdsl.search._optuna_private "
        "was checked against"
    )


def test_a_study_exposes_its_storage_and_a_trial_its_id(tmp_path):
    study = _journal_study(tmp_path)
    seen = []

    def objective(trial: optuna.Trial) -> float:
        storage = private.storage_of(trial.study)
        assert isinstance(storage, BaseStorage), "Study._storage is no longer the study's storage"
        frozen = storage.get_trial(private.trial_id(trial))
        seen.append((frozen.number, trial.number, private.trial_id(frozen)))
        return 0.0

    study.optimize(objective, n_trials=2)
    assert [(a, b) for a, b, _ in seen] == [(0, 0), (1, 1)], "Trial._trial_id no longer names the trial in storage"
    assert [c for *_, c in seen] == [private.trial_id(t) for t in study.get_trials()]


def test_heartbeat_detection(tmp_path):
    assert private.heartbeat_enabled(private.storage_of(_journal_study(tmp_path))) is False
    assert private.heartbeat_enabled(_rdb(tmp_path)) is False
    beating = _rdb(tmp_path, heartbeat_interval=60, grace_period=120)
    assert private.heartbeat_enabled(beating) is True
    # A study wraps an RDB storage in a cache: the wrapped one must still count as beating.
    assert private.heartbeat_enabled(private.storage_of(optuna.create_study(storage=beating))) is True


def test_enqueued_parameters_live_in_the_fixed_params_attr(tmp_path):
    study = _journal_study(tmp_path)
    study.enqueue_trial({"x": 3})
    [waiting] = study.get_trials(states=(TrialState.WAITING,))
    assert private.fixed_params(waiting) == {"x": 3}, "Study.enqueue_trial no longer stores fixed_params"
    # ... and Optuna runs a waiting trial with the parameters found there.
    study.add_trial(optuna.create_trial(state=TrialState.WAITING, system_attrs={private.FIXED_PARAMS_ATTR: {"x": 7}}))
    study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=2)
    assert sorted(t.params["x"] for t in study.trials) == [3, 7], "Optuna no longer honours fixed_params"


def test_the_retry_attrs_archdsl_reads_are_those_optunas_retry_callback_writes(tmp_path):
    study = _journal_study(tmp_path)
    study.optimize(lambda t: t.suggest_int("x", 0, 9) * 0.0, n_trials=1)
    callback = RetryHeartbeatStaleTrialCallback(max_retry=3)
    for _ in range(2):  # a retry, then a retry of the retry (on a copy, as Optuna's fail_stale_trials calls it)
        callback(study, copy.deepcopy(study.trials[-1]))
    retried = study.trials[-1]
    assert private.retried_trial(retried) == 0, f"Optuna's retry attr {private.FAILED_TRIAL_ATTR!r} changed"
    assert retried.system_attrs[private.RETRY_HISTORY_ATTR] == [0, 1], "Optuna's retry history attr changed"
    assert RetryHeartbeatStaleTrialCallback.retried_trial_number(retried) == 0
    assert RetryHeartbeatStaleTrialCallback.retry_history(retried) == [0, 1]


def test_optunas_grpc_servicer_serves_a_storage_to_its_proxy_client():
    import importlib.util

    import pytest

    if importlib.util.find_spec("grpc") is None:
        pytest.skip("grpcio is not installed (the `distributed` extra)")
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    from optuna.storages import GrpcStorageProxy, InMemoryStorage

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    private.add_grpc_storage_service(server, InMemoryStorage())
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            client = GrpcStorageProxy(host="127.0.0.1", port=port)
        client.wait_server_ready(timeout=30)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            private.ask_grpc_storage(channel, timeout=30)  # its generated stub, answered NOT_FOUND
        study = optuna.create_study(storage=client, study_name="served")
        study.optimize(lambda t: t.suggest_int("x", 0, 9) * 0.0, n_trials=2)
        assert [t.state for t in optuna.load_study(study_name="served", storage=client).trials] == [
            TrialState.COMPLETE
        ] * 2, "Optuna's gRPC servicer or its generated add_..._to_server function changed"
        client.close()
    finally:
        server.stop(grace=None)


def test_the_hypervolume_is_the_area_the_points_dominate():
    # Two corners of the unit square, reference (2, 2): the 2x2 square less the 1x1 corner neither dominates.
    assert private.hypervolume([[0.0, 1.0], [1.0, 0.0]], [2.0, 2.0]) == 3.0
    # A dominated point adds nothing.
    assert private.hypervolume([[0.0, 1.0], [1.0, 0.0], [1.5, 1.5]], [2.0, 2.0]) == 3.0
