"""The learners on Dask collections (dpcore.learn._dask): the same released model as the
in-memory fit for the same seed, whatever the chunking and the scheduler (the law is then the
in-memory one, tested in test_learn_sgd.py / test_learn_linear.py / test_learn_naive_bayes.py),
one charge, and every bad input refused before it."""
import numpy as np
import pytest

pytest.importorskip("sklearn")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

import dpcore  # noqa: E402
from dpcore.learn import LinearSVC, LogisticRegression  # noqa: E402


def _data(n=3000, d=4, k=2, seed=0):
    rng = np.random.default_rng(seed)  # test data, not noise
    X = rng.normal(size=(n, d))
    score = X[:, 0] + 0.5 * X[:, 1]
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))
    return X, y


def _fit(est, X, y):
    return est.fit(X, y)


CASES = [
    (LogisticRegression, dict(method="sgd", n_hint=70), 2),
    (LinearSVC, dict(method="sgd", n_hint=70), 2),
    (LogisticRegression, dict(method="sgd", n_hint=70), 3),
    (LogisticRegression, dict(method="gd", n_steps=20), 2),
    (LinearSVC, dict(method="gd", n_steps=20), 3),
    (LogisticRegression, dict(method="gd", n_steps=20, multi_class="ovr"), 3),
    (LogisticRegression, dict(method="gd", n_steps=20, fit_intercept=False), 3),
    # public bounds whose box is tighter than data_norm: rows centred on the workers
    (LogisticRegression, dict(method="sgd", n_hint=70, bounds=(-0.5, 1.5)), 2),
]


def _make(cls, kw, k, seed=5, accountant=None):
    return cls(epsilon=1.0, delta=1e-6, data_norm=3.0, classes=list(range(k)), random_state=seed,
               accountant=accountant, **kw)


@pytest.mark.parametrize("cls, kw, k", CASES)
def test_dask_array_fit_equals_the_in_memory_fit(cls, kw, k):
    """Same seed: the same coefficients bit for bit, for chunkings that cut the rows anywhere
    (also inside a 2**16-record stream block) and whose X and y chunks differ."""
    X, y = _data(k=k)
    ref = _make(cls, kw, k).fit(X, y)
    for rows, ychunks in [(700, 1100), (3000, 3000), (257, 1500)]:
        Xd = da.from_array(X, chunks=(rows, 2))
        yd = da.from_array(y, chunks=ychunks)
        est = _make(cls, kw, k).fit(Xd, yd)
        assert np.array_equal(est.coef_, ref.coef_)
        assert np.array_equal(est.intercept_, ref.intercept_)
        assert est.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))


def test_dask_dataframe_fit_equals_the_in_memory_fit():
    X, y = _data(k=3)
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["label"] = np.array(["u", "v", "w"])[y]
    ddf = dd.from_pandas(frame, npartitions=4)
    kw = dict(epsilon=1.0, delta=1e-6, data_norm=3.0, classes=["u", "v", "w"], random_state=2,
              method="sgd", n_hint=70)
    ref = LogisticRegression(**kw).fit(X, frame["label"].to_numpy())
    est = LogisticRegression(**kw).fit(ddf[list("abcd")], ddf["label"])
    assert np.array_equal(est.coef_, ref.coef_)
    assert list(est.classes_) == ["u", "v", "w"]


def test_in_memory_labels_with_a_dask_X():
    X, y = _data()
    ref = _make(LogisticRegression, dict(method="gd", n_steps=10), 2).fit(X, y)
    est = _make(LogisticRegression, dict(method="gd", n_steps=10), 2).fit(
        da.from_array(X, chunks=(500, 4)), y)
    assert np.array_equal(est.coef_, ref.coef_)


def test_dask_fit_charges_the_in_memory_cost_once():
    X, y = _data()
    costs = []
    for data in [(X, y), (da.from_array(X, chunks=(400, 4)), da.from_array(y, chunks=400))]:
        acc = dpcore.Accountant(2.0, 1e-5)
        _make(LogisticRegression, dict(method="sgd", n_hint=70), 2, accountant=acc).fit(*data)
        assert len(acc.history) == 1
        costs.append(acc.spent)
    assert costs[0] == costs[1]


