"""Private k-means (dpcore.learn._kmeans): utility against scikit-learn, the exact noise law of a
released count, one charge, no private attribute, scikit-learn's estimator contract."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402

import dpcore  # noqa: E402
from dpcore.learn._kmeans import (  # noqa: E402
    KMeans,
    _cluster_totals,
    _coarsen,
    _split_units,
    _sphere_packing,
    count_sum_split,
    histogram_bins,
)
from tests._gof import ALPHA, dlap_pmf, integer_pvalue  # noqa: E402


def _blobs(n, d, k, seed):
    from sklearn.datasets import make_blobs

    return make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.0,
                      center_box=(-10.0, 10.0), random_state=seed)[0]


def _cost(X, centers):
    d2 = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    return float(d2.min(axis=1).sum())


# ------------------------------------------------------------------------------------------------
# Utility (issue 18): within 1.2x of non-private k-means at epsilon = 1, n = 10**5

@pytest.mark.parametrize("d, k", [(2, 5), pytest.param(5, 8, marks=pytest.mark.slow),
                                  pytest.param(10, 5, marks=pytest.mark.slow)])
def test_cost_within_1_2_of_sklearn(d, k):
    from sklearn.cluster import KMeans as SkKMeans

    X = _blobs(10**5, d, k, seed=0)            # centres well separated for this data seed
    base = SkKMeans(n_clusters=k, n_init=10, random_state=0).fit(X).inertia_
    ratios = [_cost(X, KMeans(k, epsilon=1.0, bounds=(-15.0, 15.0), random_state=s)
                    .fit(X).cluster_centers_) / base for s in range(3)]
    print(f"d={d} k={k}: cost / scikit-learn's cost = {np.round(ratios, 4).tolist()}")
    assert max(ratios) <= 1.2, ratios


# ------------------------------------------------------------------------------------------------
# The noise law of one released count

def _count_samples(n_fits, epsilon):
    # 4 clusters, far apart, public start on them: each record's cluster is known, max_iter=1
    rng = np.random.default_rng(5)  # insecure-ok: test data, not noise
    centres = np.array([[-5.0, -5.0], [-5.0, 5.0], [5.0, 5.0], [5.0, -5.0]])
    sizes = np.array([7, 30, 0, 12])
    X = np.vstack([c + rng.uniform(-1, 1, (m, 2)) for c, m in zip(centres, sizes)])
    gen = np.random.default_rng(12345)  # insecure-ok: test seed for the noise
    km = KMeans(4, epsilon=epsilon, bounds=(-10.0, 10.0), init=centres, max_iter=1,
                random_state=gen)
    out = np.empty((n_fits, 4), dtype=np.int64)
    for i in range(n_fits):
        out[i] = km.fit(X).cluster_count_ - sizes
    return out.ravel(), km


def test_released_count_is_exact_discrete_laplace():
    noise, km = _count_samples(2500, epsilon=1.0)
    plan = km._plan(2, 1.0, 4, 1, km.init, 0.2)
    assert plan[-1] == 1
    count_noise = plan[3]
    # epsilon_count = 1 / (1 + r), r = (3 d**2)**(1/3); scale = 1 / epsilon_count rounded up
    assert count_noise.sensitivity == 1
    assert count_noise.scale == pytest.approx(1 + count_sum_split(2), rel=1e-12)
    t = count_noise.scale
    support = np.arange(-int(8 * t), int(8 * t) + 1)
    assert integer_pvalue(noise, dlap_pmf(t), support) > ALPHA
    # power: a 15% wrong scale is rejected by the same test on the same draws
    assert integer_pvalue(noise, dlap_pmf(1.15 * t), support) < ALPHA


def test_cluster_totals_match_naive():
    rng = np.random.default_rng(0)  # insecure-ok: test data
    labels = rng.integers(0, 5, 1000)
    labels[labels == 3] = 4                 # an empty cluster
    units = rng.integers(-2**26, 2**26 + 1, (1000, 3))
    counts, sums = _cluster_totals(labels, _split_units(units), 5)
    for c in range(5):
        assert counts[c] == np.sum(labels == c)
        assert np.array_equal(sums[c], units[labels == c].sum(axis=0))


def test_coarsen_sums_blocks():
    table = np.arange(5 * 5 * 3).reshape(5, 5, 3)
    coarse = _coarsen(table)
    assert coarse.shape == (3, 3, 2) and coarse.sum() == table.sum()
    assert coarse[0, 0, 0] == table[:2, :2, :2].sum()
    assert coarse[2, 1, 1] == table[4:, 2:4, 2:].sum()


def test_sphere_packing_is_a_packing():
    pts = _sphere_packing(6, 3, np.random.default_rng(1))  # insecure-ok: public start
    assert pts.shape == (6, 3) and np.all(np.abs(pts) < 1)


def test_histogram_bins_public_rule():
    assert histogram_bins(2, 5) == 64 and histogram_bins(3, 5) == 25
    assert histogram_bins(14, 5) == 2 and histogram_bins(15, 5) == 0


# ------------------------------------------------------------------------------------------------
# Accounting, validation, attributes

def _data():
    return _blobs(600, 2, 3, seed=1)


def test_charged_once():
    acc = dpcore.Accountant(epsilon=10.0)
    KMeans(3, epsilon=0.7, bounds=(-15, 15), random_state=0, accountant=acc).fit(_data())
    assert acc.spent[0] == pytest.approx(0.7)
    assert len(acc.history) == 1


@pytest.mark.parametrize("params", [
    {"bounds": None},
    {"bounds": (1.0, -1.0)},
    {"epsilon": 0.0},
    {"n_clusters": 0},
    {"max_iter": 0},
    {"init": "kmeans++"},
    {"init": np.zeros((2, 2))},
    {"init_fraction": 1.0},
    {"init": "histogram", "n_clusters": 3},   # fine, control below uses d = 20
])
def test_bad_arguments_charge_nothing(params):
    acc = dpcore.Accountant(epsilon=10.0)
    kw = {"n_clusters": 3, "epsilon": 1.0, "bounds": (-15, 15), "random_state": 0,
          "accountant": acc}
    kw.update(params)
    if params == {"init": "histogram", "n_clusters": 3}:
        X = np.zeros((50, 20))                      # 20 features: no histogram grid
    else:
        X = _data()
    with pytest.raises((ValueError, TypeError)):
        KMeans(**kw).fit(X)
    assert acc.spent[0] == 0 and len(acc.history) == 0


def test_bad_data_charges_nothing_and_quotes_nothing():
    acc = dpcore.Accountant(epsilon=10.0)
    X = _data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError) as err:
        KMeans(3, bounds=(-15, 15), accountant=acc).fit(X)
    assert acc.spent[0] == 0 and "600" not in str(err.value)


def test_fitted_attributes_are_released_or_public():
    km = KMeans(3, epsilon=1.0, bounds=(-15, 15), max_iter=4, random_state=0).fit(_data())
    assert not hasattr(km, "labels_") and not hasattr(km, "inertia_")
    assert km.n_iter_ == 4
    assert KMeans(3, bounds=(-15, 15), random_state=0).fit(_data()).n_iter_ == 2
    assert KMeans(3, bounds=(-15, 15), init="sphere", random_state=0).fit(_data()).n_iter_ == 5
    assert km.cluster_centers_.shape == (3, 2) and km.cluster_count_.dtype == np.int64
    assert np.all(np.abs(km.cluster_centers_) <= 15)


def test_clone_shares_accountant_and_generator():
    acc = dpcore.Accountant(epsilon=10.0)
    gen = np.random.default_rng(0)  # insecure-ok: test
    km = KMeans(3, bounds=(-15, 15), random_state=gen, accountant=acc)
    twin = clone(km)
    assert twin.accountant is acc and twin.random_state is gen
    a = km.fit(_data()).cluster_centers_
    b = twin.fit(_data()).cluster_centers_
    assert not np.array_equal(a, b)                     # fresh noise from the shared generator
    assert acc.spent[0] == pytest.approx(2.0)


def test_secure_default_generator_and_public_init():
    X = _data()
    km = KMeans(3, bounds=(-15, 15)).fit(X)             # random_state=None: secure generator
    assert np.all(np.isfinite(km.cluster_centers_))
    start = np.array([[0.0, 0.0], [1.0, 1.0], [40.0, 40.0]])
    km = KMeans(3, bounds=(-15, 15), init=start, random_state=0).fit(X)
    assert np.array_equal(km.init_centers_[2], [15.0, 15.0])    # public start clipped
    km = KMeans(3, bounds=(-15, 15), init="sphere", random_state=0).fit(X)
    assert np.all(np.abs(km.init_centers_) < 15)


def test_predict_transform_score():
    X = _data()
    km = KMeans(3, epsilon=5.0, bounds=(-15, 15), random_state=0).fit(X)
    labels = km.predict(X)
    dist = km.transform(X)
    assert np.array_equal(labels, np.argmin(dist, axis=1))
    assert km.score(X) == pytest.approx(-_cost(X, km.cluster_centers_))
    assert np.array_equal(km.fit_predict(X), km.predict(X))


def test_privacy_section_and_doctest():
    import doctest
    import inspect
    import re

    import dpcore.learn._kmeans as mod

    assert re.search(r"^Privacy\n-------\n", inspect.getdoc(KMeans), flags=re.MULTILINE)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------------------------------------
# Sample-and-aggregate

def test_sample_aggregate_method():
    from sklearn.cluster import KMeans as SkKMeans

    X = _blobs(10**5, 2, 5, seed=0)
    base = SkKMeans(n_clusters=5, n_init=10, random_state=0).fit(X).inertia_
    acc = dpcore.Accountant(epsilon=10.0)
    km = KMeans(5, epsilon=5.0, bounds=(-15.0, 15.0), method="sample_aggregate",
                random_state=0, accountant=acc).fit(X)
    ratio = _cost(X, km.cluster_centers_) / base
    print(f"sample_aggregate, epsilon=5: cost / scikit-learn's cost = {ratio:.4f}")
    assert ratio <= 1.5
    assert len(acc.history) == 1 and acc.spent[0] == pytest.approx(5.0)
    assert km.n_iter_ == 0 and km.cluster_count_ is None
    for bad in ({"n_blocks": 1}, {"method": "dbscan"}, {"n_blocks": 10**6}):
        kw = {"bounds": (-15.0, 15.0), "method": "sample_aggregate", "accountant": acc}
        kw.update(bad)
        with pytest.raises(ValueError):
            KMeans(5, **kw).fit(X[:1000])
    assert len(acc.history) == 1


# scikit-learn's estimator checks run in tests/test_learn_estimator_checks.py.
