"""The data-independent structure of random decision trees (Jagannathan, Pillaipakkamnatt,
Wright): :class:`dpcore.learn.RandomForestClassifier` with ``algorithm="random"`` draws its trees
here and counts its records at their leaves (``dpcore.learn._tree``).

Privacy
-------
Nothing here reads data or charges a budget: the trees are a function of the public bounds and of
the generator only (the forest's release is stated and charged in ``dpcore.learn._tree``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["node_arrays", "random_tree_arrays"]


def node_arrays(total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(feature, threshold, left, right, slot) of ``total`` nodes, every one a leaf (-1) with
    threshold 0 until set: the flat node arrays of ``dpcore.learn._tree.Trees``."""
    return (np.full(total, -1, dtype=np.int32), np.zeros(total),
            np.full(total, -1, dtype=np.int32), np.full(total, -1, dtype=np.int32),
            np.full(total, -1, dtype=np.int32))


def random_tree_arrays(lower: np.ndarray, upper: np.ndarray, n_trees: int, depth: int,
                       rng: np.random.Generator) -> dict[str, Any]:
    """The node arrays (the fields of ``dpcore.learn._tree.Trees``) of ``n_trees`` complete
    random trees of depth ``depth`` over the box [lower, upper], drawn with ``rng`` without
    looking at any data: each internal node takes a feature uniformly at random and a threshold
    uniformly in that feature's interval at the node; leaves numbered in order; ``values``
    empty (0 columns)."""
    d = lower.size
    per_tree = 2 ** (depth + 1) - 1
    n_internal = 2**depth - 1
    total = n_trees * per_tree
    feature, threshold, left, right, slot = node_arrays(total)
    # intervals of the current level's nodes only: (n_trees, nodes, d)
    lo = np.broadcast_to(lower, (n_trees, 1, d)).copy()
    hi = np.broadcast_to(upper, (n_trees, 1, d)).copy()
    offsets = np.arange(n_trees) * per_tree
    rows = np.arange(n_trees)[:, None]
    # heap order inside a tree: node i has children 2i + 1 and 2i + 2; a level at a time
    for level in range(depth):
        nodes = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        cols = np.arange(nodes.size)[None, :]
        f = rng.integers(0, d, size=(n_trees, nodes.size))
        a = lo[rows, cols, f]
        b = hi[rows, cols, f]
        t = a + (b - a) * rng.random((n_trees, nodes.size))
        gid = offsets[:, None] + nodes[None, :]
        feature[gid] = f
        threshold[gid] = t
        left[gid] = gid + nodes + 1      # offset + 2i + 1
        right[gid] = gid + nodes + 2
        if level + 1 == depth:
            break
        # children in heap order: (left of node 0, right of node 0, left of node 1, ...)
        lo = np.repeat(lo, 2, axis=1)
        hi = np.repeat(hi, 2, axis=1)
        hi[rows, 2 * cols, f] = t
        lo[rows, 2 * cols + 1, f] = t
    leaves = offsets[:, None] + np.arange(n_internal, per_tree)[None, :]
    slot[leaves.ravel()] = np.arange(leaves.size, dtype=np.int32)
    return dict(feature=feature, threshold=threshold, left=left, right=right, slot=slot,
                roots=offsets.astype(np.int32), values=np.zeros((leaves.size, 0)), depth=depth)
