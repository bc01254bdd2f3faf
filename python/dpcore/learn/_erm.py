"""Private linear classifiers by regularised ERM (CMS 2011; Bassily-Smith-Thakurta 2014).

:class:`LogisticRegression` and :class:`LinearSVC` minimise a regularised empirical risk and are
made private by output perturbation (CMS 2011, Algorithm 1), objective perturbation
(Algorithm 2) or noisy projected gradient descent. Their calibration lives in small pure
functions in :mod:`dpcore.learn._erm_calibration`; the certified optimiser in
:mod:`dpcore.learn._optimise`.
"""
from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._release import Cost, release
from dpcore.calibration import zcdp_rho_for
from dpcore.learn import _base
from dpcore.learn._erm_calibration import (
    auto_alpha,
    multinomial_perturbation_calibration,
    objective_perturbation_calibration,
)
from dpcore.learn._optimise import (
    MAX_FALLBACK_STEPS,
    certified_tol,
    fallback_steps,
    minimise_binary,
    minimise_multinomial,
    softmax_rows,
)
from dpcore.learn._dask import DaskRows, is_dask_collection
from dpcore.learn._sgd import (
    ArrayRows,
    class_targets,
    gd_steps,
    noisy_gd,
    noisy_gd_multinomial,
    noisy_sgd,
    sgd_plan,
)

if TYPE_CHECKING:
    from dpcore.learn._sgd import RowSource

__all__ = [
    "LogisticRegression",
    "LinearSVC",
]

_METHODS = ("objective", "output", "gd", "sgd")

# The intercept column's constant as a fraction of data_norm: the features keep 99% of the unit
# norm, so their signal stands higher above the isotropic noise than with [x, data_norm]. On
# `bench/dev_suite.py intercept`, 1/4, 1/8 and 1/16 were ahead of 1 in 59-60 of 64 cells and
# behind in none (mean +0.025 to +0.026; 1/8 the best).
INTERCEPT_SCALING_RATIO = 0.125


def _noise_vector(d, scale, rng, size=None):
    """Vector(s) in R^d with density ~ exp(-||b|| / scale): Gamma(d, scale) norm, uniform direction.

    Real-valued (see the Privacy sections on floating point). ``size`` draws that many rows.
    """
    shape = () if size is None else (size,)
    radius = rng.gamma(d, scale, size=shape)
    direction = rng.standard_normal(shape + (d,))
    norms = np.linalg.norm(direction, axis=-1)
    # A zero Gaussian vector has probability 0; redraw defensively.
    while np.any(norms == 0):  # pragma: no cover
        bad = norms == 0
        direction[bad] = rng.standard_normal((int(np.sum(bad)), d))
        norms = np.linalg.norm(direction, axis=-1)
    return direction * (radius / norms)[..., None] if size is not None else direction * (radius / norms)


# --------------------------------------------------------------------------------------------
# Losses on margins z = y w^T x (y in {-1, +1}); all 1-Lipschitz
# --------------------------------------------------------------------------------------------

def _logistic(z):
    loss = np.logaddexp(0.0, -z)
    s = 0.5 * (1.0 + np.tanh(-0.5 * z))  # sigmoid(-z), stable
    return loss, -s, s * (1.0 - s)


def _make_huber(h):
    def huber(z):
        loss = np.zeros_like(z)
        d1 = np.zeros_like(z)
        d2 = np.zeros_like(z)
        low = z < 1.0 - h
        mid = (~low) & (z <= 1.0 + h)
        loss[low] = 1.0 - z[low]
        d1[low] = -1.0
        u = 1.0 + h - z[mid]
        loss[mid] = u * u / (4.0 * h)
        d1[mid] = -u / (2.0 * h)
        d2[mid] = 1.0 / (2.0 * h)
        return loss, d1, d2
    return huber


