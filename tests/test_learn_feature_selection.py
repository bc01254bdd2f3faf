"""Private feature selection (dpcore.learn._feature_selection): the exact law of the selection
on a hand-computable case, one charge, validation, scikit-learn's estimator contract."""
import itertools
import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402

import dpcore  # noqa: E402
from dpcore.learn._feature_selection import (  # noqa: E402
    PrivateKD,
    SelectKBest,
    bin_codes,
    majority_scores,
    pair_gains,
)
from tests._gof import ALPHA, chisquare_pvalue  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning")

# Four records, two classes, four features, two bins of [0, 1] per feature. By hand:
#   feature 0 bins (0, 0, 1, 1): bin 0 holds classes (0, 0) -> 2, bin 1 (1, 1) -> 2: u0 = 4
#   feature 1 bins (0, 0, 0, 1): bin 0 (0, 0, 1) -> 2, bin 1 (1) -> 1:               u1 = 3
#   feature 2 bins (0, 0, 0, 0): bin 0 (0, 0, 1, 1) -> 2:                            u2 = 2
#   feature 3 bins (1, 0, 1, 0): bin 0 (0, 1) -> 1, bin 1 (0, 1) -> 1:               u3 = 2
TINY_X = np.array([[0.1, 0.1, 0.1, 0.9],
                   [0.1, 0.1, 0.1, 0.1],
                   [0.9, 0.1, 0.1, 0.9],
                   [0.9, 0.9, 0.1, 0.1]])
TINY_Y = np.array([0, 0, 1, 1])
TINY_U = [4, 3, 2, 2]


def test_scores_by_hand():
    codes = bin_codes(TINY_X, np.zeros(4), np.ones(4), 2)
    assert majority_scores(codes, TINY_Y, 2, 2).tolist() == TINY_U


def _peeling_law(u, k, c):
    """Exact probabilities of each ordered k-tuple under k successive exponential mechanisms
    exp(c u_j) without replacement."""
    law = {}
    for tup in itertools.permutations(range(len(u)), k):
        p, left = 1.0, list(range(len(u)))
        for j in tup:
            p *= math.exp(c * u[j]) / sum(math.exp(c * u[i]) for i in left)
            left.remove(j)
        law[tup] = p
    return law


@pytest.mark.parametrize("method", ["exact", "gumbel"])
@pytest.mark.parametrize("k, epsilon", [(1, 1.0), (2, 1.0)])
def test_selection_law_is_the_exponential_mechanism(k, epsilon, method):
    # "exact" (the default, issue 28): k exact exponential mechanisms; "gumbel": one-shot
    n_fits = 1500
    sel = SelectKBest(k=k, epsilon=epsilon, bounds=(0.0, 1.0), classes=[0, 1], n_bins=2,
                      method=method,
                      random_state=np.random.default_rng(2024))  # insecure-ok: test seed
    counts = {}
    for _ in range(n_fits):
        tup = tuple(sel.fit(TINY_X, TINY_Y).selected_.tolist())
        counts[tup] = counts.get(tup, 0) + 1
    # monotone utilities of sensitivity 1: c = epsilon / k exactly (epsilon / k is a double here)
    law = _peeling_law(TINY_U, k, epsilon / k)
    assert set(counts) <= set(law)
    observed = [counts.get(t, 0) for t in law]
    assert chisquare_pvalue(observed, list(law.values())) > ALPHA
    # power: the law without the monotone saving (c = epsilon / (2 k)) is rejected
    wrong = _peeling_law(TINY_U, k, epsilon / (2 * k))
    assert chisquare_pvalue(observed, list(wrong.values())) < ALPHA


def test_informative_features_found():
    rng = np.random.default_rng(0)  # insecure-ok: test data
    n = 20000
    y = rng.integers(0, 3, n)
    X = rng.random((n, 30))
    for j in (3, 17, 25):
        X[:, j] = (y + rng.random(n)) / 3          # bins of feature j reveal y
    sel = SelectKBest(k=3, epsilon=1.0, bounds=(0, 1), classes=[0, 1, 2], random_state=1)
    assert sorted(sel.fit(X, y).selected_.tolist()) == [3, 17, 25]
    assert sel.get_support(indices=True).tolist() == [3, 17, 25]
    assert sel.transform(X).shape == (n, 3)


