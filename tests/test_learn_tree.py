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
from _gof import ALPHA, chisquare_pvalue, dlap_pmf, integer_pvalue  # noqa: E402
from dpcore import _tree  # noqa: E402
from dpcore.learn._tree import (  # noqa: E402
    DecisionTreeClassifier,
    RandomForestClassifier,
    SingleLeafWarning,
    bin_threshold,
    forest_defaults,
    permute_and_flip_labels,
    random_forest_defaults,
    split_sensitivity,
    split_utility,
    tree_defaults,
)
from dpcore.learn._tree import _base_offsets  # noqa: E402
from dpcore.selection import ExponentialMechanism  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning"),
              pytest.mark.filterwarnings("ignore::dpcore.learn._tree.SingleLeafWarning")]


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
                               max_depth=3, algorithm="random", random_state=0).fit(X, y)
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
    # at a huge epsilon every leaf's label is the majority class of the records routed there
    exact = np.zeros((t.n_leaves, 2))
    np.add.at(exact, (t.slot[ref], y), 1)
    strict = exact.max(axis=1) > exact.min(axis=1)
    assert strict.sum() >= 8
    assert np.array_equal(np.argmax(t.values[strict], axis=1), np.argmax(exact[strict], axis=1))
    assert np.array_equal(t.values.sum(axis=1), np.ones(t.n_leaves))   # one-hot labels
    assert tree.score(X, y) > 0.97


# ------------------------------------------------------------------------------------------------
# Laws

def pf_law(counts, eps):
    """Permute-and-flip's exact law: the average over the k! orders of the chance that each
    class is the first accepted (class c accepted with probability exp(-eps (max - c)))."""
    import itertools

    counts = np.asarray(counts)
    accept = np.exp(-eps * (counts.max() - counts))
    p = np.zeros(counts.size)
    orders = list(itertools.permutations(range(counts.size)))
    for order in orders:
        reach = 1.0
        for c in order:
            p[c] += reach * accept[c]
            reach *= 1.0 - accept[c]
    return p / len(orders)


def test_permute_and_flip_law():
    # chi-square against the exact law (alpha = ALPHA), then power: the exponential
    # mechanism's law at the same epsilon (monotone scale) differs and must be rejected
    counts = np.array([[6, 4, 0, 6]])
    eps = 0.5
    gen = np.random.default_rng(11)  # insecure-ok: test seeds
    labels = np.array([permute_and_flip_labels(counts, eps, gen)[0] for _ in range(20000)])
    observed = np.bincount(labels, minlength=4)
    assert chisquare_pvalue(observed, pf_law(counts[0], eps)) > ALPHA
    em = np.exp(eps * (counts[0] - counts[0].max()))
    assert chisquare_pvalue(observed, em / em.sum()) < ALPHA


def test_permute_and_flip_huge_gaps_and_tiny_epsilon():
    gen = np.random.default_rng(12)  # insecure-ok: test seeds
    # a gap of 2**40 records at epsilon 1: the top class, always (exp(-2**40) is below 2**-1000)
    rows = np.array([[0, 2**40], [2**40, 0]])
    assert permute_and_flip_labels(rows, 1.0, gen).tolist() == [1, 0]
    # epsilon 1e-20: every class accepted with probability >= 1 - 5e-19: all equally likely
    labels = permute_and_flip_labels(np.tile([[50, 0, 0]], (3000, 1)), 1e-20, gen)
    assert chisquare_pvalue(np.bincount(labels, minlength=3), np.full(3, 1 / 3)) > ALPHA


def test_tree_leaf_label_law():
    # max_depth=0: the root is the leaf; its label is drawn by permute-and-flip on the class
    # counts at the whole epsilon
    X = np.zeros((40, 1))
    y = np.r_[np.zeros(25, int), np.ones(12, int), np.full(3, 2)]
    eps = 0.2
    gen = np.random.default_rng(3)  # insecure-ok: test seeds
    labels = np.array([np.argmax(DecisionTreeClassifier(
        epsilon=eps, bounds=(-1, 1), classes=[0, 1, 2], max_depth=0, random_state=gen)
        .fit(X, y).tree_.values[0]) for _ in range(4000)])
    observed = np.bincount(labels, minlength=3)
    assert chisquare_pvalue(observed, pf_law([25, 12, 3], eps)) > ALPHA
    assert chisquare_pvalue(observed, pf_law([25, 12, 3], 0.15)) < ALPHA   # power


