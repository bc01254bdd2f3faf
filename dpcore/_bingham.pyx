# cython: language_level=3
"""Matrix Bingham kernel: exact column draws and Hoff's column-wise Gibbs sampler.

Target: V (d x k, orthonormal columns) with density proportional to etr(V^T A V) on the Stiefel
manifold. The Python layer diagonalises A once (A = U diag(lam) U^T, lam descending) and the
kernel works in that eigenbasis, where the state is ``Vt`` (k x d, row j = column j of U^T V).

Column update (Hoff 2009): given the other columns W (r x d, orthonormal rows), column j lies on
the unit sphere of S = W^perp (dimension q = d - r) with density proportional to exp(x^T L x),
L = diag(lam). It is drawn *exactly* by Kent-Ganeiber-Mardia rejection from an angular central
Gaussian (ACG) envelope on the sphere of S:

* shift s >= mu_1, the largest eigenvalue of L compressed to S, found by bisection with an
  inertia count (below; plus a rounding margin), so that t = s - x^T L x >= 0 on S;
* envelope precision Omega = I + (2/b)(s I - L) restricted to S (positive definite there, >= I,
  although Omega itself may be indefinite on the r leading coordinates), b from the KGM
  equation sum 1/(b + 2 delta_i) = 1, with the eigenvalues delta_i of (s - L)|S approximated by
  weights p_i = 1 - sum_a W_ai^2 (exact for k = 1; b only affects speed);
* S is parametrised by the Householder basis N = Q[:, r:] of the QR factorisation W^T = Q R.
  N^T Omega N = Omega_q + (rank <= 2r), from the compact WY form Q = I - Y T Y^T, so a proposal
  y ~ N(0, (N^T Omega N)^-1) costs O(d r) after an O(d r^2) set-up (whitening by Omega_q, thin
  QR of the low-rank factor, a 2r x 2r eigenproblem), and x = N y / |y| is ACG(Omega|S);
* accept with probability exp(-t) (x^T Omega x)^(q/2) / M*, M* = exp(-(q - b)/2) (q/b)^(q/2),
  the exact bound of the KGM ratio over t >= 0.

Inertia count: for mu not an eigenvalue of L, the number of eigenvalues of L|S above mu equals
#{lam_i > mu} + #{positive eigenvalues of W diag(1/(mu - lam)) W^T} - r (Schur complement of the
bordered matrix [[L - mu, W^T], [W, 0]]).

For k = 1 (r = 0) the draw is exactly the Kent-Ganeiber-Mardia sampler with the optimal b.
"Exact" means: exact in real arithmetic; proposals use standard normals (Marsaglia's polar method
on 53-bit uniforms) and the acceptance test a full-precision uniform U* in double precision, so
the law is the target's up to floating-point rounding (a continuous mechanism; ALGORITHMS 2.6
applies). The bound needs s >= mu_1: the inertia count runs in floating point, so s carries a
margin of 1e-12 of the spread of lam, and any acceptance ratio above 1 (a violated bound) is
counted in ``counters[2]`` (the tests require it to stay 0). If Omega|S is not positive definite
in rounding, s is raised and the set-up repeated.
Not constant-time: the number of proposals is random and depends on A.

Draws happen under the generator's lock; a seed reproduces the output.
"""
import numpy as np

from libc.math cimport log, sqrt, fabs, INFINITY
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint64_t

from scipy.linalg.cython_lapack cimport dsyev

from dpcore._random cimport BitgenHandle, bitgen_t, random_u64, random_bounded, random_ustar


