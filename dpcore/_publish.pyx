# cython: language_level=3
"""Data-publishing kernel: complete k-ary count trees (exact sums, Hay et al.'s constrained
inference, range sums from a consistent tree) and the binary-tree mechanism for continual
counting.

Trees are flat arrays, level by level from the root: level d holds k**d nodes starting at
(k**d - 1) / (k - 1), and the children of node j of level d are nodes k*j .. k*j + k - 1 of
level d + 1. The last level holds the leaves.

No randomness is drawn here: the caller (dpcore.publish) validates every argument and passes
the exact integer noise it drew, so the kernels are deterministic functions of their inputs.
"""
from libc.stdint cimport int64_t, uint64_t

import numpy as np


cdef extern from "dpc_bits.h" nogil:
    int dpc_ctz64(uint64_t w)


cdef enum:
    MAX_LEVELS = 64  # k >= 2 and k**(levels-1) <= 2**28 leaves give at most 29 levels


cdef inline void _offsets(Py_ssize_t k, Py_ssize_t levels, Py_ssize_t *off,
                          Py_ssize_t *width) noexcept nogil:
    """off[d] = first node of level d, width[d] = k**d nodes (levels <= MAX_LEVELS)."""
    cdef Py_ssize_t d
    off[0] = 0
    width[0] = 1
    for d in range(1, levels):
        off[d] = off[d - 1] + width[d - 1]
        width[d] = width[d - 1] * k


def tree_from_leaves(const int64_t[::1] leaves,  # IN (k**(levels-1),)
                     Py_ssize_t k, Py_ssize_t levels,
                     int64_t[::1] out):  # OUT (number of nodes,)
    """Exact node counts: the leaves copied to the last level, every other node the sum of its
    children (int64; the caller keeps the total below 2**62)."""
    cdef Py_ssize_t off[MAX_LEVELS]
    cdef Py_ssize_t width[MAX_LEVELS]
    cdef Py_ssize_t d, j, c, child
    cdef int64_t s
    with nogil:
        _offsets(k, levels, off, width)
        for j in range(width[levels - 1]):
            out[off[levels - 1] + j] = leaves[j]
        for d in range(levels - 2, -1, -1):
            for j in range(width[d]):
                child = off[d + 1] + k * j
                s = 0
                for c in range(k):
                    s += out[child + c]
                out[off[d] + j] = s


def consistent_tree(const double[::1] noisy,  # IN (number of nodes,)
                    Py_ssize_t k, Py_ssize_t levels,
                    double[::1] out):  # OUT (number of nodes,), may not alias noisy
    """Hay-Rastogi-Miklau-Suciu constrained inference: the least-squares tree (every parent
    equal to the sum of its children) closest to ``noisy`` in the L2 norm, in two O(nodes)
    passes.

    Up (node of height i, leaves at height 1): z = a_i noisy + b_i sum(z of children) with
    a_i = (k**i - k**(i-1)) / (k**i - 1), b_i = (k**(i-1) - 1) / (k**i - 1): the inverse-variance
    combination of the node's own measurement and its children's estimate. Down: each child
    gets an equal share of what its parent's final value and the children's z disagree by.
    """
    cdef Py_ssize_t off[MAX_LEVELS]
    cdef Py_ssize_t width[MAX_LEVELS]
    cdef Py_ssize_t d, j, c, child, last = levels - 1
    cdef double s, a, b, ki, ki1, adj, kd = <double>k
    with nogil:
        _offsets(k, levels, off, width)
        for j in range(width[last]):
            out[off[last] + j] = noisy[off[last] + j]
        ki1 = kd  # k**(i-1) for the height i of level d (the level above the leaves: i = 2)
        for d in range(last - 1, -1, -1):
            ki = ki1 * kd
            a = (ki - ki1) / (ki - 1.0)
            b = (ki1 - 1.0) / (ki - 1.0)
            for j in range(width[d]):
                child = off[d + 1] + k * j
                s = 0.0
                for c in range(k):
                    s += out[child + c]
                out[off[d] + j] = a * noisy[off[d] + j] + b * s
            ki1 = ki
        for d in range(last):
            for j in range(width[d]):
                child = off[d + 1] + k * j
                s = 0.0
                for c in range(k):
                    s += out[child + c]
                adj = (out[off[d] + j] - s) / kd
                for c in range(k):
                    out[child + c] += adj