def test_tree_budget_split_between_levels_and_leaves():
    # max_depth=2, split_share=0.5, epsilon=0.4: each level's split at 0.1, the leaves at the
    # rest (0.2 less the rounding of the two split epsilons); the leaf law is checked on the
    # leaf that holds every record (one feature, all records at 0: every split sends them all
    # left or all right). Power: the whole budget (0.4) or half the leaf's (0.1) at the leaf.
    X = np.zeros((30, 1))
    y = np.r_[np.zeros(18, int), np.ones(12, int)]
    gen = np.random.default_rng(13)  # insecure-ok: test seeds
    picked = []
    for _ in range(3000):
        t = DecisionTreeClassifier(epsilon=0.4, bounds=(-1, 1), classes=[0, 1], max_depth=2,
                                   n_bins=4, split_share=0.5, random_state=gen).fit(X, y).tree_
        leaf = t.slot[t.apply(X[:1])[0, 0]]
        picked.append(np.argmax(t.values[leaf]))
    observed = np.bincount(picked, minlength=2)
    assert chisquare_pvalue(observed, pf_law([18, 12], 0.2)) > ALPHA
    assert chisquare_pvalue(observed, pf_law([18, 12], 0.4)) < ALPHA
    assert chisquare_pvalue(observed, pf_law([18, 12], 0.1)) < ALPHA


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
                                   algorithm="random",
                                   max_depth=2, random_state=gen).fit(X, y)
        exact = np.zeros(f.tree_.values.shape)
        np.add.at(exact, (f.apply(X).ravel(), np.repeat(y, trees)), 1)
        z.append(f.tree_.values - exact)
    z = np.concatenate(z).ravel().astype(int)
    support = np.arange(-10, 11)
    assert integer_pvalue(z, dlap_pmf(trees / eps), support) > ALPHA
    assert integer_pvalue(z, dlap_pmf(1.2 * trees / eps), support) < ALPHA   # power


def test_partition_forest_label_law():
    # max_depth=0, 2 trees: each record joins tree 0 or 1 with probability 1/2 (independently),
    # then each tree's single leaf draws its label by permute-and-flip on its own records at the
    # whole epsilon. The exact joint law of the two labels sums over the 2**7 assignments.
    import itertools

    X = np.zeros((7, 1))
    y = np.array([0, 0, 0, 0, 0, 1, 1])
    eps = 0.7
    law = np.zeros((2, 2))
    for parts in itertools.product((0, 1), repeat=y.size):
        parts = np.array(parts)
        leaf = [pf_law(np.bincount(y[parts == t], minlength=2), eps) for t in (0, 1)]
        law += np.outer(leaf[0], leaf[1]) / 2**y.size
    gen = np.random.default_rng(21)  # insecure-ok: test seeds
    observed = np.zeros(4, dtype=np.int64)
    for _ in range(3000):
        f = RandomForestClassifier(epsilon=eps, bounds=(-1, 1), classes=[0, 1], n_estimators=2,
                                   max_depth=0, random_state=gen).fit(X, y)
        a, b = np.argmax(f.tree_.values, axis=1)
        observed[2 * a + b] += 1
    assert chisquare_pvalue(observed, law.ravel()) > ALPHA
    # power: every record in both trees (no partition) gives another law
    both = np.outer(pf_law([5, 2], eps), pf_law([5, 2], eps)).ravel()
    assert chisquare_pvalue(observed, both) < ALPHA


def test_partition_forest_grows_every_tree_on_its_part():
    # at a huge epsilon each tree is the best tree of its own records: on a separable problem
    # every tree of the partition forest predicts well (a tree left without records would not)
    rng = np.random.default_rng(22)  # insecure-ok: test data
    X = rng.uniform(0, 1, (3000, 3))
    y = (X[:, 1] > 0.5).astype(int) + 2 * (X[:, 2] > 0.25)
    f = RandomForestClassifier(epsilon=1e9, bounds=(0, 1), classes=[0, 1, 2, 3], n_estimators=5,
                               max_depth=2, random_state=3).fit(X, y)
    t = f.tree_
    assert t.roots.tolist() == [0, 7, 14, 21, 28] and f.n_estimators_ == 5
    leaves = t.slot[t.apply(X)]                       # (n, 5)
    for tree in range(5):
        labels = np.argmax(t.values[leaves[:, tree]], axis=1)
        assert np.mean(labels == y) > 0.97
    assert f.score(X, y) > 0.97


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
    eps = 4.0   # max_depth=1, split_share=0.25: epsilon / 4 = 1 for the split
    c = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=eps / 4, monotonic=True).scale
    assert c == 1.0
    w = np.exp(c * (u - u.max()))
    p = w / w.sum()
    gen = np.random.default_rng(6)  # insecure-ok: test seeds
    picks = np.array([DecisionTreeClassifier(epsilon=eps, bounds=(0, 1), classes=[0, 1],
                                             max_depth=1, n_bins=2, criterion="max",
                                             split_share=0.25, random_state=gen)
                      .fit(X, y).tree_.feature[0] for _ in range(3000)])
    assert set(picks.tolist()) <= {0, 1}
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
                                             split_share=0.25, random_state=gen)
                                      .fit(X, y).tree_.feature[0]
                      for _ in range(3000)])
    assert chisquare_pvalue(np.bincount(picks, minlength=2), p) > ALPHA


def _check_root_split_scale(seed, scales, **params):
    """The root's feature over 3000 fits of split_case at epsilon 4 (root utilities 200 and
    199) fits the exponential mechanism's law at the first of ``scales`` (monotone) and not at
    the others (the power check)."""
    X, y = split_case()
    u = np.array([200.0, 199.0])
    gen = np.random.default_rng(seed)  # insecure-ok: test seeds
    picks = np.array([DecisionTreeClassifier(epsilon=4.0, bounds=(0, 1), classes=[0, 1],
                                             n_bins=2, random_state=gen, **params)
                      .fit(X, y).tree_.feature[0] for _ in range(3000)])
    observed = np.bincount(picks, minlength=2)
    for i, scale in enumerate(scales):
        w = np.exp(scale * (u - u.max()))
        assert (chisquare_pvalue(observed, w / w.sum()) > ALPHA) == (i == 0)


