# cython: language_level=3
"""Counting loops over CSR adjacency: the kernel behind dpcore.graph_stats.

A simple undirected graph on vertices 0..n-1 is held as CSR: the neighbours of vertex i are
``indices[indptr[i]:indptr[i + 1]]``, sorted increasingly. The Python layer validates the edges
(distinct pairs u < v, ids in range) once; nothing here validates.

* :func:`csr_adjacency`: CSR from the validated edge arrays (counting sort, O(n + m)).
* :func:`count_triangles`: the number of triangles, by merging the sorted neighbour lists of the
  two ends of every edge u < v and counting common neighbours w > v (each triangle u < v < w is
  counted once), O(sum over edges of the degrees).
* :func:`pair_profile`: for every c, the largest b over the vertex pairs {i, j} with c common
  neighbours, b being the number of other vertices adjacent to exactly one of i, j (the two
  numbers the triangle count's local sensitivity at distance s depends on). Pairs with c >= 1 are
  found from the wedges i - w - k (O(sum of squared degrees)); for c = 0 each vertex scans the
  vertices in decreasing degree order and stops at the first one that can no longer improve.
* :func:`star_profile`: for every p, the largest q over vertex pairs whose degrees not counting
  each other are p >= q (the k-star count's local sensitivity depends on these), O(n + m).
* :func:`project_degrees`: degrees after the edge-addition projection to a maximum degree, O(m).
* :func:`isotonic_nondecreasing`: the least-squares nondecreasing fit (pool adjacent violators).
"""
from libc.stdint cimport int32_t, int64_t

import numpy as np


def csr_adjacency(Py_ssize_t n, const int32_t[::1] u, const int32_t[::1] v):
    """(indptr int64 (n + 1,), indices int32 (2 m,)) with each row sorted increasingly, for the
    distinct edges (u[e], v[e]), 0 <= u < v < n, given sorted by (u, v) (not checked)."""
    cdef Py_ssize_t m = u.shape[0]
    cdef Py_ssize_t e, i
    indptr_arr = np.zeros(n + 1, dtype=np.int64)
    indices_arr = np.empty(2 * m, dtype=np.int32)
    cdef int64_t[::1] indptr = indptr_arr          # OUT
    cdef int32_t[::1] indices = indices_arr        # OUT
    cdef int64_t[::1] fill = np.empty(n, dtype=np.int64)
    with nogil:
        for e in range(m):
            indptr[u[e] + 1] += 1
            indptr[v[e] + 1] += 1
        for i in range(n):
            indptr[i + 1] += indptr[i]
            fill[i] = indptr[i]
        # edges sorted by (u, v): row r receives first its smaller neighbours u (as the v end,
        # in increasing u order), then its larger ones v (as the u end, increasing): sorted rows
        for e in range(m):
            indices[fill[v[e]]] = u[e]
            fill[v[e]] += 1
        for e in range(m):
            indices[fill[u[e]]] = v[e]
            fill[u[e]] += 1
    return indptr_arr, indices_arr


