"""Private k-means: noisy Lloyd iterations (SuLQ / DPLloyd) from a private or public start."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._release import Cost, public_arithmetic, release
from dpcore._release.sums import IntegerNoise, split_budget
from dpcore.learn import _base
from dpcore.learn._dask import DaskChunks, is_dask_collection
from dpcore.robust import sample_aggregate

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray
    from typing_extensions import Self

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

    #: Rows prepared by :func:`kmeans_chunk`: (clipped rows, grid integers as two float64
    #: halves, histogram counts or None).
    _Prepared = tuple[NDArray[np.float64], tuple[NDArray[np.float64], NDArray[np.float64]],
                      NDArray[np.int64] | None]

__all__ = ["KMeans", "MAX_CENTRE_VALUES", "MAX_HISTOGRAM_CELLS"]

#: Most cells of the noisy histogram that ``init="histogram"`` releases (public cap).
MAX_HISTOGRAM_CELLS = 2**14
#: Largest n_clusters * n_features (the centres and their noisy sums: 2 GiB of float64 at the
#: limit), checked before anything is charged.
MAX_CENTRE_VALUES = 2**27
#: Most bins per feature of that histogram.
MAX_HISTOGRAM_BINS = 64
_INITS = ("auto", "histogram", "sphere")
_METHODS = ("lloyd", "sample_aggregate")
_CHUNK = 2**15   # rows per block of the distance computations (memory: _CHUNK * k doubles)


def histogram_bins(n_features: int, n_clusters: int) -> int:
    """Bins per feature of the ``init="histogram"`` grid: the largest b <= 64 with
    b**d <= MAX_HISTOGRAM_CELLS (public: a function of d only); 0 when the grid would have
    fewer than 2 bins per feature or fewer than ``n_clusters`` cells."""
    b = MAX_HISTOGRAM_BINS
    while b >= 2 and b ** n_features > MAX_HISTOGRAM_CELLS:
        b -= 1
    if b < 2 or b ** n_features < n_clusters:
        return 0
    return b


def sum_grid_bits(n_features: int, epsilon_sum: float) -> int:
    """g such that each rescaled coordinate z in [-1, 1] is summed as the integer rint(z 2**g):
    about 2**-30 of the sum noise scale d / epsilon_sum, within [0, 26] (n <= 2**36 records of
    |units| <= 2**26 keep every partial sum below 2**62)."""
    with public_arithmetic("epsilon and the number of features"):
        g = math.floor(math.log2(epsilon_sum / n_features)) + 30
    return min(max(g, 0), 26)


def count_sum_split(n_features: int) -> float:
    """r = epsilon_sum / epsilon_count per iteration, (3 d**2) ** (1/3).

    The error of one released centre coordinate (in the [-1, 1] units) is about
    e_sum / n - mu e_count / n; with Laplace noise of scales d / epsilon_sum (sums, L1
    sensitivity d) and 1 / epsilon_count (counts), summed over the d coordinates and with
    E|mu|**2 ~ d / 3, the variance is proportional to d**3 / epsilon_sum**2 +
    (d / 3) / epsilon_count**2, smallest for epsilon_sum / epsilon_count = (3 d**2) ** (1/3)."""
    return (3.0 * n_features * n_features) ** (1.0 / 3.0)


class KMeans(_base.SharedStateCloneMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """k-means clustering with epsilon-DP: noisy Lloyd iterations (SuLQ, DPLloyd).

    Each feature is clipped to the public ``bounds`` and rescaled to z in [-1, 1]. Starting
    from initial centres (see ``init``), each of the ``max_iter`` iterations assigns every
    record to its nearest current centre and releases, for every cluster, the count and the d
    coordinate sums of its records with exact discrete Laplace noise (the sums are of the
    coordinates rounded to a public power-of-two grid, added as integers); the new centre is the
    noisy sum divided by the noisy count, clipped to the bounds. A cluster whose noisy count is
    too small for a useful mean (below the standard deviation of its sum noise, in the [-1, 1]
    units) keeps its centre. The number of iterations is public and fixed: no convergence test
    looks at the data.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k, >= 1, with k * n_features <= ``MAX_CENTRE_VALUES`` (2**27).
    epsilon : float, default=1.0
        Privacy parameter of the whole fit, > 0.
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required; data
        outside them is clipped.
    max_iter : int, default=None
        Number of noisy Lloyd iterations (public, always all run), >= 1. The budget left after
        the initialisation is split equally over them: few iterations from a good start beat
        many noisier ones. None: 2 after the histogram start (measured best of {1, 2, 5} on
        blobs, n = 10**3..10**5), 5 after any other start (Su et al. 2016 found about 5 best
        for DPLloyd from a data-independent start).
    init : {"auto", "histogram", "sphere"} or array (n_clusters, n_features), default="auto"
        ``"histogram"``: spend ``init_fraction`` of epsilon on a noisy histogram of the data on a
        public grid (b bins per feature, b**d <= 2**14 cells, b <= 64); sum the noisy counts into
        coarser grids (2**l cells a side) and take the finest that has k cells whose noisy count
        exceeds t ln(cells) sqrt(2**(l d)) (t the noise scale; an empty cell passes with
        probability about 1/cells); run non-private weighted k-means (k-means++ seeding, 10
        starts of 30 Lloyd steps) on their centres weighted by their noisy counts:
        post-processing of the histogram.
        ``"sphere"``: data-independent centres (Su et al.'s sphere packing): random points of the
        box whose balls of a common radius a are disjoint and inside the box, a as large as 100
        tries allow; costs nothing (but Lloyd iterations from it often stop in a poor local
        optimum). ``"auto"``: ``"histogram"`` when the grid has at least 2 bins per feature
        (d <= 14), else ``"sphere"``. An array: public initial centres (clipped to
        the bounds).
    init_fraction : float, default=0.2
        Share of epsilon spent on ``init="histogram"``, in (0, 1). Ignored otherwise.
    method : {"lloyd", "sample_aggregate"}, default="lloyd"
        ``"lloyd"``: the noisy Lloyd iterations above. ``"sample_aggregate"``: split the records
        at random into ``n_blocks`` blocks, run non-private k-means on each (k-means++, 3 starts
        of 20 steps), order each block's centres lexicographically and aggregate the k d
        coordinates with :func:`dpcore.robust.sample_aggregate` (private quartiles, widened
        winsorized mean, epsilon / (k d) per coordinate). ``init``, ``max_iter`` and
        ``init_fraction`` are then ignored. Needs many blocks of enough records each, and
        clusters whose lexicographic order is stable across blocks: on the blobs of the
        benchmark it is less accurate than ``"lloyd"`` (cost / non-private cost: median 3.5,
        worst 6.1 of 10 seeds at epsilon = 1; 1.06, worst 1.2 at epsilon = 5; n = 10**5;
        ``"lloyd"``: <= 1.0004 at both).
    n_blocks : int, default=None
        ``"sample_aggregate"`` only: the number of blocks, 2 <= n_blocks <= n. None:
        min(max(n // (50 k), 2), 2000) (n is public under the replace-one guarantee of this
        method).
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only. Also drives the
        (post-processing) k-means++ on the histogram and the sphere packing.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once, after every argument has been checked and before anything is
        drawn.

    Attributes
    ----------
    cluster_centers_ : ndarray, shape (n_clusters, n_features)
        The released centres.
    cluster_count_ : ndarray of int64, shape (n_clusters,), or None
        The noisy counts of the last iteration (released; may be negative). None for
        ``"sample_aggregate"``.
    init_centers_ : ndarray, shape (n_clusters, n_features)
        The starting centres (released by the histogram, or public).
    n_iter_ : int
        The number of iterations run: ``max_iter`` or its public default (never depends on the
        data); 0 for ``"sample_aggregate"``.
    n_features_in_ : int

    No ``labels_`` and no ``inertia_``: both are exact functions of the private data. Use
    ``predict(X)`` and ``score(X)`` on data you may look at.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for features clipped to
    the public bounds. The histogram start (if used) has L1 sensitivity 1 and gets exact discrete
    Laplace noise at epsilon_0 = ``init_fraction`` epsilon. Each of the T Lloyd iterations gets
    epsilon_i = (epsilon - epsilon_0) / T, split as epsilon_i / (1 + r) for the counts
    and r epsilon_i / (1 + r) for the sums, r = (3 d**2)**(1/3). Given the released centres of the
    previous iteration (public by then), every record falls in exactly one cluster, so the k
    counts have L1 sensitivity 1 and the k d sums of the grid integers rint(z 2**g), |z| <= 1,
    have L1 sensitivity d 2**g exactly; each table gets exact discrete Laplace noise with scale
    sensitivity / epsilon rounded up. The fit is epsilon-DP by sequential composition; the
    centres, clipping and the weighted k-means++ on the histogram are post-processing. Everything
    is counted in integers, so no floating-point slack is uncharged. The accountant is charged
    ``epsilon`` once. On a Dask collection the same integers (histogram counts, each
    iteration's counts and sums) are computed per chunk on the workers and added exactly; only
    those totals and one validity flag per chunk (checked before the charge) leave the
    workers, and the noise is drawn once in the calling process: the same law and, for the
    same seed, the same centres as in memory.

    ``method="sample_aggregate"``: epsilon-DP under **replace-one** neighbours only (n is
    public; see :func:`dpcore.robust.sample_aggregate`: replacing a record changes one block's
    centres, and each of the k d coordinates is aggregated at epsilon / (k d)); charged
    ``epsilon`` once by that function, after its checks.

    References
    ----------
    .. [BDMN05] A. Blum, C. Dwork, F. McSherry, K. Nissim, "Practical privacy: the SuLQ
       framework", PODS 2005.
    .. [SCLBLX16] D. Su, J. Cao, N. Li, E. Bertino, M. Lyu, H. Jin, "Differentially private
       k-means clustering", CODASPY 2016 (DPLloyd, the sphere-packing start).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._kmeans import KMeans
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = np.vstack([rng.normal(c, 0.5, (5000, 2)) for c in ([-5, -5], [5, 5], [-5, 5])])
    >>> km = KMeans(n_clusters=3, epsilon=1.0, bounds=(-10, 10), random_state=0).fit(X)
    >>> np.round(np.sort(km.cluster_centers_[:, 0])).tolist()
    [-5.0, -5.0, 5.0]
    """

    def __init__(self, n_clusters: int = 8, *, epsilon: float = 1.0,
                 bounds: tuple[ArrayLike, ArrayLike] | None = None, max_iter: int | None = None,
                 init: Literal["auto", "histogram", "sphere"] | ArrayLike = "auto",
                 init_fraction: float = 0.2,
                 method: Literal["lloyd", "sample_aggregate"] = "lloyd",
                 n_blocks: int | None = None, random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None) -> None:
        self.n_clusters = n_clusters
        self.method = method
        self.n_blocks = n_blocks
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.init = init
        self.init_fraction = init_fraction
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None
                      ) -> tuple[float, int, int | None, str | np.ndarray, float,
                                 tuple[np.ndarray, np.ndarray]]:
        """Every parameter, checked before anything is charged (also for each candidate of a
        grid search). Returns (epsilon, k, max_iter, init, init_fraction, (lower, upper))."""
        epsilon = _base.check_epsilon(self.epsilon)
        k = check.integer(self.n_clusters, "n_clusters", minimum=1, maximum=MAX_CENTRE_VALUES)
        if n_features is not None and k * n_features > MAX_CENTRE_VALUES:
            raise ValueError(f"n_clusters * n_features must be <= {MAX_CENTRE_VALUES} (memory of "
                             f"the centres), got {k} * {n_features}")
        max_iter = None if self.max_iter is None else check.integer(self.max_iter, "max_iter",
                                                                    minimum=1)
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if self.n_blocks is not None:
            check.integer(self.n_blocks, "n_blocks", minimum=2)
        fraction = check.real(self.init_fraction, "init_fraction")
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"init_fraction must be in (0, 1), got {self.init_fraction!r}")
        bounds = _base.bounds_array(self.bounds, "bounds", n_features)
        init = self.init
        if isinstance(init, str):
            if init not in _INITS:
                raise ValueError(f"init must be one of {_INITS} or an array of centres, "
                                 f"got {init!r}")
            if n_features is not None and init == "histogram" and not histogram_bins(n_features, k):
                raise ValueError(f"init='histogram' needs a grid of at least 2 bins per feature "
                                 f"and n_clusters cells within {MAX_HISTOGRAM_CELLS} cells; "
                                 f"n_features={n_features} is too many: use init='sphere'")
        else:
            init = check.finite_array(init, "init")
            if init.ndim != 2 or init.shape[0] != k or (
                    n_features is not None and init.shape[1] != n_features):
                raise ValueError(f"init must have shape (n_clusters, n_features) = "
                                 f"({k}, {n_features}), got {init.shape}")
        _base.check_n(n_samples)
        return epsilon, k, max_iter, init, fraction, bounds

    def _plan(self, d: int, epsilon: float, k: int, max_iter: int | None, init: str | np.ndarray,
              fraction: float) -> tuple[str, int, IntegerNoise | None, IntegerNoise, IntegerNoise,
                                        int, int]:
        """The public calibration: (init kind, bins, histogram noise, count noise, sum noise,
        g, number of iterations). Raises a ValueError for parameters out of range, before
        anything is charged."""
        kind = init if isinstance(init, str) else "array"
        bins = histogram_bins(d, k)
        if kind == "auto":
            kind = "histogram" if bins >= 2 else "sphere"
        if max_iter is None:
            max_iter = 2 if kind == "histogram" else 5
        eps_init = 0.0
        hist_noise: IntegerNoise | None = None
        if kind == "histogram":
            eps_init = round_down(Fraction(epsilon) * Fraction(fraction))
            hist_noise = IntegerNoise.calibrate("laplace", 1, eps_init, 0.0)
        eps_rest = round_down(Fraction(epsilon) - Fraction(eps_init))
        eps_iter = split_budget(eps_rest, max_iter)
        eps_count = round_down(Fraction(eps_iter) / (1 + Fraction(count_sum_split(d))))
        eps_sum = round_down(Fraction(eps_iter) - Fraction(eps_count))
        if not (eps_count > 0 and eps_sum > 0):
            raise ValueError(f"epsilon={self.epsilon!r} is too small for {max_iter} iterations")
        g = sum_grid_bits(d, eps_sum)
        count_noise = IntegerNoise.calibrate("laplace", 1, eps_count, 0.0)
        sum_noise = IntegerNoise.calibrate("laplace", d * 2**g, eps_sum, 0.0)
        return kind, bins, hist_noise, count_noise, sum_noise, g, max_iter

    def _n_features_out(self, n_features: int | None) -> int:
        return check.integer(self.n_clusters, "n_clusters", minimum=1)

    def _cost(self) -> Cost:
        return Cost(self._check_params()[0])

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Fit the private centres (see the class docstring); y is ignored. Returns self.

        X may be a Dask array or dataframe (``method="lloyd"``): the histogram counts and each
        iteration's exact integer counts and sums are computed per chunk on the workers
        (:class:`dpcore.learn._dask.DaskChunks`) and added exactly, the noise drawn once here:
        the same centres as in memory for the same seed."""
        self._check_params()
        chunks = None
        if is_dask_collection(X):
            if self.method != "lloyd":
                raise ValueError("a Dask collection is fitted with method='lloyd' only, got "
                                 f"{self.method!r}")
            # bounds are checked against the public width before the chunks are read
            Xd = cast(Any, X)   # a Dask array or dataframe
            width = int(Xd.shape[1]) if hasattr(Xd, "chunks") else len(Xd.columns)
            epsilon, k, max_iter, init, fraction, (lower, upper) = self._check_params(None, width)
            kind, bins, hist_noise, count_noise, sum_noise, g, max_iter = self._plan(
                width, epsilon, k, max_iter, init, fraction)
            chunks = DaskChunks(X, kmeans_chunk, (lower, upper, g,
                                                  bins if kind == "histogram" else 0))
            n, d = chunks.shape
            _base.check_n(n)
            self.n_features_in_ = d
        else:
            X = _base.validate_data(self, X, reset=True, dtype=np.float64)
            n, d = X.shape
            epsilon, k, max_iter, init, fraction, (lower, upper) = self._check_params(n, d)
            if self.method == "sample_aggregate":
                return self._fit_sample_aggregate(X, epsilon, k, lower, upper)
            kind, bins, hist_noise, count_noise, sum_noise, g, max_iter = self._plan(
                d, epsilon, k, max_iter, init, fraction)
        mid, half = lower / 2 + upper / 2, upper / 2 - lower / 2
        if chunks is None:
            prepared, _ = kmeans_chunk(X, lower, upper, g, bins if kind == "histogram" else 0)

            def totals(centers: np.ndarray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
                return kmeans_totals(prepared, centers, k)
            hist_counts = prepared[2]
        else:
            def totals(centers: np.ndarray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
                return chunks.sum(kmeans_totals, centers, k)
            hist_counts = chunks.sum(_histogram_of) if kind == "histogram" else None
        scale_z = 2.0**-g
        # a cluster's mean is updated only when its noisy count exceeds the standard deviation
        # of one coordinate of its sum noise (in the [-1, 1] units): public
        min_count = math.sqrt(sum_noise.variance) * scale_z
        public_init = None if kind != "array" else np.clip(np.asarray(init, float), lower, upper)

        def draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, NDArray[np.int64]]:
            if kind == "histogram":
                assert hist_counts is not None and hist_noise is not None   # planned
                centers = _histogram_start(hist_counts, d, lower, upper, bins, k, hist_noise,
                                           rng)
            elif kind == "sphere":
                centers = mid + half * _sphere_packing(k, d, rng)
            else:
                assert public_init is not None   # kind == "array"
                centers = public_init.copy()
            start = centers.copy()
            counts = np.zeros(k, dtype=np.int64)
            for _ in range(max_iter):
                exact_counts, exact_sums = totals(centers)
                counts = exact_counts + count_noise.draw(k, rng)
                sums = exact_sums + sum_noise.draw((k, d), rng)
                z_old = (centers - mid) / half
                with np.errstate(divide="ignore", invalid="ignore"):
                    z_new = np.clip(sums * scale_z / counts[:, None], -1.0, 1.0)
                ok = counts > min_count
                z = np.where(ok[:, None], z_new, z_old)
                centers = np.clip(mid + half * z, lower, upper)
            return start, centers, counts

        start, centers, counts = release(draw, cost=Cost(epsilon), accountant=self.accountant,
                                         random_state=self.random_state, label="KMeans")
        self.init_centers_ = start
        self.cluster_centers_ = centers
        self.cluster_count_: NDArray[np.int64] | None = counts
        self.n_iter_ = max_iter
        return self

    def _fit_sample_aggregate(self, X: np.ndarray, epsilon: float, k: int, lower: np.ndarray,
                              upper: np.ndarray) -> Self:
        n, d = X.shape
        n_blocks = self.n_blocks
        if n_blocks is None:      # n is public under replace-one neighbours
            n_blocks = min(max(n // (50 * k), 2), 2000)
        if n_blocks > n:
            raise ValueError("n_blocks must not exceed the number of records")
        ranges = np.column_stack([np.tile(lower, k), np.tile(upper, k)])
        Xc = np.clip(X, lower, upper)

        def block_centres(block: np.ndarray) -> NDArray[np.float64]:
            # non-private k-means on one block (fixed seed: the estimator may be any function),
            # the centres in lexicographic order so that coordinates line up across blocks
            seed = np.random.default_rng(0)  # insecure-ok: the block estimator's own start, no noise
            c = _weighted_kmeans(block, np.ones(block.shape[0]), k, seed, n_init=3, n_steps=20)
            return c[np.lexsort(c.T[::-1])].ravel()

        flat = sample_aggregate(Xc, block_centres, n_blocks=n_blocks, output_range=ranges,
                                epsilon=epsilon, random_state=self.random_state,
                                accountant=self.accountant)
        centers = np.clip(np.asarray(flat, dtype=float).reshape(k, d), lower, upper)
        self.init_centers_ = centers.copy()
        self.cluster_centers_ = centers
        self.cluster_count_ = None
        self.n_iter_ = 0
        return self

    def _distances2(self, X: ArrayLike) -> NDArray[np.float64]:
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        return _squared_distances(X, self.cluster_centers_)

    def predict(self, X: ArrayLike) -> NDArray[np.intp]:
        """Index of the nearest released centre of each row of X."""
        return np.argmin(self._distances2(X), axis=1)

    def fit_predict(self, X: ArrayLike, y: ArrayLike | None = None) -> NDArray[np.intp]:
        """``fit(X)`` then ``predict(X)`` (there is no ``labels_``: the assignment of the
        training rows is not a private release; do not publish it)."""
        return self.fit(X).predict(X)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Euclidean distances of each row of X to the released centres."""
        return np.sqrt(self._distances2(X))

    def score(self, X: ArrayLike, y: ArrayLike | None = None) -> float:
        """Minus the k-means cost of X (sum of squared distances to the nearest released
        centre). Computed on the X given; nothing is stored."""
        return -float(np.sum(np.min(self._distances2(X), axis=1)))


def _squared_distances(X: np.ndarray, centers: np.ndarray) -> NDArray[np.float64]:
    c2 = np.sum(centers * centers, axis=1)
    out = np.empty((X.shape[0], centers.shape[0]))
    for i in range(0, X.shape[0], _CHUNK):
        block = X[i:i + _CHUNK]
        out[i:i + _CHUNK] = np.maximum(
            np.sum(block * block, axis=1)[:, None] - 2.0 * block @ centers.T + c2[None, :], 0.0)
    return out


def _assign(X: np.ndarray, centers: np.ndarray) -> NDArray[np.int64]:
    labels = np.empty(X.shape[0], dtype=np.int64)
    c2 = np.sum(centers * centers, axis=1)
    for i in range(0, X.shape[0], _CHUNK):
        block = X[i:i + _CHUNK]
        labels[i:i + _CHUNK] = np.argmin(c2[None, :] - 2.0 * block @ centers.T, axis=1)
    return labels


def _split_units(units: NDArray[np.int64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The grid integers as two float64 halves, units = hi 2**13 + lo (hi = units >> 13,
    0 <= lo < 2**13), one row per coordinate: with |units| <= 2**26 and n <= 2**36 records,
    every partial sum of either half is an integer below 2**50, so float64 sums of them (as
    ``np.bincount`` makes) are exact."""
    hi = (units >> 13).T.astype(np.float64)
    lo = (units & (2**13 - 1)).T.astype(np.float64)
    return np.ascontiguousarray(hi), np.ascontiguousarray(lo)


def _cluster_totals(labels: NDArray[np.int64],
                    halves: tuple[NDArray[np.float64], NDArray[np.float64]], k: int
                    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Exact counts and exact integer coordinate sums per cluster (int64)."""
    hi, lo = halves
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.empty((k, hi.shape[0]), dtype=np.int64)
    for axis in range(hi.shape[0]):
        top = np.rint(np.bincount(labels, weights=hi[axis], minlength=k)).astype(np.int64)
        low = np.rint(np.bincount(labels, weights=lo[axis], minlength=k)).astype(np.int64)
        sums[:, axis] = top * 2**13 + low
    return counts, sums


def kmeans_chunk(X: ArrayLike, lower: np.ndarray, upper: np.ndarray, g: int, bins: int
                 ) -> tuple[_Prepared, bool]:
    """Rows (a chunk of them on a Dask worker) prepared for the Lloyd iterations: ((clipped
    rows, their grid integers as two exact float64 halves, the exact histogram counts on the
    public grid of ``bins`` per feature or None), whether a value is not finite)."""
    X = np.asarray(X, dtype=np.float64)
    bad = not bool(np.isfinite(X).all())
    if bad:
        X = np.nan_to_num(X)
    mid, half = lower / 2 + upper / 2, upper / 2 - lower / 2
    Xc = np.clip(X, lower, upper)
    Z = np.clip((Xc - mid) / half, -1.0, 1.0)
    halves = _split_units(np.rint(Z * 2.0**g).astype(np.int64))   # |units| <= 2**g, exact
    counts = None
    if bins:
        d = Xc.shape[1]
        codes = np.minimum(np.floor((Xc - lower) / (upper - lower) * bins), bins - 1)
        flat = codes.astype(np.int64) @ (bins ** np.arange(d, dtype=np.int64))
        counts = np.bincount(flat, minlength=bins**d).astype(np.int64)
    return (Xc, halves, counts), bad


def kmeans_totals(prepared: _Prepared, centers: np.ndarray, k: int
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Exact int64 (counts, coordinate sums) per cluster of prepared rows at ``centers``."""
    Xc, halves, _ = prepared
    return _cluster_totals(_assign(Xc, centers), halves, k)


def _histogram_of(prepared: _Prepared) -> NDArray[np.int64] | None:
    return prepared[2]


def _histogram_start(counts: NDArray[np.int64], d: int, lower: np.ndarray, upper: np.ndarray,
                     bins: int, k: int, noise: IntegerNoise, rng: np.random.Generator
                     ) -> NDArray[np.float64]:
    """Initial centres from a noisy histogram of the (clipped) data on the public grid.

    Post-processing of the noisy counts only: the counts are summed into coarser grids (2**l
    fine cells a side, l = 0, 1, ...); at each level a cell is kept when its noisy count exceeds
    t ln(cells) sqrt(m) (t the noise scale, m the fine cells it sums: about the level an empty
    cell reaches with chance 1/cells), and the finest level that keeps at least k cells gives
    the points, weighted by their noisy counts, for weighted k-means. When no level keeps k
    cells, the k largest cells of the coarsest level are used."""
    width = upper - lower
    cells = bins ** d
    noisy = counts + noise.draw(cells, rng)
    table = noisy.reshape((bins,) * d, order="F")
    level = 0
    while True:
        side = table.shape[0]
        threshold = noise.scale * math.log(max(table.size, 2)) * math.sqrt(2.0 ** (d * level))
        keep = np.flatnonzero(table.reshape(-1, order="F") > threshold)
        if keep.size >= k or side < 4:
            break
        table = _coarsen(table)
        level += 1
    if keep.size < k:
        keep = np.argsort(table.reshape(-1, order="F"), kind="stable")[-k:]
    index = np.stack(np.unravel_index(keep, table.shape, order="F"), axis=1)
    step = 2**level
    first = index * step                                 # fine cells [first, last) per axis
    last = np.minimum(first + step, bins)
    points = lower + (first + last) / 2.0 / bins * width
    weights = np.maximum(table.reshape(-1, order="F")[keep], 1).astype(float)
    return np.clip(_weighted_kmeans(points, weights, k, rng), lower, upper)


def _coarsen(table: np.ndarray) -> np.ndarray:
    """Sum 2 x ... x 2 blocks of cells (an odd side padded with empty cells)."""
    for axis in range(table.ndim):
        if table.shape[axis] % 2:
            pad = [(0, 0)] * table.ndim
            pad[axis] = (0, 1)
            table = np.pad(table, pad)
        shape = table.shape[:axis] + (table.shape[axis] // 2, 2) + table.shape[axis + 1:]
        table = table.reshape(shape).sum(axis=axis + 1)
    return table


def _weighted_kmeans(points: np.ndarray, weights: np.ndarray, k: int, rng: np.random.Generator,
                     n_init: int = 10, n_steps: int = 30) -> NDArray[np.float64]:
    """Non-private weighted k-means on public points (post-processing): ``n_init`` weighted
    k-means++ seedings each followed by ``n_steps`` Lloyd steps; the lowest weighted cost wins."""
    best, best_cost = None, np.inf
    for _ in range(n_init):
        centers = np.empty((k, points.shape[1]))
        centers[0] = points[rng.choice(points.shape[0], p=weights / weights.sum())]
        d2 = np.sum((points - centers[0]) ** 2, axis=1)
        for i in range(1, k):
            p = weights * d2
            total = p.sum()
            j = rng.choice(points.shape[0], p=p / total) if total > 0 else rng.integers(
                points.shape[0])
            centers[i] = points[j]
            d2 = np.minimum(d2, np.sum((points - centers[i]) ** 2, axis=1))
        for _ in range(n_steps):
            labels = _assign(points, centers)
            mass = np.bincount(labels, weights=weights, minlength=k)
            for axis in range(points.shape[1]):
                moved = np.bincount(labels, weights=weights * points[:, axis], minlength=k)
                centers[:, axis] = np.where(mass > 0, moved / np.where(mass > 0, mass, 1),
                                            centers[:, axis])
        cost = float(np.sum(weights * np.min(_squared_distances(points, centers), axis=1)))
        if cost < best_cost:
            best, best_cost = centers, cost
    assert best is not None   # n_init >= 1
    return best


def _sphere_packing(k: int, d: int, rng: np.random.Generator, tries: int = 100
                    ) -> NDArray[np.float64]:
    """k points of [-1, 1]^d whose balls of a common radius a are disjoint and inside the box
    (Su et al.'s data-independent start), a as large as ``tries`` random attempts allow."""
    a = 1.0 / max(k, 1) ** (1.0 / d)
    while True:
        for _ in range(tries):
            pts = np.empty((k, d))
            for i in range(k):
                for _ in range(tries):
                    p = rng.uniform(-1.0 + a, 1.0 - a, size=d)
                    if i == 0 or np.min(np.sum((pts[:i] - p) ** 2, axis=1)) >= 4 * a * a:
                        pts[i] = p
                        break
                else:
                    break
            else:
                return pts
        a *= 0.8
