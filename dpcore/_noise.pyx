# cython: language_level=3
"""Noise kernel: the exact discrete Laplace and discrete Gaussian samplers (integer noise).

Every decision that defines the output law is exact. The fast path takes a decision in floating
point only when a proven error bound shows which side it falls on (_noise_neglog.pxd); the rare
undecided draws are recorded (`Pending`) and finished with the GIL by exact rational code in
`dpcore._exact`, using the same uniform refined with fresh bits, so nothing is redrawn and the
law stays exact. Draws happen under the generator's lock; the order of draws is fixed, so a seed
reproduces the output.

The discrete Laplace magnitude floor(-ln(u') scale) is decided cheapest first: a table bracket
of -ln(u') on a coarse 32-bit uniform (small scales), a plain-double logarithm on U*'s cell, then
dp_log_dd's double-double logarithm on that cell refined by 64 fresh bits (`dlap_magnitude`).
Words are read inline from the generator (`Source`, chacha20.h); outcomes that are coin flips
(signs, -0 rejections, accept / reject) are kept as data, not branches.

The discrete Gaussian has two exact samplers: Canonne-Kamath-Steinke rejection from a discrete
Laplace proposal (calls of fewer than TABLE_MIN_SIZE draws), and a table sampler (larger calls):
an exact alias-table proposal over blocks of a power-of-two width, uniform inside a block, with
an exact geometric tail, accepted by an exact Bernoulli whose comparisons are mostly a single
integer "squeeze" test (dgauss_table.h, `table_one`).

Threads: a call on n >= THREAD_MIN values draws one 256-bit key from the caller's generator and
block b (values [b 2**16, (b + 1) 2**16)) from ChaCha20 stream b of that key (_random.pxd), so a
seeded output is the same for any thread count (`dpcore.set_num_threads`); smaller calls draw
from the caller's generator directly. A block's draws are the one-stream driver's on that
block, exact finishing included (with the GIL, from the block's own stream). `_NoiseJob` runs
the blocks; the fused grid releases (_noise_grid.pyx) subclass it.

The other noise kernels build on this one through _noise.pxd: the grid releases of the Laplace
and Gaussian mechanisms on doubles (_noise_grid), snapping (_noise_snapping) and planar Laplace
(_noise_planar).

Not constant-time: loop lengths depend on the values drawn (a timing channel if run time is observable).
"""
from fractions import Fraction

import numpy as np

from libc.math cimport fabs, nextafter
from libc.float cimport DBL_MIN
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint32_t, uint64_t

from dpcore._random cimport (
    BitgenHandle, LockedBits, locked_bits, bitgen_handle, dpc_words_next, dpc_ustar,
    dpc_ustar_from, dpc_u64_as_double, BlockStream, stream_key, stream_open, stream_bits,
)
from dpcore._crlog cimport dp_log_dd
from dpcore._noise_neglog cimport (
    Pending, Source, source_init, take_half, take_bit, init_brackets, neglog_bracket,
    neglog_medium, floor_scaled_cell, floor_bracket_scaled, cell_log_offset, floor_neglog_scaled,
    accept_coarse, accept_cell, accept_exp, PENDING_CAPACITY, COARSE_MIN, TWO_64, TWO_M32,
    TWO_M49, TWO_M50, TWO_M100, DLAP_MAGNITUDE, DGAUSS_PROPOSAL, DGAUSS_ACCEPT, TABLE_ACCEPT, TABLE_TAIL,
)

from dpcore import _exact
from dpcore._dpcore_threads import run_blocks

MAX_DLAP_SCALE = 2.0**44
MAX_DGAUSS_SIGMA = 2.0**40

# Magnitudes floor(-ln(u') * scale) are first tried on the table bracket when scale is at most
# this (the bracket has width ~2**-BRACKET_BITS, so it decides a fraction ~1 - scale 2**-8;
# measured, it pays up to a scale of about 32).
cdef double BRACKET_SCALE = 32.0
# Test hook: send every decision of every noise kernel to the exact path (_force_exact_path);
# a call reads it once, into its Source.
cdef bint force_exact = False


cdef bint exact_path_forced() noexcept nogil:
    return force_exact


init_brackets()


# ------------------------------------------------------------------------------------------
# The discrete Laplace sampler

cdef int floor_refined(double u, uint64_t extra, int nextra, uint64_t v2, double scale,
                       int64_t *y) noexcept nogil:
    """floor(-ln(u') * scale) for u' in the refined sub-cell [u + w V 2**-N, u + w (V + 1) 2**-N)
    of a normal u's cell (w = ulp(u), V = extra 2**64 + v2, N = nextra + 64), in double-double
    (dp_log_dd, cell_log_offset, floor_neglog_scaled), when the bound decides it.
    V as a double (fl(extra 2**64 + v2): extra < 2**12 and 2**64 are exact, so two roundings) is
    within 2**-52 (1 + 2**-52) of V, as cell_log_offset needs (it allows 4 roundings in all)."""
    cdef double hi, lo, err, sc, half
    dp_log_dd(u, &hi, &lo, &err)
    cell_log_offset(u, <double>extra * TWO_64 + <double>v2,
                    dpc_u64_as_double(<uint64_t>(1023 - 64 - nextra) << 52), &sc, &half)
    return floor_neglog_scaled(hi, lo, err, sc, half, scale, y)


