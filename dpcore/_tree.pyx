"""Counting loops of the private decision trees and forests (dpcore.learn._tree).

Nothing here draws noise or chooses anything: the kernels bin records on public thresholds, count
records per (node, feature, class, bin) one tree level at a time, route records down the chosen
splits, and walk records through stored trees. The noise (dpcore._noise) and the selection
(dpcore.selection) are applied by the Python layer to the integer counts returned here.

Every count a record contributes to depends only on that record and on public values (thresholds,
the splits already released), so one record changes at most one count per (level, feature) in
``bin_codes``/``level_counts`` and one leaf count per tree in ``forest_counts`` (add/remove
neighbours).

A record goes right at a node when x[feature] >= threshold, everywhere (binning, routing and
prediction), so the cell of a record during the fit and at prediction time is the same.

Threads (issue 29): ``bin_codes`` and ``level_counts`` cut the records into equal runs whose
number depends on the input's shape only (``_n_blocks``: at least 2**17 values a run), run them
on up to ``dpcore.get_num_threads()`` threads (dpcore._dpcore_threads, GIL released), each busy
thread counting into a table of its own; the tables are added afterwards. Codes and node moves
depend on their record only and counts are integers, so the output is the same for every
thread count. Nothing here is random.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t
from libc.stdlib cimport free, malloc

import numpy as np

from dpcore._dpcore_threads import get_limit, run_blocks


cdef enum:
    BLOCK = 64    # records per block of the tree-walking loops
    CHUNK = 512   # records per chunk of level_counts (their list stays in the first-level cache)
    THREAD_VALUES = 1 << 17   # values (records x features) per block of a threaded pass, at least


ctypedef fused code_t:   # a bin: uint8 when every feature has <= 256 bins, else uint16
    uint8_t
    uint16_t


cdef Py_ssize_t _n_blocks(Py_ssize_t n, Py_ssize_t d, Py_ssize_t table):
    """Blocks of a threaded pass over n records of d features whose blocks each count into a
    private table of ``table`` cells: as many as leave every block THREAD_VALUES values and 8
    values per cell of its table (adding the tables up stays a small part of the work); at
    least 1. A function of the input only, never of the thread count."""
    cdef Py_ssize_t rows = max((<Py_ssize_t>THREAD_VALUES + d - 1) // max(d, 1),
                               8 * table // max(d, 1), 1)
    return max(n // rows, 1)


cdef extern from "tree_bin.h" nogil:
    ctypedef struct tb_pattern:
        const double *lo
        const double *scale
        const double *top
        Py_ssize_t d, rows, B, stride
    int tb_bin_u8(const double *X, Py_ssize_t i0, Py_ssize_t i1, const tb_pattern *pat,
                  const int32_t *y, uint8_t *codes, int64_t *root)
    int tb_bin_u16(const double *X, Py_ssize_t i0, Py_ssize_t i1, const tb_pattern *pat,
                   const int32_t *y, uint16_t *codes, int64_t *root)
    int tb_set_level(int level)
    double *tb_pattern_new(tb_pattern *pat, const double *lo, const double *scale,
                           const double *top, Py_ssize_t d, Py_ssize_t B, Py_ssize_t stride)


cdef int _bin_level = tb_set_level(1)   # AVX2 when the CPU has it


def set_bin_level(int level):
    """The binning pass's version: 0 portable, 1 AVX2 when the CPU has it (the default).
    Returns the level in force. Both give the same codes and counts (for the tests)."""
    global _bin_level
    _bin_level = tb_set_level(level)
    return _bin_level


cdef Py_ssize_t _take_slot(list idle, list tables) except -1:
    """An idle slot, or a new one (zeroed like slot 0) when every slot is busy, as when the
    thread count was raised during the call. Called with the GIL: the list operations are
    atomic, and the new slot's index is reserved before anything that could release it."""
    cdef Py_ssize_t slot
    if idle:
        return idle.pop()
    slot = len(tables)
    tables.append(None)
    tables[slot] = np.zeros_like(tables[0])
    return slot


