"""Private Gaussian naive Bayes: noise law of the released statistics, accuracy, errors."""
import math
import pickle
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy import stats  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402

import dpcore  # noqa: E402
from _gof import ALPHA, chisquare_pvalue  # noqa: E402
from dpcore.learn._naive_bayes import CategoricalNB, GaussianNB, gaussian_nb_budget  # noqa: E402

# Most fits here leave classes=None (scikit-learn style, as its checks do): that reads the label
# set from y and warns with PrivacyWarning, which tests/test_learn_base.py checks.
pytestmark = pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning")


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X, y, (X.min(axis=0), X.max(axis=0))   # bounds public in this test


def test_huge_epsilon_matches_sklearn(cancer):
    from sklearn.naive_bayes import GaussianNB as SkNB
    X, y, bounds = cancer
    nb = GaussianNB(epsilon=1e9, bounds=bounds, var_floor=1e-12, random_state=0).fit(X, y)
    ref = SkNB(var_smoothing=0).fit(X, y)
    assert np.allclose(nb.theta_, ref.theta_, rtol=1e-6)
    assert np.allclose(nb.var_, ref.var_, rtol=1e-4)
    assert np.allclose(nb.class_prior_, ref.class_prior_, rtol=1e-6)
    assert np.mean(nb.predict(X) == ref.predict(X)) > 0.99


def test_accuracy_improves_with_epsilon(cancer):
    X, y, bounds = cancer
    acc = {e: np.mean([GaussianNB(epsilon=e, bounds=bounds, random_state=s).fit(X, y).score(X, y)
                       for s in range(5)]) for e in (0.01, 100.0)}
    assert acc[100.0] > 0.9 and acc[100.0] > acc[0.01]


def test_count_and_sum_noise_laws():
    # One class, one feature at its midpoint (z = 0): the noisy count minus n and the noisy sum
    # are discrete Laplace with scales 1/epsilon_counts (on the integers) and d/epsilon_sums
    # (gaussian_nb_budget) on a fine grid (continuous to KS resolution). The sum is theta_ * class_count_ while
    # |sum| <= count, which holds here with overwhelming probability.
    X = np.zeros((30, 1))
    y = np.zeros(30, dtype=int)
    eps = 1.5
    eps_counts, eps_sums, _ = gaussian_nb_budget(eps, 1)
    gen = np.random.default_rng(3)  # insecure-ok: test data
    counts, sums = [], []
    for _ in range(3000):
        nb = GaussianNB(epsilon=eps, bounds=(-1, 1), classes=[0, 1], random_state=gen).fit(X, y)
        assert nb.epsilon_split_ == (eps_counts, eps_sums, eps_sums)
        counts.append(nb.class_count_[0])
        sums.append(nb.theta_[0, 0] * nb.class_count_[0])
    # class 1 is empty: its noisy count is clamped at 1, so use class 0 (n = 30, far from 1);
    # the counts are integers with discrete Laplace noise of scale 1/epsilon_counts rounded up
    from dpcore.learn._naive_bayes import GaussianNBSums
    t = GaussianNBSums(eps, 1).counts.scale
    z = (np.array(counts) - 30).astype(np.int64)
    assert _binned_pvalue(z, t) > ALPHA
    assert _binned_pvalue(z, 1.3 * t) < ALPHA   # power
    z = np.array(sums) * eps_sums
    assert stats.kstest(z, stats.laplace.cdf).pvalue > ALPHA
    assert stats.kstest(z / 1.3, stats.laplace.cdf).pvalue < ALPHA


def test_budget_split_sums_to_epsilon_and_favours_the_sums():
    for eps in (1e-3, 0.7, 1.0, 3.3, 2.0**40):
        for d in (1, 2, 7, 30, 1000):
            split = gaussian_nb_budget(eps, d)
            assert math.fsum(split) <= eps and math.fsum(split) == pytest.approx(eps)
            assert split[1] == split[2]
            # the counts' share is (2d)^(1/3) / (2d + (2d)^(1/3))
            r = (2 * d) ** (1 / 3)
            assert split[0] / eps == pytest.approx(r / (2 * d + r))
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_nb_budget(0.0, 3)