def test_split_levels_root_law_gets_the_whole_split_budget():
    # max_depth=2, split_levels=1, split_share=0.25, epsilon=4: the root's split alone looks at
    # the data, at epsilon * 0.25 / 1 = 1 (scale 1, monotone); power: the law of 1 / 2, which
    # a budget shared by both levels would give
    _check_root_split_scale(16, (1.0, 0.5), max_depth=2, split_share=0.25, split_levels=1)


@pytest.mark.slow
def test_split_levels_two_share_the_split_budget():
    # max_depth=3, split_levels=2 (the default's budget split below epsilon 0.2 with 2-3
    # classes and few features, or 4 classes or more), split_share=0.5, epsilon=4: the root's
    # split at epsilon * 0.5 / 2 = 1 (scale 1, monotone); power: the laws of 2 (the root
    # alone) and 2 / 3 (every level sharing)
    _check_root_split_scale(18, (1.0, 2.0, 2.0 / 3.0), max_depth=3, split_share=0.5,
                            split_levels=2)


def test_levels_below_split_levels_draw_from_the_base_measure():
    # y = [x0 high and x1 high], three features with one threshold each (every root split
    # scores 150). When the root cuts x0 or x1, its right child (mixed classes) has two
    # candidates, the other informative feature and x2. With split_levels=1 it draws them by
    # the public split law (one candidate each: 1/2 each, whatever the data); power:
    # split_levels=2 at the same budget
    # prefers the informative one
    X = np.array([[a, b, c] for a in (0.25, 0.75) for b in (0.25, 0.75) for c in (0.25, 0.75)]
                 * 25)
    y = ((X[:, 0] > 0.5) & (X[:, 1] > 0.5)).astype(int)
    gen = np.random.default_rng(17)  # insecure-ok: test seeds
    for levels, uniform in ((1, True), (2, False)):
        informative = cut = 0
        for _ in range(1500):
            t = DecisionTreeClassifier(epsilon=8.0, bounds=(0, 1), classes=[0, 1], max_depth=2,
                                       n_bins=2, split_share=0.5, split_levels=levels,
                                       random_state=gen).fit(X, y).tree_
            root = t.feature[0]
            child = t.feature[t.right[0]]
            assert child != root
            cut += root in (0, 1)
            informative += root in (0, 1) and child == 1 - root
        observed = np.array([informative, cut - informative])
        if uniform:
            assert chisquare_pvalue(observed, [0.5, 0.5]) > ALPHA
        else:
            assert chisquare_pvalue(observed, [0.5, 0.5]) < ALPHA


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
    ({"split_share": 1.0}, "split_share"), ({"split_share": -0.1}, "split_share"),
    ({"split_share": "half"}, "split_share"), ({"max_depth": "deep"}, "max_depth"),
    ({"epsilon": 1e-305, "max_depth": 3}, "epsilon"),
])
def test_tree_specific_errors(params, match, cancer):
    X, y, bounds = cancer
    acc = dpcore.Accountant(10.0)
    with pytest.raises((ValueError, TypeError), match=match):
        DecisionTreeClassifier(bounds=bounds, classes=[0, 1], accountant=acc, **params).fit(X, y)
    assert acc.history == []


