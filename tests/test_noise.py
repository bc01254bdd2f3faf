"""The noise kernel (dpcore._noise): exact laws of the discrete samplers, snapping's pieces, and
the exact fallback paths taken and right."""
import math
from fractions import Fraction

import numpy as np
import pytest

from _gof import (ALPHA, chisquare_pvalue, dgauss_pmf, dlap_pmf, exact_path, integer_pvalue,
                  z_critical)
from _generators import GENERATOR_KINDS, generator

import dpcore
from dpcore import _noise, _noise_grid, _noise_snapping


def dgauss_variance(sigma2):
    half = int(60 * math.sqrt(sigma2)) + 20
    ks = np.arange(-half, half + 1).astype(float)
    w = np.exp(-(ks**2) / (2 * sigma2))
    return float((w * ks**2).sum() / w.sum())


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
    with exact_path(_noise):
        x = dpcore.discrete_laplace(scale, size=4000, random_state=21)
    assert integer_pvalue(x, dlap_pmf(scale), np.arange(-10, 11)) > ALPHA


def test_discrete_gaussian_exact_path_law():
    with exact_path(_noise):
        x = dpcore.discrete_gaussian(1.5, size=3000, random_state=22)
    assert integer_pvalue(x, dgauss_pmf(1.5), np.arange(-8, 9)) > ALPHA


def test_exact_path_power():
    """The exact-path test has power: the wrong scale is rejected at the same sample size."""
    with exact_path(_noise):
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
    _noise_snapping.snapping_into(out_fast, x, 1.25, 2.0, 8.0, 41)
    with exact_path(_noise):
        _noise_snapping.snapping_into(out_exact, x, 1.25, 2.0, 8.0, 41)
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
    assert _noise_snapping._round_to_multiple(y, grid) == expected


def test_snap_finish_clamps_and_signs():
    # x clamped to B before the noise, result clamped after
    assert _noise_snapping._snap_finish(100.0, -0.5, False, 1.0, 1.0, 4.0) == 4.0  # 4 - 0.5 -> 3.5 -> 4 (tie up)
    assert _noise_snapping._snap_finish(0.0, -0.5, False, 1.0, 1.0, 4.0) == 0.0  # -0.5 -> 0 (tie up)
    assert _noise_snapping._snap_finish(0.0, -0.5, True, 1.0, 1.0, 4.0) == 1.0  # +0.5 -> 1
    assert _noise_snapping._snap_finish(-3.9, -9.0, False, 1.0, 1.0, 4.0) == -4.0


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


# ------------------------------------------------------------------------------------------------
# The fast decisions, one by one, against exact arithmetic (each is only allowed to answer when a
# proven bound says the whole cell gives that answer)

from decimal import Context, Decimal, ROUND_HALF_EVEN
from fractions import Fraction

from dpcore import _exact


def _neglog(x, digits=60):
    """-ln(x) for a positive Fraction x, within 1e-55 (Decimal.ln is correctly rounded)."""
    ctx = Context(prec=digits, rounding=ROUND_HALF_EVEN)
    return float(-(Decimal(x.numerator).ln(ctx) - Decimal(x.denominator).ln(ctx))), \
        Fraction(-(Decimal(x.numerator).ln(ctx) - Decimal(x.denominator).ln(ctx)))


def _bucket(u):
    """The bracket bucket [2**-(Z+1) (1 + j/256), 2**-(Z+1) (1 + (j+1)/256)] holding u."""
    m, e = math.frexp(u)  # u = m 2**e, m in [1/2, 1): 2**-(Z+1) = 2**(e-1)
    j = int((2 * m - 1) * 256)
    base = Fraction(2) ** (e - 1)
    return base * (1 + Fraction(j, 256)), base * (1 + Fraction(j + 1, 256))


def _no_bits():
    raise AssertionError("the fast path decided a cell whose ends disagree")


def _adversarial_uniforms(scale, rng, n_random=300):
    """Doubles next to the thresholds exp(-k/scale) of floor(-ln(u) scale), plus random draws."""
    us = list(dpcore.random.ChaCha20(int(scale * 7) % 2**32).random_raw(n_random) / 2.0**64)
    ks = sorted(set(int(k) for k in np.unique(np.geomspace(1, 40 * scale, 30).astype(np.int64))))
    for k in ks:
        x = math.exp(-k / scale)
        for d in (-3, -1, 0, 1, 3):
            us.append(x + d * math.ulp(x))
    return [u for u in us if 2.0**-1022 <= u < 1.0]


