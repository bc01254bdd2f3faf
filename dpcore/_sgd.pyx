"""The per-step loop of DP-SGD for the linear models (dpcore.learn._sgd).

One call of ``lattice_gradient_sum`` draws a Poisson sample of the records (each kept
independently with probability m / 2**k, exactly), computes each sampled record's loss gradient
at the current model, clips it, rounds it to an integer lattice and adds it to an int64 sum.
Nothing here adds noise: the Python layer adds exact discrete Gaussian noise to the integer sum.

The privacy argument needs one property of this loop, and it is checked in integer arithmetic:
every record adds to the sum an integer vector v with sum_j v_j**2 <= 4**bits, whatever its
data and whatever the floating-point arithmetic did before the check (a vector that fails the
check, which the margin below makes impossible in practice, adds nothing). Adding or removing a
record therefore moves the sum by at most 2**bits in L2 (add/remove neighbours), for every
sample of the other records.
"""
from libc.math cimport exp, sqrt
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc

from dpcore._random cimport (BitgenHandle, dpc_rint, dpc_words, dpc_words_next, random_words)

cdef extern from "dpc_bits.h" nogil:
    int dpc_ctz64(uint64_t w)


cpdef enum Loss:
    LOGISTIC = 0   # log(1 + exp(-z)), z = s w.x, s = +1 for the class, -1 otherwise
    HUBER = 1      # CMS 2011's Huber-smoothed hinge of width h on the same margin
    SQUARED = 2    # (w.x - y)**2 / 2, one output
    SOFTMAX = 3    # logsumexp(W x) - (W x)_y

# Largest lattice exponent and model size: |v_j| <= 2**bits + 1, so sum_j v_j**2 stays far below
# 2**63 for k d <= 2**20 and bits <= 20.
MAX_BITS = 20
MAX_MODEL_SIZE = 2**20


cdef inline uint64_t _poisson_mask(dpc_words *src, uint64_t num, int k, int lanes) noexcept nogil:
    """64 independent Bernoulli(num / 2**k) bits (the low ``lanes`` of them used): lane i is set
    when the k-bit integer formed by bit i of k random words (most significant first) is below
    num. Bit-sliced comparison: exact, k words per 64 records at most (it stops early once every
    lane is decided)."""
    cdef uint64_t lt = 0, eq = ~(<uint64_t>0), w, keep
    cdef int b
    if k == 0:
        lt = ~(<uint64_t>0)   # rate 1
    else:
        for b in range(k - 1, -1, -1):
            w = dpc_words_next(src)
            if (num >> b) & 1:
                lt |= eq & ~w
                eq &= w
            else:
                eq &= ~w
            if eq == 0:
                break
    keep = ~(<uint64_t>0) if lanes >= 64 else ((<uint64_t>1 << lanes) - 1)
    return lt & keep


cdef inline double _huber_slope(double z, double h) noexcept nogil:
    if z < 1.0 - h:
        return -1.0
    if z <= 1.0 + h:
        return -(1.0 + h - z) / (2.0 * h)
    return 0.0


cdef inline double _logistic_slope(double z) noexcept nogil:
    # -sigmoid(-z), stable for both signs
    cdef double e
    if z >= 0.0:
        e = exp(-z)
        return -e / (1.0 + e)
    return -1.0 / (1.0 + exp(z))


cdef int _add_record(const double *x, Py_ssize_t d, double target, const double *W, Py_ssize_t k,
                     int loss, double h, double unit, double radius, int64_t limit,
                     double *coef, int64_t *v, int64_t *out) noexcept nogil:
    """Adds the clipped, rounded gradient of one record to out; returns 1 if it was dropped by
    the exact norm check."""
    cdef Py_ssize_t j, i
    cdef double s, top, total, xx = 0.0, cc = 0.0, scale, sign
    cdef int64_t sq = 0, t
    cdef int label = 0
    if loss != SQUARED:
        label = <int>target
    for i in range(d):
        xx += x[i] * x[i]
    for j in range(k):
        s = 0.0
        for i in range(d):
            s += W[j * d + i] * x[i]
        coef[j] = s
    if loss == SQUARED:
        coef[0] = coef[0] - target
    elif loss == SOFTMAX:
        top = coef[0]
        for j in range(1, k):
            if coef[j] > top:
                top = coef[j]
        total = 0.0
        for j in range(k):
            coef[j] = exp(coef[j] - top)
            total += coef[j]
        for j in range(k):
            coef[j] = coef[j] / total - (1.0 if j == label else 0.0)
    else:
        for j in range(k):
            sign = 1.0 if (label == 1 if k == 1 else label == j) else -1.0
            if loss == LOGISTIC:
                coef[j] = sign * _logistic_slope(sign * coef[j])
            else:
                coef[j] = sign * _huber_slope(sign * coef[j], h)
    for j in range(k):
        cc += coef[j] * coef[j]
    # ||g|| = sqrt(cc xx) gradient units; scaled to at most `radius` lattice units
    total = sqrt(cc * xx) * unit
    if not (total < 1e300):   # NaN or inf (a diverged model): this record adds nothing
        return 1
    scale = unit if total <= radius else unit * (radius / total)
    for j in range(k):
        s = coef[j] * scale
        for i in range(d):
            t = <int64_t>dpc_rint(s * x[i])
            v[j * d + i] = t
            sq += t * t
    if sq > limit:   # the exact check the privacy argument rests on
        return 1
    for i in range(k * d):
        out[i] += v[i]
    return 0


