"""The matrix mechanism (Li, Miklau, Hay, McGregor, Rastogi 2010/2015): a workload of linear
queries answered by least squares from a noisy strategy, with its expected error exact."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _publish
from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._release import Cost, release
from dpcore._release.bins import OUTSIDE, BinGrid, add_cell_noise, pow2_at_least, tree_levels
from dpcore._release.sums import IntegerNoise, flat_records
from dpcore.publish import _docs as docs

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["STRATEGIES", "MatrixRelease", "expected_error", "matrix_mechanism", "strategy_matrix"]

#: Largest number of bins the matrix mechanism takes (its strategies are dense matrices and
#: their pseudo-inverses cost O(bins**3)).
MAX_MATRIX_BINS = 4096
#: Strategy names :func:`strategy_matrix` knows ("auto" picks the best of them).
STRATEGIES = ("identity", "hierarchical", "wavelet", "eigen")
#: A real-valued strategy is rounded to integers whose largest column L1 norm is about 2**20,
#: so the measurement M x is an exact integer (exact discrete Laplace, no grid); the relative
#: change of the strategy, about 2**-20, is public.
_STRATEGY_BITS = 20


def _check_workload(workload, n_bins=None):
    w = check.finite_array(workload, "workload")
    if w.ndim == 1:
        w = w[None, :]
    if w.ndim != 2 or w.shape[0] < 1 or w.shape[1] < 1:
        raise ValueError(f"workload must be a (queries, bins) matrix, got shape {w.shape}")
    if n_bins is not None and w.shape[1] != n_bins:
        raise ValueError(f"workload must have one column per bin ({n_bins}), got shape "
                         f"{w.shape}")
    if w.shape[1] > MAX_MATRIX_BINS:
        raise ValueError(f"workload has {w.shape[1]} bins, more than MAX_MATRIX_BINS = "
                         f"{MAX_MATRIX_BINS}")
    return np.ascontiguousarray(w, dtype=np.float64)


def _integer_strategy(a):
    """The strategy as an int64 matrix: integer matrices as they are, real ones scaled so the
    largest column L1 norm is about 2**_STRATEGY_BITS and rounded (the rounded matrix is the
    strategy, public). All-zero rows are dropped (they measure nothing)."""
    a = a[np.any(a != 0, axis=1)]
    if not np.array_equal(a, np.round(a)) or np.abs(a).max() > 2**_STRATEGY_BITS:
        norm = float(np.abs(a).sum(axis=0).max())
        a = np.round(a * (2.0**_STRATEGY_BITS / norm))
        a = a[np.any(a != 0, axis=1)]
    return a.astype(np.int64)


def strategy_matrix(n_bins: int, strategy: str, *, workload: ArrayLike | None = None,
                    branching: int = 8) -> np.ndarray:
    """A strategy matrix for the matrix mechanism over ``n_bins`` bins: which linear
    combinations of the bin counts are measured with noise.

    Parameters
    ----------
    n_bins : int
        Number of bins n >= 1 (at most MAX_MATRIX_BINS).
    strategy : {"identity", "hierarchical", "wavelet", "eigen"}
        ``"identity"``: every bin (the flat histogram). ``"hierarchical"``: every node of a
        complete ``branching``-ary tree over the bins (padded to a power, the padding's
        columns dropped). ``"wavelet"``: the unnormalised Haar transform of :func:`privelet`
        (padded to a power of two). ``"eigen"``: adapted to ``workload``, Li and Miklau's
        eigen-design: with W^T W = Q diag(lam) Q^T, the rows lam_i**(1/4) q_i^T (eigenvalues
        floored at 1e-6 of the largest, so every direction is measured). It is optimal for
        L2 (Gaussian) error; under Laplace noise its column L1 norms often make it lose to the
        fixed strategies, which ``"auto"`` then picks.
    workload : array_like, shape (queries, n_bins), optional
        Required for ``"eigen"``.
    branching : int, default=8
        Branching factor of ``"hierarchical"`` (8 did best for prefix workloads of 64 to
        1024 bins; 2 is up to 1.7x worse).

    Returns
    -------
    ndarray of float64, shape (measurements, n_bins)

    Raises
    ------
    ValueError
        An unknown strategy, n_bins out of range, a missing or malformed workload.

    Privacy
    -------
    Arithmetic on public values (sizes and the public workload): reads no data, charges
    nothing. Measuring A x costs the largest column L1 norm of A in sensitivity
    (add/remove one record changes one bin by 1).

    Examples
    --------
    >>> from dpcore import publish
    >>> publish.strategy_matrix(2, "wavelet")
    array([[ 1.,  1.],
           [ 1., -1.]])
    """
    n_bins = check.integer(n_bins, "n_bins", minimum=1, maximum=MAX_MATRIX_BINS)
    if strategy == "identity":
        return np.eye(n_bins)
    if strategy == "hierarchical":
        branching = check.integer(branching, "branching", minimum=2, maximum=MAX_MATRIX_BINS)
        levels = tree_levels(n_bins, branching)
        n_leaves = branching ** (levels - 1)
        rows = []
        for d in np.arange(levels):
            width = n_leaves // branching**d
            starts = np.arange(0, n_bins, width)
            block = np.zeros((starts.size, n_bins))
            for r, s in enumerate(starts):
                block[r, s:s + width] = 1.0
            rows.append(block)
        return np.vstack(rows)
    if strategy == "wavelet":
        n = pow2_at_least(n_bins)
        h = np.empty((n, n))
        _publish.haar_forward(np.eye(n), h, np.empty(2 * n))  # row j = H e_j: h is H^T
        return np.ascontiguousarray(h.T[:, :n_bins])
    if strategy == "eigen":
        if workload is None:
            raise ValueError("strategy='eigen' needs the workload")
        w = _check_workload(workload, n_bins)
        lam, q = np.linalg.eigh(w.T @ w)
        # a floor on the eigenvalues keeps every direction measured (full column rank, so the
        # integer rounding cannot lose the workload's row space); it costs little: weights
        # below 1e-6**(1/4) = 3% of the largest matter little to the error
        lam = np.maximum(lam, lam.max() * 1e-6)
        return np.ascontiguousarray((lam**0.25)[:, None] * q.T)
    raise ValueError(f"strategy must be one of {STRATEGIES + ('auto',)} or a matrix, got "
                     f"{strategy!r}")


@dataclass(frozen=True)
class _Plan:
    """A strategy made ready: the integer matrix M, its noise, how to reconstruct, and the
    exact variance of every workload answer."""

    name: str
    matrix: np.ndarray  # int64 (measurements, bins)
    noise: IntegerNoise
    solve: object  # y -> M^+ y
    query_variance: np.ndarray  # per workload query: v * |row of W M^+|**2

    @property
    def expected_error(self):
        return float(self.query_variance.sum())


def _plan(w, strategy, epsilon, branching):
    from scipy import linalg  # here: `import dpcore` stays free of scipy

    if isinstance(strategy, str):
        a = strategy_matrix(w.shape[1], strategy, workload=w, branching=branching)
        name = strategy
    else:
        a = check.finite_array(strategy, "strategy")
        if a.ndim != 2 or a.shape[1] != w.shape[1] or not np.any(a):
            raise ValueError(f"strategy must be a name or a (measurements, {w.shape[1]}) "
                             f"matrix, not all zero, got shape {a.shape}")
        name = "custom"
    m = _integer_strategy(np.asarray(a, dtype=np.float64))
    sensitivity = int(np.abs(m).sum(axis=0).max())
    noise = IntegerNoise.calibrate("laplace", sensitivity, epsilon, 0.0)
    mf = m.astype(np.float64)
    try:
        # full column rank (every named strategy): M^+ = (M^T M)^-1 M^T by Cholesky, and
        # |row of W M^+|**2 = |L^-1 w_row|**2; far cheaper than an SVD
        factor = linalg.cho_factor(mf.T @ mf, lower=True)
        half = linalg.solve_triangular(factor[0], w.T, lower=True)
        variance = noise.variance * np.einsum("ij,ij->j", half, half)
        return _Plan(name, m, noise, lambda y: linalg.cho_solve(factor, mf.T @ y), variance)
    except linalg.LinAlgError:
        pass
    pinv = np.linalg.pinv(mf)
    wp = w @ pinv
    # the estimate W M^+ (M x + z) is W x + W M^+ z only if W's rows lie in M's row space
    if not np.allclose(wp @ mf, w, rtol=0, atol=1e-6 * max(1.0, float(np.abs(w).max()))):
        raise ValueError(f"strategy {name!r} does not determine the workload (its rows do not "
                         "span the workload's rows)")
    return _Plan(name, m, noise, lambda y: pinv @ y,
                 noise.variance * np.einsum("ij,ij->i", wp, wp))


def expected_error(workload: ArrayLike, strategy: str | ArrayLike, *, epsilon: float,
                   branching: int = 8) -> float:
    """Expected total squared error of the matrix mechanism's answers to ``workload``:
    sum over the queries of E (answer - true answer)**2 (exact, whatever the data).

    Parameters
    ----------
    workload : array_like, shape (queries, bins)
        The linear queries (rows) over the bins.
    strategy : str or array_like
        A name of :func:`strategy_matrix` or a (measurements, bins) matrix.
    epsilon : float
        Privacy parameter, > 0.
    branching : int, default=8
        Branching factor of ``"hierarchical"``.

    Returns
    -------
    float
        Var(noise) * ||W M^+||_F**2 for the integer strategy M that
        :func:`matrix_mechanism` measures and its exact discrete Laplace noise.

    Privacy
    -------
    Arithmetic on public values (workload, strategy, epsilon): reads no data, charges
    nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import publish
    >>> w = np.tril(np.ones((4, 4)))  # prefix counts
    >>> round(publish.expected_error(w, "identity", epsilon=1.0), 3)
    18.413
    """
    w = _check_workload(workload)
    epsilon = check.epsilon(epsilon)
    if isinstance(strategy, str) and strategy == "auto":
        return min(_plan(w, s, epsilon, branching).expected_error for s in STRATEGIES)
    return _plan(w, strategy, epsilon, branching).expected_error


@dataclass(frozen=True, eq=False)
class MatrixRelease:
    """A matrix-mechanism release (returned by :func:`matrix_mechanism`)."""

    edges: np.ndarray  #: bin edges (float64, bins + 1)
    workload: np.ndarray  #: the workload W (queries, bins)
    strategy: str  #: the strategy's name ("custom" for a matrix)
    matrix: np.ndarray  #: the integer strategy M that was measured (measurements, bins)
    noisy: np.ndarray  #: int64 noisy measurements M x + z
    counts: np.ndarray  #: least-squares bin counts M^+ (M x + z) (float64)
    noise: IntegerNoise  #: per-measurement noise (discrete Laplace, scale sensitivity / eps)
    query_variance: np.ndarray  #: exact variance of each answer

    @property
    def answers(self) -> np.ndarray:
        """The workload's answers W counts (unbiased; post-processing)."""
        return self.workload @ self.counts

    @property
    def expected_error(self) -> float:
        """Expected total squared error of ``answers`` (sum of ``query_variance``)."""
        return float(self.query_variance.sum())


