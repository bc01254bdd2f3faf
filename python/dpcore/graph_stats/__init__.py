"""Private graph statistics: degree sequence and distribution, triangle and k-star counts.

Every release here but :func:`degree_distribution_node_dp` protects the **edges** of a graph on
a **public vertex set**: two graphs are neighbours when they have the same vertices
``0..n_nodes-1`` and differ in exactly one edge (edge-DP). :func:`degree_distribution_node_dp`
protects a whole vertex's edges (node-DP on the same public vertex set). The vertex count
``n_nodes`` is a public, required argument, never taken from the edges (a vertex without an edge
is still a vertex).

* :func:`degree_sequence`: the sorted degree sequence with exact discrete Laplace noise, made
  consistent (nondecreasing) by isotonic regression, rounded and clamped to [0, n - 1]
  (Hay, Li, Miklau, Jensen 2009). :func:`degree_distribution` is its histogram.
* :func:`triangle_count`: the number of triangles, by default with pure epsilon-DP by ladder
  functions (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2015: an exponential mechanism whose
  rungs are the local sensitivities at distance t), or with (epsilon, delta)-DP by noise scaled
  to a smooth upper bound on the local sensitivity (Nissim, Raskhodnikova, Smith 2007; Karwa,
  Raskhodnikova, Smith, Yaroslavtsev 2011); both usually far below the global sensitivity n - 2.
* :func:`degree_distribution_node_dp`: the degree distribution under **node**-DP, after an
  edge-addition projection to a public maximum degree D (Day, Li, Lyu 2016's projection; our
  sensitivity bound, :func:`node_degree_sensitivity`).
* :func:`kstar_count`: the number of k-stars (a vertex with k of its neighbours), likewise by
  ladder functions (default) or smooth sensitivity (Karwa et al. 2011).
* :func:`triangle_local_sensitivity`, :func:`triangle_smooth_sensitivity`,
  :func:`kstar_local_sensitivity`, :func:`kstar_smooth_sensitivity`: the data-dependent bounds
  themselves (not releases; for inspection and tests).

The counting loops (CSR adjacency, triangles, common neighbours of all pairs, degree pairs for
k-stars, the degree-bounded projection, pool adjacent violators) are the ``dpcore._graph_stats``
kernel. Releases check every argument first, then
charge the accountant once (``dpcore._release.release``), then draw; error messages name the
parameter and never quote a private value (the edge count, a degree).

References
----------
[HLMJ09] M. Hay, C. Li, G. Miklau, D. Jensen, "Accurate estimation of the degree distribution of
private networks", ICDM 2009.
[NRS07] K. Nissim, S. Raskhodnikova, A. Smith, "Smooth sensitivity and sampling in private data
analysis", STOC 2007.
[KRSY11] V. Karwa, S. Raskhodnikova, A. Smith, G. Yaroslavtsev, "Private analysis of graph
structure", VLDB 2011.
[DLL16] W.-Y. Day, N. Li, M. Lyu, "Publishing graph degree distribution with node differential
privacy", SIGMOD 2016.
[ZCPSX15] J. Zhang, G. Cormode, C. M. Procopiuc, D. Srivastava, X. Xiao, "Private release of
graph statistics using ladder functions", SIGMOD 2015.
"""
from dpcore.graph_stats._degrees import (
    DEGREE_SENSITIVITY,
    degree_distribution,
    degree_distribution_node_dp,
    degree_sequence,
    node_degree_sensitivity,
)
from dpcore.graph_stats._kstars import (
    MAX_STAR_SIZE,
    kstar_count,
    kstar_local_sensitivity,
    kstar_smooth_sensitivity,
)
from dpcore.graph_stats._triangles import (
    triangle_count,
    triangle_local_sensitivity,
    triangle_smooth_sensitivity,
)

__all__ = [
    "degree_sequence",
    "degree_distribution",
    "triangle_count",
    "triangle_local_sensitivity",
    "triangle_smooth_sensitivity",
    "kstar_count",
    "kstar_local_sensitivity",
    "kstar_smooth_sensitivity",
    "degree_distribution_node_dp",
    "node_degree_sensitivity",
    "DEGREE_SENSITIVITY",
    "MAX_STAR_SIZE",
]