cdef inline int dlap_magnitude(Source *s, double scale, int64_t *y, Pending *pd) noexcept nogil:
    """floor(E * scale) with E = -ln(u'), u' a real uniform on (0, 1): Geometric(1 - exp(-1/scale)).

    Decided first from the table bracket on a coarse uniform (small scales), else on U*'s cell
    with a plain-double logarithm; if that does not decide, u' is refined by the spare bits of
    U*'s last word and 64 fresh bits (Mironov, CCS 2012, Section 5.2: given u, u' is uniform on u's cell; the
    bits pick a uniform sub-cell and u' is uniform on it, so nothing is biased) and decided in
    double-double.
    Returns 1 and sets y when decided; returns 0 and fills pd's cell otherwise.
    """
    cdef uint64_t extra = 0, v2, top
    cdef int nextra = 0
    cdef double u, err, E
    if scale <= BRACKET_SCALE:
        # coarse uniform first (see above), then the completed U*
        top = take_half(s)
        if top >= COARSE_MIN and not s.exact \
                and floor_bracket_scaled(<double>top * TWO_M32, scale, y):
            return 1
        u = dpc_ustar_from(&s.words, (top << 32) | take_half(s), &extra, &nextra)
    else:
        u = dpc_ustar(&s.words, &extra, &nextra)
    if u >= DBL_MIN and not s.exact:  # else: probability 2**-1022, or the test hook
        # (at small scales the bracket of the full u would repeat the coarse one: skip it)
        E = neglog_medium(u, &err)
        if floor_scaled_cell(E, err, scale, y):
            return 1
        # Undecided: refine with 64 fresh bits and decide in double-double.
        v2 = dpc_words_next(&s.words)
        if floor_refined(u, extra, nextra, v2, scale, y):
            return 1
        pd.v2 = v2
        pd.refined = 1
    else:
        pd.v2 = 0
        pd.refined = 0
    pd.u = u
    pd.v = extra
    pd.nv = nextra
    return 0


cdef inline int dlap_one(Source *s, double scale, int64_t *y, Pending *pd) noexcept nogil:
    """One attempt at a discrete Laplace draw: 1 = y set, 0 = rejected (-0), -1 = pending."""
    cdef int64_t m = 0
    cdef int negative = take_bit(s)
    if not dlap_magnitude(s, scale, &m, pd):
        pd.negative = negative
        return -1
    # -m if negative else m, and the -0 rejection, branch-free (both are coin flips at small
    # scales): two's complement -m = (m ^ -1) + 1, 0 <= m < 2**63.
    y[0] = (m ^ -(<int64_t>negative)) + negative
    return 1 - (negative & (m == 0))


cdef Py_ssize_t dlap_fill(Source *s, double scale, int64_t *out, Py_ssize_t start,
                          Py_ssize_t stop, Pending *pend, Py_ssize_t *npend) noexcept nogil:
    """Fill out[start:stop] until done or PENDING_CAPACITY draws are pending; returns the index
    reached. Pending draws leave their slot for the exact path (pend[k].index)."""
    cdef Py_ssize_t i = start
    cdef int r
    cdef int64_t y = 0
    npend[0] = 0
    while i < stop:
        r = dlap_one(s, scale, &y, &pend[npend[0]])
        if r >= 0:
            out[i] = y  # kept only if accepted (r == 1): branch-free
            i += r
        else:
            pend[npend[0]].index = i
            pend[npend[0]].kind = DLAP_MAGNITUDE
            npend[0] += 1
            i += 1
            if npend[0] == PENDING_CAPACITY:
                break
    return i


cdef inline void dgauss_gamma(DGaussParams *p, int64_t y, double *g, double *dg) noexcept nogil:
    """g ~ gamma = (|y| - sigma**2/t)**2 / (2 sigma**2) with |g - gamma| <= dg, proven.

    s2 = sigma**2 (1 + d1) and c = sigma**2/t (1 + d1)(1 + d2) give |a - A| <= 2**-52 c (1 +
    2**-52) + 2**-53 |a| <= ea (A = |y| - sigma**2/t exactly; |y| is exact below 2**53), so
    |a**2 - A**2| <= ea (2|a| + ea), and 1/(2 sigma**2) <= inv_s2/2 (1 + 2**-51): dg's second
    term, with a factor 2 to spare. g = fl(fl(a a) fl(1/s2)/2) is within 4 roundings (relative
    2**-53 each, s2's included) of a**2/(2 sigma**2): the first term (16 * 2**-53 g). The factors
    to spare also cover the roundings of dg itself.
    """
    cdef double a = fabs(<double>y) - p.c
    cdef double ea = TWO_M50 * (p.c + fabs(a))
    g[0] = (a * a) * (0.5 * p.inv_s2)
    dg[0] = TWO_M50 * 2.0 * g[0] + ea * (2.0 * fabs(a) + ea) * p.inv_s2 + TWO_M100


