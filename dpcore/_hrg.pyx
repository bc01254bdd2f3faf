# cython: language_level=3
"""Hierarchical random graph kernel: dendrogram state, MCMC moves, incremental log-likelihood.

The state lives in flat C arrays over 2n - 1 node ids (leaves 0..n-1, internal
nodes n..2n-2): one 32-byte record per node (parent, two children, number of leaves, edge count
E_r, volume = sum of the leaves' degrees, cached profile log-likelihood ell(E_r, N_r)), so that a
move touches one cache line per node. The graph is held as incidence slots (edge ids per vertex,
vertex u owning slots [sb[u], se[u])), every slot carrying the id of its edge's lowest common
ancestor (the one internal node whose E counts it) and the slot of the same edge at the other end.

A move (Clauset-Moore-Newman 2008) picks a non-root internal node r uniformly, with parent s, children
a, b and sibling c, and proposes ((k, c), m) for {k, m} = {a, b} chosen by a fair bit. The only count
not stored is E_kc. When E_s = 0 it is 0 and nothing needs relabelling (no walk at all; this is
the common case low in the tree). Otherwise it is obtained by scanning the slots of whichever of k
and m is cheaper for labels s, so a move costs the smaller subtree, not O(n). An accepted move
relabels the same edges (lowest-common-ancestor edge labels), so the labels stay exact.

Memory layout (no effect on the chain's law): _relayout renumbers the internal nodes in pre-order
and lays the slots out in the tree's leaf order, so that right after it every subtree's slots are
one contiguous range [slo, shi). A move changes the leaf sets of r and s only; the top node keeps
the old leaf set of s (hence its range) and the inner node's range is the union of its children's
when they are adjacent, else it is marked absent (-1); every other node keeps its range. A scan
then reads whole ranges with a vectorised label comparison (AVX2 when available; positions
compressed without branches), descending only into nodes without a range. _relayout runs from
random_tree and after every RELAYOUT_PER_NODE * n accepted moves (O(n + m), amortised O(1)).
Node draws are made three steps ahead so the nodes a step will touch can be prefetched.

All randomness comes from the generator passed in (dpcore's ChaCha20 by default), read under its
lock without the GIL. Node choice is exact (rejection). The Metropolis test compares a 53-bit
uniform U with exp(T delta) (so P(accept) is exp(T delta) rounded up to a multiple of 2**-53):
the high 31 bits of U are unused bits of the node-choice word and the low 22 bits are read from
the generator only when the high part leaves the comparison undecided; exp is skipped when
T delta < -21.5 and the high part is nonzero (then the outcome is a rejection either way).
"""
import numpy as np

from libc.math cimport log, log1p, exp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.exc cimport PyErr_CheckSignals

from dpcore._random cimport BitgenHandle, dpc_words, random_words, dpc_words_next

cdef extern from "hrg_scan.h" nogil:
    void hrg_scan(const int32_t *lab, int32_t lo, int32_t hi, int32_t s, int32_t r, int want_r,
                  int32_t *bufs, int *cs, int32_t *bufr, int *cr)
    void hrg_scan_init()
    void hrg_scan_scalar(const int32_t *lab, int32_t lo, int32_t hi, int32_t s, int32_t r,
                         int want_r, int32_t *bufs, int *cs, int32_t *bufr, int *cr)
    int hrg_scan_vector()
    void hrg_prefetch(const void *p)


hrg_scan_init()


ctypedef struct hrg_node:
    int32_t parent
    int32_t ch0
    int32_t ch1
    int32_t nleaves
    int32_t E
    int32_t vol
    double ell

# The same record as a numpy dtype (32 bytes, no padding).
NODE_DTYPE = np.dtype([("parent", np.int32), ("ch0", np.int32), ("ch1", np.int32),
                       ("nleaves", np.int32), ("E", np.int32), ("vol", np.int32),
                       ("ell", np.float64)])
assert NODE_DTYPE.itemsize == sizeof(hrg_node) == 32

cdef double TWO_M53 = 1.1102230246251565e-16  # 2**-53
cdef double TWO_M31 = 4.656612873077393e-10  # 2**-31
# Re-sum the cached ell values after this many accepted moves, to stop rounding drift.
cdef int64_t REFRESH_ACCEPTS = 65536
# Every SIGNAL_EVERY steps the chain takes the GIL briefly to run pending signal handlers: a long
# run() stops at the next such step boundary (the state stays a valid dendrogram, the steps made
# are counted) and the handler's exception (KeyboardInterrupt for Ctrl-C) is raised.
SIGNAL_EVERY = 2**18
cdef int64_t _SIGNAL_MASK = SIGNAL_EVERY - 1
# Renumber nodes and relay the slots out (_relayout) after this many accepted moves per vertex.
cdef int64_t RELAYOUT_PER_NODE = 32


cdef inline double _ell(int64_t e, int64_t N) noexcept nogil:
    """e ln(e/N) + (N - e) ln(1 - e/N), 0 at e = 0 and e = N (log1p form; Clauset, Moore, Newman 2008)."""
    if e <= 0 or e >= N:
        return 0.0
    cdef double p = <double>e / <double>N
    return <double>e * log(p) + <double>(N - e) * log1p(-p)


def ell(e, N):
    """Profile log-likelihood of one internal node (test helper; e, N integers, 0 <= e <= N)."""
    return _ell(<int64_t>e, <int64_t>N)