def test_charged_once_with_effective_epsilon():
    acc = dpcore.Accountant(epsilon=5.0)
    SelectKBest(k=2, epsilon=0.3, bounds=(0, 1), classes=[0, 1], random_state=0,
                accountant=acc).fit(TINY_X, TINY_Y)
    assert len(acc.history) == 1 and 0 < acc.spent[0] <= 0.3


@pytest.mark.parametrize("params", [
    {"bounds": None}, {"epsilon": -1.0}, {"k": 0}, {"k": 5}, {"n_bins": 0},
    {"classes": [0]}, {"classes": [0, 2]},      # a label of y outside the public classes
    {"method": "inverse-cdf"},
])
def test_bad_arguments_charge_nothing(params):
    acc = dpcore.Accountant(epsilon=5.0)
    kw = {"k": 2, "epsilon": 1.0, "bounds": (0, 1), "classes": [0, 1], "accountant": acc,
          "random_state": 0}
    kw.update(params)
    with pytest.raises((ValueError, TypeError)) as err:
        SelectKBest(**kw).fit(TINY_X, TINY_Y)
    assert len(acc.history) == 0
    assert "0.9" not in str(err.value)


def test_exact_top_k_budget_and_default():
    from dpcore.learn._feature_selection import ExactTopK
    for epsilon, k in ((1.0, 3), (0.3, 7), (2.0, 1)):
        mech = ExactTopK(epsilon, k)
        assert mech.round.method == "exact" and mech.round.monotonic
        assert k * mech.round.scale <= epsilon    # k rounds of c u, sensitivity 1, monotone
        assert mech.epsilon_effective <= epsilon
        assert mech.epsilon_effective == pytest.approx(epsilon, rel=1e-12)
    acc = dpcore.Accountant(epsilon=5.0)
    sel = SelectKBest(k=3, epsilon=0.3, bounds=(0, 1), classes=[0, 1], random_state=0,
                      accountant=acc).fit(TINY_X, TINY_Y)
    assert sel.method == "exact" and acc.spent[0] == ExactTopK(0.3, 3).epsilon_effective
    assert len(set(sel.selected_.tolist())) == 3


def test_clone_shares_state_and_secure_default():
    acc = dpcore.Accountant(epsilon=5.0)
    gen = np.random.default_rng(0)  # insecure-ok: test
    sel = SelectKBest(k=1, bounds=(0, 1), classes=[0, 1], random_state=gen, accountant=acc)
    twin = clone(sel)
    assert twin.accountant is acc and twin.random_state is gen
    SelectKBest(k=1, bounds=(0, 1), classes=[0, 1]).fit(TINY_X, TINY_Y)   # secure generator
    assert not hasattr(SelectKBest(k=1, bounds=(0, 1)).fit(TINY_X, TINY_Y), "scores_")


def test_privacy_section_and_doctest():
    import doctest
    import inspect
    import re

    import dpcore.learn._feature_selection as mod

    for cls in (SelectKBest, PrivateKD):
        assert re.search(r"^Privacy\n-------\n", inspect.getdoc(cls), flags=re.MULTILINE)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------------------------------------
# PrivateKD (Vinterbo 2012)

def _separated_pairs(codes, y, subset):
    """F(S) by brute force over all pairs: different labels, different cells of S."""
    n = len(y)
    return sum(1 for i in range(n) for j in range(i + 1, n)
               if y[i] != y[j] and any(codes[i, a] != codes[j, a] for a in subset))