def test_neglog_bracket_encloses_its_bucket():
    rng = np.random.default_rng(31)
    us = [math.ldexp(1 + j / 256 + f / 2**20, -z) for z in (1, 2, 5, 30, 700, 1022)
          for j in range(256) for f in (0, 1)]
    us += list(rng.random(2000)) + [2.0**-1022, 1 - 2.0**-53, 0.5, 0.75]
    for u in us:
        el, eu = _noise._neglog_bracket(u)
        lo, hi = _bucket(u)
        assert Fraction(el) <= _neglog(hi)[1] and _neglog(lo)[1] <= Fraction(eu), u
        assert 0 <= el and eu - el < 2**-7.9


def test_neglog_medium_bound():
    rng = np.random.default_rng(32)
    us = list(dpcore.random.ChaCha20(5).random_raw(3000) / 2.0**64)
    us += [1 - k * 2.0**-53 for k in range(1, 40)] + [0.5, 0.7080078125, 0.70800781249999989,
           2.0**-1022, 2.0**-600, 1e-300] + list(np.exp(-rng.uniform(0, 700, 500)))
    for u in us:
        E, err = _noise._neglog_medium(u)
        assert abs(Fraction(E) - _neglog(Fraction(u))[1]) <= Fraction(err), u
        assert err <= 2.0**-51 * (abs(E) + 1)


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 16.0, 32.0])
def test_floor_bracket_decisions_are_exact(scale):
    """Coarse uniforms (top 2**-32) and whole buckets: a decided value is the floor for every
    u' in the bucket."""
    rng = np.random.default_rng(33)
    us = _adversarial_uniforms(scale, rng)
    us += [t * 2.0**-32 for t in rng.integers(2**23, 2**32, 300)]
    decided = 0
    for u in us:
        k = _noise._floor_bracket(u, scale)
        if k is not None:
            decided += 1
            lo, hi = _bucket(u)
            assert k == _exact.floor_neglog_scaled(lo, hi, Fraction(scale), _no_bits), (u, scale)
    assert decided > 0.6 * len(us)


@pytest.mark.parametrize("scale", [0.3, 1.0, 17.0, 1000.0, 2.0**20 + 0.375, 2.0**30 + 1e6, 2.0**44])
def test_floor_cell_and_refined_decisions_are_exact(scale):
    rng = np.random.default_rng(34)
    us = _adversarial_uniforms(scale, rng)
    n_cell = n_ref = 0
    for u in us:
        k = _noise._floor_cell(u, scale)
        lo, hi = Fraction(u), Fraction(u) + Fraction(math.ulp(u))
        if k is not None:
            n_cell += 1
            assert k == _exact.floor_neglog_scaled(lo, hi, Fraction(scale), _no_bits), (u, scale)
        nextra = int(rng.integers(0, 13))
        extra = int(rng.integers(0, 2**nextra))
        v2 = int(rng.integers(0, 2**64, dtype=np.uint64))
        k = _noise._floor_refined(u, extra, nextra, v2, scale)
        if k is not None:
            n_ref += 1
            w = (hi - lo) / 2 ** (nextra + 64)
            sub_lo = lo + w * ((extra << 64) | v2)
            assert k == _exact.floor_neglog_scaled(sub_lo, sub_lo + w, Fraction(scale), _no_bits)
    # (the adversarial uniforms sit within a few ulps of a threshold: those stay undecided)
    assert n_ref > 0.9 * 300 and n_cell > (0.5 if scale > 2.0**40 else 0.9) * 300


@pytest.mark.parametrize("sigma", [0.3, 1.0, 7.3, 100.0, 1234567.25, 2.0**40])
def test_dgauss_gamma_bound(sigma):
    rng = np.random.default_rng(35)
    ys = [0, 1, 2, int(sigma), int(sigma) + 1, int(40 * sigma) + 3] + \
        [int(v) for v in rng.integers(0, int(10 * sigma) + 2, 50)]
    for y in ys:
        g, dg, t = _noise._dgauss_g(y, sigma)
        assert t > 0
        s2 = Fraction(sigma) ** 2
        gamma = (y - s2 / Fraction(t)) ** 2 / (2 * s2)
        assert abs(Fraction(g) - gamma) <= Fraction(dg), (sigma, y)
        assert dg <= 2.0**-45 * (g + 1)


