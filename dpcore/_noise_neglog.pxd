# The exact decisions on -ln(u') that the noise kernels share (_noise, _noise_snapping,
# _noise_planar): the random bit source, the record of an undecided draw, and the proven
# floating-point enclosures that decide floor(-ln(u') scale) and -ln(u') > gamma for a real
# uniform u' (inline: compiled into each kernel's hot loops). A decision no bound settles is
# left pending (-1 / 0 returned, `Pending` filled) for the exact rational code in the kernels.
#
# A kernel that cimports this file calls init_brackets() at import (its own copy of the tables,
# noise_bounds.h).
from libc.math cimport fabs
from libc.float cimport DBL_MIN
from libc.stdint cimport int64_t, uint64_t

from dpcore._random cimport (
    bitgen_t, dpc_words, random_words, dpc_words_next, dpc_ustar_from, dpc_opaque, dpc_ulp,
    dpc_floor_i64, dpc_u64_as_double, dpc_double_as_u64,
)
from dpcore._crlog cimport dp_log_dd

cdef extern from "noise_bounds.h" nogil:
    const double TWO_64 "DPC_TWO_64"
    const double TWO_M32 "DPC_TWO_M32"
    const double TWO_M48 "DPC_TWO_M48"
    const double TWO_M49 "DPC_TWO_M49"
    const double TWO_M50 "DPC_TWO_M50"
    const double TWO_M52 "DPC_TWO_M52"
    const double TWO_M100 "DPC_TWO_M100"
    const double TWO_M1000 "DPC_TWO_M1000"
    double LN1P_DN "dpc_ln1p_dn"[257]
    double LN1P_UP "dpc_ln1p_up"[257]
    double LN2_DN "dpc_ln2_dn"
    double LN2_UP "dpc_ln2_up"

cdef extern from "dgauss_table.h" nogil:
    void dpc_log_bounds(double x, double *dn, double *up)

cdef enum:
    PENDING_CAPACITY = 256  # undecided draws a fill records before it stops for the exact path
    BRACKET_BITS = 8
    COARSE_MIN = 1 << 23  # see "Coarse uniforms" below

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
    bint exact  # test hook (_noise._force_exact_path): every decision to the exact path


cdef inline void source_init(Source *s, bitgen_t *bg, bint exact) noexcept nogil:
    random_words(&s.words, bg)
    s.exact = exact
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
# bounds built at import from dp_log_dd's proven enclosure (dpc_log_bounds, dgauss_table.h),
# one copy per kernel (noise_bounds.h).

cdef inline void init_brackets() noexcept nogil:
    """Fill this kernel's copy of the tables (1 + j/256 is exact; ln 1 = 0 exactly)."""
    cdef int j
    for j in range(257):
        dpc_log_bounds(1.0 + j / 256.0, &LN1P_DN[j], &LN1P_UP[j])
    LN1P_DN[0] = 0.0
    LN1P_UP[0] = 0.0
    dpc_log_bounds(2.0, &LN2_DN, &LN2_UP)


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
    if top >= COARSE_MIN and not s.exact:
        a = accept_coarse(top, g, dg)
        if a >= 0:  # nearly always; the accept / reject outcome itself is returned as data
            return a & r
    if r == 0:
        return 0
    u = dpc_ustar_from(&s.words, (top << 32) | take_half(s), &extra, &nextra)
    if u >= DBL_MIN and not s.exact:
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
