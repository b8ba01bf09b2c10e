"""`archdsl study repair JOURNAL`: recover the trials of a study journal with damaged lines;
`archdsl study serve --storage URL`: Optuna's gRPC proxy in front of a study's storage."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archdsl.commands._args import positive_int
from archdsl.commands._say import say
from archdsl.search import DEFAULT_PROXY_HOST, DEFAULT_PROXY_PORT, DEFAULT_PROXY_THREADS

if TYPE_CHECKING:
    from archdsl.search import RunningProxy

EXAMPLES = (
    "archdsl study repair runs/alter-small-base-synthetic-buildup/study.journal",
    "archdsl study serve --storage postgresql://user:pass@dbhost/db --host 0.0.0.0 --port 13000",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "study",
        help="repair a study journal with damaged lines, or serve a study's storage to many workers",
        description="Maintenance of a study's storage.",
    )
    actions = parser.add_subparsers(dest="study_command", metavar="ACTION", required=True)
    repair = actions.add_parser(
        "repair",
        help="recover every trial of a journal around its damaged lines (the original is kept as JOURNAL.damaged)",
        description=(
            "Rewrite a study journal that Optuna cannot read because of damaged lines (a partial write on a "
            "shared disk): a damaged change to a trial is dropped, a damaged trial creation is rebuilt so "
            "every trial keeps its number, and each damaged line is reported. The original is kept as "
            "JOURNAL.damaged. Stop the study's workers first."
        ),
    )
    repair.add_argument("journal", metavar="JOURNAL", help="the study's journal file (OUT/STUDY/study.journal)")
    repair.set_defaults(func=run)
    serve = actions.add_parser(
        "serve",
        help="serve a study's storage to many workers through Optuna's gRPC proxy (--storage grpc://HOST:PORT)",
        description=(
            "Start Optuna's gRPC storage proxy in front of --storage and serve until Ctrl-C or SIGTERM. "
            "Workers then use `--storage grpc://HOST:PORT` (search, report): the proxy holds the database "
            "connections and caches finished trials, so hundreds of workers do not each hold their own. "
            "The proxy has no authentication or encryption: serve on a trusted network only."
        ),
    )
    serve.add_argument(
        "--storage", metavar="URL", required=True, help="the storage to serve: postgresql://... or journal:PATH"
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_PROXY_HOST,
        help=f"address to listen on (default: {DEFAULT_PROXY_HOST}; 0.0.0.0: every interface)",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PROXY_PORT,
        help=f"port to listen on (default: {DEFAULT_PROXY_PORT}; 0: a free one, printed)",
    )
    serve.add_argument(
        "--threads",
        type=positive_int,
        default=DEFAULT_PROXY_THREADS,
        help=f"requests served at once (default: {DEFAULT_PROXY_THREADS})",
    )
    serve.set_defaults(func=run_serve)


def run(args: argparse.Namespace) -> int:
    from archdsl.search import repair_journal

    repair = repair_journal(args.journal)
    if not repair.actions:
        say(f"{repair.path}: no damaged line; nothing to repair")
        return 0
    for action in repair.actions:
        say(action)
    say(f"repaired {repair.path}: {repair.trials} trials readable; the original is kept as {repair.kept}")
    return 0


def serving_line(proxy: RunningProxy) -> str:
    """What `study serve` prints once it listens: what it serves, and the URL the workers give."""
    if proxy.every_interface:
        where = f"on {proxy.listening} (every interface); workers give --storage {proxy.url} or this machine's address"
    else:
        where = f"at {proxy.url}"
    return f"serving {proxy.backend} {where} (Ctrl-C stops)"


def run_serve(args: argparse.Namespace) -> int:
    import signal

    from archdsl.search import start_proxy

    proxy = start_proxy(args.storage, args.host, args.port, args.threads)
    signal.signal(signal.SIGTERM, lambda *_: proxy.server.stop(grace=5))  # how SLURM and Kubernetes stop it
    say(serving_line(proxy), flush=True)
    try:
        proxy.server.wait_for_termination()
    except KeyboardInterrupt:
        proxy.server.stop(grace=5)
    say("stopped", flush=True)
    return 0
