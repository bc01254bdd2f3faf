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
  inertia count (below; plus a rounding margin), so that t = s - x^T L x >= 0 on S; the
  chain's previous shift for the column starts the search, which stops once s - mu_1 is at most
  SHIFT_TOL * b;
* envelope precision Omega = I + (2/b)(s I - L) restricted to S (positive definite there, >= I,
  although Omega itself may be indefinite on the r leading coordinates), b from the KGM
  equation sum 1/(b + 2 delta_i) = 1, with the eigenvalues delta_i of (s - L)|S approximated by
  weights p_i = 1 - sum_a W_ai^2 (exact for k = 1; b only affects speed);
* the proposal y ~ N(0, (Omega|S)^-1) is drawn without a basis of S: with D = diag(max(omega,
  1)), y = u - D^-1 W^T (W D^-1 W^T)^-1 W u for u ~ N(0, D^-1) (the Gaussian conditioned on
  W y = 0), plus H xi, xi ~ N(0, I_m), a rank-m Woodbury correction for the m <= r coordinates
  where omega < 1 (see _setup). Set-up O(d r^2), a proposal O(d r); x = y / |y| is ACG(Omega|S);
* accept with probability exp(-t) (x^T Omega x)^(q/2) / M*, M* = exp(-(q - b)/2) (q/b)^(q/2),
  the exact bound of the KGM ratio over t >= 0.

Inertia count: for mu not an eigenvalue of L, the number of eigenvalues of L|S above mu equals
#{lam_i > mu} + #{positive eigenvalues of W diag(1/(mu - lam)) W^T} - r (Schur complement of the
bordered matrix [[L - mu, W^T], [W, 0]]); the signs come from an unpivoted L D L^T of the r x r
matrix (Sylvester's law of inertia), or from LAPACK's eigenvalues when a pivot is tiny.

For k = 1 (r = 0) the draw is exactly the Kent-Ganeiber-Mardia sampler with the optimal b.
"Exact" means: exact in real arithmetic; proposals use standard normals (a ziggurat on 53-bit
uniforms, its layer areas equal to 1.4e-12 relative) and the acceptance test a full-precision
uniform U* in double precision, so the law is the target's up to floating-point rounding (a
continuous mechanism; Ilvento, CCS 2020, applies). The bound needs s >= mu_1: the inertia count
runs in floating point, so s carries a margin of 1e-12 of the spread of lam, and any acceptance
ratio above 1 (a violated bound) is counted in ``counters[2]`` (the tests require it to stay 0).
If Omega|S is not positive definite in rounding, s is raised and the set-up repeated. The
accepted x is re-orthogonalised against W (a rounding-level correction) so the columns stay
orthonormal over long chains.
Not constant-time: the number of proposals is random and depends on A. Bounded: a column draw
makes at most MAX_PROPOSALS = 10**7 proposals, then fails with a RuntimeError (A too
ill-conditioned: for diag(a, 0, 0), k = 2, the Gibbs conditional's envelope proposal loses its
precision to rounding once a > ~1.5e8 and no proposal is accepted); every SIGNAL_EVERY = 2**18
proposals the GIL is taken briefly to run signal handlers (Ctrl-C interrupts a draw).