@pytest.mark.parametrize("params, match", [
    ({"n_estimators": 0}, "n_estimators"), ({"voting": "majority"}, "voting"),
    ({"n_estimators": 1000, "max_depth": 20}, "2\\*\\*24"),
    ({"epsilon": 1e-14, "algorithm": "random"}, "epsilon"),
    ({"algorithm": "bagging"}, "algorithm"), ({"n_bins": 1}, "n_bins"),
    ({"split_share": 1.0}, "split_share"), ({"criterion": "entropy"}, "criterion"),
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
    resolved = {"max_depth_", "n_bins_", "split_share_", "split_levels_"}   # public: "auto"
    if cls is RandomForestClassifier:
        resolved.add("n_estimators_")
    # n_records_noisy_: the released record count (None here: epsilon 1 draws none)
    assert fitted == {"classes_", "tree_", "n_features_in_", "n_records_noisy_"} | resolved
    assert est.n_records_noisy_ is None
    t = est.tree_
    # released labels only, one per leaf (the forest's trees too, by default)
    assert np.array_equal(np.sort(t.values, axis=1), np.tile([0.0, 1.0], (t.n_leaves, 1)))
    if cls is RandomForestClassifier:   # random trees: the leaf counts are noisy
        est = cls(bounds=bounds, classes=[0, 1], algorithm="random", random_state=0).fit(X, y)
        t = est.tree_
        exact = np.zeros(t.values.shape)
        np.add.at(exact, (est.apply(X).reshape(len(X), -1).ravel(),
                          np.repeat(y, t.roots.size)), 1)
        assert np.any(t.values != exact)
        assert est.n_bins_ is None and est.split_share_ is None


def test_forest_structure_does_not_depend_on_the_data():
    rng = np.random.default_rng(9)  # insecure-ok: test data
    a = RandomForestClassifier(bounds=(0, 1), classes=[0, 1], algorithm="random",
                               random_state=3).fit(
        rng.uniform(0, 1, (50, 3)), rng.integers(0, 2, 50)).tree_
    b = RandomForestClassifier(bounds=(0, 1), classes=[0, 1], algorithm="random",
                               random_state=3).fit(
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
    kw = {"bounds": bounds, "classes": [0, 1], "algorithm": "random", "random_state": 2}
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
    # at a small epsilon two fits almost surely differ (the splits and labels are near uniform
    # draws: 2**-8 chance that even the 8 labels of a depth-3 tree agree)
    a, b = (DecisionTreeClassifier(epsilon=0.05, bounds=bounds, classes=[0, 1]).fit(X, y).tree_
            for _ in range(2))
    assert np.any(a.threshold != b.threshold) or np.any(a.values != b.values)


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


# ------------------------------------------------------------------------------------------------
# Defaults from public inputs, random splits, the single-leaf warning (issue 28 item 3)

def test_defaults_read_public_inputs_only():
    import inspect

    assert list(inspect.signature(tree_defaults).parameters) == ["epsilon", "n_classes",
                                                                 "n_features"]
    assert list(inspect.signature(forest_defaults).parameters) == ["epsilon", "n_classes",
                                                                   "n_features"]
    assert list(inspect.signature(random_forest_defaults).parameters) == ["epsilon"]
    assert tree_defaults(0.1, 3) == tree_defaults(0.19, 2, 19) == (4, 32, 0.2, 2)
    assert tree_defaults(0.1, 3, 20) == tree_defaults(0.19, 2, 64) == (4, 32, 0.5, 1)
    assert tree_defaults(0.1, 4) == tree_defaults(0.19, 10, 64) == (6, 32, 0.3, 2)
    assert [tree_defaults(e, 3)[0] for e in (0.2, 0.5, 1, 2, 5, 100)] == [2, 2, 2, 3, 4, 6]
    # at least one leaf per class from 0.2 on
    assert [tree_defaults(e, 10)[0] for e in (0.2, 0.5, 1, 2, 5)] == [4, 4, 4, 5, 6]
    assert [tree_defaults(e, 5)[0] for e in (0.25, 0.5, 1, 2)] == [3, 3, 3, 4]
    for e in (0.2, 0.5, 1, 2, 5, 100):   # from 0.2 on every level looks at the data
        depth, _, _, levels = tree_defaults(e, 3)
        assert levels == depth and tree_defaults(e, 3, 64) == tree_defaults(e, 3, 4)
    for e, k, d in ((0.1, 3, None), (0.1, 3, 30), (1, 2, 30), (5, 10, 4)):
        assert forest_defaults(e, k, d) == (1,) + tree_defaults(e, k, d)
    assert [random_forest_defaults(e) for e in (0.1, 1, 2, 5, 10, 20, 50, 1e6)] == [
        (5, 3), (10, 5), (14, 5), (22, 5), (25, 6), (25, 7), (25, 8), (25, 8)]
    # the same public inputs give the same resolved parameters, whatever the number of records
    rng = np.random.default_rng(14)  # insecure-ok: test data
    for cls in ESTIMATOR_CLASSES:
        fitted = [cls(epsilon=0.5, bounds=(0, 1), classes=[0, 1, 2], random_state=0)
                  .fit(rng.uniform(0, 1, (n, 3)), rng.integers(0, 3, n)) for n in (30, 3000)]
        names = [k for k in vars(fitted[0]) if k.endswith("_") and k[:-1] in vars(fitted[0])
                 and k != "classes_"]
        assert len(names) >= 2
        assert all(np.array_equal(getattr(fitted[0], k), getattr(fitted[1], k)) for k in names)


def test_random_splits_do_not_look_at_the_data():
    rng = np.random.default_rng(15)  # insecure-ok: test data
    kw = {"bounds": (0, 1), "classes": [0, 1], "split_share": 0.0, "max_depth": 3,
          "random_state": 4}
    a = DecisionTreeClassifier(**kw).fit(rng.uniform(0, 1, (50, 3)), rng.integers(0, 2, 50))
    b = DecisionTreeClassifier(**kw).fit(rng.uniform(0, 1, (700, 3)), np.ones(700, int))
    for name in ("feature", "threshold", "left", "right", "slot"):
        assert np.array_equal(getattr(a.tree_, name), getattr(b.tree_, name))


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES)
def test_single_leaf_warning(cls):
    import warnings

    rng = np.random.default_rng(16)  # insecure-ok: test data
    X = rng.uniform(0, 1, (3000, 2))
    y = (X[:, 0] > 0.5).astype(int)
    kw = {"bounds": (0, 1), "classes": [0, 1]}
    with pytest.warns(SingleLeafWarning, match="one class everywhere"):
        cls(epsilon=1.0, max_depth=0, random_state=0, **kw).fit(X, y)
    grid = rng.uniform(-0.5, 1.5, (2000, 2))
    warned = silent = 0
    small = {"max_depth": 1} if cls is DecisionTreeClassifier else {"max_depth": 1,
                                                                      "n_estimators": 1}
    for seed in range(40):   # tiny epsilon, two leaves: some fits warn, some do not
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SingleLeafWarning)
            est = cls(epsilon=1e-2, random_state=seed, **small, **kw).fit(X[:40], y[:40])
        one = any(issubclass(w.category, SingleLeafWarning) for w in caught)
        # a fit that warns predicts one class for every input (one that does not may still,
        # when the leaves favouring another class are never reached)
        if one:
            assert np.unique(est.predict(np.vstack([grid, X]))).size == 1
        warned += one
        silent += not one
    assert warned > 0 and silent > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingleLeafWarning)
        cls(epsilon=5.0, random_state=0, **kw).fit(X, y)          # two classes predicted


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_splits_stay_inside_the_node_box(share):
    # every split is a grid threshold strictly inside the node's box (the bounds narrowed by the
    # splits above), unless the box has none left (then any split is drawn)
    rng = np.random.default_rng(17)  # insecure-ok: test data
    X = rng.uniform(0, 1, (500, 2))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    B, depth = 8, 6
    t = DecisionTreeClassifier(epsilon=2.0, bounds=(0, 1), classes=[0, 1], max_depth=depth,
                               n_bins=B, split_share=share, random_state=5).fit(X, y).tree_
    box = {0: (np.zeros(2, int), np.full(2, B))}
    inside = fallback = 0
    for v in range(2**depth - 1):
        lo, hi = box[v]
        f = t.feature[v]
        j = int(round(t.threshold[v] * B))
        assert t.threshold[v] == bin_threshold(0.0, float(B), j)
        if np.any(hi - lo >= 2):
            assert lo[f] < j < hi[f]
            inside += 1
        else:
            fallback += 1
        box[t.left[v]] = (lo, np.where(np.arange(2) == f, min(hi[f], j), hi))
        box[t.right[v]] = (np.where(np.arange(2) == f, max(lo[f], j), lo), hi)
    assert inside > 30


