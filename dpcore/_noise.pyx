# cython: language_level=3
"""Noise kernel: snapping Laplace (Mironov 2012), exact discrete Laplace and discrete Gaussian.

Every decision that defines the output law is exact. The fast path takes a decision in floating
point only when a proven error bound shows which side it falls on; the rare undecided draws are
recorded (`Pending`) and finished with the GIL by exact rational code in `dpcore._exact`, using
the same uniform refined with fresh bits, so nothing is redrawn and the law stays exact. Draws
happen under the generator's lock; the order of draws is fixed, so a seed reproduces the output.

The fast decisions, cheapest first (each function states its bound):
  * a table bracket of -ln(u') from the exponent and top 8 mantissa bits of the uniform
    (`neglog_bracket`), tried on a coarse 32-bit uniform (half a word) before the full U*;
  * a plain-double logarithm with a proven bound on crlog.h's exact argument reduction
    (`neglog_medium`);
  * dp_log_dd's double-double logarithm, on U*'s cell refined by 64 fresh bits
    (`floor_refined`, `accept_cell`).
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
from the caller's generator directly, as before. A block's draws are the one-stream driver's on
that block, exact finishing included (with the GIL, from the block's own stream).

Not constant-time: loop lengths depend on the values drawn (a timing channel if run time is observable).
"""
import math
from fractions import Fraction

import numpy as np

from libc.math cimport INFINITY, NAN, fabs, nextafter, sqrt
from libc.float cimport DBL_MIN
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from dpcore._random cimport (
    BitgenHandle, LockedBits, locked_bits, bitgen_handle, bitgen_t, dpc_words, random_words,
    dpc_words_next, dpc_ustar, dpc_ustar_from, dpc_opaque, dpc_ulp, dpc_floor, dpc_floor_i64,
    dpc_rint, dpc_u64_as_double, dpc_double_as_u64, BlockStream, StreamKey, stream_key,
    stream_open, stream_bits,
)
from dpcore._crlog cimport dp_log_dd, dp_log_cr_fast

from dpcore import _exact
from dpcore._dpcore_threads import run_blocks

# The discrete Gaussian's proposal table (see "The table sampler" below) and proven log bounds.
cdef extern from "dgauss_table.h" nogil:
    ctypedef struct dpc_dgt_entry:
        int64_t start
        uint64_t mask
        uint32_t squeeze
        int32_t kind
        double delta
        double delta_err
    ctypedef struct dpc_dgt:
        uint32_t thr[512]
        uint32_t alias[512]
        dpc_dgt_entry entry[512]
        uint32_t weight[512]
        double h
        double D
        double width
        int64_t tail_start
        int tail_width_bits
        int nblocks
    int dpc_dgt_build(dpc_dgt *t, double sigma, double tail_sigmas)
    void dpc_log_bounds(double x, double *dn, double *up)
    enum:
        DPC_DGT_BLOCK
        DPC_DGT_TAIL
        DPC_DGT_NULL
        DPC_DGT_COLUMN_BITS
        DPC_DGT_THR_BITS
        DPC_DGT_SIGN_SHIFT


MAX_DLAP_SCALE = 2.0**44
MAX_DGAUSS_SIGMA = 2.0**40

cdef double TWO_64 = 18446744073709551616.0  # 2**64
cdef double TWO_M48 = 3.552713678800501e-15  # 2**-48
cdef double TWO_M49 = 1.7763568394002505e-15  # 2**-49
cdef double TWO_M50 = 8.881784197001252e-16  # 2**-50
cdef double TWO_M52 = 2.220446049250313e-16  # 2**-52
cdef double TWO_M100 = 7.888609052210118e-31  # 2**-100
cdef double TWO_M1000 = 9.332636185032189e-302  # 2**-1000
cdef Py_ssize_t PENDING_CAPACITY = 256
# Magnitudes floor(-ln(u') * scale) are first tried on the table bracket when scale is at most
# this (the bracket has width ~2**-BRACKET_BITS, so it decides a fraction ~1 - scale 2**-8;
# measured, it pays up to a scale of about 32).
cdef double BRACKET_SCALE = 32.0
# Test hook: send every decision to the exact path (see _force_exact_path).
cdef bint force_exact = False

cdef enum PendingKind:
    DLAP_MAGNITUDE = 0      # floor(-ln(u) * scale) undecided
    DGAUSS_PROPOSAL = 1     # the discrete Laplace proposal of the discrete Gaussian undecided
    DGAUSS_ACCEPT = 2       # the acceptance test of the discrete Gaussian undecided
    SNAP_LOG = 3            # the correctly rounded log undecided
    TABLE_ACCEPT = 4        # the table sampler's acceptance test undecided
    TABLE_TAIL = 5          # the table sampler proposed its tail (always finished exactly)


cdef struct Pending:
    Py_ssize_t index
    int kind
    int negative
    # The real uniform behind the draw lies in the cell [u + w V 2**-N, u + w (V + 1) 2**-N),
    # w = ulp(u), N = nv + 64 refined, V = v 2**64 + v2 if refined else v (see _cell).
    double u           # U* value
    uint64_t v         # the nv spare bits of U*'s last word
    int nv
    uint64_t v2        # 64 fresh refinement bits, when refined
    int refined
    int64_t y          # proposal value (DGAUSS_ACCEPT, TABLE_ACCEPT)
    int entry          # the table entry proposed (TABLE_ACCEPT, TABLE_TAIL)


# A word reader, a pool of single random bits (low bit first) and one spare 32-bit half word.
cdef struct Source:
    dpc_words words
    uint64_t bits
    int left
    uint64_t half
    int has_half


cdef inline void source_init(Source *s, bitgen_t *bg) noexcept nogil:
    random_words(&s.words, bg)
    s.left = 0
    s.bits = 0
    s.half = 0
    s.has_half = 0