Draws happen under the generator's lock; a seed reproduces the output.
"""
import numpy as np

from libc.math cimport exp, log, sqrt, fabs, INFINITY
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint64_t

from cpython.exc cimport PyErr_CheckSignals
from scipy.linalg.cython_lapack cimport dsyev

from dpcore._random cimport (BitgenHandle, bitgen_t, dpc_words, dpc_words_next, random_words,
                             random_bounded, random_ustar)
from dpcore._dpcore_threads import run_blocks

# The shift s exceeds mu_1 by at most SHIFT_TOL * b: the acceptance rate is insensitive to a
# slack small against b (measured at d = 100, b ~ 1.5: the same 7.4 proposals per acceptance up
# to 0.25 b, 8.1 at 0.7 b, 17 at 2.7 b).
cdef double SHIFT_TOL = 0.25

# Bounds (issue 14): a column draw makes at most MAX_PROPOSALS envelope proposals (the acceptance
# rate is some 1/8 for a well-scaled A, so a draw that needs 10**7 is a numerically degenerate
# envelope, e.g. an eigenvalue spread so large that the rounding margin of the shift dominates);
# it then fails with PROPOSAL_LIMIT instead of running unbounded. Every SIGNAL_EVERY proposals the
# GIL is taken briefly to run pending signal handlers (Ctrl-C raises KeyboardInterrupt).
MAX_PROPOSALS = 10**7
SIGNAL_EVERY = 2**18
cdef double _MAX_PROPOSALS = <double>MAX_PROPOSALS
cdef long long _SIGNAL_EVERY = SIGNAL_EVERY
cdef enum:
    PROPOSAL_LIMIT = -20
    PY_ERROR = -100        # a Python exception is set (a signal handler raised)


cdef int _poll_signals() except -1 nogil:
    """Run pending signal handlers (KeyboardInterrupt propagates as an exception)."""
    with gil:
        PyErr_CheckSignals()
    return 0


def _raise_for(int rc):
    """The Python exception for a kernel return code."""
    if rc == PROPOSAL_LIMIT:
        raise RuntimeError(
            f"bingham kernel did not accept a proposal within {MAX_PROPOSALS} tries; A is too "
            "ill-conditioned for the sampler (its eigenvalue spread is too large in floating "
            "point): rescale A or lower epsilon"
        )
    raise FloatingPointError(f"bingham kernel failed (code {rc}): ill-conditioned state")


cdef struct Work:
    # length d
    double *z           # standard normals
    double *x           # proposal
    double *omega       # Omega = I + (2/b)(s I - L), diagonal
    double *sdinv       # D^(-1/2), D = diag(max(omega, 1))
    double *p           # weights of the coordinates in W^perp (for b)
    double *wgt
    double *dplus
    # d x r and d x r, column-major: B = D^-1 W^T, H = the rank-m correction factor
    double *B
    double *H
    # small: M (r x r, Cholesky of W D^-1 W^T), Cm (r x r), G (r x r), c, xi (r),
    # sqrt(delta_J) (r), evals (r), LAPACK work
    double *M
    double *Cm
    double *G
    double *c
    double *xi
    double *sdelta
    double *evals
    double *lwork
    int nlwork
    int *J              # coordinates where omega < 1 (at most r)
    int m
    # the other columns, r x d row-major (gibbs copies them here)
    double *W
    dpc_words src       # the generator's words (set under its lock by _bind)
    double proposals
    double accepts
    double bound_violations
    long long since_poll  # proposals since the last check for signals (across draws)


cdef inline double _uniform53(Work *w) noexcept nogil:
    # in [0, 1), 53 bits
    return (dpc_words_next(&w.src) >> 11) * (1.0 / 9007199254740992.0)


# Ziggurat for the standard normal (Marsaglia-Tsang; the layer from its own bits). With
# f(x) = exp(-x^2 / 2), layers 1..ZN-1 are the rectangles [0, ZX[i]] x [f(ZX[i]), f(ZX[i+1])] and
# layer 0 the base strip of width ZX[0] = v / f(r) over [0, f(r)] (its part beyond r = ZX[1] is
# the tail), all of area v. A point uniform in a uniformly chosen layer and under f is accepted,
# which gives |z| the half-normal law exactly when every layer has area v. The tables are
# computed in doubles at import, r by bisection so that the top layer closes (x_ZN = 0): the
# layer areas then agree to 1.4e-12 relative (checked), so the normal density holds to that
# relative accuracy, a rounding-level departure like the envelope's own floating point.
cdef enum:
    ZN = 256
cdef double ZX[ZN + 1]
cdef double ZF[ZN + 1]


def _ziggurat_tables():
    import math

    def layers(r):
        fr = math.exp(-0.5 * r * r)
        v = r * fr + math.sqrt(math.pi / 2.0) * math.erfc(r / math.sqrt(2.0))
        x = [v / fr, r]
        last = r
        for _ in range(ZN - 2):
            y = v / last + math.exp(-0.5 * last * last)
            if y >= 1.0:
                return None, x
            last = math.sqrt(-2.0 * math.log(y))
            x.append(last)
        return v / last + math.exp(-0.5 * last * last) - 1.0, x
    lo, hi = 3.0, 4.5                   # closure > 0 or undefined at lo, < 0 at hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        gap, _x = layers(mid)
        if gap is None or gap > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * hi:
            break
    gap, x = layers(hi)
    x.append(0.0)
    return x


def _init_ziggurat():
    x = _ziggurat_tables()
    import math
    for i in range(ZN + 1):
        ZX[i] = x[i]
        ZF[i] = math.exp(-0.5 * x[i] * x[i])


_init_ziggurat()


cdef double _normal_tail(Work *w) noexcept nogil:
    """|z| conditioned on |z| > r (Marsaglia's tail method), r = ZX[1]."""
    cdef double a, b, r = ZX[1]
    while True:
        # uniforms in (0, 1]
        a = -log(((dpc_words_next(&w.src) >> 11) + 1) * (1.0 / 9007199254740992.0)) / r
        b = -log(((dpc_words_next(&w.src) >> 11) + 1) * (1.0 / 9007199254740992.0))
        if b + b > a * a:
            return r + a


cdef inline double _normal(bitgen_t *bg, Work *w) noexcept nogil:
    """Standard normal by the ziggurat: one 64-bit word in the common case (layer: 8 bits,
    sign: 1 bit, the uniform: the top 53 bits)."""
    cdef uint64_t word
    cdef int i
    cdef double u, z, y
    while True:
        word = dpc_words_next(&w.src)
        i = <int>(word & 0xFF)
        u = (word >> 11) * (1.0 / 9007199254740992.0)
        z = u * ZX[i]
        if z < ZX[i + 1]:
            pass
        elif i == 0:
            z = _normal_tail(w)
        else:
            y = ZF[i] + _uniform53(w) * (ZF[i + 1] - ZF[i])
            if not y < exp(-0.5 * z * z):
                continue
        return -z if (word >> 8) & 1 else z


cdef inline double _dot(const double *a, const double *b, Py_ssize_t n) noexcept nogil:
    """sum a_i b_i with four partial sums (independent dependency chains; fixed order)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i, m = n - n % 4
    for i in range(0, m, 4):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
    for i in range(m, n):
        s0 += a[i] * b[i]
    return (s0 + s1) + (s2 + s3)


cdef inline double _dot3(const double *a, const double *b, const double *c,
                         Py_ssize_t n) noexcept nogil:
    """sum a_i b_i c_i, as _dot."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i, m = n - n % 4
    for i in range(0, m, 4):
        s0 += a[i] * b[i] * c[i]
        s1 += a[i + 1] * b[i + 1] * c[i + 1]
        s2 += a[i + 2] * b[i + 2] * c[i + 2]
        s3 += a[i + 3] * b[i + 3] * c[i + 3]
    for i in range(m, n):
        s0 += a[i] * b[i] * c[i]
    return (s0 + s1) + (s2 + s3)


cdef int _small_eigvals(double *M, int n, double *evals, Work *w) noexcept nogil:
    """Eigenvalues (ascending) of the symmetric n x n matrix M (column-major upper triangle,
    overwritten)."""
    cdef int info = 0
    cdef char jobz = b'N'
    cdef char uplo = b'U'
    cdef int lda = n
    cdef int nn = n
    dsyev(&jobz, &uplo, &nn, M, &lda, evals, w.lwork, &w.nlwork, &info)
    return info


cdef int _positive_count(double *G, int r, Work *w) noexcept nogil:
    """Number of positive eigenvalues of the symmetric r x r matrix G (overwritten), by
    Sylvester's law of inertia on G = L D L^T; when a pivot is tiny or the factor grows (the
    signs could be wrong in rounding), by LAPACK's eigenvalues instead. -1 on failure."""
    cdef int i, j, l, npos = 0
    cdef double scale = 0.0, acc, piv
    for i in range(r * r):
        w.Cm[i] = G[i]
        if fabs(G[i]) > scale:
            scale = fabs(G[i])
    for j in range(r):                 # unpivoted LDL^T in Cm (lower part; D on the diagonal)
        piv = w.Cm[j + j * r]
        for l in range(j):
            piv -= w.Cm[j + l * r] * w.Cm[j + l * r] * w.Cm[l + l * r]
        if not fabs(piv) > 1e-8 * scale:
            break
        w.Cm[j + j * r] = piv
        if piv > 0.0:
            npos += 1
        for i in range(j + 1, r):
            acc = w.Cm[i + j * r]
            for l in range(j):
                acc -= w.Cm[i + l * r] * w.Cm[j + l * r] * w.Cm[l + l * r]
            acc /= piv
            if not fabs(acc) < 1e4:
                piv = 0.0
                break
            w.Cm[i + j * r] = acc
        if piv == 0.0:
            break
    else:
        return npos
    if _small_eigvals(G, r, w.evals, w) != 0:
        return -1
    npos = 0
    for i in range(r):
        if w.evals[i] > 0.0:
            npos += 1
    return npos


cdef int _count_above(const double *lam, Py_ssize_t d, const double *W, int r, double mu,
                      Work *w) noexcept nogil:
    """Number of eigenvalues of diag(lam) compressed to W^perp that exceed mu (mu not in lam)."""
    cdef Py_ssize_t i, lo = 0, hi = d, mid
    cdef int a, b, npos
    cdef double acc
    while lo < hi:                 # n = #{lam_i > mu} (lam descending)
        mid = (lo + hi) >> 1
        if lam[mid] > mu:
            lo = mid + 1
        else:
            hi = mid
    if lo < d and lam[lo] == mu:
        return -2                  # a pole: the caller moves mu
    for i in range(d):
        w.wgt[i] = 1.0 / (mu - lam[i])
    for a in range(r):
        for b in range(a + 1):
            acc = _dot3(&W[a * d], &W[b * d], w.wgt, d)
            w.G[a * r + b] = acc
            w.G[b * r + a] = acc
    npos = _positive_count(w.G, r, w)
    if npos < 0:
        return -1
    return <int>lo + npos - r


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
                   double guess, double tol, Work *w) noexcept nogil:
    """An upper bound (to tol, by an inertia-count bisection) of the top eigenvalue mu_1 of
    diag(lam) on W^perp. ``lo`` is a known lower bound; ``guess`` (or -inf) a likely value, used
    to shrink the bracket first (the chain's previous shift for this column)."""
    cdef double hi = lam[0], mid, step
    cdef int it, cnt
    if r == 0:
        return lam[0]
    if lam[r] > lo:
        lo = lam[r]               # interlacing: mu_1 >= lam_{r+1}
    if lo >= hi:
        return hi
    if guess > lo and guess < hi:
        step = tol
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
        step = tol
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
    """b in [1, q] with sum_i p_i / (b + 2 dplus_i) = 1, to 1e-4 relative (Newton from b = 1:
    the sum is convex and decreasing in b, so the iterates rise monotonically to the root)."""
    cdef double b = 1.0, f, fp, t, nb
    cdef Py_ssize_t i
    cdef int it
    for it in range(60):
        f = -1.0
        fp = 0.0
        for i in range(d):
            t = 1.0 / (b + 2.0 * w.dplus[i])
            f += w.p[i] * t
            fp += w.p[i] * t * t
        if f <= 0.0 or not fp > 0.0:
            break
        nb = b + f / fp
        if nb >= q:
            return q
        if nb - b <= 1e-4 * b:
            return nb
        b = nb
    return b


