# cython: language_level=3
"""Local differential privacy kernel: randomized response, unary encoding, local hashing and
Duchi et al.'s one-bit mean, vectorised over the records.

Every decision is a comparison of random integers: "keep the truth" is ``w < threshold`` for a
uniform 64-bit integer w (read lazily, a byte at a time: `below`) and an integer threshold
computed exactly by the caller (so the probability is exactly threshold / 2**64), uniform
choices among m values use Lemire's multiply-and-reject (exactly uniform), and Duchi's
Bernoulli((1 + x) / 2) compares a
full-precision uniform U* (Mironov) with the double |x|, which is exact because |x| is a double
(see `duchi_into`). No probability is ever rounded inside the kernel.

Words are read inline from the generator under its lock (`random_words`), in a fixed order, so
a seed reproduces the output. From THREAD_MIN records on, a call draws one 256-bit key from the
caller's generator and the records of block b (2**16 records) read ChaCha20 stream b of that key
(_random.pxd), so the output does not depend on the thread count (`dpcore.set_num_threads`);
smaller calls read the caller's generator directly. `olh_support` (no randomness) splits the
candidates over the threads from SUPPORT_THREAD_MIN (record, candidate) pairs. The per-record work
does not depend on whether the truth is kept
(the replacement value is always drawn); rejection loops (Lemire, U*) run a data-independent
number of times in law, but are not constant-time (ALGORITHMS 0.3(4)).

The caller (dpcore.local) validates everything: values in range, k >= 2, thresholds and shapes.
"""
from libc.math cimport fabs
from libc.stdint cimport int8_t, int64_t, uint8_t, uint64_t

from dpcore._random cimport (
    BitgenHandle, bitgen_handle, dpc_words, dpc_words_next, dpc_ustar, random_words, BlockStream,
    StreamKey, stream_key, stream_open,
)
from dpcore._dpcore_threads import get_limit, run_blocks


cdef extern from "chacha20.h" nogil:
    uint64_t dpc_mul64(uint64_t a, uint64_t b, uint64_t *lo)


cdef inline uint64_t bounded(dpc_words *src, uint64_t n) noexcept nogil:
    """Uniform integer in {0, ..., n - 1} (n >= 1; n = 1 reads no word).

    x * n = hi 2**64 + lo for a uniform 64-bit x: every hi is hit by floor(2**64 / n) or one
    more values of x; rejecting lo < 2**64 mod n leaves exactly floor(2**64 / n) for each hi.
    """
    cdef uint64_t x, hi, lo, reject
    if n <= 1:
        return 0
    x = dpc_words_next(src)
    hi = dpc_mul64(x, n, &lo)
    if lo < n:  # only then can lo fall below 2**64 mod n (< n); skips the division usually
        reject = (0 - n) % n
        while lo < reject:
            x = dpc_words_next(src)
            hi = dpc_mul64(x, n, &lo)
    return hi


# A Bernoulli(t / 2**64) decision read byte by byte. A uniform 64-bit integer w is compared
# with t most significant byte first; the first byte that differs decides, and w < t is false
# when all eight agree (w == t). That is exactly the event w < t for a uniform w, so the
# probability is exactly t / 2**64, but a decision reads 1 + 1/255 bytes on average instead of
# 8 (the bytes of w not read are never drawn). The bytes come from a pool of words (low byte
# first); which bytes are read depends on the draws only, never on the user's value.

cdef struct BytePool:
    uint64_t word
    int left


cdef inline uint64_t next_byte(BytePool *pool, dpc_words *src) noexcept nogil:
    cdef uint64_t b
    if pool.left == 0:
        pool.word = dpc_words_next(src)
        pool.left = 8
    b = pool.word & 0xff
    pool.word >>= 8
    pool.left -= 1
    return b