cdef inline int dgauss_one(Source *s, DGaussParams *p, int64_t *y, Pending *pd) noexcept nogil:
    """One attempt (CKS Algorithm 3): 1 = y set, 0 = rejected, -1 = pending."""
    cdef int64_t prop = 0
    cdef int r = dlap_one(s, p.t, &prop, pd)
    cdef double g, dg
    if r == -1:
        pd.kind = DGAUSS_PROPOSAL
        return -1
    # Accept with probability exp(-g), g = (|y| - sigma^2/t)^2 / (2 sigma^2): accept iff E' > g
    # with E' = -ln(u') for a fresh real uniform u'.
    dgauss_gamma(p, prop, &g, &dg)
    y[0] = prop
    r = accept_exp(s, take_half(s), g, dg, prop, r, pd)
    if r == -1:
        pd.kind = DGAUSS_ACCEPT
    return r


# ------------------------------------------------------------------------------------------
# The table sampler of the discrete Gaussian (dgauss_table.h has the proposal, its exactness
# argument and the proven table entries). One word gives the alias column and threshold, the
# sign and the offset j in the block; a coarse 32-bit uniform then decides the acceptance:
# below the entry's squeeze it is accepted at once (nearly always), else -ln a is computed with a
# proven bound (table_gamma) and compared as in the CKS sampler (accept_coarse, then U*'s cell
# with accept_cell), else the attempt is finished exactly. About 1.01 attempts per draw at any
# sigma (against 1.3 log-bearing attempts for CKS at large sigma).

cdef inline void table_gamma(const dpc_dgt *t, const dpc_dgt_entry *en, uint64_t j, double *g,
                             double *dg) noexcept nogil:
    """g ~ -ln a(L + j) = j (2 L + j) / (2 sigma**2) + delta with |g - that| <= dg, proven.

    j < 2**34 and 2 L + j < 2**53 are exact doubles; their product rounds once, h is within
    two roundings of 1/(2 sigma**2) and the product with it rounds once: g1 is within 2**-51 g1
    (1 + 2**-50) of j (2 L + j) / (2 sigma**2) (exact 0 when j = 0; never subnormal: h >=
    2**-82). g = fl(g1 + delta) adds 2**-53 |g|, delta its delta_err. dg = 2**-49 (g1 + |g|) +
    delta_err is twice what that needs, which covers dg's own roundings.
    """
    cdef double g1 = (<double>j * <double>(2 * en.start + <int64_t>j)) * t.h
    g[0] = g1 + en.delta
    dg[0] = TWO_M49 * (g1 + fabs(g[0])) + en.delta_err


cdef inline int table_one(Source *s, const dpc_dgt *t, int64_t *y, Pending *pd) noexcept nogil:
    """One attempt of the table sampler: 1 = y set, 0 = rejected, -1 = pending (pd filled)."""
    cdef uint64_t w = dpc_words_next(&s.words)
    cdef uint32_t col = <uint32_t>(w >> (64 - DPC_DGT_COLUMN_BITS))
    cdef uint32_t level = <uint32_t>((w >> (DPC_DGT_SIGN_SHIFT + 1)) & ((1 << DPC_DGT_THR_BITS) - 1))
    cdef uint32_t e = col if level < t.thr[col] else t.alias[col]
    cdef const dpc_dgt_entry *en = &t.entry[e]
    cdef int negative = <int>((w >> DPC_DGT_SIGN_SHIFT) & 1)
    cdef uint64_t j = w & en.mask
    cdef int64_t v = en.start + <int64_t>j
    cdef uint64_t top
    cdef int r
    cdef double g, dg
    if en.kind != DPC_DGT_BLOCK:
        if en.kind == DPC_DGT_NULL:
            return 0
        pd.kind = TABLE_TAIL  # about 1e-15 of the attempts: drawn and decided exactly
        pd.negative = negative
        pd.entry = <int>e
        return -1
    y[0] = (v ^ -(<int64_t>negative)) + negative  # the sign, branch-free (a coin flip)
    top = take_half(s)
    if top < en.squeeze and not s.exact:
        return 1
    table_gamma(t, en, j, &g, &dg)
    r = accept_exp(s, top, g, dg, y[0], 1, pd)
    if r == -1:
        pd.kind = TABLE_ACCEPT
        pd.entry = <int>e
    return r


cdef Py_ssize_t dgauss_fill(Source *s, DGaussParams *p, const dpc_dgt *t, int64_t *out,
                            Py_ssize_t start, Py_ssize_t stop, Pending *pend,
                            Py_ssize_t *npend) noexcept nogil:
    """As dlap_fill, for the discrete Gaussian: the table sampler, or CKS when t is NULL."""
    cdef Py_ssize_t i = start
    cdef int r
    cdef int64_t y = 0
    npend[0] = 0
    while i < stop:
        if t != NULL:
            r = table_one(s, t, &y, &pend[npend[0]])
        else:
            r = dgauss_one(s, p, &y, &pend[npend[0]])
        if r >= 0:
            out[i] = y  # kept only if accepted (r == 1): branch-free
            i += r
        else:
            pend[npend[0]].index = i
            npend[0] += 1
            i += 1
            if npend[0] == PENDING_CAPACITY:
                break
    return i


# ------------------------------------------------------------------------------------------
# Exact finishing of pending draws (GIL held, generator lock held by the caller)


