# Correctly rounded natural logarithm: a double-double fast path with a proven error bound.
# The rare arguments whose rounding the fast path cannot decide go to the exact Python fallback
# (dpcore._exact.log_correctly_rounded), called with the GIL by the batch drivers.

cdef extern from "crlog.h" nogil:
    # ln(x) ~ hi + lo with |hi + lo - ln(x)| <= err, for any positive finite double x.
    void dp_log_dd(double x, double *hi, double *lo, double *err)
    # Correctly rounded ln(x) (round to nearest even) when the fast path decides it: returns 1 and
    # stores it in *out; returns 0 when the rounding is undecided.
    int dp_log_cr_fast(double x, double *out)
