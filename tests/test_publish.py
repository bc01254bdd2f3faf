"""dpcore.publish: constrained inference against dense least squares, the exact error of range
counts (formula against simulation, and against the flat histogram), the binary-tree counter
(structure against a naive twin, per-step variance against the exact formula, error against
noisy prefix sums), non-negative consistency (KKT conditions and a generic solver), argument
checks naming the parameter, and the accountant (charged once; a refusal draws nothing)."""
import copy
import doctest
import inspect
import math
import pickle
from fractions import Fraction
import re

import numpy as np
import pytest
from scipy import optimize

from _gof import ALPHA, dlap_pmf, integer_pvalue, z_critical

import dpcore
from dpcore._floats import round_down
from dpcore import _publish, publish
from dpcore._release.sums import IntegerNoise


def rng(seed):
    return np.random.Generator(dpcore.ChaCha20(seed))


def dlap_moments_closed(t):
    """(variance, fourth moment) of DLap(t) in closed form (q = exp(-1/t)): 2q / (1-q)**2
    and 2q (1 + 10q + q**2) / (1-q)**4 (from sum k**4 q**k = q (1+11q+11q**2+q**3) / (1-q)**5)."""
    q = math.exp(-1.0 / t)
    one_q = -math.expm1(-1.0 / t)
    return 2 * q / one_q**2, 2 * q * (1 + 10 * q + q * q) / one_q**4


def dlap_moments(t):
    """(variance, fourth moment) of DLap(t), summed exactly enough (tail below 1e-300)."""
    q = math.exp(-1.0 / t)
    k = np.arange(1, int(800 * t) + 50, dtype=np.float64)
    w = 2 * (1 - q) / (1 + q) * q**k
    return float(np.sum(w * k**2)), float(np.sum(w * k**4))


# ------------------------------------------------------------------------------------------------
# naive twins


def incidence(k, levels):
    """Dense node x leaf matrix of a complete k-ary tree (level by level from the root)."""
    n = k ** (levels - 1)
    rows = []
    for d in range(levels):
        width = n // k**d
        for j in range(k**d):
            row = np.zeros(n)
            row[j * width:(j + 1) * width] = 1.0
            rows.append(row)
    return np.array(rows)


