"""Benchmarks of the ``_histogram`` kernel (quantized density counting) and its noise step.

Groups ``histogram-d{d}-{cells}``: binning n = 10**7 points uniform in [0, 1]^d into a grid of
about 10**4 or 10**6 cells (d in 1, 2, 3, 5), reported per point. Contenders:

* ``numpy-histogramdd`` (role baseline): ``numpy.histogramdd`` with the same bins and range.
* ``numpy-bincount`` (role naive): the floor / ``ravel_multi_index`` / ``bincount`` approach.
* ``dpcore-count``: the kernel's counting pass alone, as the library runs it (``_BinGrid``;
  validation of the grid excluded, the data already C-contiguous).
* ``dpcore-count-scalar``: the same pass forced onto the portable scalar loop (what a CPU
  without AVX2 runs; ``_histogram._simd_level(-1)``), for comparison; no target.
* ``dpcore-histogramdd``: the whole release :func:`dpcore.stats.histogramdd` (validation,
  counting, exact discrete Laplace noise on every cell).
* ``diffprivlib-histogramdd`` (peer, 10**4-cell grids only: its per-cell noise is a Python
  loop): ``diffprivlib.tools.histogramdd``.

Every contender's counts sum to n (all points are in range) and the exact contenders agree
with the kernel cell by cell (bincount within the handful of points that its floor puts on the
other side of an edge).

Group ``histogram-noise``: the noise step on 10**6 cells (per cell) against NumPy's insecure
``Generator.laplace`` for 10**6 values.

Targets (report.py): ``dpcore-count`` >= 15x faster than ``numpy-histogramdd`` and >= 2x faster
than ``numpy-bincount`` in every counting group; the noise step <= 3x ``numpy-laplace``.

The Dask speed-up (n = 10**8, generated chunk by chunk on the workers, never in RAM at once) is
measured by hand, not in CI::

    python bench/test_histogram.py dask-speedup [n] [chunk]
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from common import BASELINE, DPCORE, NAIVE, PEER, dpcore_api, peer, record

N_POINTS = 10**7
#: (d, bins per axis): about 10**4 and about 10**6 cells for each d.
CONFIGS = [(1, 10**4), (1, 10**6), (2, 100), (2, 1000), (3, 22), (3, 100), (5, 7), (5, 16)]
NOISE_CELLS = 10**6


def group_of(d, bins):
    cells = bins**d
    return f"histogram-d{d}-{'1e4' if cells < 10**5 else '1e6'}"


_DATA = {}


def points(n, d):
    """n points uniform in [0, 1)^d, C-contiguous float64, read-only, shared."""
    key = (n, d)
    if key not in _DATA:
        _DATA.clear()  # one configuration at a time (10**7 x 5 doubles is 400 MB)
        arr = np.random.default_rng(20240601 + d).random((n, d))
        arr.setflags(write=False)
        _DATA[key] = arr
    return _DATA[key]


def bincount_counts(x, bins):
    d = x.shape[1]
    idx = tuple(np.minimum((x[:, k] * bins).astype(np.intp), bins - 1) for k in range(d))
    return np.bincount(np.ravel_multi_index(idx, (bins,) * d), minlength=bins**d).reshape(
        (bins,) * d)


def check_counts(counts, n, bins, d, reference=None, slack=0):
    counts = np.asarray(counts)
    assert counts.shape == (bins,) * d
    assert int(counts.sum()) == n
    if reference is not None:
        assert int(np.abs(counts - reference).sum()) <= slack


_REF = {}


def kernel_reference(x, bins):
    key = (x.shape, bins)
    if key not in _REF:
        _REF.clear()
        from dpcore._release import bins as release_bins

        grid = release_bins.BinGrid.make(bins, [(0.0, 1.0)] * x.shape[1], x.shape[1])
        c = np.zeros(grid.size, dtype=np.int64)
        grid.count_into(x, c, False)
        _REF[key] = c.reshape(grid.shape)
    return _REF[key]


@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", CONFIGS)
def test_numpy_histogramdd(benchmark, size, d, bins):
    x = points(size, d)
    record(benchmark, n=size, contender="numpy-histogramdd", role=BASELINE,
           group=group_of(d, bins))
    counts, _ = benchmark.pedantic(np.histogramdd, args=(x,),
                                   kwargs={"bins": bins, "range": [(0.0, 1.0)] * d},
                                   rounds=3, iterations=1)
    check_counts(counts, size, bins, d)


@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", CONFIGS)
def test_numpy_bincount(benchmark, size, d, bins):
    x = points(size, d)
    record(benchmark, n=size, contender="numpy-bincount", role=NAIVE, group=group_of(d, bins))
    counts = benchmark.pedantic(bincount_counts, args=(x, bins), rounds=5, iterations=1)
    dpcore_api()
    # floor((x - 0) * bins) can differ from numpy's edges only for points within rounding of
    # an edge: a handful at most
    check_counts(counts, size, bins, d, kernel_reference(x, bins), slack=max(10, size // 10**6))


@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", CONFIGS)
def test_dpcore_count(benchmark, size, d, bins):
    dpcore_api()
    from dpcore._release import bins as release_bins

    x = points(size, d)
    grid = release_bins.BinGrid.make(bins, [(0.0, 1.0)] * d, d)
    grid.kernel_args  # noqa: B018  (built once, as in a release)

    def run():
        counts = np.zeros(grid.size, dtype=np.int64)
        grid.count_into(x, counts, False)
        return counts.reshape(grid.shape)

    record(benchmark, n=size, contender="dpcore-count", role=DPCORE, group=group_of(d, bins))
    counts = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    check_counts(counts, size, bins, d)
    if size <= 10**6:
        np.testing.assert_array_equal(counts, np.histogramdd(x, bins=bins,
                                                             range=[(0.0, 1.0)] * d)[0])


@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", CONFIGS)
def test_dpcore_count_scalar(benchmark, size, d, bins):
    dpcore_api()
    from dpcore import _histogram
    from dpcore._release import bins as release_bins

    x = points(size, d)
    grid = release_bins.BinGrid.make(bins, [(0.0, 1.0)] * d, d)
    grid.kernel_args  # noqa: B018

    def run():
        counts = np.zeros(grid.size, dtype=np.int64)
        grid.count_into(x, counts, False)
        return counts.reshape(grid.shape)

    record(benchmark, n=size, contender="dpcore-count-scalar", role=DPCORE,
           group=group_of(d, bins))
    saved = _histogram._simd_level()
    _histogram._simd_level(-1)
    try:
        counts = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    finally:
        _histogram._simd_level(saved)
    np.testing.assert_array_equal(counts, kernel_reference(x, bins))


@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", CONFIGS)
def test_dpcore_histogramdd(benchmark, size, d, bins):
    dpcore = dpcore_api()
    x = points(size, d)
    record(benchmark, n=size, contender="dpcore-histogramdd", role=DPCORE,
           group=group_of(d, bins))
    counts, _ = benchmark.pedantic(dpcore.stats.histogramdd, args=(x,),
                                   kwargs={"bins": bins, "range": [(0.0, 1.0)] * d,
                                           "epsilon": 1.0, "nonnegative": False},
                                   rounds=3, iterations=1)
    assert counts.shape == (bins,) * d
    noise = counts - kernel_reference(x, bins)  # raw counts: the noise itself
    # DLap(1): variance 2q/(1-q)^2 = 1.84 per cell; the mean over >= 10**4 cells is near 0
    assert abs(noise.mean()) < 0.2 and 1.0 < noise.var() < 3.0


@pytest.mark.peer
@pytest.mark.parametrize("size", [N_POINTS], indirect=True)
@pytest.mark.parametrize("d,bins", [c for c in CONFIGS if c[1] ** c[0] < 10**5])
def test_diffprivlib_histogramdd(benchmark, size, d, bins):
    tools = peer("diffprivlib.tools", "diffprivlib")
    x = points(size, d)
    record(benchmark, n=size, contender="diffprivlib-histogramdd", role=PEER,
           group=group_of(d, bins))
    counts, _ = benchmark.pedantic(tools.histogramdd, args=(x,),
                                   kwargs={"bins": bins, "range": [(0.0, 1.0)] * d,
                                           "epsilon": 1.0},
                                   rounds=1, iterations=1)
    assert counts.shape == (bins,) * d
    assert abs(counts.sum() - size) < 50 * bins**d  # truncated geometric noise per cell


# ------------------------------------------------------------------------------------------------
# the noise step


@pytest.mark.parametrize("size", [NOISE_CELLS], indirect=True)
def test_numpy_laplace(benchmark, size):
    rng = np.random.default_rng(1)
    record(benchmark, n=size, contender="numpy-laplace", role=BASELINE, group="histogram-noise")
    out = benchmark(rng.laplace, 0.0, 1.0, size)
    assert out.shape == (size,) and 1.5 < out.var() < 2.5


@pytest.mark.parametrize("size", [NOISE_CELLS], indirect=True)
def test_dpcore_noise_step(benchmark, size):
    dpcore_api()
    from dpcore import _noise

    counts = np.zeros(size, dtype=np.int64)

    def run():
        counts[:] = 0
        _noise.discrete_laplace_add_into(counts, 1.0, None)  # the secure generator
        return counts

    record(benchmark, n=size, contender="dpcore-noise-step", role=DPCORE, group="histogram-noise")
    out = benchmark(run)
    q = np.exp(-1.0)
    assert abs(out.var() - 2 * q / (1 - q) ** 2) < 0.1 and abs(out.mean()) < 0.05


# ------------------------------------------------------------------------------------------------
# Dask speed-up, by hand


def _dask_job(n, chunk, d, bins, client):
    import dask.array as da

    from dpcore import distributed
    from dpcore._release import bins as release_bins

    x = da.random.default_rng(7).random((n, d), chunks=(chunk, d))
    grid = release_bins.BinGrid.make(bins, [(0.0, 1.0)] * d, d)
    t0 = time.perf_counter()
    counts = distributed.exact_histogramdd(x, grid)
    elapsed = time.perf_counter() - t0
    assert counts.sum() == n
    return elapsed


def dask_speedup(n=10**8, chunk=5 * 10**6, d=2, bins=1000):
    """Time the distributed exact counting of n generated points on 1 worker process and on 2
    (one thread each), the points generated chunk by chunk on the workers."""
    from distributed import Client, LocalCluster

    times = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None, host="127.0.0.1") as cluster, \
                Client(cluster) as client:
            _dask_job(min(n, 4 * chunk), chunk, d, bins, client)  # warm up the workers
            times[workers] = min(_dask_job(n, chunk, d, bins, client) for _ in range(2))
        print(f"{workers} worker(s): {times[workers]:.2f} s for n={n:,} "
              f"({times[workers] / n * 1e9:.1f} ns/point incl. generation)", flush=True)
    print(f"speed-up 2 workers / 1 worker: {times[1] / times[2]:.2f}x")
    return times


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "dask-speedup":
        args = [int(float(a)) for a in sys.argv[2:4]]
        dask_speedup(*args)
    else:
        print(__doc__)