cdef inline uint64_t take_half(Source *s) noexcept nogil:
    """32 fresh random bits (the two halves of a word are handed out in turn)."""
    cdef uint64_t w
    if s.has_half:
        s.has_half = 0
        return s.half
    w = dpc_words_next(&s.words)
    s.half = w >> 32
    s.has_half = 1
    return w & <uint64_t>0xffffffff


cdef inline int take_bit(Source *s) noexcept nogil:
    if s.left == 0:
        s.bits = dpc_words_next(&s.words)
        s.left = 64
    s.left -= 1
    cdef int b = <int>(s.bits & 1)
    s.bits >>= 1
    return b


# ------------------------------------------------------------------------------------------
# A cheap enclosure of -ln(u') from the bits of u (no logarithm evaluated per draw).
#
# u = 2**-(Z+1) (1 + f), f = j 2**-8 + (lower bits) with j the top 8 mantissa bits, so u's cell
# [u, u + ulp(u)) lies in [2**-(Z+1) (1 + j/256), 2**-(Z+1) (1 + (j+1)/256)] (the cell's upper end
# is the next double, at most the next multiple of 2**-(Z+1)/256), and for u' in the cell
#     E' = -ln(u') in [(Z+1) ln 2 - ln(1 + (j+1)/256), (Z+1) ln 2 - ln(1 + j/256)].
# LN1P_DN[j] <= ln(1 + j/256) <= LN1P_UP[j] and LN2_DN <= ln 2 <= LN2_UP are rigorous double
# bounds built at import from dp_log_dd's proven enclosure (dpc_log_bounds, dgauss_table.h).

cdef enum:
    BRACKET_BITS = 8
cdef double LN1P_DN[257]
cdef double LN1P_UP[257]
cdef double LN2_DN, LN2_UP


cdef void _init_brackets() noexcept nogil:
    cdef int j
    global LN2_DN, LN2_UP
    for j in range(257):
        dpc_log_bounds(1.0 + j / 256.0, &LN1P_DN[j], &LN1P_UP[j])  # 1 + j/256 is exact
    LN1P_DN[0] = 0.0  # ln 1 = 0 exactly
    LN1P_UP[0] = 0.0
    dpc_log_bounds(2.0, &LN2_DN, &LN2_UP)


_init_brackets()


cdef inline void neglog_bracket(double u, double *el, double *eu) noexcept nogil:
    """el <= -ln(u') <= eu for every u' in the bucket [2**-(Z+1) (1 + j/256), 2**-(Z+1) (1 +
    (j+1)/256)] holding the normal double u in (0, 1), in particular for every u' in u's cell;
    el >= 0 and eu - el is about 2**-8 (see the tables above).

    With k = Z + 1 <= 1022: el_c = fl(fl(k LN2_DN) - LN1P_UP[j+1]) and eu_c = fl(fl(k LN2_UP) -
    LN1P_DN[j]) each err by at most 2**-53 (k ln 2 + |result|) <= 2**-52 (eu_c + 1) (k LN2_DN <=
    eu_c + ln 2 and 0 <= results <= eu_c up to roundings); the margin d = 2**-50 (eu_c + 1) covers
    that plus the rounding of el_c - d and eu_c + d. E' >= 0 on (0, 1], so el is clamped at 0.
    """
    cdef uint64_t bits = dpc_double_as_u64(u)
    cdef double k = <double>(1023 - <int>(bits >> 52))
    cdef int j = <int>((bits >> (52 - BRACKET_BITS)) & ((1 << BRACKET_BITS) - 1))
    cdef double lo_c = k * LN2_DN - LN1P_UP[j + 1]
    cdef double up_c = k * LN2_UP - LN1P_DN[j]
    cdef double d = TWO_M50 * (up_c + 1.0)
    lo_c = lo_c - d
    el[0] = lo_c if lo_c > 0.0 else 0.0
    eu[0] = up_c + d


# Coarse uniforms. Most decisions the bracket takes need only the first few bits of the real
# uniform, so they are first tried on 32 bits, top: the real uniform u' lies in the coarse cell
# [top 2**-32, (top + 1) 2**-32). When top >= 2**23 (its first 1 among its top 9 bits), uc =
# top 2**-32 is an exact double in [2**-9, 1) and the coarse cell lies in uc's bracket bucket
# (bucket ends are multiples of 2**-(Z+9), Z <= 8, so of 2**-32), so neglog_bracket(uc) encloses
# E' = -ln(u') for every u' in it. Otherwise, or when the bracket does not decide, the uniform
# is completed to a full U* with 32 more bits: dpc_ustar_from with first word (top << 32) | next
# 32 bits reads the same binary expansion a plain U* draw would, just in two pieces.
cdef uint64_t COARSE_MIN = 1 << 23
cdef double TWO_M32 = 2.3283064365386963e-10  # 2**-32


cdef inline void two_prod(double a, double b, double *p, double *e) noexcept nogil:
    """p + e == a * b exactly (Dekker; no FMA needed, valid barring over/underflow)."""
    cdef double c = 134217729.0  # 2**27 + 1
    cdef double t, ah, al, bh, bl
    p[0] = a * b
    t = c * a
    ah = t - (t - a)
    al = a - ah
    t = c * b
    bh = t - (t - b)
    bl = b - bh
    e[0] = ((ah * bh - p[0]) + ah * bl + al * bh) + al * bl