def test_accept_decisions_are_exact():
    """accept_coarse / accept_cell answer only when the whole cell is on one side of
    exp(-gamma); gamma is placed right at cell ends to make that hard."""
    rng = np.random.default_rng(36)
    tops = [int(t) for t in rng.integers(2**23, 2**32, 400)]
    n_coarse = n_cell = 0
    for top in tops:
        lo, hi = Fraction(top, 2**32), Fraction(top + 1, 2**32)
        for gamma in (_neglog(lo)[1], _neglog(hi)[1], _neglog((lo + hi) / 2)[1],
                      Fraction(float(rng.exponential()))):
            gamma = Fraction(gamma)
            g = float(gamma)
            dg = 2.0**-52 * g + 5e-324  # |g - gamma| <= 2**-53 g: a valid bound
            r = _noise._accept_coarse(top, g, dg)
            if r >= 0:
                n_coarse += 1
                assert r == _exact.uniform_below_exp(lo, hi, gamma, _no_bits), (top, gamma)
            u = float(lo) + float(rng.random()) * 2.0**-32
            r = _noise._accept_cell(u, g, dg)
            if r >= 0:
                n_cell += 1
                assert r == _exact.uniform_below_exp(
                    Fraction(u), Fraction(u) + Fraction(math.ulp(u)), gamma, _no_bits)
    assert n_coarse > 350 and n_cell > 1000  # gamma at a cell end: undecided by design


# ------------------------------------------------------------------------------------------------
# The fused release kernels and the release paths


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("n", [1, 600, 2 * 4096 + 17])  # the kernels work in blocks of 4096
def test_grid_kernels_match_unfused_computation(n, exact):
    """discrete_*_grid_into give exactly (rint(clip(x)/grid) + noise) * grid with the noise of
    discrete_*_into for the same generator state, fast path and exact path alike."""
    rng = np.random.default_rng(n)
    x = rng.normal(scale=50.0, size=n)
    x[: min(n, 5)] = [0.5, -0.5, 2.5, -2.5, 1e3][: min(n, 5)]  # ties to even, a clamped value
    grid, bound = 2.0**-3, 200.0
    cases = [
        (lambda out, rs: _noise_grid.discrete_laplace_grid_into(out, x, grid, bound, 3.7, rs),
         lambda noise, rs: _noise.discrete_laplace_into(noise, 3.7, rs), bound),
        (lambda out, rs: _noise_grid.discrete_laplace_grid_into(out, x, grid, math.inf, 2.0**30, rs),
         lambda noise, rs: _noise.discrete_laplace_into(noise, 2.0**30, rs), math.inf),
        (lambda out, rs: _noise_grid.discrete_gaussian_grid_into(out, x, grid, 2.3, rs),
         lambda noise, rs: _noise.discrete_gaussian_into(noise, 2.3, rs), math.inf),
        (lambda out, rs: _noise_grid.discrete_gaussian_grid_into(out, x, grid, 1e6, rs),
         lambda noise, rs: _noise.discrete_gaussian_into(noise, 1e6, rs), math.inf),
    ]
    if exact:  # the exact path is slow: two cases, small n (600 > 256: several pending batches)
        if n > 600:
            return
        cases = cases[::3]
    for fused, plain, b in cases:
        out = np.empty(n)
        noise = np.empty(n, dtype=np.int64)
        gen_a, gen_b = dpcore.ChaCha20(9), dpcore.ChaCha20(9)
        if exact:
            with exact_path(_noise):
                fused(out, gen_a)
                plain(noise, gen_b)
        else:
            fused(out, gen_a)
            plain(noise, gen_b)
        units = np.rint(np.clip(x, -b, b) / grid).astype(np.int64)
        np.testing.assert_array_equal(out, (units + noise).astype(np.float64) * grid)
        assert gen_a.random_raw() == gen_b.random_raw()  # the same words were used


