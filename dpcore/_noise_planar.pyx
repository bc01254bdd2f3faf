# cython: language_level=3
"""Noise kernel: exact planar Laplace on Z**2 (geo-indistinguishability,
dpcore.local.planar_laplace, which owns this kernel).

P(d) proportional to exp(-lam ||d||_2). Proposals are two exact discrete Laplace integers of
scale s with s lam >= sqrt(2) (_noise.pyx's sampler), accepted with probability exp(-gamma),
gamma = lam ||d||_2 - ||d||_1 / s >= 0 (||d||_1 <= sqrt(2) ||d||_2), so accepted offsets have
mass proportional to exp(-||d||_1 / s) exp(-gamma) = exp(-lam ||d||_2). The acceptance is
accept_exp's test (-ln u' > gamma, _noise_neglog.pxd) on a proven enclosure of gamma
(planar_gamma), finished in rational arithmetic (_planar_accept_exactly) on the same uniform when
undecided. One stream (the caller's generator); the order of draws is fixed, so a seed
reproduces the output.
"""
import math
from fractions import Fraction

import numpy as np

from libc.math cimport INFINITY, NAN, nextafter, sqrt, fabs
from libc.float cimport DBL_MIN
from libc.stdint cimport int64_t

from dpcore._random cimport BitgenHandle, LockedBits, locked_bits, bitgen_handle
from dpcore._noise_neglog cimport (
    Pending, Source, source_init, take_half, init_brackets, accept_cell, accept_exp,
    PENDING_CAPACITY, TWO_M50, TWO_M52, TWO_M1000,
)
from dpcore._noise cimport dlap_block, exact_path_forced

from dpcore import _exact

init_brackets()


cdef enum:
    PLANAR_CHUNK = 2048  # proposals per block (two int64 each)


cdef inline void planar_gamma(int64_t d1, int64_t d2, double lam, double inv, double *g,
                              double *dg) noexcept nogil:
    """g ~ gamma = lam sqrt(d1**2 + d2**2) - (|d1| + |d2|) / s with |g - gamma| <= dg, given a
    normal double lam (exact) and inv = fl(1 / s); dg = inf (undecided) when lam is not a finite
    double or |d1| or |d2| >= 2**52.

    a1, a2 and a1 + a2 are exact (< 2**53); fl(fl(a1 a1) + fl(a2 a2)) is within 2 * 2**-53 of n2
    relatively (two roundings of positive terms, then one), its square root within 2**-53, and
    the correctly rounded sqrt (IEEE 754) adds 2**-53: r is within 2 * 2**-53 of sqrt(n2);
    main = fl(lam r) adds one rounding; off = fl((a1 + a2) inv) is within 2 * 2**-53 of
    (a1 + a2) / s; g = fl(main - off) adds 2**-53 |g|. dg = 2**-50 (main + off) + 2**-52 |g| +
    2**-1000 is over twice all that (which covers dg's own roundings; the absolute term covers
    underflow in the products).
    """
    cdef double a1 = <double>(d1 if d1 >= 0 else -d1)
    cdef double a2 = <double>(d2 if d2 >= 0 else -d2)
    cdef double main, off
    if not (a1 < 4503599627370496.0 and a2 < 4503599627370496.0 and lam <= 1.7e308):
        g[0] = 0.0
        dg[0] = INFINITY
        return
    main = lam * sqrt(a1 * a1 + a2 * a2)
    off = (a1 + a2) * inv
    g[0] = main - off
    dg[0] = TWO_M50 * (main + off) + TWO_M52 * fabs(g[0]) + TWO_M1000


