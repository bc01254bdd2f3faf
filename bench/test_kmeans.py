"""Benchmarks and utility of private k-means (``dpcore.learn._kmeans.KMeans``).

Data: ``make_blobs`` with n = 10**5 records, d = 2 features, k = 5 centres in the box
(-10, 10), cluster standard deviation 1, data seed 0 (well separated); public bounds (-15, 15).
Utility is the k-means cost (sum of squared distances to the nearest released centre, computed
here on the data) divided by scikit-learn's non-private ``KMeans(n_init=10)`` cost.

Group ``kmeans-fit-1e5``: one fit at epsilon = 1. Contenders:

* ``dpcore-kmeans`` (role dpcore): ``KMeans(5, epsilon=1, bounds=(-15, 15))``, defaults (noisy
  histogram start, 2 noisy Lloyd iterations, exact discrete Laplace on integer sums).
* ``numpy-dplloyd`` (role naive): textbook DPLloyd (Su et al. 2016) in plain NumPy
  (:func:`naive_dplloyd`): centres drawn uniformly in the bounds, 5 iterations, epsilon split
  equally over them and halved between counts and sums, floating-point Laplace noise from
  ``numpy.random`` (NOT private in floating point: a baseline only).
* ``diffprivlib-kmeans`` (peer): diffprivlib's ``KMeans`` with the same epsilon and bounds
  (skipped when diffprivlib is not installed).

The dpcore contender must reach cost ratio <= 1.2; the others are only checked to return k
finite centres. ``python bench/test_kmeans.py cost [--repeats 20]`` prints the median (and
worst) cost ratio over noise seeds at epsilon in {0.5, 1, 2, 5} for every contender available
(also ``KMeans(method="sample_aggregate")``, replace-one neighbours).
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from common import DPCORE, NAIVE, PEER, dpcore_api, peer, record

N = 10**5
D = 2
K = 5
EPS = 1.0
BOUNDS = (-15.0, 15.0)
EPSILONS = (0.5, 1.0, 2.0, 5.0)

_DATA = {}


def blobs(n=N, d=D, k=K):
    if (n, d, k) not in _DATA:
        from sklearn.cluster import KMeans as SkKMeans
        from sklearn.datasets import make_blobs

        X = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.0,
                       center_box=(-10.0, 10.0), random_state=0)[0]
        X.setflags(write=False)
        base = SkKMeans(n_clusters=k, n_init=10, random_state=0).fit(X).inertia_
        _DATA[(n, d, k)] = (X, base)
    return _DATA[(n, d, k)]


def cost(X, centers):
    c = np.asarray(centers, dtype=float)
    d2 = (X * X).sum(axis=1)[:, None] - 2.0 * X @ c.T + (c * c).sum(axis=1)[None, :]
    return float(np.maximum(d2, 0).min(axis=1).sum())


def naive_dplloyd(X, k, *, epsilon, bounds, n_iter=5, seed=0):
    """Textbook DPLloyd: uniform random start, n_iter iterations of Laplace-noised counts and
    sums (epsilon / n_iter each, halved between them; L1 sensitivities 1 and d max|bound|)."""
    rng = np.random.default_rng(seed)  # insecure-ok: benchmark twin, not a release
    lower, upper = bounds
    X = np.clip(X, lower, upper)
    d = X.shape[1]
    centers = rng.uniform(lower, upper, (k, d))
    e = epsilon / n_iter / 2
    for _ in range(n_iter):
        labels = np.argmin(((X[:, None, :] - centers[None]) ** 2).sum(axis=2), axis=1)
        counts = np.bincount(labels, minlength=k) + rng.laplace(0, 1 / e, k)
        sums = np.stack([np.bincount(labels, weights=X[:, j], minlength=k) for j in range(d)],
                        axis=1)
        sums += rng.laplace(0, d * max(abs(lower), abs(upper)) / e, (k, d))
        ok = counts > 1
        centers[ok] = np.clip(sums[ok] / counts[ok, None], lower, upper)
    return centers


def dpcore_centers(X, epsilon, seed):
    from dpcore.learn._kmeans import KMeans

    return KMeans(K, epsilon=epsilon, bounds=BOUNDS, random_state=seed).fit(X).cluster_centers_


def sample_aggregate_centers(X, epsilon, seed):
    from dpcore.learn._kmeans import KMeans

    return KMeans(K, epsilon=epsilon, bounds=BOUNDS, method="sample_aggregate",
                  random_state=seed).fit(X).cluster_centers_


def diffprivlib_centers(X, epsilon, seed):
    from diffprivlib import models

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return models.KMeans(n_clusters=K, epsilon=epsilon, bounds=BOUNDS,
                             random_state=seed).fit(X).cluster_centers_


def _finite(centers):
    assert np.shape(centers) == (K, D) and np.all(np.isfinite(centers))


# ------------------------------------------------------------------------------------------------
# Fit time at n = 10**5, epsilon = 1

def test_dpcore_fit(benchmark):
    dpcore_api()
    from dpcore.learn._kmeans import KMeans

    X, base = blobs()
    gen = np.random.default_rng(0)  # insecure-ok: benchmark seeds

    def fit():
        return KMeans(K, epsilon=EPS, bounds=BOUNDS, random_state=gen).fit(X)

    record(benchmark, n=N, contender="dpcore-kmeans", role=DPCORE, group="kmeans-fit-1e5")
    km = benchmark.pedantic(fit, rounds=5, iterations=1, warmup_rounds=1)
    assert cost(X, km.cluster_centers_) / base <= 1.2


def test_numpy_fit(benchmark):
    dpcore_api()
    X, _ = blobs()
    record(benchmark, n=N, contender="numpy-dplloyd", role=NAIVE, group="kmeans-fit-1e5")
    centers = benchmark.pedantic(naive_dplloyd, args=(X, K),
                                 kwargs={"epsilon": EPS, "bounds": BOUNDS}, rounds=3,
                                 iterations=1)
    _finite(centers)


@pytest.mark.peer
def test_diffprivlib_fit(benchmark):
    peer("diffprivlib.models", "diffprivlib")
    X, _ = blobs()
    record(benchmark, n=N, contender="diffprivlib-kmeans", role=PEER, group="kmeans-fit-1e5")
    centers = benchmark.pedantic(diffprivlib_centers, args=(X, EPS, 0), rounds=3, iterations=1)
    _finite(centers)


@pytest.mark.peer
def test_cost_not_worse_than_diffprivlib():
    dpcore_api()
    peer("diffprivlib.models", "diffprivlib")
    X, _ = blobs()
    for eps in EPSILONS:
        ours = np.median([cost(X, dpcore_centers(X, eps, s)) for s in range(5)])
        theirs = np.median([cost(X, diffprivlib_centers(X, eps, s)) for s in range(5)])
        assert ours <= theirs, (eps, ours, theirs)


# ------------------------------------------------------------------------------------------------
# Cost table

def cost_table(repeats=20):
    X, base = blobs()
    contenders = {"dpcore": dpcore_centers,
                  "dpcore-sample-aggregate": sample_aggregate_centers,
                  "numpy-dplloyd": lambda X, e, s: naive_dplloyd(X, K, epsilon=e, bounds=BOUNDS,
                                                                 seed=s)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import diffprivlib  # noqa: F401
        contenders["diffprivlib"] = diffprivlib_centers
    except ImportError:
        print("diffprivlib not installed: skipped")
    print(f"k-means cost / scikit-learn cost ({base:.6g}); n={N}, d={D}, k={K}, "
          f"median [worst] over {repeats} noise seeds")
    for eps in EPSILONS:
        row = []
        for name, fn in contenders.items():
            r = np.array([cost(X, fn(X, eps, s)) / base for s in range(repeats)])
            row.append(f"{name} {np.median(r):.4f} [{r.max():.4f}]")
        print(f"epsilon={eps}: " + "; ".join(row))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "cost":
        reps = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 20
        cost_table(reps)
    else:
        print(__doc__)