def test_split_base_measure_weighs_features_equally():
    # n_bins (2, 64): feature 0 has 1 threshold, feature 1 has 63. With one class the max
    # operator is the same for every split, so the exponential mechanism's law is its base
    # measure: each feature with probability 1/2 (not 1/64 and 63/64), then a uniform threshold
    # of that feature
    share = 0.5
    rng = np.random.default_rng(18)  # insecure-ok: test data
    X = rng.uniform(0, 1, (60, 2))
    y = np.zeros(60, int)
    gen = np.random.default_rng(19)  # insecure-ok: test seeds
    picks, cuts = [], []
    for _ in range(2000):
        t = DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1], max_depth=1,
                                   n_bins=[2, 64], split_share=share, random_state=gen)
        t = t.fit(X, y).tree_
        picks.append(t.feature[0])
        if t.feature[0] == 1:
            cuts.append(int(round(t.threshold[0] * 64)))
    assert chisquare_pvalue(np.bincount(picks, minlength=2), np.array([0.5, 0.5])) > ALPHA
    assert chisquare_pvalue(np.bincount(picks, minlength=2), np.array([1, 63]) / 64) < ALPHA
    observed = np.bincount(np.array(cuts) - 1, minlength=63)
    assert chisquare_pvalue(observed, np.full(63, 1 / 63)) > ALPHA


def test_random_splits_bisect_a_feature_drawn_by_its_room():
    # split_share=0: no level looks at the data. n_bins (5, 9): at the root feature 0 has 4
    # candidates, feature 1 has 8, so feature 0 with probability 4/12 (power: the uniform
    # feature, 1/2, is rejected), cut at its middle candidates (j = 2 or 3 of 5, 1/2 each;
    # feature 1: 4 or 5 of 9). The root's left child after cutting feature 0 at j has j - 1
    # candidates on it and 8 on feature 1 (the box narrowed by the split above)
    rng = np.random.default_rng(21)  # insecure-ok: test data
    X = rng.uniform(0, 1, (40, 2))
    y = rng.integers(0, 2, 40)
    gen = np.random.default_rng(22)  # insecure-ok: test seeds
    bins = np.array([5, 9])
    root_f, cut = np.zeros(2, int), {0: np.zeros(10, int), 1: np.zeros(10, int)}
    child_f = np.zeros((10, 2), int)   # by the root's cut of feature 0
    for _ in range(3000):
        t = DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1], max_depth=2,
                                   n_bins=bins, split_share=0.0, random_state=gen).fit(X, y).tree_
        f = t.feature[0]
        j = int(round(t.threshold[0] * bins[f]))
        root_f[f] += 1
        cut[f][j] += 1
        if f == 0:
            child_f[j, t.feature[t.left[0]]] += 1
    assert chisquare_pvalue(root_f, np.array([4, 8]) / 12) > ALPHA
    assert chisquare_pvalue(root_f, np.array([0.5, 0.5])) < ALPHA
    assert cut[0][[2, 3]].sum() == root_f[0] and cut[1][[4, 5]].sum() == root_f[1]
    assert chisquare_pvalue(cut[0][[2, 3]], np.array([0.5, 0.5])) > ALPHA
    assert chisquare_pvalue(cut[1][[4, 5]], np.array([0.5, 0.5])) > ALPHA
    for j in (2, 3):
        assert chisquare_pvalue(child_f[j], np.array([j - 1, 8]) / (j + 7)) > ALPHA
    # power of the child's check: its law with the root's box (4 and 8) is rejected
    assert chisquare_pvalue(child_f[2] + child_f[3], np.array([4, 8]) / 12) < ALPHA


