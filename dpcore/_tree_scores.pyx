# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The split scores of one level of the private trees (dpcore.learn._tree_grow), in one pass.

For every node of a level: the candidate splits strictly inside the node's box, the base
measure's offsets (each feature with candidates equally likely) and the split quality of every
candidate from the node's count table: what dpcore.learn._tree_grid's ``split_utility`` and
``_base_offsets`` compute in NumPy, without the per-call overhead of some forty small array
operations a level (about a fifth of a tree fit at 10^5 records).

Nothing here draws or chooses: the scores are public functions of count tables whose
sensitivity dpcore.learn._tree_grid.split_sensitivity states (its rounding analysis covers these
loops: the same 2k + 2 rounded terms per split, the same offsets on the 2**-14 grid).
"""
from libc.math cimport INFINITY, fabs, log, nearbyint
from libc.stdint cimport int64_t, uint8_t

import numpy as np


cdef double OFFSET_GRID = 2.0**-14   # dpcore.learn._tree_grid._OFFSET_GRID
cdef double OFFSET_LIMIT = 2.0**36


def level_scores(const int64_t[:, :, :, ::1] tables,   # IN  (m, d, k, B) counts of each node
                 const int64_t[:, ::1] lo,             # IN  (m, d) box: bins lo .. hi - 1
                 const int64_t[:, ::1] hi,
                 const int64_t[::1] bins,              # IN  (d,) bins of each feature
                 bint gini,                            # criterion: "gini" (else "max")
                 double scale,                         # score scale, 0: no quality needed
                 uint8_t[:, ::1] inside,               # OUT (m, d (B - 1)) candidate splits
                 double[:, ::1] utility):              # OUT (m, d (B - 1)) quality + offset
    """Split j + 1 of feature f (column f (B - 1) + j) of node r is a candidate when lo[r, f] <
    j + 1 < hi[r, f]; a node without any takes every split of the grid (j + 1 < bins[f]).
    With scale > 0: utility = quality + offset of the feature, -inf for the non-candidates;
    the quality of a split from the class counts of its two sides (bins <= j, bins > j), as
    ``split_utility``; the offset -log(candidates of f) / scale on the 2**-14 grid, all 0 when
    one would reach 2**36 in size, as ``_base_offsets``."""
    cdef Py_ssize_t m = tables.shape[0], d = tables.shape[1], k = tables.shape[2]
    cdef Py_ssize_t B = tables.shape[3], S = B - 1
    cdef Py_ssize_t r, f, j, c, count
    cdef bint any_inside, usable_zero = False
    cdef double offset, left_sq, right_sq, left_n, right_n, value, q
    cdef int64_t left_max, right_max, a, b
    if (lo.shape[0] != m or hi.shape[0] != m or lo.shape[1] != d or hi.shape[1] != d
            or bins.shape[0] != d or inside.shape[0] != m or inside.shape[1] != d * S
            or (scale > 0 and (utility.shape[0] != m or utility.shape[1] != d * S))):
        raise ValueError("tables, lo, hi, bins, inside and utility must agree in shape")
    cdef int64_t[::1] left_counts = np.zeros(k, dtype=np.int64)
    cdef int64_t[::1] node_counts = np.zeros(k, dtype=np.int64)
    cdef double[:, ::1] offsets = np.zeros((m, d))   # of each node's features
    with nogil:
        for r in range(m):
            any_inside = False
            for f in range(d):
                for j in range(S):
                    inside[r, f * S + j] = lo[r, f] < j + 1 < hi[r, f]
                    any_inside = any_inside or inside[r, f * S + j]
            if not any_inside:
                for f in range(d):
                    for j in range(S):
                        inside[r, f * S + j] = j + 1 < bins[f]
        if scale > 0:
            # -log(candidates of f) / scale, all 0 when one reaches 2**36 in size (the rule is
            # global, as _base_offsets'), else on the 2**-14 grid
            for r in range(m):
                for f in range(d):
                    count = 0
                    for j in range(S):
                        count += inside[r, f * S + j]
                    if count:
                        offsets[r, f] = -log(<double>count) / scale
                        usable_zero = usable_zero or fabs(offsets[r, f]) >= OFFSET_LIMIT
            for r in range(m):
                for f in range(d):
                    offset = 0.0
                    if not usable_zero:
                        offset = nearbyint(offsets[r, f] / OFFSET_GRID) * OFFSET_GRID
                    for c in range(k):
                        node_counts[c] = 0
                        left_counts[c] = 0
                        for j in range(B):
                            node_counts[c] += tables[r, f, c, j]
                    for j in range(S):
                        for c in range(k):
                            left_counts[c] += tables[r, f, c, j]
                        if not inside[r, f * S + j]:
                            utility[r, f * S + j] = -INFINITY
                            continue
                        if gini:
                            q = 0.0
                            left_sq = 0.0
                            right_sq = 0.0
                            left_n = 0.0
                            right_n = 0.0
                            for c in range(k):
                                value = <double>left_counts[c]
                                left_sq = left_sq + value * value
                                left_n = left_n + value
                                value = <double>(node_counts[c] - left_counts[c])
                                right_sq = right_sq + value * value
                                right_n = right_n + value
                            if left_n > 0:
                                q = q + left_sq / left_n
                            if right_n > 0:
                                q = q + right_sq / right_n
                        else:
                            left_max = left_counts[0]
                            right_max = node_counts[0] - left_counts[0]
                            for c in range(1, k):
                                a = left_counts[c]
                                b = node_counts[c] - left_counts[c]
                                if a > left_max:
                                    left_max = a
                                if b > right_max:
                                    right_max = b
                            q = <double>(left_max + right_max)
                        utility[r, f * S + j] = q + offset
