"""Sampling the matrix Bingham distribution on the Stiefel manifold (kernel ``dpcore._bingham``).

`bingham` draws V (d x k, orthonormal columns) with density proportional to etr(V^T A V) with
respect to the uniform measure: exactly for k = 1 (Kent-Ganeiber-Mardia rejection), by Hoff's
column-wise Gibbs sampler with exact column conditionals for 1 < k < d, and exactly (Haar) for
k = d, where the density is constant. It is the sampler behind private PCA
(`dpcore.learn.PCA`, method "ppca"), where A = (epsilon / 2) X^T X for rows of norm <= 1.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._progress import Progress
from dpcore.random import bitgen_handle, check_random_state

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike

__all__ = ["bingham", "bingham_sequential", "uniform_frame", "transpose_product"]

_METHODS = ("auto", "exact", "gibbs")


def _kernel():
    # imported on first use: the kernel links scipy's LAPACK, whose import takes 0.3 s
    from dpcore import _bingham

    return _bingham


#: Columns per panel of `transpose_product`: fixed, so the panels (and the bits of the result)
#: do not depend on the thread count; wide enough for BLAS to run near its peak.
PANEL = 64
#: Below this many multiply-adds a product runs as one BLAS call (no pool, no BLAS pinning).
MIN_PANEL_WORK = 2**24


def _one_blas_thread():
    """A context pinning BLAS to one thread (dpcore's threads run the panels), or a no-op
    without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def transpose_product(A: ArrayLike, B: ArrayLike, *, symmetric: bool = False) -> np.ndarray:
    """A^T B on dpcore's threads (`dpcore.set_num_threads`), the same bits for any thread count.

    The product is split into column panels of B, ``PANEL`` columns each (fixed, never set by
    the thread count), each one single-threaded BLAS call on a pool thread (BLAS is pinned to one
    thread meanwhile, through threadpoolctl, so the threads do not oversubscribe the cores).
    ``symmetric``: A^T B is known to be symmetric (e.g. B = A, the second moment X^T X, or
    B = S N with S symmetric): only the upper triangle's panels are computed (half the work) and
    mirrored. Products of fewer than ``MIN_PANEL_WORK`` multiply-adds are one BLAS call.

    Parameters
    ----------
    A : array_like, shape (n, m)
    B : array_like, shape (n, p) (p = m when ``symmetric``)
    symmetric : bool, default=False

    Returns
    -------
    ndarray, shape (m, p)

    Privacy
    -------
    Not a release: an exact-arithmetic product (up to floating-point rounding) of the caller's
    arrays, nothing drawn and nothing charged; its output is private data until a mechanism
    releases it (`dpcore.learn.PCA` computes X^T X with it). Deterministic: the thread count
    changes neither the bits of the result nor any law.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.bingham import transpose_product
    >>> X = np.arange(6.0).reshape(3, 2)
    >>> transpose_product(X, X, symmetric=True)
    array([[20., 26.],
           [26., 35.]])
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must be 2-d with the same number of rows, got {A.shape} and "
                         f"{B.shape}")
    if symmetric and A.shape[1] != B.shape[1]:
        raise ValueError("symmetric needs A and B of the same width")
    n, m = A.shape
    p = B.shape[1]
    if n * m * p < MIN_PANEL_WORK or p <= PANEL:
        out = A.T @ B
        if symmetric:
            upper = np.triu(out)
            out = upper + np.triu(upper, 1).T
        return out
    with _one_blas_thread():
        return _kernel().panel_product(A, B, PANEL, symmetric)


def _symmetric_matrix(A, name="A"):
    A = check.finite_array(A, name)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"{name} must be a square 2-d array, got shape {A.shape}")
    scale = float(np.max(np.abs(A))) if A.size else 0.0
    if not np.all(np.abs(A - A.T) <= 1e-12 * max(scale, 1e-300) * A.shape[0]):
        raise ValueError(f"{name} must be symmetric (A == A.T up to rounding)")
    return 0.5 * (A + A.T)


def uniform_frame(d: int, k: int, *, random_state: RandomStateLike = None) -> np.ndarray:
    """A uniformly distributed d x k matrix with orthonormal columns (Haar measure).

    Parameters
    ----------
    d, k : int
        1 <= k <= d.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's secure generator. Seeds are for tests only.

    Returns
    -------
    ndarray of shape (d, k)

    Notes
    -----
    QR of a d x k standard Gaussian matrix with the signs of R's diagonal fixed positive, which
    makes Q Haar-distributed.

    Privacy
    -------
    Uses no data: the frame is public randomness (e.g. the noisy power method's start), and
    nothing is charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.bingham import uniform_frame
    >>> Q = uniform_frame(5, 2, random_state=0)
    >>> bool(np.allclose(Q.T @ Q, np.eye(2)))
    True
    """
    d = check.integer(d, "d", minimum=1)
    k = check.integer(k, "k", minimum=1)
    if k > d:
        raise ValueError(f"k must be <= d = {d}, got {k}")
    return _uniform_frame(check_random_state(random_state), d, k)


def _uniform_frame(rng, d, k):
    G = rng.standard_normal((d, k))
    Q, R = np.linalg.qr(G)
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return Q * signs


def _check_init(init, d, k, U, lam, rng):
    if init is None or (isinstance(init, str) and init == "random"):
        return _uniform_frame(rng, d, k)
    if isinstance(init, str):
        if init == "mode":
            return U[:, :k].copy()
        raise ValueError(f"init must be None, 'random', 'mode' or a d x k array, got {init!r}")
    V0 = check.finite_array(init, "init")
    if V0.shape != (d, k):
        raise ValueError(f"init must have shape ({d}, {k}), got {V0.shape}")
    if not np.allclose(V0.T @ V0, np.eye(k), atol=1e-8):
        raise ValueError("init must have orthonormal columns (init.T @ init == I to 1e-8)")
    Q, R = np.linalg.qr(V0)                      # re-orthonormalise to full precision
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def bingham(A: ArrayLike, k: int, *, n_sweeps: int = 200, method: str = "auto",
            init: ArrayLike | None = None, random_state: RandomStateLike = None,
            progress: bool = False, return_trace: bool = False
            ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Draw a d x k matrix with orthonormal columns from the matrix Bingham distribution.

    The density with respect to the uniform measure on the Stiefel manifold is proportional to
    etr(V^T A V) = exp(trace(V^T A V)).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric, finite. (Only A's symmetric part matters; asymmetry beyond rounding is an
        error.)
    k : int
        Number of columns, 1 <= k <= d.
    n_sweeps : int, default=200
        Gibbs sweeps (each column redrawn once per sweep, in random order) for 1 < k < d, or with
        ``method="gibbs"`` for k = 1. Ignored by the exact samplers.
    method : {"auto", "exact", "gibbs"}, default="auto"
        "auto": exact for k = 1 and k = d, Gibbs otherwise. "exact": like "auto" but an error for
        1 < k < d (no exact sampler is known). "gibbs": the chain for every k < d.
    init : None, "random", "mode" or array_like of shape (d, k), default=None
        Start of the chain. None / "random": a uniformly random frame (independent of A; the
        principled choice). "mode": the top-k eigenvectors of A (short burn-in, but the error
        of a finite run then depends on A). An array must have orthonormal columns.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator (unlike
        scikit-learn, where None means numpy's global generator). Seeds are for tests only.
    progress : bool, default=False
        Show a progress bar on stderr: sweeps done out of ``n_sweeps``, elapsed time and time
        left only, never a value computed from A (A may come from private data).
    return_trace : bool, default=False
        Also return the chain's trace tr(V^T A V) after each sweep (empty for exact draws), a
        burn-in diagnostic. **Not private**: the trace is an exact, un-noised function of A
        (with A = (epsilon / 2) X^T X its last value is the private utility of the released
        subspace), so when A is computed from private data it must not be published or
        logged. `dpcore.learn.PCA` never requests it.

    Returns
    -------
    V : ndarray, shape (d, k)
        Orthonormal columns.
    trace : ndarray, shape (n_sweeps,)
        Only with ``return_trace=True``.

    Raises
    ------
    ValueError
        A not square, not symmetric or not finite; k outside [1, d]; bad n_sweeps, method or init.
    TypeError
        Non-numeric arguments.

    Privacy
    -------
    This function is a sampler, not a release by itself: it is differentially private exactly
    when A is a calibrated exponential-mechanism score, e.g. A = (epsilon / 2) X^T X with every
    row of X of norm <= 1 gives epsilon-DP under replace-one for the released subspace
    (Chaudhuri-Sarwate-Sinha, see `dpcore.learn.PCA`, which also clips and charges the budget).
    The guarantee holds for exact draws: k = 1 (Kent-Ganeiber-Mardia rejection; exact up to
    floating-point rounding of the proposal and acceptance) and k = d. For 1 < k < d the Gibbs
    chain's *stationary* distribution is the matrix Bingham, but a finite chain's output has a
    law that only approaches it, at a rate no known bound controls; the epsilon-DP statement
    then holds only to the extent the chain has converged (nothing is charged here). Run time
    depends on A (rejection loops): not constant-time. The guarantee covers V only: the trace
    returned with ``return_trace=True`` is not private. An A beyond what the samplers handle in
    floating point (eigenvalue spread above about 1e8 for the chain, 1e13 for the exact draw)
    raises RuntimeError from the kernel after its proposal bound; callers releasing private
    data should refuse such A from a public bound before charging (as `dpcore.learn.PCA` does).

    Notes
    -----
    A is diagonalised once; the kernel works in its eigenbasis. Each column update is an exact
    draw from the column's conditional given the others (a vector Bingham on the orthogonal
    complement of the other columns), by rejection from an angular central Gaussian envelope
    (Kent, Ganeiber and Mardia), so the chain is Hoff's (2009) column-wise Gibbs sampler with
    exact conditionals. Cost: O(d^3) once, then O(d k^2) per column update.

    References
    ----------
    .. [Hof09] P. D. Hoff, "Simulation of the matrix Bingham-von Mises-Fisher distribution, with
       applications to multivariate and relational data", JCGS 18(2), 2009.
    .. [KGM18] J. T. Kent, A. M. Ganeiber, K. V. Mardia, "A new unified approach for the
       simulation of a wide class of directional distributions", JCGS 27(2), 2018.
    .. [CSS13] K. Chaudhuri, A. D. Sarwate, K. Sinha, "A near-optimal algorithm for
       differentially-private principal components", JMLR 14, 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.bingham import bingham
    >>> A = np.diag([20.0, 5.0, 0.0])
    >>> v = bingham(A, 1, random_state=0)            # exact draw
    >>> v.shape
    (3, 1)
    >>> V = bingham(A, 2, n_sweeps=50, random_state=1)
    >>> bool(np.allclose(V.T @ V, np.eye(2)))
    True
    """
    A = _symmetric_matrix(A)
    d = A.shape[0]
    k = check.integer(k, "k", minimum=1)
    if k > d:
        raise ValueError(f"k must be <= d = {d}, got {k}")
    n_sweeps = check.integer(n_sweeps, "n_sweeps", minimum=1)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method == "exact" and 1 < k < d:
        raise ValueError(f"method='exact' needs k = 1 or k = d (no exact sampler for 1 < k < d), got k={k}")
    if method == "gibbs" and k == d:
        raise ValueError("method='gibbs' needs k < d (for k = d the law is uniform: use 'auto')")
    rng = check_random_state(random_state)
    h = bitgen_handle(rng)
    empty = np.empty(0)
    if k == d:
        # etr(V^T A V) = etr(A) is constant on the orthogonal group: the law is Haar.
        V = _uniform_frame(rng, d, d)
        return (V, empty) if return_trace else V
    lam, U = np.linalg.eigh(A)
    lam = np.ascontiguousarray(lam[::-1])
    U = np.ascontiguousarray(U[:, ::-1])
    counters = np.zeros(3)
    if k == 1 and method != "gibbs":
        Vt = np.zeros((1, d))
        _kernel().sequential(lam, Vt, 0, h, counters)
        V = U @ Vt.T
        return (V, empty) if return_trace else V
    V0 = _check_init(init, d, k, U, lam, rng)
    Vt = np.ascontiguousarray((U.T @ V0).T)
    trace = np.empty(n_sweeps)
    chunk = max(1, n_sweeps // 50) if progress else n_sweeps
    done = 0
    # counters only: the trace and the acceptance rate are functions of A, which may be
    # computed from private data without noise
    with Progress("bingham sweeps", n_sweeps, enabled=progress) as bar:
        while done < n_sweeps:
            m = min(chunk, n_sweeps - done)
            _kernel().gibbs(lam, Vt, m, h, trace[done:done + m], counters)
            done += m
            bar.update(done)
    V = U @ Vt.T
    # the kernel keeps the columns orthonormal to rounding; polish against drift of U @ (.)
    Q, R = np.linalg.qr(V)
    V = Q * np.where(np.diag(R) < 0, -1.0, 1.0)
    return (V, trace) if return_trace else V


def bingham_sequential(A: ArrayLike, k: int, *, random_state: RandomStateLike = None) -> np.ndarray:
    """k exact draws, one column at a time: column j from the vector Bingham density
    proportional to exp(v^T A v) on the unit vectors orthogonal to columns 1..j-1.

    This is the "deflation" sampler of private PCA: each column alone is an exact exponential
    mechanism draw, so k draws with A = (epsilon / (2 k)) X^T X compose to epsilon-DP exactly
    (no Markov chain).

    Parameters
    ----------
    A : array_like of shape (d, d)
        Symmetric, finite.
    k : int
        Number of columns, 1 <= k < d.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's secure generator. Seeds are for tests only.

    Returns
    -------
    ndarray of shape (d, k)
        Orthonormal columns, in the order drawn.

    Raises
    ------
    ValueError
        A not square, not symmetric or not finite; k outside [1, d).
    TypeError
        Non-numeric arguments.
    RuntimeError
        From the kernel, when a column draw accepts no proposal within its bound (an eigenvalue
        spread of A too large for floating point, above about 1e13): nothing is returned.

    Privacy
    -------
    A sampler, not a release: with A = (epsilon_j / 2) X^T X / L^2 for rows of norm <= L, column
    j is epsilon_j-DP under replace-one given the earlier columns (Chaudhuri-Sarwate-Sinha with
    k = 1 on the complement), and the k columns compose to sum_j epsilon_j. Each draw is exact
    (Kent-Ganeiber-Mardia rejection) up to floating-point rounding; nothing is charged here.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.bingham import bingham_sequential
    >>> V = bingham_sequential(np.diag([20.0, 5.0, 0.0]), 2, random_state=0)
    >>> bool(np.allclose(V.T @ V, np.eye(2)))
    True
    """
    A = _symmetric_matrix(A)
    d = A.shape[0]
    k = check.integer(k, "k", minimum=1)
    if k >= d:
        raise ValueError(f"k must be < d = {d}, got {k}")
    h = bitgen_handle(check_random_state(random_state))
    lam, U = np.linalg.eigh(A)
    lam, U = np.ascontiguousarray(lam[::-1]), U[:, ::-1]
    Vt = np.zeros((k, d))
    _kernel().sequential(lam, Vt, 0, h, np.zeros(3))
    return U @ Vt.T


# ------------------------------------------------------------------------------------------------
# Naive NumPy twin (reference for tests and baseline for benchmarks; not used by the API)

def _kgm_exact(lam, rng):
    """Kent-Ganeiber-Mardia draw of y on the unit sphere with density prop. to exp(sum lam y^2),
    textbook form: lam are the eigenvalues (any order); returns y in the same coordinates."""
    lam = np.asarray(lam, dtype=float)
    q = lam.size
    a = lam.max() - lam                               # PSD, min eigenvalue 0
    lo, hi = 1.0, float(q)
    for _ in range(100):                              # sum 1/(b + 2a) = 1, decreasing in b
        mid = 0.5 * (lo + hi)
        if np.sum(1.0 / (mid + 2.0 * a)) > 1.0:
            lo = mid
        else:
            hi = mid
    b = hi
    omega = 1.0 + 2.0 * a / b
    log_m = -(q - b) / 2.0 + (q / 2.0) * np.log(q / b) if b < q else 0.0
    while True:
        z = rng.standard_normal(q) / np.sqrt(omega)
        y = z / np.linalg.norm(z)
        t = np.dot(a, y * y)
        if np.log(rng.random()) < -t + (q / 2.0) * np.log(np.dot(omega, y * y)) - log_m:
            return y


def _reference_sweep(V, A, rng):
    """One column-wise Gibbs sweep (Hoff 2009, exact column conditionals), written plainly:
    for each column in random order, an orthonormal basis N of the complement of the other
    columns (QR), the conditional's matrix N^T A N, its eigendecomposition, a KGM draw."""
    d, k = V.shape
    V = V.copy()
    for j in rng.permutation(k):
        others = np.delete(V, j, axis=1)
        Q, _ = np.linalg.qr(np.hstack([others, rng.standard_normal((d, d - k + 1))]))
        N = Q[:, k - 1:]
        lam, E = np.linalg.eigh(N.T @ A @ N)
        y = _kgm_exact(lam, rng)
        v = N @ (E @ y)
        V[:, j] = v / np.linalg.norm(v)
    return V