cdef struct Work:
    Py_ssize_t d
    int rmax
    # length d
    double *z
    double *x
    double *dplus
    double *omega
    double *isq         # Omega_q^(-1/2) on the trailing coordinates
    double *p
    double *wgt
    # d x r (column-major): reflectors of QR(W^T); d x 2r: whitened factor, then its Q; d x 2r: Z
    double *A
    double *U
    double *Z
    # small: tau (r), T (r x r), YtOY (r x r), C (2r x 2r), R (2r x 2r), K (2r x 2r), f (2r),
    # tau2 (2r), tmp (2r), G (r x r), evals (2r), LAPACK work
    double *tau
    double *T
    double *YOY
    double *C
    double *R
    double *K
    double *f
    double *tau2
    double *tmp
    double *G
    double *evals
    double *lwork
    int nlwork
    # the other columns, r x d row-major (gibbs copies them here)
    double *W
    int has_normal
    double normal
    double proposals
    double accepts
    double bound_violations


cdef inline double _uniform53(bitgen_t *bg) noexcept nogil:
    # in [0, 1), 53 bits
    return (random_u64(bg) >> 11) * (1.0 / 9007199254740992.0)


cdef inline double _normal(bitgen_t *bg, Work *w) noexcept nogil:
    """Standard normal, Marsaglia's polar method (two per accepted pair)."""
    cdef double u1, u2, s2, f
    if w.has_normal:
        w.has_normal = 0
        return w.normal
    while True:
        u1 = 2.0 * _uniform53(bg) - 1.0
        u2 = 2.0 * _uniform53(bg) - 1.0
        s2 = u1 * u1 + u2 * u2
        if s2 < 1.0 and s2 > 0.0:
            break
    f = sqrt(-2.0 * log(s2) / s2)
    w.normal = u2 * f
    w.has_normal = 1
    return u1 * f


cdef int _small_eigvals(double *M, int n, double *evals, Work *w, char jobz=b'N') noexcept nogil:
    """Eigenvalues (ascending) of the symmetric n x n matrix M (column-major upper triangle,
    overwritten; with jobz 'V' M receives the eigenvectors)."""
    cdef int info = 0
    cdef char uplo = b'U'
    cdef int lda = n
    cdef int nn = n
    dsyev(&jobz, &uplo, &nn, M, &lda, evals, w.lwork, &w.nlwork, &info)
    return info


cdef int _count_above(const double *lam, Py_ssize_t d, const double *W, int r, double mu,
                      Work *w) noexcept nogil:
    """Number of eigenvalues of diag(lam) compressed to W^perp that exceed mu (mu not in lam)."""
    cdef Py_ssize_t i
    cdef int a, b, n = 0, npos = 0
    cdef double acc
    for i in range(d):
        if lam[i] > mu:
            n += 1
        if mu == lam[i]:
            return -2             # a pole: the caller moves mu
        w.wgt[i] = 1.0 / (mu - lam[i])
    for a in range(r):
        for b in range(a + 1):
            acc = 0.0
            for i in range(d):
                acc += W[a * d + i] * W[b * d + i] * w.wgt[i]
            # row-major lower triangle == column-major upper triangle
            w.G[a * r + b] = acc
            w.G[b * r + a] = acc
    if _small_eigvals(w.G, r, w.evals, w) != 0:
        return -1
    for a in range(r):
        if w.evals[a] > 0.0:
            npos += 1
    return n + npos - r


cdef int _count_at(const double *lam, Py_ssize_t d, const double *W, int r, double *mu,
                   double lo, double hi, Work *w) noexcept nogil:
    """_count_above at mu, moved slightly inside (lo, hi) if mu hits an eigenvalue of L."""
    cdef int cnt, it
    cdef double delta = (hi - lo) * 1e-3
    for it in range(4):
        cnt = _count_above(lam, d, W, r, mu[0], w)
        if cnt != -2:
            return cnt
        mu[0] += delta
        delta *= -2.0
        if mu[0] <= lo or mu[0] >= hi:
            mu[0] = lo + (hi - lo) * (0.37 + 0.1 * it)
    return -1


