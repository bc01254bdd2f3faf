"""Private decision trees and random decision forests: noise law of the leaf counts, law of the
split selection, kernels against naive twins, budget, errors, scikit-learn contract."""
import pickle

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import dpcore  # noqa: E402
from _gof import ALPHA, chisquare_pvalue, integer_pvalue  # noqa: E402
from dpcore import _tree  # noqa: E402
from dpcore.learn._tree import (  # noqa: E402
    DecisionTreeClassifier,
    RandomForestClassifier,
    bin_threshold,
    split_sensitivity,
    split_utility,
)
from dpcore.selection import ExponentialMechanism  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning")


def dlap_pmf(t):
    q = np.exp(-1.0 / t)
    return lambda z: (1 - q) / (1 + q) * q ** abs(z)


# ------------------------------------------------------------------------------------------------
# Kernels against naive twins

def test_bin_codes_agree_with_thresholds():
    # the bin of x is the number of the thresholds t_j <= x, so fitting (bins) and predicting
    # (x >= t_j) put every record on the same side of every split
    rng = np.random.default_rng(0)  # insecure-ok: test data
    lower, upper = np.array([-1.0, 0.0, 1e-3]), np.array([1.0, 7.0, 2e-3])
    B = 13
    inv = B / (upper - lower)
    grid = np.array([[bin_threshold(lower[f], inv[f], j) for j in range(1, B)]
                     for f in range(3)])
    assert np.allclose(grid, lower[:, None] + (upper - lower)[:, None] * np.arange(1, B) / B)
    X = rng.uniform(lower - 0.3 * (upper - lower), upper + 0.3 * (upper - lower), (5000, 3))
    for f in range(3):   # values on, just below and just above every threshold
        X[:B - 1, f] = grid[f]
        X[B - 1:2 * (B - 1), f] = np.nextafter(grid[f], -np.inf)
        X[2 * (B - 1):3 * (B - 1), f] = np.nextafter(grid[f], np.inf)
    y = rng.integers(0, 3, len(X)).astype(np.int32)
    ref = np.stack([np.searchsorted(grid[f], X[:, f], side="right") for f in range(3)], axis=1)
    # the root's (feature, class, bin) counts, made while binning
    naive = np.zeros((3, 3, B), dtype=np.int64)
    for f in range(3):
        np.add.at(naive[f], (y, ref[:, f]), 1)
    # the level above: nodes 0 and 1 split (feature 0 at bin 5, feature 2 at bin 7) into
    # nodes 0, 1 and 2, 3 of this level; node 2 is a leaf; some records settled (-1) before
    above = rng.integers(-1, 3, len(X)).astype(np.int32)
    feature, split, left = (np.array(a, dtype=np.int32) for a in ([0, 2, -1], [5, 7, 0],
                                                                   [0, 2, -1]))
    node = np.full(len(X), -1, dtype=np.int32)
    for u in (0, 1):
        at = above == u
        node[at] = left[u] + (ref[at, feature[u]] >= split[u])
    row = np.array([1, -1, 0, -1], dtype=np.int32)        # count nodes 2 and 0, in this order
    for dtype in (np.uint8, np.uint16):
        codes = np.empty(X.shape, dtype=dtype)   # a record per row
        root = np.zeros((3, 3, B), dtype=np.int64)
        assert _tree.bin_codes(X, lower, inv, np.full(3, B - 1.0), y, codes, root) == 0
        assert np.array_equal(codes, ref) and np.array_equal(root, naive)
        counts = np.zeros((2, 3, 3, B), dtype=np.int64)
        moved = above.copy()
        _tree.level_counts(codes, y, moved, feature, split, left, row, counts)
        assert np.array_equal(moved, node)
        for v in (0, 2):
            expected = np.zeros((3, 3, B), dtype=np.int64)
            at = node == v
            for f in range(3):
                np.add.at(expected[f], (y[at], ref[at, f]), 1)
            assert np.array_equal(counts[row[v]], expected)
    # the binning pass reports the values that are not finite (the fit rejects them)
    for bad in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[7, 1] = bad
        root = np.zeros((3, 3, B), dtype=np.int64)
        assert _tree.bin_codes(Xb, lower, inv, np.full(3, B - 1.0), y, codes, root) == 1


@pytest.mark.parametrize("lower, upper, B", [(-1e300, 1e300, 7), (0.0, 5e-324 * 2**20, 3),
                                             (1e15, 1e15 + 64, 64), (-3.0, -2.9, 1000)])
