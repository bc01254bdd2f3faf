# C-level entry points of the noise kernel for other kernels (cimport dpcore._noise).
from libc.stdint cimport int64_t


# counts[0:n] += independent exact discrete Laplace (scale) or discrete Gaussian (sigma) noise,
# in place; the parameter is validated by the caller. Call with the GIL (the rare exact
# decisions run in Python), without holding the generator's lock (they take it).
cdef int dlap_add_into(int64_t *counts, Py_ssize_t n, double scale, object random_state) except -1
cdef int dgauss_add_into(int64_t *counts, Py_ssize_t n, double sigma,
                         object random_state) except -1