cdef double _shift(const double *lam, Py_ssize_t d, const double *W, int r, double lo,
                   double guess, Work *w) noexcept nogil:
    """An upper bound (to 0.05, by an inertia-count bisection) of the top eigenvalue mu_1 of
    diag(lam) on W^perp. ``lo`` is a known lower bound; ``guess`` (or -inf) a likely value, used
    to shrink the bracket first (the chain's previous shift for this column)."""
    cdef double hi = lam[0], mid, tol = 0.05, step
    cdef int it, cnt
    if r == 0:
        return lam[0]
    if lam[r] > lo:
        lo = lam[r]               # interlacing: mu_1 >= lam_{r+1}
    if lo >= hi:
        return hi
    if guess > lo and guess < hi:
        step = 0.25
        for it in range(60):       # find hi: guess + step with no eigenvalue above
            mid = guess + step
            if mid >= hi:
                break
            cnt = _count_at(lam, d, W, r, &mid, lo, hi, w)
            if cnt < 0:
                return lam[0]
            if cnt == 0:
                hi = mid
                break
            lo = mid
            step *= 4.0
        step = 0.25
        for it in range(60):       # find lo: hi - step with an eigenvalue above
            mid = hi - step
            if mid <= lo:
                break
            cnt = _count_at(lam, d, W, r, &mid, lo, hi, w)
            if cnt < 0:
                return lam[0]
            if cnt > 0:
                lo = mid
                break
            hi = mid
            step *= 4.0
    for it in range(200):
        if hi - lo <= tol:
            break
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        cnt = _count_at(lam, d, W, r, &mid, lo, hi, w)
        if cnt < 0:
            return lam[0]        # LAPACK failure: fall back to the safe shift
        if cnt == 0:
            hi = mid
        else:
            lo = mid
    return hi


cdef double _solve_b(Py_ssize_t d, double q, Work *w) noexcept nogil:
    """b in [1, q] with sum_i p_i / (b + 2 dplus_i) = 1 (bisection; the sum decreases in b)."""
    cdef double lo = 1.0, hi = q, mid, f
    cdef Py_ssize_t i
    cdef int it
    for it in range(80):
        mid = 0.5 * (lo + hi)
        f = 0.0
        for i in range(d):
            f += w.p[i] / (mid + 2.0 * w.dplus[i])
        if f > 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * hi:
            break
    return hi


cdef void _house_qr(double *A, Py_ssize_t m, int n, Py_ssize_t lda, double *tau) noexcept nogil:
    """Unblocked Householder QR in LAPACK's dgeqr2 convention (column-major m x n, m >= 1):
    R on and above the diagonal, reflector tails below, H_j = I - tau_j v_j v_j^T, v_j[j] = 1.
    Written out (rather than dgeqrf) because the matrices are thin and BLAS threading costs more
    than the arithmetic."""
    cdef int j, c
    cdef Py_ssize_t i
    cdef double alpha, xnorm, beta, scale, acc
    for j in range(n):
        if j >= m:
            tau[j] = 0.0
            continue
        alpha = A[j + j * lda]
        xnorm = 0.0
        for i in range(j + 1, m):
            xnorm += A[i + j * lda] * A[i + j * lda]
        xnorm = sqrt(xnorm)
        if xnorm == 0.0:
            tau[j] = 0.0
            continue
        beta = -sqrt(alpha * alpha + xnorm * xnorm)
        if alpha < 0.0:
            beta = -beta
        tau[j] = (beta - alpha) / beta
        scale = 1.0 / (alpha - beta)
        for i in range(j + 1, m):
            A[i + j * lda] *= scale
        A[j + j * lda] = beta
        for c in range(j + 1, n):
            acc = A[j + c * lda]
            for i in range(j + 1, m):
                acc += A[i + j * lda] * A[i + c * lda]
            acc *= tau[j]
            A[j + c * lda] -= acc
            for i in range(j + 1, m):
                A[i + c * lda] -= acc * A[i + j * lda]


