"""dpcore.stats: exact laws of the quantile mechanisms (intervals and grids), the noise of counts,
sums, means, variances and histograms against the stated calibration, clipping, exact summation,
errors naming the parameter, and the accountant (charged as documented; a refusal draws nothing)."""
import doctest
import inspect
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from _gof import ALPHA, chisquare_pvalue, dgauss_pmf, dlap_pmf, integer_pvalue, z_critical

from dpcore._release import quantiles as release_quantiles, sums as release_sums
import dpcore
from dpcore import calibration, stats

N = 40_000  # draws per law test
QSCALE = 2.0**20


def rng(seed):
    return np.random.Generator(dpcore.ChaCha20(seed))


def power(p_true, p_null, n_draws, df=None):
    """Chance that a chi-square test at ALPHA rejects p_null when p_true is the law."""
    p_true, p_null = np.asarray(p_true), np.asarray(p_null)
    keep = p_null > 0
    lam = n_draws * np.sum((p_true[keep] - p_null[keep]) ** 2 / p_null[keep])
    df = keep.sum() - 1 if df is None else df
    return sps.ncx2.sf(sps.chi2.isf(ALPHA, df), df, lam)


# ------------------------------------------------------------------------------------------------
# quantiles: exact laws (computed here independently of the implementation)

# 8 records, two outside the bounds (clipped to them: empty end intervals) and a tie.
X_Q = np.array([12.0, 2.5, -3.0, 7.0, 1.0, 2.5, 8.5, 4.0])
BOUNDS_Q = (0.0, 10.0)


def rounded_level(q):
    return round(q * QSCALE) / QSCALE


def em_scale(q, epsilon, sensitivity=None):
    """The documented score scale epsilon / (2 Delta_q), Delta_q = max(q, 1 - q)."""
    ql = rounded_level(q)
    return epsilon / (2 * (max(ql, 1 - ql) if sensitivity is None else sensitivity))


def interval_law(x, q, scale, bounds):
    """Smith's law: P(interval i) proportional to length_i * exp(scale * -|i - q n|)."""
    lo, hi = bounds
    z = np.sort(np.clip(x, lo, hi))
    n = len(z)
    edges = np.concatenate([[lo], z, [hi]])
    u = -np.abs(np.arange(n + 1) - rounded_level(q) * n)
    w = np.diff(edges) * np.exp(scale * (u - u.max()))
    return w / w.sum(), edges


def grid_law(x, q, scale, bounds, points):
    lo, hi = bounds
    z = np.clip(x, lo, hi)
    n = len(z)
    ranks = np.array([np.sum(z < g) for g in points])
    u = -np.abs(ranks - rounded_level(q) * n)
    w = np.exp(scale * (u - u.max()))
    return w / w.sum()


def interval_counts(out, edges):
    idx = np.clip(np.searchsorted(edges, out, side="right") - 1, 0, len(edges) - 2)
    return np.bincount(idx, minlength=len(edges) - 1)


def draw_quantiles(q, n_draws, seed, epsilon=1.0, **kwargs):
    """n_draws independent draws at level q and epsilon each: one call with n_draws levels and
    n_draws * epsilon in total (which also checks the equal split of the budget)."""
    out = stats.quantile(X_Q, np.full(n_draws, q), epsilon=n_draws * epsilon, bounds=BOUNDS_Q,
                         random_state=rng(seed), **kwargs)
    assert out.shape == (n_draws,)
    return out


def test_quantile_sensitivity_is_max_q_one_minus_q():
    """Adding a record moves the utility -|r - q n| of every candidate by at most max(q, 1 - q),
    and that bound is reached: brute force over small data sets (ties and clipping included)."""
    g = rng(8)
    ys = np.linspace(0, 10, 41)

    def utility(z, ql):
        ranks = [np.sum(z < y) for y in ys]
        u = release_quantiles.rank_utility(ranks, round(ql * QSCALE), len(z))
        assert np.array_equal(u, -np.abs(np.array(ranks) - ql * len(z)))  # exact
        return u

    for q in (0.5, 0.3, 0.1, 0.97, 0.0, 1.0):
        ql = rounded_level(q)
        worst = 0.0
        for _ in range(200):
            x = np.round(g.uniform(-1, 11, g.integers(0, 8)))
            extra = np.round(g.uniform(-1, 11))
            u0 = utility(np.clip(x, 0, 10), ql)
            u1 = utility(np.clip(np.append(x, extra), 0, 10), ql)
            worst = max(worst, float(np.max(np.abs(u1 - u0))))
        assert worst == max(ql, 1 - ql)


@pytest.fixture(scope="module")
def interval_samples():
    return {q: draw_quantiles(q, N, seed, grid="continuous") for q, seed in ((0.5, 1), (0.3, 2))}


@pytest.mark.parametrize("q", [0.5, 0.3])
def test_quantile_interval_law(interval_samples, q):
    out = interval_samples[q]
    law, edges = interval_law(X_Q, q, em_scale(q, 1.0), BOUNDS_Q)
    counts = interval_counts(out, edges)
    assert np.all(counts[law == 0] == 0)  # empty intervals (ties, clipped ends) never chosen
    assert np.all((out >= 0.0) & (out <= 10.0))
    assert chisquare_pvalue(counts, law) > ALPHA


@pytest.mark.parametrize("q", [0.5, 0.3])
def test_quantile_interval_cdf(interval_samples, q):
    """KS against the exact piecewise-linear CDF (uniform inside the chosen interval)."""
    law, edges = interval_law(X_Q, q, em_scale(q, 1.0), BOUNDS_Q)
    cum = np.concatenate([[0.0], np.cumsum(law)])

    def cdf(y):
        y = np.asarray(y, dtype=float)
        i = np.clip(np.searchsorted(edges, y, side="right") - 1, 0, len(law) - 1)
        width = np.diff(edges)[i]
        frac = np.where(width > 0, (y - edges[i]) / np.where(width > 0, width, 1.0), 1.0)
        return cum[i] + law[i] * np.clip(frac, 0.0, 1.0)

    assert sps.kstest(interval_samples[q], cdf).pvalue > ALPHA


@pytest.mark.parametrize("q", [0.5, 0.3])
def test_quantile_interval_power(interval_samples, q):
    """The same test rejects a wrong epsilon: Delta = 1 (Smith's scale epsilon/2), Delta = 1/2
    for every level (too little noise for q != 1/2), a 25% larger epsilon; and (median) a law
    that ignores the interval lengths. Its power is computed, not assumed."""
    out = interval_samples[q]
    law, edges = interval_law(X_Q, q, em_scale(q, 1.0), BOUNDS_Q)
    counts = interval_counts(out, edges)
    wrongs = [em_scale(q, 1.0, 1.0), em_scale(q, 1.25)] + ([em_scale(q, 1.0, 0.5)] if q != 0.5 else [])
    for wrong_scale in wrongs:
        wrong, _ = interval_law(X_Q, q, wrong_scale, BOUNDS_Q)
        assert power(law, wrong, N) > 1 - 1e-6
        assert chisquare_pvalue(counts, wrong) < ALPHA
    if q != 0.5:
        return
    u = -np.abs(np.arange(len(law)) - 4.0)
    no_length = np.where(law > 0, np.exp(u), 0.0)
    no_length /= no_length.sum()
    assert chisquare_pvalue(counts, no_length) < ALPHA