def test_bin_threshold_is_the_first_double_of_the_bin(lower, upper, B):
    inv = B / (upper - lower)
    lo, iv = np.array([lower]), np.array([inv])
    for j in range(1, B):
        t = bin_threshold(lower, inv, j)
        x = np.array([[np.nextafter(t, -np.inf)], [t]])
        codes = np.empty((2, 1), dtype=np.uint16)
        root = np.zeros((1, 1, B), dtype=np.int64)
        _tree.bin_codes(x, lo, iv, np.array([B - 1.0]), np.zeros(2, dtype=np.int32), codes, root)
        assert codes[0, 0] < j <= codes[1, 0]


def test_per_feature_bins_and_categories():
    # feature 0: a category coded 0..2 (bounds (0, 3), 3 bins, one per category); feature 1:
    # continuous with 16 bins. Splits only at the features' own thresholds.
    rng = np.random.default_rng(10)  # insecure-ok: test data
    cat = rng.integers(0, 3, 3000)
    x1 = rng.uniform(0, 1, 3000)
    X = np.c_[cat, x1]
    y = (((cat == 2) & (x1 > 0.3)) | (x1 > 0.8)).astype(int)
    bounds = ([0.0, 0.0], [3.0, 1.0])
    est = DecisionTreeClassifier(epsilon=50.0, bounds=bounds, classes=[0, 1], n_bins=[3, 16],
                                 max_depth=3, random_state=0).fit(X, y)
    t = est.tree_
    allowed = {0: {1.0, 2.0}, 1: {bin_threshold(0.0, 16.0, j) for j in range(1, 16)}}
    for f, thr in zip(t.feature, t.threshold):
        if f >= 0:
            assert thr in allowed[f]
    assert est.score(X, y) > 0.95
    with pytest.raises(ValueError, match="n_bins"):
        DecisionTreeClassifier(bounds=bounds, classes=[0, 1], n_bins=[3, 16, 4]).fit(X, y)
    with pytest.raises(ValueError, match="n_bins"):
        DecisionTreeClassifier(bounds=bounds, classes=[0, 1], n_bins=[3, 1]).fit(X, y)


def naive_leaf(trees, x, root):
    v = root
    while trees.feature[v] >= 0:
        v = trees.right[v] if x[trees.feature[v]] >= trees.threshold[v] else trees.left[v]
    return v


def test_forest_kernels_match_naive_walk():
    rng = np.random.default_rng(1)  # insecure-ok: test data
    X = rng.uniform(0, 1, (300, 4))
    y = rng.integers(0, 3, 300)
    f = RandomForestClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1, 2], n_estimators=4,
                               max_depth=3, random_state=0).fit(X, y)
    t = f.tree_
    ref = np.array([[naive_leaf(t, x, r) for r in t.roots] for x in X])
    assert np.array_equal(t.apply(X), ref)
    counts = np.zeros((t.n_leaves, 3), dtype=np.int64)
    _tree.forest_counts(X, y.astype(np.int32), t.feature, t.threshold, t.roots.size, t.depth,
                        counts)
    naive = np.zeros_like(counts)
    np.add.at(naive, (t.slot[ref].ravel(), np.repeat(y, 4)), 1)
    assert np.array_equal(counts, naive)
    assert np.allclose(t.vote(X), t.values[t.slot[ref]].sum(axis=1))


def test_tree_level_counts_and_routing_match_naive():
    rng = np.random.default_rng(2)  # insecure-ok: test data
    X = rng.uniform(0, 1, (2000, 3))
    y = (X[:, 0] > 0.4).astype(int) ^ (X[:, 2] > 0.7)
    tree = DecisionTreeClassifier(epsilon=1e6, bounds=(0, 1), classes=[0, 1], max_depth=4,
                                  random_state=0).fit(X, y)
    t = tree.tree_
    ref = np.array([naive_leaf(t, x, 0) for x in X])
    assert np.array_equal(t.apply(X)[:, 0], ref)
    assert np.array_equal(tree.apply(X), t.slot[ref])
    # at a huge epsilon the noisy leaf counts are the exact counts of the records routed there
    exact = np.zeros((t.n_leaves, 2))
    np.add.at(exact, (t.slot[ref], y), 1)
    assert np.abs(t.values - exact).max() <= 1
    assert tree.score(X, y) > 0.97


# ------------------------------------------------------------------------------------------------
# Laws