cdef void _house_form_q(const double *A, Py_ssize_t m, int n, Py_ssize_t lda, const double *tau,
                        double *Q) noexcept nogil:
    """The first n columns of H_1 ... H_n (m x n, column-major, leading dimension m)."""
    cdef int j, c
    cdef Py_ssize_t i
    cdef double acc
    for c in range(n):
        for i in range(m):
            Q[i + c * m] = 1.0 if i == c else 0.0
        for j in range(n - 1, -1, -1):
            if j >= m or tau[j] == 0.0:
                continue
            acc = Q[j + c * m]
            for i in range(j + 1, m):
                acc += A[i + j * lda] * Q[i + c * m]
            acc *= tau[j]
            Q[j + c * m] -= acc
            for i in range(j + 1, m):
                Q[i + c * m] -= acc * A[i + j * lda]


cdef int _setup(const double *lam, Py_ssize_t d, const double *W, int r, double s, double bb,
                int *pp, Work *w) noexcept nogil:
    """Omega, the Householder basis of W^perp and the low-rank square root of N^T Omega N."""
    cdef Py_ssize_t i, q = d - r
    cdef int a, b, l, info = 0, p, r2 = 2 * r, m, n, lda, ldt
    cdef double acc
    for i in range(d):
        w.omega[i] = 1.0 + 2.0 * (s - lam[i]) / bb
    for i in range(r, d):
        if not w.omega[i] > 0.0:
            return -3
        w.isq[i] = 1.0 / sqrt(w.omega[i])
    pp[0] = 0
    if r == 0:
        return 0
    # QR of W^T (d x r): W row-major r x d is W^T column-major with leading dimension d
    for i in range(r * d):
        w.A[i] = W[i]
    _house_qr(w.A, d, r, d, w.tau)
    # T of the compact WY form H_1 ... H_r = I - Y T Y^T (the dlarft recurrence)
    for b in range(r):
        for a in range(r):
            w.T[a + b * r] = 0.0
        w.T[b + b * r] = w.tau[b]
        for a in range(b):                       # tmp = Y[:, :b]^T y_b
            acc = 0.0
            for i in range(b, d):
                acc += _yv(w.A, d, i, a) * _yv(w.A, d, i, b)
            w.tmp[a] = acc
        for a in range(b):
            acc = 0.0
            for l in range(a, b):
                acc += w.T[a + l * r] * w.tmp[l]
            w.T[a + b * r] = -w.tau[b] * acc
    # Y: unit lower trapezoidal (stored in A below the diagonal). YOY = Y^T Omega Y.
    for a in range(r):
        for b in range(a + 1):
            acc = 0.0
            for i in range(a, d):      # Y[i, a] nonzero for i >= a
                acc += _yv(w.A, d, i, a) * w.omega[i] * _yv(w.A, d, i, b)
            w.YOY[a + b * r] = acc
            w.YOY[b + a * r] = acc
    # C = [[0, -T], [-T^T, T^T YOY T]]  (2r x 2r, column-major); T upper triangular (col-major)
    for a in range(r2 * r2):
        w.C[a] = 0.0
    for a in range(r):
        for b in range(r):
            w.C[a + (r + b) * r2] = -w.T[a + b * r]          # block (0, 1) = -T
            w.C[(r + b) + a * r2] = -w.T[a + b * r]          # block (1, 0) = -T^T
    for a in range(r):                                       # tmp block: YOY T -> K (r x r)
        for b in range(r):
            acc = 0.0
            for l in range(b + 1):
                acc += w.YOY[a + l * r] * w.T[l + b * r]
            w.K[a + b * r] = acc
    for a in range(r):
        for b in range(r):
            acc = 0.0
            for l in range(a + 1):
                acc += w.T[l + a * r] * w.K[l + b * r]
            w.C[(r + a) + (r + b) * r2] = acc
    # whitened factor U = Omega_q^(-1/2) [Omega_q Y_q, Y_q] = [Omega_q^(1/2) Y_q, Omega_q^(-1/2) Y_q]
    for a in range(r):
        for i in range(q):
            acc = _yv(w.A, d, r + i, a)
            w.U[i + a * q] = acc / w.isq[r + i]
            w.U[i + (r + a) * q] = acc * w.isq[r + i]
    p = r2 if r2 < q else <int>q
    _house_qr(w.U, q, r2, q, w.tau2)
    for a in range(p):                                       # R: p x 2r, column-major
        for b in range(r2):
            w.R[a + b * p] = w.U[a + b * q] if b >= a else 0.0
    _house_form_q(w.U, q, p, q, w.tau2, w.Z)                 # Qu (q x p) into Z
    for i in range(q * p):
        w.U[i] = w.Z[i]
    # K = R C R^T (p x p)
    for a in range(p):
        for b in range(r2):
            acc = 0.0
            for l in range(r2):
                acc += w.R[a + l * p] * w.C[l + b * r2]
            w.tmp[b] = acc
        for b in range(p):
            acc = 0.0
            for l in range(r2):
                acc += w.tmp[l] * w.R[b + l * p]
            w.K[a + b * p] = acc
    if _small_eigvals(w.K, p, w.evals, w, b'V') != 0:
        return -7
    for a in range(p):
        if not 1.0 + w.evals[a] > 0.0:
            return -3
        w.f[a] = 1.0 / sqrt(1.0 + w.evals[a]) - 1.0
    # Z = Qu Phi (q x p)
    for i in range(q):
        for b in range(p):
            acc = 0.0
            for l in range(p):
                acc += w.U[i + l * q] * w.K[l + b * p]
            w.Z[i + b * q] = acc
    pp[0] = p
    return 0


