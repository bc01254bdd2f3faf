# cython: language_level=3
"""Noise kernel: the fused grid releases of the Laplace and Gaussian mechanisms on doubles
(dpcore.laplace / dpcore.gaussian, method "discrete"), and their input check.

A release rounds each value to a power-of-two grid and adds exact integer noise in grid units
(the samplers of _noise.pyx), in one pass through memory: the noise is drawn a chunk at a time
into a small buffer and post-processed while it is in cache, with the same values, for the same
generator state, as the unfused computation. From THREAD_MIN values on, threaded as the samplers
are (_noise.pyx: per-block ChaCha20 streams, so the output does not depend on the thread count).

`finite_magnitude` is the releases' input check (NaN / infinity, and the largest magnitude that
picks the int64 fast path), one pass threaded like the draws; the release calls it before it
charges anything.
"""
from fractions import Fraction

import numpy as np

from libc.math cimport NAN
from libc.stdint cimport int64_t, uint64_t

from dpcore._random cimport (
    BitgenHandle, LockedBits, locked_bits, bitgen_handle, dpc_rint, dpc_u64_as_double,
    dpc_double_as_u64,
)
from dpcore._noise_neglog cimport Pending, Source, source_init, init_brackets, PENDING_CAPACITY
from dpcore._noise cimport (
    CHUNK, THREAD_BLOCK, JOB_DLAP, JOB_DGAUSS, GaussSampler, _NoiseJob, dlap_block,
    exact_path_forced, gauss_sampler, init_noise_job, run_noise_job,
)

from dpcore._dpcore_threads import run_blocks

THREAD_MIN = THREAD_BLOCK

init_brackets()


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


cdef class _GridJob(_NoiseJob):
    """A threaded grid release: each chunk of noise is post-processed into out."""
    cdef double *out
    cdef const double *x
    cdef double grid, bound

    cdef void use_chunk(self, Py_ssize_t off, const int64_t *noise, Py_ssize_t m) noexcept nogil:
        grid_finish(self.out + off, self.x + off, noise, m, self.grid, self.bound)


cdef threaded_release(int kind, double[::1] out, const double[::1] x, double grid, double bound,
                      double param, random_state):
    cdef _GridJob job = _GridJob.__new__(_GridJob)
    init_noise_job(job, kind, out.shape[0], param, (out, x))
    job.out, job.x, job.grid, job.bound = &out[0], &x[0], grid, bound
    run_noise_job(job, random_state)


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
    cdef Pending pend[PENDING_CAPACITY]
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
        source_init(&s, h.bitgen, exact_path_forced())
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            dlap_block(&s, scale, &noise[0], m, pend, scale_exact, bits)
            with nogil:
                grid_finish(&out[off], &x[off], &noise[0], m, grid, bound)


def discrete_gaussian_grid_into(double[::1] out, const double[::1] x, double grid, double sigma,
                                random_state=None):
    """Fused release: out = (rint(x / grid) + N_Z(0, sigma**2)) * grid (see
    `discrete_laplace_grid_into`; the same values as the unfused computation, no clamp)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef Pending pend[PENDING_CAPACITY]
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
        source_init(&s, h.bitgen, exact_path_forced())
        for off in range(0, n, CHUNK):
            m = min(CHUNK, n - off)
            sampler.block(&s, &noise[0], m, pend, bits)
            with nogil:
                grid_finish(&out[off], &x[off], &noise[0], m, grid, inf)


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