def test_tree_leaf_noise_law():
    # max_depth=0: the root is the leaf, its class counts get discrete Laplace noise of scale
    # 1/epsilon (the whole budget: the last level's).
    X = np.zeros((40, 1))
    y = np.r_[np.zeros(25, int), np.ones(15, int)]
    eps = 1.5
    gen = np.random.default_rng(3)  # insecure-ok: test seeds
    z = np.array([DecisionTreeClassifier(epsilon=eps, bounds=(-1, 1), classes=[0, 1],
                                         max_depth=0, random_state=gen).fit(X, y).tree_.values[0]
                  for _ in range(2000)]) - [25, 15]
    z = z.ravel().astype(int)
    support = np.arange(-8, 9)
    assert integer_pvalue(z, dlap_pmf(1 / eps), support) > ALPHA
    assert integer_pvalue(z, dlap_pmf(1.3 / eps), support) < ALPHA   # power


def test_forest_leaf_noise_law():
    # every leaf count of every tree: exact count + discrete Laplace of scale n_trees / epsilon
    rng = np.random.default_rng(4)  # insecure-ok: test data
    X = rng.uniform(0, 1, (60, 2))
    y = rng.integers(0, 2, 60)
    gen = np.random.default_rng(5)  # insecure-ok: test seeds
    eps, trees = 1.5, 3
    z = []
    for _ in range(300):
        f = RandomForestClassifier(epsilon=eps, bounds=(0, 1), classes=[0, 1], n_estimators=trees,
                                   max_depth=2, random_state=gen).fit(X, y)
        exact = np.zeros(f.tree_.values.shape)
        np.add.at(exact, (f.apply(X).ravel(), np.repeat(y, trees)), 1)
        z.append(f.tree_.values - exact)
    z = np.concatenate(z).ravel().astype(int)
    support = np.arange(-10, 11)
    assert integer_pvalue(z, dlap_pmf(trees / eps), support) > ALPHA
    assert integer_pvalue(z, dlap_pmf(1.2 * trees / eps), support) < ALPHA   # power


def split_case():
    """200 records, 2 features, one threshold each (0.5). Feature 0 separates the classes
    (max-operator utility 100 + 100 = 200); feature 1 leaves one class-1 record on the left
    (left max 100, right max 99: 199)."""
    X = np.zeros((200, 2))
    y = np.r_[np.zeros(100, int), np.ones(100, int)]
    X[:, 0] = np.where(y == 0, 0.25, 0.75)
    X[:, 1] = np.where(y == 0, 0.25, 0.75)
    X[100, 1] = 0.25
    return X, y


def test_split_selection_law_max_operator():
    X, y = split_case()
    left = np.array([[100, 0], [100, 1]])
    right = np.array([[0, 100], [0, 99]])
    u = split_utility(left, right, "max")
    assert u.tolist() == [200.0, 199.0]
    eps = 4.0   # max_depth=1: two levels, epsilon / 4 = 1 for the split
    c = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=eps / 4, monotonic=True).scale
    assert c == 1.0
    w = np.exp(c * (u - u.max()))
    p = w / w.sum()
    gen = np.random.default_rng(6)  # insecure-ok: test seeds
    picks = np.array([DecisionTreeClassifier(epsilon=eps, bounds=(0, 1), classes=[0, 1],
                                             max_depth=1, n_bins=2, criterion="max",
                                             random_state=gen).fit(X, y).tree_.feature[0]
                      for _ in range(3000)])
    assert set(picks.tolist()) <= {0, 1}   # the root's noisy count (~200) never stops it
    observed = np.bincount(picks, minlength=2)
    assert chisquare_pvalue(observed, p) > ALPHA
    w_half = np.exp(c / 2 * (u - u.max()))   # power: the non-monotone calibration's law
    assert chisquare_pvalue(observed, w_half / w_half.sum()) < ALPHA


def test_split_selection_law_gini():
    X, y = split_case()
    u = split_utility(np.array([[100, 0], [100, 1]]), np.array([[0, 100], [0, 99]]), "gini")
    assert u[0] == 200.0 and u[1] == pytest.approx(100**2 / 101 + 1 / 101 + 99)
    eps = 4.0
    sens, mono = split_sensitivity("gini", 2)
    c = ExponentialMechanism.calibrate(sensitivity=sens, epsilon=eps / 4, monotonic=mono).scale
    p = np.exp(c * (u - u.max()))
    p /= p.sum()
    gen = np.random.default_rng(7)  # insecure-ok: test seeds
    picks = np.array([DecisionTreeClassifier(epsilon=eps, bounds=(0, 1), classes=[0, 1],
                                             max_depth=1, n_bins=2, criterion="gini",
                                             random_state=gen).fit(X, y).tree_.feature[0]
                      for _ in range(3000)])
    assert chisquare_pvalue(np.bincount(picks, minlength=2), p) > ALPHA


