"""Quantized density counting: bin n points in d dimensions into a mixed-radix grid of int64
counts (one pass, nogil, accumulating into the caller's array so data can arrive in chunks). The
noise on every cell is added in place by dpcore._noise.

Binning follows ``numpy.histogramdd`` exactly: bin k of an axis is the half-open interval
[e_k, e_{k+1}), the last bin is closed ([e_{K-1}, e_K]). For equal-width edges the bin is first
guessed as floor((x - lo) * K / (hi - lo)) and then corrected against the edge array itself, so
the result is the same as a search in the edges (never off by one through rounding); for explicit
edges a binary search is used. Points outside [lo, hi] on some axis are either clipped into the
edge bin or dropped (not counted); NaN and infinities are never counted and are reported back.

Fast path (equal-width axes whose edges are j * step + lo in doubles, numpy's linspace): with
u = 2**-53, D = fl(hi - lo), scale = fl(K / D), step = fl(D / K), the guess t = fl(fl(x - lo) *
scale) is within 4.01 u K of the real T = (x - lo) K / (hi - lo) when lo <= x <= hi, and each
edge e_j = fl(fl(j step) + lo) is within 3.01 u (hi - lo) + 1.01 u (|lo| + |hi|) of the real
lo + j (hi - lo) / K. So when 0 <= t < K and frac(t) lies in (m, 1 - m) with
m = 2**-49 K (1 + (|lo| + |hi|) / (hi - lo)) (twice the sum of both errors in units of t), then
e_b <= x < e_{b+1} for b = floor(t) (frac(t) = t - b is exact), and the edges need not be
consulted. Every other point (near an edge, out of range, NaN) takes the checked path. The test
"frac(t) in (m, 1 - m)" is computed as |fl(f - 1/2)| < fl(1/2 - m) with f = frac(t): both
roundings are below 2**-54, so it admits only f in (m - 2**-53, 1 - m + 2**-55), inside
(m / 2, 1 - m / 2) since m >= 2**-49: half the margin already covers the two errors above.

Block path (histogram_simd.h; the default when the CPU has AVX2, every axis has the fast path and
d <= 16): a block of rows is read as one flat array and four coordinates at a time get t, the
same two tests (0 <= t need not be tested: for t < 0, f = t - trunc(t) lies in (-1, 0] and the
second test fails) and, when both pass, the share b * stride of the cell as an exact int64
(b * stride < 2**34, turned into an integer exactly through fl(b * stride + 2**52)), else a
large negative flag. A row whose shares sum to a non-negative number is counted there (every
coordinate passed the proven test: the cell is the scalar fast path's); any other row is binned
again, coordinate by coordinate, by the checked path. So both paths give numpy's cells; the
tests force each path (``_simd_level``) and compare with numpy. The sample is prefetched into L2
8 KiB ahead of the vector loop (it streams from memory), and on grids beyond L2 each row's
count line as soon as its cell is known.

The cell of a point depends only on that point and the public edges (privacy: one record changes
one count by one under add/remove).

Threads: from THREAD_MIN points, when the grid is small next to the sample (at most n / 8 cells
per part), the rows are split into up to `dpcore.get_num_threads()` contiguous parts counted at
once, each into its own array (the first into the caller's), then added: integer counts, so the
result is the same for any number of parts.
"""
from cython cimport floating
from libc.math cimport fabs
from libc.string cimport memset
from libc.stdint cimport int32_t, int64_t, uint8_t

import numpy as np

from dpcore._dpcore_threads import get_limit, run_blocks


cdef extern from "histogram_simd.h" nogil:
    ctypedef struct hist_pattern:
        double lo[64]
        double scale[64]
        double nb[64]
        double width[64]
        double stride[64]
        int d
    int HIST_MAX_D
    void HIST_PREFETCH_W(const void *p)
    void hist_shares_f64(const double *x, Py_ssize_t length, const hist_pattern *pat,
                         int64_t *share)
    void hist_shares_f32(const float *x, Py_ssize_t length, const hist_pattern *pat,
                         int64_t *share)
    Py_ssize_t hist_row_cells(const int64_t *share, Py_ssize_t m, int d, int prefetch,
                              int64_t *counts, int64_t *cell, int32_t *fallback)
    int hist_set_level(int level)
    int hist_get_level()


