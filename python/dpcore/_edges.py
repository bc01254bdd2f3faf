"""Input checks for graphs on a public vertex set, shared by ``dpcore.graph`` and
``dpcore.graph_stats`` (one source of truth for both; ``graph`` re-exports ``graph_stats``, so the
checks live below both).

A graph is a networkx graph (its nodes are the vertex set, numbered in iteration order) or an
(m, 2) integer edge array of vertex ids in [0, n). Errors name the argument and never quote the
edges or their number m (private under edge-DP); the vertex count is public and checked first.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dpcore import _validation as check

__all__ = ["MAX_NODES", "check_n_nodes", "is_networkx", "networkx_edges", "edge_array",
           "simple_edges", "unique"]

#: Largest vertex count: the kernels index vertices with int32 and pairs u * n + v with int64.
MAX_NODES = 2**26


def check_n_nodes(n_nodes: Any, name: str = "n_nodes") -> int:
    """The public vertex count as an int in [3, MAX_NODES]."""
    n = check.integer(n_nodes, name)
    if n < 3:
        raise ValueError(f"{name} must be at least 3, got {n}")
    if n > MAX_NODES:
        raise ValueError(f"{name} must be at most MAX_NODES = 2**26 = {MAX_NODES} (the kernels' "
                         f"int32 vertex indices), got {n}")
    return n


def is_networkx(G: Any) -> bool:
    """Whether ``G`` looks like a networkx graph (duck-typed: networkx is not imported)."""
    return hasattr(G, "edges") and hasattr(G, "nodes") and hasattr(G, "is_directed")


def networkx_edges(G: Any, name: str) -> tuple[list[Any], np.ndarray]:
    """(labels, edges): the nodes in order and the edges as an (m, 2) int64 array of indices."""
    if G.is_directed():
        raise TypeError(f"{name} must be an undirected graph, got a directed {type(G).__name__}")
    labels = list(G.nodes())
    index = {node: i for i, node in enumerate(labels)}
    pairs = [(index[a], index[b]) for a, b in G.edges()]
    return labels, np.array(pairs, dtype=np.int64).reshape(-1, 2)


def edge_array(G: Any, n: int, name: str) -> np.ndarray:
    """An (m, 2) integer array of vertex ids in [0, n), as int64."""
    try:
        edges = np.asarray(G)
    except Exception as exc:
        # the message of numpy's error may quote entries or the edge count: not kept
        raise TypeError(f"{name} must be a networkx graph or an (m, 2) integer array "
                        f"({type(exc).__name__})") from None
    if edges.size == 0:
        edges = edges.reshape(0, 2) if edges.ndim < 2 or edges.shape[-1] == 2 else edges
    if edges.dtype == np.bool_ or not np.issubdtype(edges.dtype, np.integer):
        raise TypeError(f"{name} must be an (m, 2) integer edge array, got dtype {edges.dtype}")
    if edges.ndim != 2 or edges.shape[1] != 2:
        # never the shape itself: its m is the private edge count
        got = f"{edges.ndim} dimensions" if edges.ndim != 2 else f"{edges.shape[1]} columns"
        raise ValueError(f"{name} must have shape (m, 2), got an array with {got}")
    edges = edges.astype(np.int64)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"{name} holds vertex ids outside [0, n_nodes) = [0, {n})")
    return edges


def unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array (sort and compare neighbours: faster here than
    numpy.unique, which hashes)."""
    values = np.sort(values)
    if values.size:
        values = values[np.concatenate([[True], values[1:] != values[:-1]])]
    return values


def simple_edges(edges: np.ndarray, n: int, simplify: bool | np.bool_, name: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(u, v): the distinct edges u < v as int32 arrays sorted by (u, v). Self-loops and repeated
    edges raise unless ``simplify``, which drops them."""
    loops = edges[:, 0] == edges[:, 1]
    if loops.any():
        if not simplify:
            raise ValueError(f"{name} has self-loops: pass simplify=True to drop them")
        edges = edges[~loops]
    keys = np.minimum(edges[:, 0], edges[:, 1]) * n + np.maximum(edges[:, 0], edges[:, 1])
    distinct = unique(keys)
    if distinct.size != keys.size and not simplify:
        raise ValueError(f"{name} has repeated edges: pass simplify=True to drop them")
    return (distinct // n).astype(np.int32), (distinct % n).astype(np.int32)