GRID_ARRAY = np.array([0.0, 0.7, 1.0, 2.0, 2.5, 3.9, 4.0, 5.5, 7.25, 8.5, 9.0, 10.0])


@pytest.mark.parametrize("method", ["exact", "gumbel", "inverse-cdf"])
@pytest.mark.parametrize("grid", [11, "array"])
def test_quantile_grid_law(method, grid):
    points = GRID_ARRAY if grid == "array" else np.linspace(0.0, 10.0, grid)
    grid_arg = GRID_ARRAY if grid == "array" else grid
    n_draws = N // 2
    out = draw_quantiles(0.3, n_draws, 10, grid=grid_arg, method=method, epsilon=0.5)
    idx = np.searchsorted(points, out)
    assert np.all(points[idx] == out)  # outputs are grid points, exactly
    counts = np.bincount(idx, minlength=len(points))
    law = grid_law(X_Q, 0.3, em_scale(0.3, 0.5), BOUNDS_Q, points)
    assert chisquare_pvalue(counts, law) > ALPHA
    for wrong_scale in (em_scale(0.3, 0.6), em_scale(0.3, 0.5, 0.5)):
        wrong = grid_law(X_Q, 0.3, wrong_scale, BOUNDS_Q, points)
        assert power(law, wrong, n_draws) > 1 - 1e-4
        assert chisquare_pvalue(counts, wrong) < ALPHA


def test_quantile_streamed_grid_law(monkeypatch):
    """More runs than the chunk size are streamed to the selection: same law."""
    monkeypatch.setattr(release_quantiles, "GRID_CHUNK", 4)
    points = np.linspace(0.0, 10.0, 11)
    out = draw_quantiles(0.5, N // 4, 12, grid=11, epsilon=0.5)
    counts = np.bincount(np.searchsorted(points, out), minlength=11)
    assert chisquare_pvalue(counts, grid_law(X_Q, 0.5, em_scale(0.5, 0.5), BOUNDS_Q, points)) > ALPHA


def test_quantile_large_epsilon_finds_the_empirical_quantile():
    x = rng(3).uniform(0, 100, 501)
    for q in (0.1, 0.5, 0.9):
        exact = np.quantile(x, q)
        got = stats.quantile(x, q, epsilon=200.0, bounds=(0.0, 100.0), random_state=4)
        assert abs(got - exact) < 2.0
        got = stats.quantile(x, q, epsilon=200.0, bounds=(0.0, 100.0), grid=100_001,
                             random_state=4)
        assert abs(got - exact) < 2.0
    assert stats.median(x, epsilon=200.0, bounds=(0.0, 100.0), random_state=5) == pytest.approx(
        np.median(x), abs=2.0)


def test_quantile_shapes_and_large_grid():
    x = rng(6).normal(50, 10, 300)
    assert isinstance(stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 100), random_state=0), float)
    out = stats.quantile(x, [[0.25], [0.75]], epsilon=2.0, bounds=(0, 100), grid=10**6 + 1,
                         random_state=0)
    assert out.shape == (2, 1)
    assert np.all(np.isin(out, np.linspace(0, 100, 10**6 + 1)))
    assert out[0, 0] < out[1, 0]


def test_quantile_empty_data_is_uniform(monkeypatch):
    """No records: every grid point has the same utility, so the output is uniform over the
    grid (one run of 2**52 + 1 points on the default grid: a uniform on [0, 1] to the eye)."""
    out = stats.quantile([], np.full(4000, 0.5), epsilon=4000.0, bounds=(0.0, 1.0),
                         grid="continuous", random_state=rng(7))
    assert sps.kstest(out, "uniform").pvalue > ALPHA
    out = stats.quantile([], np.full(4000, 0.5), epsilon=4000.0, bounds=(0.0, 1.0),
                         random_state=rng(7))
    assert sps.kstest(out, "uniform").pvalue > ALPHA
    # power: the law of out**1.3 is 0.1 away from uniform in KS distance, three times the
    # critical value at ALPHA for 4000 draws (0.035)
    assert sps.kstest(out ** 1.3, "uniform").pvalue < ALPHA
    out = stats.quantile([], np.full(4000, 0.5), epsilon=4000.0, bounds=(0.0, 1.0), grid=9,
                         random_state=rng(7))
    counts = np.bincount(np.searchsorted(np.linspace(0.0, 1.0, 9), out), minlength=9)
    assert chisquare_pvalue(counts, np.full(9, 1 / 9)) > ALPHA


def all_default_grid_points(out, lower=0.0, upper=10.0):
    """Every output is a point lower + j (upper - lower) / 2**52 (as the grid rounds it)."""
    size = 2**52 + 1
    j = np.rint((out - lower) / ((upper - lower) / 2**52)).astype(np.int64)
    near = [release_quantiles.grid_points(lower, upper, size, np.clip(j + d, 0, size - 1))
            for d in (-1, 0, 1)]
    return bool(np.all(np.any(np.stack(near) == out, axis=0)))


