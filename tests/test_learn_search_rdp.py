"""Random stopping with delta (PrivateGridSearch(selection="random_stopping", delta=...)): the
RDP bound of Papernot-Steinke 2022 (Theorem 2, geometric K) against the exact Rényi divergences
of the best-of-K law on small cases, the per-trial rho, the charge, and the refusals."""
import math
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy.special import logsumexp  # noqa: E402

import dpcore  # noqa: E402
from dpcore.curves import DEFAULT_ORDERS, ZCDP, PrivacyCurve  # noqa: E402
from dpcore.learn import GaussianNB, LogisticRegression  # noqa: E402
from dpcore.learn._search import (  # noqa: E402
    PrivateGridSearch,
    RandomStopping,
    random_stopping_rho,
)

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])


def _renyi(p, q, order):
    return float(logsumexp(order * np.log(p) + (1 - order) * np.log(q)) / (order - 1))


def _best_of_geometric(p, n_trials):
    """The exact law of the smallest of K i.i.d. scores of law p, K geometric with mean
    n_trials: P(min >= s) = g S(s) / (1 - (1 - g) S(s)) (S the survival function, g =
    1 / n_trials), differenced in a form without cancellation."""
    g = 1.0 / n_trials
    S = np.append(np.cumsum(p[::-1])[::-1], 0.0)
    return g * p / ((1 - (1 - g) * S[:-1]) * (1 - (1 - g) * S[1:]))


def _scores(eps, size=16):
    """A trial's score law on neighbours: discrete Laplace-like laws centred at 7 and 8."""
    s = np.arange(size)
    p, q = np.exp(-eps * np.abs(s - 7)), np.exp(-eps * np.abs(s - 8))
    return p / p.sum(), q / q.sum()


@dataclass(frozen=True)
class ExactTrial(PrivacyCurve):
    """The exact RDP curve of the trial of :func:`_scores` (both directions)."""

    eps: float = 1.0

    def rdp(self, orders=DEFAULT_ORDERS):
        p, q = _scores(self.eps)
        return np.array([0.0 if a == 1.0 else max(_renyi(p, q, a), _renyi(q, p, a))
                         for a in np.atleast_1d(orders)])


def _exact_search_rdp(eps, n_trials):
    p, q = _scores(eps)
    a, b = _best_of_geometric(p, n_trials), _best_of_geometric(q, n_trials)
    assert abs(a.sum() - 1.0) < 1e-12 and abs(b.sum() - 1.0) < 1e-12
    return np.array([max(_renyi(a, b, o), _renyi(b, a, o)) for o in ORDERS])


@pytest.mark.parametrize("eps", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("n_trials", [1, 2, 10, 100, 1000])
def test_bound_holds_against_the_exact_best_of_k_divergence(eps, n_trials):
    """The curve is at least the exact Rényi divergence of the best-of-K output law at every
    order (both directions), and equals the trial's curve when K = 1."""
    exact = _exact_search_rdp(eps, n_trials)
    bound = RandomStopping(ExactTrial(eps), n_trials).rdp(ORDERS)
    assert np.all(bound >= exact)
    if n_trials == 1:
        np.testing.assert_allclose(bound, ExactTrial(eps).rdp(ORDERS), rtol=1e-12)


def test_bound_test_has_power():
    """The comparison can fail: the trial's curve plus log(n_trials) / (lambda - 1) alone (the
    bound without its lambda_hat terms) is below the exact divergence in most of these cases."""
    below = 0
    for eps in (0.1, 0.5, 2.0):
        for n_trials in (2, 10, 100, 1000):
            exact = _exact_search_rdp(eps, n_trials)
            short = ExactTrial(eps).rdp(ORDERS) + math.log(n_trials) / (ORDERS - 1)
            below += bool(np.any(short < exact))
    assert below >= 10


def test_curve_formula_at_one_order():
    """Against the formula written out: rho-zCDP trials, lambda_hat at the grid's minimiser."""
    rho, n_trials, lam = 0.01, 10, 8.0
    hats = np.array((1.0,) + DEFAULT_ORDERS)
    terms = np.where(hats == 1.0, 0.0, 2 * (1 - 1 / hats) * rho * hats) + 2 * math.log(10) / hats
    expected = rho * lam + terms.min() + math.log(10) / (lam - 1)
    got = RandomStopping(ZCDP(rho), n_trials).rdp([lam])[0]
    assert expected <= got <= expected * (1 + 1e-12)


@pytest.mark.parametrize("epsilon, delta, n_trials", [(1.0, 1e-6, 3), (0.5, 1e-8, 20),
                                                      (4.0, 1e-5, 1)])
def test_trial_rho_meets_the_guarantee_and_is_nearly_largest(epsilon, delta, n_trials):
    rho = random_stopping_rho(epsilon, delta, n_trials)
    assert RandomStopping(ZCDP(rho), n_trials).epsilon_for(delta) <= epsilon
    assert RandomStopping(ZCDP(rho * 1.005), n_trials).epsilon_for(delta) > epsilon


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)  # test data, not noise
    X = rng.normal(size=(3000, 3))
    return X, (X[:, 0] - X[:, 2] > 0).astype(int)


