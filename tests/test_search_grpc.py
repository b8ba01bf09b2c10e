"""`--storage grpc://HOST:PORT` and `archdsl study serve`: Optuna's gRPC proxy in front of a study's
storage, on 127.0.0.1 only. Needs grpcio (the `distributed` extra): skipped without it."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import _search_support as support
import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.commands.study import serving_line
from archdsl.search import RunningProxy

POSTGRES_URL = os.environ.get("ARCHDSL_TEST_POSTGRES_URL")


@pytest.mark.parametrize(
    "url, message",
    [
        ("grpc://127.0.0.1", "not a gRPC proxy address"),
        ("grpc://127.0.0.1:port", "not a gRPC proxy address"),
        ("grpc://127.0.0.1:13000/db", "not a gRPC proxy address"),
        ("grpc://127.0.0.1:13000?timeout=3", "unknown option 'timeout'"),
        ("grpc://127.0.0.1:13000?connect_timeout=-1", "connect_timeout must be a number of seconds between 0"),
        ("grpc://[::1:13000", "not a gRPC proxy address"),  # urlsplit: 'Invalid IPv6 URL'
    ],
)
@pytest.mark.parametrize("grpc_installed", [True, False])
def test_a_bad_grpc_address_is_a_clear_error_before_any_connection(
    tmp_path, capsys, monkeypatch, url, message, grpc_installed
):
    # The README's install has no grpcio: the address is still checked first, and nothing imports gRPC.
    if not grpc_installed:
        monkeypatch.setitem(sys.modules, "grpc", None)
    assert main(["report", "s", "--storage", url, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_grpc_storage_without_grpcio_asks_for_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "grpc", None)  # as in the README's install, which has no grpcio
    assert main(["report", "s", "--storage", "grpc://127.0.0.1:13000", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "the gRPC client" in err and "not installed" in err and "distributed" in err and "Traceback" not in err


def test_an_ipv6_proxy_address_keeps_its_brackets():
    """`[::1]:13000` is the address a gRPC channel takes; `::1:13000` is not one."""
    from archdsl.search.studies.storage import grpc_address

    address = grpc_address("grpc://[::1]:13000")
    assert (address.host, address.port, str(address)) == ("[::1]", 13000, "[::1]:13000")
    assert str(grpc_address("grpc://127.0.0.1:13000")) == "127.0.0.1:13000"


def needs_grpc(test):
    """Marked as the `distributed` extra's tests are, and skipped without grpcio (a [dev]-only install)."""
    missing = importlib.util.find_spec("grpc") is None
    return pytest.mark.distributed(
        pytest.mark.skipif(missing, reason="grpcio is not installed (the `distributed` extra)")(test)
    )