def test_random_splits_on_wide_tables_are_uniform():
    # from WIDE features on: a feature uniformly among those with candidates (feature f has
    # f + 1 candidates, feature 3 none), then a uniform candidate. Power: the bisecting law of
    # narrow tables (features by their candidates) is rejected
    from dpcore.learn._tree_grid import WIDE
    from dpcore.learn._tree_grow import random_split

    d = WIDE
    inside = np.zeros((d, 31), bool)
    for f in range(d):
        inside[f, :f + 1] = f != 3
    gen = np.random.default_rng(23)  # insecure-ok: test seeds
    draws = np.array([random_split(inside, gen) for _ in range(8000)])
    f, j = np.divmod(draws, 31)
    expected = np.where(np.arange(d) == 3, 0.0, 1.0)
    observed = np.bincount(f, minlength=d)
    assert observed[3] == 0
    keep = np.arange(d) != 3
    assert chisquare_pvalue(observed[keep], expected[keep] / expected.sum()) > ALPHA
    room = np.arange(1, d + 1)[keep]
    assert chisquare_pvalue(observed[keep], room / room.sum()) < ALPHA
    top = f == d - 1   # d candidates, each 1/d
    assert chisquare_pvalue(np.bincount(j[top], minlength=d), np.full(d, 1 / d)) > ALPHA


@pytest.mark.parametrize("scale", [2.0**-30, 1e-4, 0.013, 1.0, 7.5])
def test_base_offsets_keep_integer_utilities_exact(scale):
    # the max operator plus its public offset is an exact double: neighbours' utilities still
    # differ by exactly 0 or 1 (sensitivity 1, monotone), whatever the offset
    rng = np.random.default_rng(20)  # insecure-ok: test data
    per_feature = rng.integers(0, 2**16, (50, 7))
    offsets = _base_offsets(per_feature, scale)
    assert np.all(offsets * 2**14 == np.round(offsets * 2**14))
    assert np.all(np.abs(offsets) < 2.0**36)
    u = rng.integers(0, 2**36, (50, 7)).astype(np.float64)
    step = rng.integers(0, 2, (50, 7))
    assert np.array_equal((u + step + offsets) - (u + offsets), step.astype(np.float64))
    # the base measure they give: exp(scale * o_f) within exp(scale 2**-15) of 1 / n_f
    used = (per_feature > 0) & np.any(offsets != 0, axis=1, keepdims=True)
    if used.any():
        ratio = scale * offsets[used] + np.log(per_feature[used])
        assert np.all(np.abs(ratio) <= scale * 2.0**-15 + 1e-9)
    assert not _base_offsets(np.array([[3, 5]]), 2.0**-40).any()   # too small a scale: uniform


# ------------------------------------------------------------------------------------------------
# Threads (issue 29): the binning and level-counting passes cut the records into runs set by the
# input's shape; integer counts, so every thread count gives the same output

THREAD_COUNTS = (1, 2, 8)


def _big_tables(wide):
    """Records enough for several runs (n d = 30000 x 20 values, runs of >= 2**17), with NaN-free
    data, one bin per code (wide: 300 bins, uint16 codes)."""
    rng = np.random.default_rng(5)  # insecure-ok: test data
    n, d, k = 30011, 20, 3
    B = 300 if wide else 32
    X = rng.normal(0.5, 0.3, (n, d))     # some values beyond the bounds: the end bins
    y = rng.integers(0, k, n).astype(np.int32)
    return X, y, k, B


