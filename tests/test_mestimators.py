"""dpcore.mestimators (Lei 2011): the perturbed histogram release (grid from the public box and
Lei's bandwidth, exact DLap(2 / epsilon) noise on every cell under replace-one), the estimators
as post-processing of one release (never the raw data), exactness without noise, consistency on
large n, the rate over growing n (slow), errors and the accountant."""
import math

import numpy as np
import pytest

from _gof import ALPHA, dlap_pmf, integer_pvalue

import dpcore
from dpcore import _histogram, mestimators, stats
from dpcore.mestimators import PerturbedHistogram


def rng(seed):
    return np.random.Generator(dpcore.ChaCha20(seed))


def regression_data(n, seed):
    g = np.random.default_rng(seed)
    x = g.uniform(0, 1, n)
    y = np.clip(0.2 + 0.5 * x + g.laplace(0, 0.03, n), 0, 1)
    return np.column_stack([x, y])


def test_bandwidth_is_leis_rate():
    for n, eps, d in [(1000, 1.0, 1), (10**6, 0.5, 2), (10**5, 2.0, 3)]:
        h = mestimators.lei_bandwidth(n, eps, d)
        assert h == pytest.approx((math.sqrt(math.log(n)) / (n * eps)) ** (2 / (d + 2)))
    x = np.random.default_rng(0).uniform(size=5000)
    rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), random_state=0)
    assert rel.counts.shape == (math.ceil(1 / mestimators.lei_bandwidth(5000, 1.0, 1)),)
    rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), h=0.1, random_state=0)
    assert rel.counts.shape == (10,)


@pytest.mark.parametrize("relation,sensitivity", [("replace", 2), ("add_remove", 1)])
def test_release_noise_is_dlap_on_every_cell(relation, sensitivity):
    x = np.random.default_rng(1).uniform(-1, 2, size=(3000, 2))  # some points clipped
    eps = 1.3
    rel = mestimators.perturbed_histogram(x, epsilon=eps, bounds=[(0, 1), (0, 1)], bins=200,
                                          relation=relation, random_state=rng(2))
    exact, _ = np.histogramdd(np.clip(x, 0, 1), bins=200, range=[(0, 1), (0, 1)])
    noise = (rel.counts - exact).reshape(-1)
    t = rel.scale
    assert t == pytest.approx(sensitivity / eps)
    support = np.arange(-30, 31)
    assert integer_pvalue(noise, dlap_pmf(t), support) > ALPHA
    assert integer_pvalue(noise, dlap_pmf(t * 1.1), support) < ALPHA  # power
    assert exact.sum() == 3000  # clipped, not dropped


def test_release_is_computed_once_and_estimators_never_see_data(monkeypatch):
    calls = []
    real = _histogram.count_into
    monkeypatch.setattr(_histogram, "count_into", lambda *a: calls.append(1) or real(*a))
    data = regression_data(20_000, 3)
    rel = mestimators.perturbed_histogram(data, epsilon=1.0, bounds=[(0, 1), (0, 1)],
                                          random_state=4)
    assert calls == [1]
    mestimators.median(rel, axis=1)
    mestimators.quantile(rel, 0.9, axis=0)
    mestimators.huber_location(rel, c=0.1, axis=1)
    mestimators.lad_regression(rel)
    mestimators.huber_regression(rel, c=0.05)
    mestimators.m_estimate(rel, lambda a, t: np.abs(a[:, 1] - t[0]), [0.5])
    assert calls == [1]  # post-processing only
    # the release holds the grid and the noisy counts, nothing else derived from the data
    assert set(vars(rel)) == {"counts", "edges", "scale", "epsilon", "relation"}
    with pytest.raises(TypeError, match="never see raw data"):
        mestimators.median(data[:, 0])


