"""Optuna's gRPC storage proxy in front of a study's storage (`archdsl study serve`): Optuna's own server
(as `optuna.storages.run_grpc_proxy_server`), with a backend that cannot be opened, a port that is taken
(gRPC would share it silently through SO_REUSEPORT) or a host that does not resolve each a UserError.
"""

from __future__ import annotations

import errno
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archdsl.errors import UserError

if TYPE_CHECKING:
    import grpc

# Light at import (the command line reads the defaults below): Optuna and gRPC load in start_proxy.
DEFAULT_HOST = "127.0.0.1"  # the proxy has no authentication: other hosts only when asked (--host 0.0.0.0)
DEFAULT_PORT = 13000  # Optuna's default for run_grpc_proxy_server
DEFAULT_THREADS = 10  # Optuna's default: requests served at once


@dataclass
class RunningProxy:
    """A started proxy: stop it with `server.stop(grace)`, wait with `server.wait_for_termination()`."""

    server: grpc.Server
    backend: str  # the backend's URL, password hidden
    host: str  # the address it listens on, as given
    port: int  # the port really bound (for --port 0)

    @property
    def every_interface(self) -> bool:
        """Whether it listens on every interface (--host 0.0.0.0 or ::): no address a worker can give."""
        return self.host in ("0.0.0.0", "::", "")

    @property
    def listening(self) -> str:
        return f"{_bracketed(self.host)}:{self.port}"

    @property
    def url(self) -> str:
        """grpc://HOST:PORT for the workers. A worker on another machine cannot connect to 0.0.0.0:
        on every interface HOST is this machine's name (gethostname: no DNS lookup, which could
        hang on a machine without a resolver)."""
        from archdsl.search.studies.storage import GRPC_SCHEME

        reachable = socket.gethostname() if self.every_interface else self.host
        return f"{GRPC_SCHEME}{_bracketed(reachable)}:{self.port}"


def start_proxy(backend_url: str, host: str, port: int, threads: int = DEFAULT_THREADS) -> RunningProxy:
    """Open `backend_url` (journal:PATH or a database URL) and serve it on HOST:PORT (0: a free port)."""
    import optuna

    from archdsl.search.studies.storage import GRPC_SCHEME, StorageOptions, open_storage, require_grpc, without_password

    if backend_url.startswith(GRPC_SCHEME):
        raise UserError(
            f"cannot serve {backend_url}: it is a proxy already",
            hint="give the storage the proxy stands in front of: postgresql://... or journal:PATH",
        )
    require_grpc("cannot serve a storage: the gRPC server")  # (gRPC's own logs off: ours say it once)
    import grpc

    _check_bindable(host, port)
    # Optuna's client caches; its server wants the same for RDB storages (get_storage wraps them).
    storage = optuna.storages.get_storage(open_storage(StorageOptions(url=backend_url), Path("."), "unused"))
    from archdsl.search._optuna_private import add_grpc_storage_service

    server = grpc.server(ThreadPoolExecutor(max_workers=threads), options=[("grpc.so_reuseport", 0)])
    add_grpc_storage_service(server, storage)
    try:
        bound = server.add_insecure_port(f"{_bracketed(host)}:{port}")
    except RuntimeError as err:  # taken between the check and here
        raise UserError(f"cannot listen on {host}:{port}: {err}", hint="choose another --port") from None
    server.start()
    return RunningProxy(server=server, backend=without_password(backend_url), host=host, port=bound)


def _check_bindable(host: str, port: int) -> None:
    """A UserError naming why HOST:PORT cannot be listened on (gRPC only says "failed to bind")."""
    if not 0 <= port <= 65535:
        raise UserError(f"port {port} is out of range", hint="give --port between 1 and 65535 (0: a free one)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise UserError(
            f"cannot listen on {host}:{port}: {err.strerror}", hint="give --host an address of this machine"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT holds no port
        try:
            probe.bind(address)
        except OSError as err:
            hint = "choose another --port, or stop what listens there" if err.errno == errno.EADDRINUSE else None
            why = "the port is in use" if err.errno == errno.EADDRINUSE else err.strerror or str(err)
            raise UserError(f"cannot listen on {host}:{port}: {why}", hint=hint) from None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
