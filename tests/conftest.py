"""Fixtures shared by the test files."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """One intra-op thread while a test trains tiny nets: faster than several on two shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
