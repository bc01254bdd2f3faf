# cython: language_level=3
"""Noise kernel: snapping Laplace (Mironov 2012), exact discrete Laplace and discrete Gaussian.

Every decision that defines the output law is exact. The fast path takes a decision in
double-double arithmetic only when a proven error bound shows which side it falls on; the rare
undecided draws are recorded (`Pending`) and finished with the GIL by exact rational code in
`dpcore._exact`, using the same uniform refined with fresh bits, so nothing is redrawn and the law
stays exact. Draws happen under the generator's lock; the order of draws is fixed, so a seed
reproduces the output.

Not constant-time: loop lengths depend on the values drawn (ALGORITHMS 0.3(4)).
"""
from fractions import Fraction
import math

import numpy as np

from libc.math cimport floor, fabs, nextafter, ldexp
from libc.float cimport DBL_MIN
from libc.stdint cimport int64_t, uint64_t

from dpcore._random cimport (
    BitgenHandle, bitgen_handle, bitgen_t, random_u64, random_ustar,
)
from dpcore._crlog cimport dp_log_dd, dp_log_cr_fast

from dpcore import _exact

MAX_DLAP_SCALE = 2.0**44
MAX_DGAUSS_SIGMA = 2.0**40

# Above this scale, U*'s cell (2**-52 relative) is too coarse to decide floor(E * scale) often,
# so the uniform is refined with 64 more bits.
cdef double REFINE_SCALE = 1048576.0  # 2**20
cdef double TWO_M64 = 5.421010862427522e-20  # 2**-64
cdef double TWO_M50 = 8.881784197001252e-16  # 2**-50
cdef double TWO_M100 = 7.888609052210118e-31  # 2**-100
cdef Py_ssize_t PENDING_CAPACITY = 256
# Test hook: send every decision to the exact path (see _force_exact_path).
cdef bint force_exact = False

cdef enum PendingKind:
    DLAP_MAGNITUDE = 0      # floor(-ln(u) * scale) undecided
    DGAUSS_PROPOSAL = 1     # the discrete Laplace proposal of the discrete Gaussian undecided
    DGAUSS_ACCEPT = 2       # the acceptance test of the discrete Gaussian undecided
    SNAP_LOG = 3            # the correctly rounded log undecided


cdef struct Pending:
    Py_ssize_t index
    int kind
    int negative
    double u           # U* value (its real cell is [u, nextafter(u, 1)))
    uint64_t v         # refinement bits when refined
    int refined
    int64_t y          # proposal value (DGAUSS_ACCEPT)


cdef struct BitPool:
    uint64_t bits
    int left


cdef inline int take_bit(bitgen_t *bg, BitPool *pool) noexcept nogil:
    if pool.left == 0:
        pool.bits = random_u64(bg)
        pool.left = 64
    pool.left -= 1
    cdef int b = <int>(pool.bits & 1)
    pool.bits >>= 1
    return b


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


cdef inline int dlap_magnitude(bitgen_t *bg, double scale, int64_t *y, Pending *pd) noexcept nogil:
    """floor(E * scale) with E = -ln(u), u a real uniform on (0, 1): Geometric(1 - exp(-1/scale)).

    Returns 1 and sets y when decided; returns 0 and fills pd (u, v, refined) otherwise.
    """
    cdef double u = random_ustar(bg)
    cdef double w, hi, lo, err, sc, half, ph, pl, rest, a, f, r, frac, H, kl
    cdef uint64_t v = 0
    cdef int refine = scale > REFINE_SCALE
    pd.u = u
    pd.refined = refine
    if refine:
        v = random_u64(bg)
    pd.v = v
    if u < DBL_MIN or force_exact:
        return 0  # subnormal cells are wide; probability 2**-1022, leave it to the exact path
    w = nextafter(u, 2.0) - u  # the real uniform lies in [u, u + w)
    dp_log_dd(u, &hi, &lo, &err)
    # ln(u') - ln(u) over the (refined) cell lies in [sc - half, sc + half].
    if refine:
        # u' in [u + w v 2^-64, u + w (v+1) 2^-64); ln(1 + t) in [t - t^2/2, t] for t >= 0.
        a = (w / u) * (<double>v * TWO_M64)
        kl = (w / u) * TWO_M64
        sc = a
        half = kl + a * a + TWO_M50 * a
    else:
        sc = 0.0
        half = w / u
    # E = -(hi + lo + sc) +- (half + err); z = E * scale = -(ph + pl + rest).
    two_prod(hi, scale, &ph, &pl)
    rest = (lo + sc) * scale
    a = -ph
    f = floor(a)
    r = -(pl + rest)
    frac = (a - f) + r
    H = (half + err) * scale * (1.0 + TWO_M50) + fabs(rest) * TWO_M50 + fabs(r) * TWO_M50 \
        + TWO_M50 * (fabs(frac) + 1.0) + TWO_M100
    kl = floor(frac - H)
    if kl != floor(frac + H):
        return 0
    y[0] = <int64_t>(f + kl)
    return 1


