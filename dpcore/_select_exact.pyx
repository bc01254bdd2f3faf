# cython: language_level=3
"""Selection kernel, exact method: the exponential mechanism with exactly its law
(`ExactState`, used through dpcore._select and dpcore.selection).

The Gumbel-max race is decided exactly for real-valued uniforms: each comparison is first tried
on a coarse bound (the position of the leading 1 bit of the candidate's word), then on an
enclosure computed with the proven double-double logarithm of crlog.h, and the rare comparisons
neither decides go to exact rational arithmetic with the GIL (dpcore._exact_gumbel; the uniforms
refined with fresh bits, nothing redrawn). Not constant-time. Draws happen under the generator's
lock; a seed reproduces the output.

Threads: a chunk of at least THREAD_MIN (2**20) candidates runs per block of THREAD_BLOCK (2**16)
candidates, block b on ChaCha20 stream b of one key drawn from the caller's generator
(_random.pxd); the blocks' winners are merged exactly in block order (`ExactState.merge` has the
proof that the law is unchanged), so the result does not depend on the thread count.
"""
from fractions import Fraction

from libc.math cimport fabs, INFINITY
from libc.stdint cimport uint64_t, UINT64_MAX

from dpcore._random cimport (
    BitgenHandle, LockedBits, bitgen_t, locked_bits, BlockStream, StreamKey, stream_key,
    stream_open, stream_bits,
)
from dpcore._crlog cimport dp_log_dd

from dpcore._dpcore_threads import run_blocks
from dpcore._exact_gumbel import decide as _decide, down as _down, gumbel_cell as _gumbel_cell
from dpcore._exact_gumbel import up as _up, word_cell as _word_cell


cdef extern from "dpc_bits.h" nogil:
    int dpc_clz64(uint64_t w)


cdef enum:
    THREAD_BLOCK = 1 << 16
THREAD_MIN = 1 << 20

cdef double TWO_M64 = 5.421010862427522e-20    # 2**-64
cdef double TWO_M52 = 2.220446049250313e-16    # 2**-52
cdef double TWO_M48 = 3.552713678800501e-15    # 2**-48
cdef double TINY = 1e-300
# Above ln 2 by 9e-16, so that RN(k LN2_UP) >= k ln 2 for every k <= 65: the coarse bound
# -ln(x) <= (leading zeros + 1) ln 2 uses it.
cdef double LN2_UP = 0.6931471805599462
cdef double TWO_M1070 = 2.0**-1070

# Test hook: send every comparison the exact kernel does not reject outright to the exact path.
cdef bint force_exact = False


# ------------------------------------------------------------------------------------------------
# Exact exponential mechanism: the Gumbel race decided exactly
#
# Candidate r has the real uniform R_r in the cell [w 2^-64, (w + 1) 2^-64) of its 64-bit word w
# (refined with more random bits only when needed) and the key c u_r + G(R_r), with
# G(x) = -ln(-ln(1 - x)) (decreasing; a Gumbel(0, 1) variable for a uniform x). The candidate with
# the largest key is returned, so P(r) = exp(c u_r) / sum exp(c u) exactly. Candidate r replaces
# the best b iff D + G(R_r) > G(R_b), D = c (u_r - u_b); that is decided on enclosures, never on
# rounded values.

cdef struct ExactBest:
    Py_ssize_t index     # -1: none yet
    double u
    uint64_t w
    double glo           # G(R_b) lies in [glo, ghi] (outward bounds, possibly infinite)
    double ghi
    bint refined         # the Python side holds a refined cell for this best


cdef struct ExactCounts:
    Py_ssize_t coarse    # rejected by the leading-zeros bound
    Py_ssize_t fine      # decided by the double-double enclosure
    Py_ssize_t exact     # decided by exact arithmetic (the fallback)


cdef inline double up_sum(double a, double b) noexcept nogil:
    """An upper bound of a + b (one rounding covered with room to spare). Infinite sums are
    returned as they are (an infinite operand stands for a value beyond the double range whose
    sign alone decides against finite bounds); NaN stays NaN and decides nothing."""
    cdef double s = a + b
    if not fabs(s) < INFINITY:
        return s
    return s + (fabs(a) + fabs(b)) * TWO_M52


