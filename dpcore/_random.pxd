# Declarations of the secure-randomness kernel, cimported by every other kernel.
# All samplers take a numpy bitgen_t* and must be called with the generator's lock held.
from libc.stdint cimport uint64_t
from numpy.random cimport bitgen_t


cdef class BitgenHandle:
    """What a kernel needs to draw: the C generator, its lock, and the owner kept alive."""
    cdef bitgen_t *bitgen
    cdef readonly object lock
    cdef readonly object bit_generator


cpdef BitgenHandle bitgen_handle(object random_state)

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
