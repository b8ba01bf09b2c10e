"""Fixtures shared by the test files, and the skip rule for tests of the `distributed` extra."""

import importlib.util
import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n auto` starts one worker per core: each (and each CLI subprocess it starts) takes one
    # torch thread, so the workers do not oversubscribe the cores. Two-thread workers on two busy
    # cores spin waiting for each other's threads (benchmarks/README.md measured ~10x the CPU time).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Tests marked `distributed` or `postgres` need the PostgreSQL driver of `archdsl[distributed]`.

    The README's `pip install -e '.[dev]'` lacks it: there they are skipped, and CI runs them
    in its second step, once the extras are installed (.ci/run).
    """
    if any(importlib.util.find_spec(name) for name in ("psycopg2", "psycopg")):
        return
    skip = pytest.mark.skip(reason="needs the PostgreSQL driver: pip install -e '.[dev,distributed]'")
    for item in items:
        if item.get_closest_marker("distributed") or item.get_closest_marker("postgres"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    """Each test writes what archdsl caches (a folder's mean and std) into a folder of its own,
    never into the user's ~/.cache/archdsl."""
    monkeypatch.setenv("ARCHDSL_CACHE", str(tmp_path_factory.mktemp("archdsl-cache")))


@pytest.fixture
def one_thread():
    """One intra-op thread while a test trains tiny nets: faster than several on two shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def micro_spec(request, tmp_path):
    """The test module's MICRO network (tests/_micro_arch.py) written to TMP/micro.arch; its path."""
    path = tmp_path / "micro.arch"
    path.write_text(request.module.MICRO)
    return path
