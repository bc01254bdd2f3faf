# cython: language_level=3
"""Hierarchical random graph kernel: dendrogram state, MCMC moves, incremental log-likelihood.

The state (ALGORITHMS 4.4) lives in flat C arrays over 2n - 1 node ids (leaves 0..n-1, internal
nodes n..2n-2): parent and two child pointers, and per node the number of leaves, the volume (sum of
the leaves' degrees), the edge count E_r and the cached profile log-likelihood ell(E_r, N_r). The
graph is held in CSR form (incident edge ids per vertex), and every edge carries the id of its lowest
common ancestor, the one internal node whose E counts it.

A move (Clauset-Moore-Newman 2008) picks a non-root internal node r uniformly, with parent s, children
a, b and sibling c, and proposes ((k, c), m) for {k, m} = {a, b} chosen by a fair bit. The only count
not stored is E_kc; it is obtained by walking the leaves of whichever of k and m is cheaper and
counting incident edges labelled s, so a move costs the smaller subtree, not O(n). An accepted move
relabels the same edges (option A or B of ALGORITHMS 4.4), so the labels stay exact.

All randomness comes from the generator passed in (dpcore's ChaCha20 by default), read under its
lock without the GIL. Node choice is exact (rejection); the Metropolis test uses a 53-bit uniform
(P(accept) is exp(T delta) rounded up to a multiple of 2**-53).
"""
import numpy as np

from libc.math cimport log, log1p, exp
from libc.stdint cimport int8_t, int32_t, int64_t, uint32_t, uint64_t

from dpcore._random cimport BitgenHandle, bitgen_handle, dpc_words, random_words, dpc_words_next

cdef double TWO_M53 = 1.1102230246251565e-16  # 2**-53
# Re-sum the cached ell values after this many accepted moves, to stop rounding drift.
cdef int64_t REFRESH_ACCEPTS = 65536


cdef inline double _ell(int64_t e, int64_t N) noexcept nogil:
    """e ln(e/N) + (N - e) ln(1 - e/N), 0 at e = 0 and e = N (the log1p form, ALGORITHMS 4.1)."""
    if e <= 0 or e >= N:
        return 0.0
    cdef double p = <double>e / <double>N
    return <double>e * log(p) + <double>(N - e) * log1p(-p)