cdef int _cholesky(double *A, int n) noexcept nogil:
    """In-place Cholesky A = L L^T of the symmetric n x n column-major A (lower triangle used
    and overwritten by L). -1 if A is not numerically positive definite."""
    cdef int i, j, l
    cdef double acc
    for j in range(n):
        acc = A[j + j * n]
        for l in range(j):
            acc -= A[j + l * n] * A[j + l * n]
        if not acc > 0.0:
            return -1
        acc = sqrt(acc)
        A[j + j * n] = acc
        for i in range(j + 1, n):
            for l in range(j):
                A[i + j * n] -= A[i + l * n] * A[j + l * n]
            A[i + j * n] /= acc
    return 0


cdef void _forward(const double *L, int n, double *v, Py_ssize_t stride) noexcept nogil:
    """v <- L^-1 v (L lower triangular, column-major n x n; v's entries ``stride`` apart)."""
    cdef int i, l
    cdef double acc
    for i in range(n):
        acc = v[i * stride]
        for l in range(i):
            acc -= L[i + l * n] * v[l * stride]
        v[i * stride] = acc / L[i + i * n]


cdef void _backward(const double *L, int n, double *v) noexcept nogil:
    """v <- L^-T v (L lower triangular, column-major n x n)."""
    cdef int i, l
    cdef double acc
    for i in range(n - 1, -1, -1):
        acc = v[i]
        for l in range(i + 1, n):
            acc -= L[l + i * n] * v[l]
        v[i] = acc / L[i + i * n]


