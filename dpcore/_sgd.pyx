"""The per-step loop of DP-SGD for the linear models (dpcore.learn._sgd).

One call of ``lattice_gradient_sum`` draws a Poisson sample of the records (each kept
independently with probability m / 2**k, exactly: :class:`PoissonRate`), computes each sampled
record's loss gradient at the current model, clips it, rounds it to an integer lattice and adds
it to an int64 sum. Nothing here adds noise: the Python layer adds exact discrete Gaussian noise
to the integer sum.

The sample is a function of the step's 256-bit key and of the records' global indices only:
records [b 2**16, (b + 1) 2**16) are sampled from the ChaCha20 stream (key, b)
(``dpcore._random.stream_open``), so a chunk of the data (a Dask block starting at row
``offset``) draws exactly the part of the sample an in-memory call over all rows draws, and
the integer sums of the chunks add up to the in-memory sum bit for bit.

The privacy argument needs one property of this loop, and it is checked in integer arithmetic:
every record adds to the sum an integer vector v with sum_j v_j**2 <= 4**bits, whatever its
data and whatever the floating-point arithmetic did before the check (a vector that fails the
check, which the margin below makes impossible in practice, adds nothing). Adding or removing a
record therefore moves the sum by at most 2**bits in L2 (add/remove neighbours), for every
sample of the other records.
"""
from fractions import Fraction
import math

import numpy as np

from libc.math cimport exp, sqrt
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

from dpcore._random cimport (BitgenHandle, BlockStream, StreamKey, dpc_rint, dpc_words,
                             dpc_words_next, random_u64, random_words, stream_open)

cdef extern from "dpc_bits.h" nogil:
    int dpc_ctz64(uint64_t w)

cdef extern from "sgd_prefetch.h" nogil:
    void dpc_sgd_prefetch(const void *p)


cpdef enum Loss:
    LOGISTIC = 0   # log(1 + exp(-z)), z = s w.x, s = +1 for the class, -1 otherwise
    HUBER = 1      # CMS 2011's Huber-smoothed hinge of width h on the same margin
    SQUARED = 2    # (w.x - y)**2 / 2, one output
    SOFTMAX = 3    # logsumexp(W x) - (W x)_y

# Largest lattice exponent and model size: |v_j| <= 2**bits + 1, so sum_j v_j**2 stays far below
# 2**63 for k d <= 2**20 and bits <= 20.
MAX_BITS = 20
MAX_MODEL_SIZE = 2**20
cdef enum:
    # Records per random stream: the sample of records [b STREAM_BLOCK, (b + 1) STREAM_BLOCK)
    # is drawn from stream b of the step's key.
    STREAM_BLOCK = 65536
    # Geometric skipping tests 2**skip records at once for emptiness, skip <= MAX_SKIP.
    MAX_SKIP = 12
    # Words of each probability's binary expansion kept in C (the rest, needed with
    # probability 2**-128 per test, is computed exactly in Python).
    CACHED_WORDS = 2
    # Sampled rows are read this many ahead of their use (a sparse sample of a large X is
    # bound by memory latency, not by arithmetic).
    PREFETCH_AHEAD = 16

STREAM_RECORDS = STREAM_BLOCK


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