# ell(e, N) for every N <= SMALL_N and 0 <= e <= N, at SMALL_ELL[N (N + 1) / 2 + e] (the values
# _ell returns); low internal nodes have small N, and the lookup replaces a log and a log1p.
cdef enum:
    SMALL_N = 32
    SMALL_ELL_SIZE = 561  # (SMALL_N + 1) (SMALL_N + 2) / 2
cdef double SMALL_ELL[SMALL_ELL_SIZE]


cdef void _fill_small_ell() noexcept:
    cdef int64_t N, e
    for N in range(SMALL_N + 1):
        for e in range(N + 1):
            SMALL_ELL[N * (N + 1) // 2 + e] = _ell(e, N)


_fill_small_ell()


cdef inline double _ell_lr(int64_t e, int64_t L, int64_t R) noexcept nogil:
    """ell(e, L R), bit-identical to _ell: from the table SMALL_ELL when N = L R <= SMALL_N (most
    internal nodes sit low in the tree; the lookup replaces a log and a log1p), else _ell."""
    cdef int64_t N = L * R
    if N <= SMALL_N:
        return SMALL_ELL[N * (N + 1) // 2 + e]
    return _ell(e, N)


def ell_lr(e, L, R):
    """ell(e, L R) as the chain evaluates it (test helper; 0 <= e <= L R)."""
    if not 0 <= e <= L * R:
        raise ValueError("need 0 <= e <= L R")
    return _ell_lr(<int64_t>e, <int64_t>L, <int64_t>R)


cdef uint64_t _fixed_word(void *state) noexcept nogil:
    (<uint64_t *>state)[1] += 1
    return (<uint64_t *>state)[0]


def metropolis(uint64_t w, double y, uint64_t extra):
    """The chain's acceptance test for log-ratio y < 0 (test helper): node-choice word w, and
    `extra` as the next generator word (read only when the high 31 bits leave it undecided).
    Returns (accepted, whether extra was read)."""
    cdef dpc_words src
    cdef uint64_t st[2]
    st[0] = extra
    st[1] = 0
    src.chacha = NULL
    src.next_uint64 = _fixed_word
    src.state = <void *>st
    accepted = bool(_metropolis_log(&src, w, y))
    return accepted, st[1] > 0


def scan(lab, int lo, int hi, int s, int r, bint want_r, bint vector=True):
    """Positions t in [lo, hi) with lab[t] == s and (if want_r) == r, by the kernel's scan
    (vector=True: the dispatching one, AVX2 when available; False: the scalar loop). Test helper:
    lab is padded here as the kernel pads it."""
    cdef int32_t[::1] lv = np.concatenate([np.asarray(lab, dtype=np.int32),
                                           np.full(8, -1, dtype=np.int32)])
    cdef int32_t[::1] bs = np.zeros(max(hi - lo, 0) + 8, dtype=np.int32)
    cdef int32_t[::1] br = np.zeros(max(hi - lo, 0) + 8, dtype=np.int32)
    cdef int cs = 0, cr = 0
    if not 0 <= lo <= hi <= lv.shape[0] - 8:
        raise ValueError("need 0 <= lo <= hi <= len(lab)")
    if vector:
        hrg_scan(&lv[0], lo, hi, s, r, want_r, &bs[0], &cs, &br[0], &cr)
    else:
        hrg_scan_scalar(&lv[0], lo, hi, s, r, want_r, &bs[0], &cs, &br[0], &cr)
    return np.asarray(bs[:cs]).copy(), np.asarray(br[:cr]).copy()


def scan_is_vectorised():
    """Whether hrg_scan uses the AVX2 loop on this machine."""
    return bool(hrg_scan_vector())


cdef inline uint64_t _bounded(dpc_words *src, uint32_t n, uint64_t *word) noexcept nogil:
    """Uniform in {0, ..., n-1} (n < 2**32) from the top 32 bits of a word (Lemire's rejection);
    the accepted word is stored in *word so its low 32 bits (independent) can be reused."""
    cdef uint64_t w = dpc_words_next(src)
    cdef uint64_t prod = (w >> 32) * <uint64_t>n
    cdef uint32_t low = <uint32_t>prod
    cdef uint32_t t
    if low < n:
        t = <uint32_t>((<uint64_t>4294967296 - <uint64_t>n) % <uint64_t>n)
        while low < t:
            w = dpc_words_next(src)
            prod = (w >> 32) * <uint64_t>n
            low = <uint32_t>prod
    word[0] = w
    return prod >> 32


cdef inline bint _metropolis(dpc_words *src, uint64_t w, double x) noexcept nogil:
    """U < x for U uniform on the multiples of 2**-53 in [0, 1), drawn lazily: the high 31 bits of
    U are bits 1..31 of w (the node-choice word, whose low 32 bits are unused by the bounded draw
    except bit 0, the child choice), and its low 22 bits come from a fresh word only when the high
    part leaves the comparison undecided (probability 2**-31 per test). Same law as comparing a
    full 53-bit uniform drawn from a fresh word."""
    cdef double a = <double>((w >> 1) & 0x7FFFFFFF) * TWO_M31
    if a >= x:
        return False
    if a + TWO_M31 <= x:
        return True
    return a + <double>(dpc_words_next(src) >> 42) * TWO_M53 < x


cdef inline bint _metropolis_log(dpc_words *src, uint64_t w, double y) noexcept nogil:
    """_metropolis(src, w, exp(y)) for y < 0, without evaluating exp when y < -21.5 (then
    exp(y) < 2**-31, so every high part but 0 rejects: the same outcome as with exp)."""
    if y < -21.5 and ((w >> 1) & 0x7FFFFFFF) != 0:
        return False
    return _metropolis(src, w, exp(y))


cdef class HRGState:
    """A dendrogram over the vertices of a fixed simple graph, with its incremental bookkeeping.

    Parameters
    ----------
    n : int
        Number of vertices (>= 2).
    u, v : int32 arrays of length m
        Endpoints of the m edges (validated by the caller: 0 <= u, v < n, u != v, no duplicates).
    """
    cdef readonly int n
    cdef readonly int m
    cdef int32_t root
    cdef double logl
    cdef int64_t n_accepted_total
    cdef int64_t n_steps_total
    # Arrays (kept alive here) and raw pointers into them.
    cdef object _nd, _ndsc
    cdef object _indptr, _adj, _eu, _ev, _lca, _lab, _twin, _stack, _bufs, _bufr
    cdef object _order, _pos, _lo, _hi
    cdef object _bparent, _bch0, _bch1
    cdef hrg_node *nd
    cdef hrg_node *ndsc
    cdef int32_t *indptr
    cdef int32_t *sb
    cdef int32_t *se
    cdef int32_t *newid
    cdef int32_t *sc32
    cdef object _sb, _se, _newid, _sc32, _slo, _shi
    cdef int32_t *slo
    cdef int32_t *shi
    cdef int32_t *adj
    cdef int32_t *eu
    cdef int32_t *ev
    cdef int32_t *lca
    cdef int32_t *lab
    cdef int32_t *twin
    cdef int32_t *stack
    cdef int32_t *bufs
    cdef int32_t *bufr
    cdef int32_t *order
    cdef int32_t *pos
    cdef int32_t *lo
    cdef int32_t *hi
    cdef int32_t *bparent
    cdef int32_t *bch0
    cdef int32_t *bch1
    cdef int64_t *cum
    cdef object _cum
    cdef int32_t broot
    cdef bint logging
    cdef Py_ssize_t log_len, log_cap
    cdef object _logc, _logi, _logv
    cdef int8_t *logc
    cdef int32_t *logi
    cdef int32_t *logv
    cdef double best_logl
    cdef int64_t since_layout
    cdef int64_t steps_done        # steps made by the last _run (fewer when interrupted)
    cdef object _pending           # the exception a signal handler raised during _run

    def __init__(self, int n, u, v):
        cdef Py_ssize_t nn = 2 * n - 1
        u = np.ascontiguousarray(u, dtype=np.int32)
        v = np.ascontiguousarray(v, dtype=np.int32)
        self.n = n
        self.m = u.shape[0]
        self._eu = u.copy()
        self._ev = v.copy()
        deg = np.bincount(np.concatenate([u, v]), minlength=n).astype(np.int64)
        indptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(deg, out=indptr[1:])
        ends = np.concatenate([u, v])
        ids = np.concatenate([np.arange(self.m, dtype=np.int32)] * 2)
        order = np.argsort(ends, kind="stable")
        self._indptr = indptr
        # Slots of vertex u: [sb[u], se[u]) (CSR at first; relaid out in leaf order by _relayout).
        self._sb = indptr[:n].copy()
        self._se = indptr[1:n + 1].copy()
        self._newid = np.zeros(nn, dtype=np.int32)
        # Per node: the slots of all its leaves, when they form one range [slo, shi), else -1.
        self._slo = np.full(nn, -1, dtype=np.int32)
        self._shi = np.full(nn, -1, dtype=np.int32)
        self._sc32 = np.zeros(max(6 * self.m, 1), dtype=np.int32)
        self._adj = np.ascontiguousarray(ids[order], dtype=np.int32)
        # Per node, one 32-byte record (a move reads and writes few nodes, each one cache line).
        raw = np.zeros(nn * 32 + 64, dtype=np.uint8)  # records aligned: none straddles two lines
        off = (-raw.ctypes.data) % 64
        nd = raw[off:off + nn * 32].view(NODE_DTYPE)
        nd["parent"] = -1
        nd["ch0"] = -1
        nd["ch1"] = -1
        nd["nleaves"] = 1
        nd["vol"][:n] = deg
        self._nd = nd
        self._ndsc = np.zeros(nn, dtype=NODE_DTYPE)
        self._lca = np.full(self.m, -1, dtype=np.int32)
        # Per incidence slot t (CSR order): the edge's label (a copy of lca, read sequentially in
        # the hot loop) and the slot of the same edge at its other endpoint.
        self._lab = np.full(2 * self.m + 8, -1, dtype=np.int32)  # + 8: hrg_scan reads ahead
        adj = self._adj
        twin = np.zeros(max(2 * self.m, 1), dtype=np.int32)
        if self.m:
            order_e = np.argsort(adj, kind="stable")  # the two slots of each edge, adjacent
            pair = order_e.reshape(-1, 2)
            twin[pair[:, 0]] = pair[:, 1]
            twin[pair[:, 1]] = pair[:, 0]
        self._twin = twin
        self._stack = np.zeros(nn + 1, dtype=np.int32)
        self._bufs = np.zeros(2 * self.m + 8, dtype=np.int32)  # + 8: hrg_scan writes ahead
        self._bufr = np.zeros(2 * self.m + 8, dtype=np.int32)
        self._order = np.zeros(n, dtype=np.int32)
        self._pos = np.zeros(n, dtype=np.int32)
        self._lo = np.zeros(nn, dtype=np.int32)
        self._hi = np.zeros(nn, dtype=np.int32)
        self._bparent = np.full(nn, -1, dtype=np.int32)
        self._cum = np.zeros(n + 1, dtype=np.int64)
        self.log_cap = 16 * n + 64
        self._logc = np.zeros(self.log_cap, dtype=np.int8)
        self._logi = np.zeros(self.log_cap, dtype=np.int32)
        self._logv = np.zeros(self.log_cap, dtype=np.int32)
        self.logging = False
        self.log_len = 0
        self._bch0 = np.full(nn, -1, dtype=np.int32)
        self._bch1 = np.full(nn, -1, dtype=np.int32)
        self._bind()
        self.root = -1
        self.broot = -1
        self.logl = 0.0
        self.best_logl = -1e308
        self.n_accepted_total = 0
        self.n_steps_total = 0

    cdef void _bind(self):
        cdef int8_t[::1] i8
        cdef uint8_t[::1] u8
        cdef int32_t[::1] i32
        cdef int64_t[::1] i64
        u8 = self._nd.view(np.uint8); self.nd = <hrg_node *>&u8[0]
        u8 = self._ndsc.view(np.uint8); self.ndsc = <hrg_node *>&u8[0]
        i64 = self._cum; self.cum = &i64[0]
        i8 = self._logc; self.logc = &i8[0]
        i32 = self._logi; self.logi = &i32[0]
        i32 = self._logv; self.logv = &i32[0]
        i32 = self._indptr; self.indptr = &i32[0]
        i32 = self._sb; self.sb = &i32[0]
        i32 = self._se; self.se = &i32[0]
        i32 = self._newid; self.newid = &i32[0]
        i32 = self._slo; self.slo = &i32[0]
        i32 = self._shi; self.shi = &i32[0]
        i32 = self._sc32; self.sc32 = &i32[0]
        i32 = self._stack; self.stack = &i32[0]
        i32 = self._bufs; self.bufs = &i32[0]
        i32 = self._bufr; self.bufr = &i32[0]
        i32 = self._order; self.order = &i32[0]
        i32 = self._pos; self.pos = &i32[0]
        i32 = self._lo; self.lo = &i32[0]
        i32 = self._hi; self.hi = &i32[0]
        i32 = self._bparent; self.bparent = &i32[0]
        i32 = self._bch0; self.bch0 = &i32[0]
        i32 = self._bch1; self.bch1 = &i32[0]
        if self.m > 0:
            i32 = self._adj; self.adj = &i32[0]
            i32 = self._eu; self.eu = &i32[0]
            i32 = self._ev; self.ev = &i32[0]
            i32 = self._lca; self.lca = &i32[0]
            i32 = self._lab; self.lab = &i32[0]
            i32 = self._twin; self.twin = &i32[0]
        else:
            self.adj = self.eu = self.ev = self.lca = self.lab = self.twin = NULL

    # ------------------------------------------------------------------ tree set-up

    def random_tree(self, BitgenHandle h):
        """Replace the tree by a random one drawn independently of the graph (random merges of
        two uniformly chosen clusters, n - 1 times), then rebuild the bookkeeping."""
        cdef dpc_words src
        cdef int n = self.n
        cdef int i, cnt, a, b, node
        cdef uint64_t w
        cdef int32_t *act = self.stack
        with h.lock, nogil:
            random_words(&src, h.bitgen)
            for i in range(n):
                act[i] = i
            for i in range(n - 1):
                cnt = n - i
                a = <int>_bounded(&src, <uint32_t>cnt, &w)
                node = act[a]
                act[a] = act[cnt - 1]
                act[cnt - 1] = node
                b = <int>_bounded(&src, <uint32_t>(cnt - 1), &w)
                self.nd[n + i].ch0 = act[cnt - 1]
                self.nd[n + i].ch1 = act[b]
                self.nd[act[cnt - 1]].parent = n + i
                self.nd[act[b]].parent = n + i
                act[b] = n + i
            self.nd[2 * n - 2].parent = -1
            self.root = 2 * n - 2
            self._reset_best()
            self._rebuild()
            self._relayout()

    def set_tree(self, parent, ch0, ch1, int root):
        """Load a tree (arrays over the 2n - 1 node ids) and rebuild the bookkeeping from scratch.
        The caller guarantees a full binary tree on the leaves 0..n-1 with internal ids n..2n-2."""
        self._nd["parent"] = parent
        self._nd["ch0"] = ch0
        self._nd["ch1"] = ch1
        self.root = root
        self._reset_best()
        with nogil:
            self._rebuild()

    cdef void _rebuild(self) noexcept nogil:
        """From scratch: leaf order, nleaves, vol, every edge's LCA (small-to-large over a DFS
        leaf order, O(m log m)), E, cached ell and the log-likelihood."""
        cdef int n = self.n
        cdef int top = 0, nxt = 0, x, y, node, p, t, u, w, e
        cdef int32_t *st = self.stack
        # Pre-order DFS: each node's leaves are the contiguous range [lo, hi) of `order`.
        # Nodes are pushed with a +1/-1 marker: a negative entry -(node+1) closes the node.
        st[0] = self.root
        top = 1
        while top > 0:
            top -= 1
            node = st[top]
            if node < 0:
                node = -node - 1
                self.hi[node] = nxt
                continue
            if node < n:
                self.order[nxt] = node
                self.pos[node] = nxt
                self.lo[node] = nxt
                nxt += 1
                self.hi[node] = nxt
                continue
            self.lo[node] = nxt
            st[top] = -node - 1
            st[top + 1] = self.nd[node].ch1
            st[top + 2] = self.nd[node].ch0
            top += 3
        # Volumes from prefix sums of the degrees in leaf order (cum has n + 1 entries).
        self.cum[0] = 0
        for p in range(n):
            u = self.order[p]
            self.cum[p + 1] = self.cum[p] + (self.se[u] - self.sb[u])
        for node in range(n, 2 * n - 1):
            self.nd[node].nleaves = self.hi[node] - self.lo[node]
            self.nd[node].vol = self.cum[self.hi[node]] - self.cum[self.lo[node]]
        for e in range(self.m):
            self.lca[e] = -1
        for node in range(n, 2 * n - 1):
            x = self.nd[node].ch0
            y = self.nd[node].ch1
            if self.nd[x].vol > self.nd[y].vol:
                x, y = y, x
            for p in range(self.lo[x], self.hi[x]):
                u = self.order[p]
                for t in range(self.sb[u], self.se[u]):
                    e = self.adj[t]
                    w = self.eu[e] + self.ev[e] - u
                    if self.lo[y] <= self.pos[w] < self.hi[y]:
                        self.lca[e] = node
        for node in range(2 * n - 1):
            self.nd[node].E = 0
            self.nd[node].ell = 0.0
        for e in range(self.m):
            self.nd[self.lca[e]].E += 1
        for t in range(2 * self.m):
            self.lab[t] = self.lca[self.adj[t]]
        for node in range(n, 2 * n - 1):
            self.nd[node].ell = _ell_lr(self.nd[node].E, self.nd[self.nd[node].ch0].nleaves,
                                        self.nd[self.nd[node].ch1].nleaves)
        self._ranges()
        self._refresh()

    cdef int _preorder(self, int32_t *internal, int32_t *leaves) noexcept nogil:
        """The internal nodes in pre-order (ch0's subtree before ch1's) into ``internal`` and,
        unless NULL, the leaves in the same DFS order into ``leaves``; returns the number of
        internal nodes. Uses ``stack``."""
        cdef int n = self.n, top = 1, cnt = 0, nl = 0, node
        cdef int32_t *st = self.stack
        st[0] = self.root
        while top > 0:
            top -= 1
            node = st[top]
            if node < n:
                if leaves != NULL:
                    leaves[nl] = node
                    nl += 1
                continue
            internal[cnt] = node
            cnt += 1
            st[top] = self.nd[node].ch1
            st[top + 1] = self.nd[node].ch0
            top += 2
        return cnt

    cdef void _relayout(self) noexcept nogil:
        """Renumber the internal nodes in pre-order (the root becomes n) and lay the incidence
        slots out in the tree's leaf order, so that a subtree's nodes and its leaves' slots sit
        close together in memory. The dendrogram, every count and every cached value are
        unchanged; only ids and positions move (O(n + m)). The leaf ids (vertices) never change.
        A pending best-state undo log refers to the old ids, so it is materialised first."""
        cdef int n = self.n
        cdef int nn = 2 * n - 1
        cdef int cnt, j, p, u, x, y, d, i, pos
        cdef int32_t *nid = self.newid
        cdef int32_t *newslot
        cdef int32_t *s_adj
        cdef int32_t *s_lab
        if n < 2 or self.root < 0:
            return
        if self.logging:
            self._materialize()
        self.since_layout = 0
        # Pre-order numbering of the internal nodes (pos: rebuild-time scratch); the leaves in
        # DFS order go to `order`.
        cnt = self._preorder(self.pos, self.order)
        for j in range(cnt):
            nid[self.pos[j]] = n + j
        for x in range(n):
            nid[x] = x
        for x in range(n, nn):
            y = nid[x] - n
            self.ndsc[y] = self.nd[x]
            self.ndsc[y].parent = nid[self.nd[x].parent] if self.nd[x].parent >= 0 else -1
            self.ndsc[y].ch0 = nid[self.nd[x].ch0]
            self.ndsc[y].ch1 = nid[self.nd[x].ch1]
        for x in range(n, nn):
            self.nd[x] = self.ndsc[x - n]
        for x in range(n):
            self.nd[x].parent = nid[self.nd[x].parent]
        self.root = nid[self.root]
        if self.m == 0:
            self._ranges()
            return
        # Slots in leaf order (newslot: old slot -> new slot), then the twins re-pointed.
        newslot = self.sc32
        s_adj = self.sc32 + 2 * self.m
        s_lab = self.sc32 + 4 * self.m
        pos = 0
        for p in range(n):
            u = self.order[p]
            d = self.se[u] - self.sb[u]
            for i in range(d):
                newslot[self.sb[u] + i] = pos + i
                s_adj[pos + i] = self.adj[self.sb[u] + i]
                s_lab[pos + i] = nid[self.lab[self.sb[u] + i]]
            self.sb[u] = pos
            pos += d
            self.se[u] = pos
        for i in range(2 * self.m):
            self.bufs[newslot[i]] = newslot[self.twin[i]]
        for i in range(2 * self.m):
            self.twin[i] = self.bufs[i]
            self.adj[i] = s_adj[i]
            self.lab[i] = s_lab[i]
        self._ranges()

    cdef inline void _merge(self, int x, int y, int into) noexcept nogil:
        """Slot range of node `into` whose children are x and y: their ranges joined when both
        exist and are adjacent, else none (-1). (Written with selects, not branches: the outcome
        is data-dependent and unpredictable.)"""
        cdef int32_t xl = self.slo[x], xh = self.shi[x], yl = self.slo[y], yh = self.shi[y]
        cdef bint xy = xh == yl
        cdef bint ok = (xl >= 0) & (yl >= 0) & (xy | (yh == xl))
        cdef int32_t lo = xl if xy else yl
        cdef int32_t hi = yh if xy else xh
        self.slo[into] = lo if ok else -1
        self.shi[into] = hi if ok else -1

    cdef void _ranges(self) noexcept nogil:
        """Slot ranges of every node from scratch (leaves: their own slots; internal nodes:
        _merge of the children, children first)."""
        cdef int n = self.n
        cdef int32_t *pre = self.newid  # scratch: internal nodes in pre-order
        cdef int cnt, node, i
        for node in range(n):
            self.slo[node] = self.sb[node]
            self.shi[node] = self.se[node]
        if self.root < n:
            return
        cnt = self._preorder(pre, NULL)
        for i in range(cnt - 1, -1, -1):
            node = pre[i]
            self._merge(self.nd[node].ch0, self.nd[node].ch1, node)

    cdef void _refresh(self) noexcept nogil:
        cdef double s = 0.0
        cdef int node
        for node in range(self.n, 2 * self.n - 1):
            s += self.nd[node].ell
        self.logl = s

    # ------------------------------------------------------------------ the chain

    cdef inline void _collect(self, int x, int s, int r, bint want_r, int *ns, int *nr) noexcept nogil:
        """Edges incident to the leaves of subtree x labelled s (into bufs) and, if want_r,
        labelled r (into bufr). A node whose leaves' slots form one range (slo >= 0; every node
        right after _relayout, and every node whose leaf set has not changed since) is scanned as
        that range without descending into it."""
        cdef int32_t *st = self.stack
        cdef int top = 1, node
        cdef int cs = 0, cr = 0
        st[0] = x
        while top > 0:
            top -= 1
            node = st[top]
            if self.slo[node] < 0:
                st[top] = self.nd[node].ch1
                st[top + 1] = self.nd[node].ch0
                top += 2
                continue
            hrg_scan(self.lab, self.slo[node], self.shi[node], s, r, want_r,
                     self.bufs, &cs, self.bufr, &cr)
        ns[0] = cs
        nr[0] = cr

    cdef int64_t _run(self, dpc_words *src, int64_t n_steps, double temp, bint keep_best) noexcept nogil:
        cdef int n = self.n
        cdef uint32_t ninternal = <uint32_t>(n - 1)
        cdef int64_t step, accepted = 0, since_refresh = 0
        cdef int r, s, a, b, c, k, mm, g, i, ns, nr, r1, r2, r3
        cdef uint64_t w, w1, w2, w3
        cdef bint walk_k, accept
        cdef int64_t lk, lm, lc, e_kc, e_top, e_s, old_nl, old_vol
        cdef double l_in, l_top, delta
        # Accepted moves between two relayouts (O(n + m) each, so O(1) per move amortised); the
        # count carries over between calls.
        cdef int64_t relayout_every = RELAYOUT_PER_NODE * <int64_t>n + 1024
        self.steps_done = n_steps
        if n < 3:
            return 0
        # Node draws run three steps ahead so that the nodes a step touches can be prefetched
        # in stages (the node, then its parent and children, then its sibling). The draw for a
        # step is independent of everything before it, so drawing it early does not change the
        # law; the root check is still made when the node is used, against the root then.
        r1 = n + <int>_bounded(src, ninternal, &w1)
        r2 = n + <int>_bounded(src, ninternal, &w2)
        r3 = n + <int>_bounded(src, ninternal, &w3)
        for step in range(n_steps):
            if (step & _SIGNAL_MASK) == 0 and step != 0 and self._signalled():
                self.steps_done = step
                break
            r = r1
            w = w1
            r1 = r2
            w1 = w2
            r2 = r3
            w2 = w3
            r3 = n + <int>_bounded(src, ninternal, &w3)
            hrg_prefetch(&self.nd[r3])
            g = self.nd[r2].parent
            hrg_prefetch(&self.nd[g if g >= 0 else r2])
            hrg_prefetch(&self.nd[self.nd[r2].ch0])
            hrg_prefetch(&self.nd[self.nd[r2].ch1])
            g = self.nd[r1].parent
            if g >= 0:
                hrg_prefetch(&self.nd[self.nd[g].ch0 + self.nd[g].ch1 - r1])
            while r == self.root:
                r = n + <int>_bounded(src, ninternal, &w)
            s = self.nd[r].parent
            a = self.nd[r].ch0
            b = self.nd[r].ch1
            c = self.nd[s].ch0 + self.nd[s].ch1 - r  # the other child of s
            # k = a, m = b if bit 0 of w is set, else k = b, m = a (branch-free select).
            i = <int>(w & 1)
            k = b + i * (a - b)
            mm = a + b - k
            lk = self.nd[k].nleaves
            lm = self.nd[mm].nleaves
            lc = self.nd[c].nleaves
            e_s = self.nd[s].E
            if e_s == 0:
                # No edge between the subtree of r and c: E_kc = 0 without a walk, and option B
                # below relabels nothing (the m-c edges number E_s - E_kc = 0).
                walk_k = False
                ns = 0
                e_kc = 0
                e_top = self.nd[r].E
                l_in = 0.0
                l_top = _ell_lr(e_top, lk + lc, lm)
                delta = l_top - self.nd[r].ell  # ellc[s] = ell(0, .) = 0 exactly
            else:
                walk_k = (self.nd[k].vol + self.nd[k].nleaves
                          <= self.nd[mm].vol + self.nd[mm].nleaves)
                if walk_k:
                    self._collect(k, s, r, True, &ns, &nr)
                    e_kc = ns
                else:
                    self._collect(mm, s, r, False, &ns, &nr)
                    e_kc = e_s - ns
                e_top = self.nd[r].E + e_s - e_kc
                l_in = _ell_lr(e_kc, lk, lc)
                l_top = _ell_lr(e_top, lk + lc, lm)
                delta = (l_in + l_top) - (self.nd[r].ell + self.nd[s].ell)
            if delta >= 0.0:
                accept = True
            else:
                accept = _metropolis_log(src, w, temp * delta)
            if accept:
                if walk_k:
                    # Option A: r becomes (k, c), s stays on top as (r, m).
                    self._relabel(self.bufr, nr, s)
                    self._relabel(self.bufs, ns, r)
                    self._w(1, r, k)
                    self._w(2, r, c)
                    self._w(0, c, r)
                    self._w(1, s, r)
                    self._w(2, s, mm)
                    self._w(0, mm, s)
                    self.nd[r].nleaves = lk + lc
                    self.nd[r].vol = self.nd[k].vol + self.nd[c].vol
                    self.nd[r].E = e_kc
                    self.nd[s].E = e_top
                    self.nd[r].ell = l_in
                    self.nd[s].ell = l_top
                    self._merge(k, c, r)  # (s keeps its leaf set, hence its range)
                else:
                    # Option B: s becomes (k, c), r takes s's place as (s, m).
                    self._relabel(self.bufs, ns, r)
                    g = self.nd[s].parent
                    old_nl = self.nd[s].nleaves
                    old_vol = self.nd[s].vol
                    self._w(1, s, k)
                    self._w(2, s, c)
                    self._w(0, k, s)
                    self._w(1, r, s)
                    self._w(2, r, mm)
                    self._w(0, s, r)
                    self._w(0, r, g)
                    if g < 0:
                        self._w(3, 0, r)
                    else:  # ch0 (code 1) or ch1 (code 2, the next field): whichever is s
                        i = self.nd[g].ch1 == s
                        self._wp(&self.nd[g].ch0 + i, 1 + i, g, r)
                    self.nd[r].nleaves = old_nl
                    self.nd[r].vol = old_vol
                    self.nd[s].nleaves = lk + lc
                    self.nd[s].vol = self.nd[k].vol + self.nd[c].vol
                    self.nd[s].E = e_kc
                    self.nd[r].E = e_top
                    self.nd[s].ell = l_in
                    self.nd[r].ell = l_top
                    # r takes over s's leaf set, hence its range; s gets k and c.
                    self.slo[r] = self.slo[s]
                    self.shi[r] = self.shi[s]
                    self._merge(k, c, s)
                self.logl += delta
                accepted += 1
                since_refresh += 1
                if since_refresh >= REFRESH_ACCEPTS:
                    self._refresh()
                    since_refresh = 0
                if keep_best and self.logl > self.best_logl:
                    self._new_best()
                self.since_layout += 1
                if self.since_layout >= relayout_every:
                    self._relayout()
        self._refresh()
        return accepted

    cdef bint _signalled(self) noexcept nogil:
        """Run pending signal handlers; True (the exception kept in _pending) if one raised."""
        with gil:
            try:
                PyErr_CheckSignals()
            except BaseException as exc:
                self._pending = exc
                return True
        return False

    # Best-state tracking without an O(n) copy per record: when the chain reaches a new best, only
    # a log of the tree-pointer writes that follow is kept (code, index, old value); the best tree
    # is the current one with the log undone. When the log would overflow, the best tree is
    # materialised (O(n)) into the b-arrays and logging stops until the next record, so the copies
    # cost O(1) amortised per accepted move.
    cdef inline void _relabel(self, const int32_t *slots, int cnt, int32_t label) noexcept nogil:
        """Give the edges at ``slots`` (one incidence slot each) the LCA label, at both ends."""
        cdef int i
        for i in range(cnt):
            self.lab[slots[i]] = label
            self.lab[self.twin[slots[i]]] = label

    cdef inline void _w(self, int code, int idx, int32_t val) noexcept nogil:
        cdef int32_t *ptr
        if code == 0:
            ptr = &self.nd[idx].parent
        elif code == 1:
            ptr = &self.nd[idx].ch0
        elif code == 2:
            ptr = &self.nd[idx].ch1
        else:
            ptr = &self.root
        self._wp(ptr, code, idx, val)

    cdef inline void _wp(self, int32_t *ptr, int code, int idx, int32_t val) noexcept nogil:
        """*ptr = val, where ptr is field `code` of node idx (as in _w), logged when logging."""
        if self.logging:
            if self.log_len + 1 > self.log_cap:
                self._materialize()
            else:
                self.logc[self.log_len] = code
                self.logi[self.log_len] = idx
                self.logv[self.log_len] = ptr[0]
                self.log_len += 1
        ptr[0] = val

    cdef void _reset_best(self) noexcept nogil:
        self.logging = False
        self.log_len = 0
        self.broot = -1
        self.best_logl = -1e308

    cdef void _new_best(self) noexcept nogil:
        self.best_logl = self.logl
        self.logging = True
        self.log_len = 0
        self.broot = -2  # "current state undone by the log"

    cdef void _materialize(self) noexcept nogil:
        cdef int node, i, code
        cdef int32_t broot = self.root
        for node in range(2 * self.n - 1):
            self.bparent[node] = self.nd[node].parent
            self.bch0[node] = self.nd[node].ch0
            self.bch1[node] = self.nd[node].ch1
        for i in range(self.log_len - 1, -1, -1):
            code = self.logc[i]
            if code == 0:
                self.bparent[self.logi[i]] = self.logv[i]
            elif code == 1:
                self.bch0[self.logi[i]] = self.logv[i]
            elif code == 2:
                self.bch1[self.logi[i]] = self.logv[i]
            else:
                broot = self.logv[i]
        self.broot = broot
        self.logging = False
        self.log_len = 0

    def run(self, int64_t n_steps, double temperature, BitgenHandle h, bint keep_best=False):
        """Run n_steps Metropolis moves at `temperature` (stationary law proportional to
        exp(temperature * logL)); returns the number accepted. With keep_best the most likely
        state visited (over all runs with keep_best) is kept (see restore_best). Every
        SIGNAL_EVERY steps pending signal handlers run: if one raises (KeyboardInterrupt), the
        run stops at that step boundary (a valid state, the steps made counted in n_steps) and
        the exception propagates."""
        cdef dpc_words src
        cdef int64_t acc
        if self.root < 0:
            raise RuntimeError("no tree: call random_tree or set_tree first")
        self._pending = None
        with h.lock, nogil:
            random_words(&src, h.bitgen)
            acc = self._run(&src, n_steps, temperature, keep_best)
        self.n_accepted_total += acc
        self.n_steps_total += self.steps_done
        if self._pending is not None:  # interrupted at a step boundary: the state is valid
            exc, self._pending = self._pending, None
            raise exc
        return acc

    def relayout(self):
        """Renumber the internal nodes in pre-order and re-lay the incidence slots in leaf order
        (done by random_tree and periodically by run; the dendrogram is unchanged)."""
        if self.root >= 0:
            with nogil:
                self._relayout()

    def slot_ranges(self):
        """Copies of (sb, se, slo, shi): each vertex's incidence slots [sb, se), and each node's
        slot range [slo, shi) (-1 when its leaves' slots are not one range)."""
        return self._sb.copy(), self._se.copy(), self._slo.copy(), self._shi.copy()

    def restore_best(self):
        """Load the best state recorded by run(keep_best=True); returns False if none."""
        if self.broot == -2:
            with nogil:
                self._materialize()
        if self.broot < 0:
            return False
        self.set_tree(self._bparent.copy(), self._bch0.copy(), self._bch1.copy(), self.broot)
        self._new_best()
        return True

    # ------------------------------------------------------------------ read-out

    @property
    def log_likelihood(self):
        return self.logl

    @property
    def best_log_likelihood(self):
        return self.best_logl if self.broot != -1 else None

    @property
    def root_id(self):
        return self.root

    @property
    def n_accepted(self):
        return self.n_accepted_total

    @property
    def n_steps(self):
        return self.n_steps_total

    def arrays(self):
        """Copies of the state: parent, ch0, ch1 (2n - 1), nleaves, vol, E, ell (2n - 1), lca (m,
        from the per-slot labels; both slots of an edge must agree, else -2)."""
        lca = np.full(self.m, -1, dtype=np.int32)
        if self.m:
            lab = self._lab[:2 * self.m]
            adj = self._adj
            lca[adj] = lab
            lca[adj[lab != lab[self._twin[:2 * self.m]]]] = -2
        return {
            "parent": self._nd["parent"].copy(), "ch0": self._nd["ch0"].copy(),
            "ch1": self._nd["ch1"].copy(), "nleaves": self._nd["nleaves"].astype(np.int64),
            "vol": self._nd["vol"].astype(np.int64), "E": self._nd["E"].astype(np.int64),
            "ell": self._nd["ell"].copy(), "lca": lca,
        }

    def leaf_ranges(self):
        """(order, lo, hi) of the last rebuild: leaves in DFS order and each node's range."""
        with nogil:
            self._rebuild()
        return self._order.copy(), self._lo.copy(), self._hi.copy()
