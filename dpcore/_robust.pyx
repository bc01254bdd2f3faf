# cython: language_level=3
"""Smooth sensitivity of the median in O(n log n): the kernel behind dpcore.robust.

Records are integers (grid units, sorted); positions 0 and n + 1 hold the public bounds. For the
median at (1-based) position m, Nissim, Raskhodnikova and Smith's smooth sensitivity is

    S = max over 0 <= i <= m <= j <= n + 1 of exp(-beta (j - i - 1)) (x_j - x_i)

(ALGORITHMS 6.8 with t = j - m, k = j - i - 1). Write the term as d_i * c_j * (x_j - x_i) with
d_i = exp(-beta (m - 1 - i)) and c_j = exp(-beta (j - m)). For a fixed i the best j maximises
c_j (x_j - x_i); as x_i grows, a larger j is preferred more and more (c_j is nonincreasing), so the
largest best j is nondecreasing in i. Divide and conquer on i then visits O(n log n) pairs.

Exactness of the search: c_j are fixed doubles (made nonincreasing), x_j - x_i is an integer below
2**53 (exact as a double), and c_j (x_j - x_i) == p + e exactly with p its rounded product and e
from fma. Rounding to nearest is monotone, so comparing the pairs (p, e) lexicographically
compares the exact products: the divide and conquer finds the exact maximum of the matrix
c_j (x_j - x_i) over the window; each row's value is then exp(-beta (j - i - 1)) (x_j - x_i)
rounded (relative error a few units in the last place, which dpcore.robust inflates).
"""
from libc.math cimport exp, fma
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


cdef struct _Ctx:
    const int64_t *x    # IN sorted records, grid units
    Py_ssize_t n
    int64_t lower       # IN x_0 (padding below)
    int64_t upper       # IN x_{n+1} (padding above)
    const double *c     # IN c[j - j0], nonincreasing in j
    double beta
    Py_ssize_t i0
    Py_ssize_t j0


cdef inline int64_t _at(const _Ctx *ctx, Py_ssize_t i) noexcept nogil:
    if i <= 0:
        return ctx.lower
    if i > ctx.n:
        return ctx.upper
    return ctx.x[i - 1]


cdef double _best(const _Ctx *ctx, Py_ssize_t ilo, Py_ssize_t ihi,
                  Py_ssize_t jlo, Py_ssize_t jhi) noexcept nogil:
    """max of exp(-beta (j - i - 1)) (x_j - x_i) over i in [ilo, ihi], j in [jlo, jhi], the
    argmax of c_j (x_j - x_i) being nondecreasing in i."""
    cdef Py_ssize_t mid, j, jbest
    cdef int64_t a
    cdef double diff, cj, p, e, pbest, ebest, dbest, best, other
    if ilo > ihi:
        return 0.0
    mid = ilo + (ihi - ilo) // 2
    a = _at(ctx, mid)
    jbest = jlo
    pbest = -1.0
    ebest = 0.0
    dbest = 0.0
    for j in range(jlo, jhi + 1):
        diff = <double>(_at(ctx, j) - a)  # exact: 0 <= diff < 2**53
        cj = ctx.c[j - ctx.j0]
        p = cj * diff
        e = fma(cj, diff, -p)  # cj * diff == p + e exactly
        if p > pbest or (p == pbest and e >= ebest):  # ties: the largest argmax
            pbest = p
            ebest = e
            dbest = diff
            jbest = j
    # the row's value, rounded once from exp (d_i c_j == exp(-beta (j - i - 1)) up to rounding)
    best = exp(-ctx.beta * <double>(jbest - mid - 1)) * dbest
    # rows above mid prefer j >= jbest; rows below never prefer j > jbest (strictly worse)
    other = _best(ctx, ilo, mid - 1, jlo, jbest)
    if other > best:
        best = other
    other = _best(ctx, mid + 1, ihi, jbest, jhi)
    if other > best:
        best = other
    return best


def smooth_sensitivity_sorted(const int64_t[::1] x, int64_t lower, int64_t upper, Py_ssize_t m,
                              double beta, Py_ssize_t reach):
    """max of exp(-beta (j - i - 1)) (x_j - x_i) over m - reach <= i <= m <= j <= m + reach.

    Parameters
    ----------
    x : int64 array, sorted, lower <= x <= upper, upper - lower < 2**53 (not checked).
    lower, upper : the padding values x_0 and x_{n+1}.
    m : 1-based position of the median, 1 <= m <= n.
    beta : > 0.
    reach : >= 1; pairs outside the window are skipped (the caller bounds their terms).

    Returns
    -------
    float, in grid units.
    """
    cdef Py_ssize_t n = x.shape[0]
    cdef Py_ssize_t i0 = m - reach if m - reach > 0 else 0
    cdef Py_ssize_t j1 = m + reach if m + reach < n + 1 else n + 1
    cdef Py_ssize_t k
    cdef double *c = <double *>malloc((j1 - m + 1) * sizeof(double))
    cdef _Ctx ctx
    cdef double out
    if c == NULL:
        raise MemoryError()
    with nogil:
        for k in range(j1 - m + 1):
            c[k] = exp(-beta * <double>k)
            if k > 0 and c[k] > c[k - 1]:  # keep c nonincreasing whatever exp's rounding
                c[k] = c[k - 1]
        ctx.x = &x[0] if n > 0 else NULL
        ctx.n = n
        ctx.lower = lower
        ctx.upper = upper
        ctx.c = c
        ctx.beta = beta
        ctx.i0 = i0
        ctx.j0 = m
        out = _best(&ctx, i0, m, m, j1)
    free(c)
    return out


def smooth_sensitivity_definition(const int64_t[::1] x, int64_t lower, int64_t upper,
                                  Py_ssize_t m, double beta):
    """The O(n**2) definition, max_k exp(-beta k) max_t (x_{m+t} - x_{m+t-k-1}): the naive twin."""
    cdef Py_ssize_t n = x.shape[0]
    cdef Py_ssize_t k, t
    cdef _Ctx ctx
    cdef double best = 0.0, w, v
    ctx.x = &x[0] if n > 0 else NULL
    ctx.n = n
    ctx.lower = lower
    ctx.upper = upper
    with nogil:
        for k in range(n + 1):
            w = exp(-beta * <double>k)
            for t in range(k + 2):
                v = <double>(_at(&ctx, m + t) - _at(&ctx, m + t - k - 1))
                if v * w > best:
                    best = v * w
    return best
