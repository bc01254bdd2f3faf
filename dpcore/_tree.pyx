"""Counting loops of the private decision trees and forests (dpcore.learn._tree).

Nothing here draws noise or chooses anything: the kernels bin records on public thresholds, count
records per (node, feature, bin, class) one tree level at a time, route records down the chosen
splits, and walk records through stored trees. The noise (dpcore._noise) and the selection
(dpcore.selection) are applied by the Python layer to the integer counts returned here.

Every count a record contributes to depends only on that record and on public values (thresholds,
the splits already released), so one record changes at most one count per (level, feature) in
``level_counts`` and one leaf count per tree in ``leaf_counts`` (add/remove neighbours).

A record goes right at a node when x[feature] >= threshold, everywhere (binning, routing and
prediction), so the cell of a record during the fit and at prediction time is the same.
"""
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.stdlib cimport free, malloc


cdef inline Py_ssize_t _search(const double *t, Py_ssize_t m, double x) noexcept nogil:
    """Number of thresholds t[0..m-1] (increasing) that are <= x, by bisection."""
    cdef Py_ssize_t a = 0, b = m, h  # t[j] <= x for j < a, t[j] > x for j >= b
    while a < b:
        h = (a + b) >> 1
        if t[h] <= x:
            a = h + 1
        else:
            b = h
    return a