cdef inline int dlap_one(bitgen_t *bg, double scale, BitPool *pool, int64_t *y, Pending *pd) noexcept nogil:
    """One attempt at a discrete Laplace draw: 1 = y set, 0 = rejected (-0), -1 = pending."""
    cdef int64_t m = 0
    cdef int negative = take_bit(bg, pool)
    pd.negative = negative
    if not dlap_magnitude(bg, scale, &m, pd):
        return -1
    if negative and m == 0:
        return 0
    y[0] = -m if negative else m
    return 1


cdef Py_ssize_t dlap_fill(bitgen_t *bg, double scale, int64_t[::1] out, Py_ssize_t start,
                          Py_ssize_t stop, Pending *pend, Py_ssize_t *npend) noexcept nogil:
    cdef Py_ssize_t i = start
    cdef int r
    cdef int64_t y = 0
    cdef BitPool pool
    pool.left = 0
    npend[0] = 0
    while i < stop:
        r = dlap_one(bg, scale, &pool, &y, &pend[npend[0]])
        if r == 1:
            out[i] = y
            i += 1
        elif r == -1:
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
    double t         # floor(sigma) + 1, exact
    double c         # s2 / t, rounded


cdef inline int dgauss_one(bitgen_t *bg, DGaussParams *p, BitPool *pool, int64_t *y,
                           Pending *pd) noexcept nogil:
    """One attempt (CKS Algorithm 3): 1 = y set, 0 = rejected, -1 = pending."""
    cdef int64_t prop = 0
    cdef int r = dlap_one(bg, p.t, pool, &prop, pd)
    cdef double ay, a, g, ea, dg, u, w, hi, lo, err, e_mid, slack
    if r == 0:
        return 0
    if r == -1:
        pd.kind = DGAUSS_PROPOSAL
        return -1
    # Accept with probability exp(-g), g = (|y| - sigma^2/t)^2 / (2 sigma^2): accept iff E' > g
    # with E' = -ln(u') for a fresh real uniform u'.
    ay = fabs(<double>prop)
    a = ay - p.c
    g = (a * a) / (2.0 * p.s2)
    # Proven bound on |g - g_exact| from the roundings of s2, c, a, a*a and the division
    # (each relative 2**-53), with a factor >= 4 to spare.
    ea = TWO_M50 * (p.c + fabs(a))
    dg = TWO_M50 * 2.0 * g + ea * (2.0 * fabs(a) + ea) / p.s2 + TWO_M100
    u = random_ustar(bg)
    pd.u = u
    pd.y = prop
    pd.refined = 0
    pd.v = 0
    if u < DBL_MIN or force_exact:
        pd.kind = DGAUSS_ACCEPT
        return -1
    w = nextafter(u, 2.0) - u
    dp_log_dd(u, &hi, &lo, &err)
    e_mid = -(hi + lo)
    slack = TWO_M50 * (fabs(hi) + 1.0) + err
    # E' over the cell [u, u + w): in [e_mid - w/u - slack, e_mid + slack]
    if e_mid - w / u - slack > g + dg:
        y[0] = prop
        return 1
    if e_mid + slack < g - dg:
        return 0
    pd.kind = DGAUSS_ACCEPT
    return -1


cdef Py_ssize_t dgauss_fill(bitgen_t *bg, DGaussParams *p, int64_t[::1] out, Py_ssize_t start,
                            Py_ssize_t stop, Pending *pend, Py_ssize_t *npend) noexcept nogil:
    cdef Py_ssize_t i = start
    cdef int r
    cdef int64_t y = 0
    cdef BitPool pool
    pool.left = 0
    npend[0] = 0
    while i < stop:
        r = dgauss_one(bg, p, &pool, &y, &pend[npend[0]])
        if r == 1:
            out[i] = y
            i += 1
        elif r == -1:
            pend[npend[0]].index = i
            npend[0] += 1
            i += 1
            if npend[0] == PENDING_CAPACITY:
                break
    return i


cdef inline double round_to_multiple(double y, double grid) noexcept nogil:
    """The multiple of the power of two `grid` nearest to y, ties towards +infinity (exact)."""
    cdef double q = y / grid  # exact: grid is a power of two
    cdef double k, frac
    if fabs(q) >= 4503599627370496.0:  # 2**52: already a multiple
        return y
    k = floor(q)
    frac = q - k  # exact for |q| < 2**52
    if frac >= 0.5:
        k += 1.0
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
    if negative:
        z = -z
    y = round_to_multiple(x + z, grid)
    if y > bound:
        return bound
    if y < -bound:
        return -bound
    return y


cdef Py_ssize_t snap_fill(bitgen_t *bg, const double[::1] x, double lam, double grid, double bound,
                          double[::1] out, Py_ssize_t start, Pending *pend,
                          Py_ssize_t *npend) noexcept nogil:
    cdef Py_ssize_t i = start, n = out.shape[0]
    cdef double u, log_u
    cdef int negative
    cdef BitPool pool
    pool.left = 0
    npend[0] = 0
    while i < n:
        u = random_ustar(bg)
        negative = take_bit(bg, &pool)
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