def _bad_cases():
    X, y = _data()
    Xnan = X.copy()
    Xnan[2500, 1] = np.nan
    yout = y.copy()
    yout[10] = 7
    Xd = da.from_array(X, chunks=(500, 4))
    yd = da.from_array(y, chunks=500)
    sgd = dict(method="sgd", n_hint=70)
    return [
        (dict(classes=[0, 1], **sgd), da.from_array(Xnan, chunks=(500, 4)), yd, "NaN or infinite"),
        (dict(classes=[0, 1], **sgd), Xd, da.from_array(yout, chunks=500), "outside classes"),
        (dict(classes=None, **sgd), Xd, yd, "classes is required"),
        (dict(classes=[0, 1]), Xd, yd, "method='gd' or 'sgd' only"),
        (dict(classes=[0, 1], **sgd), Xd[:-1], yd, "same number of rows"),
        (dict(classes=[0, 1], **sgd), Xd[:, 0], yd, "2-d"),
    ]


@pytest.mark.parametrize("case", range(6))
def test_bad_dask_input_is_refused_before_the_charge(case):
    kw, Xd, yd, match = _bad_cases()[case]
    acc = dpcore.Accountant(5.0, 1e-5)
    delta = {"delta": 1e-6} if kw.get("method") else {}
    est = LogisticRegression(epsilon=1.0, data_norm=3.0, random_state=0, accountant=acc,
                             **delta, **kw)
    with pytest.raises(ValueError, match=match):
        est.fit(Xd, yd)
    assert acc.history == []


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sgd", "gd"])
def test_local_cluster_fit_equals_the_in_memory_fit(method):
    """Two worker processes of a dask.distributed LocalCluster: the same released model as in
    memory for the same seed."""
    distributed = pytest.importorskip("distributed")
    X, y = _data(n=20_000, k=2)
    kw = dict(method="sgd", n_hint=70) if method == "sgd" else dict(method="gd", n_steps=30)
    ref = _make(LogisticRegression, kw, 2).fit(X, y)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(5000, 4)).persist()
        yd = da.from_array(y, chunks=5000).persist()
        est = _make(LogisticRegression, kw, 2).fit(Xd, yd)
        if method == "gd":   # the sufficient-statistics fits too
            from dpcore.learn import GaussianNB, KMeans

            nb = GaussianNB(epsilon=1.0, bounds=(-3, 3), classes=[0, 1], random_state=3)
            km = KMeans(3, epsilon=1.0, bounds=(-3, 3), random_state=3)
            assert np.array_equal(nb.fit(Xd, yd).theta_, nb.fit(X, y).theta_)
            assert np.array_equal(km.fit(Xd).cluster_centers_, km.fit(X).cluster_centers_)
    assert np.array_equal(est.coef_, ref.coef_)


# ------------------------------------------------------------------------------------------------
# GaussianNB: exact integer sufficient statistics per chunk


@pytest.mark.parametrize("chunks", [(500, 1000), (3000, 3000), (257, 128)])
def test_gaussian_nb_dask_fit_equals_the_in_memory_fit(chunks):
    from dpcore.learn import GaussianNB

    X, y = _data(k=3)
    kw = dict(epsilon=1.0, bounds=(-3, 3), classes=[0, 1, 2], random_state=4)
    ref = GaussianNB(**kw).fit(X, y)
    est = GaussianNB(**kw).fit(da.from_array(X, chunks=(chunks[0], 2)),
                               da.from_array(y, chunks=chunks[1]))
    for name in ("class_count_", "theta_", "var_", "class_prior_"):
        assert np.array_equal(getattr(est, name), getattr(ref, name)), name
    assert est.n_features_in_ == 4