cdef int64_t _count_triangles(const int64_t *indptr, const int32_t *indices,
                              Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t a, p, p2, q, pe, qe
    cdef int32_t b, x, y
    cdef int64_t total = 0
    for a in range(n):
        for p in range(indptr[a], indptr[a + 1]):
            b = indices[p]
            if b <= a:
                continue
            # common neighbours w > b of a and b: merge the tails of both rows above b
            q = indptr[b]
            qe = indptr[b + 1]
            pe = indptr[a + 1]
            p2 = p + 1
            while p2 < pe and q < qe:
                x = indices[p2]
                y = indices[q]
                if y <= b:
                    q += 1
                elif x < y:
                    p2 += 1
                elif y < x:
                    q += 1
                else:
                    total += 1
                    p2 += 1
                    q += 1
    return total


def count_triangles(const int64_t[::1] indptr, const int32_t[::1] indices):
    """Number of triangles of the CSR graph (rows sorted)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef int64_t out
    if indices.shape[0] == 0:
        return 0
    with nogil:
        out = _count_triangles(&indptr[0], &indices[0], n)
    return int(out)


cdef void _pair_profile(const int64_t *indptr, const int32_t *indices, Py_ssize_t n,
                        const int64_t *order,    # IN vertices by nonincreasing degree
                        int32_t *cnt,            # scratch, n zeros (left zero)
                        char *adj,               # scratch, n zeros (left zero)
                        int32_t *touched,        # scratch, n
                        int64_t *maxb            # OUT, n - 1 entries, -1 = no pair
                        ) noexcept nogil:
    cdef Py_ssize_t i, p, q, t, r, n_touched
    cdef int32_t w, k
    cdef int64_t j, di, dk, c, b
    for i in range(n):
        di = indptr[i + 1] - indptr[i]
        n_touched = 0
        for p in range(indptr[i], indptr[i + 1]):
            w = indices[p]
            adj[w] = 1
            for q in range(indptr[w], indptr[w + 1]):
                k = indices[q]
                if k == i:
                    continue
                if cnt[k] == 0:
                    touched[n_touched] = k
                    n_touched += 1
                cnt[k] += 1
        for t in range(n_touched):
            k = touched[t]
            if k > i:  # each unordered pair once
                c = cnt[k]
                dk = indptr[k + 1] - indptr[k]
                b = di + dk - 2 * adj[k] - 2 * c
                if b > maxb[c]:
                    maxb[c] = b
        # c = 0: the vertex j != i with no common neighbour maximising d_i + d_j - 2 a_ij
        for r in range(n):
            j = order[r]
            dk = indptr[j + 1] - indptr[j]
            if di + dk <= maxb[0]:
                break  # nothing later can beat the best (degrees only decrease)
            if j == i or cnt[j] != 0:
                continue
            b = di + dk - 2 * adj[j]
            if b > maxb[0]:
                maxb[0] = b
            if adj[j] == 0:
                break  # the best non-neighbour: later ones have smaller degrees
        for t in range(n_touched):
            cnt[touched[t]] = 0
        for p in range(indptr[i], indptr[i + 1]):
            adj[indices[p]] = 0


def pair_profile(const int64_t[::1] indptr, const int32_t[::1] indices, const int64_t[::1] order):
    """int64 array maxb of length n - 1: maxb[c] = max b_ij over the pairs i != j with c_ij = c
    common neighbours (b_ij: other vertices adjacent to exactly one of i, j), -1 when no pair
    has c common neighbours. ``order``: the vertices by nonincreasing degree. n >= 2."""
    cdef Py_ssize_t n = indptr.shape[0] - 1
    out = np.full(n - 1, -1, dtype=np.int64)
    cdef int64_t[::1] maxb = out
    cdef int32_t[::1] cnt = np.zeros(n, dtype=np.int32)
    cdef char[::1] adj = np.zeros(n, dtype=np.int8).view(np.byte)
    cdef int32_t[::1] touched = np.empty(n, dtype=np.int32)
    cdef int32_t dummy = 0
    cdef const int32_t *ind = &indices[0] if indices.shape[0] > 0 else &dummy
    with nogil:
        _pair_profile(&indptr[0], ind, n, &order[0], &cnt[0], &adj[0], &touched[0], &maxb[0])
    return out


def isotonic_nondecreasing(const double[::1] y):
    """The nondecreasing x minimising sum (x_i - y_i)**2 (pool adjacent violators, O(n))."""
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t i, k, r, top = 0
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] x = out
    cdef double[::1] total = np.empty(n, dtype=np.float64)
    cdef int64_t[::1] size = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    with nogil:
        for i in range(n):
            total[top] = y[i]
            size[top] = 1
            top += 1
            # merge while the last block's mean is below the previous one's
            while top > 1 and total[top - 1] * size[top - 2] < total[top - 2] * size[top - 1]:
                total[top - 2] += total[top - 1]
                size[top - 2] += size[top - 1]
                top -= 1
        i = 0
        for k in range(top):
            for r in range(size[k]):
                x[i] = total[k] / <double>size[k]
                i += 1
    return out


cdef void _star_profile(const int64_t *indptr, const int32_t *indices, Py_ssize_t n,
                        const int64_t *order,    # IN vertices by nonincreasing degree
                        int64_t *rank,           # scratch, n: rank[order[r]] = r
                        char *adj,               # scratch, n zeros (left zero)
                        int64_t *maxq            # OUT, n - 1 entries, -1 = no pair
                        ) noexcept nogil:
    cdef Py_ssize_t r, r2, p
    cdef int64_t i, j, di, dj
    for r in range(n):
        rank[order[r]] = r
    for r in range(n):
        i = order[r]
        di = indptr[i + 1] - indptr[i]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            adj[j] = 1
            if rank[j] > r:  # adjacent pair, i ranked first: (d_i - 1, d_j - 1)
                dj = indptr[j + 1] - indptr[j]
                if dj - 1 > maxq[di - 1]:
                    maxq[di - 1] = dj - 1
        for r2 in range(r + 1, n):  # the first non-neighbour ranked after i: (d_i, d_j)
            j = order[r2]
            if adj[j] == 0:
                dj = indptr[j + 1] - indptr[j]
                if dj > maxq[di]:
                    maxq[di] = dj
                break
        for p in range(indptr[i], indptr[i + 1]):
            adj[indices[p]] = 0


def star_profile(const int64_t[::1] indptr, const int32_t[::1] indices, const int64_t[::1] order):
    """int64 array maxq of length n - 1: over the pairs i != j with x_i >= x_j, where
    x_i = d_i - [i ~ j] is i's degree not counting j, maxq[p] = the largest x_j among pairs with
    x_i = p (-1: none). ``order``: the vertices by nonincreasing degree. n >= 2. O(n + m)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1
    out = np.full(n - 1, -1, dtype=np.int64)
    cdef int64_t[::1] maxq = out
    cdef int64_t[::1] rank = np.empty(n, dtype=np.int64)
    cdef char[::1] adj = np.zeros(n, dtype=np.int8).view(np.byte)
    cdef int32_t dummy = 0
    cdef const int32_t *ind = &indices[0] if indices.shape[0] > 0 else &dummy
    with nogil:
        _star_profile(&indptr[0], ind, n, &order[0], &rank[0], &adj[0], &maxq[0])
    return out


def project_degrees(Py_ssize_t n, const int32_t[::1] u, const int32_t[::1] v, int64_t bound):
    """Degrees of the edge-addition projection: the edges (u[e], v[e]) are taken in the given
    (public, data-independent) order and kept when both ends still have fewer than ``bound``
    kept edges. int64 array (n,), every entry <= bound. O(n + m)."""
    cdef Py_ssize_t m = u.shape[0]
    cdef Py_ssize_t e
    out = np.zeros(n, dtype=np.int64)
    cdef int64_t[::1] deg = out        # OUT
    with nogil:
        for e in range(m):
            if deg[u[e]] < bound and deg[v[e]] < bound:
                deg[u[e]] += 1
                deg[v[e]] += 1
    return out