def range_sums(const double[::1] tree,  # IN a consistent tree (number of nodes,)
               Py_ssize_t k, Py_ssize_t levels,
               const int64_t[::1] lo, const int64_t[::1] hi,  # IN leaf ranges [lo, hi)
               double[::1] out):  # OUT (len(lo),)
    """Sum of leaves lo..hi-1 from the fewest nodes of a consistent tree: at each level, from
    the leaves up, the nodes that stick out of the parent-aligned middle (at most 2 (k - 1)
    per level, O(k log_k N) per range). 0 <= lo <= hi <= k**(levels-1), checked by the caller."""
    cdef Py_ssize_t off[MAX_LEVELS]
    cdef Py_ssize_t width[MAX_LEVELS]
    cdef Py_ssize_t q, d
    cdef int64_t a, b
    cdef double s
    with nogil:
        _offsets(k, levels, off, width)
        for q in range(lo.shape[0]):
            a = lo[q]
            b = hi[q]
            s = 0.0
            d = levels - 1
            while a < b:
                while a < b and a % k != 0:
                    s += tree[off[d] + a]
                    a += 1
                while a < b and b % k != 0:
                    b -= 1
                    s += tree[off[d] + b]
                a //= k
                b //= k
                d -= 1
            out[q] = s


def counter_extend(int64_t[::1] psum,  # IN/OUT exact dyadic block sums, one per level
                   int64_t[::1] noisy,  # IN/OUT the same blocks with their noise
                   int64_t t,  # steps taken so far
                   int64_t last,  # the count released at step t (0 before the first)
                   const int64_t[::1] events,  # IN the new events
                   int64_t bound,  # events are clipped to [0, bound]
                   const int64_t[::1] noise,  # IN one noise draw per new step
                   int64_t[::1] out):  # OUT the noisy running count after each new event
    """Binary-tree mechanism (Chan-Shi-Song; Dwork-Naor-Pitassi-Rothblum), streaming.

    At step t the dyadic blocks of levels below i = ctz(t) close into the block of level i
    (ending at t), which gets its one noise draw; the release is the sum of the noisy blocks of
    t's binary decomposition, kept incrementally (O(1) amortised per event). Returns the last
    release. The caller keeps t + len(events) within the horizon, so every level index is
    below the length of psum/noisy, and bound * horizon below 2**62.
    """
    cdef Py_ssize_t n, j, i
    cdef int64_t x, s, dropped
    with nogil:
        for n in range(events.shape[0]):
            x = events[n]
            if x < 0:  # clipping, not rejecting: an error would reveal the event
                x = 0
            elif x > bound:
                x = bound
            t += 1
            i = dpc_ctz64(<uint64_t>t)
            s = x
            dropped = 0
            for j in range(i):
                s += psum[j]
                dropped += noisy[j]
            psum[i] = s
            noisy[i] = s + noise[n]
            last = last - dropped + noisy[i]
            out[n] = last
    return last


def rect_sums(const double[::1] tree,  # IN a consistent tree with k = c * c
              Py_ssize_t c, Py_ssize_t levels,
              const int64_t[:, ::1] lo, const int64_t[:, ::1] hi,  # IN (q, 2) [lo, hi) cells
              double[::1] out):  # OUT (q,)
    """Sum of the cells of rectangles [lo0, hi0) x [lo1, hi1) from a consistent quadtree-like
    tree: node j of level d is the block of c**(levels-1-d) x c**(levels-1-d) cells whose
    Morton digits (row digit * c + column digit per level) spell j. Depth-first from the root:
    a block inside the rectangle is read whole, a block that overlaps it is split into its
    c * c children, a disjoint one is skipped. The caller checks 0 <= lo <= hi <= c**(levels-1)
    on both axes."""
    cdef Py_ssize_t off[MAX_LEVELS]
    cdef Py_ssize_t width[MAX_LEVELS]
    cdef int64_t side[MAX_LEVELS]
    # explicit stack of (level, index, block row, block column): depth x (c*c - 1) + 1 entries
    cdef int64_t[:, ::1] stack = _stack_for(c, levels)
    cdef Py_ssize_t q, top, d, a, b, k = c * c
    cdef int64_t j, bi, bj, s, r0, r1, c0, c1
    cdef double total
    with nogil:
        _offsets(k, levels, off, width)
        side[levels - 1] = 1
        for d in range(levels - 2, -1, -1):
            side[d] = side[d + 1] * c
        for q in range(lo.shape[0]):
            r0 = lo[q, 0]
            c0 = lo[q, 1]
            r1 = hi[q, 0]
            c1 = hi[q, 1]
            total = 0.0
            if r0 < r1 and c0 < c1:
                stack[0, 0] = 0
                stack[0, 1] = 0
                stack[0, 2] = 0
                stack[0, 3] = 0
                top = 1
                while top > 0:
                    top -= 1
                    d = stack[top, 0]
                    j = stack[top, 1]
                    bi = stack[top, 2]
                    bj = stack[top, 3]
                    s = side[d]
                    if bi * s >= r1 or (bi + 1) * s <= r0 or bj * s >= c1 or (bj + 1) * s <= c0:
                        continue
                    if r0 <= bi * s and (bi + 1) * s <= r1 and c0 <= bj * s and (bj + 1) * s <= c1:
                        total += tree[off[d] + j]
                        continue
                    for a in range(c):
                        for b in range(c):
                            stack[top, 0] = d + 1
                            stack[top, 1] = j * k + a * c + b
                            stack[top, 2] = bi * c + a
                            stack[top, 3] = bj * c + b
                            top += 1
            out[q] = total


