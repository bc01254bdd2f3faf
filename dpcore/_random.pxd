# Declarations of the secure-randomness kernel, cimported by every other kernel.
# All samplers take a numpy bitgen_t* and must be called with the generator's lock held.
from libc.stdint cimport int64_t, uint32_t, uint64_t
from numpy.random cimport bitgen_t


# Inline word reading and bit-built U* for hot loops (chacha20.h). Build the reader with
# `random_words` (under the generator's lock); it reads a dpcore ChaCha20's buffer directly and
# any other bitgen_t through its callback, giving the same words in the same order as
# next_uint64.
cdef extern from "chacha20.h" nogil:
    ctypedef struct dpc_chacha20_state:
        uint32_t input[16]
        int pos
        int has_uint32
        uint32_t uinteger

    ctypedef struct dpc_words:
        dpc_chacha20_state *chacha
        void (*refill)(dpc_chacha20_state *) noexcept nogil
        uint64_t (*next_uint64)(void *) noexcept nogil
        void *state

    uint64_t dpc_words_next(dpc_words *src)
    # U* (same value and words as random_ustar); *extra gets the *nextra (0-12) unused random
    # bits of the last word read, which refine the draw's cell (see chacha20.h).
    double dpc_ustar(dpc_words *src, uint64_t *extra, int *nextra)
    # The same, with the first 64 bits of the expansion already read (w).
    double dpc_ustar_from(dpc_words *src, uint64_t w, uint64_t *extra, int *nextra)
    # nextafter(x, inf) - x for a positive finite double, exactly (bit arithmetic).
    double dpc_ulp(double x)
    # floor(x) for |x| < 2**62, exactly, without libm (as a double, or as an int64).
    double dpc_floor(double x)
    int64_t dpc_floor_i64(double x)
    # numpy.rint (nearest, ties to even), exactly, without libm.
    double dpc_rint(double x)
    # x, opaque to the optimiser (keeps a data-dependent outcome as data, not a branch).
    int dpc_opaque(int x)
    uint64_t dpc_double_as_u64(double x)
    double dpc_u64_as_double(uint64_t bits)


cdef class BitgenHandle:
    """What a kernel needs to draw: the C generator, its lock, and the owner kept alive."""
    cdef bitgen_t *bitgen
    cdef readonly object lock
    cdef readonly object bit_generator


cpdef BitgenHandle bitgen_handle(object random_state)

# Raw words as a Python callable (bits() -> int, bits.ustar() -> float) for exact fallbacks
# that run with the GIL while the caller already holds the generator's lock.
cdef class LockedBits:
    cdef bitgen_t *bg

cdef LockedBits locked_bits(BitgenHandle h)

# Point `src` at bg's words (call with the lock held; valid while the generator lives).
cdef void random_words(dpc_words *src, bitgen_t *bg) noexcept nogil
cdef uint64_t random_u64(bitgen_t *bg) noexcept nogil
# Uniform integer in {0, ..., n - 1} by rejection; n >= 1.
cdef uint64_t random_bounded(bitgen_t *bg, uint64_t n) noexcept nogil
# Mironov's U*: every double in (0, 1) with probability equal to the width of its real cell
# (below 2**-1022: uniform on the subnormal grid k * 2**-1074, k >= 1). Never 0 or 1.
cdef double random_ustar(bitgen_t *bg) noexcept nogil
# Exact Bernoulli(a / b); 0 <= a <= b, b >= 1.
cdef bint random_bernoulli_ratio(bitgen_t *bg, uint64_t a, uint64_t b) noexcept nogil
# Exact Bernoulli(exp(-a / b)) (Canonne-Kamath-Steinke); b >= 1, b < 2**56. Integer arithmetic only
# (exact for every b >= 1 in fact: when b * k would overflow, Bernoulli(a / (b k)) is drawn as
# Bernoulli(a / b) and Bernoulli(1 / k) together).
cdef bint random_bernoulli_exp(bitgen_t *bg, uint64_t a, uint64_t b) noexcept nogil
# Exact geometric: P(k) = (1 - exp(-s/t)) exp(-k s/t), k = 0, 1, ...; s, t >= 1, t < 2**40.
# (X // s is computed in 128 bits, exact for any t; a result above 2**64 - 1, which needs
# V >= 2**24 when t < 2**40, i.e. probability exp(-2**24), saturates at 2**64 - 1.)
cdef uint64_t random_geometric_exp(bitgen_t *bg, uint64_t s, uint64_t t) noexcept nogil


# ------------------------------------------------------------------------------------------------
# Per-block streams for threaded kernels (dpcore/_dpcore_threads.pyx runs the blocks).
#
# A threaded kernel draws ONE 256-bit key from the caller's generator (`stream_key`: four 64-bit
# words through next_uint64, under the caller's lock) and gives block b of its input (blocks of a
# fixed size set by the kernel and the input, never by the thread count) the ChaCha20 stream with
# that key and stream id b (input words 14-15, counter from 0): `stream_open`. Each block draws
# only from its own stream, so the output does not depend on which thread ran which block, nor
# on how many threads there were. Distinct (key, id) pairs are independent ChaCha20 streams (the
# PRF assumption that makes ChaCha20 secure), and the key is fresh uniform bits of the caller's
# generator, independent of everything else it emits.
cdef struct BlockStream:
    dpc_chacha20_state chacha
    bitgen_t bitgen


cdef class StreamKey:
    cdef uint32_t key[8]


cdef StreamKey stream_key(BitgenHandle h)
# Point s.bitgen at the stream (key, id = block); s must not move while it is used.
cdef void stream_open(BlockStream *s, StreamKey key, uint64_t block) noexcept
# LockedBits over a block's stream (valid while the stream lives).
cdef LockedBits stream_bits(BlockStream *s)