cdef int _setup(const double *lam, Py_ssize_t d, const double *W, int r, double s, double bb,
                Work *w) noexcept nogil:
    """Factors of the envelope's Gaussian on S = W^perp with precision Omega|S.

    With D = diag(max(omega, 1)) (positive definite) and Omega = D - sum_J delta_j e_j e_j^T
    (J: the at most r leading coordinates with lam_j > s, delta_j = 1 - omega_j), the
    covariance on S in full coordinates is Sigma = Sigma_D + H H^T, where
    Sigma_D = D^-1 - B M^-1 B^T (B = D^-1 W^T, M = W B: the Gaussian N(0, D^-1) conditioned on
    W y = 0) and, by Woodbury, H = G L_C^-T with G = Sigma_D E_J diag(sqrt delta) and
    C = I - diag(sqrt delta) Sigma_D[J, J] diag(sqrt delta) = L_C L_C^T. C is positive definite
    exactly when Omega|S is (-3 otherwise: the caller raises s). Cost O(d r^2)."""
    cdef Py_ssize_t i
    cdef int a, b, t, u, m = 0, jt
    cdef double om, acc
    for i in range(d):
        om = 1.0 + 2.0 * (s - lam[i]) / bb
        w.omega[i] = om
        if om < 1.0:
            if m >= r:
                return -3         # more than r coordinates above s: s < mu_1 in rounding
            w.J[m] = <int>i
            w.sdelta[m] = sqrt(1.0 - om)
            m += 1
            om = 1.0
        w.sdinv[i] = 1.0 / sqrt(om)
    w.m = m
    if r == 0:
        return 0
    for a in range(r):
        for i in range(d):
            w.B[i + a * d] = W[a * d + i] * w.sdinv[i] * w.sdinv[i]
    for a in range(r):
        for b in range(a + 1):
            w.M[a + b * r] = _dot(&W[a * d], &w.B[b * d], d)
    if _cholesky(w.M, r) != 0:
        return -7
    for t in range(m):
        jt = w.J[t]
        for a in range(r):                      # c = M^-1 B[jt, :]^T
            w.c[a] = w.B[jt + a * d]
        _forward(w.M, r, w.c, 1)
        _backward(w.M, r, w.c)
        for i in range(d):                      # column t of G
            acc = 0.0
            for a in range(r):
                acc -= w.B[i + a * d] * w.c[a]
            w.H[i + t * d] = acc * w.sdelta[t]
        w.H[jt + t * d] += w.sdinv[jt] * w.sdinv[jt] * w.sdelta[t]
    for t in range(m):
        for u in range(t + 1):
            acc = -0.5 * (w.sdelta[u] * w.H[w.J[u] + t * d] + w.sdelta[t] * w.H[w.J[t] + u * d])
            if u == t:
                acc += 1.0
            w.Cm[t + u * m] = acc
    if _cholesky(w.Cm, m) != 0:
        return -3
    for i in range(d):                          # rows of H: L_C^-1 (row of G)
        _forward(w.Cm, m, &w.H[i], d)
    return 0


