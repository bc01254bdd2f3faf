"""Private Gaussian naive Bayes: noise law of the released statistics, accuracy, errors."""
import pickle

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy import stats  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402

import dpcore  # noqa: E402
from _gof import ALPHA  # noqa: E402
from dpcore.learn._naive_bayes import GaussianNB  # noqa: E402

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


def test_count_noise_law():
    # One class, one feature at its midpoint (z = 0): the mean of the noisy count minus n is
    # discrete Laplace with scale 1/(eps/3) on a fine grid (continuous to KS resolution).
    X = np.zeros((30, 1))
    y = np.zeros(30, dtype=int)
    eps = 1.5
    gen = np.random.default_rng(3)
    counts = []
    for _ in range(3000):
        nb = GaussianNB(epsilon=eps, bounds=(-1, 1), classes=[0, 1], random_state=gen).fit(X, y)
        counts.append(nb.class_count_)
    counts = np.array(counts)
    # class 1 is empty: its noisy count is clamped at 1, so use class 0 (n = 30, far from 1)
    z = (counts[:, 0] - 30) * (eps / 3)
    assert stats.kstest(z, stats.laplace.cdf).pvalue > ALPHA
    assert stats.kstest(z / 1.3, stats.laplace.cdf).pvalue < ALPHA   # power


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
