"""The noise kernel (dpcore._noise): exact laws of the discrete samplers, snapping's pieces, and
the exact fallback paths taken and right."""
import math
from contextlib import contextmanager

import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue, integer_pvalue, z_critical

import dpcore
from dpcore import _noise


def dlap_pmf(scale):
    q = math.exp(-1.0 / scale)
    c = (1 - q) / (1 + q)
    return lambda k: c * q ** abs(k)


def dgauss_pmf(sigma):
    half = int(60 * sigma) + 20
    ks = np.arange(-half, half + 1)
    logw = -(ks.astype(float) ** 2) / (2 * sigma**2)
    norm = np.exp(logw).sum()
    return lambda k: math.exp(-(k * k) / (2 * sigma**2)) / norm


def dgauss_variance(sigma2):
    half = int(60 * math.sqrt(sigma2)) + 20
    ks = np.arange(-half, half + 1).astype(float)
    w = np.exp(-(ks**2) / (2 * sigma2))
    return float((w * ks**2).sum() / w.sum())


@contextmanager
def exact_path():
    _noise._force_exact_path(True)
    try:
        yield
    finally:
        _noise._force_exact_path(False)


N = 200_000


@pytest.mark.parametrize("scale", [0.3, 1.0, 1.5, 3.0, 37.2])
def test_discrete_laplace_law(scale):
    x = dpcore.discrete_laplace(scale, size=N, random_state=int(scale * 1000))
    support = np.arange(-int(12 * scale) - 3, int(12 * scale) + 4)
    assert integer_pvalue(x, dlap_pmf(scale), support) > ALPHA


@pytest.mark.parametrize("scale", [2.0**21 + 0.375, 2.0**40 / 3])
def test_discrete_laplace_law_large_scale(scale):
    """Large scales use the refined uniform; test the law on bins of width scale/2."""
    x = dpcore.discrete_laplace(scale, size=N, random_state=5)
    q = lambda k: math.exp(-k / scale)  # P(Z >= k) = q^k / (1 + q1) for k >= 1
    q1 = math.exp(-1 / scale)
    edges = [int(round(e * scale)) for e in np.arange(0.5, 8.01, 0.5)]
    # cells: Z <= -e_last, ..., (-e2, -e1], ( -e1, e1), [e1, e2), ..., >= e_last
    def tail(k):  # P(Z >= k), k >= 1
        return q(k) / (1 + q1)
    probs, counts = [], []
    probs.append(tail(edges[-1])); counts.append(np.sum(x <= -edges[-1]))
    for a, b in zip(edges[::-1][:-1], edges[::-1][1:]):  # a > b
        probs.append(tail(b) - tail(a)); counts.append(np.sum((x > -a) & (x <= -b)))
    probs.append(1 - 2 * tail(edges[0])); counts.append(np.sum(np.abs(x) < edges[0]))
    for a, b in zip(edges[:-1], edges[1:]):
        probs.append(tail(a) - tail(b)); counts.append(np.sum((x >= a) & (x < b)))
    probs.append(tail(edges[-1])); counts.append(np.sum(x >= edges[-1]))
    assert sum(counts) == N
    assert chisquare_pvalue(counts, np.array(probs) / sum(probs)) > ALPHA


@pytest.mark.parametrize("scale, variance", [(1.0, 1.8413472), (1.5, 4.3369727), (3.0, 17.834255)])
def test_discrete_laplace_variance(scale, variance):
    x = dpcore.discrete_laplace(scale, size=N, random_state=11).astype(float)
    pmf = dlap_pmf(scale)
    ks = np.arange(-int(80 * scale), int(80 * scale) + 1)
    p = np.array([pmf(k) for k in ks])
    assert abs((p * ks**2).sum() - variance) < 1e-6  # the documented constant is the law's
    mu4 = (p * ks.astype(float) ** 4).sum()
    se = math.sqrt((mu4 - variance**2) / N)
    assert abs(np.mean(x**2) - variance) < z_critical(n_checks=3) * se


def test_discrete_laplace_power():
    """The same test must reject a 5% wrong scale."""
    x = dpcore.discrete_laplace(1.05, size=N, random_state=3)
    assert integer_pvalue(x, dlap_pmf(1.0), np.arange(-15, 16)) < ALPHA


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 7.3])
def test_discrete_gaussian_law(sigma):
    x = dpcore.discrete_gaussian(sigma, size=N, random_state=int(sigma * 100))
    support = np.arange(-int(7 * sigma) - 2, int(7 * sigma) + 3)
    assert integer_pvalue(x, dgauss_pmf(sigma), support) > ALPHA


@pytest.mark.parametrize("sigma2, variance", [(0.25, 0.2150127), (1.0, 0.99999979), (4.0, 4.0)])
def test_discrete_gaussian_variance(sigma2, variance):
    assert abs(dgauss_variance(sigma2) - variance) < 1e-6
    x = dpcore.discrete_gaussian(math.sqrt(sigma2), size=N, random_state=12).astype(float)
    se = math.sqrt(2 * variance**2 / N) * 1.1  # Gaussian-like fourth moment, 10% margin
    assert abs(np.mean(x**2) - variance) < z_critical(n_checks=3) * se


def test_discrete_gaussian_large_sigma():
    sigma = 1234567.25
    x = dpcore.discrete_gaussian(sigma, size=N, random_state=8).astype(float)
    from scipy import stats

    # At this sigma the discrete law is the normal law to ~1e-300 in CDF on bins of width sigma/4.
    edges = np.arange(-4, 4.01, 0.25) * sigma
    counts = np.histogram(x, bins=np.concatenate([[-np.inf], edges, [np.inf]]))[0]
    cdf = stats.norm.cdf(np.concatenate([[-np.inf], edges, [np.inf]]) / sigma)
    assert chisquare_pvalue(counts, np.diff(cdf)) > ALPHA