@pytest.mark.parametrize("wide", [False, True])
def test_threaded_binning_and_level_counts_match_numpy(threads, wide):
    X, y, k, B = _big_tables(wide)
    n, d = X.shape
    lo, inv, top = np.zeros(d), np.full(d, float(B)), np.full(d, B - 1.0)
    expected_codes = np.clip(np.floor(X * B), 0, B - 1).astype(np.int64)
    expected_root = np.zeros((d, k, B), dtype=np.int64)
    for f in range(d):
        np.add.at(expected_root[f], (y, expected_codes[:, f]), 1)
    # one level below a root split on feature 3 at code 10; the left child (node 0) counted
    node0 = np.zeros(n, dtype=np.int32)
    feature, split, left = (np.array([3], np.int32), np.array([10], np.int32),
                            np.zeros(1, np.int32))
    row = np.array([0, -1], dtype=np.int32)
    go_right = expected_codes[:, 3] >= 10
    expected_level = np.zeros((1, d, k, B), dtype=np.int64)
    for f in range(d):
        np.add.at(expected_level[0, f], (y[~go_right], expected_codes[~go_right, f]), 1)
    for t in THREAD_COUNTS:
        threads(t)
        codes = np.empty((n, d), dtype=np.uint16 if wide else np.uint8)
        root = np.zeros((d, k, B), dtype=np.int64)
        assert _tree.bin_codes(X, lo, inv, top, y, codes, root) == 0
        assert np.array_equal(codes, expected_codes)
        assert np.array_equal(root, expected_root)
        node = node0.copy()
        counts = np.zeros((1, d, k, B), dtype=np.int64)
        _tree.level_counts(codes, y, node, feature, split, left, row, counts)
        assert np.array_equal(node, go_right.astype(np.int32))
        assert np.array_equal(counts, expected_level)


def test_threaded_binning_finds_non_finite_values_in_any_run(threads):
    X, y, k, B = _big_tables(False)
    n, d = X.shape
    X[n - 1, 7] = np.nan          # in the last run
    X[0, 2] = np.inf              # in the first
    X[n // 2, 2] = -np.inf
    for t in THREAD_COUNTS:
        threads(t)
        codes = np.empty((n, d), dtype=np.uint8)
        root = np.zeros((d, k, B), dtype=np.int64)
        assert _tree.bin_codes(X, np.zeros(d), np.full(d, float(B)), np.full(d, B - 1.0), y,
                               codes, root) == 2
        with pytest.raises(ValueError, match="NaN or infinity"):
            DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1, 2],
                                   random_state=0).fit(X, y)


@pytest.mark.parametrize("cls", [DecisionTreeClassifier, RandomForestClassifier])
def test_seeded_fits_identical_for_any_thread_count(threads, cls):
    rng = np.random.default_rng(6)  # insecure-ok: test data
    X = rng.uniform(0, 1, (40000, 12))
    y = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.8)
    kw = {"epsilon": 2.0, "bounds": (0, 1), "classes": [0, 1, 2], "max_depth": 4}
    if cls is RandomForestClassifier:
        kw["n_estimators"] = 3
    fits = []
    for t in THREAD_COUNTS:
        threads(t)
        tree = cls(random_state=11, **kw).fit(X, y).tree_
        fits.append((tree.feature, tree.threshold, tree.values))
    for other in fits[1:]:
        for a, b in zip(fits[0], other):
            assert np.array_equal(a, b)


def test_threaded_level_counts_give_the_majority_labels(threads):
    # several runs at every level: at a huge epsilon each leaf's label is the majority class of
    # the records routed there (a naive walk), so the summed run tables are right
    rng = np.random.default_rng(7)  # insecure-ok: test data
    X = rng.uniform(0, 1, (30000, 10))
    y = (X[:, 0] > 0.4).astype(int) ^ (X[:, 2] > 0.7)
    threads(2)
    tree = DecisionTreeClassifier(epsilon=1e6, bounds=(0, 1), classes=[0, 1], max_depth=5,
                                  random_state=0).fit(X, y)
    t = tree.tree_
    reached = t.slot[t.apply(X)[:, 0]]
    exact = np.zeros((t.n_leaves, 2))
    np.add.at(exact, (reached, y), 1)
    strict = exact.max(axis=1) > exact.min(axis=1)
    assert strict.sum() >= 16
    assert np.array_equal(np.argmax(t.values[strict], axis=1), np.argmax(exact[strict], axis=1))


def test_runs_get_a_new_table_when_every_slot_is_busy(threads, monkeypatch):
    # the kernel sizes its tables for the thread count it reads; raise the pool's count above
    # it (as a set_num_threads from another thread during a fit would): the output is the same
    X, y, k, B = _big_tables(False)
    n, d = X.shape
    grid = (np.zeros(d), np.full(d, float(B)), np.full(d, B - 1.0))
    expected_codes = np.empty((n, d), dtype=np.uint8)
    expected_root = np.zeros((d, k, B), dtype=np.int64)
    threads(1)
    _tree.bin_codes(X, *grid, y, expected_codes, expected_root)
    threads(8)
    monkeypatch.setattr(_tree, "get_limit", lambda: 1)
    codes = np.empty((n, d), dtype=np.uint8)
    root = np.zeros((d, k, B), dtype=np.int64)
    kept, X[5, 3] = X[5, 3], np.nan
    assert _tree.bin_codes(X, *grid, y, codes, root) == 1
    X[5, 3] = kept
    root[:] = 0
    assert _tree.bin_codes(X, *grid, y, codes, root) == 0
    assert np.array_equal(codes, expected_codes) and np.array_equal(root, expected_root)
    counts = np.zeros((1, d, k, B), dtype=np.int64)
    node = np.zeros(n, dtype=np.int32)
    _tree.level_counts(codes, y, node, np.array([3], np.int32), np.array([10], np.int32),
                       np.zeros(1, np.int32), np.array([0, -1], np.int32), counts)
    left = codes[:, 3] < 10
    assert np.array_equal(counts[0].sum(axis=(1, 2)), np.full(d, left.sum()))


