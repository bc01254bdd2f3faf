"""Benchmarks of the threaded kernels (issue 29): every threaded kernel on 1, 2 and all cores.

Groups ``threads-<kernel>``; contenders ``t1``, ``t2`` and ``tall`` (role dpcore), the thread
count set with ``dpcore.set_num_threads``. report.py prints their ratios (speed-up over ``t1``)
in its "Threads" table. Run on an idle machine (load < 0.3)::

    python -m pytest bench/test_threads.py --benchmark-json=threads.json \\
        && python bench/report.py threads.json

Inputs: noise on 10**7 values, selection over 10**7 candidates, counting 10**7 points in d = 2
(50 x 50 grid), randomized response on 10**7 records, local-hashing support counts of 10**6
reports over 64 candidates (per report: n counts the reports). Under ``--benchmark-disable`` the sizes are
capped to the smoke size (then only the noise and local kernels reach their thread thresholds).

Run as a script for a quick comparison on a loaded machine: contenders alternated, the minimum
of the repeats, wall and CPU time (``time.process_time``) per call, and the load average::

    python bench/test_threads.py [--repeats 5] [--size 10000000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pytest

from common import DPCORE, dpcore_api, record

SIZE = 10**7
SIGMA = 100.0


def _all_cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


THREADS = {"t1": 1, "t2": 2, "tall": _all_cores()}
KERNELS = ["laplace", "snapping", "gaussian", "discrete_laplace", "discrete_gaussian",
           "select-exact", "select-gumbel", "top_k", "count", "grr", "olh_support"]


def kernels(dpcore, n):
    """(name, call) for every threaded kernel; each call does one full-size release."""
    from dpcore import _histogram, _local
    from dpcore._release import bins

    rng = np.random.default_rng(20240601)
    values = rng.uniform(-50.0, 50.0, n)
    utilities = -np.abs(np.arange(n) - n / 3.0) / 50.0
    points = rng.normal(size=(n, 2))
    grid = bins.BinGrid.make(50, [(-4.0, 4.0)] * 2, 2)
    codes = rng.integers(0, 16, n).astype(np.int64)
    reports = np.empty(n, dtype=np.int64)
    # local-hashing support: n / 10 reports, k = 64 candidates, g = 7 (three base-7 digits)
    m_support = max(n // 10, 1)
    seeds = rng.integers(0, 7, size=(m_support, 4)).astype(np.int64)
    hashed = rng.integers(0, 7, m_support).astype(np.int64)
    digits = np.array([[(j // 7**t) % 7 for t in range(3)] for j in range(64)], dtype=np.int64)

    def support():
        counts = np.zeros(64, dtype=np.int64)
        _local.olh_support(counts, seeds, hashed, digits, 7)
        return counts

    def count():
        counts = np.zeros(grid.size, dtype=np.int64)
        _histogram.count_into(points, *grid.kernel_args, False, counts)
        return counts

    return [
        ("laplace", lambda: dpcore.laplace(values, sensitivity=1.0, epsilon=1.0)),
        ("snapping", lambda: dpcore.laplace(values, sensitivity=1.0, epsilon=1.0, bound=100.0,
                                            method="snapping")),
        ("gaussian", lambda: dpcore.gaussian(values, sensitivity=1.0, rho=0.5)),
        ("discrete_laplace", lambda: dpcore.discrete_laplace(1.0, n)),
        ("discrete_gaussian", lambda: dpcore.discrete_gaussian(SIGMA, n)),
        ("select-exact", lambda: dpcore.exponential(utilities, sensitivity=1.0, epsilon=1.0)),
        ("select-gumbel", lambda: dpcore.exponential(utilities, sensitivity=1.0, epsilon=1.0,
                                                     method="gumbel")),
        ("top_k", lambda: dpcore.top_k(utilities, 10, sensitivity=1.0, epsilon=1.0)),
        ("count", count),
        ("grr", lambda: _local.grr_into(reports, codes, 16, 3 * 2**62)),
        ("olh_support", support),
    ]


@pytest.fixture
def threads():
    dpcore = dpcore_api("set_num_threads")
    before = dpcore.get_num_threads()
    yield dpcore.set_num_threads
    dpcore.set_num_threads(before)


@pytest.fixture(scope="module")
def _kernels_cache():
    return {}


@pytest.mark.parametrize("contender", list(THREADS))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("size", [SIZE], indirect=True)
def test_threads(benchmark, size, kernel, contender, threads, _kernels_cache):
    dpcore = dpcore_api("set_num_threads")
    if size not in _kernels_cache:
        _kernels_cache[size] = dict(kernels(dpcore, size))
    call = _kernels_cache[size][kernel]
    threads(THREADS[contender])
    record(benchmark, n=size, contender=contender, role=DPCORE, group=f"threads-{kernel}")
    out = benchmark(call)
    assert out is None or np.size(out) >= 1


# ------------------------------------------------------------------------------------------------
# Script mode: alternated contenders, min of repeats, wall and CPU time


def main(argv=None):
    parser = argparse.ArgumentParser(description="threaded kernels: 1, 2, all cores")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--kernels", default="", help="comma-separated subset")
    args = parser.parse_args(argv)
    import dpcore

    chosen = [k for k in args.kernels.split(",") if k]
    calls = [(name, call) for name, call in kernels(dpcore, args.size)
             if not chosen or name in chosen]
    counts = sorted(set(THREADS.values()))
    print(f"# n = {args.size:.0e}, {args.repeats} alternated repeats, min; cores {_all_cores()}; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print("| kernel | " + " | ".join(f"{c} thr wall ms | {c} thr cpu ms" for c in counts)
          + " | wall t1/t2 | wall t1/tall |")
    print("|" + "---|" * (2 + 2 * len(counts) + 1))
    for name, call in calls:
        wall = {c: float("inf") for c in counts}
        cpu = {c: float("inf") for c in counts}
        call()  # warm-up (pool, tables)
        for _ in range(args.repeats):
            for c in counts:
                dpcore.set_num_threads(c)
                w0, c0 = time.perf_counter(), time.process_time()
                call()
                wall[c] = min(wall[c], time.perf_counter() - w0)
                cpu[c] = min(cpu[c], time.process_time() - c0)
        cells = " | ".join(f"{wall[c] * 1e3:.1f} | {cpu[c] * 1e3:.1f}" for c in counts)
        print(f"| {name} | {cells} | {wall[1] / wall[2]:.2f} | {wall[1] / wall[counts[-1]]:.2f} |",
              flush=True)
    print(f"# load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