def _serve(storage: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """`archdsl study serve` on a free port of 127.0.0.1; the server and its grpc:// URL."""
    server = support.spawn(["study", "serve", "--storage", storage, "--host", "127.0.0.1", "--port", "0", *extra])
    line = support.read_line(server)  # printed once it listens
    found = re.search(r"at (grpc://127\.0\.0\.1:\d+)", line)
    if found is None:
        server.kill()
        raise AssertionError(f"no address in {line!r}{server.communicate()[0]}")
    return server, found.group(1)


def _stop(server: subprocess.Popen) -> str:
    server.terminate()  # SIGTERM: how SLURM and Kubernetes stop it
    output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output
    return output


@needs_grpc
def test_a_search_through_the_proxy_writes_its_trials_into_the_journal_behind_it(tmp_path):
    journal = tmp_path / "shared.journal"
    server, url = _serve(f"journal:{journal}")
    try:
        args = support.search_args(
            tmp_path, "via-grpc", "--strategy", "random", "--objectives", "params", "--n-trials", "3", "--storage", url
        )
        assert main(args) == 0
        assert main(["report", "via-grpc", "--storage", url, "--out", str(tmp_path / "runs")]) == 0
    finally:
        assert "stopped" in _stop(server)
    # The journal itself, read without the proxy, has every trial.
    study = optuna.load_study(study_name="via-grpc", storage=JournalStorage(JournalFileBackend(str(journal))))
    measured = [t for t in study.trials if "copy_of" not in t.user_attrs]
    assert len(measured) == 3 and all(t.state == TrialState.COMPLETE for t in measured)
    assert (tmp_path / "runs" / "via-grpc" / "report" / "report.md").exists()


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_proxy_on_every_interface_names_this_machine_for_the_workers(wildcard):
    """grpc://0.0.0.0:PORT is no address a worker on another machine can give: the line says which is.
    (Described, not started: the tests listen on loopback only.)"""
    proxy = RunningProxy(server=None, backend="journal:j", host=wildcard, port=4242)
    assert proxy.every_interface and proxy.url == f"grpc://{socket.gethostname()}:4242"
    line = serving_line(proxy)
    assert f"on {'[::]' if wildcard == '::' else wildcard}:4242 (every interface)" in line
    assert f"workers give --storage grpc://{socket.gethostname()}:4242 " in line
    loopback = RunningProxy(server=None, backend="journal:j", host="::1", port=4242)
    assert not loopback.every_interface
    assert serving_line(loopback) == "serving journal:j at grpc://[::1]:4242 (Ctrl-C stops)"


@needs_grpc
def test_a_refused_connection_is_said_at_once(tmp_path, capsys):
    with socket.socket() as free:  # a port nobody listens on: the system refuses the connection
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"grpc://127.0.0.1:{port}?connect_timeout=600"  # a refusal does not wait for the timeout
    assert main(support.search_args(tmp_path, "s", "--storage", url)) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port} refused the connection" in err and "archdsl study serve" in err
    assert "no answer" not in err and "Traceback" not in err and not (tmp_path / "runs").exists()


@needs_grpc
def test_a_listener_that_never_answers_fails_within_the_urls_timeout(tmp_path, capsys):
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never speaks gRPC
        port = silent.getsockname()[1]
        url = f"grpc://127.0.0.1:{port}?connect_timeout=1"
        assert main(support.search_args(tmp_path, "s", "--storage", url)) == 1
    err = capsys.readouterr().err
    assert f"no answer from 127.0.0.1:{port} within 1 s" in err and "archdsl study serve" in err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


@contextmanager
def _listener(answer: Callable[[socket.socket], None], *, threaded: bool = False) -> Iterator[int]:
    """A listener on 127.0.0.1 (its port) that treats each connection with `answer`, until the block ends; with
    `threaded`, each connection in a thread of its own (gRPC's client connects again while one is held)."""
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.1)  # accept wakes up to see `stop`
        connections: list[socket.socket] = []

        def serve() -> None:
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except TimeoutError:
                    continue
                connections.append(connection)
                if threaded:
                    connection.settimeout(60)
                    threading.Thread(target=answer, args=(connection,), daemon=True).start()
                else:
                    connection.settimeout(5)
                    answer(connection)
                    connection.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            stop.set()
            thread.join(timeout=10)
            for connection in connections:
                connection.close()


