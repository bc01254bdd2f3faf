# cython: language_level=3
"""Selection kernel: the exponential mechanism and permute-and-flip over arrays and chunk streams.

Every sampler makes one pass over the utilities, keeps O(1) state (O(k) for top-k) and can be fed
chunk by chunk, so candidate sets that do not fit in memory are handled as streams. Scores are
``c * (u - ref)`` with ``c`` the calibrated scale (epsilon / (2 sensitivity), or epsilon /
sensitivity for monotone utilities) and ``ref`` the largest utility seen so far, so huge utilities
never overflow and the candidates that matter are never absorbed by rounding.

* `ArgmaxState`, noise "gumbel": report-noisy-max with Gumbel noise (the exponential mechanism);
  noise "exponential": report-noisy-max with exponential noise (= permute-and-flip). Fixed work per
  candidate: one 64-bit word, a noise value from a vectorised logarithm, one comparison. Floating
  point: the law is the mechanism's up to rounding (Ilvento, CCS 2020).
* `TopKState`: one-shot Gumbel top-k (Durfee-Rogers), a size-k heap.
* `InverseCDFState`: inverse-CDF sampling; pass 1 a streaming log-sum-exp, pass 2 the search.
* `ExactState`: the exponential mechanism with exactly its law, the exact Gumbel race (kernel
  dpcore._select_exact, re-exported here).

Draws happen under the generator's lock; a seed reproduces the output.

Threads: a chunk of at least THREAD_MIN (2**20) candidates is split into blocks of THREAD_BLOCK
(2**16) candidates; one 256-bit key is drawn from the caller's generator and block b draws from
ChaCha20 stream b of that key (_random.pxd), so the result does not depend on the thread count.
Each block finds its own noisy maximum (top-k: its k largest keys) with the single-pass code, and
the blocks are merged in block order. Proof that the law is the mechanism's: every candidate's
key c (u_i - ref) + noise_i is a function of u_i, the chunk's ref and its own uniform only, so it
is the same number whether it is computed per block or in one pass; the maximum of the blocks'
maxima, compared with the strict > of the single pass in block order, is the first maximal key in
index order (what the single pass returns), and the k largest keys of the union are among the
union of each block's k largest. The uniforms are independent (distinct ChaCha20 streams of a
fresh key), as in one stream, so the winner's law is the one-pass law.
"""
import numpy as np

from libc.math cimport INFINITY, exp
from libc.stdint cimport uint64_t

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from dpcore._random cimport (
    BitgenHandle, bitgen_t, random_u64, random_ustar, BlockStream, StreamKey, stream_key,
    stream_open,
)
from dpcore._dpcore_threads import run_blocks

# The exact method is its own kernel; its names stay reachable here (tests, dpcore.selection).
from dpcore._exact_gumbel import decide as _decide  # noqa: F401  # no-cython-lint
from dpcore._select_exact import (  # noqa: F401
    ExactState, _cell_bounds, _force_exact_path, _gumbel_cell_exact,  # no-cython-lint
)


cdef extern from "select_simd.h" nogil:
    double sel_log(double x)
    double sel_exp(double x)
    double sel_word_uniform(uint64_t w)
    double sel_gumbel(double v)
    void sel_uniform_block(const uint64_t *w, double *v, int n)
    void sel_gumbel_block(const double *u, const double *v, double c, double ref, double *g,
                          double *key, int n)
    void sel_expo_block(const double *u, const double *v, double c, double ref, double *g,
                        double *key, int n)
    void sel_weight_block(const double *u, double c, double ref, double *wt, int n)
    void sel_log_block(const double *x, double *y, int n)
    void sel_exp_block(const double *x, double *y, int n)
    int sel_set_level(int level)
    int sel_get_level()


sel_set_level(1)

cdef enum:
    BLOCK = 256
    THREAD_BLOCK = 1 << 16
THREAD_MIN = 1 << 20

cdef enum Noise:
    NOISE_GUMBEL = 0
    NOISE_EXPONENTIAL = 1

