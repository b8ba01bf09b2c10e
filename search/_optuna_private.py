"""Every use of Optuna's private API, in one place, each named after what it is for: an Optuna upgrade has
one file to check, and `tests/test_optuna_private.py` names what changed. Checked against Optuna 4.9-5.0
(pyproject allows `optuna>=4.9,<6`).
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.storages.journal._storage import JournalOperation  # the op codes of journal records
from optuna.trial import FrozenTrial

__all__ = ["JournalOperation"]  # and the functions below

# System attrs Optuna itself reads and writes (Study.enqueue_trial, RetryHeartbeatStaleTrialCallback).
FIXED_PARAMS_ATTR = "fixed_params"  # the parameters an enqueued trial must take
FAILED_TRIAL_ATTR = "failed_trial"  # the number of the trial a retry repeats
RETRY_HISTORY_ATTR = "retry_history"  # the numbers of every earlier run of a retried trial


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The storage a study reads and writes (Optuna wraps RDB storages in a cache)."""
    return study._storage


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """A trial's id in its storage (not its number in the study), for storage calls."""
    return trial._trial_id


def heartbeat_enabled(storage: optuna.storages.BaseStorage) -> bool:
    """Whether Optuna keeps a heartbeat for this storage itself (RDB with an interval,
    also when wrapped in the cache a study puts around it)."""
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(storage)


def fixed_params(trial: FrozenTrial) -> dict[str, Any] | None:
    """The parameters a waiting trial was enqueued with (None if it was not enqueued)."""
    return trial.system_attrs.get(FIXED_PARAMS_ATTR)


def retried_trial(trial: FrozenTrial) -> int | None:
    """The number of the trial a retry runs again (the first of its series), or None for no retry."""
    number = trial.system_attrs.get(FAILED_TRIAL_ATTR)
    return int(number) if number is not None else None


def add_grpc_storage_service(server: Any, storage: optuna.storages.BaseStorage) -> None:
    """Serve `storage` on a gRPC server as Optuna's proxy does (`optuna.storages.run_grpc_proxy_server`
    builds its own server, without the options archdsl sets: one listener per port)."""
    from optuna.storages._grpc.auto_generated.api_pb2_grpc import add_StorageServiceServicer_to_server
    from optuna.storages._grpc.servicer import OptunaStorageProxyService

    add_StorageServiceServicer_to_server(OptunaStorageProxyService(storage), server)


def ask_grpc_storage(channel: Any, timeout: float, *, wait_for_ready: bool = False) -> None:
    """One call to the Optuna storage proxy on `channel` (a grpc.Channel), answered within `timeout` seconds
    (connecting included), or a grpc.RpcError: Optuna's client makes its calls without a deadline. The call asks
    the id of a study name no study has (""), which a proxy answers at once with NOT_FOUND. Unless
    `wait_for_ready`, a connection that fails (refused, closed, not HTTP/2) fails the call at once, with gRPC's
    words for why."""
    import grpc
    from optuna.storages._grpc.auto_generated import api_pb2, api_pb2_grpc

    try:
        api_pb2_grpc.StorageServiceStub(channel).GetStudyIdFromName(
            api_pb2.GetStudyIdFromNameRequest(study_name=""), timeout=timeout, wait_for_ready=wait_for_ready
        )
    except grpc.RpcError as err:
        if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.NOT_FOUND:
            raise


def hypervolume(points: Any, reference: Any) -> float:
    """The hypervolume dominated by `points` (each row to be minimised) up to `reference`, by Optuna's
    own algorithm (its public API only draws it: `optuna.visualization.plot_hypervolume_history`)."""
    import numpy as np
    from optuna._hypervolume import compute_hypervolume

    return float(compute_hypervolume(np.asarray(points, dtype=float), np.asarray(reference, dtype=float)))