cdef Py_ssize_t planar_accept_fill(Source *s, const int64_t *d, Py_ssize_t start, Py_ssize_t m,
                                   double lam, double inv, signed char *accept, Pending *pend,
                                   Py_ssize_t *npend) noexcept nogil:
    """accept[i] = 1 / 0 for the proposals d[2i], d[2i + 1] from start until m, or until
    PENDING_CAPACITY are undecided (pend[k].index = i, pend[k].u = U*); returns the index reached."""
    cdef Py_ssize_t i = start
    cdef double g, dg
    cdef int r
    npend[0] = 0
    while i < m:
        planar_gamma(d[2 * i], d[2 * i + 1], lam, inv, &g, &dg)
        r = accept_exp(s, take_half(s), g, dg, 0, 1, &pend[npend[0]])
        accept[i] = <signed char>r
        i += 1
        if r < 0:
            pend[npend[0]].index = i - 1
            npend[0] += 1
            if npend[0] == PENDING_CAPACITY:
                break
    return i


cdef void planar_keep(int64_t *out, Py_ssize_t *slots, const int64_t *d, const signed char *accept,
                      Py_ssize_t off, Py_ssize_t m, Py_ssize_t *left) noexcept nogil:
    """out[slots[off + i]] = proposal i where accepted; the other slots move to slots[left...]."""
    cdef Py_ssize_t i, slot
    for i in range(m):
        slot = slots[off + i]
        if accept[i]:
            out[2 * slot] = d[2 * i]
            out[2 * slot + 1] = d[2 * i + 1]
        else:
            slots[left[0]] = slot
            left[0] += 1


def planar_laplace_into(int64_t[:, ::1] out, decay, double scale, random_state=None):
    """Fill the rows of `out` (n x 2) with exact draws of d in Z**2, P(d) proportional to
    exp(-lam ||d||_2), lam = decay (a Fraction > 0), from proposals of discrete Laplace scale
    `scale` = s with s lam >= sqrt(2) (validated by the caller, dpcore.local)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef LockedBits bits = locked_bits(h)
    cdef Pending pend[PENDING_CAPACITY]
    cdef Source s
    cdef Py_ssize_t n = out.shape[0], todo = n, off, m, left
    cdef double inv = 1.0 / scale
    cdef double lam
    cdef int64_t[::1] prop = np.empty(2 * PLANAR_CHUNK, dtype=np.int64)
    cdef signed char[::1] accept = np.empty(PLANAR_CHUNK, dtype=np.int8)
    cdef Py_ssize_t[::1] slots = np.arange(n, dtype=np.intp)
    if out.shape[1] != 2:
        raise ValueError("out must have two columns")
    scale_exact = Fraction(scale)
    lam_exact = Fraction(decay)
    lam = _double_or_nan(lam_exact)  # nan: every acceptance decided exactly
    with h.lock:
        source_init(&s, h.bitgen, exact_path_forced())
        while todo > 0:  # rounds over the slots still empty (about 1/4 are rejected per round)
            left = 0
            for off in range(0, todo, PLANAR_CHUNK):
                m = min(PLANAR_CHUNK, todo - off)
                dlap_block(&s, scale, &prop[0], 2 * m, pend, scale_exact, bits)
                _planar_accept_block(&s, &prop[0], m, lam, inv, &accept[0], pend, lam_exact,
                                     scale_exact, bits)
                with nogil:
                    planar_keep(&out[0, 0], &slots[0], &prop[0], &accept[0], off, m, &left)
            todo = left


cdef double _double_or_nan(x):
    """The positive rational x as a double when it is exactly a normal double, else nan."""
    cdef double v = float(x) if x < 2**1023 else INFINITY
    return v if DBL_MIN <= v <= 1.7e308 and Fraction(v) == x else NAN


cdef _planar_accept_block(Source *s, const int64_t *prop, Py_ssize_t m, double lam, double inv,
                          signed char *accept, Pending *pend, lam_exact, scale_exact, bits):
    """accept[0:m] for the proposals prop[0:2m], every one decided (GIL and lock held)."""
    cdef Py_ssize_t start = 0, npend = 0, k, i
    while start < m:
        with nogil:
            start = planar_accept_fill(s, prop, start, m, lam, inv, accept, pend, &npend)
        for k in range(npend):
            i = pend[k].index
            accept[i] = _planar_accept_exactly(pend[k].u, prop[2 * i], prop[2 * i + 1], lam_exact,
                                               scale_exact, bits)


cdef bint _planar_accept_exactly(double u, int64_t d1, int64_t d2, lam, scale, bits):
    """Whether u' < exp(-gamma), gamma = lam sqrt(n2) - (|d1| + |d2|) / scale (n2 = d1**2 +
    d2**2; lam, scale rationals), for the real uniform u' on U*'s cell [u, nextafter(u, 2)).

    -ln is decreasing, so the cell is accepted whole when -ln(hi) >= an upper bound of gamma and
    rejected whole when -ln(lo) < a lower bound (signs of -ln(x) - target decided exactly by
    _exact._neglog_sign); otherwise 64 fresh bits pick one of 2**64 equal sub-cells (u' is
    uniform on it) and sqrt(n2) is enclosed to twice the bits (integer square roots). gamma is
    irrational unless n2 is a square, and then -ln of a rational other than 1 is not equal to
    it, so the loop ends with probability one. bits() gives uniform 64-bit integers."""
    p = 64
    n2 = int(d1) * int(d1) + int(d2) * int(d2)
    off = Fraction(abs(int(d1)) + abs(int(d2))) / scale
    lo, hi = Fraction(u), Fraction(nextafter(u, 2.0))
    while True:
        root = math.isqrt(n2 << (2 * p))
        upper = root if root * root == n2 << (2 * p) else root + 1
        if _exact._neglog_sign(hi, lam * Fraction(upper, 2**p) - off) >= 0:
            return True
        if _exact._neglog_sign(lo, lam * Fraction(root, 2**p) - off) < 0:
            return False
        width = (hi - lo) / 2**64
        j = bits()
        lo, hi = lo + width * j, lo + width * (j + 1)
        p *= 2


# ------------------------------------------------------------------------------------------
# Test hooks: the pieces of the kernel, callable from Python.

def _planar_gamma(int64_t d1, int64_t d2, decay, double scale):
    """Test hook: (g, dg), the kernel's enclosure of lam ||d||_2 - ||d||_1 / scale."""
    cdef double g = 0.0, dg = 0.0
    planar_gamma(d1, d2, _double_or_nan(Fraction(decay)), 1.0 / scale, &g, &dg)
    return g, dg