def _laplace_add_reference(counts, scale, gen):
    """A full-size discrete_laplace_into draw, then added. (The first in-place adder called it
    once per 65536 cells; since calls of 2**16 values and more draw from per-block streams,
    issue 29, one call over all cells is the reference, as for the Gaussian.)"""
    noise = np.empty(counts.size, dtype=np.int64)
    _noise.discrete_laplace_into(noise, scale, gen)
    counts += noise


def _gaussian_add_reference(counts, sigma, gen):
    """The former Gaussian histogram path: a full-size draw, then added."""
    counts += dpcore.discrete_gaussian(sigma, counts.size, random_state=gen)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("n", [0, 1, 600, 4096 + 1, 2 * 65536 + 5])
def test_add_into_kernels_match_the_earlier_paths(n, exact):
    """discrete_*_add_into add, word for word, the noise the earlier histogram paths added (the
    same counts and generator state for the same seed), fast path and exact path alike."""
    if exact and n > 600:  # the exact path is slow; 600 > 256: several pending batches
        return
    cases = [(_noise.discrete_laplace_add_into, _laplace_add_reference, 0.4),
             (_noise.discrete_laplace_add_into, _laplace_add_reference, 37.2),
             (_noise.discrete_gaussian_add_into, _gaussian_add_reference, 0.6),
             (_noise.discrete_gaussian_add_into, _gaussian_add_reference, 2.3),
             (_noise.discrete_gaussian_add_into, _gaussian_add_reference, 1e6)]
    if exact:
        cases = cases[::2]
    for add_into, reference, scale in cases:
        start = np.arange(n, dtype=np.int64) % 7 - 3
        got, want = start.copy(), start.copy()
        gen_a, gen_b = dpcore.ChaCha20(n + 1), dpcore.ChaCha20(n + 1)
        if exact:
            with exact_path(_noise):
                add_into(got, scale, gen_a)
                reference(want, scale, gen_b)
        else:
            add_into(got, scale, gen_a)
            reference(want, scale, gen_b)
        np.testing.assert_array_equal(got, want)
        assert gen_a.random_raw() == gen_b.random_raw()  # the same words were used


def test_add_into_kernels_take_a_seed():
    """A seed is turned into one generator for all cells; the same seed, the same noise."""
    for add_into in (_noise.discrete_laplace_add_into, _noise.discrete_gaussian_add_into):
        a = np.zeros(3 * 4096, dtype=np.int64)
        add_into(a, 3.0, 7)
        b = np.zeros_like(a)
        add_into(b, 3.0, 7)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a[:4096], a[4096:8192])
        with pytest.raises(TypeError, match="random_state"):
            add_into(a, 3.0, 1.5)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_huge_values_are_released_exactly_not_refused(kind):
    """Values beyond the fused kernels' 2**62 grid units are released with the same law (no
    error that would depend on the private value): grid * (rint(v / grid) + k), rounded once."""
    big = np.array([1.0, 2.0**70, -3.0, 1.7e308])
    if kind == "laplace":
        out = dpcore.laplace(big, sensitivity=1.0, epsilon=1.0, random_state=dpcore.ChaCha20(4))
        mech = dpcore.mechanisms.LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, size=big.size)
        noise = dpcore.discrete_laplace(mech.scale, size=big.size, random_state=dpcore.ChaCha20(4))
    else:
        out = dpcore.gaussian(big, sensitivity=1.0, rho=0.5, random_state=dpcore.ChaCha20(4))
        mech = dpcore.mechanisms.GaussianMechanism.calibrate(sensitivity=1.0, rho=0.5, size=big.size)
        noise = dpcore.discrete_gaussian(mech.sigma, size=big.size, random_state=dpcore.ChaCha20(4))
    grid = Fraction(mech.grid)
    expect = [float((round(Fraction(v) / grid) + int(k)) * grid) for v, k in zip(big, noise)]
    np.testing.assert_array_equal(out, expect)
    assert np.all(np.isfinite(out))