cdef inline double _yv(const double *A, Py_ssize_t d, Py_ssize_t i, int a) noexcept nogil:
    """Entry (i, a) of the unit lower trapezoidal reflector matrix stored in A (d x r)."""
    if i < a:
        return 0.0
    if i == a:
        return 1.0
    return A[i + a * d]


cdef void _envelope_proposal(bitgen_t *bg, Work *w, Py_ssize_t d, int r, int p) noexcept nogil:
    """One draw of the ACG envelope into w.x (unnormalised), as set up by _setup.

    y = Omega_q^(-1/2) (eta + Z diag(f) Z^T eta) in the complement's coordinates (x[r:]),
    x[:r] = 0, then x = H_1 ... H_r x (H_r applied first).
    """
    cdef Py_ssize_t q = d - r, i, a
    cdef double acc
    for i in range(q):
        w.z[i] = _normal(bg, w)
    for a in range(p):
        acc = 0.0
        for i in range(q):
            acc += w.Z[i + a * q] * w.z[i]
        w.tmp[a] = acc * w.f[a]
    for i in range(q):
        acc = w.z[i]
        for a in range(p):
            acc += w.Z[i + a * q] * w.tmp[a]
        w.x[r + i] = acc * w.isq[r + i]
    for i in range(r):
        w.x[i] = 0.0
    for a in range(r - 1, -1, -1):
        acc = w.x[a]
        for i in range(a + 1, d):
            acc += w.A[i + a * d] * w.x[i]
        acc *= w.tau[a]
        w.x[a] -= acc
        for i in range(a + 1, d):
            w.x[i] -= acc * w.A[i + a * d]