cdef inline Py_ssize_t _search(const double *e, Py_ssize_t nb, double x) noexcept nogil:
    """Bin of lo <= x <= hi among nb bins with edges e[0..nb] (numpy's rule)."""
    cdef Py_ssize_t a = 0, b = nb, m  # invariant: e[a] <= x, and x < e[b] unless b == nb
    while b - a > 1:
        m = (a + b) >> 1
        if x >= e[m]:
            a = m
        else:
            b = m
    return a


cdef inline Py_ssize_t _bin_checked(double x, const double *e, Py_ssize_t nb, double scale,
                                    double step, uint8_t uni, bint clip,
                                    uint8_t *status) noexcept nogil:
    """Bin of x on one axis by numpy's rule, checked against the edges (no fast path). Sets
    bit 0 of ``status`` when x is outside [e[0], e[nb]] and not clipped, bit 1 when x is NaN
    or infinite (the returned bin is then 0 and must not be counted)."""
    cdef double lo = e[0], hi = e[nb]
    cdef Py_ssize_t b
    if x >= lo and x <= hi:
        if uni == 2:  # edges e[j] = j * step + lo (j < nb): computed, not loaded
            b = <Py_ssize_t>((x - lo) * scale)
            if b > nb - 1:
                b = nb - 1
            while b > 0 and x < <double>b * step + lo:
                b -= 1
            while b < nb - 1 and x >= <double>(b + 1) * step + lo:
                b += 1
        elif uni:
            b = <Py_ssize_t>((x - lo) * scale)
            if b > nb - 1:
                b = nb - 1
            while b > 0 and x < e[b]:
                b -= 1
            while b < nb - 1 and x >= e[b + 1]:
                b += 1
        else:
            b = _search(e, nb, x)
        return b
    if x - x != 0.0:  # NaN or an infinity (edges are finite)
        status[0] |= 2
        return 0
    if clip:
        return 0 if x < lo else nb - 1
    status[0] |= 1
    return 0


cdef enum:
    BLOCK = 512  # rows binned axis by axis before their counts are incremented
    PREFETCH_AHEAD = 16  # increments whose cache line is requested in advance
    VBLOCK = 256  # rows per block of the vector path (multiple of 4; shares stay in L1)


