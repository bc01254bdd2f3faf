"""Exact lattice sums of the sufficient-statistics learners (dpcore.learn), one pass per call.

The learners' releases are integer sums over the records: every record is clipped to public
bounds, mapped affinely to a public domain and rounded to a public power-of-two lattice, and the
lattice integers are added in int64. Both kernels here read each value once and keep no
temporaries (the NumPy passes they replace were bound by memory traffic, which two Dask workers
on one machine share), with the GIL released. They are the one implementation of these sums: the
in-memory fits and the Dask chunk functions call them, so the integers agree bit for bit whatever
the chunking (integer addition is exact and associative).

Each value goes through the same IEEE operations, in the same order, as the NumPy expressions
they replace (clip = min(max(x, lower), upper), then (x - centre) / half; rint ties to even;
-ffp-contract=off keeps every product rounded on its own), so the integers are those NumPy
computed. A non-finite input is mapped as numpy.nan_to_num maps it (NaN to 0, +-inf to the
largest finite double) and flagged: the callers refuse a flagged input before anything is
charged.
"""
from libc.float cimport DBL_MAX
from libc.math cimport sqrt, trunc
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc

from scipy.linalg.cython_blas cimport dsyrk

from dpcore._random cimport dpc_rint

# Rows per dsyrk call of the Gram matrix (fewer when the lattice allows fewer, see lattice_sums).
cdef enum:
    GRAM_BLOCK = 256

# A truncated row still above the norm bound is shrunk by sqrt(bound / squares) times this
# (dpcore.learn._ssp.SSPLattice: only float rounding of the scaling can need it).
cdef double SHRINK_MARGIN = 1.0 - 2.0 ** -30


cdef inline double _finite(double x, int *bad) noexcept nogil:
    """x as numpy.nan_to_num maps it; *bad set when x is not finite."""
    if x - x == 0.0:
        return x
    bad[0] = 1
    if x != x:
        return 0.0
    return DBL_MAX if x > 0 else -DBL_MAX


cdef inline double _clip(double x, double lower, double upper) noexcept nogil:
    """numpy.clip of a non-NaN x: min(max(x, lower), upper)."""
    x = x if x > lower else lower
    return x if x < upper else upper


cdef int64_t _largest_index(const int64_t[::1] idx, Py_ssize_t k) except? -1:
    """The largest class index (-1 when there is none); ValueError if one is outside [0, k)."""
    cdef int64_t largest = -1
    cdef Py_ssize_t i
    for i in range(idx.shape[0]):
        if idx[i] < 0 or idx[i] >= k:
            raise ValueError("a class index is outside [0, k)")
        largest = idx[i] if idx[i] > largest else largest
    return largest


