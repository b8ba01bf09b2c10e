"""Storage: clear errors, a killed worker's trial failed and retried, several workers at once."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import uuid

import _search_support as support
import optuna
import pytest
from optuna.trial import TrialState

from archdsl.cli import main
from archdsl.errors import UserError
from archdsl.search.studies.record import BEAT_ATTR, FAIL_REASON_ATTR
from archdsl.search.studies.storage import StorageOptions, open_storage

POSTGRES_URL = os.environ.get("ARCHDSL_TEST_POSTGRES_URL")


@pytest.mark.parametrize(
    "url, message",
    [
        ("runs/study.db", "is not a URL"),
        ("nosuchdialect://localhost/db", "cannot open storage"),
        ("mysql://user:secret@localhost/db", "driver"),
        pytest.param(
            "postgresql://user:secret@127.0.0.1:1/db",
            "cannot open storage",
            marks=pytest.mark.distributed,  # with the driver, the server's absence is reported
        ),
    ],
)
def test_a_bad_storage_url_is_a_clear_error(tmp_path, capsys, url, message):
    status = main(support.search_args(tmp_path, "bad", "--storage", url))
    err = capsys.readouterr().err
    assert status == 1
    assert message in err and "hint:" in err and "Traceback" not in err
    assert "secret" not in err  # passwords stay out of messages
    # Refused before the search's header line, and without leaving an empty --out behind.
    assert not err.startswith("search ") and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://user:secret@db.example:5432/studies", "postgresql://user:***@db.example:5432/studies"),
        ("postgresql://user:secret@db.example:port/studies", "db.example:port/studies"),  # SQLAlchemy cannot read it
        ("sqlite:///runs/study.db", "sqlite:///runs/study.db"),
    ],
)
def test_the_study_command_leaves_the_password_out(url, shown):
    from archdsl.search.plan import reproduce_command
    from archdsl.search.planning import plan_space
    from archdsl.search.settings import SearchSettings

    line = reproduce_command(plan_space(SearchSettings(study_name="s", storage=url)))
    assert "secret" not in line
    assert shlex.split(line)[shlex.split(line).index("--storage") + 1] == shown


def test_postgresql_without_its_driver_says_what_to_install(tmp_path, capsys, monkeypatch):
    # What a `[dev]`-only install sees (psycopg2 comes with the `distributed` extra).
    for module in ("psycopg2", "psycopg"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: import fails, find_spec is None
    status = main(support.search_args(tmp_path, "bad", "--storage", "postgresql://user:secret@127.0.0.1:1/db"))
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err and "secret" not in err
    assert "the database driver 'psycopg2' is not installed" in err and "archdsl[distributed]" in err
    assert "pip install -e '.[distributed]'" in err


def test_report_on_a_missing_study_says_where_it_looked(tmp_path, capsys):
    assert main(["report", "nosuch", "--out", str(tmp_path)]) == 1
    assert "no study 'nosuch'" in capsys.readouterr().err


def _wait_for(predicate, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"worker ended early:\n{proc.stdout.read()}")
        time.sleep(0.1)
    raise AssertionError("timed out")


def _storage_cases():
    journal = pytest.param(None, id="journal")
    postgres = pytest.param(
        POSTGRES_URL,
        id="postgresql",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(
                not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database to run this"
            ),
        ],
    )
    return [journal, postgres]


@pytest.mark.slow
@pytest.mark.parametrize("url", _storage_cases())
def test_a_killed_worker_loses_no_finished_trial_and_its_trial_is_retried(tmp_path, url):
    # Ten epochs per trial, and the kill after the second trial's first: nine epochs' time to land
    # while it runs (with three, a quiet machine finished the trial between the check and the kill).
    study_name = f"kill-{uuid.uuid4().hex[:8]}"
    extra = ["--storage", url, "--heartbeat", "1", "--grace-period", "2"] if url else []
    # No pruner: the retried trial must run to its end (Hyperband, random search's default, may stop it).
    args = support.search_args(
        tmp_path, study_name, "--strategy", "random", "--n-trials", "3", "--epochs", "10", "--seed", "3",
        "--pruner", "none", *extra,
    )  # fmt: skip
    worker = support.spawn(args)

    def killable():
        if url is None and not (tmp_path / "runs" / study_name / "study.journal").exists():
            return None
        try:
            trials = support.load(tmp_path, study_name, url).trials
        except UserError:  # not created yet
            return None
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        running = [
            t for t in trials if t.state == TrialState.RUNNING and BEAT_ATTR in t.system_attrs and t.intermediate_values
        ]
        return (done, running[0]) if done and running else None

    try:
        done_before, victim = _wait_for(killable, 180, worker)
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        killed = {t.number: t.state for t in support.load(tmp_path, study_name, url).trials}
        assert killed[victim.number] == TrialState.RUNNING, "the trial ended before the kill: nothing to retry"
        time.sleep(2.5 if url else 0)  # past the RDB grace period
        assert main(args) == 0  # the same command again
        trials = support.load(tmp_path, study_name, url).trials
        by_number = {t.number: t for t in trials}
        for t in done_before:  # finished trials are kept as they were
            assert by_number[t.number].state == TrialState.COMPLETE and by_number[t.number].values == t.values
        stale = by_number[victim.number]
        assert stale.state == TrialState.FAIL
        if url is None:  # archdsl's own journal heartbeat says why
            assert stale.user_attrs[FAIL_REASON_ATTR].startswith("worker stopped")
        retries = [t for t in trials if t.system_attrs.get("failed_trial") == victim.number]
        assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
        assert retries[0].params == stale.params
        assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    finally:
        if worker.poll() is None:
            worker.kill()
        if url:
            optuna.delete_study(
                study_name=study_name, storage=open_storage(StorageOptions(url=url), tmp_path, study_name)
            )


def _check_shared_study(study: optuna.Study, n_trials: int) -> None:
    trials = study.trials
    assert [t.number for t in trials] == list(range(len(trials)))
    copies = [t for t in trials if "copy_of" in t.user_attrs]  # drew a design already taken: drawn again
    measured = [t for t in trials if t not in copies]
    assert all(t.state == TrialState.COMPLETE for t in measured)  # none lost, none left running
    assert all(t.state == TrialState.FAIL for t in copies)
    # N workers give N times the new designs: each design measured once, and n_trials of them.
    digests = [t.user_attrs["digest"] for t in measured]
    assert len(set(digests)) == len(digests) >= n_trials, "a design was measured twice"
    for t in copies:
        assert t.user_attrs["digest"] in digests


def _run_two_workers(args: list[str]) -> None:
    workers = [support.spawn(args) for _ in range(2)]
    outputs = [w.communicate(timeout=240)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], support.both_outputs(outputs)


@pytest.mark.slow
def test_two_workers_share_a_journal_study(tmp_path):
    args = support.search_args(tmp_path, "shared", "--strategy", "random", "--n-trials", "5", "--seed-endpoints")
    _run_two_workers(args)
    _check_shared_study(support.load(tmp_path, "shared"), 5)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database to run this")
def test_two_workers_share_a_postgresql_study(tmp_path):
    study_name = f"test-{uuid.uuid4().hex[:10]}"
    args = support.search_args(tmp_path, study_name, "--strategy", "tpe", "--n-trials", "5", "--storage", POSTGRES_URL)
    try:
        _run_two_workers(args)
        _check_shared_study(support.load(tmp_path, study_name, POSTGRES_URL), 5)
        assert main(["report", study_name, "--storage", POSTGRES_URL, "--out", str(tmp_path / "runs")]) == 0
        assert (tmp_path / "runs" / study_name / "report" / "report.md").exists()
    finally:
        storage = open_storage(StorageOptions(url=POSTGRES_URL), tmp_path, study_name)
        optuna.delete_study(study_name=study_name, storage=storage)


def test_a_study_refuses_a_command_that_searches_another_space(tmp_path, capsys):
    args = support.search_args(
        tmp_path, "one-space", "--strategy", "random", "--n-trials", "1", "--objectives", "params"
    )
    assert main(args) == 0
    assert main([*args, "--search", "k,heads"]) == 1
    assert "searches another space" in capsys.readouterr().err
    assert main([*args, "--objectives", "params,flops"]) == 1  # the last --objectives wins: two objectives
    assert "optimises 1 objective(s)" in capsys.readouterr().err
    assert main([*args, "--objectives", "flops"]) == 1  # same direction, another objective
    assert "(params), not flops" in capsys.readouterr().err


def test_report_refuses_a_study_name_with_a_slash(tmp_path, capsys):
    assert main(["report", "runs/mystudy", "--out", str(tmp_path)]) == 2
    assert "bad study name" in capsys.readouterr().err


def test_a_journal_that_is_not_a_journal_is_a_clear_error(tmp_path, capsys):
    garbage = tmp_path / "study.journal"
    garbage.write_bytes(bytes(range(128, 256)) + b"\n")
    assert main(["report", "s", "--storage", f"journal:{garbage}", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not an Optuna journal file" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["report", "s"], ["study", "repair"]])
def test_a_one_line_file_that_is_no_journal_is_refused_not_read_as_empty(tmp_path, capsys, command):
    # Optuna skips a last line without its newline (a write in progress): such a file read as an empty study.
    notes = tmp_path / "notes.txt"
    notes.write_text("some notes")
    where = [str(notes)] if command[0] == "study" else ["--storage", f"journal:{notes}", "--out", str(tmp_path)]
    assert main([*command, *where]) == 1
    err = capsys.readouterr().err
    assert f"{notes} is not an Optuna journal file" in err and "Traceback" not in err
    assert notes.read_text() == "some notes" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_journal_whose_first_write_was_cut_short_opens_as_an_empty_study(tmp_path):
    torn = tmp_path / "study.journal"
    torn.write_text('{"op_code":0,"worker_id":"a')  # killed while writing its first record
    storage = open_storage(StorageOptions(url=f"journal:{torn}"), tmp_path, "s")
    assert optuna.get_all_study_summaries(storage) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--device", "tpu"], "unknown device"),
        (["--max-retry", "-1"], "integer >= 0"),
        (["--lr", "inf"], "expected a finite number"),
    ],
)
def test_bad_search_flags_are_usage_errors_before_any_work(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as info:
        main(support.search_args(tmp_path, "flags", *flags))
    assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "flags, message",
    [(["--batch-size", "60000"], "fewer than one batch of 60000"), (["--device", "cuda:3"], "no CUDA GPU")],
)
def test_settings_no_trial_could_run_are_refused_before_the_header(tmp_path, capsys, flags, message):
    args = support.search_args(tmp_path, "cannot", *flags)
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and not err.startswith("search ") and "trial 0" not in err
    assert not (tmp_path / "runs").exists()


def test_a_worker_that_sees_the_space_half_recorded_joins_instead_of_refusing():
    """Workers started together record the space one attribute at a time (a race seen in CI)."""
    from archdsl.lang.spec import load_spec
    from archdsl.search.runner import check_same_space
    from archdsl.search.space import make_space

    space = make_space(load_spec("alter-small-base"), ("k",))
    study = optuna.create_study()
    study.set_user_attr("base_digest", space.base.digest())  # the other worker got this far
    check_same_space(study, space)
    assert study.user_attrs["searched"] == "k" and study.user_attrs["base"] == "alter-small-base"

    other = make_space(load_spec("alter-small-base"), ("k", "heads"))
    with pytest.raises(UserError, match="searches another space"):
        check_same_space(study, other)


def test_a_study_holding_a_choice_the_space_no_longer_offers_is_refused():
    """A `--search window` study from before 2026-12-06 holds `window_c3='global'` on a 4x4 map, which the space now
    offers as the layout's window 4: resumed, TPE failed with a bare ValueError (`'global' not in (2, 4)`)."""
    from archdsl.search.fidelity.measures import fit_to_data, load_base
    from archdsl.search.runner import check_same_space
    from archdsl.search.space import make_space

    space = make_space(fit_to_data(load_base("alter-small-base"), (3, 16, 16), 12), ("k", "window"))
    study = optuna.create_study()
    check_same_space(study, space)  # an empty study joins
    params = {name: values[0] for name, values in space.choices().items()}
    old = {name: optuna.distributions.CategoricalDistribution(values) for name, values in space.choices().items()}
    study.add_trial(optuna.trial.create_trial(params=params, distributions=old, value=0.5))
    check_same_space(study, space)  # a trial of this space's choices joins too
    old["window_c3"] = optuna.distributions.CategoricalDistribution((2, 4, "global"))
    study.add_trial(optuna.trial.create_trial(params={**params, "window_c3": "global"}, distributions=old, value=0.5))
    with pytest.raises(UserError, match=r"trial 1 has window_c3='global', which this space does not offer"):
        check_same_space(study, space)


