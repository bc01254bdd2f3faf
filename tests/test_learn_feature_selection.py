"""Private feature selection (dpcore.learn._feature_selection): the exact law of the selection
on a hand-computable case, one charge, validation, scikit-learn's estimator contract."""
import itertools
import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import dpcore  # noqa: E402
from dpcore.learn._feature_selection import SelectKBest, bin_codes, majority_scores  # noqa: E402
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


@pytest.mark.parametrize("k, epsilon", [(1, 1.0), (2, 1.0)])
def test_selection_law_is_the_exponential_mechanism(k, epsilon):
    n_fits = 1500
    sel = SelectKBest(k=k, epsilon=epsilon, bounds=(0.0, 1.0), classes=[0, 1], n_bins=2,
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

    assert re.search(r"^Privacy\n-------\n", inspect.getdoc(SelectKBest), flags=re.MULTILINE)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------------------------------------
# scikit-learn's estimator contract (the entry for tests/test_learn_estimator_checks.py)

_NO_COUNT = "the error does not quote the (possibly private) sample count"
EXPECTED_FAILURES = {
    "SelectKBest": {"check_estimators_empty_data_messages": _NO_COUNT},
}


@parametrize_with_checks([SelectKBest(k=1, epsilon=1e9, bounds=(-100.0, 100.0),
                                      random_state=0)],
                         expected_failed_checks=lambda e: EXPECTED_FAILURES.get(
                             type(e).__name__, {}))
def test_sklearn_compatible(estimator, check):
    check(estimator)