def test_pair_gains_match_brute_force():
    rng = np.random.default_rng(3)  # insecure-ok: test data
    codes = rng.integers(0, 3, (40, 5))
    y = rng.integers(0, 3, 40)
    for subset in ([], [1], [1, 4]):
        cells = np.unique(codes[:, subset], axis=0, return_inverse=True)[1].reshape(-1) \
            if subset else np.zeros(40, dtype=np.int64)
        gains = pair_gains(cells, codes, y, 3, 3, subset)
        for a in range(5):
            if a in subset:
                assert gains[a] == -np.inf
            else:
                want = _separated_pairs(codes, y, subset + [a]) - _separated_pairs(codes, y, subset)
                assert gains[a] == want


def _greedy_law(codes, y, k, c):
    """Exact probability of each ordered k-tuple of PrivateKD's rounds: exp(c gain) among the
    features not yet chosen, the gains recomputed by brute force after each choice."""
    law = {}
    for tup in itertools.permutations(range(codes.shape[1]), k):
        p = 1.0
        for step, a in enumerate(tup):
            chosen = list(tup[:step])
            left = [b for b in range(codes.shape[1]) if b not in chosen]
            base = _separated_pairs(codes, y, chosen)
            w = {b: math.exp(c * (_separated_pairs(codes, y, chosen + [b]) - base)) for b in left}
            p *= w[a] / sum(w.values())
        law[tup] = p
    return law


def test_private_kd_law_is_the_greedy_exponential_mechanism():
    # gains at S = {} by hand: feature 0 separates all 4 different-label pairs, features 1
    # and 3 two each, feature 2 none
    codes = bin_codes(TINY_X, np.zeros(4), np.ones(4), 2)
    assert [_separated_pairs(codes, TINY_Y, [a]) for a in range(4)] == [4, 2, 0, 2]
    k, epsilon, n_fits = 2, 4.0, 1500
    kd = PrivateKD(k=k, epsilon=epsilon, bounds=(0.0, 1.0), classes=[0, 1], n_bins=2,
                   random_state=np.random.default_rng(7))  # insecure-ok: test seed
    counts = {}
    for _ in range(n_fits):
        tup = tuple(kd.fit(TINY_X, TINY_Y).selected_.tolist())
        counts[tup] = counts.get(tup, 0) + 1
    sensitivity = 3.0 + 2.0**-52 * 16           # n - 1 + 2**-52 n**2, n = 4
    law = _greedy_law(codes, TINY_Y, k, (epsilon / k) / (2 * sensitivity))
    observed = [counts.get(t, 0) for t in law]
    assert sum(observed) == n_fits
    assert chisquare_pvalue(observed, list(law.values())) > ALPHA
    wrong = _greedy_law(codes, TINY_Y, k, (epsilon / k) / sensitivity)   # without the factor 2
    assert chisquare_pvalue(observed, list(wrong.values())) < ALPHA


def test_private_kd_finds_informative_features_and_charges_once():
    rng = np.random.default_rng(0)  # insecure-ok: test data
    n = 5000
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 4, (n, 12)).astype(float)
    X[:, 5] = np.where(rng.random(n) < 0.9, y, 3)
    X[:, 9] = np.where(rng.random(n) < 0.9, y + 2, 0)
    acc = dpcore.Accountant(epsilon=5.0)
    kd = PrivateKD(k=2, epsilon=1.0, bounds=(-0.5, 3.5), classes=[0, 1], n_bins=4,
                   random_state=0, accountant=acc).fit(X, y)
    # the first round takes an informative feature; the second need not (after one of them,
    # the other separates no more of the remaining pairs than a random feature does)
    assert kd.selected_[0] in (5, 9) and len(set(kd.selected_.tolist())) == 2
    assert kd.transform(X).shape == (n, 2)
    assert len(acc.history) == 1 and acc.spent[0] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        PrivateKD(k=13, bounds=(0, 1), accountant=acc).fit(X, y)
    with pytest.raises(ValueError):
        PrivateKD(k=2, bounds=None, accountant=acc).fit(X, y)
    assert len(acc.history) == 1
    assert clone(kd).accountant is acc


# scikit-learn's estimator checks run in tests/test_learn_estimator_checks.py.