cdef void _envelope_proposal(bitgen_t *bg, Work *w, Py_ssize_t d, const double *W,
                             int r) noexcept nogil:
    """One draw y ~ N(0, Sigma) of the envelope's Gaussian on W^perp into w.x (unnormalised),
    as set up by _setup: u = D^(-1/2) z, y = u - B M^-1 (W u) + H xi."""
    cdef Py_ssize_t i
    cdef int a, t, m = w.m
    cdef double acc
    for i in range(d):
        w.x[i] = _normal(bg, w) * w.sdinv[i]
    if r == 0:
        return
    for a in range(r):
        w.c[a] = _dot(&W[a * d], w.x, d)
    _forward(w.M, r, w.c, 1)
    _backward(w.M, r, w.c)
    for t in range(m):
        w.xi[t] = _normal(bg, w)
    for i in range(d):
        acc = w.x[i]
        for a in range(r):
            acc -= w.B[i + a * d] * w.c[a]
        for t in range(m):
            acc += w.H[i + t * d] * w.xi[t]
        w.x[i] = acc


cdef int _envelope(const double *lam, Py_ssize_t d, const double *W, int r, double lo,
                   double *guess, double *s_out, double *b_out, Work *w) noexcept nogil:
    """The envelope of the column drawn given W: shift s (into s_out), parameter b (b_out) and
    the set-up of _setup. ``guess`` = [previous shift, previous b] of the column (or [-inf, 0]),
    updated."""
    cdef Py_ssize_t i
    cdef int a, rc = 0, attempt
    cdef double s, bb = 1.0, qd = <double>(d - r), acc, span
    # the shift's slack costs acceptance in proportion to slack / b (the envelope's scale)
    s = _shift(lam, d, W, r, lo, guess[0], SHIFT_TOL * (guess[1] if guess[1] > 1.0 else 1.0), w)
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
        rc = _setup(lam, d, W, r, s, bb, w)
        if rc != -3:
            break
        s += 1e-9 * span * (10.0 ** attempt)  # Omega not positive on S: the shift was too low
    guess[1] = bb
    s_out[0] = s
    b_out[0] = bb
    return rc