def test_exact_path_equals_the_fused_kernel():
    from dpcore.mechanisms import _exact_grid_release

    x = np.random.default_rng(3).normal(0, 1e3, 500)
    mech = dpcore.mechanisms.LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5, size=x.size, bound=900.0)
    fused = mech.release(x, random_state=dpcore.ChaCha20(9))
    noise = dpcore.discrete_laplace(mech.scale, size=x.size, random_state=dpcore.ChaCha20(9))
    np.testing.assert_array_equal(fused, _exact_grid_release(x, mech.grid, 900.0, noise))
    # beyond the double range the exact sum saturates at the largest double, with a warning
    with pytest.warns(RuntimeWarning, match="saturated"):
        out = _exact_grid_release(np.array([1.7976931348623157e308, -1.7976931348623157e308, 1.0]),
                                  2.0**970, math.inf, np.array([2**60, -(2**60), 0]))
    assert out.tolist() == [1.7976931348623157e308, -1.7976931348623157e308, 0.0]


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_release_near_the_double_range_is_never_infinite(kind):
    """Issue 25: laplace(+-1.8e308, sensitivity=1e300) returned +-inf in about half the draws."""
    top = np.full(40, 1.7976931348623157e308) * np.resize([1, -1], 40)
    with pytest.warns(RuntimeWarning, match="saturated"):
        if kind == "laplace":
            out = dpcore.laplace(top, sensitivity=1e300, epsilon=1.0, random_state=5)
        else:
            out = dpcore.gaussian(top, sensitivity=1e300, rho=1.0, random_state=5)
    assert np.all(np.isfinite(out))
    assert np.any(np.abs(out) == 1.7976931348623157e308)


def test_discrete_gaussian_exact_path_large_sigma():
    """Large sigma, every decision exact (non-integer t = sigma + 0.16): runs and stays near 0."""
    with exact_path(_noise):
        x = dpcore.discrete_gaussian(1234567.25, size=40, random_state=24)
    assert np.all(np.abs(x) < 8 * 1234567.25) and len(set(x.tolist())) == 40


@pytest.mark.parametrize("sensitivity", [1.0, 3.0, 0.3])
def test_snapping_release_clamps_in_the_kernel(sensitivity):
    """The snapping release no longer clips before dividing by the unit: the kernel's clamp of
    x / unit to bound / unit gives the same values (unit is a power of two), overflow included."""
    from dpcore.mechanisms import LaplaceMechanism

    x = np.array([0.0, 5.0, -7.5, 1e4, -1e4, 1.7e308, -1.7e308, 99.99, -100.0, 100.0])
    mech = LaplaceMechanism.calibrate(sensitivity=sensitivity, epsilon=0.5, size=x.size,
                                      bound=100.0, method="snapping")
    got = mech.release(x, random_state=dpcore.ChaCha20(12))
    scaled = np.clip(x, -100.0, 100.0) / mech.unit
    ref = np.empty_like(scaled)
    _noise_snapping.snapping_into(ref, scaled, mech.scale, mech.grid / mech.unit, 100.0 / mech.unit,
                         dpcore.ChaCha20(12))
    np.testing.assert_array_equal(got, ref * mech.unit)