def test_discrete_gaussian_power():
    x = dpcore.discrete_gaussian(2.1, size=N, random_state=4)
    assert integer_pvalue(x, dgauss_pmf(2.0), np.arange(-16, 17)) < ALPHA


@pytest.mark.parametrize("scale", [0.7, 2.5])
def test_discrete_laplace_exact_path_law(scale):
    """Every magnitude decided by the exact rational fallback: the law is still exact."""
    with exact_path():
        x = dpcore.discrete_laplace(scale, size=4000, random_state=21)
    assert integer_pvalue(x, dlap_pmf(scale), np.arange(-10, 11)) > ALPHA


def test_discrete_gaussian_exact_path_law():
    with exact_path():
        x = dpcore.discrete_gaussian(1.5, size=3000, random_state=22)
    assert integer_pvalue(x, dgauss_pmf(1.5), np.arange(-8, 9)) > ALPHA


def test_exact_path_power():
    """The exact-path test has power: the wrong scale is rejected at the same sample size."""
    with exact_path():
        x = dpcore.discrete_laplace(3.5, size=4000, random_state=23)
    assert integer_pvalue(x, dlap_pmf(2.5), np.arange(-10, 11)) < ALPHA


def test_fast_path_decides_almost_everything():
    values, decided = _noise._dlap_magnitude_fast(1000.0, 100_000, random_state=1)
    assert decided.mean() > 0.9999
    values, decided = _noise._dlap_magnitude_fast(2.0**43, 100_000, random_state=1)
    assert decided.mean() > 0.999


def test_fast_magnitude_agrees_with_exact():
    """The exact fallback's floor(-ln(u) * scale) equals the float value away from boundaries."""
    from fractions import Fraction

    from dpcore import _exact

    rng = np.random.default_rng(2)
    u = 0.3
    lo, hi = Fraction(u), Fraction(math.nextafter(u, 1.0))
    bits = lambda: int(rng.integers(0, 2**64, dtype=np.uint64))
    for scale in (1.0, 10.0, 12345.5):
        k = _exact.floor_neglog_scaled(lo, hi, Fraction(scale), bits)
        assert k == math.floor(-math.log(u) * scale)


def test_snapping_exact_log_path_is_identical():
    """The exact log and the fast log give the same output for the same draws."""
    x = np.linspace(-3, 3, 5000)
    out_fast = np.empty_like(x)
    out_exact = np.empty_like(x)
    _noise.snapping_into(out_fast, x, 1.25, 2.0, 8.0, 41)
    with exact_path():
        _noise.snapping_into(out_exact, x, 1.25, 2.0, 8.0, 41)
    np.testing.assert_array_equal(out_fast, out_exact)


@pytest.mark.parametrize(
    "y, grid, expected",
    [
        (0.49999999999999994, 1.0, 0.0),
        (0.5, 1.0, 1.0),
        (-0.5, 1.0, 0.0),
        (-2.5, 2.0, -2.0),
        (2.9999, 2.0, 2.0),
        (3.0, 2.0, 4.0),
        (-3.0, 2.0, -2.0),
        (1e300, 0.5, 1e300),
        (-7.75, 0.25, -7.75),
    ],
)
def test_round_to_multiple(y, grid, expected):
    assert _noise._round_to_multiple(y, grid) == expected


def test_snap_finish_clamps_and_signs():
    # x clamped to B before the noise, result clamped after
    assert _noise._snap_finish(100.0, -0.5, False, 1.0, 1.0, 4.0) == 4.0  # 4 - 0.5 -> 3.5 -> 4 (tie up)
    assert _noise._snap_finish(0.0, -0.5, False, 1.0, 1.0, 4.0) == 0.0  # -0.5 -> 0 (tie up)
    assert _noise._snap_finish(0.0, -0.5, True, 1.0, 1.0, 4.0) == 1.0  # +0.5 -> 1
    assert _noise._snap_finish(-3.9, -9.0, False, 1.0, 1.0, 4.0) == -4.0


def test_thread_and_serial_draws_agree():
    from concurrent.futures import ThreadPoolExecutor

    seeds = list(range(8))

    def draw(seed):
        gen = dpcore.ChaCha20(seed)
        return (dpcore.discrete_laplace(4.5, size=20_000, random_state=gen),
                dpcore.discrete_gaussian(3.5, size=20_000, random_state=gen))

    serial = [draw(s) for s in seeds]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(draw, seeds))
    for (a1, b1), (a2, b2) in zip(serial, threaded):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)


def test_shared_generator_across_threads_is_consistent():
    """Threads drawing from one generator never replay each other's words (the lock is held).

    An unlocked shared state hands the same words to two threads, which then emit the same runs
    of values. For independent DLap(1e6) draws, P(two values equal) = sum_k p_k**2 ~ 1/(4e6), so
    a given pair of 4-value windows matches with probability ~ 4e-27; over the ~4e10 window pairs
    below a chance match has probability ~ 2e-16.
    """
    from concurrent.futures import ThreadPoolExecutor

    gen = dpcore.ChaCha20(99)
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda _: dpcore.discrete_laplace(1e6, size=50_000, random_state=gen), range(4)))
    windows = [set(zip(p[:-3], p[1:-2], p[2:-1], p[3:])) for p in parts]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not windows[i] & windows[j], (i, j)