cdef class _BinBlocks:
    """bin_codes over ``nblocks`` equal runs of records. A run takes an idle slot while it
    counts (Python lists: pop and append are atomic under the GIL, which each call holds for
    them; a new slot when none is idle): slot s counts into tables[s] (tables[0]: the caller's).
    The caller adds the slots up (about one per thread, so the adding does not grow with the
    number of runs). ``bad``: some run met a value that is not finite."""
    cdef const double[:, ::1] X
    cdef const double[::1] lo, inv, top
    cdef const int32_t[::1] y
    cdef uint8_t[:, ::1] codes8
    cdef uint16_t[:, ::1] codes16
    cdef bint wide
    cdef public bint bad
    cdef Py_ssize_t nblocks
    cdef list idle, tables

    def __call__(self, Py_ssize_t j):
        cdef Py_ssize_t n = self.X.shape[0], d = self.X.shape[1]
        cdef Py_ssize_t i0 = n * j // self.nblocks, i1 = n * (j + 1) // self.nblocks
        cdef Py_ssize_t slot = _take_slot(self.idle, self.tables)
        cdef int64_t[:, :, ::1] root = self.tables[slot]
        cdef tb_pattern pat
        cdef double *buf
        cdef int status = -1
        with nogil:
            buf = tb_pattern_new(&pat, &self.lo[0], &self.inv[0], &self.top[0], d,
                                 root.shape[2], root.shape[1] * root.shape[2])
            if buf != NULL:
                if self.wide:
                    status = tb_bin_u16(&self.X[0, 0], i0, i1, &pat, &self.y[0],
                                        &self.codes16[0, 0], &root[0, 0, 0])
                else:
                    status = tb_bin_u8(&self.X[0, 0], i0, i1, &pat, &self.y[0],
                                       &self.codes8[0, 0], &root[0, 0, 0])
                free(buf)
        self.idle.append(slot)
        if status < 0:
            raise MemoryError()
        if status:
            self.bad = True


