"""dpcore.distributed on a local multi-process Dask cluster (started and stopped here): the
pre-noise counts and exact sums equal the single-machine ones for any chunking (arrays and
dataframes), the noisy releases have the same law (the same values for the same seed, and the
residuals are DLap on every cell), errors surface from the workers, and the budget is charged
once."""
import math

import numpy as np
import pytest

from _gof import ALPHA, integer_pvalue

dask = pytest.importorskip("dask", reason="dask is an optional extra: pip install '.[dask]'")
da = pytest.importorskip("dask.array", reason="dask[array] is needed")
dd = pytest.importorskip("dask.dataframe", reason="dask[dataframe] is needed for dataframes")
pd = pytest.importorskip("pandas", reason="pandas is needed for dask dataframes")
dist = pytest.importorskip("distributed", reason="dask.distributed is an optional extra")

from dpcore._release import bins as release_bins, sums as release_sums
import dpcore  # noqa: E402
from dpcore import distributed, stats  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each, on this machine only; stopped after the module."""
    cluster = dist.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                dashboard_address=None, host="127.0.0.1")
    c = dist.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def rng(seed):
    return np.random.Generator(dpcore.ChaCha20(seed))


def data(n=60_001, d=3, seed=0):
    g = np.random.default_rng(seed)
    x = g.uniform(-0.1, 1.1, size=(n, d))
    x[:11, 0] = np.linspace(0, 1, 11)  # on the edges and on the upper bound
    return x


def test_runs_on_the_cluster_workers(client):
    assert dist.default_client() is client
    workers = set(client.scheduler_info()["workers"])
    assert len(workers) == 2
    x = da.from_array(data(), chunks=(5_000, 3))
    grid = release_bins.BinGrid.make(10, [(0, 1)] * 3, 3)
    with dist.get_task_stream(client) as ts:
        distributed.exact_histogramdd(x, grid)
    ran = {t["worker"] for t in ts.data if "_chunk_counts" in str(t["key"])}
    assert ran and ran <= workers  # the per-chunk counting ran in the worker processes


@pytest.mark.parametrize("chunks", [(7_777, 3), (10_000, 2), (60_001, 3), (999, 1)])
def test_pre_noise_counts_equal_local(client, chunks):
    x = data()
    grid = release_bins.BinGrid.make([10, 7, 4], [(0, 1)] * 3, 3)
    got = distributed.exact_histogramdd(da.from_array(x, chunks=chunks), grid, split_every=3)
    ref, _ = np.histogramdd(x, bins=grid.edges)
    np.testing.assert_array_equal(got.reshape(grid.shape), ref)
    clipped = distributed.exact_histogramdd(da.from_array(x, chunks=chunks), grid, clip=True)
    local = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(x, local, True)
    np.testing.assert_array_equal(clipped, local)


def test_dataframes_and_1d(client):
    x = data(d=2)
    df = dd.from_pandas(pd.DataFrame(x, columns=["a", "b"]), npartitions=7)
    grid = release_bins.BinGrid.make(9, [(0, 1)] * 2, 2)
    ref, _ = np.histogramdd(x, bins=grid.edges)
    np.testing.assert_array_equal(distributed.exact_histogramdd(df, grid).reshape(grid.shape),
                                  ref)
    c1, e1 = distributed.histogram(df["a"], bins=9, range=(0, 1), epsilon=1.0,
                                   random_state=rng(1))
    c2, e2 = stats.histogram(x[:, 0], bins=9, range=(0, 1), epsilon=1.0, random_state=rng(1))
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(e1, e2)


def test_release_has_the_single_machine_law(client):
    """Same exact counts and noise drawn once from the caller's generator: the same output as
    stats.histogramdd for the same seed; and the residuals are DLap(1 / epsilon) on every
    cell (power: a 10% wrong scale is rejected)."""
    x = data(n=20_000, d=2)
    kw = dict(bins=[300, 400], range=[(0, 1), (0, 1)], epsilon=0.8, nonnegative=False)
    clamped, _ = distributed.histogramdd(da.from_array(x, chunks=(3_000, 2)),
                                         **{**kw, "nonnegative": "clamp"}, random_state=rng(2))
    dcounts, dedges = distributed.histogramdd(da.from_array(x, chunks=(3_000, 2)), **kw,
                                              random_state=rng(2))
    lcounts, ledges = stats.histogramdd(x, **kw, random_state=rng(2))
    np.testing.assert_array_equal(dcounts, lcounts)
    np.testing.assert_array_equal(clamped, np.maximum(lcounts, 0))  # the default, as stats'
    exact, _ = np.histogramdd(x, bins=ledges)
    t = 1.25  # 1 / 0.8, exact in binary

    def pmf(k, t=t):
        q = math.exp(-1 / t)
        return (1 - q) / (1 + q) * q ** abs(k)

    noise = (dcounts - exact).reshape(-1)
    support = np.arange(-20, 21)
    assert integer_pvalue(noise, pmf, support) > ALPHA
    assert integer_pvalue(noise, lambda k: pmf(k, t * 1.1), support) < ALPHA


def test_count_sum_mean_match_stats(client):
    x = np.random.default_rng(3).uniform(-1, 3, size=50_000)
    dx = da.from_array(x, chunks=4_321)
    for fn, kw in [("count", {}), ("sum", {"bounds": (0, 2)}), ("mean", {"bounds": (0, 2)})]:
        a = getattr(distributed, fn)(dx, epsilon=0.7, **kw, random_state=rng(4))
        b = getattr(stats, fn)(x, epsilon=0.7, **kw, random_state=rng(4))
        assert a == b, fn
    # exact sums: the per-chunk integers add up to the one-shot total
    plan = release_sums.NoisePlan.calibrate(0.0, 2.0, 0.0, (1,), "laplace", 0.7, 0.0, with_count=False)
    assert distributed._exact(dx, plan, 2) == plan.exact(x)


def test_errors_and_accountant(client):
    x = data(n=1000, d=2)
    x[500, 1] = np.nan
    with pytest.raises(ValueError, match="sample must not contain NaN"):
        distributed.histogramdd(da.from_array(x, chunks=(100, 2)), bins=3,
                                range=[(0, 1)] * 2, epsilon=1.0)
    with pytest.raises(ValueError, match="x must not contain NaN"):
        distributed.sum(da.from_array(x[:, 1], chunks=100), bounds=(0, 1), epsilon=1.0)
    with pytest.raises(ValueError, match=r"range\[0\] is required"):
        distributed.histogramdd(da.zeros((10, 2), chunks=5), bins=3, epsilon=1.0)
    acc = dpcore.Accountant(1.0)
    ok = da.zeros((10, 2), chunks=5)
    distributed.histogramdd(ok, bins=3, range=[(0, 1)] * 2, epsilon=0.6, accountant=acc)
    with pytest.raises(dpcore.BudgetExceeded):
        distributed.histogramdd(ok, bins=3, range=[(0, 1)] * 2, epsilon=0.6, accountant=acc)
    assert len(acc.history) == 1


def test_docstring_examples(client):
    import doctest

    result = doctest.testmod(distributed, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 10


def test_delta_none_is_the_pure_default():
    """delta defaults to None (pure); None and 0.0 give the same seeded releases."""
    x = da.from_array(np.linspace(0, 1, 400), chunks=100)
    for f, kw in ((distributed.count, {}), (distributed.sum, {"bounds": (0, 1)}),
                  (distributed.mean, {"bounds": (0, 1)})):
        a = f(x, epsilon=1.0, random_state=4, **kw)
        assert a == f(x, epsilon=1.0, delta=None, random_state=4, **kw)
        assert a == f(x, epsilon=1.0, delta=0.0, random_state=4, **kw)
    h = distributed.histogram(x, bins=4, range=(0, 1), epsilon=1.0, random_state=4)[0]
    np.testing.assert_array_equal(h, distributed.histogram(x, bins=4, range=(0, 1), epsilon=1.0,
                                                           delta=0.0, random_state=4)[0])