@pytest.mark.parametrize("case", ["nan", "label", "classes"])
def test_gaussian_nb_bad_dask_input_is_refused_before_the_charge(case):
    from dpcore.learn import GaussianNB

    X, y = _data()
    if case == "nan":
        X[1234, 2] = np.inf
    if case == "label":
        y[99] = 5
    acc = dpcore.Accountant(5.0)
    est = GaussianNB(epsilon=1.0, bounds=(-3, 3), classes=None if case == "classes" else [0, 1],
                     accountant=acc)
    match = {"nan": "NaN or infinite", "label": "outside classes", "classes": "classes is"}[case]
    with pytest.raises(ValueError, match=match):
        est.fit(da.from_array(X, chunks=(500, 4)), da.from_array(y, chunks=500))
    assert acc.history == []


# ------------------------------------------------------------------------------------------------
# LinearRegression(method="sgd")


@pytest.mark.parametrize("kw", [dict(bounds_X=(-3, 3)), dict(data_norm=4.0),
                                dict(bounds_X=(-3, 3), fit_intercept=False)])
def test_linear_regression_sgd_dask_fit_equals_the_in_memory_fit(kw):
    from dpcore.learn import LinearRegression

    X, _ = _data()
    y = X @ np.array([1.0, -0.5, 0.25, 0.0]) + 0.3
    args = dict(epsilon=1.0, delta=1e-6, method="sgd", n_hint=70, bounds_y=(-4, 4),
                random_state=6, **kw)
    ref = LinearRegression(**args).fit(X, y)
    est = LinearRegression(**args).fit(da.from_array(X, chunks=(700, 4)),
                                       da.from_array(y, chunks=1000))
    assert np.array_equal(est.coef_, ref.coef_) and est.intercept_ == ref.intercept_


@pytest.mark.parametrize("case", ["nan y", "method"])
def test_linear_regression_bad_dask_input_is_refused_before_the_charge(case):
    from dpcore.learn import LinearRegression

    X, _ = _data()
    y = X[:, 0].copy()
    if case == "nan y":
        y[5] = np.nan
    acc = dpcore.Accountant(5.0, 1e-3)
    kw = dict(method="sgd", n_hint=70, delta=1e-6) if case != "method" else dict(
        method="functional")
    est = LinearRegression(epsilon=1.0, bounds_X=(-3, 3), bounds_y=(-4, 4), accountant=acc, **kw)
    with pytest.raises(ValueError, match="NaN or infinite" if case == "nan y" else "functional"):
        est.fit(da.from_array(X, chunks=(500, 4)), da.from_array(y, chunks=500))
    assert acc.history == []


# ------------------------------------------------------------------------------------------------
# KMeans: Lloyd counts and sums (and the histogram start) per chunk


@pytest.mark.parametrize("init", ["auto", "sphere", [[-1.0, -1.0, 0.0, 0.0], [1.0, 1.0, 0, 0]]])
def test_kmeans_dask_fit_equals_the_in_memory_fit(init):
    from dpcore.learn import KMeans

    X, _ = _data()
    kw = dict(epsilon=1.0, bounds=(-3, 3), init=init, random_state=8)
    ref = KMeans(2, **kw).fit(X)
    est = KMeans(2, **kw).fit(da.from_array(X, chunks=(700, 2)))
    assert np.array_equal(est.cluster_centers_, ref.cluster_centers_)
    assert np.array_equal(est.cluster_count_, ref.cluster_count_)
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=3)
    assert np.array_equal(KMeans(2, **kw).fit(frame).cluster_centers_, ref.cluster_centers_)


