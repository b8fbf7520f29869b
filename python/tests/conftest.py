import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, different per test."""
    seed = sum(request.node.nodeid.encode()) * 2654435761 % 2**32
    return np.random.default_rng(seed)