def lattice_gradient_sum(const double[:, ::1] X,    # IN  (n, d) rows of norm <= 1
                         const double[::1] target,  # IN  (n,) class index, or the target
                         const double[:, ::1] W,    # IN  (k, d) the current model
                         int loss,                  # IN  a Loss
                         double h,                  # IN  Huber width (HUBER only)
                         double clip,               # IN  clipping norm C, in gradient units
                         int bits,                  # IN  the lattice: C is 2**bits units
                         uint64_t rate_num,         # IN  the sampling rate is
                         int rate_bits,             # IN  rate_num / 2**rate_bits
                         BitgenHandle handle,       # IN  the generator (its lock is taken)
                         int64_t[::1] out):         # OUT (k d,) the lattice sum, overwritten
    """out = sum over a Poisson sample of the records of round(clip_C(g_i) * 2**bits / C),
    g_i the loss gradient of record i at W (k x d, flattened row-major); each added vector has
    squared norm <= 4**bits, checked exactly. Returns the number of records dropped by that
    check (0 unless the model diverged to non-finite scores): a diagnostic for tests, which the
    caller must not release."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = W.shape[0], p, base, i, lane
    cdef int lanes
    cdef uint64_t mask
    cdef dpc_words src
    cdef int64_t limit
    cdef double unit, radius
    cdef Py_ssize_t dropped = 0
    if W.shape[1] != d or target.shape[0] != n or out.shape[0] != k * d:
        raise ValueError("internal: bad shapes")
    if not (0 <= bits <= MAX_BITS) or k * d > MAX_MODEL_SIZE or not (0 <= rate_bits <= 62):
        raise ValueError("internal: lattice or model size out of range")
    if not (clip > 0.0) or rate_num == 0 or rate_num > (<uint64_t>1 << rate_bits):
        raise ValueError("internal: bad clip or rate")
    p = k * d
    limit = (<int64_t>1) << (2 * bits)
    unit = (<double>((<int64_t>1) << bits)) / clip
    # rounding moves a vector by at most sqrt(k d) / 2 units: aim that much inside the bound
    radius = <double>((<int64_t>1) << bits) - 0.5 * sqrt(<double>p) - 1.0
    if radius <= 0.0:
        raise ValueError("internal: lattice too coarse for the model size")
    cdef double *coef = <double *>malloc(k * sizeof(double))
    cdef int64_t *v = <int64_t *>malloc(p * sizeof(int64_t))
    if coef == NULL or v == NULL:
        free(coef)
        free(v)
        raise MemoryError()
    for i in range(p):
        out[i] = 0
    try:
        with handle.lock, nogil:
            random_words(&src, handle.bitgen)
            base = 0
            while base < n:
                lanes = <int>(n - base if n - base < 64 else 64)
                mask = _poisson_mask(&src, rate_num, rate_bits, lanes)
                while mask != 0:
                    lane = dpc_ctz64(mask)
                    mask &= mask - 1
                    i = base + lane
                    dropped += _add_record(&X[i, 0], d, target[i], &W[0, 0], k, loss, h, unit,
                                           radius, limit, coef, v, &out[0])
                base += 64
    finally:
        free(coef)
        free(v)
    return dropped


def poisson_masks(Py_ssize_t n, uint64_t rate_num, int rate_bits, BitgenHandle handle,
                  unsigned char[::1] out):         # OUT (n,) 1 for a kept record
    """The sampling step alone (tests): out[i] = 1 with probability rate_num / 2**rate_bits,
    independently, drawn exactly as ``lattice_gradient_sum`` draws it."""
    cdef Py_ssize_t base, i
    cdef int lanes
    cdef uint64_t mask
    cdef dpc_words src
    if out.shape[0] != n or not (0 <= rate_bits <= 62) or rate_num > (<uint64_t>1 << rate_bits):
        raise ValueError("internal: bad arguments")
    with handle.lock, nogil:
        random_words(&src, handle.bitgen)
        base = 0
        while base < n:
            lanes = <int>(n - base if n - base < 64 else 64)
            mask = _poisson_mask(&src, rate_num, rate_bits, lanes)
            for i in range(lanes):
                out[base + i] = (mask >> i) & 1
            base += 64