# ------------------------------------------------------------------------------------------------
# The binning pass's two versions (tree_bin.h: portable, AVX2 when the CPU has it)

@pytest.fixture
def bin_levels():
    yield [level for level in (0, 1) if _tree.set_bin_level(level) == level]
    _tree.set_bin_level(1)


@pytest.mark.parametrize("d, wide", [(7, False), (30, False), (3, True), (41, True)])
def test_binning_versions_agree_with_numpy(bin_levels, d, wide):
    # edge values: on, just below and just above thresholds, beyond the bounds, -0, huge;
    # d = 7, 41 and odd n leave runs that are no multiple of the vector width
    rng = np.random.default_rng(30 + d)  # insecure-ok: test data
    n, k, B = 3001, 3, (300 if wide else 256)
    lower, upper = rng.uniform(-2, 0, d), rng.uniform(0.5, 3, d)
    inv = B / (upper - lower)
    X = rng.uniform(lower - 1, upper + 1, (n, d))
    grid = lower[:, None] + (upper - lower)[:, None] * np.arange(1, B) / B
    for f in range(d):
        picks = rng.integers(0, B - 1, 60)
        X[:20, f] = grid[f, picks[:20]]
        X[20:40, f] = np.nextafter(grid[f, picks[20:40]], -np.inf)
        X[40:60, f] = np.nextafter(grid[f, picks[40:]], np.inf)
    X[60, :] = -0.0
    X[61, :] = 1e300
    X[62, :] = -1e300
    X[63, :] = lower
    X[64, :] = upper
    y = rng.integers(0, k, n).astype(np.int32)
    top = np.full(d, B - 1.0)
    expected = np.clip(np.floor((X - lower) * inv), 0, B - 1).astype(np.int64)
    expected_root = np.zeros((d, k, B), dtype=np.int64)
    for f in range(d):
        np.add.at(expected_root[f], (y, expected[:, f]), 1)
    assert bin_levels[0] == 0
    for level in bin_levels:
        _tree.set_bin_level(level)
        codes = np.empty((n, d), dtype=np.uint16 if wide else np.uint8)
        root = np.zeros((d, k, B), dtype=np.int64)
        assert _tree.bin_codes(X, lower, inv, top, y, codes, root) == 0
        assert np.array_equal(codes, expected) and np.array_equal(root, expected_root)
        # a value that is not finite, in a vector part (column 0) and in a run's tail (last)
        for i, f in ((5, 0), (n - 1, d - 1), (n // 2, d // 2)):
            for bad in (np.nan, np.inf, -np.inf):
                Xb = X.copy()
                Xb[i, f] = bad
                root[:] = 0
                assert _tree.bin_codes(Xb, lower, inv, top, y, codes, root) == 1


def test_binning_rejects_a_grid_the_codes_cannot_hold():
    X, y = np.zeros((4, 2)), np.zeros(4, dtype=np.int32)
    codes = np.empty((4, 2), dtype=np.uint8)
    for top, width in ((256.0, 300), (9.0, 8)):   # code 256 in uint8; top beyond the table
        with pytest.raises(ValueError, match="top"):
            _tree.bin_codes(X, np.zeros(2), np.ones(2), np.full(2, top), y, codes,
                            np.zeros((2, 1, width), dtype=np.int64))


def test_a_thread_reuses_its_record_memory_without_changing_fits():
    """The per-record block is kept between a thread's fits (record_arrays); a fit on other
    data in between, larger or smaller, leaves the next seeded fit identical to a fit in a
    fresh thread (which allocates anew)."""
    import threading

    from dpcore.learn._tree_memory import record_arrays

    rng = np.random.default_rng(11)
    X_big, X = rng.uniform(0, 1, (3000, 7)), rng.uniform(0, 1, (500, 5))
    y_big, y = (X_big[:, 0] > 0.5).astype(int), (X[:, 1] > 0.4).astype(int)

    def fit(data, labels, seed):
        est = DecisionTreeClassifier(epsilon=2.0, bounds=(0.0, 1.0), classes=[0, 1],
                                     random_state=seed)
        est.fit(data, labels)
        return est.predict(rng_X)

    rng_X = rng.uniform(0, 1, (200, 5))
    fresh = {}
    thread = threading.Thread(target=lambda: fresh.setdefault("p", fit(X, y, 5)))
    thread.start()
    thread.join()
    codes, _, _ = record_arrays(3000, 7, np.uint8)
    codes.fill(255)   # whatever the kept block held before, the fit overwrites what it reads
    big = DecisionTreeClassifier(epsilon=2.0, bounds=(0.0, 1.0), classes=[0, 1],
                                 random_state=4).fit(X_big, y_big)
    assert big.predict(X_big[:5]).shape == (5,)
    again = fit(X, y, 5)
    assert np.array_equal(again, fresh["p"])
    first, _, _ = record_arrays(400, 5, np.uint8)
    second, _, _ = record_arrays(400, 5, np.uint8)
    assert first.ctypes.data == second.ctypes.data   # the same thread: the same memory