def test_pending_cells_are_the_cells_the_fast_path_decides_on():
    """A pending draw hands the exact path U*'s cell cut by its spare bits (and by the 64
    refinement bits when refined): the sub-cell the fast decisions were taken on, so a draw
    finished exactly gets the value the fast path would have given whenever it decides."""
    rng = np.random.default_rng(37)
    for u in list(rng.random(200)) + [2.0**-1022 * 3, 0.5, 1 - 2.0**-53]:
        w = Fraction(math.ulp(u))
        nv = int(rng.integers(0, 13))
        v = int(rng.integers(0, 2**nv))
        v2 = int(rng.integers(0, 2**64, dtype=np.uint64))
        lo, hi = _noise._pending_cell(u, v, nv, v2, False)
        assert (lo, hi) == (Fraction(u) + w * v / 2**nv, Fraction(u) + w * (v + 1) / 2**nv)
        lo, hi = _noise._pending_cell(u, v, nv, v2, True)
        step = w / 2 ** (nv + 64)
        assert (lo, hi) == (Fraction(u) + step * ((v << 64) | v2), Fraction(u) + step * (((v << 64) | v2) + 1))
        for scale in (3.5, 2.0**30 + 1e6):
            k = _noise._floor_refined(u, v, nv, v2, scale)
            if k is not None:
                assert k == _exact.floor_neglog_scaled(lo, hi, Fraction(scale), _no_bits)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_integer_samplers_law_under_every_generator(kind):
    """The discrete Laplace and Gaussian laws hold whatever numpy generator the caller passes."""
    x = dpcore.discrete_laplace(1.5, size=N // 4, random_state=generator(kind, 31))
    assert integer_pvalue(x, dlap_pmf(1.5), np.arange(-21, 22)) > ALPHA
    y = dpcore.discrete_gaussian(2.0, size=N // 4, random_state=generator(kind, 32))
    assert integer_pvalue(y, dgauss_pmf(2.0), np.arange(-16, 17)) > ALPHA


# ------------------------------------------------------------------------------------------------
# The table sampler of the discrete Gaussian (dgauss_table.h): calls of >= 1024 draws. The table
# is checked entry by entry against mpmath (the facts its exactness rests on), the fast -ln a
# against mpmath, and the law end to end, including the tail and the exact path.

mp = pytest.importorskip("mpmath")

TABLE_SIGMAS = [0.0625, 0.3, 1.0, 7.3, 31.99, 32.0, 100.0, 1234567.25, 2.0**36, 1.5 * 2.0**36,
                2.0**40]


def _c(table, e):
    """c_e of dgauss_table.h: 1/2 for the zero block, W for a block, 2 W_t for the tail's check."""
    if e == 0:
        return Fraction(1, 2)
    return Fraction(table["width"]) if e <= table["nblocks"] else Fraction(2 * table["tail_width"])


def _true_delta(table, e, sigma):
    """gamma(L_e) + ln(w_e) - ln(D c_e) at 100 digits (mpmath; error far below 1e-80)."""
    with mp.workdps(100):
        start = mp.mpf(int(table["start"][e]))
        s2 = mp.mpf(Fraction(sigma).numerator) ** 2 / mp.mpf(Fraction(sigma).denominator) ** 2
        dc = Fraction(table["D"]) * _c(table, e)
        return start**2 / (2 * s2) + mp.log(int(table["weight"][e])) \
            - mp.log(dc.numerator) + mp.log(dc.denominator)


@pytest.mark.parametrize("sigma", TABLE_SIGMAS)
def test_table_layout_and_alias_are_exact(sigma):
    """Blocks tile the half line; the alias table gives entry e probability w_e / 2**29
    exactly; the tail width satisfies L_T W_t >= sigma**2."""
    t = _noise._table_entries(sigma)
    n, w, kinds = t["nblocks"], t["width"], t["kinds"]
    cap = 2 ** t["threshold_bits"]
    assert t["weight"].sum() == 2**29 and (t["weight"] >= 0).all()
    assert w & (w - 1) == 0 and (w == 1 or w <= sigma / 32) and w <= 2**34
    assert t["kind"][0] == kinds["block"] and t["start"][0] == 0 and t["mask"][0] == 0
    for e in range(1, n + 1):
        assert t["kind"][e] == kinds["block"]
        assert t["start"][e] == 1 + (e - 1) * w and t["mask"][e] == w - 1
    assert t["kind"][n + 1] == kinds["tail"] and t["start"][n + 1] == t["tail_start"] == 1 + n * w
    assert t["tail_start"] >= 7.9 * sigma - w
    assert Fraction(t["tail_start"] * t["tail_width"]) >= Fraction(sigma) ** 2
    assert (t["kind"][n + 2:] == kinds["null"]).all() and (t["weight"][n + 3:] == 0).all()
    # Walker/Vose: column c holds thr[c] units of entry c and cap - thr[c] of entry alias[c]
    units = t["thr"].copy()
    np.add.at(units, t["alias"], cap - t["thr"])
    np.testing.assert_array_equal(units, t["weight"])
    assert ((t["thr"] >= 0) & (t["thr"] <= cap)).all()


@pytest.mark.parametrize("sigma", TABLE_SIGMAS)
def test_table_entries_bound_the_target(sigma):
    """Every block and the tail: true delta = gamma(L) + ln(w / (D c)) >= 0 (so the acceptance
    D c f(k) / w is <= 1) and within delta_err of the stored delta; every squeeze lies below the
    block's smallest acceptance exp(-((W - 1)(2 L + W - 1) / (2 sigma**2) + delta))."""
    t = _noise._table_entries(sigma)
    n = t["nblocks"]
    s2 = Fraction(sigma) ** 2
    for e in range(n + 2):
        delta = _true_delta(t, e, sigma)
        assert delta > 0, (e, delta)
        assert abs(delta - mp.mpf(float(t["delta"][e]))) <= t["delta_err"][e], e
        assert t["delta_err"][e] < 2.0**-40 * (1 + int(t["start"][e]) ** 2 / (2 * sigma**2))
        if e <= n and t["squeeze"][e] > 0:
            w1 = int(t["mask"][e])
            worst = Fraction(w1 * (2 * int(t["start"][e]) + w1)) / (2 * s2)
            with mp.workdps(100):
                g = mp.mpf(worst.numerator) / worst.denominator + delta
                assert mp.log(mp.mpf(int(t["squeeze"][e])) / 2**32) < -g, e
    # the squeezes are not vacuous: weighted by the proposal, nearly every accept needs no
    # arithmetic (the acceptance itself is about 0.99)
    w = t["weight"][:n + 1].astype(float)
    assert (w * t["squeeze"][:n + 1]).sum() / w.sum() > 0.97 * 2**32


@pytest.mark.parametrize("sigma", [0.3, 7.3, 100.0, 1234567.25, 2.0**40])
def test_table_gamma_bound(sigma):
    """The kernel's g ~ -ln a(L + j) = j (2 L + j) / (2 sigma**2) + delta is within dg of it."""
    t = _noise._table_entries(sigma)
    rng = np.random.default_rng(38)
    s2 = Fraction(sigma) ** 2
    entries = [0, 1, t["nblocks"]] + [int(e) for e in rng.integers(1, t["nblocks"] + 1, 20)]
    for e in entries:
        w1 = int(t["mask"][e])
        for j in {0, w1, w1 // 2, int(rng.integers(0, w1 + 1))}:
            g, dg = _noise._table_gamma(sigma, e, j)
            part = Fraction(j * (2 * int(t["start"][e]) + j)) / (2 * s2)
            with mp.workdps(100):
                exact = mp.mpf(part.numerator) / part.denominator + _true_delta(t, e, sigma)
                assert abs(mp.mpf(g) - exact) <= dg, (e, j)
            assert dg <= 2.0**-40


@pytest.mark.parametrize("sigma", [0.3, 1.0, 100.0, 2.0**36, 2.0**40])
def test_table_fast_path_decides_almost_everything(sigma):
    attempts, undecided = _noise._table_fast_rate(sigma, 200_000, random_state=3)
    assert attempts < 1.02 * 200_000  # about 1.01 attempts per draw (null entry, rejections)
    assert undecided < 1e-4 * attempts


def test_large_calls_use_the_table_sampler():
    """discrete_gaussian draws >= 1024 values with the table sampler (default tail cut)."""
    for sigma, n in [(2.5, 1024), (1e6, 5000)]:
        a = dpcore.discrete_gaussian(sigma, n, random_state=dpcore.ChaCha20(40))
        b = np.empty(n, dtype=np.int64)
        _noise._table_sampler_into(b, sigma, _noise.TABLE_TAIL_SIGMAS, dpcore.ChaCha20(40))
        np.testing.assert_array_equal(a, b)


def _normal_bins_pvalue(x, sigma, sigma_law, edges_in_sigmas):
    """Chi-square of x against N(0, sigma_law**2) on bins (edges in units of sigma; the discrete
    law equals the normal one on them within ~1e-100 for sigma >= 1000, Poisson summation)."""
    from scipy import stats

    edges = np.concatenate([[-np.inf], np.asarray(edges_in_sigmas) * sigma, [np.inf]])
    counts = np.histogram(x, bins=edges)[0]
    return chisquare_pvalue(counts, np.diff(stats.norm.cdf(edges / sigma_law)))


@pytest.mark.parametrize("sigma", [31.99, 64.5, 100.0])
def test_table_sampler_law_medium_sigma(sigma):
    """Blocks of width 1 and 2 (sigma around 32 and 100), on unit cells out to 5 sigma. Power:
    against sigma 4% too large the noncentrality is about 660 on ~10 sigma cells, rejected at
    ALPHA with probability > 0.9999."""
    x = dpcore.discrete_gaussian(sigma, size=N, random_state=int(sigma * 10))
    support = np.arange(-int(5 * sigma), int(5 * sigma) + 1)
    assert integer_pvalue(x, dgauss_pmf(sigma), support) > ALPHA
    assert integer_pvalue(x, dgauss_pmf(sigma * 1.04), support) < ALPHA  # power
    # within-block position (j = (|y| - 1) mod 2) against the exact law too
    if sigma > 64:
        k = np.abs(x[x != 0]) - 1
        ks = np.arange(0, int(40 * sigma))
        p = np.exp(-((ks + 1.0) ** 2) / (2 * sigma**2))
        probs = np.array([p[ks % 2 == 0].sum(), p[ks % 2 == 1].sum()])
        assert chisquare_pvalue(np.bincount(k % 2, minlength=2), probs / probs.sum()) > ALPHA


@pytest.mark.parametrize("sigma", [1234567.25, 1.3 * 2.0**36, 2.0**40])
def test_table_sampler_law_large_sigma(sigma):
    """Bins aligned to the blocks near the centre (block-level acceptance) and out to 5 sigma,
    plus quarter blocks (the slope inside a block). Power: against sigma 2% too large the
    noncentrality on the first bins is 162, rejected at ALPHA with probability > 0.9999999."""
    x = dpcore.discrete_gaussian(sigma, size=N, random_state=int(sigma) % 1000)
    w = _noise._table_entries(sigma)["width"] / sigma
    edges = np.concatenate([-np.arange(5.0, 0, -0.25), np.arange(0, 5.01, 0.25)])
    assert _normal_bins_pvalue(x, sigma, sigma, edges) > ALPHA
    assert _normal_bins_pvalue(x, sigma, sigma * 1.02, edges) < ALPHA  # power
    quarter = np.arange(0, 2 * w * 16 + 1e-12, w / 4)  # 32 blocks, 4 bins each, one side
    quarter_edges = np.concatenate([-quarter[::-1], quarter[1:]])
    assert _normal_bins_pvalue(x, sigma, sigma, quarter_edges) > ALPHA


@pytest.mark.parametrize("sigma, cut", [pytest.param(2.3, 0.7, marks=pytest.mark.slow),
                                        pytest.param(100.0, 1.0, marks=pytest.mark.slow),
                                        (1.3 * 2.0**36, 1.5)])
def test_table_tail_law(sigma, cut):
    """With the tail cut at cut * sigma, a large share of the draws take the exact tail path
    (geometric sub-blocks, exact acceptance); the law is still the discrete Gaussian."""
    n = 12_000
    x = np.empty(n, dtype=np.int64)
    _noise._table_sampler_into(x, sigma, cut, dpcore.ChaCha20(int(sigma * 3) % 2**32))
    tail = np.abs(x) >= _noise._table_entries(sigma, cut)["tail_start"]
    assert tail.mean() > 0.1
    if sigma < 1000:
        support = np.arange(-int(6 * sigma) - 2, int(6 * sigma) + 3)
        assert integer_pvalue(x, dgauss_pmf(sigma), support) > ALPHA
        assert integer_pvalue(x, dgauss_pmf(sigma * 1.08), support) < ALPHA  # power
    else:
        edges = np.arange(-4, 4.01, 0.5)
        assert _normal_bins_pvalue(x, sigma, sigma, edges) > ALPHA
        assert _normal_bins_pvalue(x, sigma, sigma * 1.08, edges) < ALPHA  # power


def test_table_exact_path_law_large_sigma():
    """Every acceptance decided in rational arithmetic (the fast tests and squeezes off)."""
    sigma = 1234567.25
    with exact_path(_noise):
        x = dpcore.discrete_gaussian(sigma, size=2000, random_state=25)
    edges = np.arange(-3, 3.01, 0.5)
    assert _normal_bins_pvalue(x, sigma, sigma, edges) > ALPHA
    assert _normal_bins_pvalue(x, sigma, sigma * 1.25, edges) < ALPHA  # power