cdef inline uint64_t below(BytePool *pool, dpc_words *src, uint64_t t) noexcept nogil:
    """1 with probability exactly t / 2**64 (uniform w < t, decided lazily), else 0."""
    cdef int shift = 56
    cdef uint64_t b, tb
    while shift >= 0:
        b = next_byte(pool, src)
        tb = (t >> shift) & 0xff
        if b != tb:
            return b < tb
        shift -= 8
    return 0


# ------------------------------------------------------------------------------------------
# One call of a randomizer over records [lo, lo + count): on the caller's generator (small
# calls), or per block of THREAD_BLOCK records on the block's stream (run_blocks).

cdef enum:
    THREAD_BLOCK = 1 << 16
THREAD_MIN = THREAD_BLOCK

cdef enum Randomizer:
    GRR = 0
    BINARY_RR = 1
    UNARY = 2
    OLH = 3
    DUCHI = 4


cdef class _Records:
    """The arrays and parameters of one randomizer call (pointers into `keep`)."""
    cdef int kind
    cdef Py_ssize_t n, width  # width: k (unary) or m (OLH)
    cdef const int64_t *values
    cdef const uint8_t *bits
    cdef const double *x
    cdef int64_t *out64
    cdef int64_t *seeds
    cdef uint8_t *out8
    cdef int8_t *signs
    cdef uint64_t p1, p2  # thresholds, or keep_num / keep_den (Duchi)
    cdef uint64_t k       # k (GRR), g (OLH)
    cdef StreamKey key
    cdef object keep

    cdef void fill(self, dpc_words *src, Py_ssize_t lo, Py_ssize_t count) noexcept nogil:
        if self.kind == GRR:
            grr_fill(src, count, self.values + lo, self.k, self.p1, self.out64 + lo)
        elif self.kind == BINARY_RR:
            binary_rr_fill(src, count, self.bits + lo, self.p1, self.out8 + lo)
        elif self.kind == UNARY:
            unary_fill(src, count, self.width, self.values + lo, self.p1, self.p2,
                       self.out8 + lo * self.width)
        elif self.kind == OLH:
            olh_fill(src, count, self.width, self.values + lo, self.k, self.p1,
                     self.seeds + lo * (self.width + 1), self.out64 + lo)
        else:
            duchi_fill(src, count, self.x + lo, self.p1, self.p2, self.signs + lo)

    def __call__(self, Py_ssize_t block):
        cdef BlockStream st
        cdef dpc_words src
        cdef Py_ssize_t lo = block * THREAD_BLOCK
        stream_open(&st, self.key, <uint64_t>block)
        random_words(&src, &st.bitgen)
        with nogil:
            self.fill(&src, lo, min(<Py_ssize_t>THREAD_BLOCK, self.n - lo))

    cdef run(self, random_state):
        cdef BitgenHandle h = bitgen_handle(random_state)
        cdef dpc_words src
        if self.n >= THREAD_MIN:
            self.key = stream_key(h)
            run_blocks(self, (self.n + THREAD_BLOCK - 1) // THREAD_BLOCK)
            return
        with h.lock, nogil:
            random_words(&src, h.bitgen)
            self.fill(&src, 0, self.n)


cdef _Records records(int kind, Py_ssize_t n, uint64_t p1, uint64_t p2, uint64_t k, keep):
    cdef _Records r = _Records.__new__(_Records)
    r.kind, r.n, r.p1, r.p2, r.k, r.keep = kind, n, p1, p2, k, keep
    return r


# ------------------------------------------------------------------------------------------
# Generalized (k-ary) randomized response

cdef void grr_fill(dpc_words *src, Py_ssize_t n, const int64_t *values,  # IN
                   uint64_t k, uint64_t threshold,
                   int64_t *out) noexcept nogil:  # OUT
    """out[i] = values[i] with probability threshold / 2**64, else a uniform other value.

    The other value is r + (r >= v) for r uniform on {0, ..., k - 2}: a bijection onto
    {0, ..., k - 1} minus v, so each other value has probability (1 - threshold / 2**64) / (k - 1).
    r is drawn whether or not it is used (k = 2 reads no word for it).
    """
    cdef Py_ssize_t i
    cdef uint64_t r, v, keep
    cdef BytePool pool
    pool.left = 0
    for i in range(n):
        v = <uint64_t>values[i]
        keep = 0 - below(&pool, src, threshold)  # all ones or zero: a select without a branch
        r = bounded(src, k - 1)
        r += (r >= v)
        out[i] = <int64_t>(r ^ ((r ^ v) & keep))


def grr_into(int64_t[::1] out, const int64_t[::1] values, uint64_t k, uint64_t threshold,
             random_state=None):
    """Fill ``out`` with k-ary randomized response of ``values`` (each in [0, k), k >= 2):
    P(out = v) = threshold / 2**64, P(out = j) = (1 - threshold / 2**64) / (k - 1) for j != v."""
    cdef Py_ssize_t n = out.shape[0]
    cdef _Records r
    if values.shape[0] != n:
        raise ValueError("values and out must have the same length")
    if n == 0:
        bitgen_handle(random_state)
        return
    r = records(GRR, n, threshold, 0, k, (out, values))
    r.values, r.out64 = &values[0], &out[0]
    r.run(random_state)


def binary_rr_u8_into(uint8_t[::1] out, const uint8_t[::1] bits, uint64_t threshold, random_state=None):
    """Binary randomized response on 0/1 bytes (booleans): out = bit with probability
    threshold / 2**64, else 1 - bit. The same draws, in the same order, as `grr_into` with k = 2."""
    cdef Py_ssize_t n = out.shape[0]
    cdef _Records r
    if bits.shape[0] != n:
        raise ValueError("bits and out must have the same length")
    if n == 0:
        bitgen_handle(random_state)
        return
    r = records(BINARY_RR, n, threshold, 0, 2, (out, bits))
    r.bits, r.out8 = &bits[0], &out[0]
    r.run(random_state)


cdef void binary_rr_fill(dpc_words *src, Py_ssize_t n, const uint8_t *bits, uint64_t threshold,
                         uint8_t *out) noexcept nogil:
    cdef Py_ssize_t i
    cdef BytePool pool
    pool.left = 0
    for i in range(n):
        out[i] = bits[i] ^ <uint8_t>(1 - below(&pool, src, threshold))


# ------------------------------------------------------------------------------------------
# Unary encoding (RAPPOR-style bit vectors)

cdef void unary_fill(dpc_words *src, Py_ssize_t n, Py_ssize_t k, const int64_t *values,  # IN
                     uint64_t t_one, uint64_t t_zero,
                     uint8_t *out) noexcept nogil:  # OUT
    """Row i of out (k bits): bit j is 1 with probability t_one / 2**64 if j == values[i],
    t_zero / 2**64 otherwise, all independent (one lazy byte-wise decision per bit)."""
    cdef Py_ssize_t i, j
    cdef int64_t v
    cdef uint64_t t
    cdef uint8_t *row
    cdef BytePool pool
    pool.left = 0
    for i in range(n):
        v = values[i]
        row = out + i * k
        for j in range(k):
            t = t_one if j == v else t_zero
            row[j] = <uint8_t>below(&pool, src, t)


def unary_into(uint8_t[:, ::1] out, const int64_t[::1] values, uint64_t t_one, uint64_t t_zero,
               random_state=None):
    """Fill the n x k array ``out`` with unary-encoding reports of ``values`` (each in [0, k))."""
    cdef Py_ssize_t n = out.shape[0], k = out.shape[1]
    cdef _Records r
    if values.shape[0] != n:
        raise ValueError("values and out must have the same length")
    if n == 0 or k == 0:
        bitgen_handle(random_state)
        return
    r = records(UNARY, n, t_one, t_zero, 0, (out, values))
    r.width, r.values, r.out8 = k, &values[0], &out[0, 0]
    r.run(random_state)


# ------------------------------------------------------------------------------------------
# Optimized local hashing with an exactly pairwise-independent family
#
# x in [0, k) is written in base g (g prime) as m digits d_0..d_{m-1}; the hash with seed
# (a, b) in Z_g^m x Z_g is h(x) = (b + sum_i a_i d_i) mod g. For x != x' some digit difference
# is a unit of the field Z_g, so (h(x), h(x')) is uniform on Z_g^2 for a uniform seed.

cdef inline uint64_t hash_digits(const int64_t *a, uint64_t b, const int64_t *digits, Py_ssize_t m,
                                 uint64_t g) noexcept nogil:
    cdef Py_ssize_t t
    cdef uint64_t acc = b
    for t in range(m):
        acc = (acc + <uint64_t>a[t] * <uint64_t>digits[t]) % g  # < 2**64: a, d, acc < g <= 2**31
    return acc


cdef void olh_fill(dpc_words *src, Py_ssize_t n, Py_ssize_t m, const int64_t *values,  # IN
                   uint64_t g, uint64_t threshold,
                   int64_t *seeds, int64_t *out) noexcept nogil:  # OUT (seeds: n x (m + 1))
    """Per record: a uniform seed (a_0..a_{m-1}, b), the hash y = h(v), then randomized response
    on Z_g: keep y with probability threshold / 2**64, else a uniform other element."""
    cdef Py_ssize_t i, t
    cdef uint64_t v, y, r, acc, keep
    cdef int64_t *seed
    cdef BytePool pool
    pool.left = 0
    for i in range(n):
        v = <uint64_t>values[i]
        seed = seeds + i * (m + 1)
        acc = 0
        for t in range(m + 1):
            seed[t] = <int64_t>bounded(src, g)
        acc = <uint64_t>seed[m]
        for t in range(m):  # digits of v, least significant first
            acc = (acc + <uint64_t>seed[t] * (v % g)) % g
            v = v // g
        y = acc
        keep = 0 - below(&pool, src, threshold)
        r = bounded(src, g - 1)
        r += (r >= y)
        out[i] = <int64_t>(r ^ ((r ^ y) & keep))


def olh_into(int64_t[:, ::1] seeds, int64_t[::1] out, const int64_t[::1] values, uint64_t g,
             uint64_t threshold, random_state=None):
    """Fill ``seeds`` (n x (m + 1): a_0..a_{m-1}, b) and ``out`` (the reported hash values)."""
    cdef Py_ssize_t n = out.shape[0], m = seeds.shape[1] - 1
    cdef _Records r
    if values.shape[0] != n or seeds.shape[0] != n or m < 1:
        raise ValueError("seeds, values and out must have n rows (seeds m + 1 >= 2 columns)")
    if n == 0:
        bitgen_handle(random_state)
        return
    r = records(OLH, n, threshold, 0, g, (seeds, out, values))
    r.width, r.values, r.seeds, r.out64 = m, &values[0], &seeds[0, 0], &out[0]
    r.run(random_state)


def olh_support(int64_t[::1] counts, const int64_t[:, ::1] seeds, const int64_t[::1] reports,
                const int64_t[:, ::1] digits, uint64_t g):
    """counts[j] += number of records i with h_i(j) == reports[i] (digits: k x m, base g)."""
    cdef Py_ssize_t n = reports.shape[0], k = counts.shape[0], m = digits.shape[1], parts
    if seeds.shape[0] != n or seeds.shape[1] != m + 1 or digits.shape[0] != k:
        raise ValueError("shapes of seeds, reports, digits and counts do not match")
    if n == 0 or k == 0:
        return
    if n * k >= SUPPORT_THREAD_MIN and k >= 2:  # candidates split into parts (exact counts)
        parts = min(get_limit(), k)
        run_blocks(_SupportParts(counts, seeds, reports, digits, g, parts), parts)
        return
    support_range(counts, seeds, reports, digits, g, 0, k)


# olh_support runs on several threads from this many (record, candidate) pairs: candidates are
# split into contiguous parts, each counted over all records (disjoint counts: no randomness,
# the same integers for any thread count).
SUPPORT_THREAD_MIN = 1 << 22


cdef void support_range(int64_t[::1] counts, const int64_t[:, ::1] seeds,
                        const int64_t[::1] reports, const int64_t[:, ::1] digits, uint64_t g,
                        Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """counts[j] += #{i: h_i(j) == reports[i]} for lo <= j < hi."""
    cdef Py_ssize_t i, j, m = digits.shape[1]
    cdef uint64_t y, b
    for i in range(reports.shape[0]):
        y = <uint64_t>reports[i]
        b = <uint64_t>seeds[i, m]
        for j in range(lo, hi):
            counts[j] += hash_digits(&seeds[i, 0], b, &digits[j, 0], m, g) == y


cdef class _SupportParts:
    cdef int64_t[::1] counts
    cdef const int64_t[:, ::1] seeds
    cdef const int64_t[::1] reports
    cdef const int64_t[:, ::1] digits
    cdef uint64_t g
    cdef Py_ssize_t parts

    def __cinit__(self, int64_t[::1] counts, const int64_t[:, ::1] seeds,
                  const int64_t[::1] reports, const int64_t[:, ::1] digits, uint64_t g,
                  Py_ssize_t parts):
        self.counts, self.seeds, self.reports, self.digits = counts, seeds, reports, digits
        self.g, self.parts = g, parts

    def __call__(self, Py_ssize_t part):
        cdef Py_ssize_t k = self.counts.shape[0]
        with nogil:
            support_range(self.counts, self.seeds, self.reports, self.digits, self.g,
                          k * part // self.parts, k * (part + 1) // self.parts)


# ------------------------------------------------------------------------------------------
# Duchi, Jordan and Wainwright's one-dimensional mean mechanism

cdef void duchi_fill(dpc_words *src, Py_ssize_t n, const double *x,  # IN
                     uint64_t keep_num, uint64_t keep_den,
                     int8_t *out) noexcept nogil:  # OUT
    """out[i] = +1 with probability (1 + x_i (2 p - 1)) / 2, else -1, with p = keep_num / keep_den.

    Step 1, s = +1 with probability (1 + x) / 2 exactly: V = -U' or +U' (a fair sign bit, U' a
    real uniform on (0, 1)) is uniform on (-1, 1), and s = +1 iff V < x. U* is U' truncated to a
    double, so for a double t in [0, 1], U* < t iff U' < t (U' lies in [U*, next double after
    U*), and that cell does not straddle the double t); so every comparison is exact.
    Step 2, randomized response on s: keep with probability keep_num / keep_den (Lemire).
    """
    cdef Py_ssize_t i
    cdef uint64_t bits = 0, extra
    cdef int left = 0, nextra, negative, below, plus, keep
    cdef double u, xi
    for i in range(n):
        if left == 0:
            bits = dpc_words_next(src)
            left = 64
        negative = <int>(bits & 1)
        bits >>= 1
        left -= 1
        xi = x[i]
        u = dpc_ustar(src, &extra, &nextra)
        below = u < fabs(xi)
        if negative:  # -U' < x  iff  x >= 0 or U' > |x|
            plus = (xi >= 0.0) | (not below)
        else:  # U' < x  iff  x > 0 and U' < |x|
            plus = (xi > 0.0) & below
        keep = bounded(src, keep_den) < keep_num
        out[i] = 1 if plus == keep else -1


def duchi_into(int8_t[::1] out, const double[::1] x, uint64_t keep_num, uint64_t keep_den,
               random_state=None):
    """Fill ``out`` with Duchi et al. signs for ``x`` (each in [-1, 1], no NaN)."""
    cdef Py_ssize_t n = out.shape[0]
    cdef _Records r
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    if n == 0:
        bitgen_handle(random_state)
        return
    r = records(DUCHI, n, keep_num, keep_den, 0, (out, x))
    r.x, r.signs = &x[0], &out[0]
    r.run(random_state)