cdef uint64_t TWO52 = <uint64_t>1 << 52
cdef double TWO_M64 = 5.421010862427522e-20    # 2**-64
cdef double TWO_M53 = 1.1102230246251565e-16   # 2**-53
cdef double DBL_MIN_ = 2.2250738585072014e-308


# ------------------------------------------------------------------------------------------------
# Report-noisy-max (Gumbel: exponential mechanism; exponential noise: permute-and-flip)

cdef inline double uniform_fixup(bitgen_t *bg, uint64_t w) noexcept nogil:
    """The uniform (w + U') 2^-64 for a word w < 2^52, U' a fresh full-precision uniform
    (Mironov's U*): the relative precision of the small uniforms the winners have."""
    cdef double v = (<double>w + random_ustar(bg)) * TWO_M64
    return v if v >= DBL_MIN_ else DBL_MIN_


cdef struct Best:
    Py_ssize_t index     # -1: none yet
    double key           # c (u - ref) + noise, for the current ref
    double u
    double noise


cdef inline void draw_block(bitgen_t *bg, int m, uint64_t *w, double *v) noexcept nogil:
    cdef int i
    for i in range(m):
        w[i] = bg.next_uint64(bg.state)
    sel_uniform_block(w, v, m)
    for i in range(m):
        if w[i] < TWO52:
            v[i] = uniform_fixup(bg, w[i])


cdef void argmax_run(bitgen_t *bg, const double *u, Py_ssize_t n, double c, double ref, int noise,
                     Py_ssize_t offset, Best *best) noexcept nogil:
    """Feed n candidates (IN u) to the running maximum (IN/OUT best)."""
    cdef uint64_t w[BLOCK]
    cdef double v[BLOCK]
    cdef double g[BLOCK]
    cdef double key[BLOCK]
    cdef Py_ssize_t start = 0
    cdef int m, i, bi
    cdef double bk, ki
    cdef bint better
    while start < n:
        m = BLOCK if n - start > BLOCK else <int>(n - start)
        draw_block(bg, m, w, v)
        if noise == NOISE_GUMBEL:
            sel_gumbel_block(u + start, v, c, ref, g, key, m)
        else:
            sel_expo_block(u + start, v, c, ref, g, key, m)
        # Branch-free running maximum (selects, not jumps), so the time does not depend on how
        # often the maximum changes; the first of equal keys is kept.
        bk = best.key
        bi = -1
        for i in range(m):
            ki = key[i]
            better = ki > bk
            bk = ki if better else bk
            bi = i if better else bi
        if bi >= 0:
            best.key = bk
            best.index = offset + start + bi
            best.u = u[start + bi]
            best.noise = g[bi]
        start += m


cdef class ArgmaxState:
    """Running report-noisy-max over chunks: ``feed`` each chunk with its maximum, then read
    ``index`` (-1 while every candidate so far is excluded)."""
    cdef double c
    cdef double ref
    cdef int noise
    cdef Py_ssize_t offset
    cdef Best best

    def __init__(self, double c, noise):
        if noise == "gumbel":
            self.noise = NOISE_GUMBEL
        elif noise == "exponential":
            self.noise = NOISE_EXPONENTIAL
        else:
            raise ValueError(f"noise must be 'gumbel' or 'exponential', got {noise!r}")
        self.c = c
        self.ref = -INFINITY
        self.offset = 0
        self.best.index = -1
        self.best.key = -INFINITY
        self.best.u = -INFINITY
        self.best.noise = 0.0

    def feed(self, const double[::1] u, double umax, BitgenHandle h):
        """Process one chunk (IN u, its maximum umax; no NaN or +inf) drawing from h."""
        cdef Py_ssize_t n = u.shape[0]
        if n == 0:
            return
        if umax == -INFINITY:
            self.offset += n
            return
        if umax > self.ref:
            self.ref = umax
            if self.best.index >= 0:
                self.best.key = self.c * (self.best.u - self.ref) + self.best.noise
        if n >= THREAD_MIN:
            self.best = _Blocks(u, h, self.c, self.ref, self.noise, self.offset).argmax(self.best)
        else:
            with h.lock, nogil:
                argmax_run(h.bitgen, &u[0], n, self.c, self.ref, self.noise, self.offset,
                           &self.best)
        self.offset += n

    @property
    def index(self):
        return self.best.index

    @property
    def count(self):
        """Candidates fed so far."""
        return self.offset