cdef inline double down_sum(double a, double b) noexcept nogil:
    """A lower bound of a + b (see up_sum)."""
    cdef double s = a + b
    if not fabs(s) < INFINITY:
        return s
    return s - (fabs(a) + fabs(b)) * TWO_M52


cdef inline void complement_dd(uint64_t m, double *a, double *b) noexcept nogil:
    """m 2^-64 = a + b exactly with a = RN(m 2^-64), for 1 <= m < 2^64 (the complement 1 - x of
    a cell end x = (2^64 - m) 2^-64)."""
    cdef double mh = <double>(m & ~(<uint64_t>0x7ff))  # <= 53 significant bits: exact
    cdef double ml = <double>(m & 0x7ff)
    cdef double s = mh + ml
    b[0] = ((mh - s) + ml) * TWO_M64  # Fast2Sum (|mh| >= |ml| or mh == 0): exact
    a[0] = s * TWO_M64


cdef inline void gumbel_enclosure(double a, double b, double *gm, double *gr) noexcept nogil:
    """G(x) = -ln(-ln(1 - x)) lies in [gm - gr, gm + gr], where 1 - x = a + b exactly,
    a = RN(a + b) > 0 and x > 0.

    ln(a) from dp_log_dd with its proven bound; ln(a + b) = ln(a) + ln(1 + t), t = b/a,
    |t| <= 2^-53, with |ln(1 + t) - t| <= t^2 and q = RN(b/a), |q - t| <= 2^-53 |q|. Then
    E = -ln(1 - x) = em +- er, and |ln(E) - ln(em)| <= 2 er/em when er/em <= 1/2.
    """
    cdef double h, l, err, q, lq, lm, lr, em, rho, h2, l2, err2
    dp_log_dd(a, &h, &l, &err)
    q = b / a
    lq = l + q
    lm = h + lq
    lr = (err + fabs(q) * TWO_M52 + 2.0 * q * q + fabs(lq) * TWO_M52 + fabs(lm) * TWO_M52
          + TINY) * (1.0 + TWO_M48)
    em = -lm
    rho = (lr / em) * (1.0 + TWO_M48)
    if not (em > 0.0 and rho <= 0.25):  # never for x > 0 (E >= 2^-64 there); kept as a guard
        gm[0] = 0.0
        gr[0] = INFINITY
        return
    dp_log_dd(em, &h2, &l2, &err2)
    gm[0] = -h2
    gr[0] = (fabs(l2) + err2 + 2.0 * rho + fabs(h2) * TWO_M52 + TINY) * (1.0 + TWO_M48)


cdef inline void cell_bounds(uint64_t w, double *glo, double *ghi) noexcept nogil:
    """Outward bounds of G over the cell [w 2^-64, (w + 1) 2^-64) (G is decreasing)."""
    cdef double a, b, gm, gr
    if w == 0:
        ghi[0] = INFINITY
    else:
        complement_dd(0 - w, &a, &b)  # 1 - w 2^-64 = (2^64 - w) 2^-64
        gumbel_enclosure(a, b, &gm, &gr)
        ghi[0] = up_sum(gm, gr)
    if w == UINT64_MAX:
        glo[0] = -INFINITY
    else:
        complement_dd(UINT64_MAX - w, &a, &b)  # 1 - (w + 1) 2^-64
        gumbel_enclosure(a, b, &gm, &gr)
        glo[0] = down_sum(gm, -gr)


