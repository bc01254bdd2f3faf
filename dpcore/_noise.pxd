# C-level entry points of the noise kernel (_noise.pyx) for the other noise kernels
# (_noise_grid, _noise_snapping, _noise_planar) and for other kernels (cimport dpcore._noise).
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from dpcore._random cimport LockedBits, StreamKey
from dpcore._noise_neglog cimport Pending, Source

# The discrete Gaussian's proposal table (see "The table sampler" in _noise.pyx).
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
    enum:
        DPC_DGT_BLOCK
        DPC_DGT_TAIL
        DPC_DGT_NULL
        DPC_DGT_COLUMN_BITS
        DPC_DGT_THR_BITS
        DPC_DGT_SIGN_SHIFT


cdef enum:
    # A call on THREAD_BLOCK values or more runs in blocks of THREAD_BLOCK values, block b drawn
    # from its own stream (the thread count changes nothing).
    THREAD_BLOCK = 1 << 16
    # The drivers work through the output in chunks of CHUNK draws and finish each chunk's
    # pending draws before the next, so the fused grid kernels (noise drawn into a small buffer,
    # then post-processed while it is in cache) draw exactly what the plain ones draw for the
    # same seed.
    CHUNK = 4096

cdef enum JobKind:
    JOB_DLAP = 0
    JOB_DGAUSS = 1


cdef struct DGaussParams:
    double sigma
    double s2        # sigma * sigma, rounded
    double t         # the discrete Laplace proposal's scale (see _dgauss_params)
    double c         # s2 / t, rounded
    double inv_s2    # 1 / s2, rounded


# The test hook's flag (_force_exact_path): a call passes it to source_init.
cdef bint exact_path_forced() noexcept nogil

# Fill out[0:m] with exact discrete Laplace draws of the given scale (scale_exact =
# Fraction(scale)), from s (GIL and generator lock held).
cdef dlap_block(Source *s, double scale, int64_t *out, Py_ssize_t m, Pending *pend,
                scale_exact, LockedBits bits)


cdef class GaussSampler:
    """The discrete Gaussian sampler of one call: the table sampler, or CKS (table is NULL)."""
    cdef DGaussParams p
    cdef object sigma2, t
    cdef dpc_dgt *table
    cdef object D, width, tail_start, tail_width  # the table, exactly, for finishing
    cdef block(self, Source *s, int64_t *out, Py_ssize_t m, Pending *pend, LockedBits bits)
    cdef finish_fill(self, Source *s, int64_t *out, Pending *pend, Py_ssize_t npend,
                     LockedBits bits)
    cdef object finish(self, dict item, LockedBits bits)

# The sampler for a call of n draws (the table sampler from TABLE_MIN_SIZE draws on).
cdef GaussSampler gauss_sampler(double sigma, Py_ssize_t n)


cdef class _NoiseJob:
    """A threaded call of the discrete Laplace (JOB_DLAP, param the scale) or Gaussian
    (JOB_DGAUSS, param sigma) sampler over n values; see _noise.pyx."""
    cdef int kind
    cdef Py_ssize_t n
    cdef StreamKey key
    cdef int64_t *ints     # the draws go here, if set (else to a chunk buffer)
    cdef int64_t *counts   # counts += draws, if set
    cdef double param
    cdef object param_exact
    cdef GaussSampler sampler
    cdef object keep  # the arrays behind the pointers
    cdef void use_chunk(self, Py_ssize_t off, const int64_t *noise, Py_ssize_t m) noexcept nogil

# Set up job (a _NoiseJob or a subclass, fresh from __new__) and return it.
cdef _NoiseJob init_noise_job(_NoiseJob job, int kind, Py_ssize_t n, double param, object keep)
# Draw the key from random_state and run the job's blocks (dpcore._dpcore_threads.run_blocks).
cdef run_noise_job(_NoiseJob job, random_state)


# counts[0:n] += independent exact discrete Laplace (scale) or discrete Gaussian (sigma) noise,
# in place; the parameter is validated by the caller. Call with the GIL (the rare exact
# decisions run in Python), without holding the generator's lock (they take it).
cdef int dlap_add_into(int64_t *counts, Py_ssize_t n, double scale, object random_state) except -1
cdef int dgauss_add_into(int64_t *counts, Py_ssize_t n, double sigma,
                         object random_state) except -1
