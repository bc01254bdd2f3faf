# cython: language_level=3
"""Correctly rounded natural logarithm (round to nearest even) for positive finite doubles.

The kernel (crlog.h) evaluates ln(x) in double-double with a proven relative error bound of
2^-68.5 (err reported as 2^-67.4 |hi|) and decides the rounding from it; the rare arguments it
cannot decide (about 1 in 10^4) are finished exactly by `dpcore._exact.log_correctly_rounded`.
"""
import time

import numpy as np

from libc.math cimport isfinite
from libc.stdint cimport int64_t

from dpcore._crlog cimport dp_log_dd, dp_log_cr_fast


cdef inline bint _valid(double v) noexcept nogil:
    return v > 0.0 and isfinite(v)


cdef _finish(double v):
    """The correctly rounded ln(v) when the fast path leaves it undecided (exact, Python)."""
    from dpcore import _exact
    return float(_exact.log_correctly_rounded(v))


cdef Py_ssize_t _fast_loop(const double[::1] x, double[::1] out, signed char[::1] ok,
                           Py_ssize_t *bad) noexcept nogil:
    """Fast path over x; returns how many entries are undecided; bad = first invalid index or -1."""
    cdef Py_ssize_t i, n = x.shape[0], undecided = 0
    cdef double v
    bad[0] = -1
    for i in range(n):
        v = x[i]
        if not _valid(v):
            bad[0] = i
            return 0
        if dp_log_cr_fast(v, &out[i]):
            ok[i] = 1
        else:
            ok[i] = 0
            undecided += 1
    return undecided


def _invalid(v):
    return ValueError(f"x must be a positive finite float (or an array of them); got {v!r}")


def log(x):
    """Correctly rounded ln(x), elementwise: x a float or an array of positive finite float64.

    Returns a float for a scalar argument, else a float64 array of the same shape.
    Raises ValueError if any element of x is not a positive finite number.
    """
    cdef double v, y
    cdef Py_ssize_t bad = -1, undecided, j
    if not isinstance(x, np.ndarray) and np.ndim(x) == 0:
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise _invalid(x) from None
        if not _valid(v):
            raise _invalid(x)
        if dp_log_cr_fast(v, &y):
            return y
        return _finish(v)
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("x must be a positive finite float (or an array of them)") from None
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty(flat.shape[0], dtype=np.float64)
    ok = np.empty(flat.shape[0], dtype=np.int8)
    cdef const double[::1] xv = flat
    cdef double[::1] ov = out
    cdef signed char[::1] okv = ok
    with nogil:
        undecided = _fast_loop(xv, ov, okv, &bad)
    if bad >= 0:
        raise _invalid(float(flat[bad]))
    if undecided:
        for j in np.flatnonzero(ok == 0):
            ov[j] = _finish(xv[j])
    return out.reshape(arr.shape)


# ------------------------------------------------------------------------------------------
# Test and benchmark hooks


def _log_dd(double x):
    """(hi, lo, err) from the kernel: |hi + lo - ln x| <= err for positive finite x."""
    cdef double hi, lo, err
    dp_log_dd(x, &hi, &lo, &err)
    return hi, lo, err


def _log_cr_fast(double x):
    """The fast path alone: the correctly rounded ln(x), or None when undecided."""
    cdef double y
    if dp_log_cr_fast(x, &y):
        return y
    return None


def _log_dd_array(x):
    """Elementwise dp_log_dd over a 1-d float64 array: (hi, lo, err) arrays."""
    cdef const double[::1] xv = np.ascontiguousarray(x, dtype=np.float64)
    cdef Py_ssize_t i, n = xv.shape[0]
    hi = np.empty(n)
    lo = np.empty(n)
    err = np.empty(n)
    cdef double[::1] h = hi, l = lo, e = err
    with nogil:
        for i in range(n):
            dp_log_dd(xv[i], &h[i], &l[i], &e[i])
    return hi, lo, err


def _log_cr_fast_array(x):
    """Elementwise fast path over a 1-d float64 array: (values, decided) (values NaN if undecided)."""
    cdef const double[::1] xv = np.ascontiguousarray(x, dtype=np.float64)
    cdef Py_ssize_t i, n = xv.shape[0]
    out = np.full(n, np.nan)
    ok = np.zeros(n, dtype=np.int8)
    cdef double[::1] o = out
    cdef signed char[::1] k = ok
    with nogil:
        for i in range(n):
            k[i] = dp_log_cr_fast(xv[i], &o[i])
    return out, ok.astype(bool)


def _bench(x, int which=1, int repeat=5):
    """Best-of-`repeat` ns per call over the 1-d array x: which = 0 dp_log_dd, 1 dp_log_cr_fast."""
    cdef const double[::1] xv = np.ascontiguousarray(x, dtype=np.float64)
    cdef Py_ssize_t i, n = xv.shape[0]
    cdef double hi = 0.0, lo = 0.0, err = 0.0, y = 0.0, sink = 0.0
    cdef int64_t decided = 0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        with nogil:
            if which == 0:
                for i in range(n):
                    dp_log_dd(xv[i], &hi, &lo, &err)
                    sink += hi + lo + err
            else:
                for i in range(n):
                    decided += dp_log_cr_fast(xv[i], &y)
                    sink += y
        best = min(best, (time.perf_counter_ns() - t0) / max(n, 1))
    return best, sink, decided