cdef int _draw_column(const double *lam, Py_ssize_t d, const double *W, int r, double lo,
                      double *guess, double *out, bitgen_t *bg, Work *w) noexcept nogil:
    """Exact draw of a unit x in W^perp with density proportional to exp(x^T diag(lam) x)."""
    cdef Py_ssize_t i
    cdef int a, p = 0, rc, attempt
    cdef double s, bb, qd = <double>(d - r), logM, acc, nrm, xlx, xox, logr, scale, span

    s = _shift(lam, d, W, r, lo, guess[0], w)
    guess[0] = s
    span = fabs(lam[0]) + fabs(lam[d - 1]) + 1e-300
    s += 1e-12 * span                        # rounding margin: s must bound mu_1 from above
    for i in range(d):
        acc = 1.0
        for a in range(r):
            acc -= W[a * d + i] * W[a * d + i]
        w.p[i] = acc if acc > 0.0 else 0.0
    for attempt in range(8):
        for i in range(d):
            w.dplus[i] = s - lam[i] if s > lam[i] else 0.0
        bb = _solve_b(d, qd, w)
        rc = _setup(lam, d, W, r, s, bb, &p, w)
        if rc != -3:
            break
        s += 1e-9 * span * (10.0 ** attempt)  # Omega not positive on S: the shift was too low
    if rc != 0:
        return rc
    logM = 0.0
    if bb < qd:
        logM = -(qd - bb) / 2.0 + (qd / 2.0) * log(qd / bb)

    while True:
        w.proposals += 1.0
        _envelope_proposal(bg, w, d, r, p)
        nrm = 0.0
        for i in range(d):
            nrm += w.x[i] * w.x[i]
        if not nrm > 0.0:
            continue
        scale = 1.0 / sqrt(nrm)
        xlx = 0.0
        xox = 0.0
        for i in range(d):
            w.x[i] *= scale
            xlx += lam[i] * w.x[i] * w.x[i]
            xox += w.omega[i] * w.x[i] * w.x[i]
        logr = (xlx - s) + (qd / 2.0) * log(xox) - logM
        if logr > 1e-9:
            w.bound_violations += 1.0
        if log(random_ustar(bg)) < logr:
            break
    w.accepts += 1.0
    for i in range(d):
        out[i] = w.x[i]
    return 0


cdef int _alloc(Work *w, Py_ssize_t d, int rmax) noexcept nogil:
    cdef int rr = rmax if rmax > 1 else 1
    cdef int r2 = 2 * rr
    cdef size_t small
    w.d = d
    w.rmax = rmax
    w.nlwork = 128 * (r2 + 2) + 64
    small = 2 * rr + 3 * rr * rr + 3 * r2 * r2 + 4 * r2 + <size_t>w.nlwork
    w.z = <double *>malloc(8 * d * sizeof(double))
    w.A = <double *>malloc((rr * d + 2 * r2 * d) * sizeof(double))
    w.T = <double *>malloc(small * sizeof(double))
    w.W = <double *>malloc(rr * d * sizeof(double))
    if w.z == NULL or w.A == NULL or w.T == NULL or w.W == NULL:
        return -1
    w.x = w.z + d
    w.dplus = w.z + 2 * d
    w.omega = w.z + 3 * d
    w.isq = w.z + 4 * d
    w.p = w.z + 5 * d
    w.wgt = w.z + 6 * d
    w.U = w.A + rr * d
    w.Z = w.U + r2 * d
    w.tau = w.T + rr * rr
    w.YOY = w.tau + rr
    w.G = w.YOY + rr * rr
    w.C = w.G + rr * rr
    w.R = w.C + r2 * r2
    w.K = w.R + r2 * r2
    w.f = w.K + r2 * r2
    w.tau2 = w.f + r2
    w.tmp = w.tau2 + r2
    w.evals = w.tmp + r2
    w.lwork = w.evals + r2
    w.has_normal = 0
    w.proposals = 0.0
    w.accepts = 0.0
    w.bound_violations = 0.0
    return 0


cdef void _release(Work *w) noexcept nogil:
    free(w.z)
    free(w.A)
    free(w.T)
    free(w.W)


cdef double _trace(const double *lam, Py_ssize_t d, const double *Vt, Py_ssize_t k) noexcept nogil:
    cdef double acc = 0.0
    cdef Py_ssize_t i, j
    for j in range(k):
        for i in range(d):
            acc += lam[i] * Vt[j * d + i] * Vt[j * d + i]
    return acc