def test_a_second_retry_keeps_the_original_failed_trial_as_optuna_does(tmp_path):
    # Optuna's retry callback (what RDB storages run) keeps `failed_trial` = the first trial of
    # the series and appends to `retry_history`; the journal's retries must say the same.
    import warnings

    from optuna.storages import RetryHeartbeatStaleTrialCallback as Retry

    from archdsl.search.studies.record import HOST_ATTR, PID_ATTR
    from archdsl.search.studies.storage import fail_stale_trials

    study = optuna.create_study(storage=open_storage(StorageOptions(url=None), tmp_path, "retry"), study_name="retry")
    options = StorageOptions(url=None, grace_period=5, max_retry=3)

    def run_and_lose_the_worker() -> int:
        trial = study.ask()  # the waiting retry, once there is one
        trial.suggest_int("k_c1", 0, 1)
        for key, value in ((HOST_ATTR, "elsewhere"), (PID_ATTR, 1), (BEAT_ATTR, time.time() - 60)):
            study._storage.set_trial_system_attr(trial._trial_id, key, value)
        assert fail_stale_trials(study, options) == [trial.number]
        return trial.number

    first = run_and_lose_the_worker()
    second = run_and_lose_the_worker()
    (waiting,) = study.get_trials(states=(TrialState.WAITING,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        assert Retry.retried_trial_number(waiting) == first
        assert Retry.retry_history(waiting) == [first, second]
    assert waiting.params == study.trials[first].params
    assert not any(key.startswith("archdsl:") for key in waiting.system_attrs)  # the dead worker's beat


def test_a_database_worker_s_stale_trial_is_retried_as_cleanly_as_a_journal_one(tmp_path):
    """On a database Optuna's heartbeat fails a stale trial and calls the storage's retry callback. The retry must
    start without the dead run's attrs, as a journal retry does: a gRPC-proxy worker on the same database judges a
    running trial by archdsl's beat, and would fail the retry at once by the beat and process it inherited."""
    import copy

    from archdsl.search._optuna_private import fixed_params, storage_of, trial_id
    from archdsl.search.studies.record import CLAIM_ATTR, HOST_ATTR, PID_ATTR

    options = StorageOptions(url=f"sqlite:///{tmp_path / 'study.db'}", max_retry=2)
    study = optuna.create_study(storage=open_storage(options, tmp_path, "s"), study_name="s")
    storage = storage_of(study)
    with pytest.warns(UserWarning, match="Heartbeat of storage"):  # Optuna's: ask() outside optimize()
        trial = study.ask()
    trial.suggest_int("k_c1", 0, 1)
    for key, value in ((HOST_ATTR, "elsewhere"), (PID_ATTR, 1), (BEAT_ATTR, time.time() - 600)):
        storage.set_trial_system_attr(trial_id(trial), key, value)
    trial.set_user_attr(CLAIM_ATTR, True)
    storage.set_trial_state_values(trial_id(trial), TrialState.FAIL)  # what optuna.storages.fail_stale_trials does,
    retry = storage.get_heartbeat_stale_trial_callback()  # then this, on a copy of the failed trial
    retry(study, copy.deepcopy(storage.get_trial(trial_id(trial))))

    (waiting,) = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.system_attrs["failed_trial"] == trial.number and waiting.params == trial.params
    assert not any(key.startswith("archdsl:") for key in waiting.system_attrs)  # before: the dead run's beat
    assert CLAIM_ATTR not in waiting.user_attrs  # nor its claim on the design
    assert fixed_params(waiting) == trial.params  # the walk plans no other design for it


def test_a_torn_last_journal_record_is_set_aside_and_every_finished_trial_kept(tmp_path, capsys):
    # Power loss or a full disk in the middle of a write leaves a final line without its newline.
    args = support.search_args(tmp_path, "torn", "--strategy", "random", "--objectives", "params", "--n-trials", "1")
    assert main(args) == 0
    journal = tmp_path / "runs" / "torn" / "study.journal"
    torn = b'{"op_code":5,"worker_id":"w","trial_id":0,"user_attr":{"x'
    with open(journal, "ab") as f:
        f.write(torn)
    capsys.readouterr()
    more = support.search_args(tmp_path, "torn", "--strategy", "random", "--objectives", "params", "--n-trials", "2")
    assert main(more) == 0  # before: JSONDecodeError, and then the journal could not be read at all
    err = capsys.readouterr().err
    assert f"the last record of {journal} was cut short" in err and "Traceback" not in err
    assert (journal.parent / "study.journal.torn").read_bytes() == torn
    trials = support.load(tmp_path, "torn").trials
    assert [t.state for t in trials if "copy_of" not in t.user_attrs] == [TrialState.COMPLETE] * 2
    assert main(["report", "torn", "--out", str(tmp_path / "runs")]) == 0


def test_a_journal_that_is_no_regular_file_is_a_clear_error(tmp_path, capsys):
    for path in ("/dev/null", str(tmp_path)):
        assert main(support.search_args(tmp_path, "dev", "--storage", f"journal:{path}")) == 1
        err = capsys.readouterr().err
        assert f"cannot use {path} as a study journal: not a regular file" in err and "Traceback" not in err


@pytest.fixture
def silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never says a word: a hung database,
    or a firewall that swallows the traffic. Yields (port, accepted), `accepted` filled as clients come."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:  # closed at the end of the test
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1], accepted
    listener.close()
    for conn in accepted:
        conn.close()


def _finish(worker, status: int = 1, limit: float = 60) -> str | None:
    """The output of `worker` once it ended with `status` within `limit` seconds; None (and the
    worker killed) if it did not end."""
    try:
        output, _ = worker.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        return None
    assert worker.returncode == status, output
    return output


@pytest.mark.distributed
@pytest.mark.parametrize("command", ["search", "report"])
def test_a_database_server_that_never_answers_fails_in_time_and_says_so(tmp_path, silent_server, command):
    # Before: `search` and `report` waited forever (and ignored Ctrl-C). The subprocess's time limit
    # is the test: 10 s for `report` (the default limit), 1 s (the URL's own) for `search`.
    port, _ = silent_server
    if command == "report":
        url, limit = f"postgresql://u:secret@127.0.0.1:{port}/db", 10
        args = ["report", "s", "--storage", url, "--out", str(tmp_path / "runs")]
    else:
        url, limit = f"postgresql://u:secret@127.0.0.1:{port}/db?connect_timeout=1", 1
        args = support.search_args(tmp_path, "s", "--storage", url)
    output = _finish(support.spawn(args))
    assert output is not None, "no end within 60 s"
    assert f"no answer from 127.0.0.1:{port} within {limit} s" in output and "Traceback" not in output
    assert "secret" not in output and not (tmp_path / "runs").exists()


@pytest.mark.distributed
def test_ctrl_c_while_connecting_to_a_silent_database_ends_the_search_at_once(tmp_path, silent_server):
    port, accepted = silent_server
    worker = support.spawn(
        support.search_args(tmp_path, "s", "--storage", f"postgresql://u:p@127.0.0.1:{port}/db"),
        # A shell's background job ignores SIGINT, and a child inherits that (`.ci/run &` failed here, the worker
        # ending at libpq's 10 s): this one gets Ctrl-C as a terminal's.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_for(lambda: accepted, 60, worker)  # the search is waiting for the server's answer now
    worker.send_signal(signal.SIGINT)
    output = _finish(worker, status=130)  # before: Ctrl-C waited for the connection's end, forever
    assert output is not None, "Ctrl-C did not end the search within 60 s"
    assert f"archdsl: interrupted while connecting to 127.0.0.1:{port}" in output and "Traceback" not in output
    assert not (tmp_path / "runs").exists()


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database to run this")
def test_postgresql_statements_have_a_time_limit(tmp_path):
    # The server cancels a statement after STATEMENT_TIMEOUT_S (a lock held by a stuck worker, say).
    import sqlalchemy

    from archdsl.search.studies.storage import STATEMENT_TIMEOUT_S

    storage = open_storage(StorageOptions(url=POSTGRES_URL), tmp_path, "unused")
    with storage.engine.connect() as connection:
        shown = connection.execute(sqlalchemy.text("SELECT current_setting('statement_timeout')")).scalar()
    assert shown in (f"{STATEMENT_TIMEOUT_S}s", f"{STATEMENT_TIMEOUT_S // 60}min")


@pytest.mark.parametrize(
    "record, problem",
    [
        ('{"op_code":99,"worker_id":"w"}', "unknown op code 99"),
        ('{"op_code":0,"worker_id":"w","directions":[1]}', "a CREATE_STUDY record without its study_name"),
        ('{"op_code":0,"worker_id":"w","study_name":"x","directions":[7]}', "a CREATE_STUDY record with a bad value"),
        ('{"op_code":4,"worker_id":"w","study_id":"0","datetime_start":null}', "a CREATE_TRIAL record whose study_id"),
        ('{"op_code":6,"worker_id":"w","trial_id":0,"state":42,"values":null}', "a SET_TRIAL_STATE_VALUES record with"),
        (
            '{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{}}',
            "a SET_TRIAL_USER_ATTR record with 0 attributes, not one",
        ),
        ("[1, 2]", "a JSON list, not an object"),
    ],
)
def test_a_journal_record_optuna_cannot_replay_is_named_by_its_line(tmp_path, capsys, record, problem):
    from archdsl.search.studies._journal_file import JournalFile

    journal = tmp_path / "study.journal"
    optuna.create_study(storage=optuna.storages.JournalStorage(JournalFile(str(journal))), study_name="s")
    with open(journal, "a") as f:
        f.write(record + "\n")
    assert main(["report", "s", "--storage", f"journal:{journal}", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"archdsl: error: the study journal {journal} is damaged at line 2"), err
    assert problem in err and "archdsl study repair" in err
    assert "Traceback" not in err


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="set ARCHDSL_TEST_POSTGRES_URL to a PostgreSQL database to run this")
def test_a_worker_carries_on_after_the_database_dropped_its_connections(tmp_path):
    # What a database restart (or a failover, or an idle-connection reaper) does to a worker between
    # two calls: its pooled connections are dead. Before: the next call failed (OperationalError:
    # server closed the connection unexpectedly) and the worker stopped with a traceback.
    import sqlalchemy

    study_name = f"drop-{uuid.uuid4().hex[:8]}"
    storage = open_storage(StorageOptions(url=POSTGRES_URL), tmp_path, study_name)
    study = optuna.create_study(storage=storage, study_name=study_name)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    try:
        # The worker's own pooled connections (not the other tests' on this database), by their server pids.
        held = [storage.engine.connect() for _ in range(max(1, storage.engine.pool.checkedin()))]
        pids = [c.connection.dbapi_connection.get_backend_pid() for c in held]
        for c in held:
            c.close()  # back into the pool, alive as far as the pool knows
        with sqlalchemy.create_engine(storage.engine.url).connect() as admin:
            for pid in pids:
                assert admin.execute(sqlalchemy.text(f"SELECT pg_terminate_backend({int(pid)})")).scalar()
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)  # the same worker, next trial
        assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    finally:
        optuna.delete_study(study_name=study_name, storage=storage)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_worker_with_optunas_heartbeat_keeps_archdsls_fresh_too(tmp_path):
    """Workers on the database itself (Optuna's heartbeat) and workers through the gRPC proxy (no
    heartbeat: they judge a running trial by archdsl's beat) may share a study: a direct worker that
    beat once at its trial's start would have its live trial failed by a proxy worker after the grace period."""
    from archdsl.search._optuna_private import heartbeat_enabled, storage_of, trial_id
    from archdsl.search.studies.storage import WorkerHeartbeat

    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=open_storage(StorageOptions(url=url), tmp_path, "both"), study_name="both")
    assert heartbeat_enabled(storage_of(study))  # stands in for a worker on PostgreSQL
    trial = study.ask()

    def beat() -> float:
        return storage_of(study).get_trial(trial_id(trial)).system_attrs[BEAT_ATTR]

    with WorkerHeartbeat(storage_of(study), trial_id(trial), 0.05):  # type: ignore[arg-type]  # seconds
        first = beat()
        deadline = time.monotonic() + 30  # a bound on a loaded machine, not a measured time
        while beat() == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert beat() > first