def class_feature_sums(const double[:, ::1] X, const int64_t[::1] idx, const double[::1] lower,
                       const double[::1] upper, const double[::1] centre, const double[::1] half,
                       double inv_grid, int64_t[::1] counts, int64_t[:, ::1] sums,
                       int64_t[:, ::1] squares):
    """GaussianNB's exact sums, added to ``counts`` (k,), ``sums`` and ``squares`` (k, d): for
    record i of class idx[i] and feature j, z = clip((clip(x, lower_j, upper_j) - centre_j) /
    half_j, -1, 1), then rint(z * inv_grid) and rint(z * z * inv_grid) (inv_grid a power of two,
    so the products are the divisions by the grid, exactly). Returns 1 when X holds a non-finite
    value (0 otherwise). Raises ValueError for a class index outside [0, k)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = counts.shape[0], i, j
    cdef int64_t c
    cdef int bad = 0
    cdef double z
    if idx.shape[0] != n or sums.shape[0] != k or squares.shape[0] != k or sums.shape[1] != d \
            or squares.shape[1] != d or lower.shape[0] != d or upper.shape[0] != d \
            or centre.shape[0] != d or half.shape[0] != d:
        raise ValueError("class_feature_sums: shapes do not match")
    _largest_index(idx, k)
    with nogil:
        for i in range(n):
            c = idx[i]
            counts[c] += 1
            for j in range(d):
                z = (_clip(_finite(X[i, j], &bad), lower[j], upper[j]) - centre[j]) / half[j]
                z = _clip(z, -1.0, 1.0)
                sums[c, j] += <int64_t>dpc_rint(z * inv_grid)
                squares[c, j] += <int64_t>dpc_rint(z * z * inv_grid)
    return bad


cdef inline int64_t _squares(const double *a, Py_ssize_t d) noexcept nogil:
    """sum_j a_j^2 of integer-valued doubles |a_j| <= 2^31, in int64 (exact)."""
    cdef int64_t s = 0, v
    cdef Py_ssize_t j
    for j in range(d):
        v = <int64_t>a[j]
        s += v * v
    return s


cdef inline void _lattice_row(double *a, const double *scaled, const double *limit,
                              int64_t norm_units, Py_ssize_t d) noexcept nogil:
    """The lattice integers of one scaled row (as doubles): rint when the rounded row stays in
    the domain (|a_j| <= limit_j, sum a_j^2 <= norm_units), else trunc toward zero, clipped to
    the limits and shrunk until its squares are within the bound."""
    cdef Py_ssize_t j
    cdef bint outside = False
    cdef int64_t sq
    cdef double shrink
    for j in range(d):
        a[j] = dpc_rint(scaled[j])
        if not (a[j] <= limit[j] and a[j] >= -limit[j]):
            outside = True
    if not outside and _squares(a, d) <= norm_units:
        return
    for j in range(d):
        a[j] = _clip(trunc(scaled[j]), -limit[j], limit[j])
    sq = _squares(a, d)
    while sq > norm_units:
        shrink = sqrt(<double>norm_units / <double>sq) * SHRINK_MARGIN
        for j in range(d):
            a[j] = trunc(a[j] * shrink)
        sq = _squares(a, d)


def lattice_sums(const double[:, ::1] X, const double[::1] y, const double[::1] lower,
                 const double[::1] upper, const double[::1] centre, const double[::1] half,
                 double y_lower, double y_upper, double y_centre, double y_half,
                 double x_scale, double y_scale, const double[::1] limit, int64_t norm_units,
                 Py_ssize_t exact_rows, int64_t[:, ::1] gram, int64_t[::1] xy, int64_t[::1] sx,
                 int64_t[::1] sy):
    """The SSP lattice sums of the records, added to ``gram`` (d, d: sum a a^T), ``xy`` (sum a c),
    ``sx`` (sum a) and ``sy`` (1,: sum c). Row x: s_j = (clip(x_j, lower_j, upper_j) - centre_j)
    / half_j, its lattice integers a (dpcore.learn._ssp.SSPLattice.integers) from s * x_scale
    against ``limit`` and ``norm_units``; target: c = rint(clip((clip(y, y_lower, y_upper) -
    y_centre) / y_half, -1, 1) * y_scale). (Bounds of +-inf, centre 0 and half 1 take rows and
    targets already scaled as they are.) The Gram matrix is summed by dsyrk over blocks of at
    most ``exact_rows`` rows, in which every partial sum is an integer below 2^53 (exact in
    double precision, FMA or not), then added in int64. Returns bit 1 when X holds a non-finite
    value, bit 2 when y does."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, j, k, filled = 0, block
    cdef int bad_x = 0, bad_y = 0
    cdef double t
    cdef int64_t c, aj
    cdef double *rows
    cdef double *acc
    cdef double *scaled
    cdef int dn, dk, lda
    cdef double one = 1.0, zero = 0.0
    cdef char uplo = b'U', trans = b'N'
    if y.shape[0] != n or lower.shape[0] != d or upper.shape[0] != d or centre.shape[0] != d \
            or half.shape[0] != d or limit.shape[0] != d or gram.shape[0] != d \
            or gram.shape[1] != d or xy.shape[0] != d or sx.shape[0] != d or sy.shape[0] != 1:
        raise ValueError("lattice_sums: shapes do not match")
    if exact_rows < 1 or d < 1:
        raise ValueError("lattice_sums: needs exact_rows >= 1 and at least one feature")
    block = min(<Py_ssize_t>GRAM_BLOCK, exact_rows)
    rows = <double *>malloc(block * d * sizeof(double))
    acc = <double *>malloc(d * d * sizeof(double))
    scaled = <double *>malloc(d * sizeof(double))
    if rows == NULL or acc == NULL or scaled == NULL:
        free(rows); free(acc); free(scaled)
        raise MemoryError()
    dn, lda = <int>d, <int>d
    try:
        with nogil:
            for i in range(n):
                for j in range(d):
                    t = (_clip(_finite(X[i, j], &bad_x), lower[j], upper[j]) - centre[j]) / half[j]
                    scaled[j] = t * x_scale
                _lattice_row(&rows[filled * d], scaled, &limit[0], norm_units, d)
                t = (_clip(_finite(y[i], &bad_y), y_lower, y_upper) - y_centre) / y_half
                c = <int64_t>dpc_rint(_clip(t, -1.0, 1.0) * y_scale)
                sy[0] += c
                for j in range(d):
                    aj = <int64_t>rows[filled * d + j]
                    sx[j] += aj
                    xy[j] += aj * c
                filled += 1
                if filled == block or i == n - 1:
                    # rows (filled x d, row-major) is A^T for the column-major A (d x filled):
                    # acc = A A^T, its upper triangle in column-major order
                    dk = <int>filled
                    dsyrk(&uplo, &trans, &dn, &dk, &one, rows, &lda, &zero, acc, &dn)
                    for k in range(d):
                        for j in range(k + 1):
                            gram[j, k] += <int64_t>acc[j + k * d]
                    filled = 0
            for k in range(d):
                for j in range(k):
                    gram[k, j] = gram[j, k]
    finally:
        free(rows); free(acc); free(scaled)
    return bad_x | (bad_y << 1)