def naive_counter(events, noise):
    """Binary-tree mechanism written out: the release at t sums, over t's binary decomposition,
    the exact dyadic block sum plus the noise drawn at the step the block closed."""
    events = np.asarray(events, dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(events)])
    out = []
    for t in range(1, events.size + 1):
        total, end = 0, t
        while end > 0:
            size = end & -end  # the lowest set bit: the block ending at `end`
            total += prefix[end] - prefix[end - size] + noise[end - 1]
            end -= size
        out.append(total)
    return np.array(out, dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# constrained inference


def test_consistent_tree_known_answers():
    # ALGORITHMS 6.13: root 0, children 0.5, 0.5 -> leaves 1/6; children 1, 0 -> 2/3, -1/3
    np.testing.assert_allclose(publish.consistent_tree([0.0, 0.5, 0.5], branching=2),
                               [1 / 3, 1 / 6, 1 / 6], rtol=0, atol=1e-15)
    np.testing.assert_allclose(publish.consistent_tree([0.0, 1.0, 0.0], branching=2),
                               [1 / 3, 2 / 3, -1 / 3], rtol=0, atol=1e-15)


@pytest.mark.parametrize("k, levels", [(2, 1), (2, 2), (2, 5), (3, 3), (4, 4), (16, 3), (5, 2)])
def test_consistent_tree_equals_dense_least_squares(k, levels):
    h = incidence(k, levels)
    g = np.random.default_rng(k * 100 + levels)  # test data only
    for _ in range(3):
        y = g.normal(0.0, 10.0, h.shape[0]) + g.integers(0, 50, h.shape[0])
        leaves, *_ = np.linalg.lstsq(h, y, rcond=None)
        got = publish.consistent_tree(y, branching=k)
        np.testing.assert_allclose(got, h @ leaves, rtol=0, atol=1e-9)


def test_consistent_tree_is_consistent_and_keeps_consistent_trees():
    k, levels = 4, 5
    h = incidence(k, levels)
    g = np.random.default_rng(7)
    got = publish.consistent_tree(g.normal(0, 100, h.shape[0]), branching=k)
    leaves = got[-k ** (levels - 1):]
    np.testing.assert_allclose(got, h @ leaves, rtol=1e-12, atol=1e-9)  # parent = sum
    exact = h @ g.integers(0, 1000, h.shape[1]).astype(float)
    np.testing.assert_allclose(publish.consistent_tree(exact, branching=k), exact, atol=1e-9)


def test_consistent_tree_rejects_incomplete_trees():
    with pytest.raises(ValueError, match="complete tree of branching factor 2"):
        publish.consistent_tree(np.zeros(4), branching=2)
    with pytest.raises(ValueError, match="noisy must not contain NaN"):
        publish.consistent_tree([np.nan, 1.0, 1.0], branching=2)
    with pytest.raises(ValueError, match="branching must be >= 2"):
        publish.consistent_tree([1.0], branching=1)
    with pytest.raises(TypeError, match="branching must be an integer"):
        publish.consistent_tree([1.0], branching=2.0)


@pytest.mark.parametrize("n, k, levels", [(1, 2, 1), (2, 2, 2), (3, 2, 3), (16, 16, 2),
                                          (17, 16, 3), (2**16, 16, 5), (2**16 + 1, 16, 6)])
def test_tree_levels(n, k, levels):
    assert publish.tree_levels(n, k) == levels


# ------------------------------------------------------------------------------------------------
# hierarchical histogram


def test_hierarchical_histogram_counts_every_level_exactly():
    g = np.random.default_rng(3)
    x = g.uniform(-0.2, 1.2, 5000)
    # epsilon so large that the discrete Laplace noise is 0 with probability ~ 1 - 2e-300
    h = publish.hierarchical_histogram(x, bins=50, range=(0.0, 1.0), epsilon=1e6, branching=4,
                                       random_state=0)
    truth, edges = np.histogram(x, bins=50, range=(0.0, 1.0))
    np.testing.assert_array_equal(h.edges, edges)
    assert h.levels == 4  # 50 bins -> 64 leaves
    padded = np.zeros(64)
    padded[:50] = truth
    np.testing.assert_array_equal(h.noisy, incidence(4, 4) @ padded)
    np.testing.assert_allclose(h.counts, truth, atol=1e-9)
    clipped = publish.hierarchical_histogram(x, bins=50, range=(0.0, 1.0), epsilon=1e6,
                                             outside="clip", random_state=0)
    assert clipped.counts[0] == pytest.approx(np.sum(x < 0.02), abs=1e-9)
    assert clipped.noisy[0] == x.size


def test_hierarchical_noise_law():
    # empty data: every node is pure noise, DLap(levels / epsilon) (levels = 4 for 500 bins, k=8)
    h = publish.hierarchical_histogram([], bins=500, range=(0, 1), epsilon=1.0, branching=8,
                                       random_state=11)
    assert h.levels == 4 and h.noise.scale == 4.0
    draws = np.concatenate([h.noisy] + [
        publish.hierarchical_histogram([], bins=500, range=(0, 1), epsilon=1.0, branching=8,
                                       random_state=s).noisy for s in range(12, 80)])
    assert integer_pvalue(draws, dlap_pmf(4.0), np.arange(-40, 41)) > ALPHA
    # power: the same test rejects a 25% larger scale (on these ~40k draws)
    assert integer_pvalue(draws, dlap_pmf(4.0 * 1.25), np.arange(-40, 41)) < ALPHA


def test_range_count_is_the_sum_of_consistent_counts():
    g = np.random.default_rng(5)
    h = publish.hierarchical_histogram(g.uniform(0, 1, 3000), bins=1000, range=(0, 1),
                                       epsilon=1.0, branching=16, random_state=2)
    lo = g.integers(0, 1001, 300)
    hi = g.integers(0, 1001, 300)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    cum = np.concatenate([[0.0], np.cumsum(h.counts)])
    np.testing.assert_allclose(h.range_count(lo, hi), cum[hi] - cum[lo], rtol=0, atol=1e-8)
    assert h.range_count(0, 0) == 0.0
    assert isinstance(h.range_count(3, 10), float)
    with pytest.raises(ValueError, match="0 <= lo <= hi <= n_bins = 1000"):
        h.range_count(5, 1001)
    with pytest.raises(TypeError, match="lo must be integer bin indices"):
        h.range_count(0.5, 3)


def test_range_variance_formula_matches_simulation():
    """The exact variance node_variance * |P c|**2 against the empirical mean squared error of
    ranges over independent releases (true counts 0): z-test per range, SE from the empirical
    fourth moment (R = 400 releases), Bonferroni over the ranges."""
    ranges = [(0, 1), (3, 200), (17, 250), (0, 256), (100, 101), (64, 128)]
    releases = [publish.hierarchical_histogram([], bins=256, range=(0, 1), epsilon=1.0,
                                               branching=4, random_state=1000 + r)
                for r in range(400)]
    lo, hi = np.array(ranges).T
    errors = np.array([h.range_count(lo, hi) for h in releases])
    z = z_critical(ALPHA, len(ranges))
    for j, (a, b) in enumerate(ranges):
        exact = releases[0].range_variance(a, b)
        sq = errors[:, j] ** 2
        se = math.sqrt(np.var(sq) / sq.size)
        assert abs(sq.mean() - exact) <= z * se, (a, b, sq.mean(), exact)


def test_range_error_ten_times_below_flat_at_2_16():
    """N = 2**16 bins, epsilon = 1, k = 16 (5 levels). Long ranges: lo uniform in [0, N/4), hi
    uniform in [3N/4, N]. Exact variances (the formula is checked against simulation above):
    flat histogram = length x Var DLap(1/epsilon); hierarchical = range_variance. Required:
    mean flat / mean hierarchical >= 10 (measured about 100; about 47 for uniformly random
    ranges); plus the measured MSE of 20 releases on these ranges within a z-bound of the
    exact mean."""
    n = 2**16
    g = np.random.default_rng(2016)
    lo, hi = g.integers(0, n // 4, 100), g.integers(3 * n // 4, n + 1, 100)
    h = publish.hierarchical_histogram([], bins=n, range=(0, 1), epsilon=1.0, random_state=1)
    exact = np.array([h.range_variance(int(a), int(b)) for a, b in zip(lo, hi)])
    flat = (hi - lo) * IntegerNoise.calibrate("laplace", 1, 1.0, 0.0).variance
    assert flat.mean() / exact.mean() >= 10.0
    per_release = [np.mean(publish.hierarchical_histogram(
        [], bins=n, range=(0, 1), epsilon=1.0, random_state=s).range_count(lo, hi) ** 2)
        for s in range(2, 22)]
    se = np.std(per_release, ddof=1) / math.sqrt(len(per_release))
    # a t-type check with 19 degrees of freedom: 6 SE is beyond its 1e-4 quantile (~5.0)
    assert abs(np.mean(per_release) - exact.mean()) <= 6.0 * se
    assert flat.mean() / np.mean(per_release) >= 10.0


def test_hierarchical_histogram_argument_errors_charge_nothing():
    acc = dpcore.Accountant(1.0)
    bad = [
        (dict(range=None), ValueError, "range"),
        (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
        (dict(branching=1), ValueError, "branching must be >= 2"),
        (dict(branching=2.5), TypeError, "branching must be an integer"),
        (dict(outside="wrap"), ValueError, "outside must be 'drop' or 'clip'"),
        (dict(bins="auto"), ValueError, "bins"),
        (dict(bins=2**16 + 1, branching=2**16), ValueError, "MAX_HISTOGRAM_CELLS"),
    ]
    for over, exc, msg in bad:
        kw = dict(bins=10, range=(0, 1), epsilon=0.5, accountant=acc, random_state=0)
        kw.update(over)
        with pytest.raises(exc, match=msg):
            publish.hierarchical_histogram([0.5], **kw)
    with pytest.raises(ValueError, match="x must not contain NaN"):
        publish.hierarchical_histogram([np.nan], bins=10, range=(0, 1), epsilon=0.5,
                                       accountant=acc)
    with pytest.raises(TypeError, match="x must"):
        publish.hierarchical_histogram(["a"], bins=10, range=(0, 1), epsilon=0.5,
                                       accountant=acc)
    assert acc.history == []


def test_hierarchical_histogram_charged_once_and_refusal_draws_nothing():
    acc = dpcore.Accountant(1.0)
    publish.hierarchical_histogram([0.1, 0.2], bins=10, range=(0, 1), epsilon=0.4,
                                   accountant=acc, random_state=0)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.4, 0.0,
                                                         "publish.hierarchical_histogram")
    acc2 = dpcore.Accountant(0.3)
    g = rng(50)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        publish.hierarchical_histogram([0.1], bins=10, range=(0, 1), epsilon=0.4,
                                       accountant=acc2, random_state=g)
    assert g.bit_generator.state == before and acc2.history == []


def test_hierarchical_histogram_reproducible_with_seed():
    a = publish.hierarchical_histogram([0.3], bins=40, range=(0, 1), epsilon=1.0, random_state=9)
    b = publish.hierarchical_histogram([0.3], bins=40, range=(0, 1), epsilon=1.0, random_state=9)
    np.testing.assert_array_equal(a.noisy, b.noisy)


# ------------------------------------------------------------------------------------------------
# non-negative consistency (Lee-Wang-Kifer, least squares)


def test_nonnegative_consistent_hard_total_is_the_simplex_projection():
    g = np.random.default_rng(11)
    for _ in range(50):
        y = g.normal(2.0, 5.0, g.integers(1, 40))
        t = float(g.uniform(0, 50))
        x = publish.nonnegative_consistent(y, total=t)
        assert np.all(x >= 0) and x.sum() == pytest.approx(t, rel=1e-12)
        # KKT: x = y - theta where positive, y <= theta where zero
        pos = x > 0
        theta = np.mean((y - x)[pos])
        np.testing.assert_allclose((y - x)[pos], theta, atol=1e-9)
        assert np.all(y[~pos] <= theta + 1e-9)
    np.testing.assert_array_equal(publish.nonnegative_consistent([1.0, 2.0], total=-3.0), [0, 0])
    y = np.array([5.0, -2.0, 3.0])
    np.testing.assert_allclose(publish.nonnegative_consistent(y), [4.0, 0.0, 2.0])


@pytest.mark.parametrize("ratio", [0.1, 1.0, 10.0])
def test_nonnegative_consistent_noisy_total_matches_a_generic_solver(ratio):
    g = np.random.default_rng(int(ratio * 10))
    for _ in range(10):
        y = g.normal(1.0, 4.0, 12)
        t = float(g.normal(15.0, 5.0))

        def f(x):
            return np.sum((x - y) ** 2) / 2.0 + (x.sum() - t) ** 2 / (2.0 * ratio)

        res = optimize.minimize(f, np.maximum(y, 0), method="L-BFGS-B",
                                bounds=[(0, None)] * y.size,
                                options=dict(ftol=1e-15, gtol=1e-12, maxiter=10000))
        got = publish.nonnegative_consistent(y, total=t, variance=2.0, total_variance=2.0 * ratio)
        assert f(got) <= res.fun + 1e-9
        np.testing.assert_allclose(got, res.x, atol=1e-5)


def test_nonnegative_consistent_keeps_shape_and_checks_arguments():
    y = np.arange(-3.0, 3.0).reshape(2, 3)
    assert publish.nonnegative_consistent(y).shape == (2, 3)
    with pytest.raises(ValueError, match="counts must not contain NaN"):
        publish.nonnegative_consistent([1.0, np.nan])
    with pytest.raises(ValueError, match="variance must be > 0"):
        publish.nonnegative_consistent([1.0], variance=0.0)
    with pytest.raises(ValueError, match="total_variance must be >= 0"):
        publish.nonnegative_consistent([1.0], total_variance=-1.0)
    with pytest.raises(TypeError, match="total must be a real number"):
        publish.nonnegative_consistent([1.0], total="3")


# ------------------------------------------------------------------------------------------------
# continual counting


def test_counter_kernel_equals_naive_twin_in_chunks():
    g = np.random.default_rng(1)
    events = g.integers(0, 4, 1000)
    noise = g.integers(-50, 51, 1000)
    want = naive_counter(np.minimum(events, 2), noise)
    levels = 1000 .bit_length()
    psum, noisy = np.zeros(levels, np.int64), np.zeros(levels, np.int64)
    got, t, last = [], 0, 0
    for cut in np.split(np.arange(1000), [1, 2, 7, 64, 65, 500, 999]):
        out = np.empty(cut.size, np.int64)
        last = _publish.counter_extend(psum, noisy, t, last, events[cut], 2, noise[cut], out)
        t += cut.size
        got.append(out)
    np.testing.assert_array_equal(np.concatenate(got), want)


def test_counter_reuses_block_noise():
    # zero events: the release at t is the sum of the noise of t's blocks, e.g. release(3) -
    # release(2) is the level-0 block noise drawn at step 3, and release(4) uses one fresh draw
    c = publish.ContinualCounter(1.0, 16, random_state=4)
    out = c.extend(np.zeros(16, dtype=np.int64))
    draws = rng(4)  # the counter's generator, seeded alike, draws its noise in one batch
    z = dpcore.discrete_laplace(c.noise.scale, 16, random_state=draws)
    np.testing.assert_array_equal(out, naive_counter(np.zeros(16), z))
    assert out[2] - out[1] == z[2] and out[3] == z[3] and out[7] == z[7]


def test_counter_update_extend_and_state():
    c = publish.ContinualCounter(2.0, 10, max_increment=3, random_state=0)
    assert (c.levels, c.noise.scale) == (4, 6.0)
    outs = [c.update(v) for v in [1, True, 5, -2]]  # 5 clipped to 3, -2 to 0
    assert c.t == 4 and c.count == outs[-1]
    c.extend(np.array([1, 1, 1], dtype=np.uint8))
    assert c.t == 7
    with pytest.raises(ValueError, match="exceed horizon = 10"):
        c.extend([1, 1, 1, 1])
    assert c.t == 7
    with pytest.raises(TypeError, match="events must be integers or bools"):
        c.extend([0.5])
    with pytest.raises(TypeError, match="event must be an integer"):
        c.update(0.5)
    with pytest.raises(ValueError, match="events must be 1-d"):
        c.extend([[1]])
    assert c.variance(7) == 3 * c.node_variance
    np.testing.assert_array_equal(c.variance(np.array([1, 8, 10])),
                                  np.array([1, 1, 2]) * c.node_variance)
    with pytest.raises(TypeError, match="copied"):
        copy.deepcopy(c)
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(c)


def test_counter_clips_huge_unsigned_events():
    c = publish.ContinualCounter(1e6, 4, max_increment=1, random_state=0)  # noise 0 w.p. ~1
    out = c.extend(np.array([2**63 + 5, 1, 0, 1], dtype=np.uint64))
    np.testing.assert_array_equal(out, [1, 2, 2, 3])


def test_counter_argument_errors_charge_nothing():
    acc = dpcore.Accountant(1.0)
    for kw, exc, msg in [
        (dict(epsilon=0.0, horizon=10), ValueError, "epsilon must be > 0"),
        (dict(epsilon=1.0, horizon=0), ValueError, "horizon must be >= 1"),
        (dict(epsilon=1.0, horizon=10.0), TypeError, "horizon must be an integer"),
        (dict(epsilon=1.0, horizon=10, max_increment=0), ValueError, "max_increment must be >= 1"),
        (dict(epsilon=1.0, horizon=2**40, max_increment=2**30), ValueError,
         "max_increment \\* horizon"),
        (dict(epsilon=1e-14, horizon=10), ValueError, "epsilon"),
    ]:
        with pytest.raises(exc, match=msg):
            publish.ContinualCounter(accountant=acc, **kw)
    assert acc.history == []
    publish.ContinualCounter(0.25, 100, accountant=acc)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.25, 0.0, "publish.ContinualCounter")
    acc2, g = dpcore.Accountant(0.2), rng(3)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        publish.ContinualCounter(0.25, 100, accountant=acc2, random_state=g)
    assert g.bit_generator.state == before and acc2.history == []


def test_counter_per_step_variance_matches_exact_formula():
    """R = 3000 counters (T = 1000, epsilon = 1, 0/1 events): the error at step t is a sum of
    popcount(t) independent DLap(10) block noises. Per selected step, z-test of the mean squared
    error against popcount(t) * Var (SE from the exact fourth moment), Bonferroni over the
    steps; then the pooled statistic mean_t err_t**2 / Var_t (expectation 1 exactly, SE from the
    R independent counters) and its power against a 5% larger noise scale."""
    horizon, reps = 1000, 3000
    g = np.random.default_rng(99)  # test data only
    events = g.integers(0, 2, horizon)
    truth = np.cumsum(events)
    errors = np.empty((reps, horizon))
    for r in range(reps):
        c = publish.ContinualCounter(1.0, horizon, random_state=5000 + r)
        errors[r] = c.extend(events) - truth
    v, m4 = dlap_moments(c.noise.scale)
    assert v == pytest.approx(c.node_variance, rel=1e-12)
    steps = [1, 2, 3, 7, 8, 255, 256, 511, 512, 999, 1000]
    z = z_critical(ALPHA, len(steps) + 2)
    for t in steps:
        m = bin(t).count("1")
        exact = m * v
        assert c.variance(t) == pytest.approx(exact, rel=1e-12)
        sq = errors[:, t - 1] ** 2
        var_sq = m * m4 + 3 * m * (m - 1) * v * v - exact * exact  # Var(err**2), exact
        assert abs(sq.mean() - exact) <= z * math.sqrt(var_sq / reps), t
        assert abs(errors[:, t - 1].mean()) <= z * math.sqrt(exact / reps), t  # unbiased
    ratio = (errors**2 / c.variance(np.arange(1, horizon + 1))).mean(axis=1)
    se = ratio.std(ddof=1) / math.sqrt(reps)
    assert abs(ratio.mean() - 1.0) <= z * se
    v_wrong, _ = dlap_moments(c.noise.scale * 1.05)
    assert abs(ratio.mean() * v / v_wrong - 1.0) > z * se  # the test has power


def _mse_runs(horizon, epsilon, runs, seed):
    """Mean squared error over all T steps, per run, of the binary-tree counter and of Chan-Shi-
    Song's simple counting mechanism I (each event with its own DLap(1/epsilon), released as
    prefix sums of the noisy events: variance t x Var at step t)."""
    g = np.random.default_rng(seed)  # test data only
    one = IntegerNoise.calibrate("laplace", 1, epsilon, 0.0)
    tree, naive = [], []
    for r in range(runs):
        events = g.integers(0, 2, horizon)
        truth = np.cumsum(events)
        c = publish.ContinualCounter(epsilon, horizon, random_state=seed + 2 * r)
        tree.append(np.mean((c.extend(events) - truth) ** 2))
        z = dpcore.discrete_laplace(one.scale, horizon, random_state=seed + 2 * r + 1)
        naive.append(np.mean(np.cumsum(z).astype(np.float64) ** 2))
    return np.array(tree), np.array(naive), c, one


@pytest.mark.slow
def test_counter_error_five_times_below_noisy_prefix_sums_at_a_million():
    """T = 10**6, epsilon = 1, 10 runs of each. Exact expected MSE: tree mean_t popcount(t) x
    Var DLap(20) (~7.9e3), per-event noise Var DLap(1) x (T + 1) / 2 (~9.2e5): RMS ratio ~10.8.
    The per-event error is a random walk, so one run's MSE varies a lot: the measured means are
    checked against the exact ones (6 SE of 10 runs, beyond the 1e-4 quantile of t with 9 df)
    and the measured RMS ratio must be >= 5."""
    horizon = 10**6
    tree, naive, c, one = _mse_runs(horizon, 1.0, 10, 700)
    exact_tree = float(np.mean(c.variance(np.arange(1, horizon + 1))))
    exact_naive = one.variance * (horizon + 1) / 2
    for measured, exact in ((tree, exact_tree), (naive, exact_naive)):
        se = measured.std(ddof=1) / math.sqrt(measured.size)
        assert abs(measured.mean() - exact) <= 6.0 * se, (measured.mean(), exact)
    assert math.sqrt(exact_naive / exact_tree) >= 10.0
    assert math.sqrt(naive.mean() / tree.mean()) >= 5.0


# ------------------------------------------------------------------------------------------------
# documentation


@pytest.mark.parametrize("name", ["hierarchical_histogram", "ContinualCounter", "quadtree_histogram",
                                  "privelet", "matrix_mechanism", "mwem", "consistent_tree",
                                  "nonnegative_consistent", "strategy_matrix", "expected_error"])
def test_release_functions_have_privacy_section(name):
    doc = inspect.getdoc(getattr(publish, name)) or ""
    assert re.search(r"^Privacy\n-------\n", doc, flags=re.MULTILINE)
    if name in ("hierarchical_histogram", "ContinualCounter", "quadtree_histogram", "privelet",
                "matrix_mechanism", "mwem"):
        assert "add/remove" in doc and "Charged" in doc


def test_all_names_exist():
    for name in publish.__all__:
        assert hasattr(publish, name)


def test_docstring_examples():
    result = doctest.testmod(publish, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 8


# ------------------------------------------------------------------------------------------------
# quadtree (2-d)


def test_quadtree_counts_every_level_exactly():
    g = np.random.default_rng(8)
    xy = g.uniform(-0.1, 1.1, (4000, 2))
    q = publish.quadtree_histogram(xy, bins=(20, 13), range=[(0, 1), (0, 1)], epsilon=1e6,
                                   branching=2, random_state=0)
    truth, ex, ey = np.histogram2d(xy[:, 0], xy[:, 1], bins=(20, 13), range=[(0, 1), (0, 1)])
    np.testing.assert_array_equal(q.edges[0], ex)
    np.testing.assert_array_equal(q.edges[1], ey)
    assert q.levels == 6  # 32 x 32 padded cells
    np.testing.assert_allclose(q.counts, truth, atol=1e-9)
    assert q.noisy[0] == truth.sum()
    # level 1 holds the four 16 x 16 quadrants, in Morton order
    np.testing.assert_array_equal(q.noisy[1:5], [truth[:16, :13].sum(), 0,
                                                 truth[16:, :13].sum(), 0])


def test_quadtree_rectangles_are_sums_of_consistent_counts():
    g = np.random.default_rng(9)
    q = publish.quadtree_histogram(g.uniform(0, 1, (3000, 2)), bins=(40, 27),
                                   range=[(0, 1), (0, 1)], epsilon=1.0, branching=3,
                                   random_state=1)
    lo = np.column_stack([g.integers(0, 41, 200), g.integers(0, 28, 200)])
    hi = np.column_stack([g.integers(0, 41, 200), g.integers(0, 28, 200)])
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    want = [q.counts[a0:b0, a1:b1].sum() for (a0, a1), (b0, b1) in zip(lo, hi)]
    np.testing.assert_allclose(q.range_count(lo, hi), want, atol=1e-8)
    assert isinstance(q.range_count((1, 2), (3, 4)), float)
    with pytest.raises(ValueError, match="0 <= lo <= hi <= shape"):
        q.range_count((0, 0), (41, 1))
    with pytest.raises(ValueError, match="lo must end in an axis of length 2"):
        q.range_count(0, 1)


def test_quadtree_range_variance_matches_simulation():
    rects = [((0, 0), (16, 16)), ((3, 5), (11, 16)), ((0, 0), (1, 1)), ((2, 0), (16, 9))]
    releases = [publish.quadtree_histogram(np.zeros((0, 2)), bins=16, range=[(0, 1), (0, 1)],
                                           epsilon=1.0, branching=2, random_state=3000 + r)
                for r in range(400)]
    lo = np.array([r[0] for r in rects])
    hi = np.array([r[1] for r in rects])
    errors = np.array([q.range_count(lo, hi) for q in releases])
    z = z_critical(ALPHA, len(rects))
    for j, (a, b) in enumerate(rects):
        exact = releases[0].range_variance(a, b)
        sq = errors[:, j] ** 2
        assert abs(sq.mean() - exact) <= z * math.sqrt(np.var(sq) / sq.size), (a, b)


def test_quadtree_argument_errors_and_accountant():
    acc = dpcore.Accountant(1.0)
    base = dict(bins=8, range=[(0, 1), (0, 1)], epsilon=0.5, accountant=acc, random_state=0)
    for over, exc, msg in [
        (dict(epsilon=-1.0), ValueError, "epsilon must be > 0"),
        (dict(branching=1), ValueError, "branching must be >= 2"),
        (dict(range=None), ValueError, "range"),
        (dict(outside="x"), ValueError, "outside"),
        (dict(bins=2**15), ValueError, "MAX_HISTOGRAM_CELLS"),
    ]:
        with pytest.raises(exc, match=msg):
            publish.quadtree_histogram(np.zeros((3, 2)), **{**base, **over})
    with pytest.raises(ValueError, match="sample must have 2 columns"):
        publish.quadtree_histogram(np.zeros((3, 3)), **base)
    with pytest.raises(ValueError, match="NaN"):
        publish.quadtree_histogram([[np.nan, 0.0]], **base)
    assert acc.history == []
    publish.quadtree_histogram(np.zeros((3, 2)), **base)
    (entry,) = acc.history
    assert (entry.epsilon, entry.label) == (0.5, "publish.quadtree_histogram")


def test_counter_update_equals_extend():
    events = np.random.default_rng(4).integers(0, 3, 300)
    a = publish.ContinualCounter(1.0, 300, max_increment=2, random_state=12)
    b = publish.ContinualCounter(1.0, 300, max_increment=2, random_state=12)
    one_by_one = [a.update(int(e)) for e in events]
    g = rng(12)  # the counter's generator, seeded alike: one draw per update
    z = [dpcore.discrete_laplace(a.noise.scale, random_state=g) for _ in range(300)]
    np.testing.assert_array_equal(one_by_one, naive_counter(np.minimum(events, 2), z))
    # a batch reads the generator differently (other draws), with the same structure
    z = dpcore.discrete_laplace(a.noise.scale, 300, random_state=rng(12))
    np.testing.assert_array_equal(b.extend(events), naive_counter(np.minimum(events, 2), z))
    assert a.levels == 9 and a.t == 300
    with pytest.raises(ValueError, match="exceed horizon = 300"):
        a.update(1)


def test_counter_bound_is_a_deprecated_name_of_max_increment():
    """The old keyword (and attribute) still work for one release, with a DeprecationWarning,
    and give the same counter: same noise, same releases for the same seed."""
    events = np.random.default_rng(6).integers(0, 5, 200)
    new = publish.ContinualCounter(1.0, 200, max_increment=3, random_state=21)
    with pytest.warns(DeprecationWarning, match="max_increment"):
        old = publish.ContinualCounter(1.0, 200, bound=3, random_state=21)
    assert old.noise == new.noise and old.max_increment == 3
    np.testing.assert_array_equal(old.extend(events), new.extend(events))
    with pytest.warns(DeprecationWarning, match="max_increment"):
        assert old.bound == 3
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="not both"):
        publish.ContinualCounter(1.0, 200, max_increment=2, bound=3)


def test_hierarchical_nonnegative_counts():
    h = publish.hierarchical_histogram(np.full(200, 0.05), bins=64, range=(0, 1), epsilon=0.5,
                                       branching=4, random_state=3)
    nn = h.nonnegative_counts()
    assert np.all(nn >= 0) and nn.sum() == pytest.approx(h.counts.sum(), rel=1e-12)
    np.testing.assert_allclose(nn, publish.nonnegative_consistent(h.counts))


# ------------------------------------------------------------------------------------------------
# Privelet (Haar wavelet release)


def haar_matrix(n):
    """Dense unnormalised Haar matrix (heap order): row 0 the total, row j (node j, children
    2j and 2j + 1, leaves n .. 2n - 1) = +1 on its left half's leaves, -1 on its right half's."""
    rows = [np.ones(n)]
    for j in range(1, n):
        depth = j.bit_length() - 1
        size = n >> depth
        start = (j - (1 << depth)) * size
        row = np.zeros(n)
        row[start:start + size // 2] = 1.0
        row[start + size // 2:start + size] = -1.0
        rows.append(row)
    return np.array(rows)


def test_privelet_coefficients_equal_the_dense_haar_transform():
    g = np.random.default_rng(4)
    x = g.uniform(-0.1, 1.1, 3000)
    w = publish.privelet(x, bins=50, range=(0, 1), epsilon=1e6, random_state=0)
    truth = np.histogram(x, bins=50, range=(0, 1))[0]
    padded = np.zeros(64)
    padded[:50] = truth
    assert w.padded_shape == (64,) and w.sensitivity == 7
    np.testing.assert_array_equal(w.coefficients, haar_matrix(64) @ padded)
    np.testing.assert_array_equal(w.counts, truth)  # exact: halving integers, powers of two
    # 2-d: the tensor product of the per-axis transforms; sensitivity (1 + 3) * (1 + 5)
    xy = g.uniform(0, 1, (2000, 2))
    q = publish.privelet(xy, bins=(7, 20), range=[(0, 1), (0, 1)], epsilon=1e6, random_state=0)
    cells = np.zeros((8, 32))
    cells[:7, :20] = np.histogram2d(xy[:, 0], xy[:, 1], bins=(7, 20), range=[(0, 1), (0, 1)])[0]
    assert q.padded_shape == (8, 32) and q.sensitivity == 24
    np.testing.assert_array_equal(q.coefficients.ravel(),
                                  np.kron(haar_matrix(8), haar_matrix(32)) @ cells.ravel())
    np.testing.assert_array_equal(q.counts, cells[:7, :20])
    # float kernel path: the inverse undoes the forward on real values
    v = g.normal(size=(3, 16))
    c, back = np.empty_like(v), np.empty_like(v)
    _publish.haar_forward(v, c, np.empty(32))
    _publish.haar_inverse(c, back, np.empty(32))
    np.testing.assert_allclose(back, v, atol=1e-12)


def test_privelet_noise_law():
    # empty data, 256 bins: every coefficient is pure DLap((1 + 8) / epsilon) noise
    draws = np.concatenate([publish.privelet([], bins=256, range=(0, 1), epsilon=1.0,
                                             random_state=s).coefficients for s in range(120)])
    assert integer_pvalue(draws, dlap_pmf(9.0), np.arange(-90, 91)) > ALPHA
    assert integer_pvalue(draws, dlap_pmf(9.0 * 1.25), np.arange(-90, 91)) < ALPHA  # power


def test_privelet_range_count_and_errors():
    g = np.random.default_rng(6)
    w = publish.privelet(g.uniform(0, 1, 3000), bins=1000, range=(0, 1), epsilon=1.0,
                         random_state=2)
    lo, hi = np.sort(g.integers(0, 1001, (2, 300)), axis=0)
    cum = np.concatenate([[0.0], np.cumsum(w.counts)])
    np.testing.assert_allclose(w.range_count(lo, hi), cum[hi] - cum[lo], atol=1e-8)
    assert w.range_count(4, 4) == 0.0 and isinstance(w.range_count(3, 10), float)
    with pytest.raises(ValueError, match="0 <= lo <= hi <= shape"):
        w.range_count(5, 1001)
    with pytest.raises(TypeError, match="lo must be integer bin indices"):
        w.range_count(0.5, 3)
    q = publish.privelet(g.uniform(0, 1, (500, 3)), bins=(5, 6, 7), range=[(0, 1)] * 3,
                         epsilon=1.0, random_state=3)
    box = q.counts[1:4, 0:6, 2:5].sum()
    assert q.range_count((1, 0, 2), (4, 6, 5)) == pytest.approx(box, abs=1e-8)
    with pytest.raises(ValueError, match="length 3"):
        q.range_count((1, 0), (4, 6))


def test_privelet_range_variance_matches_simulation():
    """Exact variances against the mean squared error over 400 releases of empty data (the
    error is the count): z-test per range, Bonferroni. The SE comes from the exact law (a
    range's error is sum_i alpha_i N_i with N_i iid DLap, alpha = c H^-1 from the dense Haar
    matrix): E e**4 = 3 s**4 + sum alpha_i**4 (m4 - 3 v**2); the empirical SE would be biased
    low for boxes whose error is a few heavy-tailed terms."""
    ranges = [(0, 1), (3, 200), (17, 250), (0, 256), (100, 101), (64, 128)]
    rects = [((0, 0), (16, 10)), ((3, 2), (11, 10)), ((5, 0), (6, 9))]
    one = [publish.privelet([], bins=256, range=(0, 1), epsilon=1.0, random_state=3000 + r)
           for r in range(400)]
    two = [publish.privelet(np.empty((0, 2)), bins=(16, 10), range=[(0, 1), (0, 1)],
                            epsilon=1.0, random_state=5000 + r) for r in range(400)]
    inv1 = np.linalg.inv(haar_matrix(256))
    inv2 = np.linalg.inv(np.kron(haar_matrix(16), haar_matrix(16)))
    checks = []
    for a, b in ranges:
        c = np.zeros(256)
        c[a:b] = 1.0
        err = np.array([w.range_count(a, b) for w in one])
        checks.append((one[0], c @ inv1, one[0].range_variance(a, b), err))
    for a, b in rects:
        c = np.zeros((16, 16))
        c[a[0]:b[0], a[1]:b[1]] = 1.0
        err = np.array([w.range_count(a, b) for w in two])
        checks.append((two[0], c.ravel() @ inv2, two[0].range_variance(a, b), err))
    z = z_critical(ALPHA, len(checks))
    for w, alpha, exact, err in checks:
        v, m4 = dlap_moments(w.noise.scale)
        assert exact == pytest.approx(v * float(alpha @ alpha), rel=1e-9)
        fourth = 3 * exact**2 + float(np.sum(alpha**4)) * (m4 - 3 * v * v)
        se = math.sqrt((fourth - exact**2) / err.size)
        assert abs(np.mean(err**2) - exact) <= z * se, (np.mean(err**2), exact, se)


def test_privelet_four_times_below_flat_on_long_ranges():
    """N = 2**16 bins, epsilon = 1; long ranges (lo in [0, N/4), hi in [3N/4, N]). Exact:
    flat = length x Var DLap(1); Privelet = range_variance (checked against simulation
    above). Required >= 4x (measured about 49x); the measured MSE of 20 releases agrees."""
    n = 2**16
    g = np.random.default_rng(2016)
    lo, hi = g.integers(0, n // 4, 100), g.integers(3 * n // 4, n + 1, 100)
    w = publish.privelet([], bins=n, range=(0, 1), epsilon=1.0, random_state=1)
    exact = np.array([w.range_variance(int(a), int(b)) for a, b in zip(lo, hi)])
    flat = (hi - lo) * IntegerNoise.calibrate("laplace", 1, 1.0, 0.0).variance
    assert flat.mean() / exact.mean() >= 4.0
    per_release = [np.mean(publish.privelet([], bins=n, range=(0, 1), epsilon=1.0,
                                            random_state=s).range_count(lo, hi) ** 2)
                   for s in range(2, 22)]
    se = np.std(per_release, ddof=1) / math.sqrt(len(per_release))
    assert abs(np.mean(per_release) - exact.mean()) <= 6.0 * se  # t(19): 1e-4 quantile ~5.0
    assert flat.mean() / np.mean(per_release) >= 4.0


def test_privelet_argument_errors_charge_nothing_and_charged_once():
    acc = dpcore.Accountant(1.0)
    bad = [
        (dict(range=None), ValueError, "range"),
        (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
        (dict(outside="wrap"), ValueError, "outside must be 'drop' or 'clip'"),
        (dict(bins="auto"), ValueError, "bins"),
    ]
    for over, exc, msg in bad:
        kw = dict(bins=10, range=(0, 1), epsilon=0.5, accountant=acc, random_state=0)
        kw.update(over)
        with pytest.raises(exc, match=msg):
            publish.privelet([0.5], **kw)
    with pytest.raises(ValueError, match="MAX_HISTOGRAM_CELLS"):  # 2**27 cells padded to 2**29
        publish.privelet([[0.5, 0.5]], bins=(2**14 + 1, 2**13 + 1), range=[(0, 1), (0, 1)],
                         epsilon=0.5, accountant=acc)
    with pytest.raises(ValueError, match="NaN"):
        publish.privelet([np.nan], bins=10, range=(0, 1), epsilon=0.5, accountant=acc)
    with pytest.raises(TypeError, match="sample"):
        publish.privelet(["a"], bins=10, range=(0, 1), epsilon=0.5, accountant=acc)
    assert acc.history == []
    publish.privelet([0.1, 0.2], bins=10, range=(0, 1), epsilon=0.4, accountant=acc,
                     random_state=0)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.4, 0.0, "publish.privelet")
    acc2 = dpcore.Accountant(0.3)
    g = rng(51)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        publish.privelet([0.1], bins=10, range=(0, 1), epsilon=0.4, accountant=acc2,
                         random_state=g)
    assert g.bit_generator.state == before and acc2.history == []


# ------------------------------------------------------------------------------------------------
# matrix mechanism


def all_ranges(n):
    lo, hi = np.triu_indices(n + 1, 1)
    w = np.zeros((lo.size, n))
    for i, (a, b) in enumerate(zip(lo, hi)):
        w[i, a:b] = 1.0
    return w


def test_strategy_matrices():
    np.testing.assert_array_equal(publish.strategy_matrix(5, "identity"), np.eye(5))
    np.testing.assert_array_equal(publish.strategy_matrix(16, "hierarchical", branching=4),
                                  incidence(4, 3))
    # padded: 50 bins in a 4-ary tree of 64 leaves; the padding's columns (and empty rows) go
    h = publish.strategy_matrix(50, "hierarchical", branching=4)
    full = incidence(4, 4)[:, :50]
    np.testing.assert_array_equal(h, full[np.any(full != 0, axis=1)])
    np.testing.assert_array_equal(publish.strategy_matrix(16, "wavelet"), haar_matrix(16))
    np.testing.assert_array_equal(publish.strategy_matrix(12, "wavelet"), haar_matrix(16)[:, :12])
    w = all_ranges(8)
    e = publish.strategy_matrix(8, "eigen", workload=w)
    lam, q = np.linalg.eigh(w.T @ w)
    np.testing.assert_allclose(e.T @ e, q @ np.diag(np.sqrt(lam)) @ q.T, atol=1e-9)
    with pytest.raises(ValueError, match="needs the workload"):
        publish.strategy_matrix(8, "eigen")
    with pytest.raises(ValueError, match="strategy must be one of"):
        publish.strategy_matrix(8, "fourier")


@pytest.mark.parametrize("strategy", ["identity", "hierarchical", "wavelet", "eigen"])
def test_matrix_mechanism_measures_exactly_and_answers_by_least_squares(strategy):
    g = np.random.default_rng(12)
    x = g.uniform(0, 1, 2000)
    w = all_ranges(20)
    r = publish.matrix_mechanism(x, bins=20, range=(0, 1), workload=w, epsilon=1e12,
                                 strategy=strategy, random_state=0)  # noise 0 (scale <= 1e-6)
    truth = np.histogram(x, bins=20, range=(0, 1))[0]
    assert r.strategy == strategy and r.matrix.dtype == np.int64
    np.testing.assert_array_equal(r.noisy, r.matrix @ truth)
    np.testing.assert_allclose(r.answers, w @ truth, atol=1e-6 * truth.sum())
    # the integer strategy is the named one, scaled (real strategies: rounded to ~2**-20)
    a = publish.strategy_matrix(20, strategy, workload=w)
    a = a[np.any(a != 0, axis=1)]  # rows that measure only padding are dropped
    scale = np.abs(r.matrix).max() / np.abs(a).max()
    np.testing.assert_allclose(r.matrix / scale, a, atol=np.abs(a).sum(axis=0).max() * 2.0**-20)
    assert r.noise.sensitivity == np.abs(r.matrix).sum(axis=0).max()


def test_matrix_mechanism_is_the_formula_model_draw_for_draw():
    """With data 0 the answers are exactly W M^+ z for z the exact discrete Laplace draws of
    the same generator (so simulating that model below simulates the mechanism)."""
    w = all_ranges(16)
    for strategy in publish.STRATEGIES:
        r = publish.matrix_mechanism([], bins=16, range=(0, 1), workload=w, epsilon=0.7,
                                     strategy=strategy, random_state=rng(77))
        z = dpcore.discrete_laplace(r.noise.scale, r.matrix.shape[0], random_state=rng(77))
        np.testing.assert_array_equal(r.noisy, z)
        m = r.matrix.astype(np.float64)
        np.testing.assert_allclose(r.answers, w @ np.linalg.pinv(m) @ z,
                                   atol=1e-9 * r.noise.scale * 100)


def test_matrix_mechanism_error_matches_formula_within_3_percent():
    """E |W M^+ z|**2 = v ||W M^+||_F**2 against simulation. The total squared error T of one
    release is a quadratic form z^T G z (G = K^T K, K = W M^+, z iid DLap, variance v, fourth
    moment m4): Var T = sum G_ii**2 (m4 - 3 v**2) + 2 v**2 ||G||_F**2. The number of draws R
    is chosen so that z_crit * SE <= 3% of the mean (z_crit for ALPHA, Bonferroni over the 4
    strategies); then |mean - formula| <= 3% fails for a correct formula with probability
    <= ALPHA, and a formula off by more than 6% fails with probability >= 1 - ALPHA."""
    w = all_ranges(32)
    z_crit = z_critical(ALPHA, len(publish.STRATEGIES))
    for k, strategy in enumerate(publish.STRATEGIES):
        r = publish.matrix_mechanism([], bins=32, range=(0, 1), workload=w, epsilon=1.0,
                                     strategy=strategy, random_state=k)
        kmat = w @ np.linalg.pinv(r.matrix.astype(np.float64))
        gram = kmat.T @ kmat
        v, m4 = dlap_moments_closed(r.noise.scale)
        formula = r.expected_error
        assert formula == pytest.approx(v * np.trace(gram), rel=1e-9)
        sd = math.sqrt(np.sum(np.diag(gram) ** 2) * (m4 - 3 * v * v) + 2 * v * v * np.sum(gram**2))
        draws = math.ceil((z_crit * sd / (0.03 * formula)) ** 2)
        z = dpcore.discrete_laplace(r.noise.scale, (draws, r.matrix.shape[0]),
                                    random_state=rng(900 + k)).astype(np.float64)
        errors = z @ kmat.T
        total = np.einsum("ij,ij->i", errors, errors)
        assert abs(total.mean() - formula) <= 0.03 * formula, (strategy, total.mean(), formula)
        # the per-query variances too (Bonferroni over queries, SE from the sample)
        per = errors**2
        se = per.std(axis=0) / math.sqrt(draws)
        assert np.all(np.abs(per.mean(axis=0) - r.query_variance)
                      <= z_critical(ALPHA, 4 * w.shape[0]) * se)


@pytest.mark.slow
def test_matrix_mechanism_end_to_end_error_within_3_percent():
    """The same check with whole releases (hierarchical, 16 bins, all ranges)."""
    w = all_ranges(16)
    r0 = publish.matrix_mechanism([], bins=16, range=(0, 1), workload=w, epsilon=1.0,
                                  strategy="hierarchical", random_state=0)
    kmat = w @ np.linalg.pinv(r0.matrix.astype(np.float64))
    gram = kmat.T @ kmat
    v, m4 = dlap_moments_closed(r0.noise.scale)
    sd = math.sqrt(np.sum(np.diag(gram) ** 2) * (m4 - 3 * v * v) + 2 * v * v * np.sum(gram**2))
    draws = math.ceil((z_critical(ALPHA) * sd / (0.03 * r0.expected_error)) ** 2)
    total = [np.sum(publish.matrix_mechanism(
        [], bins=16, range=(0, 1), workload=w, epsilon=1.0, strategy="hierarchical",
        random_state=10 + s).answers ** 2) for s in np.arange(draws)]
    assert abs(np.mean(total) - r0.expected_error) <= 0.03 * r0.expected_error


def test_matrix_mechanism_auto_picks_the_least_expected_error():
    w = np.tril(np.ones((64, 64)))
    errors = {s: publish.expected_error(w, s, epsilon=1.0) for s in publish.STRATEGIES}
    r = publish.matrix_mechanism([0.5], bins=64, range=(0, 1), workload=w, epsilon=1.0,
                                 random_state=0)
    assert r.strategy == min(errors, key=errors.get) == "hierarchical"
    assert publish.expected_error(w, "auto", epsilon=1.0) == pytest.approx(r.expected_error)
    # a workload of a few wide sums: the eigen-design wins
    v = np.zeros((3, 64))
    v[0], v[1, :32], v[2, ::2] = 1.0, 1.0, 1.0
    assert publish.matrix_mechanism([0.5], bins=64, range=(0, 1), workload=v, epsilon=1.0,
                                    random_state=0).strategy == "eigen"
    # a custom strategy that cannot answer the workload is refused
    with pytest.raises(ValueError, match="does not determine the workload"):
        publish.expected_error(w, np.ones((1, 64)), epsilon=1.0)
    assert publish.expected_error(w, np.eye(64), epsilon=1.0) == pytest.approx(
        errors["identity"])


def test_matrix_mechanism_noise_law():
    draws = np.concatenate([publish.matrix_mechanism(
        [], bins=64, range=(0, 1), workload=np.eye(64), epsilon=1.0, strategy="hierarchical",
        random_state=s).noisy for s in range(150)])  # 8-ary over 64 bins: 3 levels, DLap(3)
    assert integer_pvalue(draws, dlap_pmf(3.0), np.arange(-30, 31)) > ALPHA
    assert integer_pvalue(draws, dlap_pmf(3.0 * 1.25), np.arange(-30, 31)) < ALPHA


def test_matrix_mechanism_argument_errors_charge_nothing_and_charged_once():
    acc = dpcore.Accountant(1.0)
    w = np.eye(10)
    bad = [
        (dict(range=None), ValueError, "range"),
        (dict(epsilon=-1.0), ValueError, "epsilon must be > 0"),
        (dict(outside="wrap"), ValueError, "outside must be 'drop' or 'clip'"),
        (dict(workload=np.eye(9)), ValueError, "one column per bin"),
        (dict(workload=np.full((2, 10), np.nan)), ValueError, "workload"),
        (dict(strategy="fourier"), ValueError, "strategy must be one of"),
        (dict(strategy=np.ones((1, 10))), ValueError, "does not determine"),
        (dict(bins=5000, workload=np.ones((1, 5000))), ValueError, "MAX_MATRIX_BINS"),
    ]
    for over, exc, msg in bad:
        kw = dict(bins=10, range=(0, 1), workload=w, epsilon=0.5, accountant=acc,
                  random_state=0)
        kw.update(over)
        with pytest.raises(exc, match=msg):
            publish.matrix_mechanism([0.5], **kw)
    with pytest.raises(ValueError, match="NaN"):
        publish.matrix_mechanism([np.nan], bins=10, range=(0, 1), workload=w, epsilon=0.5,
                                 accountant=acc)
    assert acc.history == []
    publish.matrix_mechanism([0.5], bins=10, range=(0, 1), workload=w, epsilon=0.4,
                             accountant=acc, random_state=0)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.4, 0.0, "publish.matrix_mechanism")
    acc2 = dpcore.Accountant(0.3)
    g = rng(52)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        publish.matrix_mechanism([0.5], bins=10, range=(0, 1), workload=w, epsilon=0.4,
                                 accountant=acc2, random_state=g)
    assert g.bit_generator.state == before and acc2.history == []


# ------------------------------------------------------------------------------------------------
# MWEM


def naive_mwem(counts, q, epsilon, rounds, replay, g):
    """Straightforward MWEM with a dense 0/1 query matrix, drawing from ``g`` in the order
    dpcore does (count noise, then per round the exact EM and the measurement's noise)."""
    from dpcore import selection

    step = round_down(Fraction(epsilon) / (2 * rounds + 1))  # the largest double <= eps/(2T+1)
    scale = IntegerNoise.calibrate("laplace", 1, step, 0.0).scale
    truth = q @ counts
    total = max(int(counts.sum() + dpcore.discrete_laplace(scale, 1, random_state=g)[0]), 1)
    a = np.full(counts.size, total / counts.size)
    average = np.zeros(counts.size)
    done = []
    for _ in range(rounds):
        pick = selection.exponential(np.abs(np.rint(q @ a) - truth), sensitivity=1.0, epsilon=step,
                                     method="exact", random_state=g)
        done.append((pick, truth[pick] + dpcore.discrete_laplace(scale, 1, random_state=g)[0]))
        for pick, m in [done[-1]] + done * replay:
            a = a * np.exp(q[pick] * (m - q[pick] @ a) / (2 * total))
            a = a * total / a.sum()
        average += a
    return average / rounds


def interval_matrix(lo, hi, n):
    q = np.zeros((lo.size, n))
    for i, (a, b) in enumerate(zip(lo, hi)):
        q[i, a:b] = 1.0
    return q


@pytest.mark.parametrize("kind", ["ranges", "dense"])
def test_mwem_equals_the_naive_twin(kind):
    g = np.random.default_rng(21)
    x = g.beta(2, 5, 3000)
    lo, hi = np.sort(g.integers(0, 65, (2, 200)), axis=0)
    q = interval_matrix(lo, hi, 64)
    queries = (lo, hi) if kind == "ranges" else q
    m = publish.mwem(x, bins=64, range=(0, 1), queries=queries, epsilon=2.0, rounds=15,
                     replay=3, random_state=rng(5))
    counts = np.histogram(x, bins=64, range=(0, 1))[0].astype(np.float64)
    twin = naive_mwem(counts, q, 2.0, 15, 3, rng(5))
    np.testing.assert_allclose(m.histogram, twin, rtol=1e-9, atol=1e-9 * x.size)
    assert m.histogram.sum() == pytest.approx(m.total)
    # the kernel's updates keep the weights' sum, and the range answers are prefix sums
    a = g.uniform(0, 1, 64)
    out = np.empty(lo.size)
    _publish.range_answers(a, lo, hi, np.empty(65), out)
    np.testing.assert_allclose(out, q @ a, atol=1e-12)


def test_mwem_reduces_the_workload_error():
    g = np.random.default_rng(22)
    x = np.concatenate([g.normal(0.3, 0.05, 5000), g.normal(0.7, 0.1, 5000)])
    lo, hi = np.triu_indices(65, 1)
    counts = np.histogram(x, bins=64, range=(0, 1))[0]
    cum = np.concatenate([[0], np.cumsum(counts)])
    truth = cum[hi] - cum[lo]
    uniform = np.abs(truth - (hi - lo) * x.size / 64).mean()
    m = publish.mwem(x, bins=64, range=(0, 1), queries=(lo, hi), epsilon=1.0, rounds=30,
                     random_state=3)
    ch = np.concatenate([[0], np.cumsum(m.histogram)])
    assert np.abs(truth - (ch[hi] - ch[lo])).mean() < uniform / 5
    recs = m.records(20000, random_state=4)
    assert recs.shape == (20000,) and set(np.unique(recs)) <= set((m.edges[0][:-1] + 1 / 128))
    assert abs(np.mean(recs < 0.5) - m.histogram[:32].sum() / m.histogram.sum()) < 0.02
    # 2-d grid with a 0/1 matrix of "x0 < t and x1 < s" queries
    xy = g.uniform(0, 1, (3000, 2)) ** 2
    q = np.array([(np.add.outer(np.arange(8) < a, np.arange(8) < b) == 2).ravel()
                  for a in np.arange(1, 9) for b in np.arange(1, 9)], dtype=float)
    m2 = publish.mwem(xy, bins=(8, 8), range=[(0, 1), (0, 1)], queries=q, epsilon=1.0,
                      rounds=10, random_state=5)
    assert m2.histogram.shape == (8, 8) and m2.records(7, random_state=1).shape == (7, 2)


def test_mwem_noise_and_selection_laws():
    """One round (T = 1, epsilon = 3: every step epsilon / 3 = 1). The measurement's error is
    DLap((2T + 1) / epsilon = 1); the selection with uniform start weights is exactly
    P(q) proportional to exp(step * |q(A) - q(B)| / 2) (given the noisy total)."""
    x = np.repeat([0.1, 0.3, 0.6], [5, 2, 1])  # bins of 0.25: counts 5, 2, 1, 0
    lo, hi = np.array([0, 1, 2, 3, 0]), np.array([1, 2, 3, 4, 4])
    counts = np.array([5, 2, 1, 0])
    runs = [publish.mwem(x, bins=4, range=(0, 1), queries=(lo, hi), epsilon=3.0, rounds=1,
                         replay=0, random_state=rng(10_000 + s)) for s in range(3000)]
    chosen = np.array([r.chosen[0] for r in runs])
    err = np.array([r.measured[0] for r in runs]) - np.array([counts[lo[c]:hi[c]].sum()
                                                                for c in chosen])
    assert integer_pvalue(err, dlap_pmf(1.0), np.arange(-8, 9)) > ALPHA
    assert integer_pvalue(err, dlap_pmf(1.25), np.arange(-8, 9)) < ALPHA  # power
    # the EM scores depend on the noisy total, so test the law conditionally on it
    totals = np.array([r.total for r in runs])
    common = np.bincount(totals).argmax()
    sel = chosen[totals == common]
    score = np.abs((hi - lo) * common / 4 - np.array([5, 2, 1, 0, 8]))
    p = np.exp(0.5 * (score - score.max()))
    from _gof import chisquare_pvalue
    assert chisquare_pvalue(np.bincount(sel, minlength=5), p / p.sum()) > ALPHA
    wrong = np.exp(1.0 * (score - score.max()))  # power: without the factor 2 it is rejected
    assert chisquare_pvalue(np.bincount(sel, minlength=5), wrong / wrong.sum()) < ALPHA


def test_mwem_argument_errors_charge_nothing_and_charged_once():
    acc = dpcore.Accountant(1.0)
    good = (np.array([0, 2]), np.array([5, 10]))
    bad = [
        (dict(range=None), ValueError, "range"),
        (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
        (dict(rounds=0), ValueError, "rounds must be >= 1"),
        (dict(rounds=2.5), TypeError, "rounds must be an integer"),
        (dict(replay=-1), ValueError, "replay must be >= 0"),
        (dict(outside="wrap"), ValueError, "outside must be 'drop' or 'clip'"),
        (dict(queries=(np.array([0]), np.array([11]))), ValueError, "0 <= lo <= hi"),
        (dict(queries=(np.array([0.5]), np.array([3]))), TypeError, "integer cell indices"),
        (dict(queries=np.full((2, 10), 0.5)), ValueError, "every entry 0 or 1"),
        (dict(queries=np.ones((2, 9))), ValueError, "cells = 10"),
        (dict(epsilon=1e-14), ValueError, "too small"),
    ]
    for over, exc, msg in bad:
        kw = dict(bins=10, range=(0, 1), queries=good, epsilon=0.5, rounds=3,
                  accountant=acc, random_state=0)
        kw.update(over)
        with pytest.raises(exc, match=msg):
            publish.mwem([0.5], **kw)
    with pytest.raises(ValueError, match="NaN"):
        publish.mwem([np.nan], bins=10, range=(0, 1), queries=good, epsilon=0.5, rounds=3,
                     accountant=acc)
    assert acc.history == []
    publish.mwem([0.5], bins=10, range=(0, 1), queries=good, epsilon=0.4, rounds=3,
                 accountant=acc, random_state=0)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.label) == (0.4, 0.0, "publish.mwem")
    acc2 = dpcore.Accountant(0.3)
    g = rng(53)
    before = g.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        publish.mwem([0.5], bins=10, range=(0, 1), queries=good, epsilon=0.4, rounds=3,
                     accountant=acc2, random_state=g)
    assert g.bit_generator.state == before and acc2.history == []


def test_mw_ranges_kernel_equals_whole_domain_updates():
    """The block kernel (sqrt-n blocks, deferred renormalisation) against the textbook update
    on random intervals, empty ones and ones inside one block included, over 3 sweeps."""
    g = np.random.default_rng(23)
    for n, width in [(1000, 31), (64, 8), (5, 8)]:
        lo, hi = np.sort(g.integers(0, n + 1, (2, 40)), axis=0)
        lo[:3], hi[:3] = [0, 7 % n, 2], [0, 7 % n + 2, n]
        measured = g.uniform(0, 500, lo.size)
        a = g.uniform(0.5, 2.0, n)
        a *= 1000.0 / a.sum()
        want = a.copy()
        for k in list(range(10, 40)) + list(range(40)) * 3:
            s = want[lo[k]:hi[k]].sum()
            want[lo[k]:hi[k]] *= math.exp((measured[k] - s) / 2000.0)
            want *= 1000.0 / want.sum()
        nb = -(-n // width)
        _publish.mw_ranges(a, lo, hi, measured, 10, 40, 3, 1000.0, width, np.empty(nb),
                           np.empty(nb))
        np.testing.assert_allclose(a, want, rtol=1e-9)


@pytest.mark.parametrize("epsilon, rounds", [(1.0, 3), (0.7, 2), (2.0**-20, 3), (3.1, 1)])
def test_mwem_steps_never_sum_above_epsilon(epsilon, rounds, monkeypatch):
    """Issue 25: epsilon / (2T + 1) by float division overshot by ~1e-16; the step is rounded
    down exactly, so (2T + 1) steps sum to at most epsilon in exact arithmetic."""
    from dpcore import selection

    seen = []
    original = selection.ExponentialMechanism.calibrate.__func__

    def spy(cls, **kw):
        seen.append(kw["epsilon"])
        return original(cls, **kw)

    monkeypatch.setattr(selection.ExponentialMechanism, "calibrate", classmethod(spy))
    x = np.random.default_rng(0).uniform(0, 1, 50)
    publish.mwem(x, bins=8, range=(0, 1), queries=(np.array([0, 2]), np.array([4, 8])),
                 epsilon=epsilon, rounds=rounds, random_state=0)
    step = seen[0]
    assert Fraction(step) * (2 * rounds + 1) <= Fraction(epsilon)
    assert Fraction(math.nextafter(step, math.inf)) * (2 * rounds + 1) > Fraction(epsilon)