cdef object _cell(Pending *pd):
    """The exact cell [lo, hi) of the real uniform behind a pending draw, as Fractions."""
    u = Fraction(pd.u)
    w = Fraction(nextafter(pd.u, 2.0)) - u
    nbits = pd.nv
    value = pd.v
    if pd.refined:
        nbits += 64
        value = (value << 64) | pd.v2
    w = w / 2**nbits
    u = u + w * value
    return u, u + w


cdef object _exact_magnitude(Pending *pd, scale, LockedBits bits):
    lo, hi = _cell(pd)
    return _exact.floor_neglog_scaled(lo, hi, scale, bits)


cdef object _dgauss_gamma(y, sigma2, t):
    return (abs(Fraction(y)) - sigma2 / t) ** 2 / (2 * sigma2)


cdef bint _accept_exactly(double u, y, sigma2, t, LockedBits bits):
    return _exact.uniform_below_exp(u, nextafter(u, 2.0), _dgauss_gamma(y, sigma2, t), bits)


cdef dlap_block(Source *s, double scale, int64_t *out, Py_ssize_t m, Pending *pend,
                scale_exact, LockedBits bits):
    """Fill out[0:m] with exact discrete Laplace draws (GIL and generator lock held)."""
    cdef Py_ssize_t npend = 0, start = 0
    while start < m:
        with nogil:
            start = dlap_fill(s, scale, out, start, m, pend, &npend)
        _dlap_finish(s, scale, out, pend, npend, scale_exact, bits)


cdef _dlap_finish(Source *s, double scale, int64_t *out, Pending *pend, Py_ssize_t npend,
                  scale_exact, LockedBits bits):
    """Finish a fill's npend pending draws exactly (a rejected -0 draws its slot afresh)."""
    cdef Py_ssize_t j, idx
    if npend:
        redo = []
        for j in range(npend):
            k = _exact_magnitude(&pend[j], scale_exact, bits)
            if pend[j].negative and k == 0:
                redo.append(pend[j].index)
            else:
                out[pend[j].index] = -k if pend[j].negative else k
        while redo:  # rejected -0: draw the slot afresh
            idx = redo.pop()
            with nogil:
                dlap_fill(s, scale, out, idx, idx + 1, pend, &npend)
            if npend:
                k = _exact_magnitude(&pend[0], scale_exact, bits)
                if pend[0].negative and k == 0:
                    redo.append(idx)
                else:
                    out[idx] = -k if pend[0].negative else k


cdef void _dgauss_params(DGaussParams *p, double sigma) noexcept:
    p.sigma = sigma
    p.s2 = sigma * sigma
    # CKS take t = floor(sigma) + 1, an integer for their integer arithmetic. Any t > 0 gives
    # the discrete Gaussian: DLap(t) puts mass proportional to exp(-|y|/t) on y, and
    # exp(-(|y| - sigma**2/t)**2 / (2 sigma**2)) = exp(-y**2/(2 sigma**2) + |y|/t - sigma**2/(2t**2)),
    # so accepted values have mass proportional to exp(-y**2 / (2 sigma**2)). Our proposal and
    # acceptance work for any double t (the exact path uses Fraction(t)), and t = sigma + 0.16
    # nearly minimises the expected uniforms per output (proposal attempts, with the -0
    # rejections, plus acceptance tests), e.g. 3.43 instead of 4.14 at sigma = 1; for large
    # sigma both give the acceptance rate sqrt(2 pi)/(2 sqrt(e)) ~ 0.76.
    p.t = sigma + 0.16  # any rounding is fine: t is whatever double this gives
    p.c = p.s2 / p.t
    p.inv_s2 = 1.0 / p.s2


# The table sampler serves calls of at least TABLE_MIN_SIZE draws (building its table costs
# about as much as that many CKS draws) with sigma >= TABLE_MIN_SIGMA (the table's arithmetic
# assumes it); smaller calls use the CKS sampler. Both are exact; the choice depends on the
# call's size and sigma only, so a seed reproduces the output.
TABLE_MIN_SIZE = 1024
TABLE_MIN_SIGMA = 0.0625
# The table's tail starts at about this many sigmas (probability ~1e-15 per draw).
TABLE_TAIL_SIGMAS = 7.9