cdef int _draw_column(const double *lam, Py_ssize_t d, const double *W, int r, double lo,
                      double *guess, double *out, bitgen_t *bg, Work *w) except PY_ERROR nogil:
    """Exact draw of a unit x in W^perp with density proportional to exp(x^T diag(lam) x).
    Returns 0, a negative error code (PROPOSAL_LIMIT after MAX_PROPOSALS proposals), or
    PY_ERROR with an exception set (a signal handler raised)."""
    cdef Py_ssize_t i
    cdef int a, rc
    cdef double s, bb, qd = <double>(d - r), logM, acc, nrm, xlx, xox, logr, scale
    cdef double tries = 0.0
    rc = _envelope(lam, d, W, r, lo, guess, &s, &bb, w)
    if rc != 0:
        return rc
    logM = 0.0
    if bb < qd:
        logM = -(qd - bb) / 2.0 + (qd / 2.0) * log(qd / bb)

    while True:
        if tries >= _MAX_PROPOSALS:
            return PROPOSAL_LIMIT
        tries += 1.0
        w.since_poll += 1
        if w.since_poll >= _SIGNAL_EVERY:
            w.since_poll = 0
            _poll_signals()
        w.proposals += 1.0
        _envelope_proposal(bg, w, d, W, r)
        nrm = _dot(w.x, w.x, d)
        if not nrm > 0.0:
            continue
        xlx = _dot3(lam, w.x, w.x, d) / nrm
        xox = _dot3(w.omega, w.x, w.x, d) / nrm
        logr = (xlx - s) + (qd / 2.0) * log(xox) - logM
        if logr > 1e-9:
            w.bound_violations += 1.0
        if log(random_ustar(bg)) < logr:
            break
    w.accepts += 1.0
    # remove the rounding-level component along the other columns, renormalise
    for a in range(r):
        acc = _dot(&W[a * d], w.x, d)
        for i in range(d):
            w.x[i] -= acc * W[a * d + i]
    nrm = _dot(w.x, w.x, d)
    scale = 1.0 / sqrt(nrm)
    for i in range(d):
        out[i] = w.x[i] * scale
    return 0


