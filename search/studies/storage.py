"""Where a study lives: a journal file on one machine, an RDB (PostgreSQL) for many, and Optuna's gRPC
proxy (`grpc://HOST:PORT`, `archdsl study serve`) in front of either; and archdsl's heartbeat, which
finds a killed worker's trial where Optuna keeps none (the journal, the proxy): docs/storage.md, "Storage,
resuming and several workers".
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from archdsl.errors import UserError, install_extra
from archdsl.search._optuna_private import FIXED_PARAMS_ATTR, heartbeat_enabled, storage_of, trial_id
from archdsl.search.studies._journal_file import open_journal
from archdsl.search.studies.record import (
    BEAT_ATTR,
    FAIL_REASON_ATTR,
    HOST_ATTR,
    PID_ATTR,
    RUN_ATTRS,
    WORKER_STOPPED,
    trials,
)

JOURNAL_SCHEME = "journal:"  # a journal file elsewhere than the study's folder: --storage journal:PATH
GRPC_SCHEME = "grpc://"  # an Optuna gRPC storage proxy (`archdsl study serve`): --storage grpc://HOST:PORT
CONNECT_TIMEOUT_S = 10  # a database server that answers nothing fails after this
MAX_CONNECT_TIMEOUT_S = 86400  # a gRPC proxy's ?connect_timeout: a day is longer than any network needs
STATEMENT_TIMEOUT_S = 60  # the server cancels a statement that runs longer (Optuna's take milliseconds)
T = TypeVar("T")


@dataclass(frozen=True)
class StorageOptions:
    """Where a study lives and how dead workers are detected and retried."""

    url: str | None  # None: the journal file in the study's folder
    heartbeat_interval: int = 30
    grace_period: int = 90
    max_retry: int = 2


def journal_path(out: Path, study_name: str) -> Path:
    """The default journal file of a study: OUT/STUDY/study.journal."""
    return out / study_name / "study.journal"


def open_storage(options: StorageOptions, out: Path, study_name: str) -> optuna.storages.BaseStorage:
    """The storage for `study_name`; every failure to reach it is a UserError with a hint."""
    if options.url is None or options.url.startswith(JOURNAL_SCHEME):
        return open_journal(Path(options.url[len(JOURNAL_SCHEME) :]) if options.url else journal_path(out, study_name))
    url = options.url
    if "://" not in url:
        raise UserError(
            f"storage {url!r} is not a URL",
            hint="use sqlite:///runs/study.db, postgresql://user:pass@host/db, grpc://host:port, or leave "
            "--storage out for a journal file in the study's folder",
        )
    if url.startswith(GRPC_SCHEME):
        return _grpc_storage(grpc_address(url))
    url = with_postgres_driver(url)
    try:
        return _while_interruptible(lambda: _rdb_storage(url, options), f"while connecting to {_server(url)}")
    except ImportError as err:  # Optuna wraps the driver's ModuleNotFoundError
        raise UserError(
            f"storage {without_password(url)}: the database driver {getattr(err.__cause__, 'name', '?')!r} is "
            "not installed",
            hint=f"for PostgreSQL (psycopg2): {install_extra('distributed')}; other databases need "
            "their SQLAlchemy driver (e.g. mysqlclient for mysql://)",
        ) from err
    except Exception as err:  # sqlalchemy's ArgumentError, OperationalError, ...
        if "timeout expired" in str(err):  # libpq's (and psycopg 3's) words for connect_timeout
            from sqlalchemy.engine import make_url

            raise UserError(
                f"cannot open storage {without_password(url)}: no answer from {_server(url)} within "
                f"{make_url(url).query.get('connect_timeout', CONNECT_TIMEOUT_S)} s",
                hint="check that the host and port are those of a PostgreSQL server that is up; "
                "a slow network can wait longer with ?connect_timeout=SECONDS in the URL",
            ) from None
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(
            f"cannot open storage {without_password(url)}: {first}",
            hint="check the URL (dialect://user:password@host:port/database), that the server is up "
            "and that the database exists",
        ) from err


def _connect_args(url: str) -> dict[str, Any]:
    """The PostgreSQL connection's time limits, unless the URL sets its own (`?connect_timeout=30`): libpq's
    `connect_timeout` bounds the connection, the server's `statement_timeout` each statement, so that a server
    that accepts and never answers (or a lock held by a stuck worker) holds no worker forever."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    limits = {"connect_timeout": CONNECT_TIMEOUT_S, "options": f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000}"}
    postgres = parsed.get_backend_name() == "postgresql"
    return {key: value for key, value in limits.items() if postgres and key not in parsed.query}