cdef int64_t _count_fill(const floating *sample, Py_ssize_t n, Py_ssize_t d,  # IN
                         const double *edges, const int64_t *offsets,  # IN
                         const int64_t *nbins, const int64_t *strides,  # IN
                         const double *scales, const double *steps,  # IN
                         const double *margins,  # IN
                         const uint8_t *uniform, bint clip,  # IN
                         int64_t *counts,  # IN/OUT: += 1 per counted point
                         int64_t *nonfinite) noexcept nogil:  # OUT
    """Count the rows of a C-contiguous (n, d) sample; returns the number of rows not counted.

    Rows go in blocks: for each axis, every row of the block gets its bin (the per-axis constants
    stay in registers), then the block's cells are incremented together. On grids larger than
    L2 the cache line of a row's count is requested (prefetched for writing) as soon as its last
    axis is binned, so the misses of the increments overlap with binning the rest of the block.
    ``status`` marks the rows not counted.
    """
    cdef int64_t cell[BLOCK]
    cdef int64_t zeros[BLOCK]
    cdef int64_t *base
    cdef uint8_t status[BLOCK]  # bit 0: outside the range (dropped); bit 1: NaN or infinite
    cdef Py_ssize_t i0, m, i, k, b, nb
    cdef int64_t dropped = 0, bad = 0, stride
    cdef double x, lo, scale, step, mg, t, f, half_nb, half_width
    cdef const double *e
    cdef const floating *col
    cdef uint8_t uni
    cdef int64_t total_cells = 1
    for k in range(d):
        total_cells *= nbins[k]
    cdef bint prefetch = total_cells >= prefetch_cells
    cdef bint early = False
    memset(zeros, 0, sizeof(zeros))
    i0 = 0
    while i0 < n:
        m = min(<Py_ssize_t>BLOCK, n - i0)
        memset(status, 0, m)
        for k in range(d):
            e = edges + offsets[k]
            nb = <Py_ssize_t>nbins[k]
            lo = e[0]
            scale = scales[k]
            step = steps[k]
            mg = margins[k]
            half_width = 0.5 - mg  # <= 0 (never true) when the fast path is off
            early = prefetch and k == d - 1 and prefetch_mode == 1
            stride = strides[k]
            uni = uniform[k]
            col = sample + i0 * d + k
            half_nb = 0.5 * <double>nb
            # axis 0 writes the cells, the others add to them
            if k == 0:
                base = &zeros[0]
            else:
                base = &cell[0]
            for i in range(m):
                x = <double>col[i * d]
                # Fast path: t = (x - lo) * scale at least `mg` away from an integer b. Then
                # e[b] <= x < e[b + 1] is proven (module docstring), and no edge is touched.
                t = (x - lo) * scale
                # 0 <= t < K as one comparison: fl(t - K/2) is monotone in t, so |.| < K/2
                # only for t in [0, K) (never for NaN); then mg < frac(t) < 1 - mg likewise
                if fabs(t - half_nb) < half_nb:
                    b = <Py_ssize_t>t
                    f = t - <double>b  # exact
                    if fabs(f - 0.5) < half_width:
                        cell[i] = base[i] + b * stride
                        if early:  # the last axis: the cell is known, request its line now
                            HIST_PREFETCH_W(&counts[cell[i]])
                        continue
                b = _bin_checked(x, e, nb, scale, step, uni, clip, &status[i])
                cell[i] = base[i] + b * stride
        if prefetch and prefetch_mode == 0:
            for i in range(min(m, <Py_ssize_t>PREFETCH_AHEAD)):
                HIST_PREFETCH_W(&counts[cell[i]])
        for i in range(m):
            if prefetch and prefetch_mode == 0 and i + PREFETCH_AHEAD < m:
                HIST_PREFETCH_W(&counts[cell[i + PREFETCH_AHEAD]])
            if status[i] == 0:
                counts[cell[i]] += 1
            else:
                dropped += 1
                if status[i] & 2:
                    bad += 1
        i0 += m
    nonfinite[0] = bad
    return dropped


cdef int64_t _count_vector(const floating *sample, Py_ssize_t n, Py_ssize_t d,  # IN
                           const double *edges, const int64_t *offsets,  # IN
                           const int64_t *nbins, const int64_t *strides,  # IN
                           const double *scales, const double *steps,  # IN
                           const double *margins,  # IN
                           const uint8_t *uniform, bint clip,  # IN
                           int64_t *counts,  # IN/OUT: += 1 per counted point
                           int64_t *nonfinite) noexcept nogil:  # OUT
    """_count_fill for d <= HIST_MAX_D axes that all have the fast path (margins < 0.5), several
    points at a time (histogram_simd.h): a block of rows is read as one flat array, each value
    gets its share floor(t) * stride of the cell or a flag, the shares of a row are summed; a
    row with a flagged value (near an edge, outside the range, NaN) is binned again by the
    checked scalar path. Same counts as _count_fill, bit for bit."""
    cdef int64_t share[VBLOCK * 16]  # HIST_MAX_D = 16 (hist_pattern holds 4 * 16 entries)
    cdef int64_t cell[VBLOCK]
    cdef int32_t fallback[VBLOCK]
    cdef hist_pattern pat
    cdef Py_ssize_t i0, m, m4, i, j, k, q, nf
    cdef int64_t dropped = 0, bad = 0, c, total_cells = 1
    cdef uint8_t st
    cdef const floating *row
    for k in range(d):
        total_cells *= nbins[k]
    cdef bint prefetch = total_cells >= prefetch_cells
    pat.d = <int>d
    for q in range(4 * d):
        k = q % d
        pat.lo[q] = edges[offsets[k]]
        pat.scale[q] = scales[k]
        pat.nb[q] = <double>nbins[k]
        pat.width[q] = 0.5 - margins[k]
        pat.stride[q] = <double>strides[k]
    i0 = 0
    while i0 < n:
        m = min(<Py_ssize_t>VBLOCK, n - i0)
        m4 = m & ~(<Py_ssize_t>3)
        if floating is double:
            hist_shares_f64(sample + i0 * d, m4 * d, &pat, share)
        else:
            hist_shares_f32(sample + i0 * d, m4 * d, &pat, share)
        nf = hist_row_cells(share, m4, <int>d, prefetch, counts, cell, fallback)
        if prefetch:
            for i in range(m4):
                if cell[i] >= 0:
                    counts[cell[i]] += 1
        for i in range(m4, m):
            fallback[nf] = <int32_t>i
            nf += 1
        for j in range(nf):  # some value needs the checked path: the whole row again
            row = sample + (i0 + fallback[j]) * d
            st = 0
            c = 0
            for k in range(d):
                c += strides[k] * _bin_checked(<double>row[k], edges + offsets[k],
                                               <Py_ssize_t>nbins[k], scales[k], steps[k],
                                               uniform[k], clip, &st)
            if st == 0:
                counts[c] += 1
            else:
                dropped += 1
                if st & 2:
                    bad += 1
        i0 += m
    nonfinite[0] = bad
    return dropped


