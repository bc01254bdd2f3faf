"""pytest configuration for the dpcore benchmarks (pytest-benchmark).

Run the benchmarks and print the README table::

    python -m pytest bench --benchmark-json=bench.json && python bench/report.py bench.json

Only check that the benchmark code works (what CI does: each contender runs once, on smaller
inputs, and its output is still sanity-checked)::

    python -m pytest bench --benchmark-disable

Every benchmark records ``extra_info``: ``n`` (samples per call, for ns/sample), ``contender``
(a stable name report.py uses) and ``role`` (see common.py). Optional large sizes are marked
``large`` and run only with ``--bench-large``.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

# The tests import the sibling modules (naive, checks, common); the project's pytest settings
# use --import-mode=importlib, which does not put this folder on sys.path by itself.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

#: Under --benchmark-disable each contender runs once on at most this many samples, so the suite
#: stays a few seconds long while every code path and sanity check still runs.
SMOKE_SIZE = 10**5
#: The same for the peers' per-sample Python loops (several microseconds a sample).
SMOKE_SIZE_PEER = 10**3

try:
    import pytest_benchmark  # noqa: F401
except ImportError:  # pragma: no cover - only without pytest-benchmark
    HAVE_PYTEST_BENCHMARK = False
else:
    HAVE_PYTEST_BENCHMARK = True


def pytest_addoption(parser):
    group = parser.getgroup("dpcore benchmarks")
    group.addoption(
        "--bench-large",
        action="store_true",
        default=False,
        help="also run the optional large sizes (e.g. 10**7 raw words)",
    )
    if not HAVE_PYTEST_BENCHMARK:  # pragma: no cover
        # Keep CI's `pytest bench --benchmark-disable` working without the plugin: the stand-in
        # fixture below runs each contender once, which is what that flag means anyway.
        group.addoption(
            "--benchmark-disable",
            action="store_true",
            default=False,
            help="(pytest-benchmark is not installed: nothing is timed either way)",
        )


def pytest_configure(config):
    config.addinivalue_line("markers", "large: optional large size, run with --bench-large")
    config.addinivalue_line("markers", "peer: another library's contender (smaller smoke size)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--bench-large"):
        return
    skip = pytest.mark.skip(reason="optional large size: run with --bench-large")
    for item in items:
        if "large" in item.keywords:
            item.add_marker(skip)


if not HAVE_PYTEST_BENCHMARK:  # pragma: no cover

    class _RunOnce:
        """Stand-in for pytest-benchmark's fixture: calls the function once, times nothing."""

        disabled = True

        def __init__(self):
            self.extra_info = {}
            self.group = None

        def __call__(self, fn, *args, **kwargs):
            return fn(*args, **kwargs)

        def pedantic(self, fn, args=(), kwargs=None, **_):
            return fn(*args, **(kwargs or {}))

    @pytest.fixture
    def benchmark():
        return _RunOnce()


def _benchmarks_disabled(config):
    if not HAVE_PYTEST_BENCHMARK:
        return True
    return bool(config.getoption("benchmark_disable", False))


@pytest.fixture
def size(request):
    """Samples per call: the indirect parameter, capped to a smoke size under --benchmark-disable.

    Use as ``@pytest.mark.parametrize("size", [...], indirect=True)``.
    """
    n = request.param
    if _benchmarks_disabled(request.config):
        cap = SMOKE_SIZE_PEER if request.node.get_closest_marker("peer") else SMOKE_SIZE
        n = min(n, cap)
    return n


@pytest.fixture(scope="session")
def _values_cache():
    return {}


@pytest.fixture
def values(size, _values_cache):
    """The exact query answers the noise is added to: ``size`` doubles uniform in [-50, 50].

    Well inside the snapping bound (100), and uniform modulo any power-of-two grid up to 2, so the
    rounding error of the grid-based mechanisms is uniform too (the variance checks rely on it).
    Read-only, shared by every contender of the same size.
    """
    if size not in _values_cache:
        arr = np.random.default_rng(20240601).uniform(-50.0, 50.0, size)
        arr.setflags(write=False)
        _values_cache[size] = arr
    return _values_cache[size]