def test_exact_counts_give_the_binned_estimators():
    """Without noise (exact counts) each estimator is the non-private one on the binned data."""
    from scipy import optimize

    g = np.random.default_rng(5)
    x = g.beta(2, 5, size=4000)
    edges = [np.linspace(0, 1, 41)]
    counts, _ = np.histogram(x, bins=edges[0])
    rel = PerturbedHistogram.from_counts(counts, edges)
    centres = np.repeat((edges[0][:-1] + edges[0][1:]) / 2, counts)
    mean = mestimators.m_estimate(rel, lambda a, t: (a[:, 0] - t[0]) ** 2, [0.5])[0]
    assert mean == pytest.approx(centres.mean(), abs=1e-8)
    huber = mestimators.huber_location(rel, c=0.05)
    ref = optimize.minimize_scalar(lambda t: np.sum(mestimators._huber(centres - t, 0.05)),
                                   bounds=(0, 1), method="bounded",
                                   options={"xatol": 1e-12}).x
    assert huber == pytest.approx(ref, abs=1e-7)
    # the median: the binned data's empirical CDF, interpolated inside the cell
    med = mestimators.median(rel)
    cdf = np.concatenate([[0], np.cumsum(counts)]) / counts.sum()
    assert med == pytest.approx(np.interp(0.5, cdf, edges[0]))
    # LAD on exact counts: no weighted line does better (perturbation check)
    data = regression_data(5000, 6)
    e2 = [np.linspace(0, 1, 21)] * 2
    c2, _ = np.histogramdd(data, bins=e2)
    rel2 = PerturbedHistogram.from_counts(c2.astype(np.int64), e2)
    beta = mestimators.lad_regression(rel2)
    pts, w = rel2.points("raw")
    obj = lambda b: np.dot(w, np.abs(pts[:, 1] - b[0] - b[1] * pts[:, 0]))  # noqa: E731
    for step in ([1e-3, 0], [-1e-3, 0], [0, 1e-3], [0, -1e-3]):
        assert obj(beta) <= obj(beta + np.array(step)) + 1e-9


def test_weights_treatment_of_negative_counts():
    rel = PerturbedHistogram.from_counts(np.array([-3, 0, 5, 40, 2]), [np.linspace(0, 1, 6)],
                                         scale=2.0, epsilon=1.0)
    np.testing.assert_array_equal(rel.weights("raw"), [-3, 0, 5, 40, 2])
    np.testing.assert_array_equal(rel.weights("clip"), [0, 0, 5, 40, 2])
    tau = 2.0 * math.log(5 / 0.05)  # 9.2
    assert rel.threshold() == pytest.approx(tau)
    np.testing.assert_array_equal(rel.weights("threshold"), [0, 0, 0, 40, 0])
    with pytest.raises(ValueError, match="weights must be"):
        rel.weights("abs")


def test_consistency_on_large_n():
    """n = 10**6, epsilon = 1: location and regression estimates within a few cell widths of
    the non-private ones (Lei's rate: h ~ 2e-4 for d = 1, 2e-3 for d = 2)."""
    g = np.random.default_rng(7)
    x = g.normal(0.3, 0.1, size=10**6)
    rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(-1, 1), random_state=rng(8))
    assert abs(mestimators.median(rel) - np.median(x)) < 2e-3
    assert abs(mestimators.quantile(rel, 0.9) - np.quantile(x, 0.9)) < 2e-3
    assert abs(mestimators.huber_location(rel, c=0.1) - 0.3) < 2e-3
    data = regression_data(10**6, 9)
    rel2 = mestimators.perturbed_histogram(data, epsilon=1.0, bounds=[(0, 1), (0, 1)],
                                           random_state=rng(10))
    np.testing.assert_allclose(mestimators.lad_regression(rel2), [0.2, 0.5], atol=0.01)
    np.testing.assert_allclose(mestimators.huber_regression(rel2, c=0.03), [0.2, 0.5],
                               atol=0.01)


def test_median_error_decreases_at_the_rate():
    """Root mean squared error of the private median over 30 releases for n = 10**3 .. 10**5:
    decreasing, and within a factor 3 of Lei's rate n**-1/2 + (sqrt(log n)/n)**(2/3) (scaled by
    the error at the smallest n)."""
    g = np.random.default_rng(11)
    r = rng(12)
    errs = []
    ns = [10**3, 10**4, 10**5]
    for n in ns:
        e = []
        for _ in range(30):
            x = g.normal(0.0, 0.2, size=n)
            rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(-1, 1), random_state=r)
            e.append(mestimators.median(rel) - np.median(x))
        errs.append(math.sqrt(np.mean(np.square(e))))
    assert errs[0] > errs[1] > errs[2]
    rate = [n**-0.5 + (math.sqrt(math.log(n)) / n) ** (2 / 3) for n in ns]
    ratio = np.array(errs) / np.array(rate)
    assert ratio.max() / ratio.min() < 3.0, errs


