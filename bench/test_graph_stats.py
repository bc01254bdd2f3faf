"""Benchmarks of dpcore.graph_stats and its ``_graph_stats`` kernel.

Instances: Watts-Strogatz graphs from networkx (k = 10 neighbours, rewiring p = 0.1, seed
20261125) with n vertices; ``n`` in extra_info is the vertex count.

Group "graph-triangles": counting the triangles. Contenders:

* ``dpcore-kernel`` (role dpcore): ``_graph_stats.count_triangles`` on the CSR rows (merge of the
  sorted rows of both ends of every edge), CSR construction included (``_adjacency``: validation,
  dedup, counting sort).
* ``scipy-sparse`` (role naive): sum((A @ A) .* A) / 6 with a scipy.sparse CSR matrix.
* ``networkx`` (role naive, smoke size 10**3): ``sum(nx.triangles(G).values()) // 3``.

Group "graph-pair-profile": for every c, the largest b over vertex pairs with c common neighbours
(what the triangle count's smooth sensitivity needs). Contenders:

* ``dpcore-kernel``: ``_graph_stats.pair_profile`` (wedge enumeration + degree-ordered scan),
  the Pareto reduction and the exact maximum over s included
  (:func:`dpcore.graph_stats.triangle_smooth_sensitivity` minus validation).
* ``numpy-dense`` (role naive, n <= 2000): C = A @ A dense, B = d_i + d_j - 2 A - 2 C over all
  pairs, ``np.maximum.at``.

Group "graph-isotonic": least-squares nondecreasing fit of n noisy sorted degrees.
``dpcore-kernel`` (``isotonic_nondecreasing``) against ``scipy-isotonic``
(``scipy.optimize.isotonic_regression``, compiled; role naive).

Group "graph-release": the whole releases at epsilon = 1 (delta = 1e-6 for the counts):
``dpcore-degree-sequence``, ``dpcore-triangle-count``, ``dpcore-2star-count`` (validation,
counting, smooth bound and the exact noise draw), ``dpcore-triangle-count-ladder`` (pure
epsilon-DP: counting, the ladder and its exact draw) and
``dpcore-degree-distribution-node-dp`` (D = 20).

Every contender's output is checked against the others (networkx's triangle count, the dense
profile, scipy's fit).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from common import DPCORE, NAIVE, dpcore_api, record

K, P, SEED = 10, 0.1, 20261125


@functools.lru_cache(maxsize=None)
def instance(n):
    nx = pytest.importorskip("networkx")
    G = nx.watts_strogatz_graph(n, K, P, seed=SEED)
    return G, np.array(G.edges(), dtype=np.int64)


def scipy_triangles(n, edges):
    sparse = pytest.importorskip("scipy.sparse")
    ones = np.ones(edges.shape[0])
    A = sparse.coo_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    A = A + A.T
    return int(round((A @ A).multiply(A).sum() / 6))


def dense_profile(n, edges):
    A = np.zeros((n, n))  # float64: BLAS matmul, exact for these small counts
    A[edges[:, 0], edges[:, 1]] = 1
    A[edges[:, 1], edges[:, 0]] = 1
    d = A.sum(axis=1)
    C = A @ A
    B = d[:, None] + d[None, :] - 2 * A - 2 * C
    iu = np.triu_indices(n, 1)
    maxb = np.full(n - 1, -1, dtype=np.int64)
    np.maximum.at(maxb, C[iu].astype(np.int64), B[iu].astype(np.int64))
    return maxb


def kernel_profile(n, edges):
    from dpcore import _graph_stats
    from dpcore.graph_stats import _input

    _, indptr, indices = _input._adjacency(edges, n, False)
    order = np.argsort(-np.diff(indptr), kind="stable").astype(np.int64)
    return _graph_stats.pair_profile(indptr, indices, order)


def truth(n):
    G, _ = instance(n)
    import networkx as nx

    return sum(nx.triangles(G).values()) // 3


# ------------------------------------------------------------------------------------------
# triangles


@pytest.mark.parametrize("size", [10**3, 10**4, 10**5, 10**6], indirect=True)
def test_triangles_kernel(benchmark, size):
    dpcore_api()
    from dpcore import _graph_stats
    from dpcore.graph_stats import _input

    record(benchmark, n=size, contender="dpcore-kernel", role=DPCORE, group="graph-triangles")
    _, edges = instance(size)

    def run():
        _, indptr, indices = _input._adjacency(edges, size, False)
        return _graph_stats.count_triangles(indptr, indices)

    out = benchmark(run)
    assert out == scipy_triangles(size, edges)
    if size <= 10**4:
        assert out == truth(size)


@pytest.mark.parametrize("size", [10**3, 10**4, 10**5, 10**6], indirect=True)
def test_triangles_scipy_sparse(benchmark, size):
    record(benchmark, n=size, contender="scipy-sparse", role=NAIVE, group="graph-triangles")
    _, edges = instance(size)
    out = benchmark(scipy_triangles, size, edges)
    if size <= 10**4:
        assert out == truth(size)


@pytest.mark.peer
@pytest.mark.parametrize("size", [10**3, 10**4, 10**5], indirect=True)
def test_triangles_networkx(benchmark, size):
    nx = pytest.importorskip("networkx")
    record(benchmark, n=size, contender="networkx", role=NAIVE, group="graph-triangles")
    G, edges = instance(size)
    out = benchmark(lambda: sum(nx.triangles(G).values()) // 3)
    assert out == scipy_triangles(size, edges)


# ------------------------------------------------------------------------------------------
# pair profile (the smooth sensitivity's input)


@pytest.mark.parametrize("size", [10**3, 2000, 10**5, 10**6], indirect=True)
def test_profile_kernel(benchmark, size):
    dpcore_api()
    from dpcore import graph_stats as gs

    record(benchmark, n=size, contender="dpcore-kernel", role=DPCORE, group="graph-pair-profile")
    _, edges = instance(size)
    out = benchmark(gs.triangle_smooth_sensitivity, edges, n_nodes=size, beta=0.02)
    assert 1.0 <= out <= size
    if size <= 2000:
        assert kernel_profile(size, edges).tolist() == dense_profile(size, edges).tolist()


@pytest.mark.parametrize("size", [10**3, 2000], indirect=True)
def test_profile_numpy_dense(benchmark, size):
    record(benchmark, n=size, contender="numpy-dense", role=NAIVE, group="graph-pair-profile")
    _, edges = instance(size)
    out = benchmark(dense_profile, size, edges)
    assert out[0] >= 0


# ------------------------------------------------------------------------------------------
# isotonic regression


def noisy_degrees(n):
    rng = np.random.default_rng(SEED)
    return np.sort(rng.poisson(10, n)).astype(float) + rng.laplace(0, 2.0, n)


@pytest.mark.parametrize("size", [10**3, 10**5, 10**6], indirect=True)
def test_isotonic_kernel(benchmark, size):
    dpcore_api()
    from dpcore import _graph_stats

    record(benchmark, n=size, contender="dpcore-kernel", role=DPCORE, group="graph-isotonic")
    y = noisy_degrees(size)
    out = benchmark(_graph_stats.isotonic_nondecreasing, y)
    from scipy.optimize import isotonic_regression

    np.testing.assert_allclose(out, isotonic_regression(y).x, atol=1e-8)


@pytest.mark.parametrize("size", [10**3, 10**5, 10**6], indirect=True)
def test_isotonic_scipy(benchmark, size):
    optimize = pytest.importorskip("scipy.optimize")
    record(benchmark, n=size, contender="scipy-isotonic", role=NAIVE, group="graph-isotonic")
    y = noisy_degrees(size)
    out = benchmark(lambda: optimize.isotonic_regression(y).x)
    assert np.all(np.diff(out) >= -1e-12)


# ------------------------------------------------------------------------------------------
# whole releases


@pytest.mark.parametrize("size", [4000, 10**5], indirect=True)
def test_release_degree_sequence(benchmark, size):
    dpcore_api()
    from dpcore.graph_stats import degree_sequence

    record(benchmark, n=size, contender="dpcore-degree-sequence", role=DPCORE, group="graph-release")
    _, edges = instance(size)
    out = benchmark(degree_sequence, edges, n_nodes=size, epsilon=1.0, random_state=1)
    assert out.shape == (size,) and np.all(np.diff(out) >= 0)


@pytest.mark.parametrize("size", [4000, 10**5], indirect=True)
def test_release_triangle_count(benchmark, size):
    dpcore_api()
    from dpcore.graph_stats import triangle_count

    record(benchmark, n=size, contender="dpcore-triangle-count", role=DPCORE, group="graph-release")
    _, edges = instance(size)
    out = benchmark(triangle_count, edges, n_nodes=size, epsilon=1.0, delta=1e-6, random_state=1)
    assert abs(out - scipy_triangles(size, edges)) < 2000  # scale about 31 here



@pytest.mark.parametrize("size", [4000, 10**5], indirect=True)
def test_release_triangle_count_ladder(benchmark, size):
    dpcore_api()
    from dpcore.graph_stats import triangle_count

    record(benchmark, n=size, contender="dpcore-triangle-count-ladder", role=DPCORE,
           group="graph-release")
    _, edges = instance(size)
    out = benchmark(triangle_count, edges, n_nodes=size, epsilon=1.0, random_state=1)
    assert abs(out - scipy_triangles(size, edges)) < 2000  # mean |error| about 25 here


@pytest.mark.parametrize("size", [4000, 10**5], indirect=True)
def test_release_kstar_count(benchmark, size):
    dpcore_api()
    from dpcore.graph_stats import kstar_count

    record(benchmark, n=size, contender="dpcore-2star-count", role=DPCORE, group="graph-release")
    _, edges = instance(size)
    out = benchmark(kstar_count, edges, n_nodes=size, k=2, epsilon=1.0, delta=1e-6, random_state=1)
    deg = np.bincount(edges.ravel(), minlength=size)
    assert abs(out - int((deg * (deg - 1) // 2).sum())) < 4000  # scale about 61 here


@pytest.mark.parametrize("size", [4000, 10**5], indirect=True)
def test_release_degree_distribution_node_dp(benchmark, size):
    dpcore_api()
    from dpcore.graph_stats import degree_distribution_node_dp

    record(benchmark, n=size, contender="dpcore-degree-distribution-node-dp", role=DPCORE,
           group="graph-release")
    _, edges = instance(size)
    out = benchmark(degree_distribution_node_dp, edges, n_nodes=size, max_degree=20,
                    epsilon=1.0, random_state=1)
    assert out.shape == (21,) and out.sum() == size

# ------------------------------------------------------------------------------------------
# accuracy on the 4,000-vertex Watts-Strogatz graph, by hand:
#
#     PYTHONPATH=python python bench/test_graph_stats.py accuracy [draws]


def accuracy(draws=1000):
    """Mean absolute error of triangle_count and kstar_count (k = 2, 3), by smooth sensitivity
    (delta = 1e-6) and by the pure epsilon-DP ladder, at epsilon = 1 on
    nx.watts_strogatz_graph(4000, 10, 0.1, seed=1), against the Laplace mechanism for the
    global sensitivity (mean absolute error = sensitivity / epsilon), and of degree_sequence /
    degree_distribution at epsilon = 1."""
    import math

    import networkx as nx

    from dpcore import graph_stats as gs
    from dpcore._smooth import SmoothMedianPlan

    n, eps, delta = 4000, 1.0, 1e-6
    G = nx.watts_strogatz_graph(n, 10, 0.1, seed=1)
    edges = np.array(G.edges(), dtype=np.int64)
    deg = np.sort([d for _, d in G.degree()])
    rng = np.random.default_rng(2026)
    plan = SmoothMedianPlan.calibrate(eps, delta)
    print(f"graph: n={n}, m={len(edges)}, beta={plan.beta:.5f}, alpha={float(plan.alpha)}")
    truth = sum(nx.triangles(G).values()) // 3
    cases = [("triangles", truth, n - 2,
              lambda: gs.triangle_count(edges, n_nodes=n, epsilon=eps, delta=delta, random_state=rng),
              gs.triangle_smooth_sensitivity(edges, n_nodes=n, beta=plan.beta),
              gs.triangle_local_sensitivity(edges, n_nodes=n))]
    for k in (2, 3):
        cases.append((f"{k}-stars", sum(math.comb(int(d), k) for d in deg), 2 * math.comb(n - 2, k - 1),
                      lambda k=k: gs.kstar_count(edges, n_nodes=n, k=k, epsilon=eps, delta=delta,
                                                 random_state=rng),
                      gs.kstar_smooth_sensitivity(edges, n_nodes=n, k=k, beta=plan.beta),
                      gs.kstar_local_sensitivity(edges, n_nodes=n, k=k)))
    for name, true, gsens, call, smooth, local in cases:
        err = np.mean([abs(call() - true) for _ in range(draws)])
        print(f"{name}: true={true}, LS={local}, smooth S={smooth:.3f}, noise scale 2S/eps="
              f"{2 * smooth / eps:.2f}, mean |error| over {draws} draws={err:.2f}; global "
              f"sensitivity {gsens} -> Laplace mean |error| {gsens / eps:.0f}; ratio "
              f"{gsens / eps / err:.0f}x")
    ladders = [("triangles", truth, n - 2, lambda: gs.triangle_count(
        edges, n_nodes=n, epsilon=eps, random_state=rng))]
    for k in (2, 3):
        ladders.append((f"{k}-stars", sum(math.comb(int(d), k) for d in deg),
                        2 * math.comb(n - 2, k - 1),
                        lambda k=k: gs.kstar_count(edges, n_nodes=n, k=k, epsilon=eps,
                                                   random_state=rng)))
    for name, true, gsens, call in ladders:
        err = np.mean([abs(call() - true) for _ in range(draws)])
        print(f"{name}, ladder (pure epsilon-DP, delta = 0): mean |error| over {draws} draws="
              f"{err:.2f}; global sensitivity {gsens} -> Laplace mean |error| "
              f"{gsens / eps:.0f}; ratio {gsens / eps / err:.0f}x")
    seq = [np.mean(np.abs(gs.degree_sequence(edges, n_nodes=n, epsilon=eps, random_state=rng) - deg))
           for _ in range(50)]
    hist = np.bincount(deg, minlength=n)
    dist = [np.abs(gs.degree_distribution(edges, n_nodes=n, epsilon=eps, random_state=rng) - hist).sum()
            for _ in range(50)]
    print(f"degree_sequence: mean |error| per vertex {np.mean(seq):.3f} (raw discrete Laplace "
          f"noise of scale 2: {2 * math.exp(-0.5) / (1 - math.exp(-1)):.3f}); degree_distribution: "
          f"L1 error {np.mean(dist):.1f} of {n} vertices")


if __name__ == "__main__":
    import sys

    if len(sys.argv) >= 2 and sys.argv[1] == "accuracy":
        accuracy(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    else:
        sys.exit("usage: python bench/test_graph_stats.py accuracy [draws]")