@fill(grid=docs.GRID_1D, outside=docs.OUTSIDE, random_state=docs.RANDOM_STATE,
      accountant=docs.ACCOUNTANT, charged=docs.CHARGED)
def matrix_mechanism(x: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
                     workload: ArrayLike, epsilon: float, strategy: str | ArrayLike = "auto",
                     branching: int = 8, outside: str = "drop",
                     random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> MatrixRelease:
    """Answer a workload of linear counting queries with the matrix mechanism (Li et al.
    [LMHMR15]_): measure a strategy of linear queries with noise, estimate the bin counts by
    least squares, answer the workload from the estimate.

    Parameters
    ----------
    {grid}
    workload : array_like, shape (queries, bins)
        Public linear queries W over the bin counts (any real coefficients).
    epsilon : float
        Privacy parameter, > 0.
    strategy : str or array_like, default="auto"
        ``"identity"``, ``"hierarchical"``, ``"wavelet"``, ``"eigen"`` (adapted to the
        workload; :func:`strategy_matrix`), a (measurements, bins) matrix whose rows span the
        workload's, or ``"auto"``: the named strategy with the least :func:`expected_error`
        (decided from public values only).
    branching : int, default=8
        Branching factor of ``"hierarchical"``.
    {outside}
    {random_state}
    {accountant}

    Returns
    -------
    MatrixRelease
        ``answers`` (W times the estimated counts), ``counts``, ``query_variance`` and
        ``expected_error`` (exact), the strategy and the noisy measurements.

    Raises
    ------
    ValueError
        Invalid bins/range, NaN/infinite records or workload, a workload without one column
        per bin, more than MAX_MATRIX_BINS bins, epsilon <= 0, an unknown strategy or one that
        does not span the workload.
    TypeError
        Non-numeric data or workload.

    Privacy
    -------
    Pure epsilon-DP under add/remove one record. The record changes one bin count by 1, so the
    measurements M x change by one column of M: L1 sensitivity = the largest column L1 norm of
    M. M is an integer matrix (a real strategy is scaled and rounded first; public), so M x is
    an exact integer vector and every measurement gets independent discrete Laplace noise of
    scale sensitivity / epsilon (rounded up): epsilon-DP exactly. The workload, strategy and
    its choice ("auto") use public values only; the least-squares estimate and the answers are
    post-processing.
    {charged}

    Notes
    -----
    With M of full column rank (or W's rows in M's row space), the answers W M^+ (M x + z) =
    W x + W M^+ z are unbiased with covariance v (W M^+)(W M^+)^T, v = Var DLap: the expected
    total squared error is v ||W M^+||_F**2 (:func:`expected_error`).

    References
    ----------
    .. [LMHMR15] C. Li, G. Miklau, M. Hay, A. McGregor, V. Rastogi, "The matrix mechanism:
       optimizing linear counting queries under differential privacy", VLDB Journal 24(6),
       2015 (PODS 2010). C. Li, G. Miklau, "An adaptive mechanism for accurate query answering
       under differential privacy", PVLDB 5(6), 2012 (the eigen-design).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import publish
    >>> w = np.tril(np.ones((64, 64)))  # all prefix counts
    >>> r = publish.matrix_mechanism(np.full(500, 0.3), bins=64, range=(0, 1), workload=w,
    ...                              epsilon=1.0, random_state=0)
    >>> r.strategy, bool(abs(r.answers[-1] - 500) < 60)
    ('hierarchical', True)
    """
    records = flat_records(x)
    grid = BinGrid.make_1d(bins, range)
    w = _check_workload(workload, grid.size)
    epsilon = check.epsilon(epsilon)
    check.option(outside, "outside", OUTSIDE)
    if isinstance(strategy, str) and strategy == "auto":
        plan = min((_plan(w, s, epsilon, branching) for s in STRATEGIES),
                   key=lambda p: p.expected_error)
    else:
        plan = _plan(w, strategy, epsilon, branching)
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(records[:, None], counts, outside == "clip", name="x")
    if counts.sum() >= 2**62 // (2**_STRATEGY_BITS + 1):
        raise ValueError("x has too many records for exact integer measurements")
    noisy = plan.matrix @ counts  # exact: |entries| <= 2**20 and the total is bounded above
    release(lambda rng: add_cell_noise(noisy, plan.noise, rng), cost=Cost(epsilon),
            accountant=accountant, random_state=random_state, label="publish.matrix_mechanism")
    estimate = plan.solve(noisy.astype(np.float64))
    return MatrixRelease(grid.edges[0], w, plan.name, plan.matrix, noisy, estimate,
                         plan.noise, plan.query_variance)