@contextmanager
def _http_server() -> Iterator[int]:
    """Python's own HTTP server: to the HTTP/2 preface it answers a bare HTML error page, with no status line."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *args: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _reads_then(reply: bytes) -> Callable[[socket.socket], None]:
    def answer(connection: socket.socket) -> None:
        connection.recv(1024)
        connection.sendall(reply)

    return answer


def _closes_at_once(connection: socket.socket) -> None:
    pass


@pytest.mark.parametrize(
    "listener, said",
    [
        # Python's server sends an HTML page with no status line: gRPC names no HTTP/1 then, but no HTTP/2 either.
        (_http_server, "something that is not a gRPC proxy answers at {address} (gRPC: Failed parsing HTTP/2"),
        (
            lambda: _listener(_reads_then(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")),
            "an HTTP server answers at {address}, not a gRPC proxy",
        ),
        (
            lambda: _listener(_reads_then(b"\x00\xffgarbage\x1b[31m")),
            "something that is not a gRPC proxy answers at {address} (gRPC: Failed parsing HTTP/2",
        ),
        (
            lambda: _listener(_closes_at_once),
            "{address} closed the connection at once (what listens there is not a gRPC proxy)",
        ),
    ],
    ids=["http-server", "http-status-line", "garbage", "closes-at-once"],
)
@needs_grpc
def test_a_listener_that_is_no_grpc_proxy_is_named_at_once(tmp_path, capsys, listener, said):
    """Not "no answer" after the timeout: what answered, as soon as it has (the timeout is long enough that
    a wait for it would be the old behaviour, short enough that a failing test ends)."""
    with listener() as port:
        address = f"127.0.0.1:{port}"
        url = f"grpc://{address}?connect_timeout=5"
        assert main(support.search_args(tmp_path, "s", "--storage", url)) == 1
    err = capsys.readouterr().err
    assert f"cannot open storage grpc://{address}: {said.format(address=address)}" in err, err
    assert "no answer" not in err and "Traceback" not in err and "\x1b" not in err, err
    assert not (tmp_path / "runs").exists()


@needs_grpc
def test_a_grpc_server_without_optunas_storage_service_is_named_at_once(tmp_path, capsys):
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    server = grpc.server(ThreadPoolExecutor(max_workers=1))  # no service: it answers every call UNIMPLEMENTED
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        url = f"grpc://127.0.0.1:{port}?connect_timeout=30"
        assert main(["report", "s", "--storage", url, "--out", str(tmp_path)]) == 1
    finally:
        server.stop(None)
    err = capsys.readouterr().err
    assert f"a gRPC server answers at 127.0.0.1:{port}, but not Optuna's storage proxy" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err


@pytest.mark.parametrize("timeout", ["1e12", "1e400", "nan"])
def test_a_connect_timeout_out_of_range_is_refused(tmp_path, capsys, timeout):
    url = f"grpc://127.0.0.1:1?connect_timeout={timeout}"
    assert main(support.search_args(tmp_path, "s", "--storage", url)) == 1
    err = capsys.readouterr().err
    assert "connect_timeout must be a number of seconds between 0 and 86400" in err and "Traceback" not in err


@needs_grpc
def test_a_proxy_killed_mid_search_is_named_and_the_finished_trials_are_kept(tmp_path):
    journal = tmp_path / "shared.journal"
    server, url = _serve(f"journal:{journal}")
    args = support.search_args(tmp_path, "s", "--strategy", "random", "--n-trials", "40", "--storage", url)
    search = support.spawn(args)
    try:
        line = "-"
        while line and "trial" not in line:  # the first trial's line: it is in the journal
            line = support.read_line(search)
    finally:
        server.kill()
        server.communicate()
    output, _ = search.communicate(timeout=120)
    assert search.returncode == 1, output
    assert "Traceback" not in output and "_InactiveRpcError" not in output, output
    assert f"the gRPC proxy {url} stopped answering" in output and "finished trials are kept" in output
    study = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(journal))))
    assert any(t.state == TrialState.COMPLETE for t in study.trials)


@needs_grpc
def test_serve_refuses_a_port_in_use(tmp_path, capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["study", "serve", "--storage", f"journal:{tmp_path / 's.journal'}", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in err and "Traceback" not in err


@needs_grpc
def test_a_second_proxy_on_the_same_port_is_refused_not_shared(tmp_path):
    # gRPC servers set SO_REUSEPORT by default: without archdsl's option both would listen.
    server, url = _serve(f"journal:{tmp_path / 'a.journal'}")
    try:
        port = url.rsplit(":", 1)[1]
        second = support.spawn(["study", "serve", "--storage", f"journal:{tmp_path / 'b.journal'}", "--port", port])
        output, _ = second.communicate(timeout=60)
        assert second.returncode == 1 and "the port is in use" in output, output
    finally:
        _stop(server)


@pytest.mark.parametrize(
    "storage, message",
    [
        ("nosuchdialect://localhost/db", "cannot open storage"),
        ("runs/study.db", "is not a URL"),
        ("grpc://127.0.0.1:13000", "it is a proxy already"),
        ("postgresql://u:secret@127.0.0.1:1/db", "cannot open storage"),
    ],
)
@needs_grpc
def test_serve_refuses_a_bad_backend_before_listening(tmp_path, capsys, storage, message):
    assert main(["study", "serve", "--storage", storage, "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "secret" not in err


@needs_grpc
def test_serve_refuses_a_one_line_file_that_is_no_journal(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes")  # no newline: Optuna's reader skips it, and would serve an empty study
    server = support.spawn(["study", "serve", "--storage", f"journal:{notes}", "--port", "0"])
    try:
        output, _ = server.communicate(timeout=60)  # a server that serves it does not end
    except subprocess.TimeoutExpired:
        server.kill()
        output = server.communicate()[0]
    assert server.returncode == 1, output
    assert f"{notes} is not an Optuna journal file" in output and "Traceback" not in output
    assert notes.read_text() == "some notes"


@needs_grpc
def test_serve_refuses_a_host_that_does_not_resolve(capsys, tmp_path, monkeypatch):
    resolve = socket.getaddrinfo

    def no_such_host(host, *args, **kwargs):  # no DNS query leaves the machine
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    args = ["study", "serve", "--storage", f"journal:{tmp_path / 's.journal'}", "--host", "no-such-host.invalid"]
    assert main([*args, "--port", "0"]) == 1
    assert "cannot listen on no-such-host.invalid:0" in capsys.readouterr().err


@needs_grpc
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database to run this")
def test_two_workers_share_a_postgresql_study_through_the_proxy(tmp_path):
    from test_search_storage import _check_shared_study, _run_two_workers

    from archdsl.search.studies.storage import StorageOptions, open_storage

    study_name = f"grpc-{uuid.uuid4().hex[:10]}"
    server, url = _serve(POSTGRES_URL)
    try:
        args = support.search_args(tmp_path, study_name, "--strategy", "random", "--n-trials", "4", "--storage", url)
        _run_two_workers(args)
        _check_shared_study(support.load(tmp_path, study_name, POSTGRES_URL), 4)
    finally:
        _stop(server)
        optuna.delete_study(
            study_name=study_name, storage=open_storage(StorageOptions(url=POSTGRES_URL), tmp_path, "x")
        )


@needs_grpc
def test_a_proxy_killed_while_report_reads_is_named_not_a_traceback(tmp_path, capsys, monkeypatch):
    journal = tmp_path / "shared.journal"
    args = support.search_args(
        tmp_path,
        "s",
        "--strategy",
        "random",
        "--objectives",
        "params",
        "--n-trials",
        "2",
        "--storage",
        f"journal:{journal}",
    )
    assert main(args) == 0
    server, url = _serve(f"journal:{journal}")
    import archdsl.search

    summarize = archdsl.search.summarize_study

    def proxy_dies_first(study):  # the study is open through the proxy; then its machine goes away
        server.kill()
        server.communicate()
        return summarize(study)

    monkeypatch.setattr(archdsl.search, "summarize_study", proxy_dies_first)
    capsys.readouterr()
    try:
        status = main(["report", "s", "--storage", url, "--out", str(tmp_path / "runs"), "--csv"])
    finally:
        server.kill()
    err = capsys.readouterr().err
    assert status == 1 and f"the gRPC proxy {url} stopped answering" in err and "Traceback" not in err, err


@needs_grpc
def test_a_proxy_killed_while_a_trial_is_told_is_named_not_optunas_unbound_local(tmp_path, capsys, monkeypatch):
    """The proxy dies between a trial's objective and Optuna's `tell`: Optuna's clean-up asks the dead proxy
    again and its `finally` then fails on a variable it never set (UnboundLocalError, the RpcError only its
    context). It is still the dead proxy's one line, and the finished trials stay in the journal."""
    import archdsl.search.runner as runner

    journal = tmp_path / "shared.journal"
    server, url = _serve(f"journal:{journal}")
    make_objective = runner.make_objective
    trials = []

    def proxy_dies_after_the_second_objective(plan):
        objective = make_objective(plan)

        def measured(trial):
            value = objective(trial)
            trials.append(trial.number)
            if len(trials) == 2:  # the first trial is told and kept; the proxy goes before the second's tell
                server.kill()
                server.communicate()
            return value

        return measured

    monkeypatch.setattr(runner, "make_objective", proxy_dies_after_the_second_objective)
    args = support.search_args(
        tmp_path, "s", "--strategy", "random", "--objectives", "params", "--n-trials", "5", "--storage", url
    )
    try:
        status = main(args)
    finally:
        server.kill()
    err = capsys.readouterr().err
    assert status == 1 and f"the gRPC proxy {url} stopped answering" in err, err
    assert "Traceback" not in err and "UnboundLocalError" not in err and "updated_state" not in err, err
    study = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(journal))))
    assert [t.state for t in study.trials if t.number == trials[0]] == [TrialState.COMPLETE]
    assert [t.state for t in study.trials if t.number == trials[1]] == [TrialState.RUNNING]  # never told

    # As docs/storage.md says: the proxy started again, the same command goes on. The untold trial's worker is
    # gone (here: its process, as a worker's that ended), so it is failed and its design measured again.
    import archdsl.search.studies.storage as storage

    monkeypatch.setattr(runner, "make_objective", make_objective)
    monkeypatch.setattr(storage, "_pid_alive", lambda pid: False)
    server, url = _serve(f"journal:{journal}")
    try:
        assert main([url if arg.startswith("grpc://") else arg for arg in args]) == 0
    finally:
        _stop(server)
    study = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(journal))))
    assert [t.state for t in study.trials if t.number == trials[0]] == [TrialState.COMPLETE]
    assert [t.state for t in study.trials if t.number == trials[1]] == [TrialState.FAIL]
    retried = study.trials[trials[1]].params
    assert [t.state for t in study.trials if t.number > trials[1] and t.params == retried][:1] == [TrialState.COMPLETE]
    assert not [t.number for t in study.trials if t.state == TrialState.RUNNING]


