"""Random Fourier features: unit norm rows, kernel approximation, public randomness."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.pipeline import make_pipeline  # noqa: E402

from dpcore.learn._kernel import RandomFourierFeatures  # noqa: E402
from dpcore.learn._erm import LinearSVC  # noqa: E402

# Most fits here leave classes=None (scikit-learn style, as its checks do): that reads the label
# set from y and warns with PrivacyWarning, which tests/test_learn_base.py checks.
pytestmark = pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning")


def test_rows_have_unit_norm():
    X = np.random.default_rng(0).normal(scale=10, size=(200, 4))
    Z = RandomFourierFeatures(gamma=2.0, n_components=30, random_state=0).fit_transform(X)
    assert Z.shape == (200, 60)
    assert np.allclose(np.linalg.norm(Z, axis=1), 1.0, atol=1e-12)


def test_kernel_approximation():
    # E[phi(x).phi(y)] = exp(-gamma ||x - y||^2); with D frequencies each entry of the Gram
    # matrix is a mean of D terms bounded by 1 in absolute value: |error| <= 5/sqrt(D) is a
    # generous (Hoeffding, per entry ~1e-5) tolerance.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3)) * 0.5
    gamma, D = 0.7, 20000
    Z = RandomFourierFeatures(gamma=gamma, n_components=D, random_state=2).fit_transform(X)
    K = np.exp(-gamma * np.sum((X[:, None] - X[None]) ** 2, axis=2))
    assert np.max(np.abs(Z @ Z.T - K)) < 5 / np.sqrt(D)
    # power: a wrong gamma is detected
    K_wrong = np.exp(-1.3 * gamma * np.sum((X[:, None] - X[None]) ** 2, axis=2))
    assert np.max(np.abs(Z @ Z.T - K_wrong)) > 5 / np.sqrt(D)


def test_frequencies_law():
    from scipy import stats
    rff = RandomFourierFeatures(gamma=0.5, n_components=5000, random_state=3).fit(np.zeros((1, 2)))
    w = rff.frequencies_.ravel()
    assert stats.kstest(w, stats.norm(scale=1.0).cdf).pvalue > 1e-4   # N(0, 2 gamma)
    assert stats.kstest(w, stats.norm(scale=1.1).cdf).pvalue < 1e-4


def test_fit_ignores_data_values():
    a = RandomFourierFeatures(random_state=5).fit(np.zeros((3, 2))).frequencies_
    b = RandomFourierFeatures(random_state=5).fit(np.ones((50, 2)) * 7).frequencies_
    assert np.array_equal(a, b)


def test_private_kernel_svm_learns_a_nonlinear_boundary():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(4000, 2))
    y = (np.sum(X ** 2, axis=1) < 0.5).astype(int)      # a disc: not linearly separable
    pipe = make_pipeline(RandomFourierFeatures(gamma=2.0, n_components=100, random_state=0),
                         LinearSVC(epsilon=5.0, data_norm=1.0, alpha=1e-3, random_state=0))
    assert pipe.fit(X, y).score(X, y) > 0.8


@pytest.mark.parametrize("kw, match", [({"gamma": 0}, "gamma"), ({"n_components": 0}, "n_components")])
def test_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(**kw).fit(np.zeros((2, 2)))