cdef Py_ssize_t exact_run(bitgen_t *bg, const double *u, Py_ssize_t start, Py_ssize_t n, double c2,
                          Py_ssize_t offset, ExactBest *best, ExactCounts *counts,
                          uint64_t *pending_word) noexcept nogil:
    """Feed candidates start..n-1; returns the first one whose comparison is undecided (its word
    in pending_word), or n when the chunk is done."""
    cdef Py_ssize_t i
    cdef uint64_t w
    cdef double ui, d, dr, dlo, dhi, coarse, glo, ghi
    # absolute error of D from halving subnormal utilities (2 * 2^-1075 * c2) and from a
    # subnormal product, with room to spare
    cdef double d_abs = c2 * TWO_M1070 + TWO_M1070
    for i in range(start, n):
        w = bg.next_uint64(bg.state)
        ui = u[i]
        if ui == -INFINITY:
            continue
        if best.index < 0:
            best.index = offset + i
            best.u = ui
            best.w = w
            best.refined = False
            cell_bounds(w, &best.glo, &best.ghi)
            continue
        # D = c (u_i - u_b) = 2c (u_i/2 - u_b/2): halving cannot overflow. Two relative roundings
        # (<= 2^-52 |d| together) and the absolute d_abs are covered by dr.
        d = c2 * (0.5 * ui - 0.5 * best.u)
        if fabs(d) < INFINITY:
            dr = fabs(d) * TWO_M48 + d_abs
            dlo = d - dr
            dhi = d + dr
        else:  # |D| is beyond DBL_MAX: only the sign matters against finite bounds
            dlo = d
            dhi = d
        if w != 0:
            # G(R) <= -ln(w 2^-64) <= (leading zeros of w + 1) ln 2, as -ln(1 - x) >= x.
            coarse = (dpc_clz64(w) + 1) * LN2_UP
            if up_sum(dhi, coarse) < best.glo:
                counts.coarse += 1
                continue
        if force_exact or w == 0:
            pending_word[0] = w
            return i
        cell_bounds(w, &glo, &ghi)
        if down_sum(dlo, glo) > best.ghi:
            best.index = offset + i
            best.u = ui
            best.w = w
            best.refined = False
            best.glo = glo
            best.ghi = ghi
            counts.fine += 1
        elif up_sum(dhi, ghi) < best.glo:
            counts.fine += 1
        else:
            pending_word[0] = w
            return i
    return n


cdef class ExactState:
    """The exact exponential mechanism, fed chunk by chunk (see the section comment above)."""
    cdef double c
    cdef double c2
    cdef object c_exact
    cdef Py_ssize_t offset
    cdef ExactBest best
    cdef ExactCounts counts
    cdef object best_cell  # refined cell of the best (Fractions) when best.refined
    cdef object best_enc   # an exact enclosure of G over best_cell (when best.refined)

    def __init__(self, double c):
        self.c = c
        self.c2 = 2.0 * c
        self.c_exact = Fraction(c)
        self.offset = 0
        self.best.index = -1
        self.best.refined = False
        self.counts.coarse = 0
        self.counts.fine = 0
        self.counts.exact = 0
        self.best_cell = None
        self.best_enc = None

    def feed(self, const double[::1] u, double umax, BitgenHandle h):
        """Process one chunk (no NaN or +inf) drawing from h (threaded from THREAD_MIN
        candidates: see merge)."""
        cdef Py_ssize_t n = u.shape[0], b, nblocks = (n + THREAD_BLOCK - 1) // THREAD_BLOCK
        cdef LockedBits bits
        cdef _ExactBlocks blocks
        cdef BlockStream st
        if n == 0:
            return
        if n >= THREAD_MIN:
            blocks = _ExactBlocks(u, stream_key(h))
            blocks.states = [ExactState(self.c) for b in range(nblocks)]
            for b in range(nblocks):
                (<ExactState>blocks.states[b]).offset = self.offset + b * THREAD_BLOCK
            run_blocks(blocks, nblocks)
            stream_open(&st, blocks.key, <uint64_t>nblocks)  # the merge's refinement bits
            bits = stream_bits(&st)
            for b in range(nblocks):
                self.merge(blocks.states[b], bits)
        else:
            bits = locked_bits(h)
            with h.lock:
                self.run(h.bitgen, bits, &u[0], n)
        self.offset += n

    cdef run(self, bitgen_t *bg, LockedBits bits, const double *u, Py_ssize_t n):
        """Feed u[0:n] (indices from self.offset) drawing from bg (its lock held, if any)."""
        cdef Py_ssize_t pos = 0, r
        cdef uint64_t word = 0
        while pos < n:
            with nogil:
                r = exact_run(bg, u, pos, n, self.c2, self.offset, &self.best, &self.counts, &word)
            if r >= n:
                break
            self._resolve(u[r], word, self.offset + r, bits)
            pos = r + 1

    cdef merge(self, ExactState later, LockedBits bits):
        """Keep the better of this best and the best of `later` (a block of later candidates).

        Exactness: each block's best is the argmax of its candidates' keys c u_i + G(R_i), every
        comparison decided exactly; the comparison here is the same exact one (first on the
        proven double enclosures both bests carry, then _decide), so after the last block the
        best is the argmax of all keys, as in one pass. Each R_i's expansion is revealed once:
        its first 64 bits from its block's stream, refinements from fresh words of the block's
        stream or of the merge's own stream (stream id nblocks); no bit serves two R_i, so the
        R_i are independent real uniforms and the law is exp(c u_r) / sum exp(c u), exactly.
        (Ties have probability zero: _decide refines until they are separated.)"""
        cdef double d, dr, dlo, dhi
        self.counts.coarse += later.counts.coarse
        self.counts.fine += later.counts.fine
        self.counts.exact += later.counts.exact
        if later.best.index < 0:
            return
        if self.best.index >= 0:
            d = self.c2 * (0.5 * later.best.u - 0.5 * self.best.u)  # as in exact_run
            dr = fabs(d) * TWO_M48 + self.c2 * TWO_M1070 + TWO_M1070 if fabs(d) < INFINITY else 0.0
            dlo, dhi = d - dr, d + dr
            if not force_exact and up_sum(dhi, later.best.ghi) < self.best.glo:
                self.counts.fine += 1
                return
            if force_exact or not down_sum(dlo, later.best.glo) > self.best.ghi:
                self._merge_exactly(later, bits)
                return
            self.counts.fine += 1
        self.best = later.best
        self.best_cell, self.best_enc = later.best_cell, later.best_enc

    cdef _merge_exactly(self, ExactState later, LockedBits bits):
        self._challenge(later.best, later.best_cell if later.best.refined else None, bits)

    cdef _resolve(self, double ur, uint64_t w, Py_ssize_t index, LockedBits bits):
        """Decide exactly whether candidate `index` beats the best; update the best."""
        cdef ExactBest candidate
        candidate.index, candidate.u, candidate.w, candidate.refined = index, ur, w, False
        self._challenge(candidate, None, bits)

    cdef _challenge(self, ExactBest candidate, object cell, LockedBits bits):
        """Keep the better of the best and `candidate` (cell: its refined cell, or None for its
        word's cell), decided exactly; the winner keeps its refined cell and enclosure."""
        self.counts.exact += 1
        d = self.c_exact * (Fraction(candidate.u) - Fraction(self.best.u))
        if self.best.refined:
            cell_b, enc_b = self.best_cell, self.best_enc
        else:
            cell_b, enc_b = _word_cell(self.best.w), None
        cell_r = cell if cell is not None else _word_cell(candidate.w)
        wins, cell_r, cell_b, enc_r, enc_b = _decide(d, cell_r, cell_b, bits, enc_b)
        if wins:
            self.best = candidate
            cell_b, enc_b = cell_r, enc_r
        self.best_cell, self.best_enc = cell_b, enc_b
        self.best.glo = _down(enc_b[0])
        self.best.ghi = _up(enc_b[1])
        self.best.refined = True

    @property
    def index(self):
        return self.best.index

    @property
    def count(self):
        return self.offset

    @property
    def stats(self):
        """How comparisons were decided: {"coarse", "fine", "exact"} counts."""
        return {"coarse": self.counts.coarse, "fine": self.counts.fine, "exact": self.counts.exact}