cdef inline void cell_log_offset(double u, double vd, double two_mn, double *sc,
                                 double *half) noexcept nogil:
    """Enclose ln(u') - ln(u) for u' in the sub-cell [u + w V 2**-N, u + w (V + 1) 2**-N) of a
    normal u's cell (w = ulp(u)): it lies in [sc - half, sc + half].

    vd is V as a double with relative error <= 2**-52 (V itself when V < 2**53), two_mn = 2**-N.
    With R = w/u and t0 = R V 2**-N, t1 = t0 + R 2**-N, the offset lies in
    [ln(1 + t0), ln(1 + t1)], inside [t0 - t0**2/2, t1] (ln(1 + t) in [t - t**2/2, t], t >= 0).
    Computed d = fl(w/u), a = fl(fl(d vd) 2**-N) = t0 (1 + e) with |e| <= 2**-50 (at most four
    relative errors of 2**-53), kl = d 2**-N >= R 2**-N (1 - 2**-53) (scaling by 2**-N is exact:
    d > 2**-54 and N <= 76, so kl and a (0 or >= kl) stay far above 2**-1022). Then with
    half = kl (1 + 2**-48) + a**2 + 2**-48 a, computed with relative error <= 2**-51:
    a + half >= t0 + R 2**-N (1 + 2**-48 - 2**-51 - 2**-52) >= t1, and
    a - half <= t0 (1 + 2**-50) - (1 - 2**-51)(2**-48 a + a**2) <= t0 - t0**2/2.
    """
    cdef double d = dpc_ulp(u) / u
    cdef double a = (d * vd) * two_mn
    cdef double kl = d * two_mn
    sc[0] = a
    half[0] = kl * (1.0 + TWO_M48) + a * a + TWO_M48 * a


cdef inline int floor_neglog_scaled(double hi, double lo, double err, double sc, double half,
                                    double scale, int64_t *y) noexcept nogil:
    """floor(-ln(u') * scale) when a proven bound decides it: 1 and *y set, else 0.

    Needs ln(u) in [hi + lo - err, hi + lo + err] (dp_log_dd) and ln(u') - ln(u) in
    [sc - half, sc + half], so z = -ln(u') scale lies within (half + err) scale of
    Z = -(hi + lo + sc) scale. ph + pl = hi scale exactly (Dekker), rest = fl(fl(lo + sc) scale)
    within 2**-52 |rest| of (lo + sc) scale (two roundings), a = -ph, f = floor(a) and a - f are
    exact (|a| < 2**54: scale <= 2**44, |hi| < 745; a - f is a's fraction bits), r = fl(-(pl +
    rest)) and frac = fl((a - f) + r) each add one rounding (2**-53 relative). So z - f lies
    within H of frac, H adding up all of these with margin (factor 2**-50 for each 2**-53 or
    2**-52 term, 2**-100 absolute for underflow in the products of tiny scales), and floor(z) =
    f + floor(frac +- H) when both ends agree.
    """
    cdef double ph, pl, rest, a, r, frac, H
    cdef int64_t f, kl
    two_prod(hi, scale, &ph, &pl)
    rest = (lo + sc) * scale
    a = -ph
    f = dpc_floor_i64(a)
    r = -(pl + rest)
    frac = (a - <double>f) + r  # f converts back exactly (|f| < 2**54, and f == a if >= 2**52)
    H = (half + err) * scale * (1.0 + TWO_M50) + fabs(rest) * TWO_M50 + fabs(r) * TWO_M50 \
        + TWO_M50 * (fabs(frac) + 1.0) + TWO_M100
    kl = dpc_floor_i64(frac - H)  # |frac -+ H| < 8 (|a - f| < 1, |pl| <= 1, |rest| <= 2, H < 1)
    if kl != dpc_floor_i64(frac + H):
        return 0
    y[0] = f + kl
    return 1


cdef extern from "crlog_table.h" nogil:
    # The argument reduction of crlog.h (its table and constants; see crlog.h steps 1-3).
    ctypedef struct dp_crlog_entry:
        double c
        double th
        double tl
    const dp_crlog_entry dp_crlog_table[256]
    const uint64_t DP_CRLOG_OFF
    const int DP_CRLOG_IDX_SHIFT
    const uint64_t DP_CRLOG_IDX_MASK
    const uint64_t DP_CRLOG_SPLIT_MASK
    const double DP_CRLOG_LN2_HI
    const double DP_CRLOG_LN2_LO
    const double DP_CRLOG_C3
    const double DP_CRLOG_C4
    const double DP_CRLOG_C5


cdef inline double neglog_medium(double x, double *err) noexcept nogil:
    """E ~ -ln(x) for a normal double 0 < x < 1 with |E + ln x| <= *err = fl(2**-52 (|E| + 1)).

    A plain-double logarithm (about a third of dp_log_dd's work) on crlog.h's reduction:
    x = z 2**k, r = z c - 1 EXACTLY and w = k LN2_HI + TH EXACTLY, |r| <= 2**-8.415 (crlog.h
    steps 1-3, whose per-entry preconditions tools/gen_crlog_table.py checks), so
    ln x = w + r + r**2 Q(r) + (k LN2_LO + TL) + tau + e_ln2 + e_T with
    Q(r) = -1/2 + r/3 - r**2/4 + r**3/5, |tau| <= |r|**6 / (6 (1 - |r|)) <= 0.96 u
    (u = 2**-53), |e_ln2| <= |k| 2.0e-31 <= 2**-91, |e_T| <= 2**-96. Rounding errors (u each):
    Horner's q is within 0.52 u of Q (|Q| <= 0.51, coefficients C3 = RN(1/3), C4 = -1/4,
    C5 = RN(1/5); inner errors shrink by |r| <= 2**-8.4), so fl(fl(r r) q) is within 1.55 u r**2
    <= 2**-68 of r**2 Q; k LN2_LO + TL within 2**-86; the sum `low` adds <= u 2**-17.7, r + low
    adds <= u 2**-8.3, and the last sum u |res|. In all |res - ln x| <= u |res| + 0.96 u + 2**-61
    <= u (|res| + 1), and err = fl(2**-52 (|res| + 1)) >= that (factor 2 to spare).
    """
    cdef uint64_t ix = dpc_double_as_u64(x)
    cdef uint64_t tmp = ix - DP_CRLOG_OFF
    cdef int i = <int>((tmp >> DP_CRLOG_IDX_SHIFT) & DP_CRLOG_IDX_MASK)
    # k = tmp >> 52 as a signed 12-bit field (as crlog.h computes it)
    cdef int64_t k = <int64_t>(tmp >> 52) - <int64_t>((tmp >> 63) << 12)
    cdef uint64_t iz = ix - (tmp & <uint64_t>0xfff0000000000000)
    cdef double z = dpc_u64_as_double(iz)
    cdef double zh = dpc_u64_as_double(iz & ~DP_CRLOG_SPLIT_MASK)
    cdef double zl = z - zh                                  # exact
    cdef const dp_crlog_entry *e = &dp_crlog_table[i]
    cdef double c = e.c
    cdef double r = (zh * c - 1.0) + zl * c                  # exact
    cdef double kd = <double>k
    cdef double w = kd * DP_CRLOG_LN2_HI + e.th              # exact
    cdef double q = -0.5 + r * (DP_CRLOG_C3 + r * (DP_CRLOG_C4 + r * DP_CRLOG_C5))
    cdef double low = (r * r) * q + (kd * DP_CRLOG_LN2_LO + e.tl)
    cdef double res = w + (r + low)
    err[0] = TWO_M52 * (fabs(res) + 1.0)
    return -res


