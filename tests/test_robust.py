"""dpcore.robust: the smooth sensitivity of the median against its definition (exhaustively on
small data), the exact noise laws of the releases against independently computed laws, the
calibration inequalities, and the release contract (validate, charge once, then draw)."""
import collections
import doctest
import functools
import inspect
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from _gof import ALPHA, chisquare_pvalue
from _generators import GENERATOR_KINDS, generator, misread_words

import dpcore
from dpcore import _smooth, robust
from dpcore.robust import _aggregate, _median, _ptr, _svt
from dpcore.random import ChaCha20


def rng(seed):
    return np.random.Generator(ChaCha20(seed))


def power(p_true, p_null, n_draws):
    """Chance that a chi-square test at ALPHA rejects p_null when p_true is the law."""
    p_true, p_null = np.asarray(p_true), np.asarray(p_null)
    lam = n_draws * np.sum((p_true - p_null) ** 2 / p_null)
    df = p_null.size - 1
    return sps.ncx2.sf(sps.chi2.isf(ALPHA, df), df, lam)


# ------------------------------------------------------------------------------------------------
# smooth sensitivity: the definition, by brute force


def lower_median(values):
    return sorted(values)[(len(values) + 1) // 2 - 1]


def brute_force_smooth(n, grid_max, betas):
    """S*(x) = max_k e^{-beta k} A^(k)(x), A^(k)(x) = max of LS(y) over data sets y at replace
    distance <= k, LS(y) = max |med(y) - med(z)| over z replacing one record of y; every data set
    of n records on {0..grid_max} (bounds (0, grid_max)). Restricting the replacements to the
    grid loses nothing: the median of y with one record replaced by t is t clamped between two
    order statistics of y, extreme at t = 0 or t = grid_max, and the order statistics and
    bounds are grid points. Returns {data set (sorted tuple): [S* for each beta]}."""
    sets = list(itertools.combinations_with_replacement(range(grid_max + 1), n))
    local = {}
    for y in sets:
        med = lower_median(y)
        worst = 0
        for drop in set(y):
            rest = list(y)
            rest.remove(drop)
            for t in range(grid_max + 1):
                worst = max(worst, abs(lower_median(rest + [t]) - med))
        local[y] = worst
    counts = {y: collections.Counter(y) for y in sets}
    out = {}
    for x in sets:
        a = [0] * (n + 1)  # a[k]: the largest LS at distance exactly k, then the running max
        for y in sets:
            common = sum((counts[x] & counts[y]).values())
            k = n - common
            a[k] = max(a[k], local[y])
        for k in range(1, n + 1):
            a[k] = max(a[k], a[k - 1])
        out[x] = [max(math.exp(-beta * k) * a[k] for k in range(n + 1)) for beta in betas]
    return out


@pytest.mark.parametrize("n", range(1, 8))
def test_smooth_sensitivity_equals_the_definition_exhaustively(n):
    betas = [0.05, 0.4, 1.0, 3.0]
    grid_max = 4 if n <= 6 else 3
    for x, expected in brute_force_smooth(n, grid_max, betas).items():
        for beta, want in zip(betas, expected):
            got = robust.smooth_sensitivity_median(np.array(x, float), (0.0, grid_max), beta)
            assert got == pytest.approx(want, rel=1e-13, abs=0), (x, beta)


def definition_numpy(sorted_x, lower, upper, beta):
    """NRS's formula, O(n**2): max_k e^{-beta k} max_t (x_{m+t} - x_{m+t-k-1}), padded."""
    n = sorted_x.size
    m = (n + 1) // 2
    padded = np.concatenate([[lower], sorted_x, [upper] * (n + 2)])  # padded[i] = x_i, i >= 0
    best = 0.0
    for k in range(n + 1):
        t = np.arange(k + 2)
        hi = padded[np.minimum(m + t, n + 1)]
        lo = padded[np.maximum(m + t - k - 1, 0)]
        best = max(best, math.exp(-beta * k) * float(np.max(hi - lo)))
    return best


def test_smooth_sensitivity_matches_the_formula_on_random_data():
    g = np.random.default_rng(5)  # test data only
    for _ in range(300):
        n = int(g.integers(1, 120))
        x = np.sort(g.integers(-50, 50, n)).astype(float)
        if g.random() < 0.3:
            x = np.repeat(x[: max(1, n // 5)], 5)[:n]  # many ties
        beta = float(g.choice([1e-3, 0.02, 0.3, 2.0, 50.0]))
        want = definition_numpy(np.clip(x, -40, 40), -40.0, 40.0, beta)
        got = robust.smooth_sensitivity_median(x, (-40.0, 40.0), beta)
        assert got == pytest.approx(want, rel=1e-13, abs=1e-300)


def test_smooth_bound_is_smooth_and_above_local_sensitivity():
    """The bound the release uses: S >= LS and S(x) <= e^beta S(y) for every replace-one
    neighbour y (all of them, on the grid), on random small data sets."""
    g = np.random.default_rng(6)
    grid = _smooth._Grid.of((0.0, 9.0))
    beta = 0.3
    for _ in range(60):
        n = int(g.integers(1, 9))
        x = g.integers(0, 10, n).astype(float)
        units = grid.units(x)
        m = (n + 1) // 2
        s_x = _median._smooth_units(units, grid, m, beta)
        med = lower_median(x)
        for i in range(n):
            for t in range(10):
                y = x.copy()
                y[i] = t
                assert abs(lower_median(y) - med) <= s_x * grid.step
                s_y = _median._smooth_units(grid.units(y), grid, m, beta)
                assert s_x <= math.exp(beta) * s_y


def test_kernel_is_fast_and_agrees_with_its_naive_twin():
    g = np.random.default_rng(7)
    x = np.sort(g.integers(0, 2**40, 20_000)).astype(np.int64)
    m = (x.size + 1) // 2
    fast = dpcore._robust.smooth_sensitivity_sorted(x, 0, 2**40, m, 0.001, x.size + 1)
    slow = dpcore._robust.smooth_sensitivity_definition(x, 0, 2**40, m, 0.001)
    assert fast == pytest.approx(slow, rel=1e-13)


# ------------------------------------------------------------------------------------------------
# calibration


def test_lipschitz_constant_of_h4_is_an_upper_bound():
    assert robust.LIPSCHITZ_H4**4 >= 27  # >= (3**(3/4))**4
    z = np.linspace(0, 5, 200_001)
    assert np.max(4 * z**3 / (1 + z**4)) <= float(robust.LIPSCHITZ_H4)
    assert np.max(4 * z**3 / (1 + z**4)) == pytest.approx(3**0.75, rel=1e-9)


@pytest.mark.parametrize("epsilon", [2.0**-20, 0.01, 0.5, 1.0, 8.0, 2.0**10])
def test_pure_plan_spends_at_most_epsilon(epsilon):
    plan = robust.SmoothMedianPlan.calibrate(epsilon)
    assert plan.noise == "h4" and plan.delta == 0.0
    # slide L alpha plus dilation 3 beta (gamma - 1 = 3), exactly in rationals
    assert robust.LIPSCHITZ_H4 * plan.alpha + 3 * Fraction(plan.beta) <= Fraction(epsilon)


@pytest.mark.parametrize("epsilon, delta", [(2.0**-20, 1e-9), (0.1, 1e-6), (1.0, 1e-6),
                                            (3.0, 0.1), (2.0**10, 1e-12)])
def test_laplace_plan_spends_at_most_epsilon_delta(epsilon, delta):
    import mpmath
    mpmath.mp.dps = 50
    plan = robust.SmoothMedianPlan.calibrate(epsilon, delta)
    eps, beta = mpmath.mpf(epsilon), mpmath.mpf(plan.beta)
    assert plan.alpha == Fraction(epsilon) / 2
    delta0 = mpmath.mpf(delta) * mpmath.exp(-eps / 2)
    # slide alpha + dilation beta + ln(1/delta0) (e^beta - 1) <= epsilon; e^alpha delta0 <= delta
    total = mpmath.mpf(plan.alpha.numerator) / plan.alpha.denominator + beta + \
        mpmath.log(1 / delta0) * mpmath.expm1(beta)
    assert total <= eps
    assert mpmath.exp(eps / 2) * delta0 <= mpmath.mpf(delta) * (1 + mpmath.mpf(10) ** -40)


@pytest.mark.parametrize("epsilon", [64.0, 2.0**10])
def test_laplace_variant_works_over_the_documented_epsilon_range(epsilon):
    """Review finding: the (epsilon, delta) calibration bounds e^beta - 1 by beta e^(epsilon/2),
    so beta ~ epsilon e^(-epsilon/2) / (2 ln(1/delta0)) falls below the kernel's slack
    _BETA_SLACK = 2**-39 for epsilon >~ 53 (inside the documented [2**-20, 2**10]); the smooth
    bound is then computed with beta - 2**-39 <= 0 and median / trimmed_mean crash (MemoryError
    from the kernel's negative window, ValueError from an empty numpy max) instead of
    releasing. beta = log1p(epsilon / (2 (1 + ln(1/delta0)))) satisfies
    beta + ln(1/delta0) (e^beta - 1) <= (1 + ln(1/delta0)) (e^beta - 1) = epsilon / 2 and
    never gets near the slack."""
    plan = robust.SmoothMedianPlan.calibrate(epsilon, 1e-6)
    assert plan.beta > _median._BETA_SLACK  # the bound is computed with beta - _BETA_SLACK
    x = np.arange(11.0)
    for release in (robust.median, robust.trimmed_mean):
        out = release(x, bounds=(0.0, 10.0), epsilon=epsilon, delta=1e-6, random_state=rng(1))
        assert 0.0 <= out <= 10.0


def test_subnormal_delta_is_validated_not_a_crash():
    """Review finding: delta in (0, 1) is accepted, but for a subnormal delta 1.0 / delta
    overflows: SmoothMedianPlan gets beta = 0 (median / trimmed_mean then crash with
    MemoryError / numpy's ValueError) and _ptr_plan raises OverflowError. Either compute with
    -log(delta) or reject such delta with a ValueError naming it, before any charge."""
    x = np.arange(11.0)
    calls = [
        lambda acc: robust.median(x, bounds=(0.0, 10.0), epsilon=1.0, delta=1e-320,
                                  random_state=rng(1), accountant=acc),
        lambda acc: robust.trimmed_mean(x, bounds=(0.0, 10.0), epsilon=1.0, delta=1e-320,
                                        random_state=rng(1), accountant=acc),
        lambda acc: robust.ptr_median(x, bounds=(0.0, 10.0), sensitivity_bound=1.0, epsilon=1.0,
                                      delta=1e-320, random_state=rng(1), accountant=acc),
    ]
    for call in calls:
        acc = dpcore.Accountant(10.0, 0.5)
        try:
            call(acc)
        except ValueError as exc:  # a documented rejection: it must name delta, charge nothing
            assert "delta" in str(exc)
            assert acc.history == []


# ------------------------------------------------------------------------------------------------
# exact laws of the released median

def h4_cdf(z):
    """CDF of the density (sqrt(2) / pi) / (1 + z**4), from its antiderivative."""
    z = np.asarray(z, dtype=float)
    a = np.abs(z)
    r2 = math.sqrt(2.0)
    with np.errstate(divide="ignore"):
        part = (np.log((a * a + r2 * a + 1) / (a * a - r2 * a + 1))
                + 2 * np.arctan(r2 * a + 1) + 2 * np.arctan(r2 * a - 1)) / (4 * r2)
    half = part / (math.pi / r2)  # P(0 <= Z <= a)
    return np.where(np.isinf(a), 1.0, 0.5 + np.sign(z) * half)


def test_h4_cdf_matches_quadrature():
    for z in (-7.0, -1.3, -0.2, 0.0, 0.4, 1.0, 2.5, 30.0):
        want = integrate.quad(lambda t: math.sqrt(2) / math.pi / (1 + t**4), -np.inf, z)[0]
        assert float(h4_cdf(z)) == pytest.approx(want, abs=1e-10)


def laplace_cdf(z):
    return sps.laplace.cdf(z)


# 15 records on a grid of 2**-6 in [0, 1] (exact grid points, so the expected S is computable)
X_MED = np.array([3, 9, 14, 20, 27, 30, 31, 33, 34, 40, 45, 52, 57, 60, 63]) / 64.0
BOUNDS = (0.0, 1.0)
EDGES = np.arange(0, 65) / 64.0  # 64 bins of the output


def expected_bins(cdf, scale_factor=1.0, epsilon=1.0, delta=None):
    """The law of the binned output, computed from the documented calibration: centre the lower
    median, scale S / alpha with S = max(2**-40 W, (1 + 2**-40) S*_{beta - 2**-39}) (grid units),
    rounding to the grid and clamping to the bounds."""
    plan = robust.SmoothMedianPlan.calibrate(epsilon, delta)
    step = 2.0**-40  # grid of the bounds (0, 1)
    s_star = definition_numpy(np.sort(X_MED), 0.0, 1.0, plan.beta - 2.0**-39)
    s = max(2.0**-40, s_star * (1 + 2.0**-40))
    scale = s / float(plan.alpha) * scale_factor  # in data units
    center = lower_median(X_MED)

    def below(edge):  # P(output < edge) for an edge on the grid, edge in (0, 1]
        k = round(edge / step)  # outputs k' < k: K <= k - 1, i.e. o < (k - 1/2) step
        return float(cdf(((k - 0.5) * step - center) / scale))

    cum = np.array([0.0] + [below(e) for e in EDGES[1:-1]] + [1.0])
    return np.diff(cum)


def draw_medians(n_draws, seed, **kwargs):
    g = rng(seed)
    return np.array([robust.median(X_MED, bounds=BOUNDS, epsilon=1.0, random_state=g, **kwargs)
                     for _ in range(n_draws)])


N_LAW = 12_000


@pytest.fixture(scope="module")
def h4_draws():
    return draw_medians(N_LAW, 11)


@pytest.fixture(scope="module")
def laplace_draws():
    return draw_medians(N_LAW, 12, delta=1e-3)


def binned(out):
    assert np.all((out >= 0.0) & (out <= 1.0))
    assert np.all(np.mod(out, 2.0**-40) == 0)  # grid points only
    counts, _ = np.histogram(out, bins=EDGES)  # the last bin is closed: 1.0 (the clamp) counts
    return counts


def test_median_h4_law(h4_draws):
    assert chisquare_pvalue(binned(h4_draws), expected_bins(h4_cdf)) > ALPHA


def test_median_laplace_law(laplace_draws):
    assert chisquare_pvalue(binned(laplace_draws), expected_bins(laplace_cdf, delta=1e-3)) > ALPHA


@pytest.mark.parametrize("law, cdf, delta", [("h4", h4_cdf, None), ("laplace", laplace_cdf, 1e-3)])
def test_median_law_tests_have_power(law, cdf, delta, h4_draws, laplace_draws):
    """A noise scale 20% off is rejected (and would be with probability > 0.99)."""
    draws = h4_draws if law == "h4" else laplace_draws
    right = expected_bins(cdf, delta=delta)
    wrong = expected_bins(cdf, 1.2, delta=delta)
    keep = right > 0
    assert power(right[keep], wrong[keep], N_LAW) > 0.99
    assert chisquare_pvalue(binned(draws), wrong) < ALPHA


def rounded_clamped_cells(sampler, cdf, scale, word, n_draws):
    """(counts, exact probabilities) of clamp(floor(c + s Z + 1/2), lo, hi) on a coarse grid, cell
    by cell, clamp cells included (a rational centre, as the trimmed mean's)."""
    center, lo, hi = Fraction(10, 3), -1, 8
    out = np.array([sampler(center, scale, lo, hi, word) for _ in range(n_draws)])
    ks = np.arange(lo, hi + 1)
    upper = cdf((ks + 0.5 - float(center)) / float(scale))
    upper[-1] = 1.0
    probs = np.diff(np.concatenate([[0.0], upper]))
    counts = np.array([np.sum(out == k) for k in ks])
    assert counts.sum() == n_draws
    return counts, probs


EXACT_SAMPLERS = [(_smooth._draw_h4, h4_cdf), (_smooth._draw_laplace, laplace_cdf)]


@pytest.mark.parametrize("sampler, cdf", EXACT_SAMPLERS)
@pytest.mark.parametrize("scale", [Fraction(7, 10), Fraction(5, 2)])
def test_exact_samplers_round_and_clamp(sampler, cdf, scale):
    seed = int(scale * 10) + (sampler is _smooth._draw_h4)
    counts, probs = rounded_clamped_cells(sampler, cdf, scale, _smooth._words(rng(seed)), 6000)
    assert chisquare_pvalue(counts, probs) > ALPHA


@pytest.mark.parametrize("sampler, cdf", EXACT_SAMPLERS)
@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_exact_samplers_law_under_every_generator(sampler, cdf, kind):
    words = _smooth._words(generator(kind, 71))
    counts, probs = rounded_clamped_cells(sampler, cdf, Fraction(5, 2), words, 3000)
    assert chisquare_pvalue(counts, probs) > ALPHA


@pytest.mark.parametrize("sampler, cdf", EXACT_SAMPLERS)
def test_exact_samplers_law_test_rejects_32_bit_words(sampler, cdf):
    """Power: the same test rejects what the old reader drew from an MT19937 (32-bit words taken
    as 64-bit ones), so the tests above would catch the bug."""
    counts, probs = rounded_clamped_cells(sampler, cdf, Fraction(5, 2), misread_words(71), 3000)
    assert chisquare_pvalue(counts, probs) < ALPHA


# ------------------------------------------------------------------------------------------------
# trimmed mean by smooth sensitivity


def test_trimmed_smooth_bound_is_smooth_and_above_local_sensitivity():
    """S >= LS (brute force over grid replacements) and S(x) <= e^beta S(y) for every
    replace-one neighbour, on every data set of n in 3..6 records on {0..5}, h = 1."""
    grid = _smooth._Grid.of((0.0, 5.0))
    beta = 0.4
    for n in (3, 4, 5, 6):
        memo = {}

        def smooth(data):
            key = tuple(sorted(data))
            if key not in memo:
                memo[key] = _median._smooth_trimmed_units(grid.units(np.array(key, float)), grid,
                                                         1, beta) * grid.step
            return memo[key]

        for x in all_data_sets(n, 5):
            assert local_sensitivity(trimmed_of(1), x, 5) <= smooth(x) * (1 + 1e-12)
            for i in range(n):
                for t in range(6):
                    y = list(x)
                    y[i] = t
                    assert smooth(x) <= math.exp(beta) * smooth(y)


def smooth_bound(kind, x, grid_max, h, beta):
    """The release's smooth bound S (median: _smooth_units at m = ceil(n / 2); trimmed mean:
    _smooth_trimmed_units with trim count h) in data units, exactly (a Fraction)."""
    grid = _smooth._Grid.of((0.0, float(grid_max)))
    units = grid.units(np.array(x, float))
    if kind == "median":
        s = _median._smooth_units(units, grid, (units.size + 1) // 2, beta)
    else:
        s = _median._smooth_trimmed_units(units, grid, h, beta)
    return Fraction(s) * Fraction(grid.step)


def check_smooth_bound(kind, h, n, grid_max, betas):
    """On every data set x of n records on {0..grid_max}: S(x) >= LS(x) (brute force over grid
    replacements) and S(x) <= e^beta S(y) for every replace-one neighbour y on the grid."""
    stat = lower_median if kind == "median" else trimmed_of(h)
    sets, graph = replace_one_graph(n, grid_max)
    ls = {x: local_sensitivity(stat, x, grid_max) for x in sets}
    for beta in betas:
        s = {x: smooth_bound(kind, x, grid_max, h, beta) for x in sets}
        growth = Fraction(math.exp(beta))  # e^beta rounded: relative error 2**-53
        for x in sets:
            assert ls[x] <= s[x], (kind, h, x, beta)
            for y in graph[x]:
                assert s[x] <= growth * s[y], (kind, h, x, y, beta)


# the betas of the releases: pure at epsilon 2**-20, 1, 20, 2**10 (beta ~ 171) and
# (epsilon, 1e-6) at epsilon 1, 40
SMOOTH_BETAS = ([robust.SmoothMedianPlan.calibrate(e).beta for e in (2.0**-20, 1.0, 20.0, 2.0**10)]
                + [robust.SmoothMedianPlan.calibrate(e, 1e-6).beta for e in (1.0, 40.0)])
SMOOTH_STATS = [("median", None)] + [("trimmed", h) for h in range(4)]


@pytest.mark.parametrize("kind, h", SMOOTH_STATS[:-1])
def test_smooth_bounds_are_smooth_and_above_local_sensitivity_for_every_trim(kind, h):
    """check_smooth_bound for n <= 5 on {0..4}, every trim count h and every beta of
    SMOOTH_BETAS, the large beta of epsilon = 2**10 included (where S is about LS itself)."""
    for n in range(1, 6):
        if kind != "trimmed" or h in trimmed_counts(n):
            check_smooth_bound(kind, h, n, 4, SMOOTH_BETAS)


@pytest.mark.slow
@pytest.mark.parametrize("kind, h", SMOOTH_STATS)
def test_smooth_bounds_are_smooth_and_above_local_sensitivity_exhaustively(kind, h):
    """check_smooth_bound for n <= 7 (on {0..5}; {0..4} at n = 7), every h, every beta."""
    for n in range(1, 8):
        if kind != "trimmed" or h in trimmed_counts(n):
            check_smooth_bound(kind, h, n, 5 if n <= 6 else 4, SMOOTH_BETAS)


def test_trimmed_mean_h4_law():
    """15 records, trim 0.2 (h = 3): centre the exact mean of x_(4..12), scale S / alpha with
    S = max(2**-40 W / 9, (1 + 2**-40) max_k e^(-beta' k) (x_(13+k) - x_(3-k)) / 9)."""
    plan = robust.SmoothMedianPlan.calibrate(1.0)
    z = np.sort(X_MED)
    n, h = 15, 3
    beta = plan.beta - 2.0**-39
    padded = np.concatenate([[0.0] * (n + 3), z, [1.0] * (n + 3)])  # x_i at padded[i + n + 2]
    terms = [math.exp(-beta * k) * (padded[n - h + 1 + k + n + 2] - padded[h - k + n + 2])
             for k in range(n + 2)]
    s = max(2.0**-40 / (n - 2 * h), max(terms) * (1 + 2.0**-40) / (n - 2 * h))
    scale = s / float(plan.alpha)
    center = float(np.mean(z[h:n - h]))
    step = 2.0**-40

    def below(edge):
        k = round(edge / step)
        return float(h4_cdf(((k - 0.5) * step - center) / scale))

    probs = np.diff([0.0] + [below(e) for e in EDGES[1:-1]] + [1.0])
    g = rng(14)
    out = np.array([robust.trimmed_mean(X_MED, bounds=BOUNDS, epsilon=1.0, trim=0.2,
                                        random_state=g) for _ in range(6000)])
    assert chisquare_pvalue(binned(out), probs) > ALPHA


def test_trimmed_mean_with_delta_and_no_trim():
    x = np.random.default_rng(4).normal(5.0, 1.0, 20_000)
    out = robust.trimmed_mean(x, bounds=(0.0, 10.0), epsilon=1.0, delta=1e-6, trim=0.0,
                              random_state=rng(4))
    # trim 0: U_k = (upper - lower) / n for every k, so S = 5e-4 (times 1 + 2**-40) and the
    # Laplace scale is S / (epsilon / 2) = 1e-3: 0.02 is 20 scales (probability e**-20)
    assert abs(out - x.mean()) < 0.02


def test_icbrt_is_the_integer_cube_root():
    g = np.random.default_rng(3)
    for n in [0, 1, 7, 8, 9, 26, 27, 28] + [int(v) ** 3 + d for v in g.integers(1, 2**60, 50)
                                            for d in (-1, 0, 1)] + [2**400 + 12345, 3**300]:
        r = _smooth._icbrt(n)
        assert r**3 <= n < (r + 1) ** 3


def test_median_is_accurate_on_large_data():
    """At n = 10**5 standard normal records the gaps near the median are ~ 2.5e-5, so
    S ~ max_k e^(-k / 6) (k + 1) 2.5e-5 ~ 6e-5 and the noise scale S / alpha ~ 3e-4: the release
    is within 0.01 (34 scales) of the sample median except with probability ~ 1e-5 (h4 tails:
    P(|Z| > z) ~ 0.3 z**-3)."""
    x = np.random.default_rng(8).standard_normal(100_000)
    out = robust.median(x, bounds=(-100.0, 100.0), epsilon=1.0, random_state=rng(9))
    assert abs(out - np.sort(x)[49_999]) < 0.01


# ------------------------------------------------------------------------------------------------
# sample-and-aggregate


def test_sample_aggregate_is_the_documented_procedure():
    """With a seeded generator the release is reproduced step by step from the docstring: the
    permutation, the block estimates, two exact exponential mechanisms over the public grid at
    epsilon / 4, the widened interval and the exact Laplace release at epsilon / 2."""
    from dpcore.mechanisms import LaplaceMechanism
    from dpcore.selection import ExponentialMechanism

    x = np.random.default_rng(1).normal(2.0, 1.0, 3000)
    eps, k, lo, hi, grid = 0.8, 30, -10.0, 10.0, 2001
    got = robust.sample_aggregate(x, np.median, n_blocks=k, output_range=(lo, hi), epsilon=eps,
                                  grid=grid, random_state=rng(4))
    g = rng(4)
    order = g.permutation(x.size)
    z = np.array([np.median(x[idx]) for idx in np.array_split(order, k)])
    points = np.linspace(lo, hi, grid)
    step = (hi - lo) / (grid - 1)
    mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=eps / 4, method="exact")
    ranks = np.array([np.sum(z < p) for p in points], dtype=float)
    q = sorted(float(points[mech.select(-np.abs(ranks - level * k), random_state=g)])
               for level in (0.25, 0.75))
    spread = max(q[1] - q[0], step)
    a, b = max(lo, q[0] - 1.5 * spread), min(hi, q[1] + 1.5 * spread)
    value = math.fsum(np.clip(z, a, b)) / k
    sens = math.nextafter((b - a) / k + 2.0**-49 * max(abs(a), abs(b)), math.inf)
    want = LaplaceMechanism.calibrate(sensitivity=sens, epsilon=eps / 2).release(value, random_state=g)
    assert got == want
    assert a < np.median(x) < b


def test_sample_aggregate_vector_output_and_accuracy():
    """2000 blocks of 100 records (k > 32 ln(grid) / epsilon_c, see the Notes): block means have
    sd 0.2, their mean 0.0045; the interval is ~ 4 iqr ~ 1.1 wide, so the Laplace noise has scale
    1.1 / 2000 / 0.25 = 0.0022; a 0.05 tolerance is > 10 sd (block sds: bias 0.5% at n = 100)."""
    x = np.random.default_rng(2).normal(3.0, 2.0, 200_000)

    def mean_and_std(block):
        return np.array([block.mean(), block.std()])

    out = robust.sample_aggregate(x, mean_and_std, n_blocks=2000,
                                  output_range=[(-100.0, 100.0), (0.0, 100.0)], epsilon=1.0,
                                  random_state=rng(5))
    assert out.shape == (2,)
    assert abs(out[0] - 3.0) < 0.05 and abs(out[1] - 2.0) < 0.05


def test_sample_aggregate_rows_are_records_and_nan_is_the_centre():
    x = np.random.default_rng(3).normal(size=(2000, 3))
    out = robust.sample_aggregate(x, lambda b: float(np.nan), n_blocks=1000,
                                  output_range=(4.0, 6.0), epsilon=1.0, random_state=rng(6))
    # every estimate counts as the centre 5.0: the interval contains 5.0 (with all estimates
    # tied, q1 is uniform on the grid points <= 5 and q3 on those > 5), the clipped mean is 5.0
    # and the Laplace scale is at most 2 / 1000 / 0.5: |noise| > 0.06 has probability < 1e-6
    assert abs(out - 5.0) < 0.06
    seen = []
    robust.sample_aggregate(x, lambda b: seen.append(b.shape) or 0.0, n_blocks=20,
                            output_range=(-1.0, 1.0), epsilon=1.0, random_state=rng(6))
    assert seen == [(100, 3)] * 20


def test_sample_aggregate_wrong_shape_raises_after_the_charge():
    acc = dpcore.Accountant(10.0)
    with pytest.raises(ValueError, match="was charged"):
        robust.sample_aggregate(X1, lambda b: np.zeros(3), n_blocks=10, output_range=(0, 1),
                                epsilon=1.0, accountant=acc, random_state=1)
    assert len(acc.history) == 1


def test_sample_aggregate_non_numeric_output_is_not_quoted():
    """Issue 25: the error quoted the estimator's output (a function of private records)."""
    acc = dpcore.Accountant(10.0)
    with pytest.raises(ValueError, match="must return numbers") as info:
        robust.sample_aggregate(X1, lambda b: f"secret-{b[0]!r}", n_blocks=10, output_range=(0, 1),
                                epsilon=1.0, accountant=acc, random_state=1)
    assert "secret" not in str(info.value) and len(acc.history) == 1


def sample_aggregate_accuracy(n_reps, seed):
    """RMSE of sample_aggregate(np.mean) and of stats.mean(bounds +-1e4) around the true mean, on
    fresh N(3, 1) data sets of 10**6 records, epsilon = 1, in units of the non-private standard
    error 1e-3."""
    g = np.random.default_rng(seed)
    sa, sm = [], []
    for rep in range(n_reps):
        x = g.normal(3.0, 1.0, 10**6)
        sa.append(robust.sample_aggregate(x, np.mean, n_blocks=2000, output_range=(-1e4, 1e4),
                                          epsilon=1.0, random_state=rng(1000 + rep)) - 3.0)
        sm.append(dpcore.stats.mean(x, bounds=(-1e4, 1e4), epsilon=1.0,
                                    random_state=rng(5000 + rep)) - 3.0)
    return math.sqrt(np.mean(np.square(sa))) / 1e-3, math.sqrt(np.mean(np.square(sm))) / 1e-3


@pytest.mark.slow
def test_sample_aggregate_mean_at_one_million():
    """Issue 16: error <= 1.3 x the non-private standard error and >= 10x better than
    stats.mean with bounds +-1e4. Expected: the aggregation adds noise of sd ~ 0.33e-3 (width
    ~ 4 iqr of block means ~ 0.24, Laplace scale 0.24 / 2000 / 0.5), so the RMSE ratio is
    ~ 1.05; with 100 replications 100 (ratio / 1.05)**2 is about chi-square(100), so a correct
    implementation exceeds 1.3 with probability ~ 5e-4. stats.mean: noise sd ~ 0.028 (28x)."""
    ratio, mean_ratio = sample_aggregate_accuracy(100, 7)
    assert ratio <= 1.3
    assert mean_ratio / ratio >= 10


# ------------------------------------------------------------------------------------------------
# propose-test-release


def all_data_sets(n, grid_max):
    return list(itertools.combinations_with_replacement(range(grid_max + 1), n))


def iqr_of(values):
    z = sorted(values)
    n = len(z)
    return z[(3 * n + 3) // 4 - 1] - z[(n + 3) // 4 - 1]


def trimmed_of(h):
    def f(values):
        z = sorted(values)
        kept = z[h:len(z) - h]
        return Fraction(sum(kept), len(kept))
    return f


def local_sensitivity(stat, x, grid_max):
    """max |stat(x) - stat(y)| over y replacing one record by a grid value (enough: the
    statistics are piecewise linear in the replaced value with breaks at grid points)."""
    base = stat(x)
    worst = 0
    for i in range(len(x)):
        for t in range(grid_max + 1):
            y = list(x)
            y[i] = t
            worst = max(worst, abs(stat(y) - base))
    return worst


def ptr_distance(kind, x, grid_max, bound, h=1):
    grid = _smooth._Grid.of((0.0, float(grid_max)))
    units = grid.units(np.array(x, float))
    bound_units = bound / grid.step
    if kind == "median":
        return _ptr._median_distance(units, grid, bound_units)
    if kind == "iqr":
        return _ptr._iqr_distance(units, grid, bound_units)
    return _ptr._trimmed_distance(units, grid, h, bound_units)


def test_ptr_median_distance_is_the_exact_distance_to_instability():
    """g = min k such that some data set within k replacements has LS > b, brute force."""
    for n in (1, 2, 3, 4, 5):
        sets = all_data_sets(n, 5)
        ls = {y: local_sensitivity(lower_median, y, 5) for y in sets}
        counts = {y: collections.Counter(y) for y in sets}
        for bound in (0.5, 1.5, 2.5, 4.5):
            for x in sets:
                dist = [n - sum((counts[x] & counts[y]).values()) for y in sets]
                want = min([d for d, y in zip(dist, sets) if ls[y] > bound], default=math.inf)
                assert ptr_distance("median", x, 5, bound) == want, (x, bound)


@pytest.mark.parametrize("kind, stat", [("iqr", iqr_of), ("trimmed", trimmed_of(1))])
def test_ptr_distance_bounds_are_valid(kind, stat):
    """What the privacy proof needs, on every data set of n in 3..6 records on {0..5}:
    g >= 1 implies LS <= b, and |g(x) - g(y)| <= 1 for every replace-one neighbour y."""
    for n in (3, 4, 5, 6):
        for bound in (0.4, 1.5, 3.0):
            memo = {}

            def g(data):
                key = tuple(sorted(data))
                if key not in memo:
                    memo[key] = ptr_distance(kind, key, 5, bound)
                return memo[key]

            for x in all_data_sets(n, 5):
                if g(x) >= 1:
                    assert local_sensitivity(stat, x, 5) <= bound, (x, bound)
                for i in range(n):
                    for t in range(6):
                        y = list(x)
                        y[i] = t
                        assert abs(g(x) - g(y)) <= 1 or g(x) == g(y) == math.inf, (x, y, bound)


@functools.lru_cache(maxsize=None)
def replace_one_graph(n, grid_max):
    """Every data set of n records on {0..grid_max} (sorted tuples) and, for each, the set of
    its replace-one neighbours on the grid (itself included)."""
    sets = all_data_sets(n, grid_max)
    graph = {}
    for x in sets:
        near = set()
        for v in set(x):
            rest = list(x)
            rest.remove(v)
            near.update(tuple(sorted(rest + [t])) for t in range(grid_max + 1))
        graph[x] = near
    return sets, graph


def grid_distance_to_instability(graph, unstable):
    """Replace distance from each data set to the nearest unstable one, by breadth-first search
    over the grid's replace-one graph (inf when none is unstable)."""
    dist = {x: math.inf for x in graph}
    frontier = list(unstable)
    for x in frontier:
        dist[x] = 0
    while frontier:
        nxt = []
        for x in frontier:
            for y in graph[x]:
                if dist[y] == math.inf:
                    dist[y] = dist[x] + 1
                    nxt.append(y)
        frontier = nxt
    return dist


def trimmed_counts(n):
    return range((n - 1) // 2 + 1)  # h with n - 2h >= 1


def check_ptr_distance(kind, h, n, grid_max):
    """On every data set of n records on {0..grid_max}, at every proposed bound b in
    {v - 1/4, v, v + 1/4 : v a local sensitivity that occurs} (b > 0): the code's distance g is
    at most the replace distance to a data set with LS > b among the grid's data sets (BFS;
    every lower bound on the true distance is below it, and g = 0 iff LS > b follows),
    |g(x) - g(y)| <= 1 for every replace-one neighbour y; for the median g is exact (the
    distance itself). Returns how often g equals that distance where it is in [1, inf) and
    where it is inf (the callers require matches: a vacuously small g, e.g. always 0, or 0
    wherever it would be 1, passes the rest)."""
    stat = {"median": lower_median, "iqr": iqr_of}.get(kind) or trimmed_of(h)
    sets, graph = replace_one_graph(n, grid_max)
    ls = {x: local_sensitivity(stat, x, grid_max) for x in sets}
    bounds = sorted({float(v) + d for v in set(ls.values()) for d in (-0.25, 0.0, 0.25)
                     if float(v) + d > 0})
    tight = collections.Counter()
    for bound in bounds:
        want = grid_distance_to_instability(graph, [x for x in sets if ls[x] > bound])
        g = {x: ptr_distance(kind, x, grid_max, bound, h) for x in sets}
        for x in sets:
            assert g[x] <= want[x], (kind, h, x, bound, g[x], want[x])
            if kind == "median":
                assert g[x] == want[x], (x, bound)
            if 1 <= g[x] == want[x]:
                tight[want[x] == math.inf] += 1
            for y in graph[x]:
                assert abs(g[x] - g[y]) <= 1 or g[x] == g[y] == math.inf, (kind, h, x, y, bound)
    return tight


PTR_STATS = [("median", None), ("iqr", None)] + [("trimmed", h) for h in range(4)]


@pytest.mark.parametrize("kind, h", PTR_STATS[:-1])
def test_ptr_distance_is_a_lower_bound_and_moves_by_at_most_one(kind, h):
    """check_ptr_distance for n <= 5 on {0..4} and every trim count h (h = 1 only above)."""
    tight = sum((check_ptr_distance(kind, h, n, 4) for n in range(1, 6)
                 if kind != "trimmed" or h in trimmed_counts(n)), collections.Counter())
    # matches in [1, inf); the mean (h = 0) has LS = W / n everywhere: g and the distance are
    # 0 or inf
    assert tight[False] > 0 if h != 0 else tight[True] > 0


@pytest.mark.slow
@pytest.mark.parametrize("kind, h", PTR_STATS)
def test_ptr_distance_is_a_lower_bound_and_moves_by_at_most_one_exhaustively(kind, h):
    """check_ptr_distance for n <= 7, every h, on grids {0..3}, {0..4}, {0..5} (n <= 6) and
    the wider ones (n, grid) = (3, 8), (4, 8), (5, 7), (6, 6), (7, 5)."""
    cases = [(n, gm) for n in range(1, 8) for gm in ([3, 4, 5] if n <= 6 else [3, 4])]
    cases += [(3, 8), (4, 8), (5, 7), (6, 6), (7, 5)]
    tight = sum((check_ptr_distance(kind, h, n, grid_max) for n, grid_max in cases
                 if kind != "trimmed" or h in trimmed_counts(n)), collections.Counter())
    # matches in [1, inf); the mean (h = 0) has LS = W / n everywhere: g and the distance are
    # 0 or inf
    assert tight[False] > 0 if h != 0 else tight[True] > 0


X_PTR = np.arange(41.0)  # median 20; LS within k replacements is k + 1: g = floor(b) for b < 20
# bounds far out, so the clamp to them has probability < e**-50 (noise scale 19)
PTR_KW = dict(bounds=(-1000.0, 1000.0), sensitivity_bound=9.5, epsilon=1.0, delta=1e-2)
N_PTR = 20_000


def dlap_cdf(t):
    p = math.exp(-1.0 / t)

    def cdf(k):  # P(Z <= k)
        k = np.asarray(k, dtype=float)
        return np.where(k >= 0, 1.0 - p ** (np.maximum(k, 0) + 1) / (1 + p),
                        p ** np.maximum(-k, 0) / (1 + p))

    return cdf


def ptr_law():
    """P(refuse) = P(g + Z < cut), Z ~ DLap(2); cut = smallest integer with P(Z >= cut) < delta;
    released: grid (rint(20 / grid) + DLap(t)) with the LaplaceMechanism calibrated at
    (bound, epsilon / 2); binned into 20 bins of the noise in units of its scale, plus tails."""
    from dpcore.mechanisms import LaplaceMechanism

    scale = 2.0  # 1 / (epsilon / 2)
    p = math.exp(-1 / scale)
    cut = next(c for c in range(1, 1000) if p**c / (1 + p) < 1e-2)
    g = 9
    p_refuse = float(dlap_cdf(scale)(cut - g - 1))
    mech = LaplaceMechanism.calibrate(sensitivity=9.5, epsilon=0.5)
    center = round(20.0 / mech.grid)
    edges = np.round(np.linspace(-3, 3, 21) * mech.scale)  # bin edges of the integer noise
    cdf = dlap_cdf(mech.scale)
    cum = np.concatenate([[0.0], cdf(edges - 1), [1.0]])  # P(Z < edge)
    released = np.diff(cum) * (1 - p_refuse)
    return p_refuse, released, mech, center, edges


@pytest.fixture(scope="module")
def ptr_draws():
    g = rng(31)
    return [robust.ptr_median(X_PTR, random_state=g, **PTR_KW) for _ in range(N_PTR)]


def test_ptr_distance_of_the_law_instance():
    grid = _smooth._Grid.of(PTR_KW["bounds"])
    assert _ptr._median_distance(grid.units(X_PTR), grid, 9.5 / grid.step) == 9


def test_ptr_median_law(ptr_draws):
    p_refuse, released, mech, center, edges = ptr_law()
    refused = sum(r.refused for r in ptr_draws)
    noise = np.array([round(r.value / mech.grid) - center for r in ptr_draws if r.released])
    assert all((r.value is None) == r.refused for r in ptr_draws)
    counts = np.bincount(np.searchsorted(edges, noise, side="right"), minlength=edges.size + 1)
    observed = np.concatenate([[refused], counts])
    assert 0.3 < p_refuse < 0.7  # the instance exercises both outcomes
    assert chisquare_pvalue(observed, np.concatenate([[p_refuse], released])) > ALPHA


def test_ptr_trimmed_mean_on_cauchy_is_within_twice_the_standard_error():
    """Issue 16: 10%-trimmed mean of n = 10**4 standard Cauchy records, epsilon = 1,
    delta = 1e-6, proposed bound 20 / n (the data's LS is ~ 2 * 3.08 / (0.8 n) = 7.7 / n, and
    reaching 20 / n needs ~ 0.06 n = 600 replacements, far beyond the cut of ~ 29: refusals
    have probability ~ e**-285). RMSE over 200 data sets around the true centre 0, against the
    non-private trimmed mean's: the added noise has sd sqrt(2) 20 / n / 0.5 = 0.0057 against a
    standard error ~ 0.022, so the ratio is ~ 1.03; over 200 data sets its estimate has sd
    ~ 0.02 (mostly the sample cross term between noise and error), so the 0.1 tolerance is ~ 5 sd
    and 2 is far out of reach of chance (measured: 1.069)."""
    g = np.random.default_rng(12)
    n = 10**4
    private, plain = [], []
    for rep in range(200):
        x = g.standard_cauchy(n)
        r = robust.ptr_trimmed_mean(x, bounds=(-1e4, 1e4), sensitivity_bound=20 / n, epsilon=1.0,
                                    delta=1e-6, random_state=rng(700 + rep))
        assert r.released
        private.append(r.value)
        z = np.sort(np.clip(x, -1e4, 1e4))
        plain.append(z[1000:9000].mean())
    ratio = math.sqrt(np.mean(np.square(private)) / np.mean(np.square(plain)))
    assert ratio <= 2.0
    assert ratio == pytest.approx(1.03, abs=0.1)


def test_ptr_refusal_is_charged_and_explicit():
    acc = dpcore.Accountant(10.0, 1e-2)
    x = np.array([0.0, 0.0, 50.0, 100.0, 100.0])  # median's LS is 50: g = 0
    out = robust.ptr_median(x, bounds=(0.0, 100.0), sensitivity_bound=1.0, epsilon=1.0,
                            delta=1e-6, accountant=acc, random_state=rng(2))
    assert out == robust.PTRResult(True, None) and not out.released
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta) == (1.0, 1e-6)
    with pytest.raises(AttributeError):
        out.value = 3.0  # frozen


def test_ptr_with_a_bound_no_data_set_exceeds_always_releases():
    x = np.arange(10.0)
    for seed in range(20):
        r = robust.ptr_median(x, bounds=(0, 10), sensitivity_bound=10.0, epsilon=1.0, delta=1e-9,
                              random_state=rng(seed))
        assert r.released


def test_ptr_iqr_and_exact_sum():
    x = np.linspace(0.0, 100.0, 10_001)
    # each quartile's ball maximum is (k + 1) 0.01: g = 24 for b = 0.5, the cut is 8 at epsilon 4
    r = robust.ptr_iqr(x, bounds=(0.0, 100.0), sensitivity_bound=0.5, epsilon=4.0, delta=1e-6,
                       random_state=rng(3))
    assert r.released and abs(r.value - 50.0) < 0.5
    units = np.array([2**41, 2**41 - 1, 7] * 1000, dtype=np.int64)
    assert _smooth._exact_sum(units, -(2**20)) == int(units.astype(object).sum())


# ------------------------------------------------------------------------------------------------
# sparse vector: the exact law of every output pattern

SVT_Q = [1.0, 2.5, 1.75, 3.0]
SVT_T = 2.0
SVT_KW = dict(epsilon=1.0, sensitivity=1.0, granularity=0.25)


def dlap_tail(t):
    """k -> P(nu >= k) for nu ~ DLap(t) (P(j) = (1 - p)/(1 + p) p**|j|, p = e**(-1/t))."""
    p = math.exp(-1.0 / t)

    def tail(k):
        k = np.asarray(k)
        up = p ** np.maximum(k, 1) / (1 + p)
        return np.where(k >= 1, up, 1.0 - p ** np.maximum(1 - k, 1) / (1 + p))

    return tail


def svt_patterns(n, c):
    """Every output pattern: a run of n queries stopping at the c-th True."""
    out = []
    for bits in itertools.product([False, True], repeat=n):
        for length in range(1, n + 1):
            head = bits[:length]
            if sum(head) == c or (length == n and sum(head) < c):
                if head not in out:
                    out.append(head)
                break
    return out


def svt_law(plan, queries, threshold, threshold_scale=None, query_scale=None):
    """P(pattern) = sum_r P(rho = r) prod_i P(q_i + nu_i >= T + r)**b_i (1 - ...)**(1 - b_i),
    summed exactly over the integer noisy threshold (tails beyond 60 scales: < e**-60)."""
    t1 = threshold_scale or plan.threshold_scale
    t2 = query_scale or plan.query_scale
    p1 = math.exp(-1.0 / t1)
    span = int(60 * t1) + 1
    r = np.arange(-span, span + 1)
    w = (1 - p1) / (1 + p1) * p1 ** np.abs(r)
    q = [round(v / plan.grid) for v in queries]
    t = round(threshold / plan.grid)
    tail = dlap_tail(t2)
    above = [tail(t + r - qi) for qi in q]
    patterns = svt_patterns(len(queries), plan.max_positives)
    probs = []
    for pat in patterns:
        f = w.copy()
        for i, b in enumerate(pat):
            f = f * (above[i] if b else 1.0 - above[i])
        probs.append(float(np.sum(f)))
    return patterns, np.array(probs)


def draw_svt(n_draws, seed, c):
    g = rng(seed)
    counts = collections.Counter()
    for _ in range(n_draws):
        out = robust.sparse_vector(SVT_Q, SVT_T, max_positives=c, random_state=g, **SVT_KW)
        counts[tuple(bool(b) for b in out)] += 1
    return counts


def test_svt_plan_is_the_documented_calibration():
    plan = robust.SparseVectorPlan.calibrate(max_positives=2, **SVT_KW)
    assert plan.grid == 0.25 and plan.sensitivity_units == 5
    assert plan.epsilon1 + plan.epsilon2 <= 1.0
    assert plan.epsilon1 == pytest.approx(1 / (1 + 4 ** (2 / 3)), rel=1e-15)
    assert Fraction(plan.threshold_scale) >= Fraction(5) / Fraction(plan.epsilon1)
    assert Fraction(plan.query_scale) >= Fraction(2 * 2 * 5) / Fraction(plan.epsilon2)
    assert robust.SparseVectorPlan.calibrate(epsilon=1.0, max_positives=1).grid == 2.0**-20


def test_svt_patterns_sum_to_one():
    for c in (1, 2):
        plan = robust.SparseVectorPlan.calibrate(max_positives=c, **SVT_KW)
        assert svt_law(plan, SVT_Q, SVT_T)[1].sum() == pytest.approx(1.0, abs=1e-12)


N_SVT = 30_000


@pytest.fixture(scope="module")
def svt_draws():
    return {c: draw_svt(N_SVT, 20 + c, c) for c in (1, 2)}


@pytest.mark.parametrize("c", [1, 2])
def test_svt_pattern_law(svt_draws, c):
    plan = robust.SparseVectorPlan.calibrate(max_positives=c, **SVT_KW)
    patterns, probs = svt_law(plan, SVT_Q, SVT_T)
    counts = svt_draws[c]
    assert set(counts) <= set(patterns)
    assert chisquare_pvalue([counts[p] for p in patterns], probs) > ALPHA


@pytest.mark.parametrize("c", [1, 2])
def test_svt_pattern_law_has_power(svt_draws, c):
    """The same test rejects the law with the query noise of c D / epsilon2 (the classic
    "monotone queries" calibration, not valid here): P(reject) > 0.99 at this N."""
    plan = robust.SparseVectorPlan.calibrate(max_positives=c, **SVT_KW)
    patterns, right = svt_law(plan, SVT_Q, SVT_T)
    _, wrong = svt_law(plan, SVT_Q, SVT_T, query_scale=plan.query_scale / 2)
    assert power(right, wrong, N_SVT) > 0.99
    counts = svt_draws[c]
    assert chisquare_pvalue([counts[p] for p in patterns], wrong) < ALPHA


@pytest.mark.slow
def test_svt_pattern_law_one_million_draws():
    plan = robust.SparseVectorPlan.calibrate(max_positives=2, **SVT_KW)
    patterns, probs = svt_law(plan, SVT_Q, SVT_T)
    counts = draw_svt(10**6, 99, 2)
    assert chisquare_pvalue([counts[p] for p in patterns], probs) > ALPHA


def test_svt_reads_a_stream_lazily_and_stops():
    read = []

    def stream():
        for v in [0.0, 0.0, 1e9, 1e9, 0.0]:
            read.append(v)
            yield v

    out = robust.above_threshold(stream(), 10.0, epsilon=1.0, random_state=rng(3))
    assert out.tolist() == [False, False, True] and len(read) == 3
    acc = dpcore.Accountant(5.0)
    with pytest.raises(ValueError, match="charged"):
        robust.sparse_vector(iter([0.0, math.nan]), 10.0, epsilon=1.0, max_positives=1,
                             accountant=acc, random_state=rng(3))
    assert len(acc.history) == 1
    assert robust.sparse_vector([], 0.0, epsilon=1.0, max_positives=1).tolist() == []


# ------------------------------------------------------------------------------------------------
# the release contract


EPS = 0.5
X1 = np.random.default_rng(0).uniform(0.0, 10.0, 301)
RELEASES = {
    "median": (lambda **o: robust.median(X1, **{**dict(bounds=(0, 10), epsilon=EPS), **o}),
               (EPS, 0.0)),
    "median/delta": (lambda **o: robust.median(
        X1, **{**dict(bounds=(0, 10), epsilon=EPS, delta=1e-6), **o}), (EPS, 1e-6)),
    "trimmed_mean": (lambda **o: robust.trimmed_mean(
        X1, **{**dict(bounds=(0, 10), epsilon=EPS), **o}), (EPS, 0.0)),
    "trimmed_mean/delta": (lambda **o: robust.trimmed_mean(
        X1, **{**dict(bounds=(0, 10), epsilon=EPS, delta=1e-7, trim=0.25), **o}), (EPS, 1e-7)),
    "ptr_median": (lambda **o: robust.ptr_median(
        X1, **{**dict(bounds=(0, 10), sensitivity_bound=0.1, epsilon=EPS, delta=1e-6), **o}),
        (EPS, 1e-6)),
    "ptr_iqr": (lambda **o: robust.ptr_iqr(
        X1, **{**dict(bounds=(0, 10), sensitivity_bound=0.1, epsilon=EPS, delta=1e-6), **o}),
        (EPS, 1e-6)),
    "ptr_trimmed_mean": (lambda **o: robust.ptr_trimmed_mean(
        X1, **{**dict(bounds=(0, 10), sensitivity_bound=0.1, epsilon=EPS, delta=1e-6), **o}),
        (EPS, 1e-6)),
    "sparse_vector": (lambda **o: robust.sparse_vector(
        **{**dict(queries=X1, threshold=5.0, epsilon=EPS, max_positives=3), **o}), (EPS, 0.0)),
    "above_threshold": (lambda **o: robust.above_threshold(
        **{**dict(queries=X1, threshold=5.0, epsilon=EPS), **o}), (EPS, 0.0)),
    "sample_aggregate": (lambda **o: robust.sample_aggregate(
        X1, **{**dict(estimator=np.mean, n_blocks=10, output_range=(0, 10), epsilon=EPS), **o}),
        (EPS, 0.0)),
}
BAD = {
    "median": [dict(bounds=None), dict(bounds=(10, 0)), dict(bounds=(0, math.inf)),
               dict(bounds=(1e9, 1e9 + 1)), dict(delta=0.0), dict(delta=1.5), dict(delta=math.nan),
               dict(epsilon=2.0**-30), dict(epsilon=1e6)],
    "sample_aggregate": [dict(n_blocks=1), dict(n_blocks=302), dict(n_blocks=2.5),
                         dict(output_range=None), dict(output_range=(1, 1)),
                         dict(output_range=[(0, 1, 2)]), dict(output_range=(0, math.nan)),
                         dict(grid=2), dict(estimator=3)],
    "sparse_vector": [dict(max_positives=0), dict(max_positives=1.0), dict(sensitivity=0.0),
                      dict(granularity=0.3), dict(threshold=math.nan), dict(queries=[1.0, math.inf]),
                      dict(queries="abc"), dict(queries=3.0), dict(queries=[[1.0]])],
    "above_threshold": [dict(sensitivity=-1.0), dict(queries=[math.nan])],
    "trimmed_mean": [dict(trim=0.5), dict(trim="a"), dict(bounds=None), dict(delta=0.0)],
    "ptr_median": [dict(sensitivity_bound=0.0), dict(sensitivity_bound=None), dict(delta=0.0),
                   dict(delta=None), dict(bounds=None), dict(bounds=(5, 5))],
    "ptr_iqr": [dict(sensitivity_bound=-1.0), dict(delta=1.0)],
    "ptr_trimmed_mean": [dict(trim=0.5), dict(trim=-0.1), dict(trim=math.nan),
                         dict(sensitivity_bound=math.inf)],
}
COMMON_BAD = [dict(epsilon=0.0), dict(epsilon=-1.0), dict(epsilon=math.nan), dict(epsilon=math.inf),
              dict(epsilon="1"), dict(random_state="seed"), dict(random_state=1.5),
              dict(accountant=object())]


def bad_cases():
    for name in RELEASES:
        for bad in COMMON_BAD + BAD.get(name.split("/")[0], []):
            yield pytest.param(name, bad, id=f"{name}-{bad!r}")


@pytest.mark.parametrize("name, bad", list(bad_cases()))
def test_bad_argument_raises_and_charges_nothing(name, bad):
    acc = dpcore.Accountant(10.0, 1e-3)
    kwargs = dict(random_state=1, accountant=acc)
    kwargs.update(bad)
    with pytest.raises((ValueError, TypeError)) as info:
        RELEASES[name][0](**kwargs)
    assert str(info.value)
    assert acc.history == [] and acc.spent == (0.0, 0.0)


@pytest.mark.parametrize("name", list(RELEASES))
def test_release_charges_once_the_documented_cost(name):
    call, (eps, delta) = RELEASES[name]
    acc = dpcore.Accountant(10.0, 1e-3)
    call(random_state=1, accountant=acc)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta) == (eps, delta)
    assert entry.label.startswith("robust.")


@pytest.mark.parametrize("name", ["ptr_median", "ptr_iqr", "ptr_trimmed_mean"])
def test_ptr_old_keyword_bound_warns_and_gives_the_same_release(name):
    """Issue 26: the proposed sensitivity bound was called ``bound`` (elsewhere in dpcore a clamp
    bound); the old keyword still works for one release, with a DeprecationWarning, and gives
    the same release for the same seed."""
    release = getattr(robust, name)
    kw = dict(bounds=(0, 10), epsilon=1.0, delta=1e-6)
    new = release(X1, sensitivity_bound=3.0, random_state=rng(5), **kw)
    with pytest.warns(DeprecationWarning, match="sensitivity_bound"):
        old = release(X1, bound=3.0, random_state=rng(5), **kw)
    assert old == new and new.released
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="sensitivity_bound"):
        release(X1, bound=3.0, sensitivity_bound=3.0, random_state=rng(5), **kw)


def test_budget_exceeded_draws_nothing():
    acc = dpcore.Accountant(0.1)
    g = rng(50)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        robust.median(X1, bounds=(0, 10), epsilon=EPS, accountant=acc, random_state=g)
    assert g.bit_generator.state == before and acc.history == []


def test_errors_quote_no_private_value():
    x = np.array([1.2345678, np.nan, 7.654321])
    with pytest.raises(ValueError) as info:
        robust.median(x, bounds=(0, 10), epsilon=1.0)
    assert "1.234" not in str(info.value) and "7.654" not in str(info.value)
    assert "3" not in str(info.value)  # nor the number of records
    with pytest.raises(ValueError, match="at least one record"):
        robust.median([], bounds=(0, 10), epsilon=1.0)


def test_default_random_state_is_the_secure_generator():
    out = robust.median(X1, bounds=(0, 10), epsilon=1.0)
    assert 0.0 <= out <= 10.0


# ------------------------------------------------------------------------------------------------
# documentation

RELEASE_FUNCTIONS = ["median", "trimmed_mean", "sample_aggregate", "ptr_median", "ptr_iqr", "ptr_trimmed_mean",
                     "sparse_vector", "above_threshold"]


@pytest.mark.parametrize("name", RELEASE_FUNCTIONS + ["smooth_sensitivity_median"])
def test_public_functions_have_privacy_section(name):
    doc = inspect.getdoc(getattr(robust, name))
    assert "Privacy\n-------" in doc
    if name in RELEASE_FUNCTIONS:
        assert "replace-one" in doc or "add/remove" in doc
        assert "Charged" in doc


def test_all_names_exist():
    for name in robust.__all__:
        assert hasattr(robust, name)


def test_renamed_constants_keep_their_values_and_old_names():
    """Issue 26: robust's namesakes of the library-wide GRID_BITS (36) and MAX_EPSILON (2**40)
    were renamed; the calibrated values are unchanged and the old names are aliases."""
    assert (robust.SMOOTH_GRID_BITS, robust.MIN_SMOOTH_EPSILON, robust.MAX_SMOOTH_EPSILON) == \
        (40, 2.0**-20, 2.0**10)
    assert (robust.GRID_BITS, robust.MIN_EPSILON, robust.MAX_EPSILON) == \
        (robust.SMOOTH_GRID_BITS, robust.MIN_SMOOTH_EPSILON, robust.MAX_SMOOTH_EPSILON)
    assert dpcore.stats.GRID_BITS == 36


def test_docstring_examples():
    for module in (_median, _aggregate, _ptr, _svt):  # doctest reads the modules defining them
        failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert failures == 0
