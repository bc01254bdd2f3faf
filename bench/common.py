"""Helpers shared by the benchmark modules: contender bookkeeping and optional imports."""
from __future__ import annotations

import importlib
import warnings

import pytest

EPSILON = 1.0
SENSITIVITY = 1.0
BOUND = 100.0  # snapping clamp bound B, in units of the sensitivity

# Roles, as report.py reads them from extra_info["role"].
BASELINE = "baseline"  # NumPy's PCG64 Generator: fast, not secure, not private
NAIVE = "naive"  # naive.py: os.urandom bits + textbook transforms (secure bits, not private)
DPCORE = "dpcore"
PEER = "peer"  # another DP library (optional)


def record(benchmark, *, n, contender, role, group):
    """Put the contender in ``group`` and label it for report.py (``n`` samples per call)."""
    benchmark.group = group
    benchmark.extra_info.update(n=int(n), contender=contender, role=role)


def dpcore_api(*names):
    """Import dpcore and return it, or skip when it (or one of ``names``) is not available yet."""
    try:
        dpcore = importlib.import_module("dpcore")
    except ImportError as exc:
        pytest.skip(
            f"dpcore is not importable ({exc}); build it with `python setup.py build_ext "
            "--inplace` and set PYTHONPATH=python, or `pip install .`"
        )
    if getattr(dpcore, "__file__", None) is None:
        # The kernel source folder dpcore/ (no __init__.py) seen as a namespace package.
        pytest.skip(
            f"`import dpcore` found only the namespace {list(dpcore.__path__)}: dpcore is not "
            "installed; `pip install .`, or build in place and set PYTHONPATH=python"
        )
    missing = [name for name in names if not hasattr(dpcore, name)]
    if missing:
        pytest.skip(f"dpcore has no {', '.join(missing)} yet")
    return dpcore


def peer(module, dist=None):
    """Import an optional peer library, or skip with the reason it is unusable.

    Peers are never dependencies of dpcore: install them with ``pip install ".[bench]"`` into a
    separate benchmarking environment. Their import-time warnings are not ours to fix.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except ImportError as exc:  # absent, or present but broken (e.g. an incompatible dependency)
        pytest.skip(f"peer {dist or module} not usable: {type(exc).__name__}: {exc}")