cdef int _alloc(Work *w, Py_ssize_t d, int rmax) noexcept nogil:
    cdef int rr = rmax if rmax > 1 else 1
    cdef size_t small
    w.nlwork = 64 * (rr + 2)
    small = 3 * rr * rr + 5 * rr + <size_t>w.nlwork
    w.z = <double *>malloc(7 * d * sizeof(double))
    w.B = <double *>malloc(2 * rr * d * sizeof(double))
    w.M = <double *>malloc(small * sizeof(double))
    w.W = <double *>malloc(rr * d * sizeof(double))
    w.J = <int *>malloc(rr * sizeof(int))
    if w.z == NULL or w.B == NULL or w.M == NULL or w.W == NULL or w.J == NULL:
        return -1
    w.x = w.z + d
    w.omega = w.z + 2 * d
    w.sdinv = w.z + 3 * d
    w.p = w.z + 4 * d
    w.wgt = w.z + 5 * d
    w.dplus = w.z + 6 * d
    w.H = w.B + rr * d
    w.Cm = w.M + rr * rr
    w.G = w.Cm + rr * rr
    w.c = w.G + rr * rr
    w.xi = w.c + rr
    w.sdelta = w.xi + rr
    w.evals = w.sdelta + rr
    w.lwork = w.evals + rr
    w.m = 0
    w.proposals = 0.0
    w.accepts = 0.0
    w.bound_violations = 0.0
    w.since_poll = 0
    return 0


cdef void _release(Work *w) noexcept nogil:
    free(w.z)
    free(w.B)
    free(w.M)
    free(w.W)
    free(w.J)


cdef double _trace(const double *lam, Py_ssize_t d, const double *Vt, Py_ssize_t k) noexcept nogil:
    cdef double acc = 0.0
    cdef Py_ssize_t i, j
    for j in range(k):
        for i in range(d):
            acc += lam[i] * Vt[j * d + i] * Vt[j * d + i]
    return acc


cdef int _sweeps(const double *lam, Py_ssize_t d, double *Vt, Py_ssize_t k, Py_ssize_t n_sweeps,
                 double *trace, Py_ssize_t *perm, double *guess, bitgen_t *bg,
                 Work *w) except PY_ERROR nogil:
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
            rc = _draw_column(lam, d, w.W, <int>(k - 1), lo, &guess[2 * j], &Vt[j * d], bg, w)
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
    cdef double *guess = <double *>malloc(2 * k * sizeof(double))   # per column: shift, b
    perm = <Py_ssize_t *>malloc(k * sizeof(Py_ssize_t))
    if guess != NULL:
        for j in range(k):
            guess[2 * j] = -INFINITY
            guess[2 * j + 1] = 0.0
    if perm == NULL or guess == NULL or _alloc(&w, d, <int>(k - 1)) != 0:
        free(perm)
        free(guess)
        _release(&w)
        raise MemoryError()
    try:
        with h.lock, nogil:
            random_words(&w.src, h.bitgen)
            rc = _sweeps(&lam[0], d, &Vt[0, 0], k, n_sweeps, tr, perm, guess, h.bitgen, &w)
    finally:
        counters[0] += w.proposals
        counters[1] += w.accepts
        counters[2] += w.bound_violations
        _release(&w)
        free(perm)
        free(guess)
    if rc != 0:
        _raise_for(rc)


