"""Differentially private M-estimators from one perturbed histogram (Lei 2011).

The data are released **once**, as a perturbed histogram: the records are binned into a grid of
equal cells over the caller's public box and every cell's count gets independent exact discrete
Laplace noise (:func:`perturbed_histogram`). Every estimator here is then computed from that
release alone, with the cell centres standing in for the records and the noisy counts as
weights; nothing here sees the raw data, so any number of estimators costs no further privacy
(post-processing):

    theta_tilde = argmin_theta  sum_j  w_j * loss(a_j, theta)

with a_j the centre of cell j and w_j its (post-processed) noisy count.

**Negative noisy counts.** The noisy counts can be negative, which can make a weighted objective
non-convex or unbounded below. Each estimator takes ``weights=`` (see
:meth:`PerturbedHistogram.weights`):

* ``"threshold"`` (default): cells whose noisy count is below tau = b * ln(M / beta) (b the
  noise scale, M the number of cells, beta = 0.05) get weight 0, the others keep their noisy
  count. With probability about 1 - beta no empty cell survives; cells with fewer than about tau
  records are lost too (a bias towards the dense part of the data, small when n / M is large).
* ``"clip"``: max(count, 0). Convex, but every empty cell keeps b / 2 of spurious mass on
  average (M b / 2 in total), which pulls estimates towards the centre of the box.
* ``"raw"``: the noisy counts as they are: unbiased weighted criterion, but the minimiser may not
  exist (the estimators raise or return what the solver found; use with care).

When the chosen rule leaves no positive total weight (at Lei's bandwidth with d = 2 a cell holds
about sqrt(log n) / epsilon records, so on spread-out data every cell can fall below tau), the
estimators use the next rule that does, threshold or raw -> clip -> every cell alike, and warn
(:func:`usable_weights`): the answer is always finite, never NaN.

**Bandwidth.** By default the cell width (after scaling every axis to [0, 1]) is Lei's rate
h = (sqrt(log n) / (n epsilon))^(2 / (d + 2)), K = ceil(1 / h) cells per axis, which balances the
discretisation bias O(h) against the noise; the estimation error is then of order
n^(-1/2) + (sqrt(log n) / n)^(2 / (d + 2)). This uses the number of records n, which is public
under the replace-one relation (Lei's, the default here); under add/remove give ``h`` or
``bins`` yourself. The constant is a heuristic.

References
----------
[Lei11] J. Lei, "Differentially private M-estimators", NIPS 24 (2011).
[WZ10] L. Wasserman and S. Zhou, "A statistical framework for differential privacy", JASA 2010.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable
import math
import warnings
from dataclasses import dataclass

import numpy as np

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore._release.bins import BinGrid, add_cell_noise, histogram_noise, sample_2d
from dpcore._release.sums import check_privacy

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = [
    "DegenerateHistogramWarning",
    "PerturbedHistogram",
    "perturbed_histogram",
    "usable_weights",
    "lei_bandwidth",
    "m_estimate",
    "quantile",
    "median",
    "huber_location",
    "lad_regression",
    "huber_regression",
]

_WEIGHTS = ("threshold", "clip", "raw")
#: More cells than this gets a warning (memory, and n / M tiny).
LARGE_GRID = 10**8


def lei_bandwidth(n: int, epsilon: float, d: int) -> float:
    """Lei's default cell width on the unit cube: (sqrt(log n) / (n epsilon))^(2 / (d + 2)).

    Parameters
    ----------
    n : int
        Number of records (public under replace-one), >= 2.
    epsilon : float
        Privacy parameter, > 0.
    d : int
        Dimension, >= 1.

    Returns
    -------
    float
        h in (0, 1]; the grid has ceil(1 / h) cells per axis.

    Privacy
    -------
    Not a release: a function of public parameters only (n is public under replace-one; under
    add/remove do not pass the true n). Nothing is charged.

    Examples
    --------
    >>> from dpcore import mestimators
    >>> round(mestimators.lei_bandwidth(10**6, 1.0, 1), 5)
    0.00024
    """
    n = check.integer(n, "n", minimum=2)
    epsilon = check.epsilon(epsilon)
    d = check.integer(d, "d", minimum=1)
    return min(1.0, (math.sqrt(math.log(n)) / (n * epsilon)) ** (2.0 / (d + 2)))


@dataclass(frozen=True, eq=False)
class PerturbedHistogram:
    """The released perturbed histogram: public grid, noisy counts, noise parameters.

    Holds nothing derived from the data but the noisy counts. Build it with
    :func:`perturbed_histogram` (a release) or :meth:`from_counts` (counts released elsewhere, or
    exact counts in tests).

    Attributes
    ----------
    counts : ndarray of int64, shape = bins per axis
        Noisy cell counts (C order).
    edges : list of ndarray
        Cell edges per axis, in the data's units.
    scale : float
        Discrete Laplace scale b of the per-cell noise (0 for exact counts).
    epsilon : float or None
        The privacy parameter of the release (None for counts not released here).
    relation : str
        ``"replace"`` or ``"add_remove"``.
    """

    counts: np.ndarray
    edges: list
    scale: float
    epsilon: float | None
    relation: str

    @classmethod
    def from_counts(cls, counts: ArrayLike, edges: Any, *, scale: float = 0.0,
                    epsilon: float | None = None, relation: str = "replace"
                    ) -> PerturbedHistogram:
        """Wrap counts on a grid (no privacy by itself: only for counts already released, or
        exact counts in tests)."""
        counts = np.asarray(counts)
        edges = [np.asarray(e, dtype=np.float64) for e in edges]
        if counts.shape != tuple(e.size - 1 for e in edges):
            raise ValueError(f"counts has shape {counts.shape}, the edges give "
                             f"{tuple(e.size - 1 for e in edges)}")
        return cls(counts, edges, float(scale), epsilon, relation)

    @property
    def d(self) -> int:
        return len(self.edges)

    @property
    def n_cells(self) -> int:
        return int(self.counts.size)

    def centers(self, axis: int | None = None) -> np.ndarray:
        """Cell centres along one axis, or all of them as an (M, d) array (C order)."""
        mids = [(e[:-1] + e[1:]) / 2 for e in self.edges]
        if axis is not None:
            return mids[axis]
        grids = np.meshgrid(*mids, indexing="ij")
        return np.stack([g.reshape(-1) for g in grids], axis=1)

    def threshold(self, beta: float = 0.05) -> float:
        """tau = b ln(M / beta): an empty cell's noisy count exceeds it with probability at most
        about beta / M (so no empty cell survives with probability about 1 - beta)."""
        if self.scale == 0:
            return 0.0
        return self.scale * math.log(self.n_cells / beta)

    def weights(self, method: str = "threshold", *, beta: float = 0.05) -> np.ndarray:
        """Post-processed weights (float64, the counts' shape); see the module docstring."""
        if method not in _WEIGHTS:
            raise ValueError(f"weights must be 'threshold', 'clip' or 'raw', got {method!r}")
        w = self.counts.astype(np.float64)
        if method == "clip":
            np.maximum(w, 0.0, out=w)
        elif method == "threshold":
            beta = check.probability(beta, "beta")
            w[w < self.threshold(beta)] = 0.0  # exact counts (scale 0): negatives only
        return w

    def points(self, weights: str = "threshold", *, beta: float = 0.05
               ) -> tuple[np.ndarray, np.ndarray]:
        """(centres, w) of the cells with nonzero weight: the weighted pseudo-data."""
        return self._nonzero_cells(self.weights(weights, beta=beta))

    def _nonzero_cells(self, w):
        w = w.reshape(-1)
        keep = np.nonzero(w)[0]
        mids = [(e[:-1] + e[1:]) / 2 for e in self.edges]
        idx = np.unravel_index(keep, self.counts.shape)
        return np.stack([m[i] for m, i in zip(mids, idx)], axis=1), w[keep]


def perturbed_histogram(X: ArrayLike, *, epsilon: float, bounds: Sequence[Any], h: float | None = None,
                        bins: int | ArrayLike | None = None, relation: str = "replace",
                        random_state: RandomStateLike = None,
                        accountant: AccountantLike | None = None) -> PerturbedHistogram:
    """Release the perturbed histogram of Lei (2011): exact noisy counts on a public grid.

    Parameters
    ----------
    X : array_like, shape (n, d) or (n,)
        The records. Coordinates outside ``bounds`` are clipped into the box. NaN and infinities
        are rejected.
    epsilon : float
        Privacy parameter, > 0.
    bounds : sequence of (float, float)
        Public box: one (lower, upper) per coordinate (a single pair for d = 1).
    h : float, optional
        Cell width on the unit cube, 0 < h <= 1 (K = ceil(1 / h) cells per axis). Default: Lei's
        rate :func:`lei_bandwidth` (n public: replace-one only).
    bins : int or sequence of ints, optional
        Cells per axis, instead of ``h``.
    relation : {"replace", "add_remove"}, default="replace"
        Neighbouring relation: replace-one (Lei's; noise DLap(2 / epsilon), n public) or
        add/remove (DLap(1 / epsilon); give ``h`` or ``bins``).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` before anything is drawn.

    Returns
    -------
    PerturbedHistogram

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN/inf in ``X``, epsilon <= 0, ``h`` out of (0, 1],
        both ``h`` and ``bins``, ``h``/``bins`` missing under add/remove.

    Privacy
    -------
    Pure epsilon-DP. The grid depends only on the public box, ``h``/``bins`` and (by default)
    n, which is public under replace-one. A record, clipped to the box, lies in exactly one
    cell: replacing one record changes two counts by 1 (L1 sensitivity 2, noise scale
    2 / epsilon rounded up), adding or removing one changes one count by 1 (add/remove: scale
    1 / epsilon). Every cell, empty or not, gets independent exact discrete Laplace noise.
    Every estimator in this module is post-processing of the release. Charged: ``epsilon``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import mestimators
    >>> x = np.random.default_rng(0).normal(0.3, 0.1, size=20_000)  # insecure-ok: example data, not noise
    >>> rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(-1, 1), random_state=1)
    >>> bool(abs(mestimators.median(rel) - 0.3) < 0.02)
    True
    """
    arr = sample_2d(X, "X")
    n, d = arr.shape
    if bounds is None:
        raise ValueError("bounds is required: give the public box, one (lower, upper) per "
                         "coordinate; it is never inferred from the data")
    bounds = list(bounds)
    if d == 1 and len(bounds) == 2 and not hasattr(bounds[0], "__len__"):
        bounds = [bounds]
    if len(bounds) != d:
        raise ValueError(f"bounds must have one (lower, upper) pair per coordinate (d = {d}), "
                         f"got {len(bounds)}")
    bounds = [check.bounds_pair(b, f"bounds[{k}]") for k, b in enumerate(bounds)]
    _, epsilon, _ = check_privacy("laplace", epsilon, 0.0)
    noise = histogram_noise("laplace", relation, epsilon, 0.0)
    if h is not None and bins is not None:
        raise ValueError("give h or bins, not both")
    if bins is None:
        if h is None:
            if relation != "replace":
                raise ValueError("h (or bins) is required under relation='add_remove': the "
                                 "default bandwidth uses n, which is private there")
            h = lei_bandwidth(max(n, 2), epsilon, d)
        else:
            h = check.probability(h, "h", open_high=False)
        bins = [math.ceil(1.0 / h - 1e-9)] * d
    grid = BinGrid.make(bins, bounds, d)
    if grid.size > LARGE_GRID:
        warnings.warn(f"the grid has {grid.size} cells (> 1e8): memory and n / M are a concern",
                      RuntimeWarning, stacklevel=2)
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(arr, counts, True, name="X")
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon),
            accountant=accountant, random_state=random_state,
            label="mestimators.perturbed_histogram")
    return PerturbedHistogram(counts.reshape(grid.shape), list(grid.edges), noise.scale,
                              epsilon, relation)