def test_quantile_default_grid_is_the_finest_evenly_spaced_grid(monkeypatch):
    """grid=None is 2**k + 1 evenly spaced points, the spacing the first power-of-two division
    of the range not below the spacing of doubles at the larger bound; the law over it is the
    exact one (checked with the rule made coarse: it is read at call time)."""
    assert release_quantiles.default_grid_size(0.0, 10.0) == 2**52 + 1
    assert release_quantiles.default_grid_size(0.0, 1e-300) == 2**52 + 1
    assert release_quantiles.default_grid_size(1e6, 1e6 + 1.0) == 2**33 + 1  # ulp(1e6) = 2**-33
    assert release_quantiles.default_grid_size(1.0, 1.0 + 2**-52) == 3
    assert release_quantiles.default_grid_size(-1e308, 1e308) == 2**52 + 1
    x = rng(9).normal(5.0, 2.0, 200)
    out = stats.quantile(x, np.full(50, 0.5), epsilon=50.0, bounds=BOUNDS_Q, random_state=rng(13))
    assert all_default_grid_points(out)
    monkeypatch.setattr(release_quantiles, "default_grid_size", lambda lower, upper: 11)
    out = draw_quantiles(0.3, N // 2, 14, epsilon=0.5)
    points = np.linspace(*BOUNDS_Q, 11)
    counts = np.bincount(np.searchsorted(points, out), minlength=11)
    law = grid_law(X_Q, 0.3, em_scale(0.3, 0.5), BOUNDS_Q, points)
    assert chisquare_pvalue(counts, law) > ALPHA
    wrong = grid_law(X_Q, 0.3, em_scale(0.3, 0.6), BOUNDS_Q, points)
    assert power(law, wrong, N // 2) > 1 - 1e-4
    assert chisquare_pvalue(counts, wrong) < ALPHA


# 7 records on the dyadic grid j * 2**-40 of [0, 1] (2**40 + 1 points): runs of 10**9..10**12
# points, whose sizes are computed here exactly from the records.
X_RUNS = np.array([0.1, 0.25, 0.25, 0.3, 0.7, 0.71, 0.9])
G_RUNS = 2**40 + 1


def run_law(x, q, scale, size):
    """P(output has rank r) for r = 0..n, proportional to m_r exp(scale u_r), with
    m_r = #{j : rank(j * 2**-40) = r} counted exactly with rationals."""
    z = np.sort(x)
    at_most = [math.floor(Fraction(float(v)) * (size - 1)) + 1 for v in z]
    starts = [0] + at_most + [size]
    m = np.array([starts[r + 1] - starts[r] for r in range(len(z) + 1)], dtype=float)
    u = -np.abs(np.arange(len(z) + 1) - rounded_level(q) * len(z))
    log_w = np.where(m > 0, np.log(np.maximum(m, 1)) + scale * u, -np.inf)
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


@pytest.mark.parametrize("q, epsilon", [(0.5, 1.0), (0.3, 4.0)])
def test_quantile_runs_law_with_huge_multiplicities(q, epsilon):
    """The run sampler (proposal with ln(m_r) / c added, exact acceptance, uniform point)
    against the exact law over runs; power against the law without the multiplicities and a
    25% larger epsilon; the points inside the last run are uniform (KS)."""
    n_draws = N // 2
    out = stats.quantile(X_RUNS, np.full(n_draws, q), epsilon=n_draws * epsilon,
                         bounds=(0.0, 1.0), grid=G_RUNS, random_state=rng(17))
    assert np.all(np.mod(out, 2.0**-40) == 0.0)
    ranks = np.searchsorted(np.sort(X_RUNS), out, side="left")
    counts = np.bincount(ranks, minlength=len(X_RUNS) + 1)
    law = run_law(X_RUNS, q, em_scale(q, epsilon), G_RUNS)
    assert chisquare_pvalue(counts, law) > ALPHA
    u = -np.abs(np.arange(len(X_RUNS) + 1) - rounded_level(q) * len(X_RUNS))
    no_sizes = np.exp(em_scale(q, epsilon) * (u - u.max())) * (law > 0)
    for wrong in (no_sizes / no_sizes.sum(), run_law(X_RUNS, q, em_scale(q, 1.25 * epsilon),
                                                     G_RUNS)):
        assert power(law, wrong, n_draws) > 1 - 1e-4
        assert chisquare_pvalue(counts, wrong) < ALPHA
    # the points inside the most drawn run: uniform on it; power: a uniform on its first 80%
    # is 0.2 away in KS distance, above twice the critical value for that many draws
    top = int(np.argmax(counts))
    ends = np.concatenate([[0.0], np.sort(X_RUNS), [1.0]])
    inside = out[ranks == top]
    critical = math.sqrt(-math.log(ALPHA / 2) / (2 * inside.size))
    assert 0.2 > 2 * critical
    width = ends[top + 1] - ends[top]
    assert sps.kstest(inside, sps.uniform(ends[top], width).cdf).pvalue > ALPHA
    assert sps.kstest(inside, sps.uniform(ends[top], 0.8 * width).cdf).pvalue < ALPHA


def test_quantile_run_offsets_cover_the_multiplicities():
    """u' - u >= ln(m) / c exactly (mpmath at 60 digits), for run sizes 2..2**52 and score
    scales 2**-20..2**20, and the acceptance loss c (u' - u) - ln(m) is below 2**-44 ln(m) plus
    a few rounding units of u' (so a proposal is rejected with probability below 2**-38)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    g = rng(18)
    sizes = np.unique(np.concatenate([[2, 3, 2**52], g.integers(2, 2**52, 300)]))
    for scale in (2.0**-20, 0.37, 1.0, 3.3, 2.0**20):
        offsets = release_quantiles._utility_offsets(release_quantiles.run_logs(sizes), scale)
        for u in (0.0, -123456.75):
            proposal = np.nextafter(u + offsets, np.inf)
            for m, p in zip(sizes, proposal):
                gap = mpmath.mpf(Fraction(scale).numerator) / Fraction(scale).denominator * (
                    mpmath.mpf(Fraction(float(p)) - Fraction(u)))
                loss = gap - mpmath.log(int(m))
                assert loss >= 0
                assert loss <= 2.0**-44 * math.log(int(m)) + 4 * scale * math.ulp(float(p))


def test_quantile_grid_counts_match_the_points():
    """#{j : g_j <= v} from the arithmetic guess and bisection equals a search over the
    materialised points, also where many points round to the same double."""
    g = rng(19)
    for lower, upper, size in [(0.0, 10.0, 1001), (-3.0, 7.0, 2**16 + 1),
                               (1e6, 1e6 + 1e-9, 2**20 + 1), (-1e308, 1e308, 4097)]:
        grid = release_quantiles.CandidateGrid(size, lower, upper)
        points = release_quantiles.grid_points(lower, upper, size, np.arange(size))
        assert np.all(np.diff(points) >= 0)
        values = np.sort(np.concatenate([g.uniform(lower / 2, upper / 2, 500) * 2,
                                         points[g.integers(0, size, 200)], [lower, upper]]))
        values = np.clip(values, lower, upper)
        expected = np.searchsorted(points, values, side="right")
        assert np.array_equal(grid.count_at_most(values), expected)


def test_quantile_default_output_bits_do_not_depend_on_the_data():
    """The leak of the continuous path (issue 14, item 8): on neighbours whose records have
    different low-order bits, the default's outputs are grid points on both."""
    for x in ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 2.0 + 2**-40]):
        out = stats.quantile(x, np.full(40, 0.5), epsilon=40.0, bounds=BOUNDS_Q,
                             random_state=rng(15))
        assert all_default_grid_points(out)


def test_quantile_extreme_bounds_stay_finite():
    x = rng(16).normal(0.0, 1e300, 100)
    for grid in (None, 5):
        m = stats.median(x, epsilon=1.0, bounds=(-1e308, 1e308), grid=grid, random_state=0)
        assert -1e308 <= m <= 1e308
    assert stats.median(x, epsilon=1.0, bounds=(-1e308, 1e308), grid=3, random_state=0) in (
        -1e308, 0.0, 1e308)


# ------------------------------------------------------------------------------------------------
# count, sum, mean, var, std


