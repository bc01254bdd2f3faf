import os
import sys

import pytest

# Shared test helpers (_gof) live beside the tests; importlib mode does not put this folder on
# sys.path by itself.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def threads():
    """Set dpcore's thread count inside a test (``threads(n)``); the previous count is restored
    afterwards."""
    import dpcore

    before = dpcore.get_num_threads()
    yield dpcore.set_num_threads
    dpcore.set_num_threads(before)
