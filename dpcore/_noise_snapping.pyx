# cython: language_level=3
"""Noise kernel: Mironov's snapping mechanism (CCS 2012), elementwise, for dpcore.laplace
(method "snapping").

out = clamp_B(round_grid(clamp_B(x) + S lam ln(U*))) with a full-precision uniform U*, a random
sign S and a correctly rounded logarithm (dp_log_cr_fast, finished exactly by
`dpcore._exact.log_correctly_rounded` when its fast path cannot decide), rounding to the
power-of-two grid with ties towards +infinity. From THREAD_MIN values on, block b (values
[b 2**16, (b + 1) 2**16)) draws from ChaCha20 stream b of one key taken from the caller's
generator (_noise.pyx), so a seeded output does not depend on the thread count.
"""
from libc.math cimport fabs
from libc.stdint cimport uint64_t

from dpcore._random cimport (
    BitgenHandle, bitgen_handle, dpc_ustar, dpc_floor, dpc_u64_as_double, dpc_double_as_u64,
    BlockStream, StreamKey, stream_key, stream_open,
)
from dpcore._crlog cimport dp_log_cr_fast
from dpcore._noise_neglog cimport (
    Pending, Source, source_init, take_bit, init_brackets, PENDING_CAPACITY, SNAP_LOG,
)
from dpcore._noise cimport THREAD_BLOCK, exact_path_forced

from dpcore import _exact
from dpcore._dpcore_threads import run_blocks

THREAD_MIN = THREAD_BLOCK

init_brackets()


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


cdef Py_ssize_t snap_fill(Source *s, const double *x, double unit, double lam, double grid,
                          double bound, double *out, Py_ssize_t start, Py_ssize_t n, Pending *pend,
                          Py_ssize_t *npend) noexcept nogil:
    """out[i] = snap_finish(x[i] / unit, ...) * unit from start until n, or until PENDING_CAPACITY
    logarithms are undecided; returns the index reached. Dividing by the power of two unit and
    multiplying back are the caller's scaling into sensitivity-1 units (each one IEEE operation,
    exact barring overflow and underflow; unit = 1 changes nothing)."""
    cdef Py_ssize_t i = start
    cdef double u, log_u
    cdef int negative, nextra
    cdef uint64_t extra
    npend[0] = 0
    while i < n:
        u = dpc_ustar(&s.words, &extra, &nextra)
        negative = take_bit(s)
        if not s.exact and dp_log_cr_fast(u, &log_u):
            out[i] = snap_finish(x[i] / unit, log_u, negative, lam, grid, bound) * unit
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


cdef class _SnapJob:
    """One threaded snapping call: block b's values from stream b; run_blocks calls it."""
    cdef Py_ssize_t n
    cdef StreamKey key
    cdef double *out
    cdef const double *x
    cdef double unit, lam, grid, bound
    cdef object keep  # the arrays behind the pointers

    def __call__(self, Py_ssize_t b):
        cdef BlockStream st
        cdef Source s
        cdef Pending pend[PENDING_CAPACITY]
        cdef Py_ssize_t lo = b * THREAD_BLOCK, hi = min(self.n, lo + THREAD_BLOCK)
        stream_open(&st, self.key, <uint64_t>b)
        source_init(&s, &st.bitgen, exact_path_forced())
        _snap_range(&s, self.x, self.unit, self.lam, self.grid, self.bound, self.out, lo, hi, pend)


def snapping_into(double[::1] out, const double[::1] x, double lam, double grid, double bound,
                  random_state=None, double unit=1.0):
    """Mironov's snapping mechanism, elementwise, in sensitivity-1 units (calibrated by the caller).

    out[i] = clamp_B(round_grid(clamp_B(x[i] / unit) + S * lam * ln(U*))) * unit with ln correctly
    rounded; lam, grid and bound are in units of the power of two `unit` (the sensitivity rounded
    up: dpcore.mechanisms), and the division and the product are single IEEE operations (x / unit
    may overflow to +-inf, which the clamp maps to +-bound).
    """
    cdef BitgenHandle h
    cdef Pending pend[PENDING_CAPACITY]
    cdef Py_ssize_t n = out.shape[0]
    cdef Source s
    cdef _SnapJob job
    if x.shape[0] != n:
        raise ValueError("x and out must have the same length")
    if n == 0:
        return
    if n >= THREAD_MIN:
        job = _SnapJob.__new__(_SnapJob)
        job.n, job.keep, job.out, job.x = n, (out, x), &out[0], &x[0]
        job.unit, job.lam, job.grid, job.bound = unit, lam, grid, bound
        job.key = stream_key(bitgen_handle(random_state))
        run_blocks(job, (n + THREAD_BLOCK - 1) // THREAD_BLOCK)
        return
    h = bitgen_handle(random_state)
    with h.lock:
        source_init(&s, h.bitgen, exact_path_forced())
        _snap_range(&s, &x[0], unit, lam, grid, bound, &out[0], 0, n, pend)


cdef _snap_range(Source *s, const double *x, double unit, double lam, double grid, double bound,
                 double *out, Py_ssize_t start, Py_ssize_t stop, Pending *pend):
    """Snapping on out[start:stop] from s (GIL held; the exact logarithms with it)."""
    cdef Py_ssize_t npend = 0, j
    while start < stop:
        with nogil:
            start = snap_fill(s, x, unit, lam, grid, bound, out, start, stop, pend, &npend)
        for j in range(npend):
            log_u = _exact.log_correctly_rounded(pend[j].u)
            out[pend[j].index] = snap_finish(
                x[pend[j].index] / unit, log_u, pend[j].negative, lam, grid, bound) * unit


# ------------------------------------------------------------------------------------------
# Test hooks

def _round_to_multiple(double y, double grid):
    return round_to_multiple(y, grid)


def _snap_finish(double x, double log_u, bint negative, double lam, double grid, double bound):
    return snap_finish(x, log_u, negative, lam, grid, bound)
