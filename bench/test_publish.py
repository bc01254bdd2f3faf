"""Benchmarks of the ``_publish`` kernel (dpcore.publish) against straightforward NumPy twins.

Groups:

* ``publish-consistency-2^16``, ``publish-consistency-2^20``: Hay et al. constrained inference on a 16-ary tree with N = 2**16
  or 2**20 leaves (per node). ``dpcore-consistent-tree`` (the kernel's two passes) against
  ``numpy-consistent-tree`` (role naive: the same two passes level by level with reshape / sum
  / repeat). Outputs agree to 1e-9 relative.
* ``publish-range-1e5``: 10**5 range counts from a consistent 16-ary tree of 2**20 leaves (per
  range): ``dpcore-range-sums`` (canonical nodes, O(k log N) each) against
  ``python-range-sums`` (role naive: the same decomposition written as a Python loop) and
  ``numpy-cumsum`` (role baseline: prefix sums of the consistent leaves, O(N) once then O(1)
  per range; the same answers up to rounding because the tree is consistent).
* ``publish-counter-1e7``: continual counting over 10**7 0/1 events (per event):
  ``dpcore-counter`` (``ContinualCounter.extend``: exact discrete Laplace draws and the
  streaming kernel) against ``numpy-counter`` (role naive: the same draws, then every dyadic
  block and every release computed offline, level by level, with NumPy) and
  ``python-counter`` (role naive: the obvious per-event streaming loop, 10**5 events). The
  outputs of the dpcore and NumPy contenders are identical (same seed, same noise).

Target: >= 10**7 events/s for ``dpcore-counter``. Measured on the development machine (2 cores,
shared, loaded): 3.4e7 events/s (best of 3 rounds) here, 5.0e7/s median of 7 runs by hand; the
exact discrete Laplace sampler is most of it (the counting loop alone runs at ~2e8 events/s).
The NumPy twin is ~10x slower, the Python loop ~50x.

* ``publish-haar-2^20``: Privelet's unnormalised Haar transform of 2**20 counts:
  ``dpcore-privelet`` (the kernel) against ``numpy-haar`` (role naive: level by level with
  reshapes); identical integer outputs (best of rounds 1.5 ms against 34 ms).
* ``publish-mwem-1024x1000``: MWEM with 1024 bins, 1000 random ranges, n = 10**5, T = 30,
  replay 10: ``dpcore-mwem`` (``publish.mwem`` with interval queries: prefix-sum answers,
  O(sqrt n) block updates) against ``numpy-mwem`` (role naive: the straightforward algorithm
  with a dense query matrix, whole-domain updates). Both draw the same randomness in the same
  order, so their synthetic data agree to 1e-8 (the same error). Target >= 10x. Measured on
  the development machine (2 cores, load ~4): best of 5 rounds 1.6 ms against 132 ms (83x)
  with OPENBLAS_NUM_THREADS=1, 2.0 ms against 765 ms with threaded BLAS; medians of the
  ``mwem`` report varied between 14x and 157x with the load. Mean |error| per query 765
  for both (the uniform histogram's: 10576).

Reports (exact formulas against measured errors, and MWEM's time and error)::

    PYTHONPATH=python python bench/test_publish.py privelet
    PYTHONPATH=python python bench/test_publish.py matrix [draws]
    PYTHONPATH=python python bench/test_publish.py mwem

The error comparison (binary tree against per-event noise) is printed by::

    PYTHONPATH=python python bench/test_publish.py error [T]
"""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from common import BASELINE, DPCORE, NAIVE, dpcore_api, record

K = 16


# ------------------------------------------------------------------------------------------------
# naive twins


def numpy_consistent_tree(noisy, k, levels):
    """Constrained inference level by level with whole-array NumPy operations."""
    widths = [k**d for d in range(levels)]
    starts = np.cumsum([0] + widths[:-1])
    level = [noisy[s:s + w] for s, w in zip(starts, widths)]
    z = [None] * levels
    z[-1] = level[-1].astype(np.float64)
    for d in range(levels - 2, -1, -1):
        i = levels - d
        a = (k**i - k ** (i - 1)) / (k**i - 1)
        b = (k ** (i - 1) - 1) / (k**i - 1)
        z[d] = a * level[d] + b * z[d + 1].reshape(-1, k).sum(axis=1)
    out = [z[0]]
    for d in range(1, levels):
        gap = (out[d - 1] - z[d].reshape(-1, k).sum(axis=1)) / k
        out.append(z[d] + np.repeat(gap, k))
    return np.concatenate(out)