def lattice_integers(const double[:, ::1] X, const double[::1] y, double x_scale,
                     double y_scale, const double[::1] limit, int64_t norm_units,
                     double[:, ::1] a, double[::1] c):
    """The lattice integers :func:`lattice_sums` adds, of rows and targets already scaled (the
    same rounding, row by row), written into ``a`` (n, d) and ``c`` (n,) as doubles."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, j
    cdef double *scaled
    if y.shape[0] != n or limit.shape[0] != d or a.shape[0] != n or a.shape[1] != d \
            or c.shape[0] != n:
        raise ValueError("lattice_integers: shapes do not match")
    if d < 1:
        raise ValueError("lattice_integers: needs at least one feature")
    scaled = <double *>malloc(d * sizeof(double))
    if scaled == NULL:
        raise MemoryError()
    try:
        with nogil:
            for i in range(n):
                for j in range(d):
                    scaled[j] = X[i, j] * x_scale
                _lattice_row(&a[i, 0], scaled, &limit[0], norm_units, d)
                c[i] = dpc_rint(_clip(y[i], -1.0, 1.0) * y_scale)
    finally:
        free(scaled)


def category_counts(const int64_t[:, ::1] X, const int64_t[::1] idx, const int64_t[::1] low,
                    const int64_t[::1] span, const int64_t[::1] table_start,
                    const int32_t[::1] tables, const int64_t[::1] size,
                    const int64_t[::1] count_start, int64_t[::1] counts):
    """CategoricalNB's exact counts of integer records, added to ``counts``: the class count
    counts[idx[i]] and, for each feature j, counts[count_start[j] + idx[i] size[j] + code] where
    code = tables[table_start[j] + x - low[j]] is the index of x among the categories of feature
    j (-1: x is not one; so is any x outside [low[j], low[j] + span[j])). Returns the first
    feature with a value outside its categories, in the first row holding one (-1 if none:
    the counts are then complete; else they are partial and must not be used)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = counts.shape[0], i, j
    cdef int64_t c, code, cell, largest
    cdef uint64_t offset
    cdef Py_ssize_t bad = -1
    if idx.shape[0] != n or low.shape[0] != d or span.shape[0] != d \
            or table_start.shape[0] != d or size.shape[0] != d or count_start.shape[0] != d:
        raise ValueError("category_counts: shapes do not match")
    for j in range(d):
        if span[j] < 1 or table_start[j] < 0 or table_start[j] + span[j] > tables.shape[0] \
                or size[j] < 1 or count_start[j] < 0:
            raise ValueError("category_counts: a feature's table is outside the tables")
    largest = _largest_index(idx, k)
    for j in range(d):
        if count_start[j] + (largest + 1) * size[j] > k:
            raise ValueError("category_counts: a count is outside counts")
    with nogil:
        for i in range(n):
            c = idx[i]
            counts[c] += 1
            for j in range(d):
                # x - low[j] as an unsigned difference: below span[j] exactly when
                # low[j] <= x < low[j] + span[j], whatever the signs (no overflow)
                offset = <uint64_t>X[i, j] - <uint64_t>low[j]
                code = tables[table_start[j] + offset] if offset < <uint64_t>span[j] else -1
                if code < 0 or code >= size[j]:
                    bad = j
                    break
                cell = count_start[j] + c * size[j] + code
                counts[cell] += 1
            if bad >= 0:
                break
    return bad
