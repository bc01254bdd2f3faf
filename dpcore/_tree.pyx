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
from libc.string cimport memset


cdef enum:
    BLOCK = 64   # records per block of the tree-walking loops
    SPREAD = 4    # copies of a count table (a power of two), see level_counts


def bin_codes(const double[:, ::1] X,            # IN  (n, d) records
              const double[::1] lo,              # IN  (d,) public lower bounds
              const double[::1] inv,             # IN  (d,) public n_bins[f] / (upper - lower)
              const double[::1] top,             # IN  (d,) n_bins[f] - 1, the last bin
              uint16_t[:, ::1] codes):           # OUT (d, n) bin of each value
    """codes[f, i] = floor(fl(fl(X[i, f] - lo[f]) * inv[f])) clamped to [0, top[f]]: the
    bins of a public grid (values beyond the bounds land in the end bins: clipping). Stored a
    feature per row, the layout the counting reads.

    Each operation is one IEEE rounding (no contraction: the build flags), so the code is a
    non-decreasing function of x, and {x : code >= j} is [t_j, inf) for the double t_j the
    Python layer finds by bisection; prediction compares x >= t_j and agrees with the code
    exactly. The loop is branch-free."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, f
    cdef const double *x
    cdef const double *low = &lo[0]
    cdef const double *scale = &inv[0]
    cdef uint16_t *out = &codes[0, 0]
    cdef const double *last = &top[0]
    cdef double q
    with nogil:
        for i in range(n):
            x = &X[i, 0]
            for f in range(d):
                q = (x[f] - low[f]) * scale[f]
                q = q if q > 0.0 else 0.0        # also maps NaN to 0 (never given: validated)
                q = q if q < last[f] else last[f]
                out[f * n + i] = <uint16_t>q


# records per slab of level_counts (their positions in a slab fit in int32); tests lower it
cdef Py_ssize_t _slab = 1 << 30


def _set_slab(Py_ssize_t size):
    """Test hook: the slab size of level_counts (>= 1); returns the previous one."""
    global _slab
    previous, _slab = _slab, max(size, 1)
    return previous


def level_counts(const uint16_t[:, ::1] codes,   # IN  (d, n) bins, a feature per row
                 const int32_t[::1] y,           # IN  (n,) class index 0..k-1
                 const int32_t[::1] node,        # IN  (n,) node of the level, -1: settled
                 int left_only,                  # IN  1: count the even (left) nodes only
                 int64_t[:, :, :, ::1] counts):  # OUT (d, rows, B, k), zeroed by the caller
    """counts[f, v, b, c] += number of records of class c at node v whose feature f is in bin
    b (a whole tree level at once). With ``left_only`` only the records of the even nodes
    v = 2 r are counted, in row r: the caller gets each right sibling's table as its parent's
    minus its left sibling's (exact integers), which halves the work.

    First the records to count are listed with their (row, class) offset, then each feature
    is counted in turn: its table (rows x B x k) stays in the first-level cache."""
    cdef Py_ssize_t n = codes.shape[1], d = codes.shape[0], i, f, j, u, m, s0, s1, t
    cdef Py_ssize_t B = counts.shape[2], k = counts.shape[3]
    cdef Py_ssize_t cells = counts.shape[1] * B * k
    cdef Py_ssize_t slab = max(min(n, _slab), 1)
    cdef int32_t v
    cdef int64_t *table
    cdef const uint16_t *col
    cdef int32_t *sel = <int32_t *>malloc(max(slab, 1) * sizeof(int32_t))
    cdef int32_t *off = <int32_t *>malloc(max(slab, 1) * sizeof(int32_t))
    # SPREAD interleaved copies of a feature's table: consecutive records rarely update the
    # same copy's cell, so the increments do not wait on each other through memory
    cdef int64_t *spread = <int64_t *>malloc(SPREAD * max(cells, 1) * sizeof(int64_t))
    if sel == NULL or off == NULL or spread == NULL:
        free(sel)
        free(off)
        free(spread)
        raise MemoryError()
    with nogil:
        # slabs of records whose positions fit in int32
        for t in range((n + slab - 1) // slab):
            s0 = t * slab
            s1 = min(s0 + slab, n)
            m = 0
            for i in range(s0, s1):
                v = node[i]
                if v < 0 or (left_only and (v & 1)):
                    continue
                if left_only:
                    v >>= 1
                sel[m] = <int32_t>(i - s0)
                off[m] = <int32_t>(SPREAD * (v * B * k + y[i]))
                m += 1
            for f in range(d):
                # counts is C-contiguous: cell (f, v, b, c) is at f R B k + (v B + b) k + c;
                # in spread, copy u of cell e is at SPREAD e + u
                memset(spread, 0, SPREAD * cells * sizeof(int64_t))
                col = &codes[f, s0]
                if m == s1 - s0:   # every record (the root level): no gather
                    for j in range(m):
                        spread[off[j] + SPREAD * k * col[j] + (j & (SPREAD - 1))] += 1
                else:
                    for j in range(m):
                        spread[off[j] + SPREAD * k * col[sel[j]] + (j & (SPREAD - 1))] += 1
                table = &counts[f, 0, 0, 0]
                for j in range(cells):
                    for u in range(SPREAD):
                        table[j] += spread[SPREAD * j + u]
    free(sel)
    free(off)
    free(spread)


def class_counts(const int32_t[::1] y,           # IN  (n,) class index
                 const int32_t[::1] node,        # IN  (n,) node, -1: settled
                 int64_t[:, ::1] counts):        # OUT (n_nodes, k), zeroed by the caller
    """counts[v, c] += number of records of class c at node v (the last level needs no more)."""
    cdef Py_ssize_t n = y.shape[0], i
    with nogil:
        for i in range(n):
            if node[i] >= 0:
                counts[node[i], y[i]] += 1


def route(const uint16_t[:, ::1] codes,          # IN  (d, n) bins
          int32_t[::1] node,                     # IN/OUT (n,) node of the level -> of the next
          const int32_t[::1] feature,            # IN  (n_nodes,) split feature, -1: a leaf
          const int32_t[::1] split,              # IN  (n_nodes,) right iff code >= split
          const int32_t[::1] left):              # IN  (n_nodes,) next-level node of the left
    """Move every record to its child on the next level (left[v] or left[v] + 1); records at
    a leaf get -1."""
    cdef Py_ssize_t n = codes.shape[1], i
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
                node[i] = left[v] + (1 if codes[f, i] >= split[v] else 0)


# Trees are walked a block of records at a time, tree by tree and level by level: the steps of
# the records of a block are independent (the processor overlaps their loads), the step is
# branch-free (the child of v is left[v] + (x >= threshold[v]), right[v] == left[v] + 1 always),
# and a leaf maps to itself, so every record takes ``depth`` steps (depth of the deepest leaf).


cdef inline void _walk_block(const double[:, ::1] X, Py_ssize_t i0, Py_ssize_t m, int32_t root,
                             int depth, const int32_t *feature, const double *threshold,
                             const int32_t *left, int32_t *v) noexcept nogil:
    cdef Py_ssize_t j, d = X.shape[1]
    cdef int level
    cdef int32_t u, f, fi
    cdef const double *x = &X[i0, 0]
    for j in range(m):
        v[j] = root
    for level in range(depth):
        for j in range(m):
            u = v[j]
            f = feature[u]
            fi = f if f >= 0 else 0
            v[j] = (left[u] + (x[j * d + fi] >= threshold[u])) if f >= 0 else u


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