def count_into(const floating[:, ::1] sample, const double[::1] edges, const int64_t[::1] offsets,
               const int64_t[::1] nbins, const int64_t[::1] strides, const double[::1] scales,
               const double[::1] steps, const double[::1] margins,
               const uint8_t[::1] uniform, bint clip,
               int64_t[::1] counts):
    """Add the cell counts of ``sample`` (n, d) into the flat C-order ``counts``.

    Axis k has ``nbins[k]`` bins with edges ``edges[offsets[k] : offsets[k] + nbins[k] + 1]``
    (strictly increasing, finite), C-order stride ``strides[k]``. ``uniform[k]``: 0 for
    arbitrary edges (binary search); 1 when they are numpy.linspace(lo, hi, nbins[k] + 1), with
    ``scales[k]`` = nbins[k] / (hi - lo) for the first guess, corrected against the loaded edges;
    2 when moreover every edge but the last equals ``j * steps[k] + lo`` computed in doubles (the
    caller checked it), so the correction computes the edges instead of loading them (large
    grids: no cache miss on the edge array). ``margins[k]``: the fast path's margin (>= 0.5
    disables it; give 0.5 or more unless ``uniform[k] == 2``).
    Counting runs on the block path (module docstring) when every axis has the fast path, d <= 16
    and the CPU has AVX2, otherwise axis by axis; both give the same counts.
    Nothing is validated here (the Python layer does it once). Returns ``(not_counted,
    nonfinite)``: rows not counted (outside the range with ``clip`` false, or non-finite) and,
    among them, rows holding a NaN or an infinity.
    """
    cdef Py_ssize_t n = sample.shape[0], d = sample.shape[1], parts = 1
    cdef int64_t dropped = 0, bad = 0
    if n == 0:
        return 0, 0
    cdef bint vector = use_vector and d <= HIST_MAX_D
    cdef Py_ssize_t k
    for k in range(d):
        vector = vector and margins[k] < 0.5
    if n >= THREAD_MIN:
        parts = min(get_limit(), n // max(8 * counts.shape[0], 1), n // (THREAD_MIN // 4))
    if parts >= 2:
        job = _CountParts(np.asarray(sample), parts, counts.shape[0],
                          (edges, offsets, nbins, strides, scales, steps, margins, uniform))
        job.vector, job.clip, job.counts = vector, clip, &counts[0]
        job.edges, job.offsets, job.nbins, job.strides = &edges[0], &offsets[0], &nbins[0], &strides[0]
        job.scales, job.steps, job.margins, job.uniform = &scales[0], &steps[0], &margins[0], &uniform[0]
        run_blocks(job, parts)
        np.add(counts, np.sum(job.private, axis=0), out=np.asarray(counts))
        return int(np.sum(job.dropped)), int(np.sum(job.bad))
    with nogil:
        dropped = _count_rows(&sample[0, 0], n, d, &edges[0], &offsets[0], &nbins[0],
                              &strides[0], &scales[0], &steps[0], &margins[0], &uniform[0],
                              clip, vector, &counts[0], &bad)
    return int(dropped), int(bad)


cdef int64_t _count_rows(const floating *sample, Py_ssize_t n, Py_ssize_t d, const double *edges,
                         const int64_t *offsets, const int64_t *nbins, const int64_t *strides,
                         const double *scales, const double *steps, const double *margins,
                         const uint8_t *uniform, bint clip, bint vector, int64_t *counts,
                         int64_t *nonfinite) noexcept nogil:
    if vector:
        return _count_vector(sample, n, d, edges, offsets, nbins, strides, scales, steps,
                             margins, uniform, clip, counts, nonfinite)
    return _count_fill(sample, n, d, edges, offsets, nbins, strides, scales, steps, margins,
                       uniform, clip, counts, nonfinite)


# Threaded counting (module docstring) from this many points.
THREAD_MIN = 1 << 20


cdef class _CountParts:
    """count_into over `parts` contiguous row ranges: part 0 into the caller's counts, part p
    into private[p - 1] (added by the caller afterwards)."""
    cdef object sample  # float64 or float32 (n, d)
    cdef Py_ssize_t n, d, parts
    cdef bint vector, clip
    cdef const double *edges
    cdef const int64_t *offsets
    cdef const int64_t *nbins
    cdef const int64_t *strides
    cdef const double *scales
    cdef const double *steps
    cdef const double *margins
    cdef const uint8_t *uniform
    cdef int64_t *counts
    cdef public object private, dropped, bad
    cdef object keep

    def __cinit__(self, sample, Py_ssize_t parts, Py_ssize_t cells, keep):
        self.sample = sample
        self.n, self.d = sample.shape[0], sample.shape[1]
        self.parts = parts
        self.private = np.zeros((parts - 1, cells), dtype=np.int64)
        self.dropped = np.zeros(parts, dtype=np.int64)
        self.bad = np.zeros(parts, dtype=np.int64)
        self.keep = keep

    def __call__(self, Py_ssize_t p):
        cdef Py_ssize_t lo = self.n * p // self.parts, hi = self.n * (p + 1) // self.parts
        cdef int64_t[:, ::1] private = self.private
        cdef int64_t[::1] dropped = self.dropped, bad = self.bad
        cdef int64_t *out = self.counts if p == 0 else &private[p - 1, 0]
        cdef const double[:, ::1] x64
        cdef const float[:, ::1] x32
        if self.sample.dtype == np.float64:
            x64 = self.sample
            with nogil:
                dropped[p] = _count_rows(&x64[lo, 0], hi - lo, self.d, self.edges, self.offsets,
                                         self.nbins, self.strides, self.scales, self.steps,
                                         self.margins, self.uniform, self.clip, self.vector, out,
                                         &bad[p])
        else:
            x32 = self.sample
            with nogil:
                dropped[p] = _count_rows(&x32[lo, 0], hi - lo, self.d, self.edges, self.offsets,
                                         self.nbins, self.strides, self.scales, self.steps,
                                         self.margins, self.uniform, self.clip, self.vector, out,
                                         &bad[p])


cdef int64_t prefetch_cells = 1 << 17  # grids above 1 MiB of counts: prefetch (no gain in L2)


cdef int prefetch_mode = 1
cdef bint use_vector = hist_set_level(1) == 1  # by default the block path only with AVX2


def _simd_level(level=None):
    """Test hook: the counting path in use; set it with ``level``. -1: the scalar axis-by-axis
    loop only; 0: the block path, portable C; 1: the block path with AVX2 when the CPU has it
    (0 otherwise). The default is 1 with AVX2, -1 without (the portable block path is no faster
    than the axis-by-axis loop). Returns the level in force."""
    global use_vector
    if level is not None:
        use_vector = int(level) >= 0
        hist_set_level(max(int(level), 0))
    return hist_get_level() if use_vector else -1


def _set_prefetch_cells(int64_t cells, int mode=1):
    """Tuning hook (benchmarks, tests): prefetch the counts' cache lines on grids of >= cells,
    when the last axis is binned (mode 1) or a few increments ahead (mode 0); the block path
    prefetches when a row's cell is known, whatever the mode."""
    global prefetch_cells, prefetch_mode
    prefetch_cells = cells
    prefetch_mode = mode