def python_range_sums(tree, k, levels, lo, hi):
    starts = [(k**d - 1) // (k - 1) for d in range(levels)]
    out = np.empty(len(lo))
    for q, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        s, d = 0.0, levels - 1
        while a < b:
            while a < b and a % k:
                s += tree[starts[d] + a]
                a += 1
            while a < b and b % k:
                b -= 1
                s += tree[starts[d] + b]
            a, b, d = a // k, b // k, d - 1
        out[q] = s
    return out


def numpy_counter(events, noise):
    """Binary-tree mechanism offline: block (level j, index m) covers steps m 2**j + 1 ..
    (m + 1) 2**j and carries the noise drawn at its last step; the release at t sums the
    blocks of t's binary decomposition (for every set bit j of t: block (j, (t >> j) - 1))."""
    n = events.size
    prefix = np.concatenate([[0], np.cumsum(events)])
    t = np.arange(1, n + 1)
    out = np.zeros(n, dtype=np.int64)
    for j in range(n.bit_length()):
        size = 1 << j
        ends = np.arange(size, n + 1, size)
        noisy_blocks = prefix[ends] - prefix[ends - size] + noise[ends - 1]
        has = (t >> j) & 1 == 1
        out[has] += noisy_blocks[(t[has] >> j) - 1]
    return out


def python_counter(events, noise):
    """The obvious streaming loop: one open block per level, closed into the next."""
    levels = max(1, len(events).bit_length())
    psum, noisy = [0] * levels, [0] * levels
    out, last = [], 0
    for t, (x, z) in enumerate(zip(events.tolist(), noise.tolist()), start=1):
        i = (t & -t).bit_length() - 1
        s = x + sum(psum[:i])
        last += s + z - sum(noisy[:i])
        psum[i], noisy[i] = s, s + z
        out.append(last)
    return np.array(out, dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# constrained inference


def _tree(leaves_log16):
    levels = leaves_log16 + 1
    nodes = (K**levels - 1) // (K - 1)
    noisy = np.random.default_rng(levels).integers(-50, 50, nodes).astype(np.float64)
    return noisy, levels


@pytest.mark.parametrize("size", [2**16, 2**20], indirect=True)
@pytest.mark.parametrize("contender", ["dpcore-consistent-tree", "numpy-consistent-tree"])
def test_consistency(benchmark, size, contender):
    dpcore_api()
    from dpcore import _publish

    noisy, levels = _tree(max(1, round(math.log(size, K))))
    out = np.empty_like(noisy)
    record(benchmark, n=noisy.size, contender=contender,
           role=DPCORE if contender.startswith("dpcore") else NAIVE,
           group=f"publish-consistency-2^{4 * (levels - 1)}")
    if contender.startswith("dpcore"):
        benchmark(_publish.consistent_tree, noisy, K, levels, out)
    else:
        out = benchmark(numpy_consistent_tree, noisy, K, levels)
    ref = np.empty_like(noisy)
    _publish.consistent_tree(noisy, K, levels, ref)
    np.testing.assert_allclose(out, numpy_consistent_tree(noisy, K, levels), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(out[0], out[-K ** (levels - 1):].sum(), rtol=1e-9)


# ------------------------------------------------------------------------------------------------
# range counts


@pytest.mark.parametrize("size", [10**5], indirect=True)
@pytest.mark.parametrize("contender", ["dpcore-range-sums", "python-range-sums", "numpy-cumsum"])
def test_range_sums(benchmark, size, contender):
    dpcore_api()
    from dpcore import _publish

    noisy, levels = _tree(5)
    tree = np.empty_like(noisy)
    _publish.consistent_tree(noisy, K, levels, tree)
    n = K ** (levels - 1)
    g = np.random.default_rng(1)
    lo, hi = np.sort(g.integers(0, n + 1, (2, size)), axis=0)
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    leaves = tree[-n:]
    record(benchmark, n=size, contender=contender,
           role={"dpcore": DPCORE, "python": NAIVE, "numpy": BASELINE}[contender.split("-")[0]],
           group="publish-range-1e5")
    if contender == "dpcore-range-sums":
        out = np.empty(size)
        benchmark(_publish.range_sums, tree, K, levels, lo, hi, out)
    elif contender == "python-range-sums":
        out = benchmark.pedantic(python_range_sums, args=(tree, K, levels, lo, hi), rounds=1,
                                 iterations=1)
    else:
        def cumsum_ranges():
            cum = np.concatenate([[0.0], np.cumsum(leaves)])
            return cum[hi] - cum[lo]
        out = benchmark(cumsum_ranges)
    exact = np.concatenate([[0.0], np.cumsum(leaves)])
    np.testing.assert_allclose(out, exact[hi] - exact[lo], rtol=1e-9, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# continual counting


@pytest.mark.parametrize("size", [10**7], indirect=True)
@pytest.mark.parametrize("contender", ["dpcore-counter", "numpy-counter", "python-counter"])
def test_counter(benchmark, size, contender):
    dpcore = dpcore_api()
    from dpcore import publish

    if contender == "python-counter":
        size = min(size, 10**5)
    events = np.random.default_rng(3).integers(0, 2, size)
    scale = publish.ContinualCounter(1.0, size).noise.scale
    record(benchmark, n=size, contender=contender,
           role=DPCORE if contender.startswith("dpcore") else NAIVE,
           group="publish-counter-1e7")

    def run_dpcore():
        return publish.ContinualCounter(1.0, size, random_state=5).extend(events)

    def run_naive(twin):
        rng = np.random.Generator(dpcore.ChaCha20(5))
        return twin(events, dpcore.discrete_laplace(scale, size, random_state=rng))

    if contender == "dpcore-counter":
        out = benchmark.pedantic(run_dpcore, rounds=3, iterations=1)
    elif contender == "numpy-counter":
        out = benchmark.pedantic(run_naive, args=(numpy_counter,), rounds=3, iterations=1)
    else:
        out = benchmark.pedantic(run_naive, args=(python_counter,), rounds=1, iterations=1)
    np.testing.assert_array_equal(out, run_dpcore())  # same seed, same noise: same releases
    err = out - np.cumsum(events)
    assert abs(err.mean()) < 10 * math.sqrt(math.log2(size) + 1) * scale


# ------------------------------------------------------------------------------------------------
# MWEM


def numpy_mwem(counts, q, epsilon, rounds, replay, rng):
    """Straightforward MWEM: a dense 0/1 query matrix, all answers by q @ a, every update a
    whole-domain exp and renormalisation; draws from ``rng`` in dpcore's order (count noise,
    then per round the exact EM and the measurement noise), so its output is dpcore's."""
    from dpcore import discrete_laplace, selection
    from dpcore._release.sums import IntegerNoise

    step = epsilon / (2 * rounds + 1)
    scale = IntegerNoise.calibrate("laplace", 1, step, 0.0).scale
    truth = q @ counts
    total = max(int(counts.sum() + discrete_laplace(scale, 1, random_state=rng)[0]), 1)
    a = np.full(counts.size, total / counts.size)
    average = np.zeros(counts.size)
    done = []
    for _ in range(rounds):
        pick = selection.exponential(np.abs(q @ a - truth), sensitivity=1.0, epsilon=step,
                                     method="exact", random_state=rng)
        done.append((pick, truth[pick] + discrete_laplace(scale, 1, random_state=rng)[0]))
        for pick, m in [done[-1]] + done * replay:
            a = a * np.exp(q[pick] * (m - q[pick] @ a) / (2 * total))
            a = a * total / a.sum()
        average += a
    return average / rounds


MWEM_BINS, MWEM_QUERIES, MWEM_ROUNDS, MWEM_REPLAY = 1024, 1000, 30, 10


def mwem_problem():
    g = np.random.default_rng(7)
    x = np.concatenate([g.normal(0.3, 0.05, 50_000), g.normal(0.7, 0.1, 50_000)])
    lo, hi = np.sort(g.integers(0, MWEM_BINS + 1, (2, MWEM_QUERIES)), axis=0)
    q = np.zeros((MWEM_QUERIES, MWEM_BINS))
    for i, (a, b) in enumerate(zip(lo, hi)):
        q[i, a:b] = 1.0
    counts = np.histogram(x, bins=MWEM_BINS, range=(0, 1))[0].astype(np.float64)
    return x, np.ascontiguousarray(lo), np.ascontiguousarray(hi), q, counts


@pytest.mark.parametrize("contender", ["dpcore-mwem", "numpy-mwem"])
def test_mwem(benchmark, contender):
    dpcore = dpcore_api()
    from dpcore import publish

    x, lo, hi, q, counts = mwem_problem()
    record(benchmark, n=MWEM_ROUNDS, contender=contender,
           role=DPCORE if contender.startswith("dpcore") else NAIVE,
           group="publish-mwem-1024x1000")

    def run_dpcore():
        return publish.mwem(x, bins=MWEM_BINS, range=(0, 1), queries=(lo, hi), epsilon=1.0,
                            rounds=MWEM_ROUNDS, replay=MWEM_REPLAY,
                            random_state=np.random.Generator(dpcore.ChaCha20(9))).histogram

    def run_numpy():
        return numpy_mwem(counts, q, 1.0, MWEM_ROUNDS, MWEM_REPLAY,
                          np.random.Generator(dpcore.ChaCha20(9)))

    if contender == "dpcore-mwem":
        out = benchmark.pedantic(run_dpcore, rounds=5, iterations=1)
    else:
        out = benchmark.pedantic(run_numpy, rounds=2, iterations=1)
    # same seed, same draws: the same synthetic data (so the same error), up to rounding
    np.testing.assert_allclose(out, run_dpcore(), rtol=1e-8, atol=1e-8 * x.size)


def mwem_report(repeats=3):
    """Wall time and workload error of dpcore's MWEM against the NumPy twin (same seeds)."""
    import time

    import dpcore
    from dpcore import publish

    x, lo, hi, q, counts = mwem_problem()
    truth = q @ counts
    times = {"dpcore": [], "numpy": []}
    errors = {"dpcore": [], "numpy": []}
    for r in range(repeats):
        t = time.perf_counter()
        h = publish.mwem(x, bins=MWEM_BINS, range=(0, 1), queries=(lo, hi), epsilon=1.0,
                         rounds=MWEM_ROUNDS, replay=MWEM_REPLAY,
                         random_state=np.random.Generator(dpcore.ChaCha20(r))).histogram
        times["dpcore"].append(time.perf_counter() - t)
        errors["dpcore"].append(np.mean(np.abs(q @ h - truth)))
        t = time.perf_counter()
        h = numpy_mwem(counts, q, 1.0, MWEM_ROUNDS, MWEM_REPLAY,
                       np.random.Generator(dpcore.ChaCha20(r)))
        times["numpy"].append(time.perf_counter() - t)
        errors["numpy"].append(np.mean(np.abs(q @ h - truth)))
    uniform = np.mean(np.abs(q @ np.full(MWEM_BINS, counts.sum() / MWEM_BINS) - truth))
    print(f"MWEM, {MWEM_BINS} bins, {MWEM_QUERIES} random ranges, n = {x.size}, T = "
          f"{MWEM_ROUNDS}, replay = {MWEM_REPLAY}, epsilon = 1, {repeats} seeds:")
    for k in times:
        print(f"  {k:6s} median {np.median(times[k]) * 1e3:8.1f} ms, mean |error| per query "
              f"{np.mean(errors[k]):.2f}")
    print(f"  speed-up {np.median(times['numpy']) / np.median(times['dpcore']):.1f}x; uniform "
          f"histogram's error {uniform:.1f}")


# ------------------------------------------------------------------------------------------------
# Privelet and the matrix mechanism: error reports (exact formulas against measured errors)


@pytest.mark.parametrize("contender", ["dpcore-privelet", "numpy-haar"])
def test_privelet(benchmark, contender):
    """Privelet's transform pair on 2**20 bins: the kernel against a NumPy twin (the same
    heap-ordered unnormalised Haar transform, level by level with reshapes)."""
    dpcore_api()
    from dpcore import _publish

    n = 2**20
    x = np.random.default_rng(8).integers(0, 100, (1, n)).astype(np.int64)
    record(benchmark, n=n, contender=contender,
           role=DPCORE if contender.startswith("dpcore") else NAIVE, group="publish-haar-2^20")

    def kernel():
        out = np.empty_like(x)
        _publish.haar_forward(x, out, np.empty(2 * n, dtype=np.int64))
        return out[0]

    def numpy_haar():
        out = np.empty(n, dtype=np.int64)
        level = x[0]
        while level.size > 1:
            pairs = level.reshape(-1, 2)
            out[level.size // 2:level.size] = pairs[:, 0] - pairs[:, 1]
            level = pairs.sum(axis=1)
        out[0] = level[0]
        return out

    out = benchmark(kernel if contender == "dpcore-privelet" else numpy_haar)
    np.testing.assert_array_equal(out, numpy_haar())


def privelet_report(n=2**16, runs=20):
    """Exact and measured MSE of long ranges (lo in [0, N/4), hi in [3N/4, N]): Privelet
    against the flat histogram (exact: length x Var DLap(1 / epsilon))."""
    from dpcore import publish
    from dpcore._release.sums import IntegerNoise

    g = np.random.default_rng(2016)
    lo, hi = g.integers(0, n // 4, 100), g.integers(3 * n // 4, n + 1, 100)
    w = publish.privelet([], bins=n, range=(0, 1), epsilon=1.0, random_state=1)
    exact = np.mean([w.range_variance(int(a), int(b)) for a, b in zip(lo, hi)])
    flat = np.mean((hi - lo) * IntegerNoise.calibrate("laplace", 1, 1.0, 0.0).variance)
    measured = np.mean([np.mean(publish.privelet([], bins=n, range=(0, 1), epsilon=1.0,
                                                 random_state=s).range_count(lo, hi) ** 2)
                        for s in range(2, 2 + runs)])
    print(f"Privelet, N = {n}, epsilon = 1, 100 long ranges: MSE exact {exact:.0f}, measured "
          f"({runs} releases) {measured:.0f}; flat histogram exact {flat:.0f}: "
          f"{flat / exact:.1f}x lower (measured {flat / measured:.1f}x)")


def matrix_report(n=32, draws=20000):
    """Measured total squared error of whole matrix-mechanism releases (all ranges of n bins,
    data 0) against expected_error, per strategy."""
    from dpcore import publish

    lo, hi = np.triu_indices(n + 1, 1)
    w = np.zeros((lo.size, n))
    for i, (a, b) in enumerate(zip(lo, hi)):
        w[i, a:b] = 1.0
    for strategy in publish.STRATEGIES:
        errs = np.array([np.sum(publish.matrix_mechanism(
            [], bins=n, range=(0, 1), workload=w, epsilon=1.0, strategy=strategy,
            random_state=s).answers ** 2) for s in range(draws)])
        f = publish.expected_error(w, strategy, epsilon=1.0)
        print(f"matrix mechanism, {strategy:12s}: formula {f:10.1f}, measured {errs.mean():10.1f}"
              f" +- {errs.std() / math.sqrt(draws):.1f} ({draws} releases), ratio "
              f"{errs.mean() / f:.4f}")


def error_report(horizon=10**6, epsilon=1.0, runs=10):
    """Mean over ``runs`` of the MSE over all T steps: binary-tree counter against per-event
    noise (Chan-Shi-Song's simple mechanism I), with the exact expectations."""
    from dpcore import discrete_laplace, publish

    g = np.random.default_rng(6)
    one = publish.ContinualCounter(epsilon, 1).noise  # DLap(1 / epsilon) per event
    tree, naive = [], []
    for r in range(runs):
        events = g.integers(0, 2, horizon)
        c = publish.ContinualCounter(epsilon, horizon, random_state=100 + r)
        tree.append(np.mean((c.extend(events) - np.cumsum(events)) ** 2))
        z = discrete_laplace(one.scale, horizon, random_state=200 + r)
        naive.append(np.mean(np.cumsum(z).astype(np.float64) ** 2))
    exact_tree = float(np.mean(c.variance(np.arange(1, horizon + 1))))
    exact_naive = one.variance * (horizon + 1) / 2
    print(f"T = {horizon}, epsilon = {epsilon}, {runs} runs: RMS error binary tree "
          f"{math.sqrt(np.mean(tree)):.1f} (exact {math.sqrt(exact_tree):.1f}), per-event noise "
          f"{math.sqrt(np.mean(naive)):.1f} (exact {math.sqrt(exact_naive):.1f}); ratio "
          f"{math.sqrt(np.mean(naive) / np.mean(tree)):.1f} (exact "
          f"{math.sqrt(exact_naive / exact_tree):.1f})")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "mwem":
        mwem_report()
    elif len(sys.argv) >= 2 and sys.argv[1] == "privelet":
        privelet_report()
    elif len(sys.argv) >= 2 and sys.argv[1] == "matrix":
        matrix_report(draws=int(float(sys.argv[2])) if len(sys.argv) > 2 else 20000)
    elif len(sys.argv) >= 2 and sys.argv[1] == "error":
        error_report(int(float(sys.argv[2])) if len(sys.argv) > 2 else 10**6)