def _check_release(release):
    if not isinstance(release, PerturbedHistogram):
        raise TypeError("release must be a PerturbedHistogram (from perturbed_histogram); "
                        f"got {type(release).__name__}: estimators never see raw data")
    return release


def m_estimate(release: PerturbedHistogram, loss: Callable[..., Any], theta0: ArrayLike, *,
               weights: str = "threshold", beta: float = 0.05, method: str | None = None,
               options: dict[str, Any] | None = None) -> np.ndarray:
    """Minimise sum_j w_j * loss(a_j, theta) over theta: any M-estimator from the release.

    Parameters
    ----------
    release : PerturbedHistogram
    loss : callable
        ``loss(points, theta) -> ndarray (m,)``: the loss of each of the m pseudo-points
        (cell centres, shape (m, d)) at the parameter vector theta.
    theta0 : array_like
        Starting point.
    weights : {"threshold", "clip", "raw"}, default="threshold"
        Treatment of negative noisy counts (module docstring).
    beta : float, default=0.05
        Threshold failure probability.
    method, options :
        Passed to ``scipy.optimize.minimize`` (default method: Nelder-Mead for 1 or 2
        parameters, Powell above; losses need not be smooth).

    Returns
    -------
    ndarray
        The minimiser found.

    Privacy
    -------
    Post-processing of the release: no privacy cost, the guarantee is the release's (epsilon-DP
    under its neighbouring relation, replace-one or add/remove). Nothing is charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import mestimators
    >>> x = np.random.default_rng(0).normal(0.2, 0.1, size=20_000)  # insecure-ok: example data, not noise
    >>> rel = mestimators.perturbed_histogram(x, epsilon=1.0, bounds=(-1, 1), random_state=2)
    >>> theta = mestimators.m_estimate(rel, lambda a, t: (a[:, 0] - t[0]) ** 2, [0.0])
    >>> bool(abs(theta[0] - 0.2) < 0.02)
    True
    """
    from scipy import optimize

    release = _check_release(release)
    theta0 = check.finite_array(theta0, "theta0").astype(np.float64, copy=False).reshape(-1)
    pts, w = release._nonzero_cells(usable_weights(release, weights, beta=beta))
    if method is None:
        method = "Nelder-Mead" if theta0.size <= 2 else "Powell"
    opts = {"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000} if method == "Nelder-Mead" else {}
    opts.update(options or {})

    def objective(theta):
        return float(np.dot(w, loss(pts, theta)))

    return optimize.minimize(objective, theta0, method=method, options=opts).x


class DegenerateHistogramWarning(UserWarning):
    """The noisy histogram left no positive weight under the chosen rule; the estimate used the
    next rule that does (see :func:`usable_weights`)."""


#: The rules tried in turn when one leaves no positive total weight ("uniform": every cell alike).
_FALLBACK = {"threshold": "clip", "raw": "clip", "clip": "uniform"}


def usable_weights(release: PerturbedHistogram, weights: str = "threshold", *,
                   beta: float = 0.05) -> np.ndarray:
    """The release's weights under ``weights``, or, when they leave no positive total (every
    noisy count below the threshold: a histogram too sparse for its noise), the next rule that
    does: threshold or raw -> clip -> every cell alike (the estimate of an empty histogram: the
    box's centre). A `DegenerateHistogramWarning` names the rule used. The estimators of this
    module read their weights here, so they return a finite value, never NaN.

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove):
    the fallback reads only the noisy counts. Nothing is charged.

    Examples
    --------
    >>> import warnings
    >>> from dpcore import mestimators
    >>> rel = mestimators.PerturbedHistogram.from_counts([-1, -2, 0], [[0.0, 1.0, 2.0, 3.0]])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", mestimators.DegenerateHistogramWarning)
    ...     mestimators.usable_weights(rel)
    array([1., 1., 1.])
    """
    release = _check_release(release)
    w = release.weights(weights, beta=beta)
    rule = weights
    while not w.sum() > 0:
        rule = _FALLBACK[rule]
        w = np.ones(w.shape) if rule == "uniform" else release.weights(rule, beta=beta)
    if rule != weights:
        warnings.warn(
            f"the noisy histogram has no positive total weight under weights={weights!r}; the "
            f"estimate uses {rule!r} weights instead (more records per cell, a larger epsilon or a "
            "coarser grid avoid this)", DegenerateHistogramWarning, stacklevel=3)
    return w


def _marginal(release, axis, weights, beta):
    axis = check.integer(axis, "axis", minimum=0)
    if axis >= release.d:
        raise ValueError(f"axis must be < d = {release.d}, got {axis}")
    w = usable_weights(release, weights, beta=beta)
    other = tuple(k for k in range(release.d) if k != axis)
    return (w.sum(axis=other) if other else w), release.edges[axis]


def quantile(release: PerturbedHistogram, q: ArrayLike, *, axis: int = 0,
             weights: str = "threshold", beta: float = 0.05) -> float:
    """The q-quantile of one coordinate, from the release (linear within the cell).

    Parameters
    ----------
    release : PerturbedHistogram
    q : float
        Level in [0, 1].
    axis : int, default=0
        The coordinate (the others are summed out).
    weights : {"threshold", "clip", "raw"}, default="threshold"
    beta : float, default=0.05

    Returns
    -------
    float
        The first point where the cumulative weight reaches q times the total weight
        (interpolated linearly inside its cell). When the weights leave no positive total, those
        of :func:`usable_weights` (with a warning).

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove);
    nothing is charged.

    Examples
    --------
    >>> from dpcore import mestimators
    >>> rel = mestimators.PerturbedHistogram.from_counts([1, 2, 1], [[0.0, 1.0, 2.0, 3.0]])
    >>> mestimators.quantile(rel, 0.5)
    1.5
    """
    release = _check_release(release)
    q = check.probability(q, "q", open_low=False, open_high=False)
    w, e = _marginal(release, axis, weights, beta)
    total = w.sum()
    target = q * total
    cum = np.cumsum(w)
    j = int(np.searchsorted(cum, target, side="left"))
    j = min(j, w.size - 1)
    before = cum[j] - w[j]
    frac = 0.0 if w[j] <= 0 else min(max((target - before) / w[j], 0.0), 1.0)
    return float(e[j] + frac * (e[j + 1] - e[j]))


def median(release: PerturbedHistogram, *, axis: int = 0, weights: str = "threshold",
           beta: float = 0.05) -> float:
    """The median of one coordinate from the release (:func:`quantile` at 0.5).

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove);
    nothing is charged.

    Examples
    --------
    >>> from dpcore import mestimators
    >>> rel = mestimators.PerturbedHistogram.from_counts([1, 2, 1], [[0.0, 1.0, 2.0, 3.0]])
    >>> mestimators.median(rel)
    1.5
    """
    return quantile(release, 0.5, axis=axis, weights=weights, beta=beta)


def _huber(r, c):
    a = np.abs(r)
    return np.where(a <= c, 0.5 * r * r, c * (a - 0.5 * c))


def huber_location(release: PerturbedHistogram, *, c: float = 1.345, axis: int = 0,
                   weights: str = "threshold", beta: float = 0.05) -> float:
    """Huber's M-estimator of location of one coordinate from the release.

    Parameters
    ----------
    release : PerturbedHistogram
    c : float, default=1.345
        The Huber threshold, in the coordinate's units (> 0).
    axis, weights, beta :
        As in :func:`quantile`.

    Returns
    -------
    float

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove);
    nothing is charged.

    Examples
    --------
    >>> from dpcore import mestimators
    >>> rel = mestimators.PerturbedHistogram.from_counts([1, 2, 1], [[0.0, 1.0, 2.0, 3.0]])
    >>> round(mestimators.huber_location(rel), 6)
    1.5
    """
    from scipy import optimize

    release = _check_release(release)
    c = check.positive(c, "c")
    w, e = _marginal(release, axis, weights, beta)
    mids = (e[:-1] + e[1:]) / 2
    keep = w != 0
    w, mids = w[keep], mids[keep]
    res = optimize.minimize_scalar(lambda t: float(np.dot(w, _huber(mids - t, c))),
                                   bounds=(e[0], e[-1]), method="bounded",
                                   options={"xatol": 1e-12 * (e[-1] - e[0])})
    return float(res.x)


def _design(release, weights, beta):
    """Pseudo-data for regression: the last coordinate is y, the others x (with intercept)."""
    if release.d < 2:
        raise ValueError("regression needs a release over (x, y): d >= 2, got d = 1")
    pts, w = release._nonzero_cells(usable_weights(release, weights, beta=beta))
    X = np.column_stack([np.ones(len(pts)), pts[:, :-1]])
    return X, pts[:, -1], w


def lad_regression(release: PerturbedHistogram, *, weights: str = "threshold", beta: float = 0.05
                   ) -> np.ndarray:
    """Least absolute deviation regression of the last coordinate on the others.

    Solved exactly as a linear program (scipy's HiGHS) over the cells with nonzero weight;
    weights must be nonnegative (``"threshold"`` or ``"clip"``).

    Returns
    -------
    ndarray, shape (d,)
        [intercept, slopes...], in the data's units.

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove);
    nothing is charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import mestimators
    >>> e = [np.linspace(0, 1, 5), np.linspace(0, 1, 5)]
    >>> rel = mestimators.PerturbedHistogram.from_counts(np.eye(4, dtype=int) * 10, e)
    >>> np.round(mestimators.lad_regression(rel), 6) + 0.0
    array([0., 1.])
    """
    from scipy import optimize

    release = _check_release(release)
    if weights == "raw":
        raise ValueError("lad_regression needs nonnegative weights: 'threshold' or 'clip'")
    X, y, w = _design(release, weights, beta)
    m, p = X.shape
    # min sum w (u + v)  s.t.  X beta + u - v = y,  u, v >= 0,  beta free
    cost = np.concatenate([np.zeros(p), w, w])
    from scipy import sparse

    A = sparse.hstack([sparse.csr_matrix(X), sparse.identity(m), -sparse.identity(m)]).tocsr()
    bounds = [(None, None)] * p + [(0, None)] * (2 * m)
    res = optimize.linprog(cost, A_eq=A, b_eq=y, bounds=bounds, method="highs")
    if not res.success:
        raise RuntimeError(f"the LAD linear program failed: {res.message}")
    return res.x[:p]


def huber_regression(release: PerturbedHistogram, *, c: float = 1.345, weights: str = "threshold",
                     beta: float = 0.05) -> np.ndarray:
    """Huber regression of the last coordinate on the others (threshold ``c`` in y's units).

    Returns
    -------
    ndarray, shape (d,)
        [intercept, slopes...].

    Privacy
    -------
    Post-processing of the release (epsilon-DP under its relation, replace-one or add/remove);
    nothing is charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import mestimators
    >>> e = [np.linspace(0, 1, 5), np.linspace(0, 1, 5)]
    >>> rel = mestimators.PerturbedHistogram.from_counts(np.eye(4, dtype=int) * 10, e)
    >>> np.round(mestimators.huber_regression(rel, c=0.1), 4)
    array([0., 1.])
    """
    from scipy import optimize

    release = _check_release(release)
    c = check.positive(c, "c")
    X, y, w = _design(release, weights, beta)
    if X.shape[0] == 0:
        return np.full(X.shape[1], np.nan)

    def objective(b):
        r = y - X @ b
        a = np.abs(r)
        loss = np.where(a <= c, 0.5 * r * r, c * (a - 0.5 * c))
        psi = np.clip(r, -c, c)
        return float(np.dot(w, loss)), -(X.T @ (w * psi))

    start = np.linalg.lstsq(X * np.sqrt(np.abs(w))[:, None], y * np.sqrt(np.abs(w)), rcond=None)[0]
    res = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    return res.x