def design_rows(X: np.ndarray, data_norm: float, scale: float,
                column: float | None) -> np.ndarray:
    """Rows clipped to ||x|| <= data_norm, then [x, column] (no column when None) divided by
    ``scale``, the public bound on its norm: norm <= 1. Row by row, so a chunk of the rows gives
    the matching chunk of the result."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    factor = data_norm / np.maximum(norms, data_norm)   # 1 inside the ball, no overflow
    if column is None:
        return X * (factor / scale)[:, None]
    Xs = np.empty((X.shape[0], X.shape[1] + 1))
    np.multiply(X, (factor / scale)[:, None], out=Xs[:, :-1])
    Xs[:, -1] = column / scale
    return Xs


def centred_design_rows(X: np.ndarray, lower: np.ndarray, upper: np.ndarray, data_norm: float,
                        centre: np.ndarray, radius: float, scale: float,
                        column: float | None) -> np.ndarray:
    """Rows clipped to the box [lower, upper] and to ||x|| <= data_norm, shifted by the public
    ``centre`` and clipped to ||x - centre|| <= ``radius`` (a no-op in exact arithmetic when
    ``radius`` comes from :func:`centring`; kept so the bound holds in floating point too),
    then as :func:`design_rows`. Row by row, like it."""
    Xc = np.clip(X, lower, upper)
    norms = np.sqrt(np.einsum("ij,ij->i", Xc, Xc))
    Xc *= (data_norm / np.maximum(norms, data_norm))[:, None]
    Xc -= centre
    return design_rows(Xc, radius, scale, column)


def centring(lower: np.ndarray, upper: np.ndarray,
             data_norm: float) -> tuple[np.ndarray, float] | None:
    """(centre, radius): the public point rows are shifted to and the bound on the shifted
    rows' norm, from public values only; None when centring would not tighten the bound.

    Rows clipped to the box [lower, upper] and to the ball of radius ``data_norm`` lie within
    ||(upper - lower) / 2|| of the box's midpoint m (the box) and within data_norm + ||m|| of
    it (the triangle inequality), so radius = the smaller of the two. The rows are centred
    (at m, radius) only when radius < data_norm: all-positive features (min-max scaled) have
    radius half of data_norm, features already centred keep radius = data_norm (m = 0: no
    change), and rows normalised to unit norm with bounds [0, 1] would get radius
    sqrt(d) / 2 > 1 (not centred).

    >>> c, r = centring(np.zeros(4), np.ones(4), 2.0)
    >>> c.tolist(), r
    ([0.5, 0.5, 0.5, 0.5], 1.0)
    >>> centring(np.zeros(4), np.ones(4), 1.0) is None
    True
    """
    centre = (lower + upper) / 2.0
    radius = min(float(np.linalg.norm((upper - lower) / 2.0)),
                 data_norm + float(np.linalg.norm(centre)))
    return (centre, radius) if radius < data_norm else None


# --------------------------------------------------------------------------------------------
# ERM classifiers
# --------------------------------------------------------------------------------------------

class _PrivateERMClassifier(_base.SharedStateCloneMixin, ClassifierMixin, BaseEstimator, metaclass=ABCMeta):
    _loss_name = None

    @abstractmethod
    def _loss(self):
        """The loss of the concrete classifier (logistic or Huber)."""

    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged (also for each candidate of a
        grid search). Returns (epsilon, data_norm, alpha, tol, max_iter, c, classes)."""
        epsilon = _base.check_epsilon(self.epsilon)
        if self.data_norm is None:
            raise ValueError(
                "data_norm is required: give a public bound on the L2 norm of the rows of X "
                "(rows are clipped to it); it is never inferred from the data"
            )
        data_norm = check.positive(self.data_norm, "data_norm")
        if isinstance(self.alpha, str) and self.alpha != "auto":
            raise ValueError(f"alpha must be a positive number or 'auto', got {self.alpha!r}")
        alpha = "auto" if self.alpha == "auto" else check.positive(self.alpha, "alpha")
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        tol = check.positive(self.tol, "tol")
        max_iter = check.integer(self.max_iter, "max_iter", minimum=1)
        _base.check_bool(self.fit_intercept, "fit_intercept")
        if not (isinstance(self.intercept_scaling, str) and self.intercept_scaling == "auto"):
            check.positive(self.intercept_scaling, "intercept_scaling")
        c = self._curvature()
        classes = _base.check_classes(self.classes)
        if self.bounds is not None:
            _base.bounds_array(self.bounds, "bounds", n_features)
        _base.check_n(n_samples)
        if not (isinstance(self.n_steps, str) and self.n_steps == "auto"):
            check.integer(self.n_steps, "n_steps", minimum=1, maximum=10**6)
        if self.method in ("gd", "sgd"):
            if self.delta is None:
                raise ValueError(f"delta is required for method={self.method!r} ((epsilon, "
                                 "delta)-DP): give 0 < delta < 1, far below 1/n")
            check.probability(self.delta, "delta")
        elif self.delta is not None:
            raise ValueError(f"delta applies to method='gd' or 'sgd' only (method={self.method!r} "
                             "is pure epsilon-DP)")
        if self.method == "sgd":
            if self.n_hint is None:
                raise ValueError("n_hint is required for method='sgd': a public guess of the "
                                 "number of records (it sets the batch size and the step scale, "
                                 "never the privacy guarantee)")
            check.integer(self.n_hint, "n_hint", minimum=1)
        elif self.n_hint is not None:
            raise ValueError(f"n_hint applies to method='sgd' only, got method={self.method!r}")
        multi_class = getattr(self, "multi_class", "ovr")
        if multi_class not in ("auto", "ovr", "multinomial"):
            raise ValueError("multi_class must be 'auto', 'ovr' or 'multinomial', got "
                             f"{multi_class!r}")
        return epsilon, data_norm, alpha, tol, max_iter, c, classes

    def _multinomial(self, k):
        """Whether k > 2 classes are fitted as one softmax model (else one-vs-rest)."""
        return False

    def _geometry(self, data_norm, n_features):
        """(norm, design, params): the public bound on the norm of the rows the model is fitted
        on, and the row map ``design(X, *params)`` to rows of norm <= 1. With ``bounds`` and an
        intercept, rows centred at the box's midpoint when that tightens the bound
        (:func:`centring`); else :func:`design_rows`. Checks ``bounds`` (before any charge);
        ``n_features`` None only for an X that the caller then refuses (not 2-d)."""
        shift = None
        if self.bounds is not None and n_features is not None:
            lower, upper = _base.bounds_array(self.bounds, "bounds", n_features)
            shift = centring(lower, upper, data_norm) if self.fit_intercept else None
        norm = data_norm if shift is None else shift[1]
        column = self._intercept_column(norm) if self.fit_intercept else None
        if shift is None:
            return norm, design_rows, (data_norm, self._row_scale(norm), column), None
        return (norm, centred_design_rows,
                (lower, upper, data_norm, shift[0], norm, self._row_scale(norm), column),
                shift[0])

    def _design(self, X, data_norm):
        """The rows the model is fitted on (:meth:`_geometry`): norm <= 1."""
        _, design, params, _ = self._geometry(data_norm, X.shape[1])
        return design(X, *params)

    def _intercept_column(self, data_norm):
        """The constant t of the intercept column (``intercept_scaling``; "auto": data_norm
        times INTERCEPT_SCALING_RATIO for objective perturbation, else 1)."""
        if isinstance(self.intercept_scaling, str) and self.intercept_scaling == "auto":
            return data_norm * INTERCEPT_SCALING_RATIO if self.method == "objective" else 1.0
        return float(self.intercept_scaling)

    def _row_scale(self, data_norm):
        if not self.fit_intercept:
            return data_norm
        return math.hypot(data_norm, self._intercept_column(data_norm))

    def _ridge_scale(self, data_norm):
        """The row scale at which ``alpha="auto"`` applies scikit-learn's C = 1: that of the
        design rows had data_norm been 1, sqrt(1 + (t / data_norm)^2), i.e. C = 1 on the
        unit-ball rows. C = 1 in the caller's own units made the default depend on how the
        rows were scaled (issue 28): the same rows divided by sqrt(d) with data_norm = 1 got a
        ridge d times stronger than with data_norm = sqrt(d). Public values only."""
        return self._row_scale(data_norm) / data_norm

    def _cost(self):
        epsilon = self._check_params()[0]
        if self.method == "gd":
            return Cost(rho=zcdp_rho_for(epsilon, self.delta))
        if self.method == "sgd":   # the plan's guarantee depends on public scalars only
            return sgd_plan(1, epsilon, self.delta, self.n_hint,
                            smoothness=self._curvature()).cost
        return Cost(epsilon)

    def fit(self, X, y):
        """Fit the private model.

        Parameters
        ----------
        X : array_like, shape (n_samples, n_features)
            Training data; rows are clipped to L2 norm ``data_norm``. With ``method="gd"`` or
            ``"sgd"`` (and ``classes`` given) also a Dask array or dataframe: fitted chunk by
            chunk on the workers with the in-memory law and, for the same seed, the same model
            (:class:`dpcore.learn._dask.DaskRows`, whose Privacy section states it).
        y : array_like, shape (n_samples,)
            Labels, in ``classes`` when given (a Dask array or series with a Dask X).

        Returns
        -------
        self
        """
        epsilon, data_norm, alpha, tol, max_iter, c, classes = self._check_params()
        if is_dask_collection(X) or is_dask_collection(y):   # gd / sgd only; see DaskRows
            width = int(X.shape[1]) if len(X.shape) == 2 else None   # else DaskRows refuses
            data_norm, design, params, centre = self._geometry(data_norm, width)
            rows = DaskRows.for_classifier(self, X, y, classes, design, params)
            n, d, Xs = rows.n_rows, rows.n_columns, None
        else:
            X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64)
            _base.check_targets(y)
            classes = _base.label_set(y, classes)
            _base.check_n(X.shape[0])
            n = X.shape[0]
            # from here on data_norm is the bound on the rows fitted (the centred rows' radius)
            data_norm, design, params, centre = self._geometry(data_norm, X.shape[1])
            Xs = design(X, *params)
            d = Xs.shape[1]
            rows = ArrayRows(Xs, class_targets(y, classes)[0]) if self.method in ("gd",
                                                                                "sgd") else None
        k = 1 if classes.size == 2 else classes.size
        multinomial = self._multinomial(k)
        # one-vs-rest: every record enters all k models, each fitted with epsilon / k
        # rounded down exactly: k models of eps_model never sum above epsilon
        eps_model = (epsilon if multinomial or self.method == "sgd"
                     else round_down(Fraction(epsilon) / k))
        if alpha == "auto" and self.method == "sgd":   # n is not public: C = 1 at n_hint
            alpha = 1.0 / self.n_hint
        elif alpha == "auto":
            alpha = auto_alpha(self.method, n, d, eps_model,
                               row_scale=self._ridge_scale(data_norm),
                               curvature=c, k=k if multinomial else 1)
        # Calibrate everything before charging or drawing.
        calib: dict[str, Any]
        if self.method == "gd":
            # zCDP composes by adding rho: the k one-vs-rest models share rho (a better split
            # than epsilon / k), each over n_steps noisy gradients
            rho = zcdp_rho_for(epsilon, self.delta)
            steps = gd_steps(n, epsilon) if self.n_steps == "auto" else self.n_steps
            if multinomial:   # one model; the softmax loss is 1/2-smooth on unit rows
                calib = {"rho": rho, "n_steps": steps, "step_size": 1.0 / (0.5 + alpha)}
            else:
                calib = {"rho": round_down(Fraction(rho) / k), "n_steps": steps,
                         "step_size": 1.0 / (c + alpha)}
        elif self.method == "sgd":
            # one release for all k outputs (softmax, or one-vs-rest heads clipped jointly)
            plan = sgd_plan(d, epsilon, self.delta, self.n_hint, n_outputs=k,
                            smoothness=0.5 if multinomial else c,
                            loss="softmax" if multinomial else self._sgd_loss)
            calib = {"n_steps": plan.n_steps, "rate": plan.rate,
                     "noise_multiplier": plan.noise_multiplier, "clip": plan.clip,
                     "learning_rate": plan.learning_rate}
        elif self.method == "output":
            # output_perturbation_beta(n, alpha, eps_model) plus the optimiser slack:
            # ||w - w*|| <= tol on each side, so the sensitivity is 2 G/(n alpha) + 2 tol with
            # G the loss gradient's norm bound (1, or sqrt(2) for the softmax in Frobenius norm)
            # and tol raised to the certificate's public floor (certified_tol)
            lipschitz = math.sqrt(2.0) if multinomial else 1.0
            tol = certified_tol(tol, alpha, lipschitz)
            # the optimiser's fallback must provably reach tol within its public cap (from 0,
            # where the loss gradient's norm is at most G): else refuse before the charge
            smooth = (0.5 if multinomial else c) + alpha
            if fallback_steps(lipschitz, alpha, smooth, tol) > MAX_FALLBACK_STEPS:
                raise ValueError(f"alpha={alpha!r} is too small for output perturbation at "
                                 f"tol={tol!r}: the optimiser could not certify tol within "
                                 f"{MAX_FALLBACK_STEPS} gradient steps; raise alpha or tol")
            sens = 2.0 * lipschitz / (n * alpha) + 2.0 * tol
            scale = sens / eps_model
            calib = {"beta": 1.0 / scale, "tol": tol}
        elif multinomial:   # objective perturbation of the softmax model
            eps_p, delta = multinomial_perturbation_calibration(epsilon, n, alpha, k)
            scale = 2.0 * math.sqrt(2.0) / eps_p
            tol = certified_tol(tol, alpha + delta, math.sqrt(2.0))
            calib = {"epsilon_prime": eps_p, "Delta": delta, "tol": tol}
        else:
            eps_p, delta = objective_perturbation_calibration(eps_model, n, alpha, c)
            scale = 2.0 / eps_p
            tol = certified_tol(tol, alpha + delta, 1.0)
            calib = {"epsilon_prime": eps_p, "Delta": delta, "tol": tol}
        loss_fn = self._loss()

        def draw(rng):
            if self.method in ("gd", "sgd"):
                assert rows is not None   # the row source of gd/sgd (set above)
                return draw_rows(rows, rng)
            assert Xs is not None   # the other methods fit the rows in memory
            return draw_in_memory(Xs, rng)

        def draw_rows(rows: RowSource, rng: np.random.Generator) -> np.ndarray:
            if self.method == "sgd":
                return noisy_sgd(rows, None, k, "softmax" if multinomial else self._sgd_loss,
                                 plan, alpha, rng, h=getattr(self, "h", 0.5))
            if self.method == "gd" and multinomial:
                return noisy_gd_multinomial(rows, k, alpha, calib["rho"], calib["n_steps"],
                                            calib["step_size"], rng)
            # gd: one binary model per class index j (j = 1: two classes)
            return np.array([noisy_gd(rows, self._sgd_loss, 1 if k == 1 else j, alpha,
                                      calib["rho"], calib["n_steps"], calib["step_size"],
                                      rng, h=getattr(self, "h", 0.5)) for j in range(k)])

        def draw_in_memory(Xs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            if multinomial:
                labels = np.zeros(n, dtype=np.intp)
                for j in range(k):
                    labels[y == classes[j]] = j
                if self.method == "output":
                    W = minimise_multinomial(Xs, labels, k, alpha, np.zeros((k, d)), tol,
                                             max_iter)
                    return W + _noise_vector(k * d, scale, rng).reshape(k, d)
                B = _noise_vector(k * d, scale, rng)
                return minimise_multinomial(Xs, labels, k, alpha + calib["Delta"], B, tol,
                                             max_iter)
            coefs = np.empty((k, d))
            Z = None
            for j in range(k):
                pos = classes[1] if k == 1 else classes[j]
                signs = np.where(y == pos, 1.0, -1.0)
                Z = np.multiply(Xs, signs[:, None], out=Z)
                if self.method == "output":
                    w = minimise_binary(loss_fn, Z, alpha, np.zeros(d), tol, max_iter,
                                        curvature=c)
                    w = w + _noise_vector(d, scale, rng)
                else:
                    b = _noise_vector(d, scale, rng)
                    w = minimise_binary(loss_fn, Z, alpha + calib["Delta"], b, tol, max_iter,
                                        curvature=c)
                # The optimiser's gradient norms and iteration counts are functions of the data
                # that carry no noise of their own: they are not kept (issue 14).
                coefs[j] = w
            return coefs

        label = (f"{type(self).__name__}({self.method}, multinomial, {k} classes)" if multinomial
                 else f"{type(self).__name__}({self.method}, {k} model{'s' if k > 1 else ''})")
        cost = (Cost(rho=rho) if self.method == "gd" else plan.cost if self.method == "sgd"
                else Cost(epsilon))
        coefs = release(draw, cost=cost, accountant=self.accountant,
                        random_state=self.random_state, label=label)
        self.classes_ = classes
        scale = self._row_scale(data_norm)
        if self.fit_intercept:
            self.coef_ = coefs[:, :-1] / scale
            self.intercept_ = coefs[:, -1] * (self._intercept_column(data_norm) / scale)
            if centre is not None:   # w^T (x - centre) + b
                self.intercept_ = self.intercept_ - self.coef_ @ centre
        else:
            self.coef_ = coefs / scale
            self.intercept_ = np.zeros(k)
        self.calibration_ = calib
        self.alpha_ = alpha
        self.multi_class_ = "multinomial" if multinomial else "ovr"
        self.epsilon_per_model_ = eps_model
        return self

    def decision_function(self, X):
        """Signed score(s): shape (n,) for two classes (positive = ``classes_[1]``), else (n, k)."""
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


class LogisticRegression(_PrivateERMClassifier):
    """Logistic regression with epsilon-DP by output or objective perturbation (CMS 2011).

    Minimises J(w) = (1/n) sum_i log(1 + exp(-y_i w^T x_i)) + (alpha/2) ||w||^2 over the rows
    clipped to ``data_norm`` and rescaled to the unit ball, then perturbs the minimiser
    (``method="output"``) or the objective (``method="objective"``, the default; usually more
    accurate). Two classes give one model; k > 2 classes give one multinomial (softmax) model
    by default (``multi_class="auto"`` with ``"objective"`` or ``"gd"``), or k one-vs-rest
    models (see ``multi_class``).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter of the whole fit, > 0 (the multinomial model gets all of it; k
        one-vs-rest models get epsilon / k each).
    data_norm : float, default=None
        Public bound on the L2 norm of a row of X, > 0. Required; rows with a larger norm are
        clipped (scaled down) to it. Never inferred from the data.
    bounds : (lower, upper), default=None
        Optional public feature bounds (scalars or arrays of length n_features), as for
        :class:`dpcore.learn.GaussianNB`; never inferred from the data. When given, rows are also clipped
        to the box, and with an intercept they are centred at the box's midpoint m whenever
        that tightens the norm bound (:func:`centring`: radius r = min(||(upper - lower) / 2||,
        data_norm + ||m||) < data_norm), e.g. min-max scaled (all-positive) features, where
        r = sqrt(d) / 2 for features in [0, 1] with data_norm = sqrt(d). The model is then
        fitted on x - m with r in place of data_norm everywhere (the row scale, the intercept
        column, ``alpha="auto"``) and reported in the raw units. Without centring an all-positive feature
        table needs a large intercept, which the ridge penalty (and objective perturbation's
        proof needs the whole objective penalised) shrinks towards predicting one class.
    alpha : float or "auto", default="auto"
        Regularisation strength Lambda of the averaged objective on the unit-ball rows
        (see ``fit_intercept``), > 0. Mapping to scikit-learn's ``C`` (which multiplies the
        summed loss, with (1/2)||w||^2, on raw rows): alpha = s^2 / (n C) with
        s = sqrt(data_norm^2 + t^2), t = ``intercept_scaling`` (s = data_norm without an
        intercept).
        Larger alpha means less noise (the sensitivity is 2 / (n alpha)) but more bias.
        ``"auto"``: :func:`auto_alpha` from public values only (n, the number of weights, the
        method, epsilon, the intercept column's ratio t / ``data_norm``): for
        ``"objective"``, C = 1 on the unit-ball rows, 1 / (n (1 + (t / data_norm)^2)),
        whatever the caller's units (rescaling X and ``data_norm`` together leaves the model
        unchanged), plus a ridge term against the perturbation that fades as 1 / n^2; the
        value used is ``alpha_``. It never looks at the data, so it costs no privacy.
    method : {"objective", "output", "gd", "sgd"}, default="objective"
        CMS 2011 Algorithm 2 (objective perturbation) or Algorithm 1 (output perturbation), both
        pure epsilon-DP; or ``"gd"``: noisy projected gradient descent (Bassily-Smith-Thakurta
        2014) with exact discrete Gaussian gradient noise, (epsilon, delta)-DP through zCDP,
        exact in floating point (see Privacy). ``"gd"`` is usually the most accurate at small
        epsilon and with many classes (the models share rho, not epsilon / k). ``"sgd"``:
        DP-SGD (:mod:`dpcore.learn._sgd`): Poisson-subsampled minibatches, per-record
        clipping, gradients summed exactly on an integer lattice, exact discrete Gaussian
        noise; steps, sampling rate, clipping norm and learning rate from public values by
        :func:`dpcore.learn._sgd.sgd_plan`; (epsilon, delta)-DP under add/remove neighbours,
        needs ``delta`` and ``n_hint``; the fastest at large n (one k-output model).
    multi_class : {"auto", "ovr", "multinomial"}, default="auto"
        For k > 2 classes: one softmax model at the whole budget (``"multinomial"``; objective
        perturbation by :func:`multinomial_perturbation_calibration`, noisy gradient descent
        with gradient sensitivity 2 sqrt(2) / n, or output perturbation with sensitivity
        2 sqrt(2) / (n alpha); about sqrt(k / 2) times less noise per class than one-vs-rest)
        or k one-vs-rest models (``"ovr"``: epsilon / k each, or rho / k for ``"gd"``).
        ``"auto"``: multinomial for ``"objective"`` and ``"gd"``, one-vs-rest for
        ``"output"`` (on the digits development splits neither was ahead at epsilon <= 5).
    fit_intercept : bool, default=True
        Learn an intercept: a constant column t (``intercept_scaling``) is appended to the
        clipped row and [x, t] is divided by s = sqrt(data_norm^2 + t^2), so it has norm <= 1
        (without an intercept rows are divided by s = data_norm). alpha applies to the weights
        of these unit-ball rows: in the raw units the penalty is
        (alpha s^2 / 2) (||coef||^2 + (intercept / t)^2).
    intercept_scaling : float or "auto", default="auto"
        The constant t of the intercept column, > 0 (scikit-learn's name for the same idea).
        A smaller t leaves more of the unit norm to the features, whose signal then stands
        higher above the isotropic noise, and shrinks the intercept harder. ``"auto"``:
        t = data_norm / 8 (:data:`INTERCEPT_SCALING_RATIO`) for ``"objective"``, measured
        on the development suite; t = 1 for ``"output"`` and ``"gd"`` (not measured there;
        gradient descent converges more slowly along a small intercept column).
    classes : array_like, default=None
        The public label set, at least 2 labels. None: taken from y, which reveals the set of
        labels present (pass it to avoid that; see Privacy). Labels of y outside ``classes``
        raise a ValueError (which does not quote them).
    tol : float, default=1e-6
        The optimiser stops when ||grad J|| <= tol * Lambda (Lambda the total regularisation),
        so the returned model is within tol of the exact minimiser (see Privacy).
    max_iter : int, default=100
        Maximum Newton iterations per model.
    delta : float, default=None
        ``method="gd"`` and ``"sgd"`` only (required there): the delta of the (epsilon, delta)
        guarantee, 0 < delta < 1, far below 1/n.
    n_steps : int or "auto", default="auto"
        ``method="gd"``: gradient steps per model (public; 1 <= n_steps <= 10**6).
        ``"auto"``: :func:`dpcore.learn._sgd.gd_steps` (n, epsilon), a rule on public values
        chosen on the development data (``bench/sgd_dev.py gd``).
    n_hint : int, default=None
        ``method="sgd"`` only (required there): a public guess of the number of records, >= 1.
        It sets the expected batch size and the scale of the steps (the noisy gradient sums
        are divided by rate * n_hint): a poor guess costs accuracy, never privacy (it is
        public and the guarantee does not depend on it).
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator (unlike scikit-learn, where None is a global Mersenne
        Twister). Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` before anything is drawn (``method="gd"``: rho-zCDP with rho =
        :func:`dpcore.calibration.zcdp_rho_for` (epsilon, delta), which the accountant
        reports as at most (epsilon, delta)).

    Attributes
    ----------
    classes_ : ndarray
    coef_ : ndarray, shape (1, n_features) or (k, n_features)
        In the units of the raw X.
    intercept_ : ndarray, shape (1,) or (k,)
    calibration_ : dict
        ``beta`` (output), ``epsilon_prime`` and ``Delta`` (objective), or ``rho``,
        ``n_steps`` and ``step_size`` (gd), per model; ``n_steps``, ``rate``,
        ``noise_multiplier``, ``clip`` and ``learning_rate`` (sgd, the whole fit).
    alpha_ : float
        The regularisation used (``alpha``, or the value ``"auto"`` resolved to).
    multi_class_ : {"ovr", "multinomial"}
        How the classes were fitted.
    epsilon_per_model_ : float

    Privacy
    -------
    epsilon-DP under replace-one neighbours (the number of records n is public), for rows
    clipped to ``data_norm`` and labels in the public label set, charged as ``epsilon`` to the
    accountant. With ``bounds``, each row x is first mapped by the fixed public map
    phi(x) = clip_r(clip_data_norm(clip_box(x)) - m), with m and r from :func:`centring`
    (public values only: bounds and data_norm, never the data); phi maps replace-one
    neighbours to replace-one neighbours and its rows have norm <= r, so every statement
    below holds with r in place of data_norm (the final clip to r is a no-op in exact
    arithmetic and enforces the bound in floating point); reporting w^T (x - m) + b as
    coef_ and intercept_ - coef_ m is post-processing. The logistic loss is 1-Lipschitz with |ell''| <= c = 1/4. Output perturbation:
    the exact minimiser has L2 sensitivity 2/(n alpha); noise b with density ~ exp(-beta ||b||),
    beta = n alpha epsilon / 2 (norm Gamma(d, 1/beta), uniform direction). Objective
    perturbation: epsilon' and Delta from :func:`objective_perturbation_calibration` (whose
    docstring proves the bound; its log-determinant term is CMS's halved); the objective gets
    b^T w / n + (Delta/2)||w||^2 with ||b|| ~ Gamma(d, 2/epsilon').
    One-vs-rest: every record enters all k models, so each is fitted with epsilon / k and the
    fit composes sequentially to epsilon. Multinomial (k > 2), objective perturbation: one
    model over W in R^(k x d), epsilon' and Delta from
    :func:`multinomial_perturbation_calibration` (noise on W of density
    ~ exp(-epsilon' ||B|| / (2 sqrt 2))). Multinomial output perturbation: the loss gradient
    (p - e_y) x^T has Frobenius norm <= sqrt(2), so the exact minimiser of the
    alpha-strongly convex objective moves by at most 2 sqrt(2) / (n alpha) in Frobenius norm
    when one record is replaced; noise of density ~ exp(-epsilon ||B|| / Delta_W) with
    Delta_W = 2 sqrt(2) / (n alpha) + 2 tol (Gamma(k d, Delta_W / epsilon) norm). The label
    set must be public: with ``classes=None`` it is taken from y without noise (stored in
    ``classes_``, and it fixes k), which the guarantee does not cover (fit warns with
    ``dpcore.PrivacyWarning``); pass ``classes`` for the stated guarantee. Every argument (X,
    y, classes, parameters, ``random_state``, ``accountant``) is checked before the charge,
    and the fitted model holds only the released coefficients and public values (no
    optimiser diagnostics).

    ``method="gd"``: rho-zCDP, hence (epsilon, delta)-DP (rho = zcdp_rho_for(epsilon, delta),
    the tight conversion), under replace-one neighbours. Each of the n_steps steps of each of
    the k models releases the averaged loss gradient (L2 sensitivity 2/n: rows of norm <= 1,
    |ell'| <= 1) with dpcore's exact discrete Gaussian on a power-of-two grid at rho / (k
    n_steps); everything else (regulariser, step, projection on the ball of radius 1/alpha,
    averaging of the iterates) is post-processing, so the guarantee holds in floating point and
    needs no exact minimiser. Multinomial (k > 2): one softmax model, each step releases the
    averaged gradient in R^(k x d) (Frobenius sensitivity 2 sqrt(2) / n) at rho / n_steps.

    ``method="sgd"``: (epsilon, delta)-DP under add/remove neighbours (n is not used; the
    public ``n_hint`` replaces it), for rows clipped to ``data_norm`` and labels in the public
    set: :class:`dpcore.learn._sgd.SGDPlan` states the mechanism (Poisson sampling at a
    dyadic rate drawn exactly, the k-output gradient of each sampled record clipped jointly and
    rounded to an integer lattice with its squared norm checked in integers, exact discrete
    Gaussian noise) and its accounting (the discrete Gaussian's RDP bound, amplified by Poisson
    subsampling, composed over the steps: the curve is charged with the plain (epsilon,
    delta), so ``Accountant(method="rdp")`` composes it tightly). One release covers all k
    outputs (softmax, or the one-vs-rest heads clipped together).

    Inexact minimisation (objective and output): the guarantees are for the exact minimiser.
    The optimiser (:mod:`dpcore.learn._optimise`) returns a point within tol of it: damped
    Newton until a float64 certificate ||grad J|| + rounding allowance <= tol * Lambda holds,
    or, when it does not within ``max_iter`` steps, Nesterov's accelerated gradient from 0 for
    a step count that provably brings it within tol (from public values and the noise's norm;
    at most ``MAX_FALLBACK_STEPS``). It never raises after the charge, so whether a fit
    returns does not depend on the data (issue 25); tol is first raised to the public floor
    ``certified_tol`` (2^-40 G / Lambda) at which the certificate is attainable in float64,
    and the value used is ``calibration_["tol"]``. Output perturbation charges the slack:
    ||w - w*|| <= tol on each side, so the sensitivity is inflated by 2 tol (our suggestion,
    Chaudhuri-Monteleoni-Sarwate 2011, Section 3); before the charge it refuses an alpha
    whose provable fallback count exceeds the cap. The optimiser's iteration counts and
    gradient norms are not stored (exact functions of the data), but its running time depends
    on the data (not hidden). For objective perturbation the paper's proof needs the exact
    minimiser of the perturbed objective; the released model is within tol of it (up to the
    fallback's cap after an extreme noise draw), and the extra leakage of that deterministic
    error is not accounted (stated plainly: treat tol as part of the trust model; it is 1e-6
    by default).

    Floating point: NOT floating-point exact. The default (objective perturbation) and
    ``method="output"`` draw their noise vector (Gamma norm, uniform direction) with numpy's
    real-valued Gamma and normal samplers on dpcore's secure generator; those samplers are
    not exact in floating point, so the guarantee holds for the ideal real-valued mechanism
    only (the release is a trained model rather than a noisy copy of a single value, which
    makes Mironov-style low-bit attacks far less direct, but no formal floating-point
    guarantee is claimed). No lattice version of objective perturbation is known to be exact
    (neighbours' minimisers land on different discrete sets). It stays the default for its
    measured accuracy: on the development data (``bench/dev_suite.py``: 134 cells of data set
    x preprocessing x epsilon 0.1-5), its median accuracy is above output perturbation's by
    +0.076 on average (77 cells ahead, 56 behind; output perturbation is ahead on standardised,
    centred features, -0.049 there). For a release that is exact in floating point use
    ``method="gd"`` or ``method="sgd"`` (exact discrete Gaussian gradients; (epsilon, delta)-DP).

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk
       minimization", JMLR 12 (2011) 1069-1109.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import LogisticRegression
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.normal(size=(2000, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = LogisticRegression(epsilon=1.0, data_norm=3.0, classes=[0, 1], random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    def __init__(self, *, epsilon: float = 1.0, data_norm: float | None = None,
                 bounds: Any = None, alpha: float | str = "auto", method: str = "objective",
                 multi_class: str = "auto", fit_intercept: bool = True,
                 intercept_scaling: float | str = "auto", classes: Any = None, tol: float = 1e-6,
                 max_iter: int = 100, delta: float | None = None, n_steps: int | str = "auto",
                 n_hint: int | None = None, random_state: Any = None,
                 accountant: Any = None) -> None:
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.bounds = bounds
        self.alpha = alpha
        self.method = method
        self.multi_class = multi_class
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.classes = classes
        self.tol = tol
        self.max_iter = max_iter
        self.delta = delta
        self.n_steps = n_steps
        self.n_hint = n_hint
        self.random_state = random_state
        self.accountant = accountant

    _sgd_loss = "logistic"

    def _curvature(self):
        return 0.25

    def _loss(self):
        return _logistic

    def _multinomial(self, k):
        return k > 2 and (self.multi_class == "multinomial"
                          or (self.multi_class == "auto" and self.method != "output"))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (softmax of the multinomial model's scores; one-vs-rest:
        logistic scores normalised to sum to 1)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = 0.5 * (1.0 + np.tanh(0.5 * scores))
            return np.column_stack([1.0 - p, p])
        if self.multi_class_ == "multinomial":
            return softmax_rows(np.array(scores, dtype=float))
        p = 0.5 * (1.0 + np.tanh(0.5 * scores))
        total = p.sum(axis=1, keepdims=True)
        return p / np.where(total > 0, total, 1.0)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


class LinearSVC(_PrivateERMClassifier):
    """Linear SVM (Huber-smoothed hinge loss) with epsilon-DP by output or objective perturbation.

    The loss on a margin z = y w^T x is 0 for z > 1 + h, (1 + h - z)^2 / (4h) for |1 - z| <= h
    and 1 - z for z < 1 - h (CMS 2011, Section 3.4): 1-Lipschitz with |ell''| <= c = 1/(2h).
    Everything else is as in :class:`LogisticRegression`. For a private kernel SVM, put
    :class:`dpcore.learn._kernel.RandomFourierFeatures` in front (rows of norm exactly 1,
    so ``data_norm=1``).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter of the whole fit, > 0 (split equally over k one-vs-rest models).
    data_norm : float, default=None
        Public bound on the L2 norm of a row of X (rows clipped to it). Required.
    bounds : (lower, upper), default=None
        Optional public feature bounds: rows centred at their midpoint when that tightens the
        norm bound, as in :class:`LogisticRegression`.
    alpha : float or "auto", default="auto"
        Regularisation strength of the averaged objective on unit-ball rows (mapping to ``C``
        and ``"auto"`` as in :class:`LogisticRegression`).
    h : float, default=0.5
        Huber smoothing width, > 0. Larger h lowers the curvature bound c = 1/(2h) (less noise
        for objective perturbation) but moves the loss further from the hinge.
    method : {"objective", "output", "gd", "sgd"}, default="objective"
        As in :class:`LogisticRegression` (``"gd"``: noisy gradient descent, (epsilon,
        delta)-DP through zCDP, exact in floating point; ``"sgd"``: DP-SGD, (epsilon,
        delta)-DP under add/remove neighbours, k > 2 classes as one-vs-rest heads clipped
        jointly in one release).
    fit_intercept : bool, default=True
    intercept_scaling : float or "auto", default="auto"
        As in :class:`LogisticRegression`.
    classes : array_like, default=None
        Public label set, at least 2 labels (None: taken from y, which reveals it; see Privacy).
    tol : float, default=1e-6
    max_iter : int, default=100
    delta : float, default=None
        ``method="gd"`` and ``"sgd"`` only (required there).
    n_steps : int or "auto", default="auto"
        ``method="gd"``: gradient steps per model (``"auto"``: as in
        :class:`LogisticRegression`).
    n_hint : int, default=None
        ``method="sgd"`` only (required there): public guess of the number of records
        (utility only), as in :class:`LogisticRegression`.
    random_state : None, int, numpy Generator or BitGenerator, default=None
    accountant : dpcore.Accountant, default=None

    Privacy
    -------
    epsilon-DP (``"gd"``: (epsilon, delta)-DP through zCDP) under replace-one neighbours (n
    public; ``"sgd"``: (epsilon, delta)-DP under add/remove neighbours, as in
    :class:`LogisticRegression`), rows clipped to ``data_norm``, labels in the public set ``classes`` (with
    ``classes=None`` the label set is taken from y and is not covered: fit warns with
    ``dpcore.PrivacyWarning``); charged after every argument has been checked. With
    ``bounds``, the rows are first mapped by the same public map phi as in
    :class:`LogisticRegression` (norm <= r, from public values only). Same mechanisms,
    one-vs-rest budget split and caveats (inexact minimiser; a real-valued noise vector, so
    NOT floating-point exact except with ``method="gd"``) as :class:`LogisticRegression`,
    with c = 1/(2h); no optimiser diagnostics are stored.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import LinearSVC
    >>> rng = np.random.default_rng(1)  # insecure-ok: example data, not noise
    >>> X = rng.normal(size=(2000, 2)); y = np.where(X[:, 0] > 0, "a", "b")
    >>> svc = LinearSVC(epsilon=1.0, data_norm=3.0, classes=["a", "b"], random_state=0)
    >>> svc.fit(X, y).score(X, y) > 0.9
    True
    """

    def __init__(self, *, epsilon: float = 1.0, data_norm: float | None = None,
                 bounds: Any = None, alpha: float | str = "auto", h: float = 0.5,
                 method: str = "objective", fit_intercept: bool = True,
                 intercept_scaling: float | str = "auto", classes: Any = None, tol: float = 1e-6,
                 max_iter: int = 100, delta: float | None = None, n_steps: int | str = "auto",
                 n_hint: int | None = None, random_state: Any = None,
                 accountant: Any = None) -> None:
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.bounds = bounds
        self.alpha = alpha
        self.h = h
        self.method = method
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.classes = classes
        self.tol = tol
        self.max_iter = max_iter
        self.delta = delta
        self.n_steps = n_steps
        self.n_hint = n_hint
        self.random_state = random_state
        self.accountant = accountant

    _sgd_loss = "huber"

    def _curvature(self):
        return 1.0 / (2.0 * check.positive(self.h, "h"))   # checks h

    def _loss(self):
        return _make_huber(check.positive(self.h, "h"))