# ------------------------------------------------------------------------------------------------
# One-shot top-k with Gumbel noise: a min-heap of the k largest keys


cdef inline void heap_swap(double *key, double *hu, double *hg, Py_ssize_t *idx, Py_ssize_t a,
                           Py_ssize_t b) noexcept nogil:
    cdef double t = key[a]
    key[a] = key[b]; key[b] = t
    t = hu[a]; hu[a] = hu[b]; hu[b] = t
    t = hg[a]; hg[a] = hg[b]; hg[b] = t
    cdef Py_ssize_t ti = idx[a]
    idx[a] = idx[b]; idx[b] = ti


cdef inline void heap_down(double *key, double *hu, double *hg, Py_ssize_t *idx, Py_ssize_t size,
                           Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t child
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and key[child + 1] < key[child]:
            child += 1
        if not key[child] < key[pos]:
            return
        heap_swap(key, hu, hg, idx, pos, child)
        pos = child


cdef inline void heap_up(double *key, double *hu, double *hg, Py_ssize_t *idx,
                         Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t parent
    while pos > 0:
        parent = (pos - 1) // 2
        if not key[pos] < key[parent]:
            return
        heap_swap(key, hu, hg, idx, pos, parent)
        pos = parent


cdef void topk_run(bitgen_t *bg, const double *u, Py_ssize_t n, double c, double ref,
                   Py_ssize_t offset, Py_ssize_t k, Py_ssize_t *size, double *hkey, double *hu,
                   double *hg, Py_ssize_t *hidx) noexcept nogil:
    cdef uint64_t w[BLOCK]
    cdef double v[BLOCK]
    cdef double g[BLOCK]
    cdef double key[BLOCK]
    cdef Py_ssize_t start = 0, s
    cdef int m, i
    while start < n:
        m = BLOCK if n - start > BLOCK else <int>(n - start)
        draw_block(bg, m, w, v)
        sel_gumbel_block(u + start, v, c, ref, g, key, m)
        for i in range(m):
            if not key[i] > -INFINITY:  # excluded candidate
                continue
            s = size[0]
            if s < k:
                hkey[s] = key[i]; hu[s] = u[start + i]; hg[s] = g[i]; hidx[s] = offset + start + i
                size[0] = s + 1
                heap_up(hkey, hu, hg, hidx, s)
            elif key[i] > hkey[0]:
                hkey[0] = key[i]; hu[0] = u[start + i]; hg[0] = g[i]; hidx[0] = offset + start + i
                heap_down(hkey, hu, hg, hidx, k, 0)
        start += m


cdef class TopKState:
    """Running one-shot Gumbel top-k over chunks; ``indices()`` gives the k best, best first."""
    cdef double c
    cdef double ref
    cdef Py_ssize_t k
    cdef Py_ssize_t size
    cdef Py_ssize_t offset
    cdef double[::1] hkey
    cdef double[::1] hu
    cdef double[::1] hg
    cdef Py_ssize_t[::1] hidx

    def __init__(self, double c, Py_ssize_t k):
        if k < 1:
            raise ValueError("k must be >= 1")
        self.c = c
        self.k = k
        self.ref = -INFINITY
        self.size = 0
        self.offset = 0
        self.hkey = np.empty(k, dtype=np.float64)
        self.hu = np.empty(k, dtype=np.float64)
        self.hg = np.empty(k, dtype=np.float64)
        self.hidx = np.empty(k, dtype=np.intp)

    def feed(self, const double[::1] u, double umax, BitgenHandle h):
        cdef Py_ssize_t n = u.shape[0], i
        if n == 0:
            return
        if umax == -INFINITY:
            self.offset += n
            return
        if umax > self.ref:
            self.ref = umax
            for i in range(self.size):  # re-key for the new reference, then restore the heap
                self.hkey[i] = self.c * (self.hu[i] - self.ref) + self.hg[i]
            for i in range(self.size // 2 - 1, -1, -1):
                heap_down(&self.hkey[0], &self.hu[0], &self.hg[0], &self.hidx[0], self.size, i)
        if n >= THREAD_MIN and self.k <= TOPK_THREAD_MAX_K:
            _Blocks(u, h, self.c, self.ref, NOISE_GUMBEL, self.offset).topk(self)
        else:
            with h.lock, nogil:
                topk_run(h.bitgen, &u[0], n, self.c, self.ref, self.offset, self.k, &self.size,
                         &self.hkey[0], &self.hu[0], &self.hg[0], &self.hidx[0])
        self.offset += n

    cdef void insert(self, double key, double u, double g, Py_ssize_t index) noexcept nogil:
        """topk_run's update for one held candidate of a block (the merge)."""
        cdef Py_ssize_t s = self.size
        if s < self.k:
            self.hkey[s] = key; self.hu[s] = u; self.hg[s] = g; self.hidx[s] = index
            self.size = s + 1
            heap_up(&self.hkey[0], &self.hu[0], &self.hg[0], &self.hidx[0], s)
        elif key > self.hkey[0]:
            self.hkey[0] = key; self.hu[0] = u; self.hg[0] = g; self.hidx[0] = index
            heap_down(&self.hkey[0], &self.hu[0], &self.hg[0], &self.hidx[0], self.k, 0)

    @property
    def size(self):
        """Non-excluded candidates held (at most k)."""
        return self.size

    @property
    def count(self):
        return self.offset

    def indices(self):
        """The held candidates by decreasing key (ties: smaller index first)."""
        keys = np.asarray(self.hkey[:self.size])
        idx = np.asarray(self.hidx[:self.size])
        order = np.lexsort((idx, -keys))
        return idx[order].astype(np.int64)


# ------------------------------------------------------------------------------------------------
# Threaded chunks (see the module docstring): per-block results, merged in block order

# Top-k is threaded only for k up to this (each block holds k candidates).
cdef Py_ssize_t TOPK_THREAD_MAX_K = 4096


cdef class _Blocks:
    """One threaded chunk: the candidates u, the state's scale, reference and offset, one key."""
    cdef const double[::1] u
    cdef Py_ssize_t n, nblocks, offset, k
    cdef double c, ref
    cdef int noise
    cdef bint heaps             # top-k (else report-noisy-max)
    cdef StreamKey key
    cdef Best *best             # per block (report-noisy-max)
    cdef double[:, ::1] hkey    # per block heaps (top-k)
    cdef double[:, ::1] hu
    cdef double[:, ::1] hg
    cdef Py_ssize_t[:, ::1] hidx
    cdef Py_ssize_t[::1] size

    def __cinit__(self, const double[::1] u, BitgenHandle h, double c, double ref, int noise,
                  Py_ssize_t offset):
        self.u = u
        self.c, self.ref, self.noise, self.offset = c, ref, noise, offset
        self.n = u.shape[0]
        self.nblocks = (self.n + THREAD_BLOCK - 1) // THREAD_BLOCK
        self.best = NULL
        self.key = stream_key(h)

    def __dealloc__(self):
        PyMem_Free(self.best)

    cdef Best argmax(self, Best best):
        """The state's best after this chunk."""
        cdef Py_ssize_t b
        self.heaps = False
        self.best = <Best *>PyMem_Malloc(self.nblocks * sizeof(Best))
        if self.best == NULL:
            raise MemoryError()
        for b in range(self.nblocks):
            self.best[b].index = -1
            self.best[b].key = -INFINITY
        run_blocks(self, self.nblocks)
        for b in range(self.nblocks):  # strict >: the first of equal keys, as in one pass
            if self.best[b].index >= 0 and self.best[b].key > best.key:
                best = self.best[b]
        return best

    cdef topk(self, TopKState state):
        cdef Py_ssize_t b, i
        self.heaps = True
        self.k = state.k
        self.hkey = np.empty((self.nblocks, self.k))
        self.hu = np.empty((self.nblocks, self.k))
        self.hg = np.empty((self.nblocks, self.k))
        self.hidx = np.empty((self.nblocks, self.k), dtype=np.intp)
        self.size = np.zeros(self.nblocks, dtype=np.intp)
        run_blocks(self, self.nblocks)
        for b in range(self.nblocks):
            for i in range(self.size[b]):
                state.insert(self.hkey[b, i], self.hu[b, i], self.hg[b, i], self.hidx[b, i])

    def __call__(self, Py_ssize_t b):
        cdef BlockStream st
        cdef Py_ssize_t lo = b * THREAD_BLOCK
        cdef Py_ssize_t m = min(<Py_ssize_t>THREAD_BLOCK, self.n - lo)
        stream_open(&st, self.key, <uint64_t>b)
        with nogil:
            if self.heaps:
                topk_run(&st.bitgen, &self.u[lo], m, self.c, self.ref, self.offset + lo, self.k,
                         &self.size[b], &self.hkey[b, 0], &self.hu[b, 0], &self.hg[b, 0],
                         &self.hidx[b, 0])
            else:
                argmax_run(&st.bitgen, &self.u[lo], m, self.c, self.ref, self.noise,
                           self.offset + lo, &self.best[b])


# ------------------------------------------------------------------------------------------------
# Inverse CDF: pass 1 a streaming log-sum-exp, pass 2 the same sums up to the crossing


cdef double weight_run(const double *u, Py_ssize_t n, double c, double ref, double total,
                       double target, Py_ssize_t *hit, Py_ssize_t *last_positive) noexcept nogil:
    """total + sum of exp(c (u_i - ref)) in order; with target >= 0, stop at the first i whose
    running total exceeds target (hit = i). last_positive: the last i with a positive weight."""
    cdef double wt[BLOCK]
    cdef Py_ssize_t start = 0
    cdef int m, i
    hit[0] = -1
    while start < n:
        m = BLOCK if n - start > BLOCK else <int>(n - start)
        sel_weight_block(u + start, c, ref, wt, m)
        for i in range(m):
            if wt[i] > 0.0:
                last_positive[0] = start + i
                total = total + wt[i]
                if target >= 0.0 and total > target:
                    hit[0] = start + i
                    return total
        start += m
    return total


cdef class InverseCDFState:
    """Inverse-CDF sampling in two passes over the same chunks.

    Pass 1 (``feed``): the running total of exp(c (u - ref)), ref the running maximum (the
    total is rescaled when it grows). ``start_search(h)`` draws the uniform T in [0, total).
    Pass 2 (``feed`` again, same chunks in the same order): the identical sums, stopping at the
    first candidate whose running total exceeds T (rescaled to the same units).
    """
    cdef double c
    cdef double ref
    cdef double total
    cdef double final_ref
    cdef double target
    cdef bint searching
    cdef Py_ssize_t offset
    cdef Py_ssize_t hit
    cdef Py_ssize_t last_positive
    cdef Py_ssize_t seen
    cdef list chunks

    def __init__(self, double c):
        self.c = c
        self.chunks = []
        self._restart()
        self.searching = False

    cdef _restart(self):
        self.ref = -INFINITY
        self.total = 0.0
        self.offset = 0
        self.hit = -1
        self.last_positive = -1

    def feed(self, const double[::1] u, double umax):
        """Process one chunk; returns True once the search has found its candidate."""
        cdef Py_ssize_t n = u.shape[0], hit = -1, last = -1
        cdef double target = -1.0
        if not self.searching:
            self.chunks.append((n, umax))
        else:
            if self.hit >= 0:
                return True
            j = self.seen
            if j >= len(self.chunks) or self.chunks[j] != (n, umax):
                raise ValueError(
                    "utility: the stream gave different chunks on the second pass; the callable "
                    "must produce the same utilities every time it is called"
                )
            self.seen = j + 1
        if n == 0 or umax == -INFINITY:
            self.offset += n
            return False
        if umax > self.ref:
            if self.total > 0.0:
                self.total = self.total * sel_exp(self.c * (self.ref - umax))
            self.ref = umax
        if self.searching:
            # T is in units of exp(c final_ref); the running total is in units of exp(c ref).
            target = self.target * exp(self.c * (self.final_ref - self.ref))
        with nogil:
            self.total = weight_run(&u[0], n, self.c, self.ref, self.total, target, &hit, &last)
        if last >= 0:
            self.last_positive = self.offset + last
        if self.searching and hit >= 0:
            self.hit = self.offset + hit
            self.offset += n
            return True
        self.offset += n
        return False

    def start_search(self, BitgenHandle h):
        """End pass 1: draw T = U * total (U uniform on [0, 1), 53 bits) and reset for pass 2."""
        cdef uint64_t word
        if self.searching:
            raise RuntimeError("start_search called twice")
        if not self.total > 0.0:
            return False
        with h.lock:
            word = random_u64(h.bitgen)
        self.target = self.total * (<double>(word >> 11) * TWO_M53)
        self.final_ref = self.ref
        self.searching = True
        self.seen = 0
        self._restart()
        return True

    @property
    def index(self):
        """The selected candidate after pass 2 (the last positive weight if rounding left T at
        or above the recomputed total)."""
        if not self.searching:
            return -1
        return self.hit if self.hit >= 0 else self.last_positive

    @property
    def total(self):
        return self.total

    @property
    def count(self):
        return self.offset


def _weights(const double[::1] u, double c, double ref):
    """exp(c (u - ref)) elementwise, as the inverse-CDF sampler computes it (tests)."""
    out = np.empty(u.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t start = 0, n = u.shape[0]
    cdef int m
    while start < n:
        m = BLOCK if n - start > BLOCK else <int>(n - start)
        sel_weight_block(&u[start], c, ref, &o[start], m)
        start += m
    return out


# ------------------------------------------------------------------------------------------------
# Test hooks


def _simd_level(level=None):
    """Test hook: the block functions in use (0 portable, 1 AVX2); set with ``level``. Returns
    the level in force (AVX2 only when the CPU has it)."""
    if level is None:
        return sel_get_level()
    return sel_set_level(int(level))


def _log(const double[::1] x):
    """The kernel's vectorised ln for positive normal doubles."""
    out = np.empty(x.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    if x.shape[0]:
        sel_log_block(&x[0], &o[0], <int>x.shape[0])
    return out


def _exp(const double[::1] x):
    """The kernel's vectorised exp for x <= 0 (0 below -708)."""
    out = np.empty(x.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    if x.shape[0]:
        sel_exp_block(&x[0], &o[0], <int>x.shape[0])
    return out


def _word_uniform(words):
    """The uniform the fast samplers derive from each 64-bit word (before the small-word fix)."""
    cdef const uint64_t[::1] w = np.ascontiguousarray(words, dtype=np.uint64)
    out = np.empty(w.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    if w.shape[0]:
        sel_uniform_block(&w[0], &o[0], <int>w.shape[0])
    return out


def _gumbel_of_uniform(const double[::1] v):
    """-ln(-ln(1 - v)) as the fast sampler computes it."""
    out = np.empty(v.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(v.shape[0]):
        o[i] = sel_gumbel(v[i])
    return out


def _noise_keys(const double[::1] u, const double[::1] v, double c, double ref, noise):
    """(noise, key) arrays of the block functions for given uniforms (tests of both SIMD paths)."""
    cdef Py_ssize_t n = u.shape[0]
    g = np.empty(n, dtype=np.float64)
    key = np.empty(n, dtype=np.float64)
    cdef double[::1] go = g
    cdef double[::1] ko = key
    if v.shape[0] != n:
        raise ValueError("u and v must have the same length")
    if n:
        if noise == "gumbel":
            sel_gumbel_block(&u[0], &v[0], c, ref, &go[0], &ko[0], <int>n)
        else:
            sel_expo_block(&u[0], &v[0], c, ref, &go[0], &ko[0], <int>n)
    return g, key