def test_kmeans_bad_dask_input_is_refused_before_the_charge():
    from dpcore.learn import KMeans

    X, _ = _data()
    X[2999, 0] = np.nan
    acc = dpcore.Accountant(5.0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        KMeans(2, epsilon=1.0, bounds=(-3, 3), accountant=acc).fit(da.from_array(X, chunks=500))
    with pytest.raises(ValueError, match="'lloyd' only"):
        KMeans(2, epsilon=1.0, bounds=(-3, 3), method="sample_aggregate",
               accountant=acc).fit(da.from_array(X, chunks=500))
    assert acc.history == []


# ------------------------------------------------------------------------------------------------
# LinearRegression(method="ssp" / "adassp"): exact lattice sums per chunk


SSP_CASES = [dict(bounds_X=(-3, 3)), dict(bounds_X=(-3, 3), delta=1e-6), dict(data_norm=4.0),
             dict(data_norm=4.0, bounds_X=(-2, 2), delta=1e-6),
             dict(bounds_X=(-3, 3), fit_intercept=False), dict(bounds_X=(-3, 3), method="adassp"),
             dict(data_norm=4.0, method="adassp", delta=1e-6)]


@pytest.mark.parametrize("kw", SSP_CASES)
def test_linear_regression_ssp_dask_fit_equals_the_in_memory_fit(kw):
    """The same released statistics and model bit for bit, for chunkings that cut the rows
    anywhere (odd sizes shift the rows' alignment) and whose X and y chunks differ, and for a
    dataframe."""
    from dpcore.learn import LinearRegression

    X, _ = _data(n=5000, d=3)
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.3 + 0.1 * np.random.default_rng(1).normal(size=5000)
    args = dict(epsilon=2.0, bounds_y=(-4, 4), random_state=6, **kw)
    ref = LinearRegression(**args).fit(X, y)
    for rows, ychunks in [(700, 1000), (5000, 5000), (333, 77)]:
        est = LinearRegression(**args).fit(da.from_array(X, chunks=(rows, 2)),
                                           da.from_array(y, chunks=ychunks))
        assert np.array_equal(est.coef_, ref.coef_) and est.intercept_ == ref.intercept_
        for part, value in ref.noisy_statistics_.items():
            assert np.array_equal(est.noisy_statistics_[part], value), part
        assert est.n_features_in_ == 3
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abc")), npartitions=3)
    est = LinearRegression(**args).fit(frame, dd.from_pandas(pd.Series(y), npartitions=3))
    assert np.array_equal(est.coef_, ref.coef_)


@pytest.mark.parametrize("case", ["nan X", "inf y", "rows"])
def test_linear_regression_ssp_bad_dask_input_is_refused_before_the_charge(case):
    from dpcore.learn import LinearRegression

    X, _ = _data()
    y = X[:, 0].copy()
    if case == "nan X":
        X[2222, 3] = np.nan
    if case == "inf y":
        y[5] = np.inf
    acc = dpcore.Accountant(5.0)
    Xd = da.from_array(X, chunks=(500, 4))
    yd = da.from_array(y, chunks=500)
    if case == "rows":
        Xd = Xd[:-1]
    match = {"nan X": "NaN or infinite", "inf y": "NaN or infinite", "rows": "same number"}[case]
    est = LinearRegression(epsilon=1.0, bounds_X=(-3, 3), bounds_y=(-4, 4), accountant=acc)
    with pytest.raises(ValueError, match=match):
        est.fit(Xd, yd)
    assert acc.history == []


def test_lattice_sums_do_not_depend_on_the_chunking():
    """The integer sums of SSPLattice are additive over any split of the rows, bit for bit."""
    from dpcore.learn import _ssp

    rng = np.random.default_rng(2)  # insecure-ok: test data
    Xs = rng.uniform(-1, 1, (1001, 5)) / 3
    ys = rng.uniform(-1, 1, 1001)
    domain = _ssp.SSPDomain.make(1, np.ones(5))
    plan = _ssp.ssp_plan(1001, domain, epsilon=1.0, delta=1e-6, adaptive_ridge=True)
    lattice = _ssp.SSPLattice.make(plan, domain)
    whole = lattice.sums(Xs, ys)
    parts = [lattice.sums(Xs[a:b], ys[a:b]) for a, b in [(0, 1), (1, 600), (600, 1001)]]
    for i, total in enumerate(whole):
        assert total.dtype == np.int64
        assert np.array_equal(total, sum(p[i] for p in parts))


# ------------------------------------------------------------------------------------------------
# CategoricalNB: exact integer counts per chunk


def _categorical_data(n=3000, seed=3):
    rng = np.random.default_rng(seed)  # insecure-ok: test data
    y = rng.integers(0, 3, n)
    X = np.column_stack([np.where(rng.random(n) < 0.7, y, rng.integers(0, 3, n)),
                         rng.integers(0, 4, n)])
    return X, y


@pytest.mark.parametrize("chunks", [(500, 1000), (3000, 3000), (257, 128)])
def test_categorical_nb_dask_fit_equals_the_in_memory_fit(chunks):
    from dpcore.learn import CategoricalNB

    X, y = _categorical_data()
    kw = dict(epsilon=1.0, categories=[[0, 1, 2], [0, 1, 2, 3]], classes=[0, 1, 2],
              random_state=4)
    ref = CategoricalNB(**kw).fit(X, y)
    est = CategoricalNB(**kw).fit(da.from_array(X, chunks=(chunks[0], 1)),
                                  da.from_array(y, chunks=chunks[1]))
    assert np.array_equal(est.class_count_, ref.class_count_)
    for a, b in zip(est.category_count_, ref.category_count_):
        assert np.array_equal(a, b)
    assert np.array_equal(est.predict(X), ref.predict(X)) and est.n_features_in_ == 2


def test_categorical_nb_dask_dataframe_with_string_values():
    from dpcore.learn import CategoricalNB

    X, y = _categorical_data()
    names = np.array(["red", "green", "blue", "grey"])
    frame = pd.DataFrame({"a": X[:, 0], "b": names[X[:, 1]]})
    labels = np.array(["p", "q", "r"])[y]
    kw = dict(epsilon=1.0, categories=[[0, 1, 2], list(names)], classes=["p", "q", "r"],
              random_state=9)
    ref = CategoricalNB(**kw).fit(frame, labels)
    est = CategoricalNB(**kw).fit(dd.from_pandas(frame, npartitions=4),
                                  dd.from_pandas(pd.Series(labels), npartitions=4))
    assert np.array_equal(est.class_count_, ref.class_count_)
    for a, b in zip(est.category_count_, ref.category_count_):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("case", ["value", "label", "classes", "nan"])
def test_categorical_nb_bad_dask_input_is_refused_before_the_charge(case):
    from dpcore.learn import CategoricalNB

    X, y = _categorical_data()
    X = X.astype(float)
    if case == "value":
        X[2999, 1] = 7
    if case == "nan":
        X[10, 0] = np.nan
    if case == "label":
        y[5] = 9
    acc = dpcore.Accountant(5.0)
    est = CategoricalNB(epsilon=1.0, categories=[[0, 1, 2], [0, 1, 2, 3]],
                        classes=None if case == "classes" else [0, 1, 2], accountant=acc)
    match = {"value": "outside categories", "nan": "outside categories",
             "label": "outside classes", "classes": "classes is required"}[case]
    with pytest.raises(ValueError, match=match):
        est.fit(da.from_array(X, chunks=(500, 2)), da.from_array(y, chunks=500))
    assert acc.history == []


@pytest.mark.slow
def test_local_cluster_ssp_and_categorical_fits_equal_the_in_memory_fits():
    """Two worker processes of a dask.distributed LocalCluster: LinearRegression (ssp, adassp
    with delta) and CategoricalNB release the in-memory model for the same seed."""
    distributed = pytest.importorskip("distributed")
    from dpcore.learn import CategoricalNB, LinearRegression

    X, _ = _data(n=20_000, d=3)
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.3
    Xcat, ycat = _categorical_data(n=20_000)
    regs = [dict(bounds_X=(-3, 3)), dict(data_norm=4.0, method="adassp", delta=1e-6)]
    nb = dict(epsilon=1.0, categories=[[0, 1, 2], [0, 1, 2, 3]], classes=[0, 1, 2],
              random_state=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(3000, 3)).persist()
        yd = da.from_array(y, chunks=3000).persist()
        for kw in regs:
            args = dict(epsilon=1.0, bounds_y=(-4, 4), random_state=6, **kw)
            est = LinearRegression(**args).fit(Xd, yd)
            ref = LinearRegression(**args).fit(X, y)
            assert np.array_equal(est.coef_, ref.coef_) and est.intercept_ == ref.intercept_
        est = CategoricalNB(**nb).fit(da.from_array(Xcat, chunks=(5000, 2)),
                                      da.from_array(ycat, chunks=5000))
    ref = CategoricalNB(**nb).fit(Xcat, ycat)
    assert np.array_equal(est.class_count_, ref.class_count_)