def test_errors_and_accountant():
    x = np.zeros(10)
    with pytest.raises(ValueError, match="bounds is required"):
        mestimators.perturbed_histogram(x, epsilon=1.0, bounds=None)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        mestimators.perturbed_histogram(x, epsilon=0.0, bounds=(0, 1))
    with pytest.raises(ValueError, match="h .or bins. is required"):
        mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), relation="add_remove")
    with pytest.raises(ValueError, match="h must be"):
        mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), h=1.5)
    with pytest.raises(ValueError, match="not both"):
        mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), h=0.1, bins=3)
    with pytest.raises(ValueError, match="X must not contain NaN"):
        mestimators.perturbed_histogram([0.1, np.nan], epsilon=1.0, bounds=(0, 1), h=0.5)
    with pytest.raises(ValueError, match="one .lower, upper. pair per coordinate"):
        mestimators.perturbed_histogram(np.zeros((3, 2)), epsilon=1.0, bounds=[(0, 1)], h=0.5)
    rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(0, 1), h=0.5, random_state=0)
    with pytest.raises(ValueError, match="d >= 2"):
        mestimators.lad_regression(rel)
    with pytest.raises(ValueError, match="q must be"):
        mestimators.quantile(rel, 1.5)
    acc = dpcore.Accountant(1.0)
    mestimators.perturbed_histogram(x, epsilon=0.6, bounds=(0, 1), accountant=acc, random_state=0)
    with pytest.raises(dpcore.BudgetExceeded):
        mestimators.perturbed_histogram(x, epsilon=0.6, bounds=(0, 1), accountant=acc)
    assert len(acc.history) == 1
    assert stats.perturbed_histogram is mestimators.perturbed_histogram


def test_docstring_examples():
    import doctest

    result = doctest.testmod(mestimators, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 10


# ------------------------------------------------------------------------------------------------
# a noisy histogram too sparse for its threshold (issue 25): finite estimates, a warning


SPARSE = np.random.default_rng(2).uniform(0, 1, size=(10_000, 2))  # Lei's grid: ~3 per cell


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5])  # seeds whose noisy histogram keeps no cell
def test_estimators_are_finite_when_the_threshold_keeps_no_cell(seed):
    rel = mestimators.perturbed_histogram(SPARSE, epsilon=1.0, bounds=[(0, 1), (0, 1)],
                                          random_state=seed)
    assert not np.any(rel.weights("threshold") > 0)  # the degenerate case this test is about
    with pytest.warns(mestimators.DegenerateHistogramWarning, match="'clip' weights instead"):
        beta = mestimators.lad_regression(rel)
    assert np.all(np.isfinite(beta))
    with pytest.warns(mestimators.DegenerateHistogramWarning):
        assert 0.0 <= mestimators.median(rel) <= 1.0
    with pytest.warns(mestimators.DegenerateHistogramWarning):
        assert 0.0 <= mestimators.huber_location(rel, c=0.1) <= 1.0
    with pytest.warns(mestimators.DegenerateHistogramWarning):
        theta = mestimators.m_estimate(rel, lambda a, t: (a[:, 0] - t[0]) ** 2, [0.5])
    assert np.isfinite(theta[0])


def test_usable_weights_fall_back_in_order():
    edges = [[0.0, 1.0, 2.0, 3.0]]
    kept = mestimators.PerturbedHistogram.from_counts([0, 5, 1], edges)
    assert mestimators.usable_weights(kept).tolist() == [0.0, 5.0, 1.0]  # no fallback, no warning
    negative = mestimators.PerturbedHistogram.from_counts([-1, -2, 0], edges)
    with pytest.warns(mestimators.DegenerateHistogramWarning, match="'uniform'"):
        assert mestimators.usable_weights(negative, "raw").tolist() == [1.0, 1.0, 1.0]
    with pytest.warns(mestimators.DegenerateHistogramWarning):
        assert mestimators.median(negative) == 1.5  # every cell alike: the box's centre


@pytest.mark.parametrize("theta0", [[np.nan], [np.inf, 0.0]])
def test_m_estimate_refuses_a_non_finite_start(theta0):
    rel = mestimators.PerturbedHistogram.from_counts([1, 2, 1], [[0.0, 1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="theta0"):
        mestimators.m_estimate(rel, lambda a, t: (a[:, 0] - t[0]) ** 2, theta0)
