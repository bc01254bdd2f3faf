"""Private least-squares regression: :class:`LinearRegression`, by sufficient-statistics
perturbation (``dpcore.learn._ssp``: plain SSP with a spectral floor, the default, or AdaSSP's
adaptive ridge) or by the functional mechanism (Zhang et al. 2012).

The functional mechanism perturbs the coefficients of the least-squares objective; its L1
sensitivity (:func:`functional_mechanism_sensitivity`) and the bound on its noise's spectral
norm (:func:`functional_mechanism_noise_norm`) are small pure functions of public values that
tests check against hand-derived values.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._release import Cost, release
from dpcore.calibration import zcdp_rho_for
from dpcore.learn import _base
from dpcore.learn._dask import (DaskRows, aligned_chunks, is_dask_collection,
                                regression_targets, sum_chunks)
from dpcore.learn._sgd import ArrayRows, noisy_sgd, regression_design, regression_rows, sgd_plan
from dpcore.learn._ssp import (SSPDesign, SSPLattice, ssp_chunk, ssp_plan, ssp_release,
                               ssp_solve, ssp_units)
from dpcore.mechanisms import LaplaceMechanism

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray
    from typing_extensions import Self

    from dpcore.accounting import AccountantLike
    from dpcore.learn._sgd import RowSource, SGDPlan
    from dpcore.learn._ssp import SSPPlan
    from dpcore.random import RandomStateLike

# LinearRegression with an intercept spends this share of epsilon on sum y alone (sensitivity 2
# against the FM's 2 (d^2 + 4d)): the intercept then costs little R^2 even when the slopes
# are drowned in noise, and the slopes keep 80% of the budget.
TARGET_SUM_SHARE = 0.2

METHODS = ("ssp", "adassp", "functional", "sgd")

__all__ = [
    "LinearRegression",
    "functional_mechanism_sensitivity",
    "functional_mechanism_noise_norm",
]


def functional_mechanism_sensitivity(d: int, intercept: bool = False) -> float:
    """L1 sensitivity (replace-one) of the least-squares coefficients released by the FM.

    With every coordinate of x and y in [-1, 1], one record adds 2|y x_j| to the d linear
    coefficients and |x_j x_k| (j, k ordered pairs, i.e. x_j^2 on the diagonal and 2|x_j x_k|
    for j < k) to the quadratic ones: at most 2d + d^2 in L1. With an intercept the d sums
    2 sum x_j (the cross terms with the constant column) are released too, 2d more; the
    constant n is public and sum y is released separately (see :class:`LinearRegression`).
    Replacing a record moves the vector by at most twice the per-record bound:
    Delta = 2 (d^2 + 2d), or 2 (d^2 + 4d) with the intercept terms. (Zhang et al. 2012 state
    2 (d + 1)^2, which also counts the y^2 constant that is not released here.)

    >>> functional_mechanism_sensitivity(3)
    30.0
    >>> functional_mechanism_sensitivity(3, intercept=True)
    42.0
    """
    d = check.integer(d, "d", minimum=1)
    return 2.0 * (d * d + (4 if intercept else 2) * d)


def functional_mechanism_noise_norm(p: int, sensitivity: float, epsilon: float) -> float:
    """A bound on the spectral norm of the functional mechanism's noise on the quadratic.

    ``LinearRegression(eigen_floor="auto")`` raises every positive eigenvalue of the noisy
    quadratic to at least this value: below it an eigenvalue is indistinguishable from noise.
    The noise E is symmetric, Laplace(b) on the diagonal and Laplace(b) / 2 off it, with
    b = sensitivity / epsilon. Its spectral norm is about sqrt(2 p) b for large p (Wigner's
    semicircle edge) and below tau = 3 sqrt(p) b with probability >= 0.95 for every p >= 2
    (simulated in tests/test_learn_linear.py); tau is returned. Public values only.

    Parameters
    ----------
    p : int
        Size of the quadratic (features, plus one with an intercept).
    sensitivity, epsilon : float
        L1 sensitivity of the released coefficients and the epsilon they were released with.

    >>> round(functional_mechanism_noise_norm(10, 280.0, 1.0), 1)
    2656.3
    """
    p = check.integer(p, "p", minimum=1)
    return 3.0 * math.sqrt(p) * check.positive(sensitivity, "sensitivity") \
        / check.positive(epsilon, "epsilon")


class LinearRegression(_base.SharedStateCloneMixin, RegressorMixin, BaseEstimator):
    """Private least-squares linear regression: sufficient-statistics perturbation (SSP, the
    default; AdaSSP's adaptive ridge as an option), or the functional mechanism.

    Features are clipped to ``bounds_X`` (and/or their rows to the norm ``data_norm``) and
    labels to ``bounds_y``, then mapped to a public domain: with ``bounds_X``, each feature
    affinely to [-1, 1] (centred on the bounds' midpoint with an intercept); with ``data_norm``
    alone, rows divided by it (norm <= 1); labels to [-1, 1].

    ``method="ssp"`` (sufficient-statistics perturbation): releases the least-squares
    sufficient statistics with exact noise (``dpcore.learn._ssp``): the upper triangle of
    X^T X, X^T y and, with an intercept, X^T 1 and sum y. The intercept is profiled out with the
    released means (projected onto the public domain), the eigenvalues of the centred noisy
    X^T X are pulled towards their mean by the spread the noise adds in expectation, then
    raised to at least half of tau, a 95% bound on the spectral norm of its noise
    (:func:`dpcore.learn._ssp.ssp_noise_norm`), and w = C^-1 g. ``method="adassp"`` (Wang
    2018) also releases the smallest eigenvalue of the Gram matrix of the rows [x, c], which
    sets a ridge: lambda = max(0, tau / 4 - a noisy lower bound of that eigenvalue) (Wang's
    factor 1 over-shrinks with this noise bound), before the same floor. Without ``delta``:
    pure epsilon-DP with the exact discrete Laplace; with ``delta``: rho-zCDP (rho =
    :func:`dpcore.calibration.zcdp_rho_for` (epsilon, delta)) with the exact discrete
    Gaussian. The budget split is a public rule (``dpcore.learn._ssp.ssp_plan``): sum y gets the
    share that gives the released mean a fixed noise level, and when n is too small for any
    slope to rise above the noise, only sum y is released (with all of epsilon) and the model
    predicts its mean. ``"ssp"`` is the default: on ``bench/dev_suite.py regression`` it beat
    the functional mechanism (pure epsilon) and AdaSSP (docs/user_guide/learners.md).

    ``method="functional"`` (Zhang et al. 2012): the objective sum_i (y_i - x_i^T w - c)^2 is a
    polynomial in (w, c) whose coefficients are sums over the records: sum y x, sum x x^T and,
    with an intercept c, sum x, sum y and n. Its coefficients in w (and sum x) get exact
    discrete Laplace noise for the L1 sensitivity :func:`functional_mechanism_sensitivity` with
    80% of epsilon; sum y, whose sensitivity is only 2, gets its own noise with the remaining
    20% (``TARGET_SUM_SHARE``), and n is public. The intercept is profiled out
    (c = (sum y - w^T sum x) / n) and the noisy quadratic in w is minimised after dropping its
    non-positive eigen-directions and raising small eigenvalues to ``eigen_floor``. Without an
    intercept only sum y x and sum x x^T are released, with all of epsilon.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0.
    bounds_X : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required unless
        ``data_norm`` is given (``"ssp"`` and ``"adassp"`` only).
    bounds_y : (lower, upper), default=None
        Public bounds of the target. Required.
    fit_intercept : bool, default=True
    alpha : float, default=0.0
        Ridge term alpha ||w||^2 added to the noisy quadratic (post-processing; in the scaled
        units, on the summed objective; the intercept is not shrunk), >= 0; with SSP/AdaSSP it
        is added before the eigenvalue floor and AdaSSP's own ridge. With the functional
        mechanism, at small epsilon a ridge of the order of the noise scale
        (``functional_mechanism_sensitivity(d) / epsilon``) tames the noise; it is public and
        data-independent, so any choice keeps the guarantee.
    eigen_floor : float or "auto", default="auto"
        ``method="functional"`` only: spectral post-processing of the noisy quadratic M in w:
        eigen-directions with eigenvalue <= 0 are dropped and positive eigenvalues are raised
        to at least ``eigen_floor * Delta / epsilon_fm`` (epsilon_fm is 80% of epsilon with
        an intercept, else epsilon). >= 0; ``"auto"``: the floor is
        :func:`functional_mechanism_noise_norm`, a 95% bound on the noise's spectral norm.
        Public and data-independent (post-processing).
    method : {"ssp", "adassp", "functional", "sgd"}, default="ssp"
        ``"sgd"``: DP-SGD on the squared loss (:mod:`dpcore.learn._sgd`), rows mapped into the
        unit ball with a constant column for the intercept and targets to [-1, 1];
        (epsilon, delta)-DP under add/remove neighbours; needs ``delta`` and ``n_hint``.
    delta : float, default=None
        ``"ssp"`` and ``"adassp"`` only: 0 < delta < 1, far below 1/n. Given, the fit is
        (epsilon, delta)-DP through rho-zCDP with discrete Gaussian noise; None: pure
        epsilon-DP with discrete Laplace noise. Required with ``"sgd"``.
    n_hint : int, default=None
        ``"sgd"`` only (required there): a public guess of the number of records, >= 1; it
        sets the batch size and the step scale (utility only, never the guarantee).
    data_norm : float, default=None
        ``"ssp"``, ``"adassp"`` and ``"sgd"`` only: public bound on the L2 norm of a row of X (rows longer than
        it are scaled down to it), > 0. With ``bounds_X`` too, features are clipped to their
        bounds first and both bounds are used.
    random_state : None, int, numpy Generator or BitGenerator, default=None
    accountant : dpcore.Accountant, default=None

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    intercept_ : float
    method_ : str
    plan_ : dpcore.learn._ssp.SSPPlan
        ``"ssp"``/``"adassp"``: the public plan (mechanisms, grids, shares, cost).
    noisy_statistics_ : dict
        ``"ssp"``/``"adassp"``: the released values, in the scaled units and the layout of
        ``dpcore.learn._ssp.ssp_statistics`` (``"gram"``: the upper triangle, row-major, its
        off-diagonal entries doubled with delta; ``"xy"``, ``"sum_x"``, ``"sum_y"``, and
        ``"min_eigenvalue"`` with AdaSSP); only ``"sum_y"`` when the plan is mean-only.
    ridge_ : float
        ``"ssp"``/``"adassp"``: the ridge lambda used (0 for SSP; inf when only the mean was
        released).
    noise_norm_ : float
        ``"ssp"``/``"adassp"``: tau, the noise bound (inf when only the mean was released).
    noisy_coefficients_ : ndarray
        ``"functional"``: the released vector: noisy [-2 sum y x (d), sum x_j^2 (d),
        2 sum x_j x_k for j < k (row-major upper triangle), and with an intercept 2 sum x_j
        (d)], in the [-1, 1] units.
    noisy_target_sum_ : float or None
        ``"functional"``: with an intercept, the released noisy sum y (in the [-1, 1]
        units); else None.
    sensitivity_ : float
        ``"functional"``: the L1 sensitivity of ``noisy_coefficients_``.
    eigen_floor_ : float
        ``"functional"``: the floor used, in the units of M (``"auto"`` resolved).
    n_trimmed_ : int
        ``"functional"``: number of non-positive eigen-directions dropped.

    Privacy
    -------
    Replace-one neighbours (the number of records n is public: the intercept and the budget
    split use it), for X and y clipped to the public bounds (``bounds_X`` / ``data_norm``,
    ``bounds_y``). Every noisy value is an exact discrete Laplace or discrete Gaussian draw
    added on a power-of-two grid, the rounding to the grid charged to the sensitivity (as in
    :func:`dpcore.laplace` and :func:`dpcore.gaussian`); the whole fit is charged once,
    before anything is drawn.

    * ``method="ssp"`` or ``"adassp"``, ``delta=None``: epsilon-DP. Up to five discrete Laplace
      releases (X^T X, X^T y, X^T 1, sum y, and with AdaSSP the smallest eigenvalue of the Gram
      matrix of [x, c]) whose epsilons, rounded down from
      exact rational shares, sum to at most ``epsilon``; their L1 sensitivities are
      :func:`dpcore.learn._ssp.ssp_sensitivities`. Charged ``epsilon``.
    * ``method="ssp"`` or ``"adassp"``, ``delta`` given: rho-zCDP with rho =
      :func:`dpcore.calibration.zcdp_rho_for` (epsilon, delta), hence (epsilon, delta)-DP:
      the same parts with the discrete Gaussian (L2 sensitivities), their rhos summing to at
      most rho. Charged rho (the accountant reports at most (epsilon, delta)). When the plan is
      mean-only (n too small for the slopes), sum y alone is released with the discrete
      Laplace at ``epsilon``: pure epsilon-DP, charged ``epsilon``.
    * ``method="sgd"``: (epsilon, delta)-DP under add/remove neighbours (n is not used;
      ``n_hint`` is public): :class:`dpcore.learn._sgd.SGDPlan` (Poisson sampling, per-record
      clipping, exact lattice sums, exact discrete Gaussian noise, the subsampled discrete
      Gaussian's RDP curve); charged (epsilon, delta) with that curve.
    * ``method="functional"``: epsilon-DP. Two discrete Laplace releases: the FM coefficients
      (sensitivity_, 80% of epsilon with an intercept) and sum y (sensitivity 2, 20%); charged
      ``epsilon``.

    Everything after the release (projecting the means, the ridge, flooring or dropping
    eigen-directions, profiling out the intercept, the solve, the map back to the raw units) is
    post-processing of the released values and public numbers. SSP / AdaSSP compute their sums
    exactly: the scaled rows and targets are first rounded to public power-of-two lattices
    (:class:`dpcore.learn._ssp.SSPLattice`: to nearest, or toward zero where the nearest point
    would leave the scaled domain, so the sensitivities hold as stated) on which every record's
    contribution to each sum is a multiple of that sum's grid, and the sums are exact integers
    in grid units, to which the mechanism's integer noise is added; the rounding slack the
    mechanisms charge is then not even used. Only AdaSSP's smallest eigenvalue (of the exact
    lattice Gram matrix) carries LAPACK's backward error, not charged. On a Dask collection
    (``"ssp"``, ``"adassp"``: the lattice sums per chunk on the workers, added exactly;
    ``"sgd"``: :class:`dpcore.learn._dask.DaskRows`) the noise is drawn once in the calling
    process: the same law, and for the same seed the same model, as in memory.

    References
    ----------
    .. [Wan18] Y.-X. Wang, "Revisiting differentially private linear regression: optimal and
       adaptive prediction & estimation in unbounded domain", UAI 2018.
    .. [ZZX12] J. Zhang, Z. Zhang, X. Xiao, Y. Yang, M. Winslett, "Functional mechanism:
       regression analysis under differential privacy", PVLDB 5(11) (2012) 1364-1375.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import LinearRegression
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.uniform(-1, 1, size=(20000, 2)); y = np.clip(0.5 * X[:, 0] - 0.3 * X[:, 1], -1, 1)
    >>> reg = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=0)
    >>> np.round(reg.fit(X, y).coef_, 1)
    array([ 0.5, -0.3])
    >>> reg = LinearRegression(epsilon=1.0, delta=1e-6, bounds_X=(-1, 1), bounds_y=(-1, 1),
    ...                        random_state=0)
    >>> np.round(reg.fit(X, y).coef_, 1)
    array([ 0.5, -0.3])
    """

    plan_: SSPPlan | SGDPlan

    def __init__(self, *, epsilon: float = 1.0, bounds_X: tuple[ArrayLike, ArrayLike] | None = None,
                 bounds_y: tuple[float, float] | None = None, fit_intercept: bool = True,
                 alpha: float = 0.0, eigen_floor: float | Literal["auto"] = "auto",
                 method: Literal["ssp", "adassp", "functional", "sgd"] = "ssp",
                 delta: float | None = None, data_norm: float | None = None,
                 n_hint: int | None = None, random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None) -> None:
        self.epsilon = epsilon
        self.bounds_X = bounds_X
        self.bounds_y = bounds_y
        self.fit_intercept = fit_intercept
        self.alpha = alpha
        self.eigen_floor = eigen_floor
        self.method = method
        self.delta = delta
        self.data_norm = data_norm
        self.n_hint = n_hint
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None
                      ) -> tuple[float, float, float | Literal["auto"],
                                 tuple[np.ndarray, np.ndarray] | None, tuple[float, float],
                                 float | None, float | None]:
        """Every parameter, checked before anything is charged (also for each candidate of a
        grid search). Returns (epsilon, alpha, eigen_floor, bounds_X pair or None, (ly, uy),
        delta, data_norm)."""
        epsilon = _base.check_epsilon(self.epsilon)
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        alpha = check.nonnegative(self.alpha, "alpha")
        if isinstance(self.eigen_floor, str) and self.eigen_floor != "auto":
            raise ValueError(f"eigen_floor must be a number >= 0 or 'auto', got {self.eigen_floor!r}")
        eigen_floor: float | Literal["auto"] = "auto" if self.eigen_floor == "auto" \
            else check.nonnegative(self.eigen_floor, "eigen_floor")
        _base.check_bool(self.fit_intercept, "fit_intercept")
        functional = self.method == "functional"
        delta: float | None = None
        data_norm: float | None = None
        if functional:
            for name in ("delta", "data_norm"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} applies to methods 'ssp' and 'adassp' only (the "
                                     "functional mechanism is pure epsilon-DP on per-feature "
                                     "bounds)")
        else:
            if eigen_floor != "auto":
                raise ValueError("a numeric eigen_floor applies to method='functional' only "
                                 "(SSP and AdaSSP floor the eigenvalues by their public rule)")
            if self.delta is not None:
                delta = check.probability(self.delta, "delta")
            if self.data_norm is not None:
                data_norm = check.positive(self.data_norm, "data_norm")
                if not math.isfinite(data_norm):
                    raise ValueError(f"data_norm must be finite, got {data_norm!r}")
        if self.bounds_X is None and data_norm is None:
            raise ValueError("bounds_X is required: give public feature bounds (lower, upper) "
                             "(or data_norm, a row-norm bound, with method 'ssp' or 'adassp'); "
                             "they are never inferred from the data")
        if self.bounds_y is None:
            raise ValueError("bounds_y is required: give public target bounds (lower, upper); "
                             "they are never inferred from the data")
        bx = None if self.bounds_X is None else _base.bounds_array(self.bounds_X, "bounds_X",
                                                                   n_features)
        by = check.bounds_pair(self.bounds_y, "bounds_y")
        _base.check_n(n_samples)
        if self.method == "sgd":   # (epsilon, delta)-DP under add/remove: n is not public
            if delta is None or self.n_hint is None:
                raise ValueError("method='sgd' needs delta (0 < delta < 1) and n_hint (a public "
                                 "guess of the number of records; utility only)")
            check.integer(self.n_hint, "n_hint", minimum=1)
        elif self.n_hint is not None:
            raise ValueError(f"n_hint applies to method='sgd' only, got method={self.method!r}")
        return epsilon, alpha, eigen_floor, bx, by, delta, data_norm

    def _cost(self) -> Cost:
        epsilon, *_, delta, _ = self._check_params()
        if self.method == "sgd":
            assert delta is not None and self.n_hint is not None   # checked: required
            return sgd_plan(1, epsilon, delta, self.n_hint, smoothness=1.0).cost
        if delta is not None:   # ssp / adassp with delta: rho-zCDP, whichever part n releases
            return Cost(rho=zcdp_rho_for(epsilon, delta))
        return Cost(epsilon)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the private model (see the class docstring). Returns self. With
        ``method="ssp"``, ``"adassp"`` or ``"sgd"``, X and y may be Dask collections
        (``dpcore.learn._dask``): the same model as in memory for the same seed."""
        self._check_params()
        if is_dask_collection(X) or is_dask_collection(y):
            if self.method in ("ssp", "adassp"):
                return self._fit_ssp_dask(X, y)
            return self._fit_sgd_dask(X, y)
        X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64, y_numeric=True)
        epsilon, alpha, eigen_floor, bx, by, delta, data_norm = self._check_params(*X.shape)
        self.method_ = self.method
        if self.method == "functional":
            return self._fit_functional(X, y, epsilon, alpha, eigen_floor, bx, by)
        if self.method == "sgd":
            return self._fit_sgd(X, y, epsilon, alpha, delta, data_norm, bx, by)
        return self._fit_ssp(X, y, epsilon, alpha, delta, data_norm, bx, by)

    def _target_scale(self, by: tuple[float, float]) -> tuple[float, float]:
        ly, uy = by
        if self.fit_intercept:
            return (ly + uy) / 2.0, (uy - ly) / 2.0
        return 0.0, max(abs(ly), abs(uy))

    def _fit_ssp(self, X: np.ndarray | None, y: np.ndarray | None, epsilon: float,
                 alpha: float, delta: float | None, data_norm: float | None,
                 bx: tuple[np.ndarray, np.ndarray] | None, by: tuple[float, float],
                 chunks: tuple[Any, Any] | None = None) -> Self:
        """SSP / AdaSSP (dpcore.learn._ssp): exact lattice sums of the scaled records, in memory
        or (``chunks`` = aligned Dask chunks) per chunk on the workers, added exactly."""
        if chunks is None:
            assert X is not None and y is not None   # in memory: the arrays are given
            n, d = X.shape
        else:
            n, d = (int(v) for v in chunks[0].shape)
        design = SSPDesign.make(d, bx, by, data_norm, self.fit_intercept,
                                *self._target_scale(by))
        plan = ssp_plan(n, design.domain, epsilon=epsilon, delta=delta,
                        intercept=self.fit_intercept, adaptive_ridge=self.method == "adassp")
        lattice = SSPLattice.make(plan, design.domain)
        if chunks is None:
            sums, _, _ = ssp_chunk(X, y, design, lattice)
        else:
            sums, bad_x, bad_y = sum_chunks(*chunks, ssp_chunk, (design, lattice))
            if bad_x:
                raise ValueError("X must not contain NaN or infinite values")
            if bad_y:
                raise ValueError("y must not contain NaN or infinite values")
            self.n_features_in_ = d
        exact = ssp_units(plan, lattice, sums)
        noisy = release(lambda rng: ssp_release(plan, exact, rng), cost=plan.cost,
                        accountant=self.accountant, random_state=self.random_state,
                        label=f"LinearRegression({self.method})")
        sol = ssp_solve(plan, noisy, design.domain, alpha=alpha)
        mx, hx, my, hy = design.x_centre, design.x_half, design.y_centre, design.y_half
        self.plan_ = plan
        self.noisy_statistics_ = noisy
        self.ridge_ = sol.ridge
        self.noise_norm_ = sol.noise_norm
        self.coef_ = hy * sol.coef / hx
        self.intercept_ = float(my + hy * (sol.intercept - np.sum(sol.coef * mx / hx)))
        return self

    def _fit_ssp_dask(self, X: Any, y: Any) -> Self:
        """``method="ssp"``/``"adassp"`` on Dask chunks: the lattice sums per chunk on the
        workers (:func:`dpcore.learn._dask.sum_chunks`), every flag checked before the charge."""
        Xd, yd, _ = aligned_chunks(X, y)
        epsilon, alpha, _, bx, by, delta, data_norm = self._check_params(*map(int, Xd.shape))
        if int(Xd.shape[0]) < 1:
            raise ValueError("X has no rows")
        self.method_ = self.method
        return self._fit_ssp(None, None, epsilon, alpha, delta, data_norm, bx, by,
                             chunks=(Xd, yd))

    def _fit_sgd_dask(self, X: Any, y: Any) -> Self:
        """``method="sgd"`` on Dask chunks: rows and targets prepared on the workers
        (:class:`dpcore.learn._dask.DaskRows`), checked before the charge."""
        if self.method != "sgd":
            raise ValueError("a Dask collection is fitted with method='ssp', 'adassp' or "
                             "'sgd' (the functional mechanism needs the rows in memory), "
                             f"got {self.method!r}")
        Xd, yd, offsets = aligned_chunks(X, y)
        epsilon, alpha, _, bx, by, delta, data_norm = self._check_params(*map(int, Xd.shape))
        my, hy = self._target_scale(by)
        d = int(Xd.shape[1])
        rows = DaskRows.make(self, Xd, yd, offsets, regression_design,
                             (bx, data_norm, self.fit_intercept), regression_targets,
                             (by[0], by[1], my, hy), d + bool(self.fit_intercept),
                             "y must not contain NaN or infinite values")
        self.method_ = self.method
        return self._fit_sgd(np.zeros((0, d)), None, epsilon, alpha, delta, data_norm, bx, by,
                             rows=rows)

    def _fit_sgd(self, X: np.ndarray, y: np.ndarray | None, epsilon: float, alpha: float,
                 delta: float | None, data_norm: float | None,
                 bx: tuple[np.ndarray, np.ndarray] | None, by: tuple[float, float],
                 rows: RowSource | None = None) -> Self:
        """DP-SGD on the squared loss (dpcore.learn._sgd), rows of norm <= 1, target in [-1, 1]
        (``rows``: a Dask row source; X is then an empty array of the public width)."""
        n_hint = self.n_hint
        assert delta is not None and n_hint is not None   # checked: required
        my, hy = self._target_scale(by)
        Z, mx, hx, scale = regression_rows(X, bx, data_norm, self.fit_intercept)
        if rows is None:
            assert y is not None   # in memory: y is given with X
            rows = ArrayRows(Z, (np.clip(y, *by) - my) / hy)
        plan = sgd_plan(Z.shape[1], epsilon, delta, n_hint, smoothness=1.0, loss="squared")
        w = release(lambda rng: noisy_sgd(rows, None, 1, "squared", plan, alpha / n_hint,
                                          rng)[0],
                    cost=plan.cost, accountant=self.accountant, random_state=self.random_state,
                    label="LinearRegression(sgd)")
        d = X.shape[1]
        self.plan_ = plan
        self.coef_ = hy * w[:d] / (scale * hx)
        offset = w[d] / scale if self.fit_intercept else 0.0
        self.intercept_ = float(my + hy * (offset - np.sum(self.coef_ * mx) / hy))
        return self

    def _fit_functional(self, X: np.ndarray, y: np.ndarray, epsilon: float, alpha: float,
                        eigen_floor: float | Literal["auto"],
                        bx: tuple[np.ndarray, np.ndarray] | None,
                        by: tuple[float, float]) -> Self:
        d = X.shape[1]
        assert bx is not None   # checked: required by the functional mechanism
        (lx, ux), (ly, uy) = bx, by
        if self.fit_intercept:
            mx, hx = (lx + ux) / 2.0, (ux - lx) / 2.0
        else:
            mx, hx = np.zeros(d), np.maximum(np.abs(lx), np.abs(ux))
        my, hy = self._target_scale(by)
        Xs = (np.clip(X, lx, ux) - mx) / hx
        ys = (np.clip(y, ly, uy) - my) / hy
        n = Xs.shape[0]   # public under replace-one neighbours
        iu = np.triu_indices(d, k=1)
        Q = Xs.T @ Xs
        coeffs = [-2.0 * (Xs.T @ ys), np.diag(Q), 2.0 * Q[iu]]
        sens = functional_mechanism_sensitivity(d, intercept=self.fit_intercept)
        eps_fm = epsilon
        if self.fit_intercept:
            coeffs.append(2.0 * Xs.sum(axis=0))
            eps_y = epsilon * TARGET_SUM_SHARE
            eps_fm = round_down(Fraction(epsilon) - Fraction(eps_y))   # the two sum to <= epsilon
        parts = [(sens, eps_fm, np.concatenate(coeffs))]
        if self.fit_intercept:
            parts.append((2.0, eps_y, np.array([ys.sum()])))
        # |every coefficient| <= 2 n, so the grid keeps them in range
        mechs = [(LaplaceMechanism.calibrate(sensitivity=sv, epsilon=ev, size=v.size,
                                             granularity=_base.laplace_grid(sv, ev)), v)
                 for sv, ev, v in parts]
        noisy = release(lambda rng: [np.asarray(m.release(v, random_state=rng), dtype=float)
                                     for m, v in mechs],
                        cost=Cost(epsilon),   # each part's effective epsilon <= its share
                        accountant=self.accountant, random_state=self.random_state,
                        label="LinearRegression(functional mechanism)")
        fm = noisy[0]
        self.noisy_coefficients_ = fm
        self.noisy_target_sum_ = float(noisy[1][0]) if self.fit_intercept else None
        self.sensitivity_ = sens
        # the noisy objective w^T A w + g^T w (+ const) over the slopes
        g = fm[:d]
        A = np.diag(fm[d:2 * d])
        A[iu] = fm[2 * d:2 * d + iu[0].size] / 2.0
        A = np.triu(A) + np.triu(A, 1).T
        if self.fit_intercept:
            # profile out the intercept c = (sum y - w^T sum x) / n (n is public)
            sx, sy = fm[-d:] / 2.0, float(noisy[1][0])   # noisy_target_sum_
            A -= np.outer(sx, sx) / n
            g = g + 2.0 * sy * sx / n
        A[np.diag_indices(d)] += alpha
        vals, vecs = np.linalg.eigh(A)
        keep = vals > 0
        floor = functional_mechanism_noise_norm(d, sens, eps_fm) if eigen_floor == "auto" \
            else eigen_floor * sens / eps_fm
        vals = np.where(keep, np.maximum(vals, floor), vals)
        # minimise on the positive eigenspace: w = -1/2 A^+ g
        wf = -0.5 * (vecs[:, keep] @ ((vecs[:, keep].T @ g) / vals[keep]))
        self.n_trimmed_ = int(np.sum(~keep))
        self.eigen_floor_ = floor
        self.coef_ = hy * wf / hx
        if self.fit_intercept:
            c = (sy - wf @ sx) / n
            self.intercept_ = float(my + hy * (c - np.sum(wf * mx / hx)))
        else:
            self.intercept_ = 0.0
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Predicted targets."""
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