@needs_grpc
def test_a_study_the_proxy_does_not_hold_is_named_not_a_dead_proxy(tmp_path, capsys):
    """The proxy answers "not found" for a name it does not hold: that is no proxy that stopped answering."""
    server, url = _serve(f"journal:{tmp_path / 'shared.journal'}")
    try:
        status = main(["report", "nosuchstudy", "--storage", url, "--out", str(tmp_path / "runs")])
    finally:
        _stop(server)
    err = capsys.readouterr().err
    assert status == 1 and "no study named 'nosuchstudy' in this storage" in err, err
    assert "stopped answering" not in err and "Traceback" not in err


_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # an empty SETTINGS frame: the server's half of the handshake
_SETTINGS_ACK = bytes([0, 0, 0, 4, 1, 0, 0, 0, 0])


def _goaway(code: int, debug: bytes = b"") -> bytes:
    payload = (0).to_bytes(4, "big") + code.to_bytes(4, "big") + debug
    return len(payload).to_bytes(3, "big") + bytes([7, 0, 0, 0, 0, 0]) + payload


def _handshakes_then(after: bytes, *, on_the_call: bool = False) -> Callable[[socket.socket], None]:
    """An HTTP/2 server's handshake (its SETTINGS, and the ack of the client's), then `after` (with `on_the_call`:
    once the client has opened the call's stream), then nothing until the client goes (a listener that holds
    every call)."""

    def answer(connection: socket.socket) -> None:
        received = connection.recv(1024)
        connection.sendall(_SETTINGS + _SETTINGS_ACK + (b"" if on_the_call else after))
        try:
            while on_the_call and not _holds_headers(received):
                received += connection.recv(65536)
            connection.sendall(after if on_the_call else b"")
            while connection.recv(65536):
                pass
        except OSError:
            pass

    return answer