def test_count_noise_law_and_power():
    x = np.zeros(17)
    g = rng(20)
    noise = np.array([stats.count(x, epsilon=0.5, random_state=g) - 17 for _ in range(N // 2)])
    support = np.arange(-25, 26)
    assert integer_pvalue(noise, dlap_pmf(2.0), support) > ALPHA  # scale 1 / epsilon
    assert integer_pvalue(noise, dlap_pmf(2.3), support) < ALPHA


def test_count_gaussian_noise_law():
    sigma = calibration.discrete_gaussian_sigma(1.0, 1e-5, 1)
    g = rng(21)
    noise = np.array([stats.count([1.0, 2.0], epsilon=1.0, delta=1e-5, mechanism="gaussian",
                                  random_state=g) - 2 for _ in range(N // 4)])
    support = np.arange(-20, 21)
    assert integer_pvalue(noise, dgauss_pmf(sigma), support) > ALPHA
    assert integer_pvalue(noise, dgauss_pmf(sigma * 1.1), support) < ALPHA


def grid_of(bound, epsilon):
    """The documented grid: the largest power of two <= bound / epsilon * 2**-36."""
    return 2.0 ** math.floor(math.log2(bound / epsilon * 2.0**-36))


def test_sum_calibration_is_exact():
    plan = release_sums.NoisePlan.calibrate(-1.0, 3.0, 0.0, (1,), "laplace", 0.7, 0.0, with_count=False)
    s = plan.sums[0]
    assert s.grid == grid_of(3.0, 0.7)
    assert s.noise.sensitivity == round(3.0 / s.grid)  # the larger |bound| in grid units
    assert Fraction(s.noise.sensitivity) / Fraction(s.noise.scale) <= Fraction(0.7)
    assert s.noise.epsilon_effective <= 0.7


def test_sum_noise_unbiased_with_stated_scale():
    """Records on the grid: output - sum = grid * DLap(D / epsilon), D = 3 / grid. z-tests of
    mean and variance (Bonferroni over two) and a KS test against Laplace(3 / epsilon)."""
    x = np.array([0.25, -1.0, 2.75, 3.0, 1.5] * 20)
    n_draws = 5000
    g = rng(22)
    noise = np.array([stats.sum(x, bounds=(-1.0, 3.0), epsilon=1.0, random_state=g)
                      for _ in range(n_draws)]) - x.sum()
    grid = grid_of(3.0, 1.0)
    assert np.all(noise / grid == np.rint(noise / grid))  # multiples of the grid
    t = 3.0 / grid
    q = math.exp(-1.0 / t)
    var_exact = grid**2 * 2 * q / (1 - q) ** 2
    z = z_critical(ALPHA, 2)
    assert abs(noise.mean()) <= z * math.sqrt(var_exact / n_draws)
    m4 = 24 * (grid * t) ** 4  # Laplace fourth moment (the grid is 2**-36 of the scale)
    assert abs(noise.var() - var_exact) <= z * math.sqrt((m4 - var_exact**2) / n_draws)
    assert sps.kstest(noise, sps.laplace(scale=3.0).cdf).pvalue > ALPHA
    assert sps.kstest(noise, sps.laplace(scale=3.6).cdf).pvalue < ALPHA


def test_sum_gaussian_variance():
    x = np.full(50, 0.5)
    n_draws = 4000
    g = rng(23)
    noise = np.array([stats.sum(x, bounds=(0.0, 1.0), epsilon=1.0, delta=1e-5, mechanism="gaussian",
                                random_state=g) for _ in range(n_draws)]) - 25.0
    sigma = calibration.analytic_gaussian_sigma(1.0, 1e-5, 1.0)  # about 3.73
    z = z_critical(ALPHA, 2)
    assert abs(noise.mean()) <= z * sigma / math.sqrt(n_draws)
    assert abs(noise.var() / sigma**2 - 1) <= z * math.sqrt(2 / n_draws) + 1e-4
    assert sps.kstest(noise, sps.norm(scale=sigma).cdf).pvalue > ALPHA


def test_exact_summation_is_order_free_and_matches_rationals():
    """The unit sum equals the exact rational reference in any order, also when it needs several
    int64 partial sums (epsilon large: D ~ 2**50 units per record)."""
    g = rng(24)
    x = np.concatenate([g.uniform(-1e6, 1e6, 5000), g.uniform(-1e-9, 1e-9, 5000), [1e300, -1e300]])
    for eps in (1.0, 1e6):
        plan = release_sums.NoisePlan.calibrate(-1e6, 1e6, 0.0, (1,), "laplace", eps, 0.0, with_count=False)
        s = plan.sums[0]
        ref = 0
        for v in np.clip(x, -1e6, 1e6):
            ref += round(Fraction(float(v)) / Fraction(s.grid))  # half to even, like rint
        assert s.exact_total(x) == ref
        assert s.exact_total(g.permutation(x)) == ref
        units = s.units(x)
        assert np.max(np.abs(units)) <= s.noise.sensitivity  # no record exceeds the sensitivity
        # a naive float sum of the clipped values depends on the order; ours does not
        assert s.exact_total(x[::-1]) == ref


def test_gaussian_sensitivity_of_squares_covers_every_record():
    """The Gaussian variance (n private) keeps the count and centred sums, a third each."""
    stat = release_sums.Statistic.make("var", bounds=(-3.0, 5.0), mechanism="gaussian",
                                       epsilon=1.0, delta=1e-6)
    center, plan = stat.center, stat.plan
    assert center == 1.0
    probe = np.linspace(-10, 10, 100_001)
    for s in plan.sums:
        assert np.max(np.abs(s.units(probe))) == s.noise.sensitivity
    s1, s2 = plan.sums
    assert s1.noise.sensitivity == round(4.0 / s1.grid) and s2.noise.sensitivity == round(16.0 / s2.grid)
    third = plan.count.epsilon
    assert Fraction(third) * 3 <= 1 and third == pytest.approx(1 / 3, rel=1e-15)
    assert s1.noise.epsilon == s2.noise.epsilon == third


# ------------------------------------------------------------------------------------------------
# the record vectors of the mean and variance: exact invariants, noise law, documented decoding

def probe_positions():
    """Unit positions z in [0, 1]: both ends, the middle, near-ends and random ones."""
    tiny = [0.0, 5e-324, 2.0**-60, 2.0**-30, 0.25, 0.5, 0.75, 1 - 2.0**-53, 1 - 2.0**-30, 1.0]
    return np.concatenate([tiny, rng(60).uniform(0.0, 1.0, 20_000)])


@pytest.mark.parametrize("units", [1, 2, 2**10 + 0, 2**36, 2**52])
def test_record_vectors_have_the_stated_l1_bounds(units):
    """Bernstein rows are non-negative and add up to exactly D; |centred| <= D; the rotated
    pair has |r| + |l| <= D; moments <= D each (so the L1 sensitivities hold for any z)."""
    z = probe_positions()
    for construction, parts in (("bernstein1", 2), ("bernstein2", 3)):
        v = release_sums.record_vectors(construction, z, units)
        assert v.shape == (z.size, parts) and v.dtype == np.int64
        assert np.all(v >= 0) and np.all(v.sum(axis=1) == units)
    for construction in ("centred", "deviations"):
        v = release_sums.record_vectors(construction, z, units)
        assert np.max(np.abs(v)) <= units
    v = release_sums.record_vectors("rotated", z, units)
    assert np.all(np.abs(v).sum(axis=1) <= units)
    assert np.max(np.abs(v).sum(axis=1)) == units  # reached at z = 0 and z = 1
    v = release_sums.record_vectors("moments", z, units)
    assert np.max(np.abs(v)) <= units
    # the values are the documented roundings (away from the ends, where nothing is shifted)
    mid = (z > 0.01) & (z < 0.99)
    d = float(units)
    b2 = release_sums.record_vectors("bernstein2", z, units)
    assert np.all(np.abs(b2[mid, 2] - d * z[mid] ** 2) <= 0.5 + 1e-9 * d)
    t = 2 * z - 1
    rot = release_sums.record_vectors("rotated", z, units)
    assert np.all(np.abs(rot[:, 0] - rot[:, 1] - d * t) <= 1.0 + 1e-9 * d)
    assert np.all(np.abs(rot[:, 0] + rot[:, 1] - d * t * t) <= 1.0 + 1e-9 * d)


def test_unit_positions_are_clipped_and_never_overflow():
    z = release_sums.unit_position(np.array([-5.0, 0.0, 2.5, 10.0, 1e308]), 0.0, 10.0)
    assert np.array_equal(z, [0.0, 0.0, 0.25, 1.0, 1.0])
    z = release_sums.unit_position(np.array([-1e308, 0.0, 1e308]), -1e308, 1e308)
    assert np.array_equal(z, [0.0, 0.5, 1.0])


PLANS = [  # (construction, relation, coordinates, sensitivity in units of D)
    ("bernstein1", "add_remove", 2, 1), ("bernstein2", "add_remove", 3, 1),
    ("centred", "add_remove", 1, 1), ("centred", "replace", 1, 2), ("rotated", "add_remove", 2, 1),
]


@pytest.mark.parametrize("construction, relation, parts, reach", PLANS)
def test_vector_noise_is_iid_discrete_laplace_of_the_stated_scale(construction, relation, parts,
                                                                  reach):
    """Every coordinate gets independent discrete Laplace noise of scale t = reach D / epsilon
    rounded up (checked exactly); KS of the noise / t against Laplace(1) (t is about 2**36, so
    the discrete law is Laplace's to 1e-10) with power against a 25% larger scale (its KS
    distance is above twice the critical value at ALPHA), and no correlation between
    coordinates."""
    eps = 0.7
    plan = release_sums.VectorPlan.calibrate(construction, 0.0, 4.0, "laplace", eps, 0.0,
                                             relation=relation)
    t = plan.noises[0].scale
    assert len(plan.noises) == parts and all(nz.scale == t for nz in plan.noises)
    assert Fraction(t) >= Fraction(reach * plan.units) / Fraction(eps)
    assert Fraction(t) * (1 - Fraction(1, 2**50)) < Fraction(reach * plan.units) / Fraction(eps)
    assert 2.0**35 < t < 2.0**37
    x = rng(61).uniform(-1.0, 5.0, 300)
    exact = plan.exact(x)
    g = rng(62)
    n_draws = 20_000
    noise = np.array([[a - b for a, b in zip(plan.release(exact, g)[1], exact[1])]
                      for _ in range(n_draws)], dtype=float) / t
    assert laplace_ks_power(1.25, n_draws)
    for k in range(parts):
        assert sps.kstest(noise[:, k], sps.laplace.cdf).pvalue > ALPHA / parts
        assert sps.kstest(noise[:, k], sps.laplace(scale=1.25).cdf).pvalue < ALPHA
    if parts > 1:
        corr = np.corrcoef(noise.T)[np.triu_indices(parts, 1)]
        assert np.all(np.abs(corr) < z_critical(ALPHA, parts) / math.sqrt(n_draws))


def laplace_ks_power(wrong_scale, n_draws):
    """Whether Laplace(wrong_scale) is further from Laplace(1) in KS distance than twice the
    critical value at ALPHA for n_draws (so the test rejects it with near certainty)."""
    grid = np.linspace(0.0, 20.0, 20_001)
    distance = np.max(np.abs(sps.laplace.cdf(grid) - sps.laplace(scale=wrong_scale).cdf(grid)))
    return distance > 2 * math.sqrt(-math.log(ALPHA / 2) / (2 * n_draws))


def replay(kind, x, bounds, epsilon, seed, mechanism="laplace", delta=0.0, **options):
    """The documented post-processing of the plan's noisy totals, written out here: it must
    reproduce the public function's output exactly for the same seed."""
    lo, hi = bounds
    c, h = lo / 2 + hi / 2, hi / 2 - lo / 2
    stat = release_sums.Statistic.make(kind, bounds=bounds, mechanism=mechanism, epsilon=epsilon,
                                       delta=delta, records=np.asarray(x), **options)
    plan = stat.plan
    _, totals = plan.release(plan.exact(np.asarray(x)), rng(seed))
    d = plan.units
    n = options.get("n", len(x))
    if plan.construction == "bernstein1":
        t = min(max((totals[1] - totals[0]) / max(totals[0] + totals[1], d), -1.0), 1.0)
        return min(max(c + h * t, lo), hi)
    if plan.construction == "bernstein2":
        w = max(sum(totals), d)
        m = (totals[1] / 2 + totals[2]) / w
        var_z = min(max(totals[2] / w - m * m, 0.0), 0.25)
        return h * (h * (4 * var_z))
    if plan.construction == "centred":
        value = c + h * (totals[0] / (d * n))
        return min(max(value, lo), hi) if kind == "mean" else min(max(n * value, n * lo), n * hi)
    if plan.construction in ("rotated", "moments"):
        if plan.construction == "rotated":
            s1, s2 = (totals[0] - totals[1]) / d, (totals[0] + totals[1]) / d
        else:
            s1, s2 = totals[0] / d, totals[1] / d
        return h * (h * min(max(s2 / n - (s1 / n) ** 2, 0.0), 1.0))
    spread = (totals[0] + 0.5) * plan.coarsen if plan.coarsen > 1 else totals[0]
    return h * (h * min(max(spread / (n * float(d) ** 2 * n), 0.0), 1.0))


@pytest.mark.parametrize("kind, options", [
    ("mean", {}), ("mean", {"n": 300}), ("mean", {"relation": "replace"}), ("var", {}),
    ("var", {"n": 300}), ("var", {"relation": "replace"}), ("sum", {"n": 250}),
    ("sum", {"relation": "replace"}),
])
def test_mean_var_sum_are_the_documented_post_processing(kind, options):
    x = rng(25).uniform(-5, 15, 300)
    for eps in (0.05, 0.9, 30.0):
        out = getattr(stats, kind)(x, bounds=(0.0, 10.0), epsilon=eps, random_state=rng(26),
                                   **options)
        assert out == replay(kind, x, (0.0, 10.0), eps, 26, **options)
    if kind == "var":
        std = stats.std(x, bounds=(0.0, 10.0), epsilon=0.9, random_state=rng(26), **options)
        assert std == math.sqrt(replay(kind, x, (0.0, 10.0), 0.9, 26, **options))


@pytest.mark.parametrize("kind, options", [("mean", {"n": 300}), ("var", {"n": 300}),
                                           ("var", {"relation": "replace"}),
                                           ("sum", {"relation": "replace"})])
def test_gaussian_public_size_is_the_documented_post_processing(kind, options):
    """The Gaussian with n public or replace-one: the same constructions (``moments`` for the
    variance with n, halves of the budget), exact discrete Gaussian noise calibrated per
    coordinate with the scalar CKS delta; replayed exactly."""
    x = rng(69).uniform(-5, 15, 300)
    gauss = {"mechanism": "gaussian", "delta": 1e-6}
    out = getattr(stats, kind)(x, bounds=(0.0, 10.0), epsilon=0.9, random_state=rng(70),
                               **gauss, **options)
    assert out == replay(kind, x, (0.0, 10.0), 0.9, 70, **gauss, **options)
    plan = release_sums.Statistic.make(kind, bounds=(0.0, 10.0), epsilon=0.9, records=x,
                                       **gauss, **options).plan
    parts = len(plan.noises)
    reach = 2 if options.get("relation") == "replace" else 1
    for noise in plan.noises:
        assert noise.mechanism == "gaussian"
        assert noise.epsilon * parts <= 0.9 and noise.delta * parts <= 1e-6
        if plan.construction != "deviations":
            assert noise.sensitivity == reach * plan.units
            assert noise.scale == calibration.discrete_gaussian_sigma(
                noise.epsilon, noise.delta, noise.sensitivity)


@pytest.mark.parametrize("kind, options, reach", [
    ("mean", {"n": 400}, 1), ("mean", {"relation": "replace"}, 2), ("sum", {"n": 400}, 1),
])
def test_public_size_output_law(kind, options, reach):
    """With n public (or replace-one), (output - c) n / h is the exact centred sum plus
    Laplace noise of scale reach h / (epsilon n) in mean units: KS of the recovered noise with
    power against a 50% larger scale."""
    x = rng(63).uniform(2.0, 9.0, 400)
    eps, lo, hi, n_draws = 0.5, 0.0, 10.0, 10_000
    c, h = 5.0, 5.0
    g = rng(64)
    out = np.array([getattr(stats, kind)(x, bounds=(lo, hi), epsilon=eps, random_state=g,
                                         **options) for _ in range(n_draws)])
    per_record = out - 400 * c if kind == "sum" else (out - c) * 400
    scale = reach * h / eps
    noise = (per_record - (x - c).sum()) / scale
    assert laplace_ks_power(1.5, n_draws)
    assert sps.kstest(noise, sps.laplace.cdf).pvalue > ALPHA
    assert sps.kstest(noise, sps.laplace(scale=1.5).cdf).pvalue < ALPHA


def test_replace_one_variance_output_law():
    """relation="replace": var = h**2 (floor(T / G) + 1/2 + Z) G / N**2 / D**2 with Z discrete
    Laplace of scale ((N - 1) (2 D)**2 / G + 1) / epsilon: KS of the recovered Z, power as
    above."""
    x = rng(65).uniform(1.0, 9.0, 200)
    eps, n_draws = 0.8, 10_000
    plan = release_sums.Statistic.make("var", bounds=(0.0, 10.0), mechanism="laplace",
                                       epsilon=eps, delta=0.0, relation="replace",
                                       records=x).plan
    assert plan.coarsen > 1
    spread = 199 * (2 * plan.units) ** 2
    t = plan.noises[0].scale
    assert Fraction(t) >= Fraction(spread // plan.coarsen + 1) / Fraction(eps)
    floor_total = plan.exact(x)[1][0]
    g = rng(66)
    out = np.array([stats.var(x, bounds=(0.0, 10.0), epsilon=eps, relation="replace",
                              random_state=g) for _ in range(n_draws)])
    z = out / 25.0 * 200**2 * float(plan.units) ** 2 / plan.coarsen - 0.5 - floor_total
    assert laplace_ks_power(1.5, n_draws)
    assert sps.kstest(z / t, sps.laplace.cdf).pvalue > ALPHA
    assert sps.kstest(z / t, sps.laplace(scale=1.5).cdf).pvalue < ALPHA
    k = np.rint(plan.units * (2 * x / 10.0 - 1))
    exact = 200 * np.sum(k * k) - np.sum(k) ** 2
    assert floor_total == int(exact) // plan.coarsen


@pytest.mark.slow
@pytest.mark.parametrize("kind, options", [("mean", {}), ("var", {}), ("var", {"n": 2000}),
                                           ("mean", {"n": 2000})])
def test_first_order_rmse_matches_the_documented_formula(kind, options):
    """The Notes' first-order RMSE against 4000 releases on skewed data: the mean squared error
    within a z-test (SE from the fourth moment, Bonferroni over 4 cases) plus 3% for the
    second-order terms; a split of the budget in halves or thirds would be 30-80% off."""
    x = np.clip(rng(67).lognormal(0.0, 1.0, 2000), 0.0, 20.0)
    eps, n_draws, lo, hi = 1.0, 4000, 0.0, 20.0
    g = rng(68)
    fn = getattr(stats, kind)
    out = np.array([fn(x, bounds=(lo, hi), epsilon=eps, random_state=g, **options)
                    for _ in range(n_draws)])
    n, h, c = len(x), (hi - lo) / 2, (hi + lo) / 2
    z = (x - lo) / (hi - lo)
    if kind == "mean":
        truth = x.mean()
        predicted = (2 * math.sqrt(h**2 + (x.mean() - c) ** 2) if not options
                     else math.sqrt(2) * h) / (eps * n)
    else:
        truth = x.var()
        m, v = z.mean(), z.var()
        if options:
            mt = ((x - c) / h).mean()
            predicted = h**2 * math.sqrt(2 * (2 + 8 * mt**2)) / (eps * n)
        else:
            w = np.array([m * m - v, m * m - m - v, (1 - m) ** 2 - v])
            predicted = (hi - lo) ** 2 * math.sqrt(2 * np.sum(w * w)) / (eps * n)
    sq = (out - truth) ** 2
    se = math.sqrt(np.var(sq) / n_draws)
    tol = z_critical(ALPHA, 4) * se + 0.03 * predicted**2
    assert abs(sq.mean() - predicted**2) <= tol, (math.sqrt(sq.mean()), predicted)


def test_var_and_std_are_accurate_at_large_epsilon():
    x = rng(28).uniform(0, 10, 5000)
    v = stats.var(x, bounds=(0.0, 10.0), epsilon=50.0, random_state=1)
    assert v == pytest.approx(x.var(), rel=1e-2)
    v1 = stats.var(x, bounds=(0.0, 10.0), epsilon=50.0, ddof=1, random_state=1)
    assert v1 == pytest.approx(v * 5000 / 4999, rel=1e-3)
    assert stats.std(x, bounds=(0.0, 10.0), epsilon=50.0, random_state=1) == pytest.approx(
        math.sqrt(v))
    # post-processing clamps: never negative, never above ((upper - lower)/2)**2
    for seed in range(30):
        v = stats.var([5.0, 5.0], bounds=(0.0, 10.0), epsilon=0.1, random_state=seed)
        assert 0.0 <= v <= 25.0


CLIP_X = np.array([-50.0, 1.0, 2.0, 3.5, 9.0, 11.0, 1e9, -0.5])


@pytest.mark.parametrize("call", [
    lambda x, s: stats.sum(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=s),
    lambda x, s: stats.mean(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=s),
    lambda x, s: stats.var(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=s),
    lambda x, s: stats.std(x, bounds=(0.0, 10.0), epsilon=1.0, mechanism="gaussian", delta=1e-6,
                           random_state=s),
    lambda x, s: stats.quantile(x, [0.2, 0.7], epsilon=1.0, bounds=(0.0, 10.0), random_state=s),
    lambda x, s: stats.median(x, epsilon=1.0, bounds=(0.0, 10.0), grid=101, random_state=s),
], ids=["sum", "mean", "var", "std", "quantile", "median-grid"])
def test_records_outside_bounds_are_clipped(call):
    """Same seed: the data with outliers gives exactly what the clipped data gives."""
    a = call(CLIP_X, 31)
    b = call(np.clip(CLIP_X, 0.0, 10.0), 31)
    assert np.array_equal(a, b)


# ------------------------------------------------------------------------------------------------
# histogram


def test_histogram_edges_and_shapes_match_numpy():
    x = np.array([-1.0, 0.0, 0.3, 1.0, 2.0, 2.0, 3.999, 4.0, 7.0])
    for bins, rng_ in [(4, (0.0, 4.0)), (7, (-2.0, 5.0)), ([0.0, 0.5, 2.0, 4.0], None),
                       (np.array([0.0, 0.5, 2.0, 4.0]), (0.0, 4.0))]:
        counts, edges = stats.histogram(x, bins=bins, range=rng_, epsilon=1e4, random_state=0)
        exact, np_edges = np.histogram(x, bins=bins, range=rng_)
        assert np.array_equal(edges, np_edges)
        assert counts.shape == exact.shape and counts.dtype == np.int64
        assert np.array_equal(counts, exact)  # epsilon 1e4: the noise is 0 with prob ~1


def test_histogram_every_bin_is_noised_with_dlap():
    """2000 bins, records in 3 of them: the noise of every bin (the empty ones included)
    follows DLap(1 / epsilon); the bins are i.i.d. draws."""
    x = np.repeat([0.5, 10.5, 1999.5], [40, 7, 1])
    counts, edges = stats.histogram(x, bins=2000, range=(0.0, 2000.0), epsilon=0.7,
                                    nonnegative=False, random_state=rng(40))
    exact, _ = np.histogram(x, bins=2000, range=(0.0, 2000.0))
    noise = counts - exact
    empty = exact == 0
    assert empty.sum() == 1997
    t = float(Fraction(1) / Fraction(0.7))
    t = t if Fraction(t) >= Fraction(1) / Fraction(0.7) else math.nextafter(t, math.inf)
    support = np.arange(-12, 13)
    assert integer_pvalue(noise[empty], dlap_pmf(t), support) > ALPHA
    assert integer_pvalue(noise[empty], dlap_pmf(t * 1.4), support) < ALPHA
    assert np.count_nonzero(noise[empty]) > 1000  # empty bins do get nonzero outputs
    # more bins for a sharper check of the whole vector
    counts, _ = stats.histogram(x, bins=20_000, range=(0.0, 2000.0), epsilon=0.7,
                                nonnegative=False, random_state=rng(41))
    exact, _ = np.histogram(x, bins=20_000, range=(0.0, 2000.0))
    assert integer_pvalue(counts - exact, dlap_pmf(t), support) > ALPHA
    assert integer_pvalue(counts - exact, dlap_pmf(t * 1.1), support) < ALPHA


def test_histogram_gaussian_and_nonnegative():
    x = np.repeat([0.5, 2.5], [30, 3])
    sigma = calibration.discrete_gaussian_sigma(1.0, 1e-5, 1)
    counts, _ = stats.histogram(x, bins=10_000, range=(0.0, 10.0), epsilon=1.0, delta=1e-5,
                                mechanism="gaussian", nonnegative=False, random_state=rng(42))
    exact, _ = np.histogram(x, bins=10_000, range=(0.0, 10.0))
    assert integer_pvalue(counts - exact, dgauss_pmf(sigma), np.arange(-18, 19)) > ALPHA
    raw, _ = stats.histogram(x, bins=50, range=(0.0, 10.0), epsilon=0.5, nonnegative=False,
                             random_state=43)
    clamped, _ = stats.histogram(x, bins=50, range=(0.0, 10.0), epsilon=0.5, random_state=43)
    assert np.array_equal(clamped, np.maximum(raw, 0)) and clamped.dtype == np.int64
    nonneg, _ = stats.histogram(x, bins=50, range=(0.0, 10.0), epsilon=0.5, nonnegative=True,
                                random_state=43)
    assert np.any(raw < 0) and nonneg.min() >= 0.0
    # the total is kept (clamping would raise it), and the projection is max(raw - theta, 0)
    assert nonneg.sum() == pytest.approx(max(raw.sum(), 0))
    pos = nonneg > 0
    theta = (raw - nonneg)[pos]
    np.testing.assert_allclose(theta, theta[0], atol=1e-9)
    assert np.all(raw[~pos] <= theta[0] + 1e-9)


def test_histogram_replace_one_noise_and_public_total():
    """relation="replace": discrete Laplace of scale 2 / epsilon (rounded up) on every bin,
    with power against 1 / epsilon; n= is the total of the projection."""
    x = np.repeat([0.5, 10.5], [40, 7])
    counts, _ = stats.histogram(x, bins=20_000, range=(0.0, 2000.0), epsilon=0.7,
                                relation="replace", nonnegative=False, random_state=rng(44))
    exact, _ = np.histogram(x, bins=20_000, range=(0.0, 2000.0))
    t = float(Fraction(2) / Fraction(0.7))
    t = t if Fraction(t) >= Fraction(2) / Fraction(0.7) else math.nextafter(t, math.inf)
    support = np.arange(-25, 26)
    assert integer_pvalue(counts - exact, dlap_pmf(t), support) > ALPHA
    assert integer_pvalue(counts - exact, dlap_pmf(t / 2), support) < ALPHA
    projected, _ = stats.histogram(x, bins=10, range=(0.0, 20.0), epsilon=0.7, n=47,
                                   nonnegative="project", random_state=rng(45))
    assert projected.min() >= 0 and projected.sum() == pytest.approx(47)
    with pytest.raises(ValueError, match="nonnegative must be 'clamp', 'project'"):
        stats.histogram(x, bins=10, range=(0.0, 20.0), epsilon=0.7, nonnegative="round")
    with pytest.raises(ValueError, match="relation='replace' is supported with mechanism='laplace'"):
        stats.histogram(x, bins=10, range=(0.0, 20.0), epsilon=0.7, relation="replace",
                        mechanism="gaussian", delta=1e-6)


# ------------------------------------------------------------------------------------------------
# errors

CALLS = {
    "count": lambda **k: stats.count([1.0, 2.0], **{"epsilon": 1.0, **k}),
    "sum": lambda **k: stats.sum([1.0, 2.0], **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "mean": lambda **k: stats.mean([1.0, 2.0], **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "var": lambda **k: stats.var([1.0, 2.0], **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "std": lambda **k: stats.std([1.0, 2.0], **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "quantile": lambda **k: stats.quantile([1.0, 2.0], 0.5, **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "median": lambda **k: stats.median([1.0, 2.0], **{"bounds": (0, 1), "epsilon": 1.0, **k}),
    "histogram": lambda **k: stats.histogram([1.0, 2.0],
                                             **{"bins": 3, "range": (0, 3), "epsilon": 1.0, **k}),
}
BOUNDED = ["sum", "mean", "var", "std", "quantile", "median"]


@pytest.mark.parametrize("name", BOUNDED)
def test_missing_bounds_names_bounds(name):
    with pytest.raises(ValueError, match="bounds is required"):
        CALLS[name](bounds=None)
    with pytest.raises(ValueError, match="bounds"):
        CALLS[name](bounds=(1.0, 1.0))
    with pytest.raises(TypeError, match="bounds"):
        CALLS[name](bounds=3.0)


@pytest.mark.parametrize("name", list(CALLS))
def test_errors_name_the_parameter(name):
    call = CALLS[name]
    assert call(random_state=0) is not None
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        call(epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        call(epsilon=-1.0)
    fn = getattr(stats, name)
    kwargs = {"epsilon": 1.0}
    if name in BOUNDED:
        kwargs["bounds"] = (0, 1)
    if name == "histogram":
        kwargs.update(bins=3, range=(0, 3))
    args = ([1.0, np.nan],) + ((0.5,) if name == "quantile" else ())
    with pytest.raises(ValueError, match="^x must not contain NaN"):
        fn(*args, **kwargs)


@pytest.mark.parametrize("name", ["count", "sum", "mean", "var", "std", "histogram"])
def test_mechanism_errors(name):
    with pytest.raises(ValueError, match="delta must be 0 for mechanism='laplace'"):
        CALLS[name](delta=1e-6)
    with pytest.raises(ValueError, match="delta is required"):
        CALLS[name](mechanism="gaussian", delta=None)
    with pytest.raises(ValueError, match="delta must be in"):
        CALLS[name](mechanism="gaussian", delta=0.0)
    with pytest.raises(ValueError, match="mechanism must be"):
        CALLS[name](mechanism="snapping")


def test_quantile_and_histogram_errors():
    x = [1.0, 2.0]
    with pytest.raises(ValueError, match="q must be in"):
        stats.quantile(x, 1.5, epsilon=1.0, bounds=(0, 1))
    with pytest.raises(ValueError, match="q must be in"):
        stats.quantile(x, [0.5, np.nan], epsilon=1.0, bounds=(0, 1))
    with pytest.raises(ValueError, match="at least one"):
        stats.quantile(x, [], epsilon=1.0, bounds=(0, 1))
    with pytest.raises(ValueError, match="method must be 'gumbel'"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid="continuous", method="exact")
    with pytest.raises(ValueError, match="grid must be None, an int, an array or 'continuous'"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid="fine")
    with pytest.raises(ValueError, match=r"grid must be <= 4503599627370497"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid=2**53)
    with pytest.raises(ValueError, match="method must be one of"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid=5, method="bogus")
    with pytest.raises(ValueError, match="grid must be >= 2"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid=1)
    with pytest.raises(ValueError, match="grid must be strictly increasing"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid=[0.5, 0.2])
    with pytest.raises(ValueError, match="grid points must lie within bounds"):
        stats.quantile(x, 0.5, epsilon=1.0, bounds=(0, 1), grid=[0.5, 2.0])
    with pytest.raises(ValueError, match="range is required"):
        stats.histogram(x, bins=3, epsilon=1.0)
    with pytest.raises(ValueError, match="bins must be an int or an array of edges"):
        stats.histogram(x, bins="auto", range=(0, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="bins must be >= 1"):
        stats.histogram(x, bins=0, range=(0, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="bins must be strictly increasing"):
        stats.histogram(x, bins=[0.0, 2.0, 1.0], epsilon=1.0)
    with pytest.raises(ValueError, match="range .* disagrees"):
        stats.histogram(x, bins=[0.0, 1.0, 2.0], range=(0.0, 3.0), epsilon=1.0)
    with pytest.raises(TypeError, match="nonnegative"):
        stats.histogram(x, bins=3, range=(0, 3), epsilon=1.0, nonnegative=1)
    with pytest.raises(ValueError, match="ddof must be >= 0"):
        stats.var(x, bounds=(0, 1), epsilon=1.0, ddof=-1)
    for name in ("sum", "mean", "var", "std"):
        fn = getattr(stats, name)
        with pytest.raises(ValueError, match="n must be >= 1"):
            fn(x, bounds=(0, 1), epsilon=1.0, n=0)
        with pytest.raises(TypeError, match="n must be an integer"):
            fn(x, bounds=(0, 1), epsilon=1.0, n=2.0)
        with pytest.raises(ValueError, match="relation must be 'add_remove' or 'replace'"):
            fn(x, bounds=(0, 1), epsilon=1.0, relation="bounded")
        with pytest.raises(ValueError, match="n must be None with relation='replace'"):
            fn(x, bounds=(0, 1), epsilon=1.0, n=2, relation="replace")


# ------------------------------------------------------------------------------------------------
# accountant


@pytest.mark.parametrize("name, delta", [(n, 0.0) for n in CALLS] +
                         [(n, 1e-6) for n in ["count", "sum", "mean", "var", "std", "histogram"]])
def test_accountant_charged_and_refusal_releases_nothing(name, delta):
    extra = {} if delta == 0.0 else {"mechanism": "gaussian", "delta": delta}
    acc = dpcore.Accountant(1.0, 1e-5)
    CALLS[name](epsilon=0.4, accountant=acc, random_state=0, **extra)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.4, delta, f"stats.{name}")
    acc2 = dpcore.Accountant(0.3, 1e-5)
    g = rng(50)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        CALLS[name](epsilon=0.4, accountant=acc2, random_state=g, **extra)
    assert g.bit_generator.state == before  # nothing drawn
    assert acc2.history == []


def test_invalid_input_charges_nothing():
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError):
        stats.mean([1.0, np.nan], bounds=(0, 1), epsilon=0.5, accountant=acc)
    with pytest.raises(ValueError):
        stats.quantile([1.0], 0.5, epsilon=0.5, bounds=(0, 1), grid=[3.0], accountant=acc)
    assert acc.history == []


# ------------------------------------------------------------------------------------------------
# documentation


@pytest.mark.parametrize("name", stats.__all__)
def test_release_functions_have_privacy_section(name):
    doc = inspect.getdoc(getattr(stats, name)) or ""
    assert re.search(r"^Privacy\n-------\n", doc, flags=re.MULTILINE)
    assert "add/remove" in doc


def test_docstring_examples():
    """doctest reads only the names a module defines: run it over every module of the package."""
    import importlib
    attempted = 0
    for name in ("", "._moments", "._quantiles", "._histograms"):
        module = importlib.import_module("dpcore.stats" + name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0
        attempted += result.attempted
    assert attempted > 10
