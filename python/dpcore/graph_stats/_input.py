"""Graph input of the graph statistics: the validated simple graph on a public vertex set, as
sorted edge pairs or CSR rows (the counting kernels' input).
"""
from __future__ import annotations

import numpy as np

from dpcore import _edges, _graph_stats


def _adjacency(G, n_nodes, simplify, name="G"):
    """(n, indptr, indices): the validated simple graph as sorted CSR rows."""
    n, u, v = _pairs(G, n_nodes, simplify, name)
    indptr, indices = _graph_stats.csr_adjacency(n, u, v)
    return n, indptr, indices


def _pairs(G, n_nodes, simplify, name="G"):
    """(n, u, v): the validated simple graph's edges u < v as int32 arrays sorted by (u, v)."""
    n = _edges.check_n_nodes(n_nodes)  # first: the vertex count is public
    if not isinstance(simplify, (bool, np.bool_)):
        raise TypeError(f"simplify must be a bool, got {type(simplify).__name__}")
    if _edges.is_networkx(G):
        labels, edges = _edges.networkx_edges(G, name)
        if len(labels) != n:  # the node set is public
            raise ValueError(f"n_nodes must equal the number of nodes of the networkx graph {name}")
    else:
        edges = _edges.edge_array(G, n, name)
    u, v = _edges.simple_edges(edges, n, simplify, name)
    return n, u, v


def _pair_frontier(profile, indptr, indices):
    """(a, b) int64 arrays: the Pareto frontier of a per-pair profile kernel (``pair_profile``
    or ``star_profile``), which returns, for each first value a some vertex pair has, the largest
    second value b of such a pair (-1: none). Kept: the pairs whose b exceeds the b of every
    larger a (the others are dominated in both)."""
    degrees = np.diff(indptr)
    order = np.argsort(-degrees, kind="stable").astype(np.int64)
    best = profile(indptr, indices, order)
    a = np.flatnonzero(best >= 0).astype(np.int64)
    b = best[a]
    later = np.maximum.accumulate(b[::-1])[::-1]
    keep = np.ones(a.size, dtype=bool)
    keep[:-1] = b[:-1] > later[1:]
    return a[keep], b[keep]