def _holds_headers(received: bytes) -> bool:
    """Whether the client's bytes (its preface, then frames) hold a HEADERS frame: a call's stream opened."""
    at = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    while at + 9 <= len(received):
        if received[at + 3] == 1:  # the frame type HEADERS
            return True
        at += 9 + int.from_bytes(received[at : at + 3], "big")
    return False


@pytest.mark.parametrize(
    "answer, said",
    [
        (
            _handshakes_then(b""),
            "an HTTP/2 server answers at {address}, but no gRPC call within 2 s (not a gRPC proxy, or a stuck one)",
        ),
        (  # turned away before any call: gRPC connects again and again, and the call waits its time
            _handshakes_then(_goaway(0)),
            "an HTTP/2 server answers at {address}, but no gRPC call within 2 s (not a gRPC proxy, or a stuck one)",
        ),
        (
            _handshakes_then(_goaway(0), on_the_call=True),
            "an HTTP/2 server at {address} turned the call away (gRPC: Stream removed (GOAWAY received; Error code: 0",
        ),
        (
            _handshakes_then(_goaway(11, b"calm down\x1b[31m"), on_the_call=True),
            "an HTTP/2 server at {address} turned the call away (gRPC: Stream removed (GOAWAY received; Error code: "
            "11; Debug Text: calm down\\x1b[31m)): not a gRPC proxy",
        ),
    ],
    ids=["silent-after-handshake", "goaway-before-the-call", "goaway", "goaway-with-debug-data"],
)
@pytest.mark.parametrize("command", ["search", "report"])
@needs_grpc
def test_an_http2_listener_that_never_answers_a_call_is_named_within_the_connect_timeout(
    tmp_path, answer, said, command
):
    """It completes the HTTP/2 handshake, then holds every call (or turns the connection away): the wait is the
    URL's connect timeout, and one line says what answered (it used to hang until killed, then gRPC's traceback)."""
    with _listener(answer, threaded=True) as port:
        address = f"127.0.0.1:{port}"
        url = f"grpc://{address}?connect_timeout=2"
        argv = support.search_args(tmp_path, "s", "--storage", url) if command == "search" else ["report", "s"]
        if command == "report":
            argv += ["--storage", url, "--out", str(tmp_path / "runs")]
        process = support.spawn(argv)  # a process of its own: one that hangs is killed, and the test fails
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            output = process.communicate()[0]
    assert process.returncode == 1, output
    assert f"cannot open storage grpc://{address}: {said.format(address=address)}" in output, output
    assert "Traceback" not in output and "\x1b" not in output and len(output.strip().splitlines()) <= 3, output
    assert not (tmp_path / "runs").exists()


@needs_grpc
def test_a_proxy_that_dies_while_the_search_opens_its_study_is_named_not_grpcs_traceback(tmp_path, capsys, monkeypatch):
    import archdsl.search.runner as runner

    server, url = _serve(f"journal:{tmp_path / 'shared.journal'}")
    open_storage = runner.open_storage

    def dies_once_connected(*args, **kwargs):  # the proxy answered its first call; then its machine goes away
        storage = open_storage(*args, **kwargs)
        server.kill()
        server.communicate()
        return storage

    monkeypatch.setattr(runner, "open_storage", dies_once_connected)
    try:
        status = main(support.search_args(tmp_path, "s", "--storage", url))
    finally:
        server.kill()
    err = capsys.readouterr().err
    assert status == 1 and f"the gRPC proxy {url} stopped answering" in err, err
    assert "Traceback" not in err and "_InactiveRpcError" not in err