def test_probabilities_and_pickle(cancer):
    X, y, bounds = cancer
    nb = GaussianNB(epsilon=1.0, bounds=bounds, random_state=1).fit(X, y)
    p = nb.predict_proba(X[:10])
    assert np.allclose(p.sum(axis=1), 1)
    assert np.array_equal(nb.classes_[np.argmax(p, axis=1)], nb.predict(X[:10]))
    again = pickle.loads(pickle.dumps(nb))
    assert np.array_equal(again.predict_proba(X[:10]), p)


def test_accountant_and_budget(cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(1.0)
    GaussianNB(epsilon=0.9, bounds=bounds, random_state=0, accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(0.9)
    with pytest.raises(dpcore.BudgetExceeded):
        GaussianNB(epsilon=0.9, bounds=bounds, accountant=acc).fit(X, y)


def test_errors(cancer):
    X, y, bounds = cancer
    with pytest.raises(ValueError, match="bounds is required"):
        GaussianNB().fit(X, y)
    with pytest.raises(ValueError, match="outside classes"):
        GaussianNB(bounds=bounds, classes=[0, 5]).fit(X, y)
    with pytest.raises(ValueError, match="epsilon"):
        GaussianNB(epsilon=-1, bounds=bounds).fit(X, y)
    with pytest.raises(ValueError, match="priors"):
        GaussianNB(bounds=bounds, priors=[0.5, 0.6]).fit(X, y)


def test_seeded_draws_are_independent_streams():
    # An int seed must not be reused for the three releases (identical noise would leak).
    X = np.zeros((10, 1))
    y = np.zeros(10, dtype=int)
    nb = GaussianNB(epsilon=1.0, bounds=(-1, 1), random_state=0, var_floor=1e-9).fit(X, y)
    assert nb.theta_[0, 0] * nb.class_count_[0] != pytest.approx(nb.class_count_[0] - 10)


# ------------------------------------------------------------------------------------------------
# CategoricalNB



def _categorical(n=3000, seed=5):
    g = np.random.default_rng(seed)  # test data
    y = g.integers(0, 3, n)
    X = np.column_stack([np.where(g.random(n) < 0.7, y, g.integers(0, 3, n)),
                         np.where(g.random(n) < 0.6, y % 2, 1 - y % 2),
                         g.choice(["a", "b", "c", "d"], n)]).astype(object)
    X[:, 0] = X[:, 0].astype(int)
    X[:, 1] = X[:, 1].astype(int)
    return X, y


CATS = [[0, 1, 2], [0, 1], ["a", "b", "c", "d"]]


def test_categorical_counts_have_the_exact_discrete_laplace_law():
    """Every released count is the exact count plus discrete Laplace noise of scale (d + 1) /
    epsilon (d = 3 features): chi-square of 4000 fits' noise on one cell against the pmf."""
    X, y = _categorical(300)
    eps = 2.0
    gen = np.random.default_rng(11)
    exact = np.sum((y == 1) & (X[:, 0] == 2))
    noise = np.array([
        CategoricalNB(epsilon=eps, categories=CATS, classes=[0, 1, 2], random_state=gen)
        .fit(X, y).category_count_[0][1, 2] - exact for _ in range(4000)])
    t = 4 / eps
    q = math.exp(-1 / t)
    support = np.arange(-20, 21)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    counts = np.array([np.sum(noise == k) for k in support])
    probs = np.append(pmf, 1 - pmf.sum())
    observed = np.append(counts, noise.size - counts.sum())
    assert chisquare_pvalue(observed, probs) > ALPHA
    wrong_q = math.exp(-1 / (1.25 * t))   # power: a 25% larger scale is rejected
    wrong = (1 - wrong_q) / (1 + wrong_q) * wrong_q ** np.abs(support)
    assert chisquare_pvalue(observed, np.append(wrong, 1 - wrong.sum())) < ALPHA


def test_categorical_accuracy_and_huge_epsilon_matches_sklearn():
    from sklearn.naive_bayes import CategoricalNB as SkCategoricalNB
    X, y = _categorical()
    codes = np.column_stack([X[:, 0].astype(int), X[:, 1].astype(int),
                             np.searchsorted(CATS[2], X[:, 2].astype(str))])
    sk = SkCategoricalNB(alpha=1.0).fit(codes, y)
    nb = CategoricalNB(epsilon=1e6, categories=CATS, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert np.mean(nb.predict(X) == sk.predict(codes)) > 0.99
    low = CategoricalNB(epsilon=1.0, categories=CATS, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert low.score(X, y) > 0.6
    proba = low.predict_proba(X[:5])
    assert np.allclose(proba.sum(axis=1), 1.0)


def test_categorical_checks_before_the_charge_and_quotes_nothing():
    X, y = _categorical(200)
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError, match="categories is required"):
        CategoricalNB(classes=[0, 1, 2], accountant=acc).fit(X, y)
    with pytest.raises(ValueError, match="one entry per feature"):
        CategoricalNB(categories=CATS[:2], classes=[0, 1, 2], accountant=acc).fit(X, y)
    X2 = X.copy()
    X2[0, 2] = "zebra"
    with pytest.raises(ValueError, match=r"X\[:, 2\] contains values outside") as info:
        CategoricalNB(categories=CATS, classes=[0, 1, 2], accountant=acc).fit(X2, y)
    assert "zebra" not in str(info.value)
    with pytest.raises(ValueError, match="distinct"):
        CategoricalNB(categories=[[0, 0], [0, 1], ["a"]], classes=[0, 1, 2],
                      accountant=acc).fit(X, y)
    assert acc.history == []
    CategoricalNB(epsilon=0.5, categories=CATS, classes=[0, 1, 2], accountant=acc).fit(X, y)
    assert [c.epsilon for c in acc.history] == [0.5]


def test_gaussian_nb_small_epsilon_does_not_raise_after_charging():
    rng = np.random.default_rng(0)  # insecure-ok: test data
    X = rng.normal(size=(20, 1000))
    y = rng.integers(0, 2, 20)
    acc = dpcore.Accountant(epsilon=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            GaussianNB(epsilon=1e-11, bounds=(-3, 3), classes=[0, 1], random_state=0,
                       accountant=acc).fit(X, y)
        except ValueError:
            # raising is acceptable only before anything is charged
            assert acc.spent[0] == 0.0


def _discrete_laplace_cdf(k, t):
    """P(X <= k) for the discrete Laplace law with scale t (pmf proportional to e^(-|x|/t))."""
    q = math.exp(-1.0 / t)
    k = np.asarray(k, dtype=float)
    return np.where(k >= 0, 1.0 - q ** (k + 1) / (1 + q), q ** (-k) / (1 + q))


def _binned_pvalue(noise, t, bins=20):
    """Chi-square of integer noise against the exact discrete Laplace law of scale t, in bins
    cut at the integer parts of the continuous law's quantiles (exact cell probabilities)."""
    cuts = np.unique(np.floor(t * stats.laplace.ppf(np.linspace(0, 1, bins + 1)[1:-1])))
    cdf = np.concatenate([[0.0], _discrete_laplace_cdf(cuts, t), [1.0]])
    observed = np.bincount(np.searchsorted(cuts, noise, side="left"), minlength=cuts.size + 1)
    return chisquare_pvalue(observed, np.diff(cdf))


def test_gaussian_nb_sums_are_exact_on_the_grid():
    """issue 28: the sums and sums of squares are integers on the power-of-two grid, summed
    exactly, plus exact discrete Laplace noise of scale d / (g epsilon_share) grid units. Checks:
    every released value is a multiple of the grid; the exact integers equal an independent
    Python-int sum of the rounded records; the noise of one sum and one square cell over 3000
    releases fits the exact law (chi-square, 20 cells, alpha = ALPHA each); power: the law with
    a 25% larger scale is rejected on the same draws."""
    from dpcore.learn._naive_bayes import GaussianNBSums
    gen = np.random.default_rng(21)  # insecure-ok: test data
    n, d, k = 400, 3, 2
    Z = np.clip(gen.normal(0.0, 0.5, size=(n, d)), -1.0, 1.0)
    idx = gen.integers(0, k, n)
    plan = GaussianNBSums(1.0, d)
    g = plan.grid
    assert g == 2.0 ** round(math.log2(g))
    counts, sums, squares = plan.exact(Z, idx, k)
    for c in range(k):
        rows = Z[idx == c]
        assert sums[c].tolist() == [sum(int(round(v / g)) for v in rows[:, j]) for j in range(d)]
        assert squares[c].tolist() == [sum(int(np.rint(v * v / g)) for v in rows[:, j])
                                       for j in range(d)]
    assert plan.sums.sensitivity == d * round(1 / g)
    draws = [plan.release((counts, sums, squares), gen) for _ in range(3000)]
    noisy_sums = np.array([s for _, s, _ in draws])
    noisy_squares = np.array([q for _, _, q in draws])
    for released in (noisy_sums, noisy_squares):
        units = released / g
        assert np.array_equal(units, np.round(units))            # multiples of the grid
    for noisy, exact, noise in ((noisy_sums, sums, plan.sums), (noisy_squares, squares,
                                                               plan.squares)):
        z = np.rint(noisy[:, 1, 2] / g).astype(np.int64) - exact[1, 2]
        t = noise.scale
        assert t == pytest.approx(d * round(1 / g) / plan.split[1], rel=1e-9)
        assert _binned_pvalue(z, t) > ALPHA
        assert _binned_pvalue(z, 1.25 * t) < ALPHA                # power
    noisy_counts = np.array([c for c, _, _ in draws])[:, 0] - counts[0]
    assert _binned_pvalue(noisy_counts.astype(np.int64), plan.counts.scale) > ALPHA


def test_gaussian_nb_uses_the_exact_sums():
    # fit's released statistics are the plan's: the same seed gives the same means
    from dpcore.learn._naive_bayes import GaussianNBSums
    X, y = load_breast_cancer(return_X_y=True)
    lo, hi = X.min(axis=0), X.max(axis=0)
    nb = GaussianNB(epsilon=1.0, bounds=(lo, hi), classes=[0, 1], random_state=5).fit(X, y)
    assert nb.grid_ == GaussianNBSums(1.0, X.shape[1]).grid


def test_gaussian_nb_auto_variance_floor_is_the_noise_level(cancer):
    """issue 28 item 2: var_floor="auto" floors each class's variances at NOISE_VAR_FLOOR times
    the standard deviation of one released sum of squares' noise over the released class count
    (and at MIN_VAR_FLOOR): post-processing of released and public values only. Checks: the
    released means and counts are those of a fixed floor under the same seed; every variance
    is at least its class's floor, exactly where the fixed floor leaves it lower; the floor is
    computed from the plan's public noise law."""
    from dpcore.learn import _naive_bayes
    X, y, bounds = cancer
    lo, hi = bounds
    half = (hi - lo) / 2.0
    auto = GaussianNB(epsilon=1.0, bounds=bounds, classes=[0, 1], random_state=3).fit(X, y)
    fixed = GaussianNB(epsilon=1.0, bounds=bounds, classes=[0, 1], var_floor=1e-3,
                       random_state=3).fit(X, y)
    np.testing.assert_array_equal(auto.theta_, fixed.theta_)
    np.testing.assert_array_equal(auto.class_count_, fixed.class_count_)
    plan = _naive_bayes.GaussianNBSums(1.0, X.shape[1])
    sd = math.sqrt(2.0 * math.exp(-1.0 / plan.squares.scale)
                   / (1.0 - math.exp(-1.0 / plan.squares.scale)) ** 2) * plan.grid
    assert plan.squares_noise_sd == pytest.approx(sd, rel=1e-12)
    floor = np.maximum(_naive_bayes.MIN_VAR_FLOOR,
                       _naive_bayes.NOISE_VAR_FLOOR * sd / auto.class_count_)
    z_auto, z_fixed = auto.var_ / half ** 2, fixed.var_ / half ** 2
    assert np.all(z_auto >= floor[:, None] * (1 - 1e-12))
    raised = z_fixed < floor[:, None]
    assert raised.any()                                  # epsilon 1, d = 30: the floor binds
    np.testing.assert_allclose(z_auto[raised], np.broadcast_to(floor[:, None], z_auto.shape)[raised],
                               rtol=1e-12)
    np.testing.assert_allclose(z_auto[~raised], z_fixed[~raised], rtol=1e-12)


@pytest.mark.parametrize("bad", ["Auto", "", "noise"])
def test_gaussian_nb_var_floor_string_must_be_auto(cancer, bad):
    X, y, bounds = cancer
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError, match="var_floor"):
        GaussianNB(bounds=bounds, var_floor=bad, accountant=acc).fit(X, y)
    assert acc.spent[0] == 0.0