cdef class GaussSampler:
    """The discrete Gaussian sampler of one call: the table sampler, or CKS (table is NULL);
    its fields are in _noise.pxd."""

    def __cinit__(self, double sigma, bint use_table, double tail_sigmas=TABLE_TAIL_SIGMAS):
        _dgauss_params(&self.p, sigma)
        self.sigma2 = Fraction(sigma) ** 2
        self.t = Fraction(self.p.t)
        self.table = NULL
        if not use_table:
            return
        self.table = <dpc_dgt *> PyMem_Malloc(sizeof(dpc_dgt))
        if self.table == NULL:
            raise MemoryError()
        if dpc_dgt_build(self.table, sigma, tail_sigmas) != 0:
            raise RuntimeError(f"could not prove the discrete Gaussian table for sigma={sigma!r}")
        self.D = Fraction(self.table.D)
        self.width = int(self.table.width)
        self.tail_start = self.table.tail_start
        self.tail_width = 2 ** int(self.table.tail_width_bits)

    def __dealloc__(self):
        PyMem_Free(self.table)

    cdef block(self, Source *s, int64_t *out, Py_ssize_t m, Pending *pend, LockedBits bits):
        """Fill out[0:m] with exact discrete Gaussian draws (GIL and generator lock held)."""
        cdef Py_ssize_t npend = 0, start = 0
        while start < m:
            with nogil:
                start = dgauss_fill(s, &self.p, self.table, out, start, m, pend, &npend)
            self.finish_fill(s, out, pend, npend, bits)

    cdef finish_fill(self, Source *s, int64_t *out, Pending *pend, Py_ssize_t npend,
                     LockedBits bits):
        """Finish a fill's npend pending draws exactly (rejected ones draw their slot afresh)."""
        cdef Py_ssize_t j, idx
        if npend:
            queue = [_pending_copy(&pend[j]) for j in range(npend)]
            while queue:
                item = queue.pop()
                value = self.finish(item, bits)
                if value is None:  # rejected: draw this slot afresh
                    idx = item["index"]
                    with nogil:
                        dgauss_fill(s, &self.p, self.table, out, idx, idx + 1, pend, &npend)
                    if npend:
                        queue.append(_pending_copy(&pend[0]))
                else:
                    out[item["index"]] = value

    cdef object finish(self, dict item, LockedBits bits):
        """Finish one pending table attempt exactly: its value, or None if rejected.

        Accept iff u K_e < exp(-k**2 / (2 sigma**2)), k = |y|, K_e = w_e / (D c_e) (see
        dgauss_table.h). A tail proposal is drawn here: b with P(b) = 2**-(b + 1), j uniform
        below W_t, k = L_T + b W_t + j, c = W_t 2**(b + 1), and a fresh U*. CKS attempts go to
        _finish_dgauss."""
        if self.table == NULL:
            return _finish_dgauss(item, self.sigma2, self.t, bits)
        e = item["entry"]
        if item["kind"] == TABLE_TAIL:
            b = _geometric_half(bits)
            k = self.tail_start + b * self.tail_width + (bits() & (self.tail_width - 1))
            c = self.tail_width * 2 ** (b + 1)
            u = bits.ustar()
            y = -k if item["negative"] else k
        else:
            y = item["y"]
            k = abs(y)
            c = Fraction(1, 2) if e == 0 else self.width
            u = item["u"]
        K = self.table.weight[<int>e] / (self.D * c)
        gamma = Fraction(k * k) / (2 * self.sigma2)
        return y if _scaled_below_exp(Fraction(u), Fraction(nextafter(u, 2.0)), K, gamma, bits) \
            else None


cdef GaussSampler gauss_sampler(double sigma, Py_ssize_t n):
    return GaussSampler(sigma, n >= TABLE_MIN_SIZE and sigma >= TABLE_MIN_SIGMA)


cdef object _geometric_half(LockedBits bits):
    """b with P(b) = 2**-(b + 1), b = 0, 1, ...: the zero bits before the first one bit."""
    b = 0
    while True:
        x = bits()
        if x:
            return b + (x & -x).bit_length() - 1
        b += 64


cdef bint _scaled_below_exp(lo, hi, K, gamma, LockedBits bits):
    """Whether K u < exp(-gamma) for u a real uniform on the cell [lo, hi) (K > 0, gamma >= 0,
    rationals). K u is uniform on [K lo, K hi); refined (64 fresh bits pick one of 2**64 equal
    sub-cells) until that lies on one side of 1, then decided by _exact.uniform_below_exp on a
    cell inside (0, 1]."""
    lo, hi = K * lo, K * hi
    while lo < 1 < hi:
        width = (hi - lo) / 2**64
        j = bits()
        lo, hi = lo + width * j, lo + width * (j + 1)
    if lo >= 1:
        return False
    return _exact.uniform_below_exp(lo, hi, gamma, bits)


# ------------------------------------------------------------------------------------------
# Threaded calls (see the module docstring): blocks of THREAD_BLOCK values, each from its own
# stream; the kernels below switch to this at THREAD_MIN values.

THREAD_MIN = THREAD_BLOCK


cdef class _NoiseJob:
    """One threaded call of an integer sampler: the draws of block b go to ints (or a buffer), a
    chunk at a time, and each chunk to `use_chunk` (counts += noise here; the grid releases
    override it); run_blocks calls it."""

    def __call__(self, Py_ssize_t b):
        cdef BlockStream st
        cdef Source s
        cdef Pending pend[PENDING_CAPACITY]
        cdef int64_t noise[CHUNK]
        cdef Py_ssize_t lo = b * THREAD_BLOCK, hi = min(self.n, lo + THREAD_BLOCK)
        cdef Py_ssize_t off, m, done, npend = 0
        cdef int64_t *dest
        cdef GaussSampler g = self.sampler
        cdef DGaussParams *p = &g.p if g is not None else NULL
        cdef const dpc_dgt *table = g.table if g is not None else NULL
        stream_open(&st, self.key, <uint64_t>b)
        bits = stream_bits(&st)
        source_init(&s, &st.bitgen, force_exact)
        # The one-stream drivers' draws (dlap_block, GaussSampler.block) without the GIL; it
        # is taken only to finish pending draws (rare).
        with nogil:
            off = lo
            while off < hi:
                m = min(<Py_ssize_t>CHUNK, hi - off)
                dest = self.ints + off if self.ints != NULL else &noise[0]
                if self.kind == JOB_DLAP:
                    done = dlap_fill(&s, self.param, dest, 0, m, pend, &npend)
                else:
                    done = dgauss_fill(&s, p, table, dest, 0, m, pend, &npend)
                if npend or done < m:
                    with gil:
                        if self.kind == JOB_DLAP:
                            _dlap_finish(&s, self.param, dest, pend, npend, self.param_exact, bits)
                            dlap_block(&s, self.param, dest + done, m - done, pend,
                                       self.param_exact, bits)
                        else:
                            g.finish_fill(&s, dest, pend, npend, bits)
                            g.block(&s, dest + done, m - done, pend, bits)
                self.use_chunk(off, dest, m)
                off += m

    cdef void use_chunk(self, Py_ssize_t off, const int64_t *noise, Py_ssize_t m) noexcept nogil:
        """The draws for values [off, off + m) are in noise (in ints already when it is set)."""
        if self.counts != NULL:
            add_noise(self.counts + off, noise, m)


