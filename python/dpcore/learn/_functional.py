"""Private least-squares regression by the functional mechanism (Zhang et al. 2012).

:class:`LinearRegression` perturbs the coefficients of the least-squares objective; its L1
sensitivity (:func:`functional_mechanism_sensitivity`) and the bound on its noise's spectral
norm (:func:`functional_mechanism_noise_norm`) are small pure functions of public values that
tests check against hand-derived values.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._release import Cost, release
from dpcore.learn import _base
from dpcore.mechanisms import LaplaceMechanism

# LinearRegression with an intercept spends this share of epsilon on sum y alone (sensitivity 2
# against the FM's 2 (d^2 + 4d)): the intercept then costs little R^2 even when the slopes
# are drowned in noise, and the slopes keep 80% of the budget.
TARGET_SUM_SHARE = 0.2

__all__ = [
    "LinearRegression",
    "functional_mechanism_sensitivity",
    "functional_mechanism_noise_norm",
]


def functional_mechanism_sensitivity(d, intercept=False):
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


def functional_mechanism_noise_norm(p, sensitivity, epsilon):
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
    """Least-squares linear regression with epsilon-DP by the functional mechanism.

    Features are clipped to ``bounds_X`` and labels to ``bounds_y`` and mapped affinely to
    [-1, 1]. The objective sum_i (y_i - x_i^T w - c)^2 is a polynomial in (w, c) whose
    coefficients are sums over the records: sum y x, sum x x^T and, with an intercept c,
    sum x, sum y and n. Its coefficients in w (and sum x) get exact discrete Laplace noise for
    the L1 sensitivity :func:`functional_mechanism_sensitivity` with 80% of epsilon; sum y,
    whose sensitivity is only 2, gets its own noise with the remaining 20%
    (``TARGET_SUM_SHARE``), and n is public. The intercept is profiled out
    (c = (sum y - w^T sum x) / n) and the noisy quadratic in w is minimised after dropping its
    non-positive eigen-directions and raising small eigenvalues to ``eigen_floor``.
    Without an intercept only sum y x and sum x x^T are released, with all of epsilon.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0.
    bounds_X : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required.
    bounds_y : (lower, upper), default=None
        Public bounds of the target. Required.
    fit_intercept : bool, default=True
    alpha : float, default=0.0
        Ridge term alpha ||w||^2 added to the noisy quadratic (post-processing; in the [-1, 1]
        units, on the summed objective; the intercept is not shrunk), >= 0. At small epsilon
        the noise dominates the quadratic; a ridge of the order of the noise scale
        (``functional_mechanism_sensitivity(d) / epsilon``) tames it; it is public and
        data-independent, so any choice keeps the guarantee.
    eigen_floor : float or "auto", default="auto"
        Spectral post-processing of the noisy quadratic M in w: eigen-directions with
        eigenvalue <= 0 are dropped (the objective is unbounded there) and positive eigenvalues
        are raised to at least ``eigen_floor * Delta / epsilon_fm`` (a multiple of the Laplace
        noise scale; epsilon_fm is 80% of epsilon with an intercept, else epsilon),
        which stops nearly flat noisy directions from blowing the solution up. >= 0; 0 keeps
        plain trimming. ``"auto"``: the floor is :func:`functional_mechanism_noise_norm`, a
        95% bound on the noise's spectral norm (3 sqrt(d) noise scales): no direction is
        trusted more than the noise allows. Public and data-independent (post-processing).
    random_state : None, int, numpy Generator or BitGenerator, default=None
    accountant : dpcore.Accountant, default=None

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    intercept_ : float
    noisy_coefficients_ : ndarray
        The released vector: noisy [-2 sum y x (d), sum x_j^2 (d), 2 sum x_j x_k for j < k
        (row-major upper triangle), and with an intercept 2 sum x_j (d)], in the [-1, 1] units.
    noisy_target_sum_ : float or None
        With an intercept, the released noisy sum y (in the [-1, 1] units); else None.
    sensitivity_ : float
        The L1 sensitivity of ``noisy_coefficients_``,
        :func:`functional_mechanism_sensitivity` (d, intercept=fit_intercept).
    eigen_floor_ : float
        The floor used, in the units of M (``"auto"`` resolved).
    n_trimmed_ : int
        Number of non-positive eigen-directions of the noisy quadratic that were dropped.

    Privacy
    -------
    epsilon-DP under replace-one neighbours (the number of records n is public: the intercept
    uses it), for X and y clipped to the public bounds. Two exact discrete Laplace releases on
    power-of-two grids (the rounding to the grid is charged to the sensitivity, as in
    :func:`dpcore.laplace`): the FM coefficients (sensitivity_, 80% of epsilon with an
    intercept) and sum y (sensitivity 2, 20%); their effective epsilons, at most ``epsilon``
    in total, are charged once before either is drawn. Everything after (ridge term, dropping
    and flooring eigen-directions, profiling out the intercept, the minimisation, the map
    back to the raw units) is post-processing. The sums are computed in floating point; with
    n records their rounding error is of order n * 2^-53 relative, not charged.

    References
    ----------
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
    """

    def __init__(self, *, epsilon=1.0, bounds_X=None, bounds_y=None, fit_intercept=True, alpha=0.0,
                 eigen_floor="auto", random_state=None, accountant=None):
        self.epsilon = epsilon
        self.bounds_X = bounds_X
        self.bounds_y = bounds_y
        self.fit_intercept = fit_intercept
        self.alpha = alpha
        self.eigen_floor = eigen_floor
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged (also for each candidate of a
        grid search). Returns (epsilon, alpha, eigen_floor, (lx, ux), (ly, uy))."""
        epsilon = _base.check_epsilon(self.epsilon)
        alpha = check.nonnegative(self.alpha, "alpha")
        if isinstance(self.eigen_floor, str) and self.eigen_floor != "auto":
            raise ValueError(f"eigen_floor must be a number >= 0 or 'auto', got {self.eigen_floor!r}")
        eigen_floor = "auto" if self.eigen_floor == "auto" \
            else check.nonnegative(self.eigen_floor, "eigen_floor")
        _base.check_bool(self.fit_intercept, "fit_intercept")
        if self.bounds_X is None:
            raise ValueError("bounds_X is required: give public feature bounds (lower, upper); "
                             "they are never inferred from the data")
        if self.bounds_y is None:
            raise ValueError("bounds_y is required: give public target bounds (lower, upper); "
                             "they are never inferred from the data")
        bx = _base.bounds_array(self.bounds_X, "bounds_X", n_features)
        by = check.bounds_pair(self.bounds_y, "bounds_y")
        _base.check_n(n_samples)
        return epsilon, alpha, eigen_floor, bx, by

    def _cost(self):
        return Cost(self._check_params()[0])

    def fit(self, X, y):
        """Fit the private model (see the class docstring). Returns self."""
        self._check_params()
        X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64, y_numeric=True)
        d = X.shape[1]
        epsilon, alpha, eigen_floor, (lx, ux), (ly, uy) = self._check_params(X.shape[0], d)
        if self.fit_intercept:
            mx, hx = (lx + ux) / 2.0, (ux - lx) / 2.0
            my, hy = (ly + uy) / 2.0, (uy - ly) / 2.0
        else:
            mx, hx = np.zeros(d), np.maximum(np.abs(lx), np.abs(ux))
            my, hy = 0.0, max(abs(ly), abs(uy))
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
            sx, sy = fm[-d:] / 2.0, self.noisy_target_sum_
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

    def predict(self, X):
        """Predicted targets."""
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
