"""The study's storage under many workers: trials per second, errors, lost and duplicated trials.

Light workers (processes forked from this one) run a trivial objective that sleeps a few
milliseconds, so that the storage, not training, sets the pace. Each worker opens the storage
through archdsl's own `open_storage` (the code `archdsl search` runs), asks for a trial, sets
a token naming it (worker, index), sleeps, and tells the result; a failed storage call is
retried (every 0.2 s for up to 60 s) and counted as an error. After a cell the study is read
back from the backend itself:

- lost: a trial a worker was told was stored (its `tell` returned) that is not COMPLETE;
- duplicated: a token stored COMPLETE more than once;
- orphans: trials left RUNNING or FAIL (an `ask` whose answer never reached its worker);
- restart: with `--restart`, the server behind the storage (PostgreSQL, or the gRPC proxy in
  front of a journal) is restarted once half of the cell's trials are stored.

Backends: `journal` (a file, `--storage journal:PATH`), `postgresql` (a private server this
script starts in a temporary folder, as .ci/run does: `initdb` + `pg_ctl`, as the postgres user
when run as root), `grpc-postgresql` and `grpc-journal` (`archdsl study serve` in front of
them, `--storage grpc://127.0.0.1:PORT`).

Usage: benchmarks/storage_load.py [--workers 4,16,64] [--trials 200] [--sleep-ms 5]
       [--backends journal,postgresql,grpc-postgresql,grpc-journal] [--restart] [--json FILE] [--quick]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import optuna

from archdsl.search.studies.storage import StorageOptions, open_storage

BACKENDS = ("journal", "postgresql", "grpc-postgresql", "grpc-journal")
STUDY = "load"
RETRY_FOR_S = 60.0  # a worker gives a storage call this long to succeed again (a restart takes seconds)
T = TypeVar("T")


@dataclass
class Cell:
    backend: str
    workers: int
    trials: int  # asked for: workers x per-worker share
    stored: int  # acknowledged by the storage to a worker
    seconds: float
    trials_per_s: float
    errors: int  # storage calls that failed and were retried
    gave_up: int  # workers that stopped: a call failed for RETRY_FOR_S
    lost: int
    duplicated: int
    orphans: int
    restart: str  # "" (none), or what was restarted and how long it took


# -- the servers -------------------------------------------------------------------------


def _as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL's server tools refuse to run as root: as the postgres user, as .ci/run does."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PrivatePostgres:
    """A throw-away PostgreSQL server in a temporary folder, on 127.0.0.1 (what .ci/run's
    start_private_server does), which the benchmark can restart."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.dir = Path(tempfile.mkdtemp(prefix="archdsl-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self.data = self.dir / "data"

    def start(self) -> None:
        subprocess.run(
            _as_postgres(["initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self._ctl("start")
        subprocess.run(
            _as_postgres(["createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "load"]), check=True
        )

    def _ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=400"
        cmd = ["pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "-m", "fast", action]
        subprocess.run(_as_postgres(cmd), check=True, stdout=subprocess.DEVNULL)

    def restart(self) -> None:
        self._ctl("restart")

    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/load"

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("stop")
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """`archdsl study serve` in front of a storage, on a free port of 127.0.0.1."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "archdsl",
            "study",
            "serve",
            "--storage",
            self.backend,
            "--port",
            str(self.port),
            "--threads",
            "32",
        ]
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        found = re.search(r"grpc://127\.0\.0\.1:(\d+)", line)
        if found is None:
            raise RuntimeError(f"the proxy did not start: {line}")
        self.port = int(found.group(1))  # the same port again on a restart

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.communicate(timeout=30)

    def url(self) -> str:
        return f"grpc://127.0.0.1:{self.port}?connect_timeout=30"


# -- the workers -------------------------------------------------------------------------


def _retrying(call: Callable[[], T], errors: Any) -> T:
    deadline = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return call()
        except Exception:
            with errors.get_lock():
                errors.value += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _tell(study: optuna.Study, storage: Any, trial: optuna.Trial, value: float, errors: Any) -> None:
    """`study.tell`, retried; a tell that was stored but whose answer was lost counts as done."""

    def once() -> None:
        try:
            study.tell(trial, value)
        except Exception:
            stored = storage.get_trial(trial._trial_id)  # did the failed call get through?
            if stored.state != optuna.trial.TrialState.COMPLETE:
                raise

    _retrying(once, errors)


def _worker(url: str, index: int, share: int, sleep_s: float, go: Any, stored: Any, errors: Any, out: Any) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")  # Optuna's "heartbeat is meant for Study.optimize": ask/tell is the point here
    tokens: list[str] = []
    try:
        storage = _retrying(lambda: open_storage(StorageOptions(url=url), Path("."), STUDY), errors)
        study = _retrying(lambda: optuna.create_study(storage=storage, study_name=STUDY, load_if_exists=True), errors)
        go.wait()
        for i in range(share):
            trial = _retrying(study.ask, errors)
            x = _retrying(lambda: trial.suggest_float("x", 0.0, 1.0), errors)  # noqa: B023 (called at once)
            token = f"{index}-{i}"
            _retrying(lambda: trial.set_user_attr("token", token), errors)  # noqa: B023 (called at once)
            time.sleep(sleep_s)
            _tell(study, storage, trial, x, errors)
            tokens.append(token)
            with stored.get_lock():
                stored.value += 1
        out.put((index, tokens, ""))
    except Exception as err:  # gave up: RETRY_FOR_S of failures
        out.put((index, tokens, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"))


def run_cell(
    backend: str,
    url: str,
    direct_url: str,
    workers: int,
    trials: int,
    sleep_ms: float,
    restart: Callable[[], None] | None,
    restart_name: str,
) -> Cell:
    share = max(1, trials // workers)
    ctx = mp.get_context("fork")  # fast starts; the parent holds no connection at this point
    go, stored, errors, out = ctx.Event(), ctx.Value("i", 0), ctx.Value("i", 0), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, i, share, sleep_ms / 1000, go, stored, errors, out))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0 + workers * 0.05)  # let them open the storage (not timed)
    start = time.monotonic()
    go.set()
    restarted = ""
    results = []
    while len(results) < workers:
        if restart is not None and not restarted and stored.value >= share * workers // 2:
            began = time.monotonic()
            restart()
            restarted = f"{restart_name} ({time.monotonic() - began:.1f} s)"
        with contextlib.suppress(Exception):
            results.append(out.get(timeout=0.05))
    seconds = time.monotonic() - start
    for p in procs:
        p.join()
    for index, _, why in results:
        if why:
            print(f"{backend}: worker {index} gave up: {why}", file=sys.stderr)
    acked = [t for _, tokens, _ in results for t in tokens]
    # Read back from the backend itself, not through the proxy.
    storage = open_storage(StorageOptions(url=direct_url), Path("."), STUDY)
    trials_seen = optuna.load_study(study_name=STUDY, storage=storage).get_trials(deepcopy=False)
    if hasattr(storage, "engine"):
        storage.engine.dispose()  # no connection crosses the next cell's fork
    complete = collections.Counter(
        t.user_attrs.get("token") for t in trials_seen if t.state == optuna.trial.TrialState.COMPLETE
    )
    return Cell(
        backend=backend,
        workers=workers,
        trials=share * workers,
        stored=len(acked),
        seconds=round(seconds, 2),
        trials_per_s=round(len(acked) / seconds, 1),
        errors=errors.value,
        gave_up=sum(bool(why) for *_, why in results),
        lost=sum(1 for t in acked if complete[t] == 0),
        duplicated=sum(n - 1 for n in complete.values() if n > 1),
        orphans=sum(1 for t in trials_seen if t.state != optuna.trial.TrialState.COMPLETE),
        restart=restarted,
    )


@contextlib.contextmanager
def _backend(name: str, folder: Path, pg: PrivatePostgres | None) -> Iterator[tuple[str, str, Any, str]]:
    """(worker URL, direct URL, restart function or None, what a restart restarts) of a fresh study."""
    if name.endswith("journal"):
        journal = folder / f"{name}-{time.monotonic_ns()}.journal"
        direct = f"journal:{journal}"
    else:
        assert pg is not None
        direct = pg.url()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        storage = open_storage(StorageOptions(url=direct), folder, STUDY)
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=STUDY, storage=storage)
        storage.engine.dispose()  # no connection crosses the fork
    if name.startswith("grpc-"):
        proxy = Proxy(direct)
        proxy.start()
        try:
            restart, what = (pg.restart, "PostgreSQL") if pg and name == "grpc-postgresql" else (proxy.restart, "proxy")
            yield proxy.url(), direct, restart, what
        finally:
            proxy.stop()
    else:
        yield direct, direct, (pg.restart if pg else None), "PostgreSQL"


def markdown(cells: list[Cell]) -> str:
    head = "| storage | workers | trials | trials/s | errors (retried) | lost | duplicated | orphans | restart |"
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in cells:
        stopped = f", {c.gave_up} workers gave up" if c.gave_up else ""
        rows.append(
            f"| {c.backend} | {c.workers} | {c.stored}/{c.trials} | {c.trials_per_s} | {c.errors}{stopped} | "
            f"{c.lost} | {c.duplicated} | {c.orphans} | {c.restart or '-'} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="4,16,64")
    parser.add_argument("--trials", type=int, default=200, help="per cell (shared by its workers)")
    parser.add_argument("--sleep-ms", type=float, default=5.0, help="the objective's time")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--restart", action="store_true", help="also one cell per server-backed storage, restarted")
    parser.add_argument("--restart-workers", type=int, default=16)
    parser.add_argument("--pg-port", type=int, default=15488)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true", help="4 workers, 20 trials: checks the script runs")
    args = parser.parse_args(argv)
    workers = [4] if args.quick else [int(w) for w in args.workers.split(",")]
    trials = 20 if args.quick else args.trials
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backend(s) {sorted(unknown)}; choose from {BACKENDS}")
    cells: list[Cell] = []
    folder = Path(tempfile.mkdtemp(prefix="archdsl-load-"))
    pg = PrivatePostgres(args.pg_port) if any("postgresql" in b for b in backends) else None
    try:
        if pg:
            pg.start()
        plan = [(b, w, False) for b in backends for w in workers]
        if args.restart:
            plan += [(b, args.restart_workers, True) for b in backends if b != "journal"]
        for backend, n, restart in plan:
            with _backend(backend, folder, pg) as (url, direct, restart_fn, what):
                cell = run_cell(backend, url, direct, n, trials, args.sleep_ms, restart_fn if restart else None, what)
            cells.append(cell)
            print(markdown([cell]).splitlines()[-1], file=sys.stderr, flush=True)
    finally:
        if pg:
            pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(markdown(cells))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cells], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