cdef int64_t[:, ::1] _stack_for(Py_ssize_t c, Py_ssize_t levels):
    return np.empty((levels * (c * c - 1) + 2, 4), dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# Privelet: the unnormalised Haar transform along the last axis of a (rows, n) array, n = 2**L.
# Coefficients in heap order: c[0] = the row's total, c[j] (1 <= j < n) = (sum of the left half)
# - (sum of the right half) of node j, whose children are 2j and 2j + 1 and whose leaves are the
# heap positions n .. 2n - 1. With integer counts every coefficient is an exact integer, and one
# count changing by 1 moves the total and the L = log2 n ancestors' differences by 1 each.

ctypedef fused haar_t:
    int64_t
    double


def haar_forward(const haar_t[:, ::1] x,  # IN (rows, n)
                 haar_t[:, ::1] out,  # OUT (rows, n)
                 haar_t[::1] work):  # scratch (2n,)
    """Forward unnormalised Haar transform of every row (exact for int64)."""
    cdef Py_ssize_t r, j, n = x.shape[1]
    with nogil:
        for r in range(x.shape[0]):
            for j in range(n):
                work[n + j] = x[r, j]
            for j in range(n - 1, 0, -1):
                work[j] = work[2 * j] + work[2 * j + 1]
                out[r, j] = work[2 * j] - work[2 * j + 1]
            out[r, 0] = work[1] if n > 1 else work[n]


def haar_inverse(const double[:, ::1] c,  # IN (rows, n) coefficients, heap order
                 double[:, ::1] out,  # OUT (rows, n)
                 double[::1] work):  # scratch (2n,)
    """Inverse of haar_forward: top-down, a node's halves are (sum +- difference) / 2."""
    cdef Py_ssize_t r, j, n = c.shape[1]
    with nogil:
        for r in range(c.shape[0]):
            work[1] = c[r, 0]
            if n == 1:
                out[r, 0] = c[r, 0]
                continue
            for j in range(1, n):
                work[2 * j] = 0.5 * (work[j] + c[r, j])
                work[2 * j + 1] = 0.5 * (work[j] - c[r, j])
            for j in range(n):
                out[r, j] = work[n + j]


# ------------------------------------------------------------------------------------------------
# MWEM over a workload of interval queries [lo, hi) of a 1-d domain: all answers from one prefix
# sum (O(n + m) instead of O(n m)), and multiplicative-weights updates in O(sqrt n): a 0/1 query
# multiplies its cells by one factor (whole blocks through a block multiplier) and the rest only
# renormalises, which is deferred into a running sum.

from libc.math cimport exp


def range_answers(const double[::1] a,  # IN (n,) weights
                  const int64_t[::1] lo, const int64_t[::1] hi,  # IN (m,) intervals [lo, hi)
                  double[::1] prefix,  # scratch (n + 1,)
                  double[::1] out):  # OUT (m,)
    """out[q] = sum(a[lo[q]:hi[q]]); the caller checks 0 <= lo <= hi <= n."""
    cdef Py_ssize_t j, q
    with nogil:
        prefix[0] = 0.0
        for j in range(a.shape[0]):
            prefix[j + 1] = prefix[j] + a[j]
        for q in range(lo.shape[0]):
            out[q] = prefix[hi[q]] - prefix[lo[q]]


cdef inline double _block_range_sum(const double *a, const double *bsum, const double *bmul,
                                    Py_ssize_t width, Py_ssize_t lo,
                                    Py_ssize_t hi) noexcept nogil:
    """True sum of cells lo..hi-1 (cell j's value is a[j] * bmul[j // width]; bsum holds
    each block's true sum)."""
    cdef Py_ssize_t j, b, first = lo // width, last = (hi - 1) // width
    cdef double part = 0.0, edge
    if lo >= hi:
        return 0.0
    if first == last:
        for j in range(lo, hi):
            part += a[j]
        return part * bmul[first]
    edge = 0.0
    for j in range(lo, (first + 1) * width):
        edge += a[j]
    part = edge * bmul[first]
    for b in range(first + 1, last):
        part += bsum[b]
    edge = 0.0
    for j in range(last * width, hi):
        edge += a[j]
    return part + edge * bmul[last]


cdef inline void _block_range_scale(double *a, double *bsum, double *bmul, Py_ssize_t width,
                                    Py_ssize_t lo, Py_ssize_t hi, double factor) noexcept nogil:
    """Multiply the true values of cells lo..hi-1 by factor: whole blocks through their
    multiplier, the ragged ends cell by cell (their block sums follow)."""
    cdef Py_ssize_t j, b, first = lo // width, last = (hi - 1) // width
    cdef double edge
    if lo >= hi:
        return
    if first == last:
        edge = 0.0
        for j in range(lo, hi):
            edge += a[j]
            a[j] *= factor
        bsum[first] += edge * bmul[first] * (factor - 1.0)
        return
    edge = 0.0
    for j in range(lo, (first + 1) * width):
        edge += a[j]
        a[j] *= factor
    bsum[first] += edge * bmul[first] * (factor - 1.0)
    for b in range(first + 1, last):
        bmul[b] *= factor
        bsum[b] *= factor
    edge = 0.0
    for j in range(last * width, hi):
        edge += a[j]
        a[j] *= factor
    bsum[last] += edge * bmul[last] * (factor - 1.0)


def mw_ranges(double[::1] a,  # IN/OUT (n,) weights summing to total
              const int64_t[::1] lo, const int64_t[::1] hi,  # IN measured intervals
              const double[::1] measured,  # IN their noisy answers
              Py_ssize_t first,  # apply measurements first .. count - 1 ...
              Py_ssize_t count,
              Py_ssize_t sweeps,  # ... once, then all 0 .. count - 1 this many more times
              double total,
              Py_ssize_t width,  # block width (about sqrt(n))
              double[::1] bsum, double[::1] bmul):  # scratch (ceil(n / width),)
    """Multiplicative weights (Hardt-Ligett-McSherry): for each measurement in turn,
    a[lo:hi] *= exp((m - answer(a)) / (2 total)), then a is renormalised to sum to total.

    Blocks of ``width`` cells carry a multiplier and their true sum, so an interval's sum and
    its scaling cost O(width + n / width) instead of O(hi - lo); the renormalisation is kept
    as one running sum s (the true weights are a * bmul * total / s). Everything is folded
    back into ``a`` at the end (O(n))."""
    cdef Py_ssize_t n = a.shape[0], nb = bsum.shape[0], j, b, k, step, start
    cdef double s = 0.0, part, factor, half = 0.5 / total
    with nogil:
        for b in range(nb):
            bmul[b] = 1.0
            bsum[b] = 0.0
        for j in range(n):
            bsum[j // width] += a[j]
        for b in range(nb):
            s += bsum[b]
        for step in range(sweeps + 1):
            start = first if step == 0 else 0
            for k in range(start, count):
                part = _block_range_sum(&a[0], &bsum[0], &bmul[0], width, lo[k], hi[k])
                factor = exp((measured[k] - part * total / s) * half)
                _block_range_scale(&a[0], &bsum[0], &bmul[0], width, lo[k], hi[k], factor)
                s += part * (factor - 1.0)
                if s > 1e200 or s < 1e-200:  # rescale before the weights under/overflow
                    for b in range(nb):
                        bmul[b] *= total / s
                        bsum[b] *= total / s
                    s = total
        factor = total / s
        for j in range(n):
            a[j] *= bmul[j // width] * factor