def test_gd_candidates_are_charged_the_curve_once(data):
    """zCDP candidates (gd, their own delta): each fit spends at most rho_per_trial_; the search
    charges (epsilon, delta) once with the random-stopping curve, which an RDP accountant
    composes."""
    X, y = data
    acc = dpcore.Accountant(2.0, 1e-5)
    est = LogisticRegression(data_norm=4.0, method="gd", delta=1e-7, n_steps=20)
    s = PrivateGridSearch(est, {"alpha": [1e-3, 1e-2]}, epsilon=1.0, delta=1e-6,
                          classes=[0, 1], random_state=0, accountant=acc, n_trials=3,
                          selection="random_stopping").fit(X, y)
    (entry,) = acc.history
    assert acc.spent == (1.0, 1e-6)
    rho = random_stopping_rho(1.0, 1e-6, 3)
    assert s.rho_per_trial_ == rho
    assert s.best_estimator_.cost.rho <= rho
    assert not hasattr(s, "epsilon_per_trial_")
    assert s.score(X, y) > 0.85
    rdp = dpcore.Accountant(10.0, 1e-5, method="rdp")
    for seed in range(2):
        PrivateGridSearch(est, {"alpha": [1e-3, 1e-2]}, epsilon=1.0, delta=1e-6, classes=[0, 1],
                          random_state=seed, accountant=rdp, n_trials=3,
                          selection="random_stopping").fit(X, y)
    assert rdp.spent[0] < 2.0   # tighter than adding the two (1, 1e-6) charges


def test_pure_candidates_get_the_zcdp_epsilon(data):
    X, y = data
    s = PrivateGridSearch(GaussianNB(bounds=(-4, 4)), {"var_floor": [1e-3, 1e-2]}, epsilon=2.0,
                          delta=1e-6, classes=[0, 1], random_state=1,
                          selection="random_stopping").fit(X, y)
    eps = s.best_estimator_.epsilon
    assert eps * eps / 2 <= s.rho_per_trial_ and eps == pytest.approx(
        math.sqrt(2 * s.rho_per_trial_))


@pytest.mark.parametrize("kw, match", [
    (dict(estimator=LogisticRegression(data_norm=4.0, method="sgd", delta=1e-6, n_hint=3000)),
     "add/remove"),
    (dict(selection="exponential"), "delta applies"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1e-300, epsilon=1e-3, n_trials=10**6), "too small"),
])
def test_bad_arguments_are_refused_before_the_charge(data, kw, match):
    X, y = data
    acc = dpcore.Accountant(5.0, 1e-3)
    args = dict(estimator=LogisticRegression(data_norm=4.0), param_grid={"alpha": [1e-3, 1e-2]},
                epsilon=1.0, delta=1e-6, classes=[0, 1], random_state=0, accountant=acc,
                selection="random_stopping")
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        PrivateGridSearch(**args).fit(X, y)
    assert acc.history == []