cdef class PoissonRate:
    """An exact sampler of independent Bernoulli(num / 2**bits) inclusions, by geometric
    skipping (rates up to ln(2) / 2; larger rates use the bit-sliced comparison above).

    From a position, the number G of records skipped before the next sampled one is geometric:
    P(G >= g) = x**g, x = 1 - q. Write G = S A + B with S = 2**skip (x**S about 1/2): A, the
    number of whole empty S-blocks, is geometric with P(A >= a) = (x**S)**a, and B, the first
    sampled offset inside a non-empty S-block, has P(B = b) proportional to x**b on [0, S), whose
    binary digits are independent (x**b = prod_j (x**(2**j))**b_j): digit j is 1 with
    probability r_j / (1 + r_j), r_j = x**(2**j). So A is drawn by Bernoulli(x**S) tests until
    one fails, B by ``skip`` Bernoulli tests, and the next search starts after the sampled record
    (the process is memoryless). Every probability is an exact rational (x is dyadic); a
    Bernoulli(p) test compares uniform 64-bit words with the words of p's binary expansion until
    they differ (u < p exactly): the first CACHED_WORDS words are kept here, later ones
    (probability 2**-128 per test) are computed exactly from the fraction.
    """
    cdef readonly uint64_t num
    cdef readonly int bits
    cdef readonly int skip        # -1: rate 1; 0: bit-sliced; else 2**skip records per test
    cdef readonly int cached      # words of each expansion read from `words` (tests: 0)
    cdef uint64_t words[2 * (MAX_SKIP + 1)]
    cdef object probs             # Fractions: [0, skip) digit probabilities, [skip] x**S

    def __init__(self, uint64_t num, int bits, int cached=CACHED_WORDS):
        if not (0 <= bits <= 62) or num == 0 or num > (<uint64_t>1 << bits):
            raise ValueError("internal: bad rate")
        if not (0 <= cached <= CACHED_WORDS):
            raise ValueError("internal: bad cached")
        self.num, self.bits, self.cached = num, bits, cached
        q = Fraction(int(num), 1 << int(bits))
        if q == 1:
            self.skip = -1
            self.probs = []
            return
        self.skip = max(0, min(MAX_SKIP, int(math.floor(math.log2(math.log(2.0) / float(q))))))
        x = 1 - q
        r = [x]
        for _ in range(self.skip):
            x = x * x
            r.append(x)
        self.probs = [rj / (1 + rj) for rj in r[:self.skip]] + [r[self.skip]]
        for idx in range(len(self.probs)):
            for i in range(CACHED_WORDS):
                self.words[CACHED_WORDS * idx + i] = self.expansion_word(idx, i)

    def expansion_word(self, int idx, Py_ssize_t i):
        """Word i (0 first) of the binary expansion of probability idx: floor(p 2**(64(i+1)))
        mod 2**64, exactly."""
        p = self.probs[idx]
        return ((p.numerator << (64 * (i + 1))) // p.denominator) & 0xFFFFFFFFFFFFFFFF

    def __reduce__(self):
        return (PoissonRate, (self.num, self.bits, self.cached))


cdef inline bint _bernoulli(dpc_words *src, PoissonRate rate, int idx) noexcept nogil:
    """u < p for a uniform u read word by word against p's expansion (exact)."""
    cdef uint64_t u, w
    cdef Py_ssize_t i = 0
    while True:
        if i < rate.cached:
            w = rate.words[CACHED_WORDS * idx + i]
        else:
            with gil:
                w = rate.expansion_word(idx, i)
        u = dpc_words_next(src)
        if u != w:
            return u < w
        i += 1


cdef Py_ssize_t _sample_stream(dpc_words *src, PoissonRate rate, Py_ssize_t start,
                               Py_ssize_t lo, Py_ssize_t hi, uint32_t *out) noexcept nogil:
    """The sampled records of [lo, hi) within the stream block starting at ``start`` (the
    stream is read from its start, so the sample of a record does not depend on lo), as
    offsets from lo; returns their number."""
    cdef Py_ssize_t pos = start, count = 0, i
    cdef Py_ssize_t big = (<Py_ssize_t>1) << rate.skip
    cdef int j, lanes
    cdef uint64_t mask
    if rate.skip == 0:   # large rates: 64 records per bit-sliced comparison
        while pos < hi:
            lanes = <int>(hi - pos if hi - pos < 64 else 64)
            mask = _poisson_mask(src, rate.num, rate.bits, lanes)
            while mask != 0:
                i = pos + dpc_ctz64(mask)
                mask &= mask - 1
                if i >= lo:
                    out[count] = <uint32_t>(i - lo)
                    count += 1
            pos += 64
        return count
    while True:
        while _bernoulli(src, rate, rate.skip):   # an empty block of 2**skip records
            pos += big
            if pos >= hi:
                return count
        i = pos
        for j in range(rate.skip - 1, -1, -1):
            if _bernoulli(src, rate, j):
                i += (<Py_ssize_t>1) << j
        if i >= hi:
            return count
        if i >= lo:
            out[count] = <uint32_t>(i - lo)
            count += 1
        pos = i + 1


cdef inline void _prefetch_row(const double *row, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(0, d, 8):   # one 64-byte line per 8 doubles
        dpc_sgd_prefetch(row + j)
    dpc_sgd_prefetch(row + d - 1)


cdef StreamKey _stream_key(const uint64_t[::1] key):
    cdef StreamKey k = StreamKey.__new__(StreamKey)
    cdef int i
    if key.shape[0] != 4:
        raise ValueError("internal: a step key is 4 words")
    for i in range(4):
        k.key[2 * i] = <uint32_t>key[i]
        k.key[2 * i + 1] = <uint32_t>(key[i] >> 32)
    return k


def draw_key(BitgenHandle handle):
    """A step's 256-bit key: 4 words of the caller's generator (under its lock)."""
    out = np.empty(4, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef int i
    with handle.lock:
        for i in range(4):
            o[i] = random_u64(handle.bitgen)
    return out


cdef Py_ssize_t _sample_range(PoissonRate rate, StreamKey k, Py_ssize_t b, Py_ssize_t lo,
                              Py_ssize_t hi, uint32_t *out):
    """The sampled records of [lo, hi) (inside stream block b) as offsets from lo."""
    cdef BlockStream st
    cdef dpc_words src
    cdef Py_ssize_t i, count
    if rate is None or rate.skip < 0:
        for i in range(hi - lo):
            out[i] = <uint32_t>i
        return hi - lo
    stream_open(&st, k, <uint64_t>b)
    random_words(&src, &st.bitgen)
    with nogil:
        count = _sample_stream(&src, rate, b * STREAM_BLOCK, lo, hi, out)
    return count


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
                     int positive, double *coef, int64_t *v, int64_t *out) noexcept nogil:
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
            sign = 1.0 if (label == positive if k == 1 else label == j) else -1.0
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
                         PoissonRate rate,          # IN  the sampling rate (None: every record)
                         const uint64_t[::1] key,   # IN  the step's key (4 words; rate only)
                         Py_ssize_t offset,         # IN  global index of row 0
                         int positive,              # IN  k = 1: the class index scored +1
                         int64_t[::1] out):         # OUT (k d,) the lattice sum, overwritten
    """out = sum over a Poisson sample of the records of round(clip_C(g_i) * 2**bits / C),
    g_i the loss gradient of record i at W (k x d, flattened row-major); each added vector has
    squared norm <= 4**bits, checked exactly. Record i of X is record offset + i of the data;
    its inclusion is drawn from the step's stream of its stream block (see the module
    docstring). Returns the number of records dropped by the norm check (0 unless the model
    diverged to non-finite scores): a diagnostic for tests, which the caller must not release."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = W.shape[0], p, b, lo, hi, c, m, i
    cdef int64_t limit
    cdef double unit, radius
    cdef Py_ssize_t dropped = 0
    cdef StreamKey skey = None
    if W.shape[1] != d or target.shape[0] != n or out.shape[0] != k * d:
        raise ValueError("internal: bad shapes")
    if not (0 <= bits <= MAX_BITS) or k * d > MAX_MODEL_SIZE or offset < 0:
        raise ValueError("internal: lattice, model size or offset out of range")
    if not (clip > 0.0):
        raise ValueError("internal: bad clip")
    if rate is not None and rate.skip >= 0:
        skey = _stream_key(key)
    p = k * d
    limit = (<int64_t>1) << (2 * bits)
    unit = (<double>((<int64_t>1) << bits)) / clip
    # rounding moves a vector by at most sqrt(k d) / 2 units: aim that much inside the bound
    radius = <double>((<int64_t>1) << bits) - 0.5 * sqrt(<double>p) - 1.0
    if radius <= 0.0:
        raise ValueError("internal: lattice too coarse for the model size")
    cdef double *coef = <double *>malloc(k * sizeof(double))
    cdef int64_t *v = <int64_t *>malloc(p * sizeof(int64_t))
    cdef uint32_t *picked = <uint32_t *>malloc(STREAM_BLOCK * sizeof(uint32_t))
    if coef == NULL or v == NULL or picked == NULL:
        free(coef)
        free(v)
        free(picked)
        raise MemoryError()
    for i in range(p):
        out[i] = 0
    try:
        b = offset // STREAM_BLOCK
        while n > 0 and b * STREAM_BLOCK < offset + n:
            lo = max(offset, b * STREAM_BLOCK)
            hi = min(offset + n, (b + 1) * STREAM_BLOCK)
            m = _sample_range(rate, skey, b, lo, hi, picked)
            with nogil:
                for c in range(m):
                    if c + PREFETCH_AHEAD < m:
                        i = lo - offset + picked[c + PREFETCH_AHEAD]
                        _prefetch_row(&X[i, 0], d)
                        dpc_sgd_prefetch(&target[i])
                    i = lo - offset + picked[c]
                    dropped += _add_record(&X[i, 0], d, target[i], &W[0, 0], k, loss, h, unit,
                                           radius, limit, positive, coef, v, &out[0])
            b += 1
    finally:
        free(coef)
        free(v)
        free(picked)
    return dropped


def poisson_masks(Py_ssize_t n, PoissonRate rate, const uint64_t[::1] key, Py_ssize_t offset,
                  unsigned char[::1] out):         # OUT (n,) 1 for a kept record
    """The sampling step alone (tests): out[i] = 1 when record offset + i is in the step's
    sample, drawn exactly as ``lattice_gradient_sum`` draws it."""
    cdef Py_ssize_t b, lo, hi, m, c
    cdef StreamKey skey = _stream_key(key)
    if out.shape[0] != n or offset < 0:
        raise ValueError("internal: bad arguments")
    cdef uint32_t *picked = <uint32_t *>malloc(STREAM_BLOCK * sizeof(uint32_t))
    if picked == NULL:
        raise MemoryError()
    try:
        out[:] = 0
        b = offset // STREAM_BLOCK
        while n > 0 and b * STREAM_BLOCK < offset + n:
            lo = max(offset, b * STREAM_BLOCK)
            hi = min(offset + n, (b + 1) * STREAM_BLOCK)
            m = _sample_range(rate, skey, b, lo, hi, picked)
            for c in range(m):
                out[lo - offset + picked[c]] = 1
            b += 1
    finally:
        free(picked)
