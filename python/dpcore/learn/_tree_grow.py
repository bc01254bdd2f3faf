"""Growing private trees level by level from their count tables (``dpcore.learn._tree``):
the splits drawn by the exponential mechanism on the public threshold grid, the leaf labels by
exact permute-and-flip. The records are counted by the caller's ``counts`` object (in memory,
``dpcore.learn._tree``; on Dask, ``dpcore.learn._dask.DaskLevelCounts``): only exact integer
tables reach this module.

Privacy
-------
Each call draws inside the caller's release (the tree's epsilon-DP guarantee, stated and charged
by ``DecisionTreeClassifier`` / ``RandomForestClassifier``): splits with
:func:`dpcore.selection.exponential_index` at the calibrated scale of the level's mechanism,
labels with :func:`dpcore.learn._permute_and_flip.permute_and_flip_labels`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dpcore._tree_scores import level_scores
from dpcore.learn._permute_and_flip import permute_and_flip_labels
from dpcore.learn._tree_random import node_arrays
from dpcore.learn._tree_grid import WIDE, bin_threshold
from dpcore.selection import exponential_index

__all__ = ["grow_trees", "level_tables"]


def grow_trees(counts: Any, roots: np.ndarray, grid: tuple, k: int, depth: int, bins: np.ndarray,
               mechs: tuple, leaf_eps: float, criterion: str,
               rng: np.random.Generator) -> dict[str, Any]:
    """Complete trees of depth ``depth``, one per row of ``roots`` (the root tables (T, d, k, B)),
    grown together level by level inside the release (draws with ``rng``); ``counts``
    (``dpcore.learn._tree._RecordCounts`` or its Dask twin, started) counts the records of the levels below the roots.

    Level l holds T 2**l nodes, node r of the level being position r % 2**l of tree r // 2**l
    (its children at the next level are 2r and 2r + 1); in the flat arrays tree t takes
    2**(depth + 1) - 1 nodes in heap order (node i has children 2i + 1 and 2i + 2). Count tables
    are (node, feature, class, bin). A node's class counts come from its parent's table at the
    chosen split; a node's table is counted, or is its parent's minus its sibling's: of each pair
    of siblings only the one with fewer records is counted."""
    n_bins = int(bins.max())   # the tables' width; feature f uses its first bins[f] bins
    d = bins.size
    n_trees = roots.shape[0]
    # split j + 1 of feature f (j = 0 .. n_bins - 2) exists when j + 1 < bins[f]; a node's
    # candidates are the splits strictly inside its box (bins lo[f] .. hi[f] - 1, narrowed by
    # the released splits above), so none leaves a child empty by construction; a node with no
    # split inside its box (every feature cut down to one bin) takes any. The others get -inf:
    # a public exclusion (a function of the released splits only). The base measure weighs
    # each feature with candidates equally, then its thresholds (a feature whose box was
    # narrowed keeps its weight, so a dense region can be cut again): _tree_scores.level_scores
    bins = np.ascontiguousarray(bins, dtype=np.int64)
    lo = np.zeros((n_trees, d), dtype=np.int64)
    hi = np.repeat(bins[None, :], n_trees, axis=0)
    per_tree = 2 ** (depth + 1) - 1
    base = np.arange(n_trees, dtype=np.int32) * per_tree       # flat id of each tree's root
    total = n_trees * per_tree
    feature, threshold, left, right, slot = node_arrays(total)
    class_counts = roots[:, 0].sum(axis=2)  # (m, k): records per class of each node of the level
    parents = None                          # the tables of the level above
    routing: Any = None                     # the level above's splits, to move the records down
    for level in range(depth):
        mech = mechs[level]
        width = 2**level
        m = n_trees * width
        if parents is None:
            tables = np.ascontiguousarray(roots)
        else:
            tables = level_tables(counts, routing, class_counts, np.arange(m), parents)
        inside = np.empty((m, d * (n_bins - 1)), dtype=np.uint8)
        utility = np.empty(inside.shape if mech is not None else (0, 0))
        level_scores(tables, lo, hi, bins, criterion == "gini",
                     0.0 if mech is None else mech.scale, inside, utility)
        split_f = np.empty(m, dtype=np.int32)
        split_j = np.empty(m, dtype=np.int32)
        children = np.empty((2 * m, k), dtype=np.int64)
        for r in range(m):
            if mech is None:   # data-independent: a feature, then one of its thresholds
                choice = random_split(inside[r].view(bool).reshape(d, -1), rng)
            else:
                # the exact sampler behind mech.select, without its release (the fit is the
                # release, charged once): the same draws
                choice = exponential_index(utility[r], mech.scale, random_state=rng)
            f, j = divmod(choice, n_bins - 1)
            t, i = divmod(r, width)
            v = base[t] + width - 1 + i
            feature[v], threshold[v] = f, bin_threshold(grid[0][f], grid[1][f], j + 1)
            left[v] = base[t] + 2 * width - 1 + 2 * i
            right[v] = left[v] + 1
            split_f[r], split_j[r] = f, j + 1
            below = tables[r, f, :, :j + 1].sum(axis=1)   # split j + 1: bins <= j go left
            children[2 * r], children[2 * r + 1] = below, class_counts[r] - below
        class_counts = children
        parents = tables
        routing = (split_f, split_j, 2 * np.arange(m, dtype=np.int32))
        lo, hi = np.repeat(lo, 2, axis=0), np.repeat(hi, 2, axis=0)   # children in level order
        rows = np.arange(m)
        hi[2 * rows, split_f] = np.minimum(hi[2 * rows, split_f], split_j)
        lo[2 * rows + 1, split_f] = np.maximum(lo[2 * rows + 1, split_f], split_j)
    leaves = (base[:, None] + np.arange(2**depth - 1, per_tree)[None, :]).ravel()
    slot[leaves] = np.arange(leaves.size, dtype=np.int32)
    labels = permute_and_flip_labels(class_counts, leaf_eps, rng)
    values = np.zeros((leaves.size, k))
    values[np.arange(leaves.size), labels] = 1.0
    return dict(feature=feature, threshold=threshold, left=left, right=right, slot=slot,
                roots=base, values=values, depth=depth)


def random_split(inside: np.ndarray, rng: np.random.Generator) -> int:
    """The split (index f * (B - 1) + j) of a level that does not look at the data, from public
    values only: ``inside`` (d, B - 1) marks the node's candidate splits (those strictly inside
    its box). Below ``WIDE`` features: a feature with probability proportional to its
    candidates (the room its range has left in the node: one candidate drawn uniformly, its
    feature kept), cut at the middle of its candidates (of the two middle ones, each with
    probability 1/2). From ``WIDE`` features on: a feature uniformly among those with
    candidates, then one of its candidates uniformly. Chosen on bench/dev_suite.py
    (tree-split-law): bisecting wins on narrow tables, the uniform law on wide ones."""
    if inside.shape[0] >= WIDE:
        usable = np.flatnonzero(inside.any(axis=1))
        f = int(usable[rng.integers(usable.size)])
        row = np.flatnonzero(inside[f])
        return f * inside.shape[1] + int(row[rng.integers(row.size)])
    per_feature = inside.sum(axis=1)
    f = int(np.searchsorted(np.cumsum(per_feature), rng.integers(per_feature.sum()),
                            side="right"))
    row = np.flatnonzero(inside[f])
    middle = (row.size - 1) // 2 + (row.size % 2 == 0 and rng.integers(2) == 1)
    return f * inside.shape[1] + int(row[middle])


def level_tables(counts: Any, routing: tuple, class_counts: np.ndarray, growing: np.ndarray,
                 parents: np.ndarray) -> np.ndarray:
    """The tables of the growing nodes of a level (the records moved down to it). Nodes come
    in sibling pairs (2p, 2p + 1) under the p-th growing node of the level above; parents[p]
    is its table."""
    m = class_counts.shape[0]
    sizes = class_counts.sum(axis=1)
    pairs = np.unique(growing // 2)
    counted = 2 * pairs + (sizes[2 * pairs + 1] < sizes[2 * pairs])   # the smaller sibling
    row = np.full(m, -1, dtype=np.int32)
    row[counted] = np.arange(counted.size, dtype=np.int32)
    table = np.zeros((counted.size,) + parents.shape[1:], dtype=np.int64)
    counts.count(routing, row, table)   # moves the records too
    tables = np.empty((growing.size,) + parents.shape[1:], dtype=np.int64)
    own = row[growing] >= 0
    tables[own] = table[row[growing[own]]]
    other = growing[~own]
    tables[~own] = parents[other // 2] - table[row[other ^ 1]]
    return tables