cdef inline int floor_scaled_cell(double E, double err, double scale, int64_t *y) noexcept nogil:
    """floor(-ln(u') * scale) for u' anywhere in the cell [u, u + ulp(u)) of a normal u, given
    |E + ln u| <= err, in plain double arithmetic, when a proven bound decides it.

    E' = -ln(u') lies in [-ln u - ln(1 + w/u), -ln u], w/u <= 2**-52, so in
    [E - err - 2**-52, E + err], and z = E' scale in [E scale - (err + 2**-52) scale,
    E scale + err scale]. zc = fl(E scale) errs by <= 2**-53 |zc| (or 2**-1075 absolute below
    2**-1022). H = (err + 2**-52) scale (1 + 2**-50) + 2**-50 |zc| + 2**-1000 covers all of it
    with room for the roundings of H and of zc -+ H (each <= 2**-53 (|zc| + H); the factor
    1 + 2**-50 on the first term and 2**-50 >= 8 * 2**-53 on |zc| leave more than that; anything
    that lands below 2**-1022 errs by at most 2**-1075 absolute, covered by 2**-1000), so
    fl(zc - H) <= every z <= fl(zc + H) and floor(z) is their common floor when they agree.
    |zc| + H < 2**54 (scale <= 2**44, E < 745).
    """
    cdef double zc = E * scale
    cdef double H = (err + TWO_M52) * scale * (1.0 + TWO_M50) + fabs(zc) * TWO_M50 + TWO_M1000
    cdef int64_t k = dpc_floor_i64(zc - H)
    if k != dpc_floor_i64(zc + H):
        return 0
    y[0] = k
    return 1


cdef inline int floor_bracket_scaled(double u, double scale, int64_t *y) noexcept nogil:
    """floor(-ln(u') * scale) for all u' in u's cell, from the table bracket, when it decides.

    E' in [el, eu], 0 <= el <= eu, so z = E' scale in [el scale, eu scale]. a = fl(el scale) and
    b = fl(eu scale) are within 2**-53 b of those ends, and m = fl(2**-50 b) covers that plus the
    roundings of a - m and b + m (each <= 2**-53 (b + m)); |b| < 2**15 here (scale <= 32).
    """
    cdef double el, eu, a, b, m
    cdef int64_t k
    neglog_bracket(u, &el, &eu)
    a = el * scale
    b = eu * scale
    m = TWO_M50 * b
    k = dpc_floor_i64(a - m)
    if k != dpc_floor_i64(b + m):
        return 0
    y[0] = k
    return 1


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
        if top >= COARSE_MIN and not force_exact \
                and floor_bracket_scaled(<double>top * TWO_M32, scale, y):
            return 1
        u = dpc_ustar_from(&s.words, (top << 32) | take_half(s), &extra, &nextra)
    else:
        u = dpc_ustar(&s.words, &extra, &nextra)
    if u >= DBL_MIN and not force_exact:  # else: probability 2**-1022, or the test hook
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


cdef struct DGaussParams:
    double sigma
    double s2        # sigma * sigma, rounded
    double t         # the discrete Laplace proposal's scale (see _dgauss_params)
    double c         # s2 / t, rounded
    double inv_s2    # 1 / s2, rounded


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


cdef inline double gamma_up(double g, double dg) noexcept nogil:
    """An upper bound of every gamma with |g - gamma| <= dg (g, dg >= 0): fl(g + dg) is at least
    (g + dg)(1 - 2**-53), and the factor 1 + 2**-50 (two more roundings) makes up for it."""
    return (g + dg) * (1.0 + TWO_M50)


cdef inline double gamma_dn(double g, double dg) noexcept nogil:
    """A lower bound of every gamma with |g - gamma| <= dg (as gamma_up; negative is fine)."""
    cdef double d = g - dg
    return d - TWO_M50 * fabs(d)


cdef inline int accept_coarse(uint64_t top, double g, double dg) noexcept nogil:
    """Whether E' > gamma for every u' in the coarse cell [top 2**-32, (top + 1) 2**-32),
    top >= 2**23, given |g - gamma| <= dg: 1 yes, 0 no (E' < gamma for all), -1 undecided.
    Branch-free in the outcome (an unpredictable coin flip): only "undecided" is a branch."""
    cdef double el, eu
    cdef int acc, rej
    neglog_bracket(<double>top * TWO_M32, &el, &eu)
    acc = dpc_opaque(el > gamma_up(g, dg))
    rej = dpc_opaque(eu < gamma_dn(g, dg))
    return acc if acc | rej else -1