def bin_codes(const double[:, ::1] X,            # IN  (n, d) records
              const double[:, ::1] thresholds,   # IN  (d, B - 1) increasing public thresholds
              const double[::1] lo,              # IN  (d,) lower bounds (for the guess only)
              const double[::1] inv,             # IN  (d,) B / (upper - lower) (guess only)
              uint16_t[:, ::1] codes):           # OUT (n, d) bin of each value, 0..B-1
    """codes[i, f] = number of thresholds[f] that are <= X[i, f] (values beyond the bounds land
    in the first or last bin: clipping).

    The grid is nearly uniform, so the bin is guessed from (x - lo) * inv (clamped to [0, m])
    and kept only when the thresholds themselves confirm it (t[g - 1] <= x < t[g]); otherwise
    (near a threshold, rounding) it is found by bisection. The result is the exact count either
    way; the guess only saves time."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], m = thresholds.shape[1], i, f, g
    cdef const double *x
    cdef const double *t
    cdef const double *low = &lo[0]
    cdef const double *scale = &inv[0]
    cdef double q, top = <double>m
    cdef int32_t *guess = <int32_t *>malloc(d * sizeof(int32_t))
    if guess == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            x = &X[i, 0]
            for f in range(d):   # a branch-free pass the compiler can vectorise
                q = (x[f] - low[f]) * scale[f]
                q = q if q > 0.0 else 0.0        # also maps NaN to 0 (never given: validated)
                q = q if q < top else top
                guess[f] = <int32_t>q
            for f in range(d):
                t = &thresholds[f, 0]
                g = guess[f]
                if (g > 0 and t[g - 1] > x[f]) or (g < m and t[g] <= x[f]):
                    g = _search(t, m, x[f])
                codes[i, f] = <uint16_t>g
    free(guess)


def level_counts(const uint16_t[:, ::1] codes,   # IN  (n, d) bins
                 const int32_t[::1] y,           # IN  (n,) class index 0..k-1
                 const int32_t[::1] node,        # IN  (n,) node of the level, -1: settled
                 int left_only,                  # IN  1: count the even (left) nodes only
                 int64_t[:, :, :, ::1] counts):  # OUT (rows, d, B, k), zeroed by the caller
    """counts[v, f, b, c] += number of records of class c at node v whose feature f is in bin
    b (one pass over the records for a whole tree level). With ``left_only`` only the records
    of the even nodes v = 2 r are counted, in row r: the caller gets each right sibling's table
    as its parent's minus its left sibling's (exact integers), which halves the work."""
    cdef Py_ssize_t n = codes.shape[0], d = codes.shape[1], i, f
    cdef int32_t v, c
    with nogil:
        for i in range(n):
            v = node[i]
            if v < 0 or (left_only and (v & 1)):
                continue
            if left_only:
                v >>= 1
            c = y[i]
            for f in range(d):
                counts[v, f, codes[i, f], c] += 1


def class_counts(const int32_t[::1] y,           # IN  (n,) class index
                 const int32_t[::1] node,        # IN  (n,) node, -1: settled
                 int64_t[:, ::1] counts):        # OUT (n_nodes, k), zeroed by the caller
    """counts[v, c] += number of records of class c at node v (the last level needs no more)."""
    cdef Py_ssize_t n = y.shape[0], i
    with nogil:
        for i in range(n):
            if node[i] >= 0:
                counts[node[i], y[i]] += 1


def route(const uint16_t[:, ::1] codes,          # IN  (n, d) bins
          int32_t[::1] node,                     # IN/OUT (n,) node of the level -> of the next
          const int32_t[::1] feature,            # IN  (n_nodes,) split feature, -1: a leaf
          const int32_t[::1] split,              # IN  (n_nodes,) right iff code >= split
          const int32_t[::1] left):              # IN  (n_nodes,) next-level node of the left
    """Move every record to its child on the next level (left[v] or left[v] + 1); records at
    a leaf get -1."""
    cdef Py_ssize_t n = codes.shape[0], i
    cdef int32_t v, f
    with nogil:
        for i in range(n):
            v = node[i]
            if v < 0:
                continue
            f = feature[v]
            if f < 0:
                node[i] = -1
            else:
                node[i] = left[v] + (1 if codes[i, f] >= split[v] else 0)


# Trees are walked a block of records at a time, tree by tree and level by level: the steps of
# the records of a block are independent (the processor overlaps their loads), the step is
# branch-free (the child of v is left[v] + (x >= threshold[v]), right[v] == left[v] + 1 always),
# and a leaf maps to itself, so every record takes ``depth`` steps (depth of the deepest leaf).
cdef enum:
    BLOCK = 256


cdef inline void _walk_block(const double[:, ::1] X, Py_ssize_t i0, Py_ssize_t m, int32_t root,
                             int depth, const int32_t *feature, const double *threshold,
                             const int32_t *left, int32_t *v) noexcept nogil:
    cdef Py_ssize_t j
    cdef int level
    cdef int32_t u, f, fi
    for j in range(m):
        v[j] = root
    for level in range(depth):
        for j in range(m):
            u = v[j]
            f = feature[u]
            fi = f if f >= 0 else 0
            v[j] = (left[u] + (X[i0 + j, fi] >= threshold[u])) if f >= 0 else u


def apply(const double[:, ::1] X,                # IN  (n, d)
          const int32_t[::1] feature,            # IN  (n_nodes,) -1 at leaves
          const double[::1] threshold,           # IN  (n_nodes,)
          const int32_t[::1] left,               # IN  (n_nodes,) right child is left + 1
          const int32_t[::1] roots,              # IN  (T,) root node of each tree
          int depth,                             # IN  depth of the deepest leaf
          int32_t[:, ::1] out):                  # OUT (n, T) leaf node reached in each tree
    """The leaf each record reaches in each tree (trees stored in flat node arrays)."""
    cdef Py_ssize_t n = X.shape[0], T = roots.shape[0], i0, j, m, t, b
    cdef int32_t v[BLOCK]
    with nogil:
        for b in range((n + BLOCK - 1) // BLOCK):
            i0 = b * BLOCK
            m = min(<Py_ssize_t>BLOCK, n - i0)
            for t in range(T):
                _walk_block(X, i0, m, roots[t], depth, &feature[0], &threshold[0], &left[0], v)
                for j in range(m):
                    out[i0 + j, t] = v[j]


def leaf_counts(const double[:, ::1] X,          # IN  (n, d)
                const int32_t[::1] y,            # IN  (n,) class index
                const int32_t[::1] feature,      # IN  (n_nodes,)
                const double[::1] threshold,     # IN  (n_nodes,)
                const int32_t[::1] left,         # IN  (n_nodes,)
                const int32_t[::1] roots,        # IN  (T,)
                int depth,                       # IN
                const int32_t[::1] slot,         # IN  (n_nodes,) row of a leaf in counts
                int64_t[:, ::1] counts):         # OUT (n_leaves, k), zeroed by the caller
    """counts[slot[leaf], y] += 1 for the leaf each record reaches in each tree."""
    cdef Py_ssize_t n = X.shape[0], T = roots.shape[0], i0, j, m, t, b
    cdef int32_t v[BLOCK]
    with nogil:
        for b in range((n + BLOCK - 1) // BLOCK):
            i0 = b * BLOCK
            m = min(<Py_ssize_t>BLOCK, n - i0)
            for t in range(T):
                _walk_block(X, i0, m, roots[t], depth, &feature[0], &threshold[0], &left[0], v)
                for j in range(m):
                    counts[slot[v[j]], y[i0 + j]] += 1


def vote(const double[:, ::1] X,                 # IN  (n, d)
         const int32_t[::1] feature,             # IN  (n_nodes,)
         const double[::1] threshold,            # IN  (n_nodes,)
         const int32_t[::1] left,                # IN  (n_nodes,)
         const int32_t[::1] roots,               # IN  (T,)
         int depth,                              # IN
         const int32_t[::1] slot,                # IN  (n_nodes,)
         const double[:, ::1] values,            # IN  (n_leaves, k) released leaf values
         double[:, ::1] out):                    # OUT (n, k) sum over trees, zeroed by caller
    """out[i] = sum over trees of values[slot[leaf reached by record i]]."""
    cdef Py_ssize_t n = X.shape[0], T = roots.shape[0], k = values.shape[1], i0, j, m, t, c, b
    cdef int32_t v[BLOCK]
    cdef int32_t s
    with nogil:
        for b in range((n + BLOCK - 1) // BLOCK):
            i0 = b * BLOCK
            m = min(<Py_ssize_t>BLOCK, n - i0)
            for t in range(T):
                _walk_block(X, i0, m, roots[t], depth, &feature[0], &threshold[0], &left[0], v)
                for j in range(m):
                    s = slot[v[j]]
                    for c in range(k):
                        out[i0 + j, c] += values[s, c]