cdef _NoiseJob init_noise_job(_NoiseJob job, int kind, Py_ssize_t n, double param, object keep):
    job.kind = kind
    job.n = n
    job.param = param
    job.keep = keep
    if kind == JOB_DLAP:
        job.param_exact = Fraction(param)
    else:
        job.sampler = gauss_sampler(param, n)
    return job


cdef run_noise_job(_NoiseJob job, random_state):
    job.key = stream_key(bitgen_handle(random_state))
    run_blocks(job, (job.n + THREAD_BLOCK - 1) // THREAD_BLOCK)


cdef int threaded_add(int kind, int64_t *counts, Py_ssize_t n, double param,
                      random_state) except -1:
    cdef _NoiseJob job = init_noise_job(_NoiseJob.__new__(_NoiseJob), kind, n, param, None)
    job.counts = counts
    run_noise_job(job, random_state)
    return 0


# ------------------------------------------------------------------------------------------
# Entry points


def discrete_laplace_into(int64_t[::1] out, double scale, random_state=None):
    """Fill `out` with exact discrete Laplace draws of the given scale (validated by the caller).
    From THREAD_MIN values on, threaded (per-block streams: the output does not depend on the
    thread count)."""
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef _NoiseJob job
    if n >= THREAD_MIN:
        job = init_noise_job(_NoiseJob.__new__(_NoiseJob), JOB_DLAP, n, scale, out)
        job.ints = &out[0]
        run_noise_job(job, random_state)
        return
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[PENDING_CAPACITY]
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    scale_exact = Fraction(scale)
    with h.lock:
        source_init(&s, h.bitgen, force_exact)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            dlap_block(&s, scale, &out[off], m, pend, scale_exact, bits)


cdef inline void add_noise(int64_t *counts, const int64_t *noise, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(m):
        counts[j] += noise[j]


cdef int dlap_add_into(int64_t *counts, Py_ssize_t n, double scale, object random_state) except -1:
    if n >= THREAD_MIN:
        return threaded_add(JOB_DLAP, counts, n, scale, random_state)
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[PENDING_CAPACITY]
    cdef Py_ssize_t off, m
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    cdef int64_t[::1] noise = np.empty(max(min(n, CHUNK), 1), dtype=np.int64)
    scale_exact = Fraction(scale)
    with h.lock:
        source_init(&s, h.bitgen, force_exact)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            dlap_block(&s, scale, &noise[0], m, pend, scale_exact, bits)
            with nogil:
                add_noise(counts + off, &noise[0], m)
    return 0


cdef int dgauss_add_into(int64_t *counts, Py_ssize_t n, double sigma,
                         object random_state) except -1:
    if n >= THREAD_MIN:
        return threaded_add(JOB_DGAUSS, counts, n, sigma, random_state)
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[PENDING_CAPACITY]
    cdef Py_ssize_t off, m
    cdef LockedBits bits = locked_bits(h)
    cdef GaussSampler sampler = gauss_sampler(sigma, n)
    cdef Source s
    cdef int64_t[::1] noise = np.empty(max(min(n, CHUNK), 1), dtype=np.int64)
    with h.lock:
        source_init(&s, h.bitgen, force_exact)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            sampler.block(&s, &noise[0], m, pend, bits)
            with nogil:
                add_noise(counts + off, &noise[0], m)
    return 0


def discrete_laplace_add_into(int64_t[::1] counts, double scale, random_state=None):
    """counts[j] += DLap(scale) independently for every j (exact; empty cells included).

    Noise is drawn a block at a time into a small buffer, so a grid of any size needs no
    full-size temporary. ``scale`` is validated by the caller.
    """
    dlap_add_into(&counts[0] if counts.shape[0] > 0 else NULL, counts.shape[0], scale,
                  random_state)


def discrete_gaussian_add_into(int64_t[::1] counts, double sigma, random_state=None):
    """counts[j] += N_Z(0, sigma**2) independently for every j (exact; empty cells included).

    The same draws, in the same order, as `discrete_gaussian_into` over all cells (so
    ``counts += dpcore.discrete_gaussian(sigma, counts.size, random_state=rng)`` gives the same
    counts for the same generator state), without the full-size temporary. ``sigma`` is
    validated by the caller.
    """
    dgauss_add_into(&counts[0] if counts.shape[0] > 0 else NULL, counts.shape[0], sigma,
                    random_state)


def discrete_gaussian_into(int64_t[::1] out, double sigma, random_state=None):
    """Fill `out` with exact discrete Gaussian draws N_Z(0, sigma^2) (sigma validated by the caller).
    From THREAD_MIN values on, threaded (per-block streams: the output does not depend on the
    thread count)."""
    cdef _NoiseJob job
    if out.shape[0] >= THREAD_MIN:
        job = init_noise_job(_NoiseJob.__new__(_NoiseJob), JOB_DGAUSS, out.shape[0], sigma, out)
        job.ints = &out[0]
        run_noise_job(job, random_state)
        return
    _gaussian_fill(out, gauss_sampler(sigma, out.shape[0]), random_state)


cdef _gaussian_fill(int64_t[::1] out, GaussSampler sampler, random_state):
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[PENDING_CAPACITY]
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    with h.lock:
        source_init(&s, h.bitgen, force_exact)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            sampler.block(&s, &out[off], m, pend, bits)


cdef dict _pending_copy(Pending *pd):
    return {"index": pd.index, "kind": pd.kind, "negative": pd.negative, "u": pd.u,
            "v": pd.v, "nv": pd.nv, "v2": pd.v2, "refined": pd.refined, "y": pd.y,
            "entry": pd.entry}


cdef object _finish_dgauss(dict item, sigma2, t, LockedBits bits):
    """Finish one pending discrete Gaussian attempt exactly; None if it is rejected."""
    cdef Pending pd
    cdef double u2
    if item["kind"] == DGAUSS_ACCEPT:
        y = item["y"]
        u2 = item["u"]
    else:
        pd.u = item["u"]
        pd.v = item["v"]
        pd.nv = item["nv"]
        pd.v2 = item["v2"]
        pd.refined = item["refined"]
        m = _exact_magnitude(&pd, t, bits)
        if item["negative"] and m == 0:
            return None
        y = -m if item["negative"] else m
        u2 = bits.ustar()
    return y if _accept_exactly(u2, y, sigma2, t, bits) else None


# ------------------------------------------------------------------------------------------
# Test hooks: the pieces of the kernels, callable from Python.


def _force_exact_path(bint on):
    """Test hook: when on, every decision of every noise kernel (this one, _noise_grid,
    _noise_snapping, _noise_planar) goes to the exact fallback."""
    global force_exact
    force_exact = on


def _dlap_magnitude_fast(double scale, Py_ssize_t n, random_state=None):
    """Run only the fast path of floor(-ln(u) * scale) n times: (values, decided) arrays."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef int64_t[::1] vals = np.zeros(n, dtype=np.int64)
    cdef signed char[::1] ok = np.zeros(n, dtype=np.int8)
    cdef Pending pd
    cdef int64_t y = 0
    cdef Py_ssize_t i
    cdef Source s
    with h.lock, nogil:
        source_init(&s, h.bitgen, force_exact)
        for i in range(n):
            if dlap_magnitude(&s, scale, &y, &pd):
                vals[i] = y
                ok[i] = 1
    return np.asarray(vals), np.asarray(ok).astype(bool)


def _neglog_bracket(double u):
    """(el, eu) with el <= -ln(u') <= eu over u's bracket bucket (u a normal double in (0, 1))."""
    cdef double el, eu
    if not (DBL_MIN <= u < 1.0):
        raise ValueError("u must be a normal double in (0, 1)")
    neglog_bracket(u, &el, &eu)
    return el, eu


def _neglog_medium(double u):
    """(E, err) with |E + ln u| <= err (u a normal double in (0, 1))."""
    cdef double err = 0.0, E
    if not (DBL_MIN <= u < 1.0):
        raise ValueError("u must be a normal double in (0, 1)")
    E = neglog_medium(u, &err)
    return E, err


def _floor_bracket(double u, double scale):
    """floor(-ln(u') * scale) over u's bracket bucket from the table bracket, or None if undecided
    (scale <= BRACKET_SCALE = 32, as the kernel uses it)."""
    cdef int64_t y = 0
    if not (DBL_MIN <= u < 1.0) or not (0.0 < scale <= BRACKET_SCALE):
        raise ValueError("need a normal u in (0, 1) and 0 < scale <= 32")
    return y if floor_bracket_scaled(u, scale, &y) else None


def _floor_cell(double u, double scale):
    """floor(-ln(u') * scale) over u's cell [u, u + ulp(u)) from the plain-double logarithm, or None."""
    cdef int64_t y = 0
    cdef double err = 0.0, E
    if not (DBL_MIN <= u < 1.0) or not (0.0 < scale <= MAX_DLAP_SCALE):
        raise ValueError("need a normal u in (0, 1) and 0 < scale <= 2**44")
    E = neglog_medium(u, &err)
    return y if floor_scaled_cell(E, err, scale, &y) else None


def _floor_refined(double u, uint64_t extra, int nextra, uint64_t v2, double scale):
    """floor(-ln(u') * scale) over the refined sub-cell of u's cell (see floor_refined), or None."""
    cdef int64_t y = 0
    if not (DBL_MIN <= u < 1.0) or not (0.0 < scale <= MAX_DLAP_SCALE):
        raise ValueError("need a normal u in (0, 1) and 0 < scale <= 2**44")
    if not (0 <= nextra <= 12 and extra < (<uint64_t>1 << nextra)):
        raise ValueError("need 0 <= nextra <= 12 and extra < 2**nextra")
    return y if floor_refined(u, extra, nextra, v2, scale, &y) else None


def _dgauss_g(int64_t y, double sigma):
    """(g, dg, t): the kernel's g ~ (|y| - sigma**2/t)**2 / (2 sigma**2), its bound, and t."""
    cdef DGaussParams p
    cdef double g = 0.0, dg = 0.0
    _dgauss_params(&p, sigma)
    dgauss_gamma(&p, y, &g, &dg)
    return g, dg, p.t


def _accept_coarse(uint64_t top, double g, double dg):
    """1 / 0 / -1: -ln(u') > gamma for all / no / some u' in [top 2**-32, (top + 1) 2**-32),
    given |g - gamma| <= dg (top >= 2**23)."""
    if not (COARSE_MIN <= top < (<uint64_t>1 << 32)):
        raise ValueError("need 2**23 <= top < 2**32")
    return accept_coarse(top, g, dg)


def _accept_cell(double u, double g, double dg):
    """As _accept_coarse, over u's cell [u, u + ulp(u))."""
    if not (DBL_MIN <= u < 1.0):
        raise ValueError("u must be a normal double in (0, 1)")
    return accept_cell(u, g, dg)


def _pending_cell(double u, uint64_t v, int nv, uint64_t v2, bint refined):
    """The cell (lo, hi) as Fractions that the exact path uses for a pending draw with these
    fields (see Pending and _cell)."""
    cdef Pending pd
    pd.u = u
    pd.v = v
    pd.nv = nv
    pd.v2 = v2
    pd.refined = refined
    return _cell(&pd)


def _table_sampler_into(int64_t[::1] out, double sigma, double tail_sigmas, random_state=None):
    """Test hook: discrete_gaussian_into with the table sampler whatever the size, its tail cut
    at about tail_sigmas sigma (small cuts send many draws through the exact tail path)."""
    _gaussian_fill(out, GaussSampler(sigma, True, tail_sigmas), random_state)


def _table_entries(double sigma, double tail_sigmas=TABLE_TAIL_SIGMAS):
    """Test hook: the table the sampler builds for sigma, as a dict of arrays and scalars."""
    cdef GaussSampler sampler = GaussSampler(sigma, True, tail_sigmas)
    cdef dpc_dgt *t = sampler.table
    cdef int e, ncol = 1 << DPC_DGT_COLUMN_BITS
    return {
        "weight": np.array([t.weight[e] for e in range(ncol)], dtype=np.int64),
        "thr": np.array([t.thr[e] for e in range(ncol)], dtype=np.int64),
        "alias": np.array([t.alias[e] for e in range(ncol)], dtype=np.int64),
        "start": np.array([t.entry[e].start for e in range(ncol)], dtype=np.int64),
        "mask": np.array([t.entry[e].mask for e in range(ncol)], dtype=np.uint64),
        "squeeze": np.array([t.entry[e].squeeze for e in range(ncol)], dtype=np.int64),
        "kind": np.array([t.entry[e].kind for e in range(ncol)], dtype=np.int64),
        "delta": np.array([t.entry[e].delta for e in range(ncol)]),
        "delta_err": np.array([t.entry[e].delta_err for e in range(ncol)]),
        "D": t.D, "h": t.h, "width": int(t.width), "tail_start": t.tail_start,
        "tail_width": 2 ** int(t.tail_width_bits), "nblocks": t.nblocks,
        "column_bits": DPC_DGT_COLUMN_BITS, "threshold_bits": DPC_DGT_THR_BITS,
        "kinds": {"block": DPC_DGT_BLOCK, "tail": DPC_DGT_TAIL, "null": DPC_DGT_NULL},
    }


def _table_gamma(double sigma, int entry, uint64_t j):
    """Test hook: (g, dg), the kernel's -ln a(L + j) for a block entry and its bound."""
    cdef GaussSampler sampler = GaussSampler(sigma, True)
    cdef double g = 0.0, dg = 0.0
    if not (0 <= entry < (1 << DPC_DGT_COLUMN_BITS)) \
            or sampler.table.entry[entry].kind != DPC_DGT_BLOCK \
            or j > sampler.table.entry[entry].mask:
        raise ValueError("need a block entry and 0 <= j < its width")
    table_gamma(sampler.table, &sampler.table.entry[entry], j, &g, &dg)
    return g, dg


def _table_fast_rate(double sigma, Py_ssize_t n, random_state=None):
    """Test hook: (attempts, undecided) over table attempts until n draws are decided fast."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef GaussSampler sampler = GaussSampler(sigma, True)
    cdef Pending pd
    cdef Source s
    cdef int64_t y = 0
    cdef Py_ssize_t done = 0, attempts = 0, undecided = 0
    cdef int r
    with h.lock, nogil:
        source_init(&s, h.bitgen, force_exact)
        while done < n:
            r = table_one(&s, sampler.table, &y, &pd)
            attempts += 1
            if r < 0:
                undecided += 1
            else:
                done += r
    return attempts, undecided