def sequential(const double[::1] lam,   # IN: eigenvalues, descending
               double[:, ::1] Vt,       # OUT: k x d; row j drawn given rows 0..j-1
               Py_ssize_t start,
               BitgenHandle h,
               double[::1] counters):
    """Exact draws: row j (j >= start) from the vector Bingham on the complement of rows < j."""
    cdef Py_ssize_t d = lam.shape[0], k = Vt.shape[0], j
    cdef Work w
    cdef int rc = 0
    cdef double guess[2]
    if Vt.shape[1] != d or k < 1 or k >= d + 1:
        raise ValueError("internal: bad shapes")
    if _alloc(&w, d, <int>(k if k > 1 else 1)) != 0:
        _release(&w)
        raise MemoryError()
    try:
        with h.lock, nogil:
            random_words(&w.src, h.bitgen)
            for j in range(start, k):
                guess[0] = -INFINITY
                guess[1] = 0.0
                rc = _draw_column(&lam[0], d, &Vt[0, 0], <int>j, -INFINITY, guess, &Vt[j, 0],
                                  h.bitgen, &w)
                if rc != 0:
                    break
    finally:
        counters[0] += w.proposals
        counters[1] += w.accepts
        counters[2] += w.bound_violations
        _release(&w)
    if rc != 0:
        _raise_for(rc)


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


def _test_positive_count(const double[:, ::1] G):
    """Positive eigenvalues of the symmetric matrix G by the kernel's inertia rule (tests only)."""
    cdef Work w
    cdef int r = G.shape[0], n, i
    if _alloc(&w, 1, r) != 0:
        _release(&w)
        raise MemoryError()
    for i in range(r * r):
        w.G[i] = G[i // r, i % r]
    n = _positive_count(w.G, r, &w)
    _release(&w)
    return n


def _test_normals(Py_ssize_t n, BitgenHandle h):
    """n standard normals from the kernel's sampler (tests only)."""
    cdef Work w
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        random_words(&w.src, h.bitgen)
        for i in range(n):
            o[i] = _normal(h.bitgen, &w)
    return out


def _test_envelope(const double[::1] lam, const double[:, ::1] W, double lo, Py_ssize_t n,
                   BitgenHandle h):
    """(rc, s, b, omega, n unnormalised envelope proposals (n x d)) for the column drawn given
    the rows of W (tests only)."""
    cdef Work w
    cdef int r = W.shape[0], rc
    cdef Py_ssize_t d = lam.shape[0], i, t
    cdef double s, bb
    cdef double guess[2]
    cdef const double *Wp = &W[0, 0] if r > 0 else NULL
    if _alloc(&w, d, r if r > 0 else 1) != 0:
        _release(&w)
        raise MemoryError()
    out = np.empty((n, d))
    omega = np.empty(d)
    guess[0] = -INFINITY
    guess[1] = 0.0
    rc = _envelope(&lam[0], d, Wp, r, lo, guess, &s, &bb, &w)
    if rc == 0:
        with h.lock:
            random_words(&w.src, h.bitgen)
            for t in range(n):
                _envelope_proposal(h.bitgen, &w, d, Wp, r)
                for i in range(d):
                    out[t, i] = w.x[i]
        for i in range(d):
            omega[i] = w.omega[i]
    _release(&w)
    return rc, s, bb, omega, out


def panel_product(A, B, Py_ssize_t panel, bint symmetric):
    """A^T B (A: n x m, B: n x p, float64) by column panels of B of ``panel`` columns, one BLAS
    call per panel on dpcore's thread pool (NumPy's matmul releases the GIL; the caller pins
    BLAS to one thread). The panels are fixed by the shapes and ``panel``, never by the thread
    count, and each output entry is computed by exactly one BLAS call on the same operands, so
    the result has the same bits for any thread count. ``symmetric`` (A^T B known symmetric,
    m = p): panel [j0, j1) computes only rows < j1 (the upper triangle and its diagonal block),
    the largest panels first, and the upper triangle is mirrored."""
    cdef Py_ssize_t m = A.shape[1], p = B.shape[1]
    cdef Py_ssize_t nblocks = (p + panel - 1) // panel
    out = np.zeros((m, p))

    def block(Py_ssize_t b):
        cdef Py_ssize_t j0, j1
        if symmetric:
            b = nblocks - 1 - b
        j0 = b * panel
        j1 = min(p, j0 + panel)
        if symmetric:
            out[:j1, j0:j1] = A[:, :j1].T @ B[:, j0:j1]
        else:
            out[:, j0:j1] = A.T @ B[:, j0:j1]

    run_blocks(block, nblocks)
    if symmetric:
        upper = np.triu(out)
        out = upper + np.triu(upper, 1).T
    return out
