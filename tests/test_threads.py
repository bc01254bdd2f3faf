"""Threaded kernels (issue 29): set_num_threads / get_num_threads, the per-block stream rule (a
seeded output is the same for 1, 2 and 8 threads; small calls unchanged), the laws under 2
threads, threadpoolctl and environment limits, fork safety and Ctrl-C."""
import _thread
import math
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

from _gof import (ALPHA, chisquare_pvalue, dgauss_pmf, dlap_pmf, exact_path, integer_pvalue,
                  z_critical)

import dpcore
from dpcore import (
    _dpcore_threads, _histogram, _local, _noise, _noise_grid, _noise_snapping, _random, _select,
    mechanisms,
)
from dpcore._release import bins as release_bins
from dpcore.selection import ExponentialMechanism

THREAD_COUNTS = (1, 2, 8)
BIG = _noise.THREAD_MIN * 2 + 12345  # three blocks, the last one partial


# ------------------------------------------------------------------------------------------------
# set_num_threads / get_num_threads

def test_set_num_threads_validates(threads):
    for bad in ("2", 2.0, 1.5, True, [2]):
        with pytest.raises(TypeError, match="n must be an int"):
            dpcore.set_num_threads(bad)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="n must be >= 1"):
            dpcore.set_num_threads(bad)
    threads(np.int64(3))
    assert dpcore.get_num_threads() == 3
    threads(None)
    assert dpcore.get_num_threads() == _dpcore_threads.default_limit()


