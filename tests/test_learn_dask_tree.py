"""The private trees on Dask collections (dpcore.learn._dask.DaskRecords, issue 30 item 3): the
records are binned and counted chunk by chunk, only exact integer tables come back, and the
released tree (or forest) is the in-memory one bit for bit for the same seed, whatever the
chunking and the scheduler (the law is then the in-memory one, tested in test_learn_tree.py);
one charge, and every bad input refused before it."""
import numpy as np
import pytest

pytest.importorskip("sklearn")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

import dpcore  # noqa: E402
from dpcore.learn import DecisionTreeClassifier, RandomForestClassifier  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::dpcore.learn.SingleLeafWarning")

FIELDS = ("feature", "threshold", "left", "right", "slot", "roots", "values")


def _data(n=3000, d=5, seed=0):
    rng = np.random.default_rng(seed)  # test data, not noise
    X = rng.uniform(-0.2, 1.2, size=(n, d))   # some values outside the bounds: clipped
    y = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.8)
    return X, y


def _same_trees(a, b):
    return a.depth == b.depth and all(np.array_equal(getattr(a, f), getattr(b, f))
                                      for f in FIELDS)


CASES = [
    (DecisionTreeClassifier, dict()),
    (DecisionTreeClassifier, dict(max_depth=5, n_bins=300, criterion="gini")),  # uint16 codes
    (DecisionTreeClassifier, dict(max_depth=4, split_levels=1, n_bins=[4, 8, 16, 2, 5])),
    (RandomForestClassifier, dict()),
    (RandomForestClassifier, dict(n_estimators=4, max_depth=3)),   # records partitioned
    (RandomForestClassifier, dict(algorithm="random", n_estimators=3, max_depth=4)),
]


def _make(cls, kw, seed=7, accountant=None, classes=(0, 1, 2)):
    return cls(epsilon=2.0, bounds=(0.0, 1.0), classes=list(classes), random_state=seed,
               accountant=accountant, **kw)


@pytest.mark.parametrize("cls, kw", CASES)
def test_dask_array_fit_equals_the_in_memory_fit(cls, kw):
    """Same seed: the same released trees bit for bit, for chunkings that cut the rows anywhere
    (one row a chunk too) and whose X and y chunks differ."""
    X, y = _data()
    ref = _make(cls, kw).fit(X, y)
    for rows, ychunks in [(700, 1100), (3000, 3000), (257, 1)]:
        est = _make(cls, kw).fit(da.from_array(X, chunks=(rows, 2)),
                                 da.from_array(y, chunks=ychunks))
        assert _same_trees(est.tree_, ref.tree_)
        assert est.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))


def test_other_seeds_give_other_trees():
    """The check above can fail: another seed releases another tree."""
    X, y = _data()
    trees = [_make(DecisionTreeClassifier, dict(max_depth=4), seed=s).fit(
        da.from_array(X, chunks=(500, 5)), da.from_array(y, chunks=500)).tree_ for s in range(4)]
    assert not all(_same_trees(trees[0], t) for t in trees[1:])


def test_dask_dataframe_fit_equals_the_in_memory_fit():
    X, y = _data()
    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["label"] = np.array(["u", "v", "w"])[y]
    ddf = dd.from_pandas(frame, npartitions=4)
    for cls in (DecisionTreeClassifier, RandomForestClassifier):
        kw = dict(epsilon=1.0, bounds=(0.0, 1.0), classes=["u", "v", "w"], random_state=2)
        ref = cls(**kw).fit(X, frame["label"].to_numpy())
        est = cls(**kw).fit(ddf[list("abcde")], ddf["label"])
        assert _same_trees(est.tree_, ref.tree_)
        assert list(est.classes_) == ["u", "v", "w"]


def test_in_memory_labels_with_a_dask_X():
    X, y = _data()
    ref = _make(DecisionTreeClassifier, {}).fit(X, y)
    est = _make(DecisionTreeClassifier, {}).fit(da.from_array(X, chunks=(600, 5)), y)
    assert _same_trees(est.tree_, ref.tree_)


@pytest.mark.parametrize("threads", [1, 2])
def test_dask_fit_is_the_same_for_every_thread_count(threads):
    X, y = _data(n=20_000)
    before = dpcore.get_num_threads()
    try:
        dpcore.set_num_threads(1)
        ref = _make(DecisionTreeClassifier, dict(max_depth=4)).fit(X, y)
        dpcore.set_num_threads(threads)
        est = _make(DecisionTreeClassifier, dict(max_depth=4)).fit(
            da.from_array(X, chunks=(7000, 5)), da.from_array(y, chunks=7000))
    finally:
        dpcore.set_num_threads(before)
    assert _same_trees(est.tree_, ref.tree_)


@pytest.mark.parametrize("cls, kw", [CASES[0], CASES[5]])
def test_dask_fit_charges_the_in_memory_cost_once(cls, kw):
    X, y = _data()
    costs = []
    for data in [(X, y), (da.from_array(X, chunks=(400, 5)), da.from_array(y, chunks=400))]:
        acc = dpcore.Accountant(3.0)
        _make(cls, kw, accountant=acc).fit(*data)
        assert len(acc.history) == 1
        costs.append(acc.spent)
    assert costs[0] == costs[1]


def _bad_cases():
    X, y = _data()
    Xnan = X.copy()
    Xnan[2500, 1] = np.nan
    Xinf = X.copy()
    Xinf[3, 4] = np.inf
    yout = y.copy()
    yout[10] = 7
    Xd = da.from_array(X, chunks=(500, 5))
    yd = da.from_array(y, chunks=500)
    return [
        ((0, 1, 2), da.from_array(Xnan, chunks=(500, 5)), yd, "NaN or infinity"),
        ((0, 1, 2), da.from_array(Xinf, chunks=(500, 5)), yd, "NaN or infinity"),
        ((0, 1, 2), Xd, da.from_array(yout, chunks=500), "outside classes"),
        (None, Xd, yd, "classes is required"),
        ((0, 1, 2), Xd[:-1], yd, "same number of rows"),
        ((0, 1, 2), Xd[:, 0], yd, "2-d"),
        ((0, 1, 2), Xd[:, :0], yd, "no features"),
    ]


@pytest.mark.parametrize("case", range(7))
@pytest.mark.parametrize("cls, kw", [CASES[0], CASES[4], CASES[5]])
def test_bad_dask_input_is_refused_before_the_charge(case, cls, kw):
    classes, Xd, yd, match = _bad_cases()[case]
    acc = dpcore.Accountant(5.0)
    est = cls(epsilon=1.0, bounds=(0.0, 1.0), classes=classes, random_state=0, accountant=acc,
              **kw)
    with pytest.raises(ValueError, match=match):
        est.fit(Xd, yd)
    assert acc.history == []


@pytest.mark.slow
def test_local_cluster_fit_equals_the_in_memory_fit():
    """Two worker processes of a dask.distributed LocalCluster: the same released trees as in
    memory for the same seed (the partition of a forest's records scattered to the workers)."""
    distributed = pytest.importorskip("distributed")
    X, y = _data(n=20_000)
    cases = [CASES[1], CASES[4], CASES[5]]
    refs = [_make(cls, kw).fit(X, y) for cls, kw in cases]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(5000, 5)).persist()
        yd = da.from_array(y, chunks=5000).persist()
        fitted = [_make(cls, kw).fit(Xd, yd) for cls, kw in cases]
    for est, ref in zip(fitted, refs):
        assert _same_trees(est.tree_, ref.tree_)