cdef int _sweeps(const double *lam, Py_ssize_t d, double *Vt, Py_ssize_t k, Py_ssize_t n_sweeps,
                 double *trace, Py_ssize_t *perm, double *guess, bitgen_t *bg,
                 Work *w) noexcept nogil:
    cdef Py_ssize_t sweep, t, j, jj, i, a, row
    cdef double lo
    cdef int rc
    cdef Py_ssize_t tmp
    for sweep in range(n_sweeps):
        for t in range(k):
            perm[t] = t
        for t in range(k - 1, 0, -1):            # Fisher-Yates
            jj = <Py_ssize_t>random_bounded(bg, <uint64_t>(t + 1))
            tmp = perm[t]
            perm[t] = perm[jj]
            perm[jj] = tmp
        for t in range(k):
            j = perm[t]
            row = 0
            for a in range(k):
                if a != j:
                    for i in range(d):
                        w.W[row * d + i] = Vt[a * d + i]
                    row += 1
            lo = 0.0
            for i in range(d):
                lo += lam[i] * Vt[j * d + i] * Vt[j * d + i]   # current column: mu_1 >= this
            rc = _draw_column(lam, d, w.W, <int>(k - 1), lo, &guess[j], &Vt[j * d], bg, w)
            if rc != 0:
                return rc
        if trace != NULL:
            trace[sweep] = _trace(lam, d, Vt, k)
    return 0


def gibbs(const double[::1] lam,      # IN: eigenvalues of A, descending
          double[:, ::1] Vt,          # IN/OUT: k x d state in the eigenbasis, orthonormal rows
          Py_ssize_t n_sweeps,
          BitgenHandle h,
          double[::1] trace,          # OUT: tr(V^T A V) after each sweep (length >= n_sweeps) or empty
          double[::1] counters):      # IN/OUT: [proposals, accepts, bound violations]
    """Run ``n_sweeps`` column-wise Gibbs sweeps (random column order, exact conditionals)."""
    cdef Py_ssize_t d = lam.shape[0], k = Vt.shape[0], j
    cdef Work w
    cdef int rc
    cdef double *tr = NULL
    cdef Py_ssize_t *perm
    if Vt.shape[1] != d or k < 1 or k >= d:
        raise ValueError("internal: bad shapes")
    if trace.shape[0] > 0:
        if trace.shape[0] < n_sweeps:
            raise ValueError("internal: trace too short")
        tr = &trace[0]
    cdef double *guess = <double *>malloc(k * sizeof(double))
    perm = <Py_ssize_t *>malloc(k * sizeof(Py_ssize_t))
    if guess != NULL:
        for j in range(k):
            guess[j] = -INFINITY
    if perm == NULL or guess == NULL or _alloc(&w, d, <int>(k - 1)) != 0:
        free(perm)
        free(guess)
        _release(&w)
        raise MemoryError()
    try:
        with h.lock, nogil:
            rc = _sweeps(&lam[0], d, &Vt[0, 0], k, n_sweeps, tr, perm, guess, h.bitgen, &w)
    finally:
        counters[0] += w.proposals
        counters[1] += w.accepts
        counters[2] += w.bound_violations
        _release(&w)
        free(perm)
        free(guess)
    if rc != 0:
        raise FloatingPointError(f"bingham kernel failed (code {rc}): ill-conditioned state")


def sequential(const double[::1] lam,   # IN: eigenvalues, descending
               double[:, ::1] Vt,       # OUT: k x d; row j drawn given rows 0..j-1
               Py_ssize_t start,
               BitgenHandle h,
               double[::1] counters):
    """Exact draws: row j (j >= start) from the vector Bingham on the complement of rows < j."""
    cdef Py_ssize_t d = lam.shape[0], k = Vt.shape[0], j
    cdef Work w
    cdef int rc = 0
    cdef double guess = -INFINITY
    if Vt.shape[1] != d or k < 1 or k >= d + 1:
        raise ValueError("internal: bad shapes")
    if _alloc(&w, d, <int>(k if k > 1 else 1)) != 0:
        _release(&w)
        raise MemoryError()
    try:
        with h.lock, nogil:
            for j in range(start, k):
                guess = -INFINITY
                rc = _draw_column(&lam[0], d, &Vt[0, 0], <int>j, -INFINITY, &guess, &Vt[j, 0], h.bitgen, &w)
                if rc != 0:
                    break
    finally:
        counters[0] += w.proposals
        counters[1] += w.accepts
        counters[2] += w.bound_violations
        _release(&w)
    if rc != 0:
        raise FloatingPointError(f"bingham kernel failed (code {rc}): ill-conditioned state")