def ell(e, N):
    """Profile log-likelihood of one internal node (test helper; e, N integers, 0 <= e <= N)."""
    return _ell(<int64_t>e, <int64_t>N)


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
    cdef object _parent, _ch0, _ch1, _nleaves, _vol, _E, _ellc
    cdef object _indptr, _adj, _eu, _ev, _lca, _lab, _twin, _stack, _bufs, _bufr
    cdef object _order, _pos, _lo, _hi
    cdef object _bparent, _bch0, _bch1
    cdef int32_t *parent
    cdef int32_t *ch0
    cdef int32_t *ch1
    cdef int64_t *nleaves
    cdef int64_t *vol
    cdef int64_t *E
    cdef double *ellc
    cdef int32_t *indptr
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
        self._adj = np.ascontiguousarray(ids[order], dtype=np.int32)
        self._parent = np.full(nn, -1, dtype=np.int32)
        self._ch0 = np.full(nn, -1, dtype=np.int32)
        self._ch1 = np.full(nn, -1, dtype=np.int32)
        self._nleaves = np.ones(nn, dtype=np.int64)
        vol = np.zeros(nn, dtype=np.int64)
        vol[:n] = deg
        self._vol = vol
        self._E = np.zeros(nn, dtype=np.int64)
        self._ellc = np.zeros(nn, dtype=np.float64)
        self._lca = np.full(self.m, -1, dtype=np.int32)
        # Per incidence slot t (CSR order): the edge's label (a copy of lca, read sequentially in
        # the hot loop) and the slot of the same edge at its other endpoint.
        self._lab = np.full(max(2 * self.m, 1), -1, dtype=np.int32)
        adj = self._adj
        twin = np.zeros(max(2 * self.m, 1), dtype=np.int32)
        if self.m:
            order_e = np.argsort(adj, kind="stable")  # the two slots of each edge, adjacent
            pair = order_e.reshape(-1, 2)
            twin[pair[:, 0]] = pair[:, 1]
            twin[pair[:, 1]] = pair[:, 0]
        self._twin = twin
        self._stack = np.zeros(nn + 1, dtype=np.int32)
        self._bufs = np.zeros(max(2 * self.m, 1), dtype=np.int32)
        self._bufr = np.zeros(max(2 * self.m, 1), dtype=np.int32)
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
        cdef int32_t[::1] i32
        cdef int64_t[::1] i64
        cdef double[::1] f64
        i32 = self._parent; self.parent = &i32[0]
        i32 = self._ch0; self.ch0 = &i32[0]
        i32 = self._ch1; self.ch1 = &i32[0]
        i64 = self._nleaves; self.nleaves = &i64[0]
        i64 = self._vol; self.vol = &i64[0]
        i64 = self._E; self.E = &i64[0]
        f64 = self._ellc; self.ellc = &f64[0]
        i64 = self._cum; self.cum = &i64[0]
        i8 = self._logc; self.logc = &i8[0]
        i32 = self._logi; self.logi = &i32[0]
        i32 = self._logv; self.logv = &i32[0]
        i32 = self._indptr; self.indptr = &i32[0]
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
                self.ch0[n + i] = act[cnt - 1]
                self.ch1[n + i] = act[b]
                self.parent[act[cnt - 1]] = n + i
                self.parent[act[b]] = n + i
                act[b] = n + i
            self.parent[2 * n - 2] = -1
            self.root = 2 * n - 2
            self._reset_best()
            self._rebuild()

    def set_tree(self, parent, ch0, ch1, int root):
        """Load a tree (arrays over the 2n - 1 node ids) and rebuild the bookkeeping from scratch.
        The caller guarantees a full binary tree on the leaves 0..n-1 with internal ids n..2n-2."""
        self._parent[:] = parent
        self._ch0[:] = ch0
        self._ch1[:] = ch1
        self.root = root
        self._reset_best()
        with nogil:
            self._rebuild()

    cdef void _rebuild(self) noexcept nogil:
        """From scratch: leaf order, nleaves, vol, every edge's LCA (small-to-large over a DFS
        leaf order, O(m log m)), E, cached ell and the log-likelihood."""
        cdef int n = self.n
        cdef int top = 0, nxt = 0, x, y, node, p, t, u, w, e
        cdef int64_t cnt
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
            st[top + 1] = self.ch1[node]
            st[top + 2] = self.ch0[node]
            top += 3
        # Volumes from prefix sums of the degrees in leaf order (cum has n + 1 entries).
        self.cum[0] = 0
        for p in range(n):
            u = self.order[p]
            self.cum[p + 1] = self.cum[p] + (self.indptr[u + 1] - self.indptr[u])
        for node in range(n, 2 * n - 1):
            self.nleaves[node] = self.hi[node] - self.lo[node]
            self.vol[node] = self.cum[self.hi[node]] - self.cum[self.lo[node]]
        for e in range(self.m):
            self.lca[e] = -1
        for node in range(n, 2 * n - 1):
            x = self.ch0[node]
            y = self.ch1[node]
            if self.vol[x] > self.vol[y]:
                x, y = y, x
            for p in range(self.lo[x], self.hi[x]):
                u = self.order[p]
                for t in range(self.indptr[u], self.indptr[u + 1]):
                    e = self.adj[t]
                    w = self.eu[e] + self.ev[e] - u
                    if self.lo[y] <= self.pos[w] < self.hi[y]:
                        self.lca[e] = node
        for node in range(2 * n - 1):
            self.E[node] = 0
            self.ellc[node] = 0.0
        for e in range(self.m):
            self.E[self.lca[e]] += 1
        for t in range(2 * self.m):
            self.lab[t] = self.lca[self.adj[t]]
        for node in range(n, 2 * n - 1):
            self.ellc[node] = _ell(self.E[node], self.nleaves[self.ch0[node]] * self.nleaves[self.ch1[node]])
        self._refresh()

    cdef void _refresh(self) noexcept nogil:
        cdef double s = 0.0
        cdef int node
        for node in range(self.n, 2 * self.n - 1):
            s += self.ellc[node]
        self.logl = s

    # ------------------------------------------------------------------ the chain

    cdef inline void _collect(self, int x, int s, int r, bint want_r, int *ns, int *nr) noexcept nogil:
        """Edges incident to the leaves of subtree x labelled s (into bufs) and, if want_r,
        labelled r (into bufr)."""
        cdef int32_t *st = self.stack
        cdef int top = 1, node, t, e, l
        cdef int cs = 0, cr = 0
        st[0] = x
        while top > 0:
            top -= 1
            node = st[top]
            if node >= self.n:
                st[top] = self.ch0[node]
                st[top + 1] = self.ch1[node]
                top += 2
                continue
            for t in range(self.indptr[node], self.indptr[node + 1]):
                l = self.lab[t]
                if l == s:
                    self.bufs[cs] = t
                    cs += 1
                elif want_r and l == r:
                    self.bufr[cr] = t
                    cr += 1
        ns[0] = cs
        nr[0] = cr

    cdef int64_t _run(self, dpc_words *src, int64_t n_steps, double temp, bint keep_best) noexcept nogil:
        cdef int n = self.n
        cdef uint32_t ninternal = <uint32_t>(n - 1)
        cdef int64_t step, accepted = 0, since_refresh = 0
        cdef int r, s, a, b, c, k, mm, g, i, ns, nr
        cdef uint64_t w
        cdef bint walk_k, accept
        cdef int64_t lk, lm, lc, e_kc, e_top, old_nl, old_vol
        cdef double l_in, l_top, delta
        if n < 3:
            return 0
        for step in range(n_steps):
            while True:
                r = n + <int>_bounded(src, ninternal, &w)
                if r != self.root:
                    break
            s = self.parent[r]
            a = self.ch0[r]
            b = self.ch1[r]
            c = self.ch1[s] if self.ch0[s] == r else self.ch0[s]
            if w & 1:
                k = a
                mm = b
            else:
                k = b
                mm = a
            walk_k = self.vol[k] + self.nleaves[k] <= self.vol[mm] + self.nleaves[mm]
            if walk_k:
                self._collect(k, s, r, True, &ns, &nr)
                e_kc = ns
            else:
                self._collect(mm, s, r, False, &ns, &nr)
                e_kc = self.E[s] - ns
            lk = self.nleaves[k]
            lm = self.nleaves[mm]
            lc = self.nleaves[c]
            e_top = self.E[r] + self.E[s] - e_kc
            l_in = _ell(e_kc, lk * lc)
            l_top = _ell(e_top, (lk + lc) * lm)
            delta = (l_in + l_top) - (self.ellc[r] + self.ellc[s])
            if delta >= 0.0:
                accept = True
            else:
                accept = <double>(dpc_words_next(src) >> 11) * TWO_M53 < exp(temp * delta)
            if accept:
                if walk_k:
                    # Option A: r becomes (k, c), s stays on top as (r, m).
                    for i in range(nr):
                        self.lab[self.bufr[i]] = s
                        self.lab[self.twin[self.bufr[i]]] = s
                    for i in range(ns):
                        self.lab[self.bufs[i]] = r
                        self.lab[self.twin[self.bufs[i]]] = r
                    self._w(1, r, k)
                    self._w(2, r, c)
                    self._w(0, c, r)
                    self._w(1, s, r)
                    self._w(2, s, mm)
                    self._w(0, mm, s)
                    self.nleaves[r] = lk + lc
                    self.vol[r] = self.vol[k] + self.vol[c]
                    self.E[r] = e_kc
                    self.E[s] = e_top
                    self.ellc[r] = l_in
                    self.ellc[s] = l_top
                else:
                    # Option B: s becomes (k, c), r takes s's place as (s, m).
                    for i in range(ns):
                        self.lab[self.bufs[i]] = r
                        self.lab[self.twin[self.bufs[i]]] = r
                    g = self.parent[s]
                    old_nl = self.nleaves[s]
                    old_vol = self.vol[s]
                    self._w(1, s, k)
                    self._w(2, s, c)
                    self._w(0, k, s)
                    self._w(1, r, s)
                    self._w(2, r, mm)
                    self._w(0, s, r)
                    self._w(0, r, g)
                    if g < 0:
                        self._w(3, 0, r)
                    elif self.ch0[g] == s:
                        self._w(1, g, r)
                    else:
                        self._w(2, g, r)
                    self.nleaves[r] = old_nl
                    self.vol[r] = old_vol
                    self.nleaves[s] = lk + lc
                    self.vol[s] = self.vol[k] + self.vol[c]
                    self.E[s] = e_kc
                    self.E[r] = e_top
                    self.ellc[s] = l_in
                    self.ellc[r] = l_top
                self.logl += delta
                accepted += 1
                since_refresh += 1
                if since_refresh >= REFRESH_ACCEPTS:
                    self._refresh()
                    since_refresh = 0
                if keep_best and self.logl > self.best_logl:
                    self._new_best()
        self._refresh()
        return accepted

    # Best-state tracking without an O(n) copy per record: when the chain reaches a new best, only
    # a log of the tree-pointer writes that follow is kept (code, index, old value); the best tree
    # is the current one with the log undone. When the log would overflow, the best tree is
    # materialised (O(n)) into the b-arrays and logging stops until the next record, so the copies
    # cost O(1) amortised per accepted move.
    cdef inline void _w(self, int code, int idx, int32_t val) noexcept nogil:
        cdef int32_t *arr
        if code == 0:
            arr = self.parent
        elif code == 1:
            arr = self.ch0
        elif code == 2:
            arr = self.ch1
        else:
            arr = &self.root
        if self.logging:
            if self.log_len + 1 > self.log_cap:
                self._materialize()
            else:
                self.logc[self.log_len] = code
                self.logi[self.log_len] = idx
                self.logv[self.log_len] = arr[idx]
                self.log_len += 1
        arr[idx] = val

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
        cdef int32_t *arr
        cdef int32_t broot = self.root
        for node in range(2 * self.n - 1):
            self.bparent[node] = self.parent[node]
            self.bch0[node] = self.ch0[node]
            self.bch1[node] = self.ch1[node]
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
        state visited (over all runs with keep_best) is kept (see restore_best)."""
        cdef dpc_words src
        cdef int64_t acc
        if self.root < 0:
            raise RuntimeError("no tree: call random_tree or set_tree first")
        with h.lock, nogil:
            random_words(&src, h.bitgen)
            acc = self._run(&src, n_steps, temperature, keep_best)
        self.n_accepted_total += acc
        self.n_steps_total += n_steps
        return acc

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
            "parent": self._parent.copy(), "ch0": self._ch0.copy(), "ch1": self._ch1.copy(),
            "nleaves": self._nleaves.copy(), "vol": self._vol.copy(), "E": self._E.copy(),
            "ell": self._ellc.copy(), "lca": lca,
        }

    def leaf_ranges(self):
        """(order, lo, hi) of the last rebuild: leaves in DFS order and each node's range."""
        with nogil:
            self._rebuild()
        return self._order.copy(), self._lo.copy(), self._hi.copy()