@pytest.mark.parametrize("criterion", ["gini", "max"])
def test_split_utility_sensitivity_by_enumeration(criterion):
    # every (left, right) table with counts <= 6 and 3 classes, every record added anywhere
    rng = np.random.default_rng(8)  # insecure-ok: test data
    sens, monotonic = split_sensitivity(criterion, 3)
    for _ in range(3000):
        left, right = rng.integers(0, 7, (2, 3))
        base = split_utility(left, right, criterion)
        for side in range(2):
            for c in range(3):
                tables = [left.copy(), right.copy()]
                tables[side][c] += 1
                change = split_utility(tables[0], tables[1], criterion) - base
                assert abs(change) <= sens
                if monotonic:
                    assert change >= 0


# ------------------------------------------------------------------------------------------------
# Budget, errors, privacy of the fitted state

ESTIMATOR_CLASSES = [DecisionTreeClassifier, RandomForestClassifier]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    # bounds taken as public in these tests: the data's min/max widened by 10%
    lower = np.floor(X.min(axis=0) * 0.9 * 100) / 100
    upper = np.ceil(X.max(axis=0) * 1.1 * 100) / 100
    return X, y, (lower, upper)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_accountant_charged_once(cls, cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(1.0)
    cls(epsilon=0.7, bounds=bounds, classes=[0, 1], random_state=0, accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(0.7) and len(acc.history) == 1
    with pytest.raises(dpcore.BudgetExceeded):
        cls(epsilon=0.7, bounds=bounds, classes=[0, 1], accountant=acc).fit(X, y)
    assert len(acc.history) == 1


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
@pytest.mark.parametrize("params, match", [
    ({"bounds": None}, "bounds is required"),
    ({"classes": [0, 5]}, "outside classes"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"max_depth": 25}, "max_depth"),
    ({"max_depth": 1.5}, "max_depth"),
    ({"epsilon": 1e-14}, "epsilon"),
])
def test_bad_arguments_charge_nothing(cls, params, match, cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(10.0)
    kw = {"bounds": bounds, "classes": [0, 1], "accountant": acc, **params}
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**kw).fit(X, y)
    assert acc.history == [] and acc.spent[0] == 0.0


@pytest.mark.parametrize("params, match", [
    ({"n_bins": 1}, "n_bins"), ({"criterion": "entropy"}, "criterion"),
    ({"max_depth": 20, "n_bins": 512}, "count table"),
])
def test_tree_specific_errors(params, match, cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(10.0)
    with pytest.raises(ValueError, match=match):
        DecisionTreeClassifier(bounds=bounds, classes=[0, 1], accountant=acc, **params).fit(X, y)
    assert acc.history == []


@pytest.mark.parametrize("params, match", [
    ({"n_estimators": 0}, "n_estimators"), ({"voting": "majority"}, "voting"),
    ({"n_estimators": 1000, "max_depth": 20}, "2\\*\\*24"),
])
def test_forest_specific_errors(params, match, cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(10.0)
    with pytest.raises(ValueError, match=match):
        RandomForestClassifier(bounds=bounds, classes=[0, 1], accountant=acc, **params).fit(X, y)
    assert acc.history == []


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_errors_quote_no_label_or_count(cls):
    X = np.zeros((37, 2))
    y = np.full(37, 123457)
    with pytest.raises(ValueError) as info:
        cls(bounds=(0, 1), classes=[0, 1]).fit(X, y)
    assert "123457" not in str(info.value) and "37" not in str(info.value)
    with pytest.raises(ValueError) as info:
        cls(bounds=(0, 1), classes=[0, 1]).fit(X, y[:36])
    assert "37" not in str(info.value) and "36" not in str(info.value)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_fitted_state_is_released_output_only(cls, cancer):
    X, y, bounds = cancer
    est = cls(bounds=bounds, classes=[0, 1], random_state=0).fit(X, y)
    fitted = {k for k in vars(est) if k.endswith("_")}
    assert fitted == {"classes_", "tree_", "n_features_in_"}
    t = est.tree_
    exact = np.zeros(t.values.shape)
    np.add.at(exact, (est.apply(X).reshape(len(X), -1).ravel(),
                      np.repeat(y, t.roots.size)), 1)
    assert np.any(t.values != exact)   # the leaf counts are noisy


def test_forest_structure_does_not_depend_on_the_data():
    rng = np.random.default_rng(9)  # insecure-ok: test data
    a = RandomForestClassifier(bounds=(0, 1), classes=[0, 1], random_state=3).fit(
        rng.uniform(0, 1, (50, 3)), rng.integers(0, 2, 50)).tree_
    b = RandomForestClassifier(bounds=(0, 1), classes=[0, 1], random_state=3).fit(
        rng.uniform(0, 1, (500, 3)), np.ones(500, int)).tree_
    for name in ("feature", "threshold", "left", "right", "slot", "roots"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_clone_shares_accountant_and_generator(cls):
    acc = dpcore.Accountant(5.0)
    gen = np.random.default_rng(0)  # insecure-ok: test seeds
    est = cls(bounds=(0, 1), classes=[0, 1], random_state=gen, accountant=acc)
    twin = clone(est)
    assert twin.accountant is acc and twin.random_state is gen


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_probabilities_and_pickle(cls, cancer):
    X, y, bounds = cancer
    est = cls(bounds=bounds, classes=[0, 1], random_state=1).fit(X, y)
    p = est.predict_proba(X[:20])
    assert np.allclose(p.sum(axis=1), 1)
    assert np.array_equal(est.classes_[np.argmax(p, axis=1)], est.predict(X[:20]))
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict_proba(X[:20]), p)


def test_forest_voting_rules(cancer):
    # the two rules are post-processing of the same release: summed counts, or averaged
    # normalised leaf distributions
    X, y, bounds = cancer
    kw = {"bounds": bounds, "classes": [0, 1], "random_state": 2}
    proba = RandomForestClassifier(voting="proba", **kw).fit(X, y)
    counts = RandomForestClassifier(voting="counts", **kw).fit(X, y)
    assert np.array_equal(proba.tree_.values, counts.tree_.values)
    leaves = proba.apply(X[:30])
    summed = proba.tree_.values[leaves].sum(axis=1)
    assert np.array_equal(counts.predict(X[:30]), np.argmax(np.maximum(summed, 0), axis=1))
    clipped = np.maximum(proba.tree_.values[leaves], 0)
    total = clipped.sum(axis=2, keepdims=True)
    dist = np.where(total > 0, clipped / np.where(total > 0, total, 1), 0.5).mean(axis=1)
    assert np.allclose(proba.predict_proba(X[:30]), dist)


def test_secure_generator_by_default(cancer):
    X, y, bounds = cancer
    a = DecisionTreeClassifier(bounds=bounds, classes=[0, 1]).fit(X, y).tree_.values
    b = DecisionTreeClassifier(bounds=bounds, classes=[0, 1]).fit(X, y).tree_.values
    assert a.shape != b.shape or np.any(a != b)


# ------------------------------------------------------------------------------------------------
# Accuracy (issue 18): breast cancer, 70/30 split, default hyper-parameters

@pytest.mark.parametrize("cls, floor", [(DecisionTreeClassifier, 0.85),
                                        (RandomForestClassifier, 0.85)])
def test_breast_cancer_accuracy(cls, floor, cancer):
    X, y, bounds = cancer
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    acc = [cls(epsilon=2.0, bounds=bounds, classes=[0, 1], random_state=s).fit(Xtr, ytr)
           .score(Xte, yte) for s in range(20)]
    assert np.median(acc) >= floor


@pytest.mark.slow
@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_accuracy_grows_with_epsilon(cls, cancer):
    X, y, bounds = cancer
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    med = {e: np.median([cls(epsilon=e, bounds=bounds, classes=[0, 1], random_state=s)
                         .fit(Xtr, ytr).score(Xte, yte) for s in range(20)])
           for e in (0.05, 50.0)}
    assert med[50.0] > med[0.05] and med[50.0] > 0.9


# ------------------------------------------------------------------------------------------------
# scikit-learn contract and docstrings

# scikit-learn's estimator checks for both run in tests/test_learn_estimator_checks.py.


def test_docstring_examples():
    import doctest

    import dpcore.learn._tree as mod
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_privacy_section(cls):
    import inspect
    import re

    assert re.search(r"^Privacy\n-------\n", inspect.getdoc(cls), flags=re.MULTILINE)