def test_default_follows_affinity_and_environment(monkeypatch):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    monkeypatch.delenv("DPCORE_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert _dpcore_threads.default_limit() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what joblib sets in its workers
    assert _dpcore_threads.default_limit() == 1
    monkeypatch.setenv("DPCORE_NUM_THREADS", str(cores + 5))  # first found wins, capped by cores
    assert _dpcore_threads.default_limit() == cores
    monkeypatch.setenv("DPCORE_NUM_THREADS", "garbage")  # ignored
    assert _dpcore_threads.default_limit() == 1


def test_threadpoolctl_limits_apply(threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    threads(2)
    info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "dpcore"]
    assert len(info) == 1 and info[0]["num_threads"] == 2
    with threadpoolctl.threadpool_limits(limits=1):
        assert dpcore.get_num_threads() == 1
    assert dpcore.get_num_threads() == 2


def test_threadpoolctl_is_optional_and_found_when_imported_later():
    """dpcore's import does not import threadpoolctl; importing it afterwards registers dpcore's
    controller (the sys.meta_path hook)."""
    pytest.importorskip("threadpoolctl")
    code = ("import sys, dpcore; assert 'threadpoolctl' not in sys.modules; "
            "import threadpoolctl; "
            "print([i['num_threads'] for i in threadpoolctl.threadpool_info() "
            "if i['user_api'] == 'dpcore'])")
    env = dict(os.environ, DPCORE_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1]"


@pytest.mark.slow
def test_joblib_workers_do_not_oversubscribe():
    """In joblib's process workers (loky), which cap OMP_NUM_THREADS at cores // n_jobs, each
    worker's dpcore uses at most that many threads."""
    joblib = pytest.importorskip("joblib")
    counts = joblib.Parallel(n_jobs=2)(joblib.delayed(dpcore.get_num_threads)() for _ in range(2))
    assert all(1 <= c <= max(1, joblib.cpu_count() // 2) for c in counts), counts


# ------------------------------------------------------------------------------------------------
# The stream rule

def test_block_streams_are_chacha20_with_the_block_as_stream_id():
    """Block b reads the RFC 8439 keystream of the drawn key with words 14-15 = b, counter 0."""
    for block in (0, 1, 2**32 + 7):
        key, words = _random._stream_words(dpcore.ChaCha20(5), block, 16)
        key_bytes = key.to_bytes(32, "little")
        nonce = (0).to_bytes(4, "little") + block.to_bytes(8, "little")  # words 13, 14, 15
        want = []
        for counter in (0, 1):
            raw = _random._chacha20_block(key_bytes, counter, nonce)
            want.extend(np.frombuffer(raw, dtype="<u8").tolist())
        assert words.tolist() == want


def test_key_is_four_words_of_the_callers_generator():
    a, b = dpcore.ChaCha20(9), dpcore.ChaCha20(9)
    key, _ = _random._stream_words(a, 0, 1)
    w = b.random_raw(4)
    assert key == sum(int(v) << (64 * i) for i, v in enumerate(w))
    assert a.random_raw() == b.random_raw()


def _noise_calls():
    """(name, function of (n, seed) -> output) for every threaded noise kernel."""
    x = np.linspace(-50.0, 50.0, BIG)

    def into(kernel, dtype, *args):
        def call(n, seed):
            out = np.empty(n, dtype=dtype)
            kernel(out, *args, random_state=seed)
            return out
        return call

    def add(kernel, param):
        def call(n, seed):
            counts = np.arange(n, dtype=np.int64) % 5
            kernel(counts, param, seed)
            return counts
        return call

    def fused(kernel, *args):
        def call(n, seed):
            out = np.empty(n)
            kernel(out, x[:n], *args, random_state=seed)
            return out
        return call

    return [
        ("discrete_laplace", into(_noise.discrete_laplace_into, np.int64, 2.5)),
        ("discrete_gaussian", into(_noise.discrete_gaussian_into, np.int64, 100.0)),
        ("discrete_laplace_add", add(_noise.discrete_laplace_add_into, 0.7)),
        ("discrete_gaussian_add", add(_noise.discrete_gaussian_add_into, 3.0)),
        ("laplace_grid", fused(_noise_grid.discrete_laplace_grid_into, 2.0**-20, 40.0, 2.0**20)),
        ("gaussian_grid", fused(_noise_grid.discrete_gaussian_grid_into, 2.0**-10, 1500.0)),
        ("snapping", fused(_noise_snapping.snapping_into, 1.0, 0.125, 45.0)),
    ]


@pytest.mark.parametrize("name, call", _noise_calls(), ids=[c[0] for c in _noise_calls()])
def test_noise_seeded_output_independent_of_thread_count(name, call, threads):
    outputs = []
    for count in THREAD_COUNTS:
        threads(count)
        outputs.append(call(BIG, 2024))
    for out in outputs[1:]:
        np.testing.assert_array_equal(out, outputs[0])
    # a different seed gives different noise (the comparison above can fail)
    assert not np.array_equal(call(BIG, 2025), outputs[0])


def test_small_calls_draw_from_the_callers_generator(threads):
    """Below THREAD_MIN nothing changed: the noise comes straight from the caller's stream (so
    a call of THREAD_MIN - 1 values uses many words; a threaded call exactly four)."""
    n = _noise.THREAD_MIN - 1
    for count in (1, 2):
        threads(count)
        gen = dpcore.ChaCha20(3)
        _noise.discrete_laplace_into(np.empty(n, dtype=np.int64), 2.0, gen)
        assert gen.state["state"]["counter"] * 8 + gen.state["state"]["word"] > 4 * n // 8
        gen = dpcore.ChaCha20(3)
        _noise.discrete_laplace_into(np.empty(n + 1, dtype=np.int64), 2.0, gen)
        assert gen.state["state"]["counter"] == 0 and gen.state["state"]["word"] == 4


# ------------------------------------------------------------------------------------------------
# Laws under 2 threads (alpha = ALPHA each; the power checks use the same sample sizes)

N_LAW = 4 * _noise.THREAD_MIN


@pytest.mark.parametrize("kernel, pmf, param", [
    (_noise.discrete_laplace_into, dlap_pmf, 0.4), (_noise.discrete_laplace_into, dlap_pmf, 3.0),
    (_noise.discrete_gaussian_into, dgauss_pmf, 1.0),
    (_noise.discrete_gaussian_into, dgauss_pmf, 7.3)])
def test_integer_samplers_law_two_threads(kernel, pmf, param, threads):
    threads(2)
    out = np.empty(N_LAW, dtype=np.int64)
    kernel(out, param, 31)
    support = np.arange(-int(12 * param) - 3, int(12 * param) + 4)
    assert integer_pvalue(out, pmf(param), support) > ALPHA
    assert integer_pvalue(out, pmf(param * 1.05), support) < ALPHA  # power


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["discrete_laplace", "discrete_gaussian", "snapping"])
def test_exact_finishing_inside_blocks(kernel, threads):
    """Every decision sent to the exact rational path (the test hook): the blocks finish their
    pending draws with the GIL from their own streams; the output is the same for 1 and 2
    threads and the law is exact (alpha = ALPHA; 2**16 + 3 draws, two blocks)."""
    n = _noise.THREAD_MIN + 3
    outputs = []
    with exact_path(_noise):
        for count in (1, 2):
            threads(count)
            if kernel == "snapping":
                out = np.empty(n)
                _noise_snapping.snapping_into(out, np.zeros(n), 1.0, 0.125, 100.0, 51)
            else:
                out = np.empty(n, dtype=np.int64)
                getattr(_noise, kernel + "_into")(out, 1.5, 51)
            outputs.append(out)
    np.testing.assert_array_equal(outputs[0], outputs[1])
    if kernel != "snapping":
        pmf = dlap_pmf(1.5) if kernel == "discrete_laplace" else dgauss_pmf(1.5)
        assert integer_pvalue(outputs[0], pmf, np.arange(-20, 21)) > ALPHA


def test_add_and_grid_kernels_law_two_threads(threads):
    """The adders and the fused grid releases add the same exact laws (on grid-point inputs the
    released noise is out - x in grid units)."""
    threads(2)
    counts = np.full(N_LAW, 7, dtype=np.int64)
    _noise.discrete_laplace_add_into(counts, 1.5, 33)
    assert integer_pvalue(counts - 7, dlap_pmf(1.5), np.arange(-21, 22)) > ALPHA
    counts = np.full(N_LAW, -3, dtype=np.int64)
    _noise.discrete_gaussian_add_into(counts, 2.0, 34)
    assert integer_pvalue(counts + 3, dgauss_pmf(2.0), np.arange(-16, 17)) > ALPHA
    grid = 0.25
    x = np.round(np.linspace(-9, 9, N_LAW) / grid) * grid
    out = np.empty(N_LAW)
    _noise_grid.discrete_laplace_grid_into(out, x, grid, math.inf, 2.0, 35)
    assert integer_pvalue(np.rint((out - x) / grid), dlap_pmf(2.0), np.arange(-27, 28)) > ALPHA
    _noise_grid.discrete_gaussian_grid_into(out, x, grid, 1.5, 36)
    assert integer_pvalue(np.rint((out - x) / grid), dgauss_pmf(1.5), np.arange(-12, 13)) > ALPHA


def test_snapping_law_two_threads(threads):
    """Snapping of x = 0 with lam and grid 2**-3: P(out = k g) is the Laplace(lam) mass of the
    rounding cell [(k - 1/2) g, (k + 1/2) g) (ties up), away from the bound; the cells of the
    continuous law carry the mass up to the floating-point error of ln(U*) (far below what
    2**18 samples can see)."""
    threads(2)
    lam, grid, bound = 1.0, 0.125, 1000.0
    out = np.empty(N_LAW)
    _noise_snapping.snapping_into(out, np.zeros(N_LAW), lam, grid, bound, 37)
    ks = np.arange(-40, 41)
    cdf = lambda t: np.where(t < 0, 0.5 * np.exp(t / lam), 1 - 0.5 * np.exp(-t / lam))
    edges = np.concatenate([[-np.inf], (ks - 0.5) * grid, [(ks[-1] + 0.5) * grid, np.inf]])
    probs = np.diff(cdf(edges))
    counts = np.histogram(out / grid, bins=np.concatenate(
        [[-np.inf], ks - 0.5, [ks[-1] + 0.5, np.inf]]))[0]
    assert chisquare_pvalue(counts, probs / probs.sum()) > ALPHA
    lam_wrong = 1.05
    cdf_w = lambda t: np.where(t < 0, 0.5 * np.exp(t / lam_wrong), 1 - 0.5 * np.exp(-t / lam_wrong))
    probs_w = np.diff(cdf_w(edges))
    assert chisquare_pvalue(counts, probs_w / probs_w.sum()) < ALPHA  # power


# ------------------------------------------------------------------------------------------------
# The releases' input check in the kernel (finite_magnitude): before any charge or draw

@pytest.mark.parametrize("n", [7, BIG])
def test_finite_magnitude_is_the_largest_magnitude(n, threads):
    x = np.random.default_rng(5).normal(0.0, 3.0, n)
    x[n // 2] = -1e300  # the largest is negative
    for count in (1, 2):
        threads(count)
        assert _noise_grid.finite_magnitude(x) == np.abs(x).max() == 1e300
    assert _noise_grid.finite_magnitude(np.empty(0)) == 0.0
    assert _noise_grid.finite_magnitude(np.array([-0.0, 5e-324])) == 5e-324


# positions: first value, inside the first block, the first value of a later block, the last
# value of the last (partial) block
@pytest.mark.parametrize("where", [0, 5, 2 * _noise.THREAD_MIN, BIG - 1])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("release", ["laplace", "gaussian"])
def test_non_finite_value_rejected_before_any_charge(release, bad, where, threads):
    x = np.linspace(-5.0, 5.0, BIG)
    x[where] = bad
    assert math.isnan(_noise_grid.finite_magnitude(x))
    for count in (1, 2):
        threads(count)
        accountant = dpcore.Accountant(epsilon=10.0, delta=1e-3)
        gen = dpcore.ChaCha20(9)
        state = gen.state
        with pytest.raises(ValueError, match="value must not contain NaN or infinite values"):
            if release == "laplace":
                dpcore.laplace(x, sensitivity=1.0, epsilon=1.0, accountant=accountant,
                               random_state=gen)
            else:
                dpcore.gaussian(x, sensitivity=1.0, rho=0.5, accountant=accountant,
                                random_state=gen)
        assert accountant.spent == (0.0, 0.0) and gen.state == state  # nothing charged or drawn
    # the same input without the bad value is released
    x[where] = 0.0
    assert dpcore.laplace(x, sensitivity=1.0, epsilon=1.0, random_state=1).shape == x.shape


def test_mechanism_release_checks_values_in_the_kernel(threads):
    threads(2)
    x = np.zeros(BIG)
    x[-1] = np.nan
    accountant = dpcore.Accountant(epsilon=10.0)
    for mech in (mechanisms.LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, size=BIG),
                 mechanisms.GaussianMechanism.calibrate(sensitivity=1.0, rho=0.5, size=BIG)):
        with pytest.raises(ValueError, match="value must not contain NaN"):
            mech.release(x, accountant=accountant, random_state=3)
    assert accountant.spent == (0.0, 0.0)


# ------------------------------------------------------------------------------------------------
# Histogram counting (no randomness: the counts must equal numpy's for any thread count)

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_counting_threaded_equals_numpy(dtype, threads):
    rng = np.random.default_rng(17)
    n = _histogram.THREAD_MIN + 4321
    x = rng.normal(0.1, 1.3, size=(n, 2)).astype(dtype)
    x[::997, 1] = np.nan  # non-finite rows are reported, not counted
    x[5::1001, 0] = 9.0    # outside: dropped
    grid = release_bins.BinGrid.make(40, [(-3.0, 3.0)] * 2, 2)
    finite = x[np.isfinite(x).all(axis=1)]
    want = np.histogramdd(finite, bins=40, range=[(-3.0, 3.0)] * 2)[0].astype(np.int64)
    for level in (-1, 1):
        saved = _histogram._simd_level()
        _histogram._simd_level(level)
        try:
            for count in THREAD_COUNTS if level == 1 else (2,):
                threads(count)
                counts = np.full(grid.size, 3, dtype=np.int64)  # counts are added to
                dropped, bad = _histogram.count_into(x, *grid.kernel_args, False, counts)
                np.testing.assert_array_equal(counts.reshape(grid.shape) - 3, want)
                assert bad == int(np.sum(~np.isfinite(x).all(axis=1)))
                assert dropped == n - int(want.sum())
        finally:
            _histogram._simd_level(saved)


# ------------------------------------------------------------------------------------------------
# Local randomizers

THREE_QUARTERS = 3 * 2**62  # keep probability 3/4, exactly (thresholds are out of 2**64)
N_LOCAL = 4 * _local.THREAD_MIN


def _local_calls(n):
    """(name, function of seed -> outputs) for every threaded local randomizer on n records."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 6, n).astype(np.int64)
    bits = rng.integers(0, 2, n).astype(np.uint8)
    x = rng.uniform(-1, 1, n)

    def grr(seed):
        out = np.empty(n, dtype=np.int64)
        _local.grr_into(out, codes, 6, THREE_QUARTERS, seed)
        return (out,)

    def binary(seed):
        out = np.empty(n, dtype=np.uint8)
        _local.binary_rr_u8_into(out, bits, THREE_QUARTERS, seed)
        return (out,)

    def unary(seed):
        out = np.empty((n, 6), dtype=np.uint8)
        _local.unary_into(out, codes, THREE_QUARTERS, 2**62, seed)
        return (out,)

    def olh(seed):
        seeds, out = np.empty((n, 3), dtype=np.int64), np.empty(n, dtype=np.int64)
        _local.olh_into(seeds, out, codes, 5, THREE_QUARTERS, seed)
        return seeds, out

    def duchi(seed):
        out = np.empty(n, dtype=np.int8)
        _local.duchi_into(out, x, 3, 4, seed)
        return (out,)

    return [("grr", grr), ("binary", binary), ("unary", unary), ("olh", olh), ("duchi", duchi)]


@pytest.mark.parametrize("name", [c[0] for c in _local_calls(1)])
def test_local_seeded_output_independent_of_thread_count(name, threads):
    call = dict(_local_calls(BIG))[name]
    outputs = []
    for count in THREAD_COUNTS:
        threads(count)
        outputs.append(call(77))
    for out in outputs[1:]:
        for got, want in zip(out, outputs[0]):
            np.testing.assert_array_equal(got, want)
    assert not all(np.array_equal(a, b) for a, b in zip(call(78), outputs[0]))


def test_olh_support_threaded_equals_brute_force(threads):
    """The support counts of local hashing (split over candidates when n k >= 2**22) are the
    brute-force counts, for any thread count."""
    rng = np.random.default_rng(8)
    n, k, g, m = 70_000, 64, 7, 3  # 7**3 > 64: three base-7 digits
    seeds = rng.integers(0, g, size=(n, m + 1)).astype(np.int64)
    reports = rng.integers(0, g, n).astype(np.int64)
    digits = np.array([[(j // g**t) % g for t in range(m)] for j in range(k)], dtype=np.int64)
    hashes = (seeds[:, m][:, None] + seeds[:, :m] @ digits.T) % g  # n x k
    want = np.sum(hashes == reports[:, None], axis=0)
    assert n * k >= _local.SUPPORT_THREAD_MIN
    for count in THREAD_COUNTS:
        threads(count)
        counts = np.full(k, 2, dtype=np.int64)
        _local.olh_support(counts, seeds, reports, digits, g)
        np.testing.assert_array_equal(counts - 2, want)


def test_local_randomizers_law_two_threads(threads):
    """Each randomizer's exact probabilities on 2**18 records under 2 threads (chi-square, or z
    with Bonferroni over the cells of one sampler; power: the same data against keep
    probability 0.73 instead of 0.75)."""
    threads(2)
    n = N_LOCAL
    # k-ary RR, k = 5, every value 2: P(2) = 3/4, P(j) = 1/16 otherwise
    out = np.empty(n, dtype=np.int64)
    _local.grr_into(out, np.full(n, 2, dtype=np.int64), 5, THREE_QUARTERS, 41)
    counts = np.bincount(out, minlength=5)
    assert chisquare_pvalue(counts, [1 / 16, 1 / 16, 3 / 4, 1 / 16, 1 / 16]) > ALPHA
    wrong = 0.27 / 4
    assert chisquare_pvalue(counts, [wrong, wrong, 0.73, wrong, wrong]) < ALPHA
    # binary RR: out == bit with probability 3/4
    bits = (np.arange(n) % 2).astype(np.uint8)
    flipped = np.empty(n, dtype=np.uint8)
    _local.binary_rr_u8_into(flipped, bits, THREE_QUARTERS, 42)
    same = int(np.sum(flipped == bits))
    assert chisquare_pvalue([same, n - same], [0.75, 0.25]) > ALPHA
    assert chisquare_pvalue([same, n - same], [0.73, 0.27]) < ALPHA
    # unary: column 3 is 1 with probability 3/4, the others 1/4, independently
    rows = np.empty((n, 6), dtype=np.uint8)
    _local.unary_into(rows, np.full(n, 3, dtype=np.int64), THREE_QUARTERS, 2**62, 43)
    p = np.where(np.arange(6) == 3, 0.75, 0.25)
    z = np.abs(rows.mean(axis=0) - p) / np.sqrt(p * (1 - p) / n)
    assert z.max() < z_critical(n_checks=6)
    # OLH, g = 5: seeds uniform on Z_5; the report is the hash with probability 3/4
    seeds, reports = np.empty((n, 3), dtype=np.int64), np.empty(n, dtype=np.int64)
    values = np.arange(n, dtype=np.int64) % 25
    _local.olh_into(seeds, reports, values, 5, THREE_QUARTERS, 44)
    assert chisquare_pvalue(np.bincount(seeds.ravel(), minlength=5), [0.2] * 5) > ALPHA / 2
    hashed = (seeds[:, 2] + seeds[:, 0] * (values % 5) + seeds[:, 1] * (values // 5)) % 5
    kept = int(np.sum(reports == hashed))
    assert chisquare_pvalue([kept, n - kept], [0.75, 0.25]) > ALPHA / 2
    # Duchi, x = 1/2, keep 3/4: P(+1) = (1 + x (2 p - 1)) / 2 = 5/8
    signs = np.empty(n, dtype=np.int8)
    _local.duchi_into(signs, np.full(n, 0.5), 3, 4, 45)
    plus = int(np.sum(signs == 1))
    assert chisquare_pvalue([plus, n - plus], [0.625, 0.375]) > ALPHA
    assert chisquare_pvalue([plus, n - plus], [0.6, 0.4]) < ALPHA


# ------------------------------------------------------------------------------------------------
# Selection

N_CANDIDATES = _select.THREAD_MIN + 54321
SELECT_METHODS = ("exact", "gumbel", "permute-and-flip")


def _utilities():
    u = -np.abs(np.arange(N_CANDIDATES) - 700_000.0) / 20.0
    u[[3, 300_000, 1_000_000]] = u.max() + 0.5  # contenders in other blocks
    return u


@pytest.mark.parametrize("method", SELECT_METHODS + ("top_k",))
def test_selection_seeded_output_independent_of_thread_count(method, threads):
    u = _utilities()

    def call(seed):
        if method == "top_k":
            return dpcore.top_k(u, 4, sensitivity=1.0, epsilon=2.0, random_state=seed).tolist()
        return dpcore.exponential(u, sensitivity=1.0, epsilon=2.0, method=method,
                                  random_state=seed)

    for seed in (1, 2, 3):
        results = []
        for count in THREAD_COUNTS:
            threads(count)
            results.append(call(seed))
        assert results[1:] == results[:1] * 2, (seed, results)
    assert len({str(call(seed)) for seed in range(4, 12)}) > 1  # the seed matters


def test_exact_selection_merge_exact_path_is_thread_independent(threads):
    """With every comparison sent to the exact rational path (the test hook), the blocks' merge
    decides exactly too, and the result still does not depend on the thread count."""
    u = np.full(_select.THREAD_MIN + 7, -np.inf)
    u[[10, 2**16 + 5, 2**19, 2**20 + 3]] = [0.0, 0.3, -0.2, 0.1]
    _select._force_exact_path(True)
    try:
        results = []
        for count in (1, 2):
            threads(count)
            results.append([dpcore.exponential(u, sensitivity=1.0, epsilon=1.0, random_state=s)
                            for s in range(3)])
    finally:
        _select._force_exact_path(False)
    assert results[0] == results[1]
    assert set(results[0]) <= {10, 2**16 + 5, 2**19, 2**20 + 3}


def _winner_law(method, scale, u):
    """P(candidate i selected) for finite u: softmax(scale u) (exponential mechanism), or the
    report-noisy-max law with Exp(1) noise on scale u (permute-and-flip), by quadrature."""
    a = scale * np.asarray(u)
    if method != "permute-and-flip":
        w = np.exp(a - a.max())
        return w / w.sum()
    x = np.linspace(a.min(), a.max() + 60.0, 600_001)
    probs = []
    for i in range(len(a)):
        dens = np.where(x >= a[i], np.exp(-(x - a[i])), 0.0)
        for j in range(len(a)):
            if j != i:
                dens = dens * np.clip(1.0 - np.exp(-(x - a[j])), 0.0, None)
        probs.append(np.trapezoid(dens, x))
    probs = np.array(probs)
    return probs / probs.sum()


@pytest.mark.slow
@pytest.mark.parametrize("method", SELECT_METHODS + ("top_k",))
def test_selection_law_two_threads(method, threads):
    """Four finite candidates in four different blocks of 2**20 + 7 (the rest excluded), 400
    selections under 2 threads: chi-square against the mechanism's law at alpha = ALPHA, and
    power against the law at 1.5 times the scale. (Top-k: the first of two one-shot Gumbel
    picks has the exponential mechanism's law at the top-k scale.)"""
    threads(2)
    positions = [10, 2**16 + 5, 2**19, 2**20 + 3]
    values = [0.0, 2.0, 4.0, 6.0]
    u = np.full(_select.THREAD_MIN + 7, -np.inf)
    u[positions] = values
    if method == "top_k":
        mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=2.0, method="gumbel", k=2)
        picks = [int(mech.select_top_k(u, random_state=seed)[0]) for seed in range(400)]
    else:
        mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=1.0, method=method)
        picks = [mech.select(u, random_state=seed) for seed in range(400)]
    counts = [picks.count(p) for p in positions]
    assert sum(counts) == 400
    assert chisquare_pvalue(counts, _winner_law(method, mech.scale, values)) > ALPHA
    assert chisquare_pvalue(counts, _winner_law(method, 1.5 * mech.scale, values)) < ALPHA