def _server(url: str) -> str:
    """HOST:PORT of a database URL, for messages (PostgreSQL's default port when none is given)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}"


@dataclass(frozen=True)
class GrpcAddress:
    """Where an Optuna gRPC storage proxy listens, and how long a client waits for its answer."""

    host: str  # an IPv6 address in brackets, as a gRPC target wants it (`::1:13000` is no address): `[::1]`
    port: int
    connect_timeout: float = CONNECT_TIMEOUT_S

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def grpc_address(url: str) -> GrpcAddress:
    """`grpc://HOST:PORT[?connect_timeout=SECONDS]` parsed; a UserError for anything else."""
    try:  # urlsplit: a ValueError for an unclosed '[', and its port for a port that is no number
        parts = urlsplit(url)
        if not parts.hostname or parts.port is None or parts.path not in ("", "/") or parts.username or parts.fragment:
            raise ValueError(url)
    except ValueError:
        raise UserError(
            f"storage {without_password(url)}: not a gRPC proxy address",
            hint="write grpc://HOST:PORT (the --host and --port of `archdsl study serve`), e.g. grpc://127.0.0.1:13000",
        ) from None
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"connect_timeout"})
    if unknown:
        raise UserError(
            f"storage {url}: unknown option {unknown[0]!r}", hint="the only option is ?connect_timeout=SECONDS"
        )
    try:
        timeout = float(query.get("connect_timeout", [CONNECT_TIMEOUT_S])[-1])
    except ValueError:
        timeout = -1.0
    if not 0 < timeout <= MAX_CONNECT_TIMEOUT_S:  # gRPC's wait overflows a time_t long before inf
        raise UserError(
            f"storage {url}: connect_timeout must be a number of seconds between 0 and {MAX_CONNECT_TIMEOUT_S}"
        )
    return GrpcAddress(f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname, parts.port, timeout)


def _grpc_storage(address: GrpcAddress) -> optuna.storages.BaseStorage:
    """A client of the proxy at `address`, once the proxy has answered one call within the URL's connect timeout
    (Optuna's own calls wait as long as it takes); else a UserError that says what answered, read from gRPC's
    status and its readiness (whether the HTTP/2 handshake was made)."""
    require_grpc(f"storage grpc://{address}: the gRPC client")
    import grpc
    from optuna.storages import GrpcStorageProxy

    from archdsl.search._optuna_private import ask_grpc_storage

    deadline = time.monotonic() + address.connect_timeout
    with grpc.insecure_channel(str(address)) as channel:
        handshake = grpc.channel_ready_future(channel)  # done once the channel is READY: an HTTP/2 server answered
        try:
            try:
                ask_grpc_storage(channel, address.connect_timeout)
            except grpc.RpcError as err:
                if _what_answered(address, err) is not None or time.monotonic() >= deadline:
                    raise
                # Nothing met yet (a name that does not resolve, no route): wait for the proxy until the timeout.
                ask_grpc_storage(channel, max(deadline - time.monotonic(), 0.1), wait_for_ready=True)
        except grpc.RpcError as err:
            what = _what_answered(address, err, handshake.done())
            no_answer = f"no answer from {address} within {address.connect_timeout:g} s"
            wait = "" if what else "; a slow network can wait longer with ?connect_timeout=SECONDS"
            raise UserError(
                f"cannot open storage grpc://{address}: {what or no_answer}",
                hint="start the proxy there (`archdsl study serve --storage URL --host HOST --port PORT`) and check "
                f"the host and port{wait}",
            ) from None
        except KeyboardInterrupt:
            raise KeyboardInterrupt(f"while connecting to {address}") from None
        finally:
            handshake.cancel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # Optuna marks the proxy experimental
        return GrpcStorageProxy(host=address.host, port=address.port)


def require_grpc(what: str) -> None:
    """A UserError, `WHAT (the missing module) is not installed`, unless gRPC and the protobuf its messages
    need import (Optuna imports them lazily: a missing one would fail at the first call)."""
    # gRPC's C core logs what it meets (a GOAWAY, a failed bind) on stderr, raw: archdsl's messages say it
    # once. Read when gRPC starts, so set before its first import.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        import grpc  # noqa: F401
        from google import protobuf  # noqa: F401
    except ImportError as err:
        name = err.name or "grpcio"
        raise UserError(f"{what} ({name!r}) is not installed", hint=install_extra("distributed")) from None


# What the details of gRPC's UNAVAILABLE say the connection met, and what that says answered (the first that
# matches; HTTP/1 before HTTP/2: gRPC's words for an HTTP/1 answer hold both). None: no server met yet.
_ANSWERED = (
    ("Connection refused", "{address} refused the connection (nothing listens there)"),
    ("http1.x server", "an HTTP server answers at {address}, not a gRPC proxy"),
    ("Failed parsing HTTP/2", "something that is not a gRPC proxy answers at {address} (gRPC: {said})"),
    ("Socket closed", "{address} closed the connection at once (what listens there is not a gRPC proxy)"),
    ("Connection reset", "{address} closed the connection at once (what listens there is not a gRPC proxy)"),
    ("GOAWAY", "an HTTP/2 server at {address} turned the call away (gRPC: {said}): not a gRPC proxy"),
    ("resolv", None),  # a name that does not resolve (yet)
    ("unreachable", None),
    ("No route", None),
)


def _what_answered(address: GrpcAddress, err: Any, handshake: bool = False) -> str | None:
    """What a failed first call (`err`, a grpc.RpcError, which gRPC's unary calls raise as a grpc.Call) shows
    answered at `address`, from gRPC's status, the details of its UNAVAILABLE and whether the connection got past
    the HTTP/2 handshake (then something answers, and holds the call); None when no server was met (no name, no
    route, no answer in time)."""
    import grpc

    details = repr(err.details() or "")[1:-1]  # bytes from the network, escaped
    said = details.split(f":{address.port}: ")[-1]  # what the connection met, after the address
    if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        timed_out = f"an HTTP/2 server answers at {address}, but no gRPC call within {address.connect_timeout:g} s"
        return f"{timed_out} (not a gRPC proxy, or a stuck one)" if handshake else None
    if err.code() == grpc.StatusCode.UNIMPLEMENTED:
        return f"a gRPC server answers at {address}, but not Optuna's storage proxy (it does not know its calls)"
    found = (text for words, text in _ANSWERED if err.code() == grpc.StatusCode.UNAVAILABLE and words in details)
    template = next(found, "the first gRPC call to {address} failed ({code}: {said})")
    return template and template.format(address=address, said=said or "?", code=err.code().name)


@contextmanager
def proxy_answering(url: str | None) -> Iterator[None]:
    """Run the block; a gRPC proxy (`url` grpc://...) that stops answering in it (killed, its machine gone) ends
    it as a UserError naming the proxy, not as gRPC's traceback. Any other storage: the block as it is."""
    if url is None or not url.startswith(GRPC_SCHEME):
        yield
        return
    grpc_address(url)  # a bad address is the user's first mistake to hear about, whatever is installed
    try:
        yield
    except UserError:  # it says what is wrong already (a study the proxy does not hold: its NOT_FOUND in the chain)
        raise
    except Exception as err:
        # Optuna's call may meet the dead proxy inside its own error handling and fail there (its `_run_trial`
        # then raises an UnboundLocalError whose context is gRPC's error): any error that gRPC's caused is the
        # proxy's. gRPC never imported (none installed): no gRPC error.
        grpc = sys.modules.get("grpc")
        rpc = _rpc_error_in(err, grpc.RpcError) if grpc is not None else None
        if rpc is None:
            raise
        raise UserError(
            f"the gRPC proxy {url} stopped answering ({rpc.code().name.lower()}); "
            "the finished trials are kept in the storage behind it",
            hint="start the proxy again (`archdsl study serve`) and run the same command: the search goes on "
            "where it stopped",
        ) from None


def _rpc_error_in(err: BaseException, rpc_error: type[Exception]) -> Any:
    """The first `rpc_error` in `err`'s chain of causes (as a traceback shows them: not past `from None`), or None."""
    link: BaseException | None = err
    for _ in range(100):  # a chain is short; a bound, as a chain may loop
        if link is None or isinstance(link, rpc_error):
            return link
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return None


def _while_interruptible(work: Callable[[], T], doing: str) -> T:
    """`work()` in a helper thread, while this one waits where Ctrl-C reaches it.

    libpq waits for its server inside C code that retries when a signal interrupts it: Python's
    Ctrl-C handler would only run once the wait ended. Waiting on a thread instead, Ctrl-C ends
    the command at once (the helper thread dies with the process).
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as err:  # handed to the waiting thread
            outcome.append(err)

    helper = threading.Thread(target=run, daemon=True, name="archdsl-open-storage")
    helper.start()
    try:
        helper.join()
    except KeyboardInterrupt:
        raise KeyboardInterrupt(doing) from None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _rdb_storage(url: str, options: StorageOptions) -> RDBStorage:
    import sqlalchemy.exc

    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                # Optuna marks its heartbeat arguments experimental; they are what a shared study needs.
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(
                    url,
                    # pool_pre_ping: a pooled connection the server dropped (a restart, a failover, an
                    # idle reaper) is replaced before use instead of failing the worker's next call.
                    # Optuna sets it for MySQL only.
                    engine_kwargs={"connect_args": _connect_args(url), "pool_pre_ping": True},
                    heartbeat_interval=options.heartbeat_interval,
                    grace_period=options.grace_period,
                    heartbeat_stale_trial_callback=functools.partial(requeue, max_retry=options.max_retry),
                )
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            # Workers started together on an empty database race to create Optuna's tables:
            # the losers see a duplicate table or type; once the winner is done, opening works.
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def with_postgres_driver(url: str) -> str:
    """`postgresql://` (or `postgres://`) with the PostgreSQL driver that is installed: SQLAlchemy 2.1 maps a bare
    `postgresql://` to psycopg 3, while `archdsl[distributed]` installs psycopg2. `postgresql+DRIVER://` is kept."""
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres"):
        return url
    # Neither installed: psycopg2, reported as a missing driver with the hint.
    return f"postgresql+{'psycopg' if importlib.util.find_spec('psycopg') else 'psycopg2'}{sep}{rest}"


def without_password(url: str) -> str:
    """The URL with its password as `***` (SQLAlchemy's rendering), for messages and the study's command."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # not a URL SQLAlchemy reads (a bad port): keep what follows the credentials
        return url.rsplit("@", 1)[-1] if "@" in url else url


@dataclass
class WorkerHeartbeat:
    """Marks a running trial as ours (host, pid) and keeps its heartbeat fresh, as a context manager.

    Also on a storage with Optuna's heartbeat (a worker on PostgreSQL): workers through a gRPC proxy to the
    same database have none, and judge the trial by this beat alone (`fail_stale_trials`).
    """

    storage: optuna.storages.BaseStorage
    trial_id: int
    interval: float
    # A trial that ends in milliseconds (replayed from a table) needs only the first beat: no thread.
    keep_beating: bool = field(default=True, kw_only=True)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __enter__(self) -> WorkerHeartbeat:
        for key, value in ((HOST_ATTR, socket.gethostname()), (PID_ATTR, os.getpid()), (BEAT_ATTR, time.time())):
            self.storage.set_trial_system_attr(self.trial_id, key, value)
        if self.keep_beating:
            self._thread = threading.Thread(target=self._run, daemon=True, name="archdsl-heartbeat")
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.storage.set_trial_system_attr(self.trial_id, BEAT_ATTR, time.time())
            except Exception:  # the trial finished meanwhile: its attrs are frozen
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def fail_stale_trials(study: optuna.Study, options: StorageOptions) -> list[int]:
    """Fail (and re-queue) RUNNING trials whose worker is gone; returns their numbers.

    Optuna's `optuna.storages.fail_stale_trials` does this for RDB storages only (its heartbeat is RDBStorage's), by
    the beat's age alone; this covers the journal and the gRPC proxy, and a trial whose process is gone from this
    host is failed at once.
    """
    storage = storage_of(study)
    if heartbeat_enabled(storage):
        return []
    failed = []
    for trial in trials(study, states=(TrialState.RUNNING,)):
        attrs = trial.system_attrs
        if BEAT_ATTR not in attrs:
            continue  # just asked for, not claimed yet
        dead_here = attrs.get(HOST_ATTR) == socket.gethostname() and not _pid_alive(int(attrs.get(PID_ATTR, -1)))
        if not (dead_here or time.time() - float(attrs[BEAT_ATTR]) > options.grace_period):
            continue
        try:
            storage.set_trial_user_attr(trial_id(trial), FAIL_REASON_ATTR, f"{WORKER_STOPPED} (killed or lost)")
            if not storage.set_trial_state_values(trial_id(trial), TrialState.FAIL):
                continue  # another worker got there first
        except RuntimeError:
            continue  # finished meanwhile
        requeue(study, storage.get_trial(trial_id(trial)), options.max_retry)
        failed.append(trial.number)
    return failed


def requeue(study: optuna.Study, trial: FrozenTrial, max_retry: int) -> None:
    """Queue a fresh copy of a trial whose worker died (or that stopped the search) by Optuna's own retry callback
    (`failed_trial`, `retry_history`, at most `max_retry` retries), given the trial without the dead run's heartbeat
    and outcome attrs and with its parameters as `fixed_params` (the walk plans no other design for it). RDB
    storages call it from Optuna's heartbeat, so that a retry starts as clean there as on the journal."""
    fresh = copy.deepcopy(trial)  # Optuna's callback appends to the trial's own retry_history
    fresh.system_attrs = {k: v for k, v in fresh.system_attrs.items() if not k.startswith("archdsl:")} | {
        FIXED_PARAMS_ATTR: dict(trial.params)
    }
    fresh.user_attrs = {k: v for k, v in fresh.user_attrs.items() if k not in RUN_ATTRS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # Optuna marks the callback experimental
        RetryHeartbeatStaleTrialCallback(max_retry=max_retry)(study, fresh)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