cdef class _ExactBlocks:
    """A threaded chunk of ExactState: block b runs states[b] on its stream."""
    cdef const double[::1] u
    cdef StreamKey key
    cdef list states

    def __cinit__(self, const double[::1] u, StreamKey key):
        self.u = u
        self.key = key

    def __call__(self, Py_ssize_t b):
        cdef BlockStream st
        cdef Py_ssize_t lo = b * THREAD_BLOCK
        stream_open(&st, self.key, <uint64_t>b)
        (<ExactState>self.states[b]).run(&st.bitgen, stream_bits(&st), &self.u[lo],
                                         min(<Py_ssize_t>THREAD_BLOCK, self.u.shape[0] - lo))


# ------------------------------------------------------------------------------------------------
# Test hooks


def _force_exact_path(bint on):
    """Test hook: when on, the exact sampler sends every comparison its coarse bound does not
    reject to the exact fallback."""
    global force_exact
    force_exact = on


def _cell_bounds(uint64_t w):
    """(low, high): the exact sampler's outward bounds of G over the cell of word w."""
    cdef double glo, ghi
    cell_bounds(w, &glo, &ghi)
    return glo, ghi


def _gumbel_cell_exact(uint64_t w, digits=60):
    """Exact rational enclosure of G over the cell of word w (None = infinite end)."""
    return _gumbel_cell(_word_cell(w), digits)