cdef inline int accept_cell(double u, double g, double dg) noexcept nogil:
    """As accept_coarse, for every u' in the cell [u, u + ulp(u)) of a normal u < 1.

    E' over the cell lies in [e_mid - ln(1 + w/u) - slack, e_mid + slack] with e_mid =
    fl(-(hi + lo)) (one rounding: 2**-53 |hi| (1 + 2**-52)), slack = 2**-50 (|hi| + 1) + err
    (dp_log_dd's bound plus that rounding and the roundings of the comparisons' sums, with a
    factor >= 2 to spare: the left-hand sides below err by less than 4 * 2**-53 (|hi| + 1)), and
    ln(1 + w/u) <= w/u <= 2**-52.
    """
    cdef double hi, lo, err, e_mid, slack
    dp_log_dd(u, &hi, &lo, &err)
    e_mid = -(hi + lo)
    slack = TWO_M50 * (fabs(hi) + 1.0) + err
    if e_mid - TWO_M52 - slack > gamma_up(g, dg):
        return 1
    if e_mid + slack < gamma_dn(g, dg):
        return 0
    return -1


cdef inline int accept_exp(Source *s, uint64_t top, double g, double dg, int64_t y, int r,
                           Pending *pd) noexcept nogil:
    """Accept iff E' > gamma, E' = -ln(u') for the real uniform u' whose first 32 bits are top,
    given |g - gamma| <= dg: 1 / 0, or -1 with pd's cell (U*'s) and y set (pending).

    First the table bracket of E' over the coarse uniform (decides all but ~2**-8 of the draws),
    then over the completed U*'s cell with the double-double logarithm. r = 0 marks a proposal
    already rejected (CKS's -0): it still gets its coarse acceptance coin, whose outcome is then
    ignored, so there is no branch on r and nothing later depends on the ignored bits."""
    cdef double u
    cdef uint64_t extra
    cdef int nextra, a
    if top >= COARSE_MIN and not force_exact:
        a = accept_coarse(top, g, dg)
        if a >= 0:  # nearly always; the accept / reject outcome itself is returned as data
            return a & r
    if r == 0:
        return 0
    u = dpc_ustar_from(&s.words, (top << 32) | take_half(s), &extra, &nextra)
    if u >= DBL_MIN and not force_exact:
        a = accept_cell(u, g, dg)
        if a >= 0:
            return a
    pd.u = u
    pd.y = y
    pd.refined = 0
    pd.v = 0
    pd.nv = 0
    pd.v2 = 0
    return -1


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
    if top < en.squeeze and not force_exact:
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


cdef void grid_finish(double *out, const double *x, const int64_t *noise, Py_ssize_t m,
                      double grid, double bound) noexcept nogil:
    """out[j] = (rint(clamp_B(x[j]) / grid) + noise[j]) * grid: the release's post-processing,
    operation for operation as numpy does it (clip, divide, rint half to even, int64 add,
    round-to-nearest conversion, multiply). The caller checked |rint(clamp_B(x) / grid)| < 2**62
    (so the int64 conversion is exact and the sum, with |noise| < 2**54, cannot overflow)."""
    cdef Py_ssize_t j
    cdef double v, inv = 1.0 / grid
    # v / grid == v * (1 / grid) when 1 / grid is a normal double: both are the correctly
    # rounded value of the same real number v 2**-k (grid = 2**k). Otherwise divide.
    if not (inv < 8.98846567431158e+307):  # 2**1023: 1 / grid overflowed or is not exact
        inv = 0.0
    for j in range(m):
        v = x[j]
        v = bound if v > bound else v     # branch-free clamp (maxsd / minsd)
        v = -bound if v < -bound else v
        v = v * inv if inv != 0.0 else v / grid
        out[j] = <double>(<int64_t>dpc_rint(v) + noise[j]) * grid


cdef inline double round_to_multiple(double y, double grid) noexcept nogil:
    """The multiple of the power of two `grid` nearest to y, ties towards +infinity (exact)."""
    cdef double q = y / grid  # exact: grid is a power of two
    cdef double k, frac
    if fabs(q) >= 4503599627370496.0:  # 2**52: already a multiple
        return y
    k = dpc_floor(q)
    frac = q - k  # exact for |q| < 2**52
    k += <double>(frac >= 0.5)  # branch-free (exact: |k| < 2**52)
    return k * grid


cdef inline double snap_finish(double x, double log_u, int negative, double lam, double grid,
                               double bound) noexcept nogil:
    """clamp_B(round_grid(clamp_B(x) + S * lam * ln(U*))), each operation one IEEE rounding."""
    cdef double z, y
    if x > bound:
        x = bound
    elif x < -bound:
        x = -bound
    z = lam * log_u
    # z = -z when negative: flip the sign bit (exact, and branch-free for a coin-flip condition)
    z = dpc_u64_as_double(dpc_double_as_u64(z) ^ (<uint64_t>(negative != 0) << 63))
    y = round_to_multiple(x + z, grid)
    if y > bound:
        return bound
    if y < -bound:
        return -bound
    return y


cdef Py_ssize_t snap_fill(Source *s, const double *x, double lam, double grid, double bound,
                          double *out, Py_ssize_t start, Py_ssize_t n, Pending *pend,
                          Py_ssize_t *npend) noexcept nogil:
    cdef Py_ssize_t i = start
    cdef double u, log_u
    cdef int negative, nextra
    cdef uint64_t extra
    npend[0] = 0
    while i < n:
        u = dpc_ustar(&s.words, &extra, &nextra)
        negative = take_bit(s)
        if not force_exact and dp_log_cr_fast(u, &log_u):
            out[i] = snap_finish(x[i], log_u, negative, lam, grid, bound)
        else:
            pend[npend[0]].index = i
            pend[npend[0]].kind = SNAP_LOG
            pend[npend[0]].u = u
            pend[npend[0]].negative = negative
            npend[0] += 1
            if npend[0] == PENDING_CAPACITY:
                i += 1
                break
        i += 1
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