def _planar_accept(const int64_t[:, ::1] d, decay, double scale, random_state=None):
    """Test hook: the planar acceptance test of each proposal row of d (1 accepted, 0 not),
    decided as planar_laplace_into decides it."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef LockedBits bits = locked_bits(h)
    cdef Pending pend[PENDING_CAPACITY]
    cdef Source s
    cdef Py_ssize_t n = d.shape[0]
    cdef signed char[::1] accept = np.zeros(n, dtype=np.int8)
    lam_exact = Fraction(decay)
    if n == 0:
        return np.asarray(accept)
    with h.lock:
        source_init(&s, h.bitgen, exact_path_forced())
        _planar_accept_block(&s, &d[0, 0], n, _double_or_nan(lam_exact), 1.0 / scale,
                             &accept[0], pend, lam_exact, Fraction(scale), bits)
    return np.asarray(accept)


def _planar_accept_cell(double u, int64_t d1, int64_t d2, decay, double scale):
    """Test hook: the fast decision (1 / 0 / -1 undecided) on U*'s cell [u, u + ulp(u))."""
    cdef double g = 0.0, dg = 0.0
    if not (DBL_MIN <= u < 1.0):
        raise ValueError("u must be a normal double in (0, 1)")
    planar_gamma(d1, d2, _double_or_nan(Fraction(decay)), 1.0 / scale, &g, &dg)
    return accept_cell(u, g, dg)


def _planar_accept_exact(double u, int64_t d1, int64_t d2, decay, double scale, bits):
    """Test hook: the exact decision on U*'s cell, refined with bits() when it must be."""
    return _planar_accept_exactly(u, d1, d2, Fraction(decay), Fraction(scale), bits)