cdef class _LockedBits:
    """Callable drawing raw 64-bit words while the caller already holds the generator's lock."""
    cdef bitgen_t *bg

    def __call__(self):
        return random_u64(self.bg)

    def ustar(self):
        return random_ustar(self.bg)


cdef _LockedBits _locked_bits(BitgenHandle h):
    cdef _LockedBits bits = _LockedBits.__new__(_LockedBits)
    bits.bg = h.bitgen
    return bits


cdef object _cell(Pending *pd):
    """The exact cell [lo, hi) of the real uniform behind a pending draw, as Fractions."""
    u = Fraction(pd.u)
    w = Fraction(nextafter(pd.u, 2.0)) - u
    if pd.refined:
        w = w / 2**64
        u = u + w * pd.v
    return u, u + w


cdef object _exact_magnitude(Pending *pd, scale, _LockedBits bits):
    lo, hi = _cell(pd)
    return _exact.floor_neglog_scaled(lo, hi, scale, bits)


cdef object _dgauss_gamma(y, sigma2, t):
    return (abs(Fraction(y)) - sigma2 / t) ** 2 / (2 * sigma2)


cdef bint _accept_exactly(double u, y, sigma2, t, _LockedBits bits):
    return _exact.uniform_below_exp(u, nextafter(u, 2.0), _dgauss_gamma(y, sigma2, t), bits)


def discrete_laplace_into(int64_t[::1] out, double scale, random_state=None):
    """Fill `out` with exact discrete Laplace draws of the given scale (validated by the caller)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t npend = 0, start = 0, n = out.shape[0], j, idx
    cdef _LockedBits bits = _locked_bits(h)
    scale_exact = Fraction(scale)
    with h.lock:
        while start < n:
            with nogil:
                start = dlap_fill(h.bitgen, scale, out, start, n, pend, &npend)
            redo = []
            for j in range(npend):
                m = _exact_magnitude(&pend[j], scale_exact, bits)
                if pend[j].negative and m == 0:
                    redo.append(pend[j].index)
                else:
                    out[pend[j].index] = -m if pend[j].negative else m
            while redo:
                idx = redo.pop()
                with nogil:
                    dlap_fill(h.bitgen, scale, out, idx, idx + 1, pend, &npend)
                if npend:
                    m = _exact_magnitude(&pend[0], scale_exact, bits)
                    if pend[0].negative and m == 0:
                        redo.append(idx)
                    else:
                        out[idx] = -m if pend[0].negative else m


def discrete_gaussian_into(int64_t[::1] out, double sigma, random_state=None):
    """Fill `out` with exact discrete Gaussian draws N_Z(0, sigma^2) (sigma validated by the caller)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t npend = 0, start = 0, n = out.shape[0], j, idx
    cdef _LockedBits bits = _locked_bits(h)
    cdef DGaussParams p
    p.sigma = sigma
    p.s2 = sigma * sigma
    p.t = floor(sigma) + 1.0
    p.c = p.s2 / p.t
    sigma2 = Fraction(sigma) ** 2
    t = int(p.t)
    with h.lock:
        while start < n:
            with nogil:
                start = dgauss_fill(h.bitgen, &p, out, start, n, pend, &npend)
            queue = [_pending_copy(&pend[j]) for j in range(npend)]
            while queue:
                item = queue.pop()
                value = _finish_dgauss(item, sigma2, t, bits)
                if value is None:  # rejected: draw this index afresh
                    idx = item["index"]
                    with nogil:
                        dgauss_fill(h.bitgen, &p, out, idx, idx + 1, pend, &npend)
                    if npend:
                        queue.append(_pending_copy(&pend[0]))
                else:
                    out[item["index"]] = value


cdef dict _pending_copy(Pending *pd):
    return {"index": pd.index, "kind": pd.kind, "negative": pd.negative, "u": pd.u,
            "v": pd.v, "refined": pd.refined, "y": pd.y}


cdef object _finish_dgauss(dict item, sigma2, t, _LockedBits bits):
    """Finish one pending discrete Gaussian attempt exactly; None if it is rejected."""
    cdef Pending pd
    cdef double u2
    if item["kind"] == DGAUSS_ACCEPT:
        y = item["y"]
        u2 = item["u"]
    else:
        pd.u = item["u"]
        pd.v = item["v"]
        pd.refined = item["refined"]
        m = _exact_magnitude(&pd, Fraction(t), bits)
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
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[256]
    cdef Py_ssize_t npend = 0, start = 0, n = out.shape[0], j
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    with h.lock:
        while start < n:
            with nogil:
                start = snap_fill(h.bitgen, x, lam, grid, bound, out, start, pend, &npend)
            for j in range(npend):
                log_u = _exact.log_correctly_rounded(pend[j].u)
                out[pend[j].index] = snap_finish(
                    x[pend[j].index], log_u, pend[j].negative, lam, grid, bound)


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
    with h.lock, nogil:
        for i in range(n):
            if dlap_magnitude(h.bitgen, scale, &y, &pd):
                vals[i] = y
                ok[i] = 1
    return np.asarray(vals), np.asarray(ok).astype(bool)