# The drivers work through the output in blocks of CHUNK draws and finish each block's pending
# draws before the next, so the fused grid kernels (noise drawn into a small buffer, then
# post-processed while it is in cache) draw exactly what the plain ones draw for the same seed.
cdef Py_ssize_t CHUNK = 4096


cdef _dlap_block(Source *s, double scale, int64_t *out, Py_ssize_t m, Pending *pend,
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
    """The discrete Gaussian sampler of one call: the table sampler, or CKS (table is NULL)."""
    cdef DGaussParams p
    cdef object sigma2, t
    cdef dpc_dgt *table
    cdef object D, width, tail_start, tail_width  # the table, exactly, for finishing

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

cdef enum:
    THREAD_BLOCK = 1 << 16
    CHUNK_ = 4096  # = CHUNK
THREAD_MIN = THREAD_BLOCK

cdef enum JobKind:
    JOB_DLAP = 0
    JOB_DGAUSS = 1
    JOB_SNAP = 2


cdef class _NoiseJob:
    """One threaded call: the draws of block b go to ints (or noise), are then added to counts
    or post-processed into out (grid releases), or snapping writes out; run_blocks calls it."""
    cdef int kind
    cdef Py_ssize_t n
    cdef StreamKey key
    cdef int64_t *ints
    cdef int64_t *counts
    cdef double *out
    cdef const double *x
    cdef double param, grid, bound  # param: the scale (Laplace), or lam (snapping)
    cdef object param_exact
    cdef GaussSampler sampler
    cdef object keep  # the arrays behind the pointers

    def __call__(self, Py_ssize_t b):
        cdef BlockStream st
        cdef Source s
        cdef Pending pend[256]
        cdef int64_t noise[CHUNK_]
        cdef Py_ssize_t lo = b * THREAD_BLOCK, hi = min(self.n, lo + THREAD_BLOCK)
        cdef Py_ssize_t off, m, done, npend = 0
        cdef int64_t *dest
        cdef GaussSampler g = self.sampler
        cdef DGaussParams *p = &g.p if g is not None else NULL
        cdef const dpc_dgt *table = g.table if g is not None else NULL
        stream_open(&st, self.key, <uint64_t>b)
        bits = stream_bits(&st)
        source_init(&s, &st.bitgen)
        if self.kind == JOB_SNAP:
            _snap_range(&s, self.x, self.param, self.grid, self.bound, self.out, lo, hi, pend)
            return
        # The one-stream drivers' draws (_dlap_block, GaussSampler.block) without the GIL; it
        # is taken only to finish pending draws (rare).
        with nogil:
            off = lo
            while off < hi:
                m = min(<Py_ssize_t>CHUNK_, hi - off)
                dest = self.ints + off if self.ints != NULL else &noise[0]
                if self.kind == JOB_DLAP:
                    done = dlap_fill(&s, self.param, dest, 0, m, pend, &npend)
                else:
                    done = dgauss_fill(&s, p, table, dest, 0, m, pend, &npend)
                if npend or done < m:
                    with gil:
                        if self.kind == JOB_DLAP:
                            _dlap_finish(&s, self.param, dest, pend, npend, self.param_exact, bits)
                            _dlap_block(&s, self.param, dest + done, m - done, pend,
                                        self.param_exact, bits)
                        else:
                            g.finish_fill(&s, dest, pend, npend, bits)
                            g.block(&s, dest + done, m - done, pend, bits)
                if self.counts != NULL:
                    add_noise(self.counts + off, dest, m)
                elif self.out != NULL:
                    grid_finish(self.out + off, self.x + off, dest, m, self.grid, self.bound)
                off += m


cdef _NoiseJob noise_job(int kind, Py_ssize_t n, double param, object keep):
    cdef _NoiseJob job = _NoiseJob.__new__(_NoiseJob)
    job.kind = kind
    job.n = n
    job.param = param
    job.keep = keep
    if kind == JOB_DLAP:
        job.param_exact = Fraction(param)
    elif kind == JOB_DGAUSS:
        job.sampler = gauss_sampler(param, n)
    return job


cdef run_noise_job(_NoiseJob job, random_state):
    job.key = stream_key(bitgen_handle(random_state))
    run_blocks(job, (job.n + THREAD_BLOCK - 1) // THREAD_BLOCK)


cdef threaded_release(int kind, double[::1] out, const double[::1] x, double grid, double bound,
                      double param, random_state):
    cdef _NoiseJob job = noise_job(kind, out.shape[0], param, (out, x))
    job.out, job.x, job.grid, job.bound = &out[0], &x[0], grid, bound
    run_noise_job(job, random_state)


cdef int threaded_add(int kind, int64_t *counts, Py_ssize_t n, double param,
                      random_state) except -1:
    cdef _NoiseJob job = noise_job(kind, n, param, None)
    job.counts = counts
    run_noise_job(job, random_state)
    return 0


# ------------------------------------------------------------------------------------------
# The releases' input check, threaded like the draws (the serial NumPy checks were 14-19% of a
# threaded release). It runs before the release charges anything: each block reports its own
# largest magnitude, or that it holds a NaN or an infinity.

cdef uint64_t MAGNITUDE_BITS = 0x7fffffffffffffff  # all but the sign bit
cdef uint64_t INF_BITS = 0x7ff0000000000000        # +inf; NaNs lie above


cdef uint64_t block_magnitude_bits(const double *x, Py_ssize_t m) noexcept nogil:
    """The largest of |x[j]|'s bit patterns: for doubles >= 0 their order is the values' order,
    and +inf and the NaNs lie at or above INF_BITS, so one integer maximum gives both the largest
    magnitude and whether every value is finite (branch-free, exact). Four running maxima keep
    four independent dependency chains."""
    cdef uint64_t b0 = 0, b1 = 0, b2 = 0, b3 = 0, a
    cdef Py_ssize_t j, m4 = m - m % 4
    for j in range(0, m4, 4):
        a = dpc_double_as_u64(x[j]) & MAGNITUDE_BITS
        b0 = a if a > b0 else b0
        a = dpc_double_as_u64(x[j + 1]) & MAGNITUDE_BITS
        b1 = a if a > b1 else b1
        a = dpc_double_as_u64(x[j + 2]) & MAGNITUDE_BITS
        b2 = a if a > b2 else b2
        a = dpc_double_as_u64(x[j + 3]) & MAGNITUDE_BITS
        b3 = a if a > b3 else b3
    for j in range(m4, m):
        a = dpc_double_as_u64(x[j]) & MAGNITUDE_BITS
        b0 = a if a > b0 else b0
    b0 = b1 if b1 > b0 else b0
    b2 = b3 if b3 > b2 else b2
    return b2 if b2 > b0 else b0


cdef class _MagnitudeJob:
    """One threaded check: block b's largest magnitude bits go to bits[b]."""
    cdef const double *x
    cdef Py_ssize_t n
    cdef uint64_t[::1] bits
    cdef object keep

    def __call__(self, Py_ssize_t b):
        cdef Py_ssize_t lo = b * THREAD_BLOCK, hi = min(self.n, lo + THREAD_BLOCK)
        with nogil:
            self.bits[b] = block_magnitude_bits(self.x + lo, hi - lo)


def finite_magnitude(const double[::1] x):
    """max |x[j]| (0.0 for an empty x), or nan when some x[j] is NaN or infinite. From
    THREAD_MIN values on, the blocks are checked on the threads (a pure function of x: the
    thread count changes nothing)."""
    cdef Py_ssize_t n = x.shape[0], nblocks, b
    cdef uint64_t big = 0
    cdef _MagnitudeJob job
    if n == 0:
        return 0.0
    if n < THREAD_MIN:
        with nogil:
            big = block_magnitude_bits(&x[0], n)
    else:
        nblocks = (n + THREAD_BLOCK - 1) // THREAD_BLOCK
        job = _MagnitudeJob.__new__(_MagnitudeJob)
        job.x, job.n, job.keep = &x[0], n, x
        job.bits = np.zeros(nblocks, dtype=np.uint64)
        run_blocks(job, nblocks)
        for b in range(nblocks):
            big = job.bits[b] if job.bits[b] > big else big
    return NAN if big >= INF_BITS else dpc_u64_as_double(big)


def discrete_laplace_into(int64_t[::1] out, double scale, random_state=None):
    """Fill `out` with exact discrete Laplace draws of the given scale (validated by the caller).
    From THREAD_MIN values on, threaded (per-block streams: the output does not depend on the
    thread count)."""
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef _NoiseJob job
    if n >= THREAD_MIN:
        job = noise_job(JOB_DLAP, n, scale, out)
        job.ints = &out[0]
        run_noise_job(job, random_state)
        return
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    scale_exact = Fraction(scale)
    with h.lock:
        source_init(&s, h.bitgen)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            _dlap_block(&s, scale, &out[off], m, pend, scale_exact, bits)


cdef inline void add_noise(int64_t *counts, const int64_t *noise, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(m):
        counts[j] += noise[j]


cdef int dlap_add_into(int64_t *counts, Py_ssize_t n, double scale, object random_state) except -1:
    if n >= THREAD_MIN:
        return threaded_add(JOB_DLAP, counts, n, scale, random_state)
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t off, m
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    cdef int64_t[::1] noise = np.empty(max(min(n, CHUNK), 1), dtype=np.int64)
    scale_exact = Fraction(scale)
    with h.lock:
        source_init(&s, h.bitgen)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            _dlap_block(&s, scale, &noise[0], m, pend, scale_exact, bits)
            with nogil:
                add_noise(counts + off, &noise[0], m)
    return 0


cdef int dgauss_add_into(int64_t *counts, Py_ssize_t n, double sigma,
                         object random_state) except -1:
    if n >= THREAD_MIN:
        return threaded_add(JOB_DGAUSS, counts, n, sigma, random_state)
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t off, m
    cdef LockedBits bits = locked_bits(h)
    cdef GaussSampler sampler = gauss_sampler(sigma, n)
    cdef Source s
    cdef int64_t[::1] noise = np.empty(max(min(n, CHUNK), 1), dtype=np.int64)
    with h.lock:
        source_init(&s, h.bitgen)
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


def discrete_laplace_grid_into(double[::1] out, const double[::1] x, double grid, double bound,
                               double scale, random_state=None):
    """Fused release: out = (rint(clip(x, -bound, bound) / grid) + DLap(scale)) * grid.

    The same values, for the same generator state, as drawing ``noise`` with
    `discrete_laplace_into` and computing ``(np.rint(np.clip(x, -bound, bound) / grid)
    .astype(np.int64) + noise).astype(float) * grid``, in one pass through memory. The caller
    validates first: grid a power of two, bound > 0 (inf for no clamp), x finite and
    |rint(clip(x) / grid)| < 2**62 (nothing is checked here).
    """
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef LockedBits bits
    cdef Source s
    cdef int64_t[::1] noise
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    if n == 0:
        return
    if n >= THREAD_MIN:
        return threaded_release(JOB_DLAP, out, x, grid, bound, scale, random_state)
    bits = locked_bits(h)
    noise = np.empty(min(n, CHUNK), dtype=np.int64)
    scale_exact = Fraction(scale)
    with h.lock:
        source_init(&s, h.bitgen)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            _dlap_block(&s, scale, &noise[0], m, pend, scale_exact, bits)
            with nogil:
                grid_finish(&out[off], &x[off], &noise[0], m, grid, bound)


def discrete_gaussian_into(int64_t[::1] out, double sigma, random_state=None):
    """Fill `out` with exact discrete Gaussian draws N_Z(0, sigma^2) (sigma validated by the caller).
    From THREAD_MIN values on, threaded (per-block streams: the output does not depend on the
    thread count)."""
    cdef _NoiseJob job
    if out.shape[0] >= THREAD_MIN:
        job = noise_job(JOB_DGAUSS, out.shape[0], sigma, out)
        job.ints = &out[0]
        run_noise_job(job, random_state)
        return
    _gaussian_fill(out, gauss_sampler(sigma, out.shape[0]), random_state)


cdef _gaussian_fill(int64_t[::1] out, GaussSampler sampler, random_state):
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef LockedBits bits = locked_bits(h)
    cdef Source s
    with h.lock:
        source_init(&s, h.bitgen)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            sampler.block(&s, &out[off], m, pend, bits)


def discrete_gaussian_grid_into(double[::1] out, const double[::1] x, double grid, double sigma,
                                random_state=None):
    """Fused release: out = (rint(x / grid) + N_Z(0, sigma**2)) * grid (see
    `discrete_laplace_grid_into`; the same values as the unfused computation, no clamp)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t n = out.shape[0], off, m
    cdef LockedBits bits
    cdef GaussSampler sampler
    cdef Source s
    cdef int64_t[::1] noise
    cdef double inf = float("inf")
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    if n == 0:
        return
    if n >= THREAD_MIN:
        return threaded_release(JOB_DGAUSS, out, x, grid, inf, sigma, random_state)
    bits = locked_bits(h)
    noise = np.empty(min(n, CHUNK), dtype=np.int64)
    sampler = gauss_sampler(sigma, n)
    with h.lock:
        source_init(&s, h.bitgen)
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            sampler.block(&s, &noise[0], m, pend, bits)
            with nogil:
                grid_finish(&out[off], &x[off], &noise[0], m, grid, inf)


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


def snapping_into(double[::1] out, const double[::1] x, double lam, double grid, double bound,
                  random_state=None):
    """Mironov's snapping mechanism, elementwise, in sensitivity-1 units (calibrated by the caller).

    out[i] = clamp_B(round_grid(clamp_B(x[i]) + S * lam * ln(U*))) with ln correctly rounded.
    """
    cdef BitgenHandle h
    cdef Pending pend[256]
    cdef Py_ssize_t n = out.shape[0]
    cdef Source s
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    if n == 0:
        return
    if n >= THREAD_MIN:
        return threaded_release(JOB_SNAP, out, x, grid, bound, lam, random_state)
    h = bitgen_handle(random_state)
    with h.lock:
        source_init(&s, h.bitgen)
        _snap_range(&s, &x[0], lam, grid, bound, &out[0], 0, n, pend)


cdef _snap_range(Source *s, const double *x, double lam, double grid, double bound, double *out,
                 Py_ssize_t start, Py_ssize_t stop, Pending *pend):
    """Snapping on out[start:stop] from s (GIL held; the exact logarithms with it)."""
    cdef Py_ssize_t npend = 0, j
    while start < stop:
        with nogil:
            start = snap_fill(s, x, lam, grid, bound, out, start, stop, pend, &npend)
        for j in range(npend):
            log_u = _exact.log_correctly_rounded(pend[j].u)
            out[pend[j].index] = snap_finish(
                x[pend[j].index], log_u, pend[j].negative, lam, grid, bound)


# ------------------------------------------------------------------------------------------
# Planar Laplace on Z**2 (geo-indistinguishability, dpcore.local.planar_laplace): P(d)
# proportional to exp(-lam ||d||_2). Proposals are two exact discrete Laplace integers of scale s
# with s lam >= sqrt(2), accepted with probability exp(-gamma), gamma = lam ||d||_2 - ||d||_1 / s
# >= 0 (||d||_1 <= sqrt(2) ||d||_2), so accepted offsets have mass proportional to
# exp(-||d||_1 / s) exp(-gamma) = exp(-lam ||d||_2). The acceptance is accept_exp's test
# (-ln u' > gamma) on a proven enclosure of gamma (planar_gamma), finished in rational arithmetic
# (_planar_accept_exactly) on the same uniform when undecided.

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
    cdef Pending pend[256]
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
        source_init(&s, h.bitgen)
        while todo > 0:  # rounds over the slots still empty (about 1/4 are rejected per round)
            left = 0
            for off in range(0, todo, PLANAR_CHUNK):
                m = min(PLANAR_CHUNK, todo - off)
                _dlap_block(&s, scale, &prop[0], 2 * m, pend, scale_exact, bits)
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
# Test hooks: the pieces of the kernels, callable from Python.


def _force_exact_path(bint on):
    """Test hook: when on, every kernel decision goes to the exact fallback."""
    global force_exact
    force_exact = on


def _round_to_multiple(double y, double grid):
    return round_to_multiple(y, grid)


def _snap_finish(double x, double log_u, bint negative, double lam, double grid, double bound):
    return snap_finish(x, log_u, negative, lam, grid, bound)


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
        source_init(&s, h.bitgen)
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
        source_init(&s, h.bitgen)
        while done < n:
            r = table_one(&s, sampler.table, &y, &pd)
            attempts += 1
            if r < 0:
                undecided += 1
            else:
                done += r
    return attempts, undecided


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
    cdef Pending pend[256]
    cdef Source s
    cdef Py_ssize_t n = d.shape[0]
    cdef signed char[::1] accept = np.zeros(n, dtype=np.int8)
    lam_exact = Fraction(decay)
    if n == 0:
        return np.asarray(accept)
    with h.lock:
        source_init(&s, h.bitgen)
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