# ------------------------------------------------------------------------------------------------
# The pool: Ctrl-C, errors, fork

@pytest.fixture
def ctrl_c():
    """Python's Ctrl-C handler for the test: a shell that starts pytest in the background sets
    SIGINT to ignored, and `_thread.interrupt_main` then does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_stops_between_blocks_after_started_blocks_finish(threads):
    """KeyboardInterrupt reaches the caller soon (not after all 1000 blocks), and only once no
    worker runs a block (they write into the caller's arrays). A kernel's block is C code and
    finishes; this Python block may be interrupted in the calling thread, so only the workers'
    blocks are tracked."""
    threads(2)
    started, finished = [], []
    lock = threading.Lock()

    def block(b):
        worker = threading.current_thread() is not threading.main_thread()
        if worker:
            with lock:
                started.append(b)
        if b == 1:
            _thread.interrupt_main()  # a Ctrl-C while blocks run
        time.sleep(0.02)
        if worker:
            with lock:
                finished.append(b)

    with pytest.raises(KeyboardInterrupt):
        _dpcore_threads.run_blocks(block, 1000)
    assert sorted(started) == sorted(finished)  # nothing still running
    assert len(started) < 100


@pytest.mark.usefixtures("ctrl_c")
@pytest.mark.parametrize("count", [1, 2])
def test_ctrl_c_interrupts_a_long_kernel(count, threads):
    """A compiled kernel runs no signal handler by itself: the pool checks between blocks, so a
    Ctrl-C during a long call stops it well before the end."""
    threads(count)
    out = np.empty(160 * _noise.THREAD_MIN, dtype=np.int64)
    start = time.perf_counter()
    _noise.discrete_laplace_into(out, 1.0, 1)
    full = time.perf_counter() - start
    timer = threading.Timer(full / 20, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        _noise.discrete_laplace_into(out, 1.0, 1)
        time.sleep(full)  # only if the kernel ignored the Ctrl-C (the test then fails here)
    interrupted = time.perf_counter() - start
    timer.join()
    assert interrupted < full / 2, (interrupted, full)


def test_worker_errors_reach_the_caller(threads):
    threads(2)

    def block(b):
        time.sleep(0.001)
        if b == 7:
            raise RuntimeError("block 7")

    with pytest.raises(RuntimeError, match="block 7"):
        _dpcore_threads.run_blocks(block, 64)


def test_every_block_runs_once(threads):
    for count in THREAD_COUNTS:
        threads(count)
        seen = []
        _dpcore_threads.run_blocks(seen.append, 100)
        assert sorted(seen) == list(range(100))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_pool_works_in_a_forked_child(threads):
    """The parent's pool is alive when it forks; the child's threaded call must not hang (it
    builds a new pool) and gives the parent's seeded output; the parent's workers were stopped
    before the fork."""
    threads(2)
    out = np.empty(BIG, dtype=np.int64)
    _noise.discrete_laplace_into(out, 1.0, 8)  # the pool now has a worker
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork of a threaded process
        pid = os.fork()
    if pid == 0:  # child
        try:
            child = np.empty(BIG, dtype=np.int64)
            _noise.discrete_laplace_into(child, 1.0, 8)
            os.write(write, b"1" if np.array_equal(child, out) else b"0")
        finally:
            os._exit(0)
    os.close(write)
    # the parent stopped its idle workers before forking (no fork of a multi-threaded process)
    assert not [t for t in threading.enumerate() if t.name.startswith("dpcore")]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung in a threaded kernel")
    assert os.read(read, 1) == b"1"
    os.close(read)


# ------------------------------------------------------------------------------------------------
# The noise kernels' shared tables (noise_bounds.h: one copy per kernel)

def test_the_neglog_bracket_tables_are_filled():
    """The bracket tables bracket -ln(u) (a table left at zero would give el = eu = k ln 2 + d);
    that every kernel sharing them fills its own copy: tests/test_kernel_sources.py."""
    el, eu = _noise._neglog_bracket(0.3)
    assert el < -math.log(0.3) < eu and eu - el < 2.0**-7


@pytest.mark.parametrize("n", [1000, BIG])
@pytest.mark.parametrize("unit", [4.0, 2.0**-20])
def test_snapping_unit_scaling_in_the_kernel(n, unit, threads):
    """snapping_into(unit=u) is snapping of x / u in sensitivity-1 units, multiplied back by u,
    as one IEEE division and one product per value (no scaled copy); x / u may overflow to inf,
    which the clamp maps to the bound. For 1 and 2 threads."""
    x = np.random.default_rng(8).uniform(-300.0, 300.0, n) * unit
    x[::101] = 1.7e308
    x[1::101] = -1.7e308
    lam, grid, bound = 2.0, 0.25, 120.0
    for count in (1, 2):
        threads(count)
        fused = np.empty(n)
        _noise_snapping.snapping_into(fused, x, lam, grid, bound, 77, unit=unit)
        with np.errstate(over="ignore"):
            scaled = x / unit
        ref = np.empty(n)
        _noise_snapping.snapping_into(ref, scaled, lam, grid, bound, 77)
        np.testing.assert_array_equal(fused, ref * unit)
        assert np.all(np.abs(fused) <= bound * unit)