def _test_count_above(const double[::1] lam, const double[:, ::1] W, double mu):
    """Inertia count of eigenvalues of diag(lam) on W^perp above mu (tests only)."""
    cdef Work w
    cdef int r = W.shape[0], n
    if _alloc(&w, lam.shape[0], r if r > 0 else 1) != 0:
        _release(&w)
        raise MemoryError()
    n = _count_above(&lam[0], lam.shape[0], &W[0, 0] if r > 0 else NULL, r, mu, &w)
    _release(&w)
    return n


def _test_normals(Py_ssize_t n, BitgenHandle h):
    """n standard normals from the kernel's sampler (tests only)."""
    cdef Work w
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t i
    w.has_normal = 0
    with h.lock, nogil:
        for i in range(n):
            o[i] = _normal(h.bitgen, &w)
    return out


def _test_setup(const double[::1] lam, const double[:, ::1] W, double s, double bb):
    """Envelope set-up for the other columns W at shift s and parameter b (tests only)."""
    cdef Work w
    cdef int r = W.shape[0], p = 0, rc
    cdef Py_ssize_t d = lam.shape[0], i
    if _alloc(&w, d, r if r > 0 else 1) != 0:
        _release(&w)
        raise MemoryError()
    rc = _setup(&lam[0], d, &W[0, 0], r, s, bb, &p, &w)
    ev = np.array([w.evals[i] for i in range(min(2 * r, d - r))])
    r2 = 2 * r
    dbg = dict(T=np.array([w.T[i] for i in range(r * r)]).reshape(r, r).T,
               YOY=np.array([w.YOY[i] for i in range(r * r)]).reshape(r, r).T,
               C=np.array([w.C[i] for i in range(r2 * r2)]).reshape(r2, r2).T,
               R=np.array([w.R[i] for i in range(r2 * r2)]),
               tau=np.array([w.tau[i] for i in range(r)]))
    _release(&w)
    return rc, ev, dbg


def _test_envelope(const double[::1] lam, const double[:, ::1] W, double lo, Py_ssize_t n,
                   BitgenHandle h):
    """(s, b, n proposals x (n x d)) of the column draw given W (tests only)."""
    cdef Work w
    cdef int r = W.shape[0], p = 0, rc
    cdef Py_ssize_t d = lam.shape[0], i, t, a
    cdef double s, bb, acc
    if _alloc(&w, d, r if r > 0 else 1) != 0:
        _release(&w)
        raise MemoryError()
    out = np.empty((n, d))
    s = _shift(&lam[0], d, &W[0, 0], r, lo, -INFINITY, &w)
    s += 1e-12 * (fabs(lam[0]) + fabs(lam[d - 1]) + 1e-300)
    for i in range(d):
        acc = 1.0
        for a in range(r):
            acc -= W[a, i] * W[a, i]
        w.p[i] = acc if acc > 0.0 else 0.0
        w.dplus[i] = s - lam[i] if s > lam[i] else 0.0
    bb = _solve_b(d, <double>(d - r), &w)
    rc = _setup(&lam[0], d, &W[0, 0], r, s, bb, &p, &w)
    for t in range(n):
        _envelope_proposal(h.bitgen, &w, d, r, p)
        for i in range(d):
            out[t, i] = w.x[i]
    _release(&w)
    return rc, s, bb, out