def bin_codes(const double[:, ::1] X,            # IN  (n, d) records
              const double[::1] lo,              # IN  (d,) public lower bounds
              const double[::1] inv,             # IN  (d,) public n_bins[f] / (upper - lower)
              const double[::1] top,             # IN  (d,) n_bins[f] - 1, the last bin
              const int32_t[::1] y,              # IN  (n,) class index 0..k-1
              codes,                             # OUT (n, d) uint8 or uint16: bin of each value
              int64_t[:, :, ::1] root):          # OUT (d, k, B) counts, zeroed by the caller
    """codes[i, f] = floor(fl(fl(X[i, f] - lo[f]) * inv[f])) clamped to [0, top[f]]: the
    bins of a public grid (values beyond the bounds land in the end bins: clipping), stored a
    record per row as X; and the root's table, root[f, c, b] = number of records of class c
    whose feature f is in bin b (counted while binning: the records are read once). Returns
    the number of features holding a value that is not finite (NaN, +-inf): the caller rejects
    X unless it is 0, so this pass is also the finiteness check of X.

    Each operation is one IEEE rounding (no contraction: the build flags), so the code is a
    non-decreasing function of x, and {x : code >= j} is [t_j, inf) for the double t_j the
    Python layer finds by bisection; prediction compares x >= t_j and agrees with the code
    exactly. The loops are tree_bin.h's (AVX2 when the CPU has it: the same codes and counts).

    Threads: the records are cut into equal runs (:func:`_n_blocks`, from the input's shape
    only), binned at once on up to ``dpcore.get_num_threads()`` threads, each run counting
    into its own table; the tables are added afterwards. Codes depend on their record only and
    the counts are integers, so the output is the same for every thread count."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    if codes.shape != (n, d) or codes.dtype not in (np.uint8, np.uint16):
        raise ValueError("codes must be a uint8 or uint16 array of X's shape")
    if y.shape[0] != n or lo.shape[0] != d or inv.shape[0] != d or top.shape[0] != d:
        raise ValueError("y, lo, inv and top must match X's shape")
    if n == 0 or d == 0:
        return 0
    cdef _BinBlocks job = _BinBlocks()
    job.wide = codes.dtype == np.uint16
    cdef double limit = min(root.shape[2], 65536 if job.wide else 256)
    cdef Py_ssize_t f
    if root.shape[0] != d:
        raise ValueError("root must be (d, k, B)")
    for f in range(d):
        if not 0 <= top[f] < limit:
            raise ValueError("top must be < B and fit codes' dtype")
    job.nblocks = _n_blocks(n, d, root.shape[0] * root.shape[1] * root.shape[2])
    job.X, job.lo, job.inv, job.top, job.y = X, lo, inv, top, y
    if job.wide:
        job.codes16 = codes
    else:
        job.codes8 = codes
    cdef Py_ssize_t slots = min(get_limit(), job.nblocks)
    out = np.asarray(root)
    job.idle = list(range(slots))
    job.tables = [out] + [np.zeros_like(out) for _ in range(slots - 1)]
    run_blocks(job, job.nblocks)
    for extra in job.tables[1:]:
        np.add(out, extra, out=out)
    if not job.bad:
        return 0
    # off the hot path: which features hold the values that are not finite
    return int(np.count_nonzero(~np.isfinite(np.asarray(X)).all(axis=0)))


# int32 fields of a node of the level above (_parents): feature, split, left, row of the left
# child, row of the right child
cdef enum:
    PARENT = 5


cdef void _level_rows(const code_t *codes, Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t d,
                      const int32_t *y, int32_t *node, const int32_t *parents,
                      int64_t *table, Py_ssize_t B, Py_ssize_t stride) noexcept nogil:
    """level_counts on records i0 .. i1 - 1, counting into table (rows, d, k, B); record i
    moves through parents[node[i] + 1] (_parents)."""
    cdef Py_ssize_t i, t, j, f, m, r, i2
    cdef int32_t go
    cdef const int32_t *p
    cdef int64_t *cell
    cdef const code_t *c
    cdef Py_ssize_t sel[CHUNK]
    cdef Py_ssize_t off[CHUNK]
    for t in range((i1 - i0 + CHUNK - 1) // CHUNK):
        m = 0
        i2 = i0 + t * CHUNK
        for i in range(i2, min(i2 + CHUNK, i1)):
            p = parents + (node[i] + 1) * PARENT
            go = codes[i * d + p[0]] >= p[1]      # 1: right
            node[i] = p[2] + go
            r = p[3 + go]
            sel[m] = i
            off[m] = r * d * stride + y[i] * B
            m += r >= 0
        for j in range(m):
            c = codes + sel[j] * d
            cell = table + off[j]
            for f in range(d):
                cell[c[f]] += 1
                cell += stride


cdef void _parents(const int32_t *feature, const int32_t *split, const int32_t *left,
                   const int32_t *row, Py_ssize_t above, int32_t *out) noexcept nogil:
    """The nodes of the level above as _level_rows routes through them, one branch-free step
    a record: out[u + 1] = (feature, split, left, row[left], row[left + 1]) of node u, and for a
    leaf (feature -1) and, at out[0], for the records already settled (node -1): feature 0, a
    split no code reaches and left child -1, so that the record's node becomes -1 and it is not
    counted."""
    cdef Py_ssize_t u
    cdef int32_t *o = out
    o[0], o[1], o[2], o[3], o[4] = 0, 2147483647, -1, -1, -1
    for u in range(above):
        o = out + (u + 1) * PARENT
        if feature[u] < 0:
            o[0], o[1], o[2], o[3], o[4] = 0, 2147483647, -1, -1, -1
        else:
            o[0], o[1], o[2] = feature[u], split[u], left[u]
            o[3], o[4] = row[left[u]], row[left[u] + 1]


cdef class _LevelBlocks:
    """level_counts over ``nblocks`` equal runs of records, each counting into the table of an
    idle slot as in _BinBlocks (tables[0]: the caller's); the nodes each run moves are its own
    records'."""
    cdef uint8_t[:, ::1] codes8
    cdef uint16_t[:, ::1] codes16
    cdef bint wide
    cdef const int32_t[::1] y
    cdef const int32_t[:, ::1] parents
    cdef int32_t[::1] node
    cdef Py_ssize_t n, d, nblocks
    cdef list idle, tables

    def __call__(self, Py_ssize_t j):
        cdef Py_ssize_t i0 = self.n * j // self.nblocks, i1 = self.n * (j + 1) // self.nblocks
        cdef Py_ssize_t slot = _take_slot(self.idle, self.tables)
        cdef int64_t[:, :, :, ::1] counts = self.tables[slot]
        cdef Py_ssize_t B = counts.shape[3], stride = counts.shape[2] * B
        cdef int64_t *table = NULL   # no rows: nothing is counted (row is all -1)
        if counts.shape[0]:
            table = &counts[0, 0, 0, 0]
        with nogil:
            if self.wide:
                _level_rows(&self.codes16[0, 0], i0, i1, self.d, &self.y[0], &self.node[0],
                            &self.parents[0, 0], table, B, stride)
            else:
                _level_rows(&self.codes8[0, 0], i0, i1, self.d, &self.y[0], &self.node[0],
                            &self.parents[0, 0], table, B, stride)
        self.idle.append(slot)


def level_counts(codes,                          # IN  (n, d) uint8 or uint16 bins, a record a row
                 const int32_t[::1] y,           # IN  (n,) class index 0..k-1
                 int32_t[::1] node,              # IN/OUT (n,) node of the level above -> of this
                 const int32_t[::1] feature,     # IN  (nodes above,) split feature, -1: a leaf
                 const int32_t[::1] split,       # IN  (nodes above,) right iff code >= split
                 const int32_t[::1] left,        # IN  (nodes above,) node of the left child
                 const int32_t[::1] row,         # IN  (m,) row of node v in counts, -1: skip
                 int64_t[:, :, :, ::1] counts):  # OUT (rows, d, k, B), zeroed by the caller
    """Move every record down the splits of the level above to its node v of this level
    (left[u] or left[u] + 1; -1 below a leaf), then add counts[row[v], f, c, b] += number of
    records of class c at node v whose feature f is in bin b, for the nodes with row[v] >= 0
    (the caller derives the others' tables from their parents' and siblings': exact integers).

    A chunk of records at a time: the records are moved and those to count listed without
    branches (each node of the level above gathered with its children's rows in one entry:
    one lookup a record), with the offset of their (row, class) table, then each listed record
    adds its d features (d independent increments, in d different tables).

    Threads: as :func:`bin_codes`, equal runs of records (:func:`_n_blocks`: from the input's
    shape and the table's size only), each counting into its own table, added afterwards
    (integers: the same output for every thread count)."""
    cdef Py_ssize_t n = codes.shape[0], d = codes.shape[1]
    if codes.dtype not in (np.uint8, np.uint16) or not codes.flags.c_contiguous:
        raise ValueError("codes must be a C-contiguous uint8 or uint16 array")
    if y.shape[0] != n or node.shape[0] != n or (counts.shape[0] and counts.shape[1] != d):
        raise ValueError("y, node and counts must match codes' shape")
    if n == 0 or d == 0:
        return
    cdef _LevelBlocks job = _LevelBlocks()
    cdef Py_ssize_t cells = counts.shape[0] * counts.shape[1] * counts.shape[2] * counts.shape[3]
    job.n, job.d = n, d
    job.nblocks = _n_blocks(n, d, cells) if cells else 1
    job.wide = codes.dtype == np.uint16
    if job.wide:
        job.codes16 = codes
    else:
        job.codes8 = codes
    if split.shape[0] != feature.shape[0] or left.shape[0] != feature.shape[0]:
        raise ValueError("feature, split and left must have one entry per node above")
    cdef int32_t[:, ::1] parents = np.empty((feature.shape[0] + 1, PARENT), dtype=np.int32)
    with nogil:
        _parents(&feature[0] if feature.shape[0] else NULL, &split[0] if split.shape[0] else NULL,
                 &left[0] if left.shape[0] else NULL, &row[0] if row.shape[0] else NULL,
                 feature.shape[0], &parents[0, 0])
    job.y, job.node, job.parents = y, node, parents
    cdef Py_ssize_t slots = min(get_limit(), job.nblocks) if cells else 1
    out = np.asarray(counts)
    job.idle = list(range(slots))
    job.tables = [out] + [np.zeros_like(out) for _ in range(slots - 1)]
    run_blocks(job, job.nblocks)
    for extra in job.tables[1:]:
        np.add(out, extra, out=out)


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


cdef extern from "tree_walk.h" nogil:
    ctypedef struct dp_node3:
        double t1, t2, t0
        int32_t f0, f1, f2
    int32_t dp_step2(const double *x, const dp_node3 *s, int32_t u)
    void DP_PREFETCH(const void *p)


def forest_counts(const double[:, ::1] X,        # IN  (n, d)
                  const int32_t[::1] y,          # IN  (n,) class index
                  const int32_t[::1] feature,    # IN  (n_trees * (2**(depth + 1) - 1),)
                  const double[::1] threshold,   # IN  same length
                  int n_trees,                   # IN
                  int depth,                     # IN  depth of every tree
                  int64_t[:, ::1] counts):       # OUT (n_trees * 2**depth, k), zeroed by caller
    """counts[t 2**depth + leaf, y] += 1 for the leaf each record reaches in complete tree t
    (tree t's nodes at t (2**(depth + 1) - 1) onwards in heap order: node u has children
    2u + 1 and 2u + 2, its leaves in order last; the layout of random_trees).

    Two levels per step (dp_step2): a record compares x with node u and with both its
    children at once (independent loads) and goes to grandchild 4u + 3 + 2 (x >= t_u) + (the
    chosen child's x >= t), branch-free; the root's step reads its nodes once per tree and
    block. While a block's records walk the trees, the next block's rows are prefetched, a
    share per tree. At depth 8 this walks about 30% faster than a level per step."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = counts.shape[1]
    cdef Py_ssize_t inner = (1 << depth) - 1, per = 2 * inner + 1, t, u, w, i0, j, m, b, q
    cdef Py_ssize_t size = BLOCK * d   # doubles in a block of rows
    cdef int level
    cdef int32_t v[BLOCK]
    cdef const double *x
    cdef int64_t *cell
    cdef dp_node3 *tree
    cdef dp_node3 *s
    cdef dp_node3 *nodes = <dp_node3 *>malloc(max(n_trees * inner, 1) * sizeof(dp_node3))
    if nodes == NULL:
        raise MemoryError()
    for t in range(n_trees):
        for u in range(inner):
            w = t * per + u
            s = nodes + t * inner + u
            s.f0, s.t0 = feature[w], threshold[w]
            s.f1, s.t1, s.f2, s.t2 = 0, 0.0, 0, 0.0
            if 2 * u + 1 < inner:
                s.f1, s.t1 = feature[w + u + 1], threshold[w + u + 1]
                s.f2, s.t2 = feature[w + u + 2], threshold[w + u + 2]
    with nogil:
        for b in range((n + BLOCK - 1) // BLOCK):
            i0 = b * BLOCK
            m = min(<Py_ssize_t>BLOCK, n - i0)
            x = &X[i0, 0]
            for t in range(n_trees):
                q = t * size // n_trees // 8 * 8   # this tree's share of the next block
                while q < (t + 1) * size // n_trees and (i0 + BLOCK) * d + q < n * d:
                    DP_PREFETCH(x + size + q)
                    q += 8
                tree = nodes + t * inner
                level = 0
                if depth >= 2:   # the root's step: its nodes are read once (loop-invariant)
                    for j in range(m):
                        v[j] = dp_step2(x + j * d, tree, 0)
                    level = 2
                else:
                    for j in range(m):
                        v[j] = 0
                while level + 2 <= depth:
                    for j in range(m):
                        v[j] = dp_step2(x + j * d, tree + v[j], v[j])
                    level += 2
                if level < depth:
                    for j in range(m):
                        u = v[j]
                        v[j] = 2 * u + 1 + (x[j * d + tree[u].f0] >= tree[u].t0)
                cell = &counts[t << depth, 0]
                for j in range(m):
                    cell[(v[j] - inner) * k + y[i0 + j]] += 1
    free(nodes)


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
