"""Private Gaussian naive Bayes from noisy class counts, sums and sums of squares."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore.learn import _base
from dpcore._release import Cost, release
from dpcore._release.sums import IntegerNoise
from dpcore._learn_sums import category_counts as kernel_category_counts
from dpcore._learn_sums import class_feature_sums
from dpcore.learn._dask import aligned_chunks, class_index, is_dask_collection, sum_chunks

__all__ = ["CategoricalNB", "GaussianNB", "gaussian_nb_budget", "categorical_nb_chunk",
           "category_counts"]


def gaussian_nb_budget(epsilon: float, d: int) -> tuple[float, float, float]:
    """(epsilon_counts, epsilon_sums, epsilon_squares) of :class:`GaussianNB` with d features.

    A record moves the class counts by 1 and the sums and sums of squares by up to d each (L1),
    so discrete Laplace at epsilon_i has variance about 2 (sensitivity / epsilon_i)^2 per value.
    The noisy mean of feature k in a class of n records is off by about (dS_k - m_k dn) / n,
    with |m_k| <= 1 (and the variance likewise through dQ_k and dn): summed over the d
    features, the squared error is at most 2 d^3 / epsilon_S^2 + 2 d / epsilon_n^2 for the
    means and as much for the variances. Minimising sum_i a_i / epsilon_i^2 subject to
    sum_i epsilon_i = epsilon gives epsilon_i proportional to a_i^(1/3): d : d : (2 d)^(1/3)
    for the sums, the squares and the counts (the counts enter both). An equal split in
    thirds spends a third of epsilon on k numbers of sensitivity 1.

    >>> [round(e, 4) for e in gaussian_nb_budget(1.0, 30)]
    [0.0613, 0.4694, 0.4694]
    """
    epsilon = check.epsilon(epsilon)
    d = check.integer(d, "d", minimum=1)
    eps_sums = epsilon * d / (2.0 * d + (2.0 * d) ** (1.0 / 3.0))
    eps_counts = epsilon - 2.0 * eps_sums
    while math.fsum((eps_counts, eps_sums, eps_sums)) > epsilon:   # the exact sum, not rounded
        eps_counts = math.nextafter(eps_counts, 0.0)
    return eps_counts, eps_sums, eps_sums


class GaussianNBSums:
    """The noisy class counts, sums and sums of squares of :class:`GaussianNB`, exact on a grid.

    Every record's rescaled features z in [-1, 1]^d are rounded to the power-of-two ``grid``
    g (:func:`dpcore.learn._base.laplace_grid` of (d, epsilon_sums)) as integers rint(z / g)
    and rint(z^2 / g), which lie in [-1/g, 1/g] and [0, 1/g] (1/g is an integer); the
    integers are summed per class exactly (int64, n <= 2^36 and 1/g <= 2^23 leave no
    overflow), so one record moves the sums of its class by at most D = d / g in L1 norm,
    exactly, and the sums of squares likewise. Counts (sensitivity 1), sums and squares get
    exact discrete Laplace noise (:class:`dpcore._release.sums.IntegerNoise`) at the three
    shares of :func:`gaussian_nb_budget`; the released sums are (integer + noise) * g, i.e.
    multiples of g. Calibrated from public values (d, the split) before anything is charged.
    """

    def __init__(self, epsilon: float, d: int) -> None:
        self.split = gaussian_nb_budget(epsilon, d)
        eps_counts, eps_sums, eps_squares = self.split
        # at most 1, so that 1/g is an integer (a power of two)
        self.grid = min(_base.laplace_grid(float(d), min(eps_sums, eps_squares)), 1.0)
        units = round(1.0 / self.grid)
        self.counts = IntegerNoise.calibrate("laplace", 1, eps_counts, 0.0)
        self.sums = IntegerNoise.calibrate("laplace", d * units, eps_sums, 0.0)
        self.squares = IntegerNoise.calibrate("laplace", d * units, eps_squares, 0.0)

    def exact(self, Z: np.ndarray, idx: np.ndarray, k: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(counts, sums, squares) as int64 arrays of shapes (k,), (k, d), (k, d): the exact
        integers the noise is added to (never released), of rescaled features Z in [-1, 1]."""
        d = Z.shape[1]
        return self.exact_rows(Z, idx, k, np.full(d, -1.0), np.full(d, 1.0))[0]

    def exact_rows(self, X: np.ndarray, idx: np.ndarray, k: int, lower: np.ndarray,
                   upper: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], bool]:
        """:meth:`exact` of the raw rows X, rescaled on the fly (clipped to [lower, upper],
        mapped to [-1, 1], clipped again: the division can round an endpoint to 1 + 2^-52,
        which would break the sensitivities (1 per |z| and z^2) by an ulp), in one pass
        (``dpcore._learn_sums``); and whether X holds a non-finite value."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        d = X.shape[1]
        lower, upper = (np.ascontiguousarray(np.broadcast_to(b, (d,)), dtype=np.float64)
                        for b in (lower, upper))
        counts = np.zeros(k, dtype=np.int64)
        sums = np.zeros((k, d), dtype=np.int64)
        squares = np.zeros((k, d), dtype=np.int64)
        bad = class_feature_sums(X, np.ascontiguousarray(idx, dtype=np.int64), lower, upper,
                                 (lower + upper) / 2.0, (upper - lower) / 2.0,
                                 round(1.0 / self.grid), counts, sums, squares)
        return (counts, sums, squares), bool(bad)

    def release(self, exact: tuple[np.ndarray, np.ndarray, np.ndarray], rng: Any
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Noisy (counts, sums, squares) as floats; sums and squares multiples of ``grid``."""
        counts, sums, squares = exact
        noisy_counts = counts + self.counts.draw(counts.size, rng)
        noisy_sums = sums + self.sums.draw(sums.size, rng).reshape(sums.shape)
        noisy_squares = squares + self.squares.draw(squares.size, rng).reshape(squares.shape)
        return (noisy_counts.astype(float), noisy_sums.astype(float) * self.grid,
                noisy_squares.astype(float) * self.grid)

    @property
    def squares_noise_sd(self) -> float:
        """Standard deviation of the noise of one released sum of squares (public)."""
        return math.sqrt(self.squares.variance) * self.grid

    @property
    def epsilon_effective(self) -> float:
        """The sum of the three shares' effective epsilons (each <= its share)."""
        return math.fsum(part.epsilon_effective for part in (self.counts, self.sums, self.squares))


def gaussian_nb_chunk(X: Any, y: Any, lower: np.ndarray, upper: np.ndarray, classes: np.ndarray,
                      plan: GaussianNBSums) -> tuple[Any, bool, bool]:
    """On a Dask worker: a chunk's exact integer (counts, sums, squares) of
    :meth:`GaussianNBSums.exact_rows`, whether it holds a non-finite value, and whether a label
    is outside ``classes`` (the flags are checked before the charge)."""
    idx, bad_labels = class_index(y, classes)
    exact, bad_values = plan.exact_rows(X, idx, classes.size, lower, upper)
    return exact, bad_values, bad_labels


#: ``var_floor="auto"``: each class's variances are floored at this multiple of the standard
#: deviation of the noise of a released sum of squares over the noisy class count (the noise
#: level of Q / n), and at least :data:`MIN_VAR_FLOOR`. A variance estimated below its own
#: noise level made a class's density needle-sharp at a noisy mean (iris at epsilon 5: 0.61).
#: Chosen on the development sets (`bench/dev_suite.py nb-floor --seeds 10`): 0.5, 1, 2 and 4 all
#: gained over the fixed floor 1e-3 (mean accuracy +0.011 to +0.064 by preprocessing); 0.5 the
#: most (+0.064 min-max, +0.047 standardised, +0.025 unit rows).
NOISE_VAR_FLOOR = 0.5
#: The smallest variance of ``var_floor="auto"``, in the [-1, 1] units (the earlier fixed floor).
MIN_VAR_FLOOR = 1e-3


class _NaiveBayes(_base.SharedStateCloneMixin, ClassifierMixin, BaseEstimator):
    """Prediction from ``_joint_log_likelihood`` (log prior + log likelihood per class)."""

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels."""
        jll = self._joint_log_likelihood(X)   # first: it raises NotFittedError before fit
        return self.classes_[np.argmax(jll, axis=1)]

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log class probabilities."""
        jll = self._joint_log_likelihood(X)
        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities."""
        return np.exp(self.predict_log_proba(X))


class GaussianNB(_NaiveBayes):
    """Gaussian naive Bayes with epsilon-DP (Vaidya, Shafiq, Basu, Hong 2013).

    Each feature k is clipped to the public ``bounds`` [l_k, u_k] and rescaled to
    z = (x - m_k) / h_k in [-1, 1] (m_k the midpoint, h_k the half-width). For every class c the
    model releases, with exact discrete Laplace noise (:func:`dpcore.laplace`), the count n_c,
    the sums S_ck = sum z_k and the sums of squares Q_ck = sum z_k^2 over the records of class c.
    Then mean = S / n, var = Q / n - mean^2 (clamped to [var_floor, 1]; by default the floor is
    the variance estimate's own noise level), priors from the noisy counts, all by
    post-processing; prediction is the usual Gaussian naive Bayes rule.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0. Split between the counts, the sums and the sums of squares as
        (2d)^(1/3) : d : d (:func:`gaussian_nb_budget`; 6% for the counts at d = 30), which
        minimises a bound on the squared error of the means and variances.
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required.
    classes : array_like, default=None
        Public label set, at least 2 labels. None: taken from y, which reveals the labels
        present (pass it to avoid that; see Privacy). Labels outside it raise a ValueError
        (which does not quote them).
    priors : array_like, default=None
        Public class priors; None: from the noisy counts.
    var_floor : float or "auto", default="auto"
        Smallest variance, in the [-1, 1] units (a fraction of the squared half-width), > 0.
        ``"auto"``: per class, :data:`NOISE_VAR_FLOOR` times the standard deviation of the
        noise of one released sum of squares divided by the class's noisy count (the noise
        level of the variance estimate; public scale and released count, so post-processing),
        and at least :data:`MIN_VAR_FLOOR` = 1e-3.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once (the three releases composed), after every argument has been
        checked and before anything is drawn.

    Attributes
    ----------
    classes_, class_count_ (noisy, clamped >= 1), class_prior_, theta_ (means), var_
    epsilon_split_ : tuple of float
        (epsilon_counts, epsilon_sums, epsilon_squares), public.
    grid_ : float
        The power-of-two grid of the released sums and sums of squares (in the [-1, 1]
        units), public.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for features clipped
    to the public bounds and labels in the public set. One record adds 1 to one class count
    (L1 sensitivity 1), adds z_k in [-1, 1] to the d sums of its class (L1 sensitivity d) and
    z_k^2 in [0, 1] to its d sums of squares (L1 sensitivity d). Exact in floating point:
    each record's z_k and z_k^2 are rounded to a power-of-two grid g (``grid_``) as integers
    of absolute value <= 1/g and summed exactly in integers, so the sensitivities d / g grid
    units hold exactly whatever the rounding; the three integer vectors get exact discrete
    Laplace noise at epsilon_counts + epsilon_sums + epsilon_squares <= epsilon
    (:func:`gaussian_nb_budget`), so the fit is epsilon-DP by sequential composition; the
    released sums are multiples of g, and the rest is post-processing. The label
    set must be public: with ``classes=None`` it is taken from y without noise (stored in
    ``classes_``), which the guarantee does not cover (fit warns with
    ``dpcore.PrivacyWarning``); pass ``classes`` for the stated guarantee. On a Dask
    collection (``classes`` required) the same integers are computed per chunk on the workers
    and added exactly (:func:`dpcore.learn._dask.sum_chunks`), and the noise is drawn once in
    the calling process: the same law, and for the same seed the same model, as in memory.

    References
    ----------
    .. [VSBH13] J. Vaidya, B. Shafiq, A. Basu, Y. Hong, "Differentially private naive Bayes
       classification", WI-IAT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._naive_bayes import GaussianNB
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = np.vstack([rng.normal(-1, 1, (2000, 2)), rng.normal(1, 1, (2000, 2))])
    >>> y = np.repeat([0, 1], 2000)
    >>> nb = GaussianNB(epsilon=1.0, bounds=(-4, 4), classes=[0, 1], random_state=0).fit(X, y)
    >>> nb.score(X, y) > 0.85
    True
    """

    def __init__(self, *, epsilon: float = 1.0, bounds: Any = None, classes: Any = None,
                 priors: Any = None, var_floor: float | str = "auto", random_state: Any = None,
                 accountant: Any = None) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.priors = priors
        self.var_floor = var_floor
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged (also for each candidate of a
        grid search). Returns (epsilon, var_floor, (lower, upper), classes, priors)."""
        epsilon = _base.check_epsilon(self.epsilon)
        if isinstance(self.var_floor, str):
            if self.var_floor != "auto":
                raise ValueError(f"var_floor must be a positive number or 'auto', got "
                                 f"{self.var_floor!r}")
            var_floor = "auto"
        else:
            var_floor = check.positive(self.var_floor, "var_floor")
        if self.bounds is None:
            raise ValueError("bounds is required: give public feature bounds (lower, upper); "
                             "they are never inferred from the data")
        bounds = _base.bounds_array(self.bounds, "bounds", n_features)
        classes = _base.check_classes(self.classes)
        priors = None
        if self.priors is not None:
            priors = check.finite_array(self.priors, "priors")
            k = None if classes is None else classes.size
            if (priors.ndim != 1 or (k is not None and priors.shape != (k,)) or np.any(priors < 0)
                    or not np.isclose(priors.sum(), 1.0)):
                what = "numbers" if k is None else f"{k} numbers (one per class)"
                raise ValueError(f"priors must be non-negative {what} summing to 1, "
                                 f"got {self.priors!r}")
        _base.check_n(n_samples)
        return epsilon, var_floor, bounds, classes, priors

    def _cost(self):
        return Cost(self._check_params()[0])

    def fit(self, X: Any, y: Any) -> Any:
        """Fit the private model (see the class docstring). Returns self.

        X and y may be Dask collections (array, dataframe, series; ``classes`` required): the
        integer counts and sums are computed per chunk on the workers and added exactly, the
        noise drawn once here (the same model as in memory for the same seed)."""
        self._check_params()
        if is_dask_collection(X) or is_dask_collection(y):
            Xd, yd, _ = aligned_chunks(X, y)
            n, d = (int(v) for v in Xd.shape)
            epsilon, var_floor, (lower, upper), classes, priors = self._check_params(n, d)
            if classes is None:
                raise ValueError("classes is required to fit a Dask collection: give the "
                                 "public label set")
            plan = GaussianNBSums(epsilon, d)
            exact, bad_values, bad_labels = sum_chunks(Xd, yd, gaussian_nb_chunk,
                                                       (lower, upper, classes, plan))
            if bad_values:
                raise ValueError("X must not contain NaN or infinite values")
            if bad_labels:
                raise ValueError("y contains labels outside classes")
            self.n_features_in_ = d
        else:
            X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64)
            _base.check_targets(y)
            d = X.shape[1]
            epsilon, var_floor, (lower, upper), classes, priors = self._check_params(X.shape[0],
                                                                                     d)
            classes = _base.label_set(y, classes, minimum=1)
            # calibrated before the charge (a share too small for the sampler raises first)
            plan = GaussianNBSums(epsilon, d)
            exact, _ = plan.exact_rows(X, np.searchsorted(classes, y), classes.size, lower,
                                       upper)
        k = classes.size
        if priors is not None and priors.shape != (k,):   # classes taken from y: no count quoted
            raise ValueError("priors must have one entry per class")
        mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0

        def draw(rng):  # one generator for the three draws, charged once as a whole
            return plan.release(exact, rng)

        counts_n, sums_n, squares_n = release(
            draw, cost=Cost(epsilon), accountant=self.accountant, random_state=self.random_state,
            label="GaussianNB",
        )
        n_c = np.maximum(counts_n, 1.0)
        mean = np.clip(sums_n / n_c[:, None], -1.0, 1.0)
        if var_floor == "auto":   # the variance estimate's own noise level: post-processing
            floor = np.maximum(MIN_VAR_FLOOR, NOISE_VAR_FLOOR * plan.squares_noise_sd / n_c)
            var = np.clip(squares_n / n_c[:, None] - mean ** 2, floor[:, None], 1.0)
        else:
            var = np.clip(squares_n / n_c[:, None] - mean ** 2, var_floor, 1.0)
        self.classes_ = classes
        self.class_count_ = n_c
        self.class_prior_ = priors if priors is not None else n_c / n_c.sum()
        self.theta_ = mid + half * mean
        self.var_ = var * half ** 2
        self.epsilon_split_ = plan.split
        self.grid_ = plan.grid
        return self

    def _joint_log_likelihood(self, X):
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.class_prior_)
        ll = -0.5 * np.sum(np.log(2.0 * np.pi * self.var_), axis=1)
        diff = X[:, None, :] - self.theta_[None, :, :]
        ll = ll[None, :] - 0.5 * np.sum(diff ** 2 / self.var_[None, :, :], axis=2)
        return ll + log_prior[None, :]



#: Largest number of released counts (classes times the categories of all features, plus one
#: per class), checked before anything is counted or charged.
MAX_CATEGORICAL_CELLS = 2**26


class CategoricalNB(_NaiveBayes):
    """Categorical naive Bayes with epsilon-DP: noisy counts, consistent smoothing.

    For every class c the model releases, with exact discrete Laplace noise on the integer
    counts, the class count n_c and, for every feature j, the counts n_cjv of each public
    category v. Post-processing then makes the counts consistent and smooth: the class count is
    the inverse-variance weighted mean of its d + 1 unbiased noisy estimates (n_c and the row
    sums of the d feature tables, whose noise variances are 1 and m_j times the cell's), the
    cell counts are clamped at 0 and smoothed with ``alpha`` (Laplace smoothing), and the
    conditional probabilities are P(v | c) = (max(n_cjv, 0) + alpha) / (sum_v' max(n_cjv', 0)
    + alpha m_j). Prediction is the usual naive Bayes rule.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter of the whole fit, > 0.
    categories : list of array_like
        The public categories of each feature (one 1-d array per column of X, values distinct).
        Required: never inferred from the data. A value of X outside its feature's categories
        raises a ValueError (which does not quote it).
    classes : array_like, default=None
        The public label set. None: taken from y with a ``dpcore.PrivacyWarning`` (it reveals
        which labels occur); pass it for the stated guarantee.
    alpha : float, default=1.0
        Additive (Laplace) smoothing of the clamped noisy counts, > 0 (public).
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once, after every argument has been checked.

    Attributes
    ----------
    classes_ : ndarray
    categories_ : list of ndarray
        The public categories, sorted.
    class_count_ : ndarray, shape (k,)
        The released (noisy) class counts, integers.
    category_count_ : list of ndarray, shape (k, m_j)
        The released (noisy) counts of each feature's categories per class, integers.
    class_log_prior_ : ndarray, shape (k,)
    feature_log_prob_ : list of ndarray, shape (k, m_j)
        log P(v | c) after consistency and smoothing.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for values in the
    public categories and labels in the public set. One record adds 1 to its class count and 1
    to one cell of each of the d feature tables: the L1 sensitivity of all released counts is
    d + 1, and every count (empty ones included) gets independent exact discrete Laplace noise
    of scale (d + 1) / epsilon rounded up, so the released integers have exactly the law the
    proof assumes. Everything after the counts is post-processing. With ``classes=None`` the
    label set is read from y without noise, which the guarantee does not cover (fit warns with
    ``dpcore.PrivacyWarning``). On a Dask collection (``classes`` required) the same integer
    counts are computed per chunk on the workers and added exactly
    (:func:`dpcore.learn._dask.sum_chunks`; only the counts and two validity flags per chunk
    leave them), and the noise is drawn once in the calling process: the same law, and for the
    same seed the same model, as in memory. Values and labels are checked before the charge.

    References
    ----------
    .. [VSBH13] J. Vaidya, B. Shafiq, A. Basu, Y. Hong, "Differentially private naive Bayes
       classification", WI-IAT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import CategoricalNB
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> y = rng.integers(0, 2, 4000)
    >>> X = np.column_stack([np.where(rng.random(4000) < 0.8, y, 1 - y), rng.integers(0, 3, 4000)])
    >>> nb = CategoricalNB(epsilon=1.0, categories=[[0, 1], [0, 1, 2]], classes=[0, 1],
    ...                    random_state=0).fit(X, y)
    >>> bool(nb.score(X, y) > 0.75)
    True
    """

    def __init__(self, *, epsilon: float = 1.0, categories: Any = None, classes: Any = None,
                 alpha: float = 1.0, random_state: Any = None, accountant: Any = None) -> None:
        self.epsilon = epsilon
        self.categories = categories
        self.classes = classes
        self.alpha = alpha
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged. Returns (epsilon, alpha,
        categories, classes)."""
        epsilon = _base.check_epsilon(self.epsilon)
        alpha = check.positive(self.alpha, "alpha")
        if self.categories is None:
            raise ValueError("categories is required: give the public categories of each "
                             "feature; they are never inferred from the data")
        if isinstance(self.categories, (str, bytes)):
            raise TypeError("categories must be a list of arrays, one per feature")
        categories = []
        for j, cats in enumerate(self.categories):
            cats = np.asarray(cats)
            if cats.ndim != 1 or cats.size < 1:
                raise ValueError(f"categories[{j}] must be a non-empty 1-d array")
            ordered = np.unique(cats)
            if ordered.size != cats.size:
                raise ValueError(f"categories[{j}] must hold distinct values")
            categories.append(ordered)
        if not categories:
            raise ValueError("categories must give at least one feature")
        if n_features is not None and len(categories) != n_features:
            raise ValueError(f"categories must have one entry per feature of X "
                             f"({n_features}), got {len(categories)}")
        classes = _base.check_classes(self.classes)
        if classes is not None:
            _check_cells(classes.size, categories)
        _base.check_n(n_samples)
        return epsilon, alpha, categories, classes

    def _cost(self):
        return Cost(self._check_params()[0])

    def fit(self, X: Any, y: Any) -> Any:
        """Fit the private model (see the class docstring). Returns self.

        X and y may be Dask collections (array, dataframe, series; ``classes`` required): the
        integer counts are computed per chunk on the workers and added exactly, the noise drawn
        once here (the same model as in memory for the same seed)."""
        self._check_params()
        if is_dask_collection(X) or is_dask_collection(y):
            Xd, yd, _ = aligned_chunks(X, y)
            epsilon, alpha, categories, classes = self._check_params(*map(int, Xd.shape))
            if classes is None:
                raise ValueError("classes is required to fit a Dask collection: give the "
                                 "public label set")
            if int(Xd.shape[0]) < 1:
                raise ValueError("X has no rows")
            (exact,), bad_values, bad_labels = sum_chunks(Xd, yd, categorical_nb_chunk,
                                                          (categories, classes))
            if bad_values:
                raise ValueError("X contains values outside categories")
            if bad_labels:
                raise ValueError("y contains labels outside classes")
            self.n_features_in_ = int(Xd.shape[1])
        else:
            X, y = _base.validate_data(self, X, y, reset=True, dtype=None)
            _base.check_targets(y)
            epsilon, alpha, categories, classes = self._check_params(X.shape[0], X.shape[1])
            classes = _base.label_set(y, classes, minimum=1)
            _check_cells(classes.size, categories)
            exact, bad = category_counts(X, np.searchsorted(classes, y), classes.size,
                                         categories)
            if bad is not None:
                raise ValueError(f"X[:, {bad}] contains values outside categories[{bad}]")
        k, d = classes.size, len(categories)
        noise = IntegerNoise.calibrate("laplace", d + 1, epsilon, 0.0)

        def draw(rng):   # every count, empty cells included, in one pass of the generator
            return exact + noise.draw(exact.size, rng)

        noisy = release(draw, cost=Cost(epsilon), accountant=self.accountant,
                        random_state=self.random_state, label="CategoricalNB")
        self.classes_ = classes
        self.categories_ = categories
        self.class_count_ = noisy[:k]
        self.category_count_ = []
        start = k
        for cats in categories:
            self.category_count_.append(noisy[start:start + k * cats.size].reshape(k, cats.size))
            start += k * cats.size
        self._smooth(alpha)
        return self

    def _smooth(self, alpha):
        """Consistency and smoothing (post-processing of the released counts)."""
        # inverse-variance weights of the d + 1 unbiased estimates of each class count
        weights = [1.0] + [1.0 / t.shape[1] for t in self.category_count_]
        estimates = [self.class_count_] + [t.sum(axis=1) for t in self.category_count_]
        n_c = sum(w * e for w, e in zip(weights, estimates)) / sum(weights)
        n_c = np.maximum(n_c, 1.0)
        self.class_log_prior_ = np.log(n_c / n_c.sum())
        self.feature_log_prob_ = []
        for table in self.category_count_:
            smoothed = np.maximum(table, 0) + alpha
            self.feature_log_prob_.append(np.log(smoothed / smoothed.sum(axis=1, keepdims=True)))

    def _joint_log_likelihood(self, X):
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=None)
        codes = _codes(X, self.categories_)
        jll = np.tile(self.class_log_prior_, (X.shape[0], 1))
        for j, logp in enumerate(self.feature_log_prob_):
            jll += logp[:, codes[:, j]].T
        return jll



#: Rows per block of the categorical codes and counts: a block of a C-ordered X stays in cache
#: while its columns are read one after the other (a whole column read misses on every value).
CATEGORY_BLOCK = 4096


#: Integer categories spanning at most this many values are coded by a lookup table (a take per
#: value) rather than a binary search.
MAX_TABLE_SPAN = 2**16


def _coders(categories):
    """Per feature: (lowest category, table from value - lowest to code, -1 where the value is
    not a category) for integer categories of a small span, else None (binary search)."""
    coders = []
    for cats in categories:
        coder = None
        if cats.dtype.kind in "iu" and int(cats[-1]) < 2**63 \
                and int(cats[-1]) - int(cats[0]) < MAX_TABLE_SPAN:
            table = np.full(int(cats[-1]) - int(cats[0]) + 1, -1, dtype=np.int32)
            table[cats.astype(np.int64) - int(cats[0])] = np.arange(cats.size)
            coder = (int(cats[0]), table)
        coders.append(coder)
    return coders


def _block_codes(block, categories, coders):
    """(each value's index in its feature's categories (int64), the first feature with a value
    outside its categories or None) of a block of rows."""
    codes = np.empty(block.shape, dtype=np.int64)
    for j, (cats, coder) in enumerate(zip(categories, coders)):
        column = block[:, j]
        try:
            if coder is not None and column.dtype.kind in "iu":
                with np.errstate(over="ignore"):   # a wrapped value fails the check below
                    code = coder[1].take(column.astype(np.int64) - coder[0], mode="clip")
            else:
                code = np.minimum(np.searchsorted(cats, column), cats.size - 1)
            inside = cats.take(code) == column
        except TypeError:   # values not comparable with the categories
            return codes, j
        if not np.all(inside):
            return codes, j
        codes[:, j] = code
    return codes, None


def _blocks(n, rows):
    return [(start, min(start + rows, n)) for start in range(0, n, rows)]


def category_counts(X: np.ndarray, idx: np.ndarray, k: int, categories: list
                    ) -> tuple[np.ndarray, int | None]:
    """The exact counts CategoricalNB releases, as one int64 vector: the k class counts, then
    each feature's k x m_j table (row-major) of (class, category) counts, of the records X
    (values in their features' categories) with class indices ``idx``; and the first feature
    with a value outside its categories (None if there is none; the counts are then zero).
    One pass over blocks of rows (at least CATEGORY_BLOCK, more when the tables are larger
    than a block's values, so that a block's counts cost no more than its values)."""
    sizes = np.array([cats.size for cats in categories], dtype=np.int64)
    offsets = k + k * np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    total = int(k * (1 + sizes.sum()))
    counts = np.zeros(total, dtype=np.int64)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    coders = _coders(categories)
    if X.dtype.kind in "iu" and X.dtype.itemsize <= (8 if X.dtype.kind == "i" else 4) \
            and all(coder is not None for coder in coders):
        # integers (int64 without loss) and a table per feature: one compiled pass
        low = np.array([coder[0] for coder in coders], dtype=np.int64)
        span = np.array([coder[1].size for coder in coders], dtype=np.int64)
        bad = kernel_category_counts(
            np.ascontiguousarray(X, dtype=np.int64), idx, low, span,
            np.concatenate([[0], np.cumsum(span)[:-1]]).astype(np.int64),
            np.concatenate([coder[1] for coder in coders]), sizes, offsets, counts)
        if bad >= 0:
            return np.zeros(total, dtype=np.int64), int(bad)
        return counts, None
    rows = max(CATEGORY_BLOCK, -(-total // max(1, len(categories))))
    for start, stop in _blocks(X.shape[0], rows):
        codes, bad = _block_codes(X[start:stop], categories, coders)
        if bad is not None:
            return np.zeros(total, dtype=np.int64), bad
        labels = idx[start:stop]
        cells = offsets + labels[:, None] * sizes + codes
        counts += np.bincount(cells.ravel(), minlength=total)
        counts[:k] += np.bincount(labels, minlength=k)
    return counts, None


def categorical_nb_chunk(X: Any, y: Any, categories: list, classes: np.ndarray
                         ) -> tuple[Any, bool, bool]:
    """On a Dask worker: a chunk's exact counts (:func:`category_counts`, as a 1-tuple),
    whether a value is outside its feature's categories (or X is not 2-d with one column per
    feature), and whether a label is outside ``classes``; the flags are checked before the
    charge and never quote a value."""
    X = np.asarray(X)
    k = classes.size
    try:
        idx, bad_labels = class_index(y, classes)
    except TypeError:   # labels not comparable with the classes
        idx, bad_labels = np.zeros(np.shape(y)[0], dtype=np.int32), True
    if X.ndim != 2 or X.shape[1] != len(categories) or X.shape[0] != idx.size:
        return (np.zeros(k * (1 + sum(c.size for c in categories)), dtype=np.int64),), True, \
            bad_labels
    counts, bad = category_counts(X, idx, k, categories)
    return (counts,), bad is not None, bad_labels


def _check_cells(k, categories):
    cells = k * (1 + sum(c.size for c in categories))
    if cells > MAX_CATEGORICAL_CELLS:
        raise ValueError(f"classes and categories give {cells} counts, more than "
                         f"MAX_CATEGORICAL_CELLS = {MAX_CATEGORICAL_CELLS}")


def _codes(X, categories):
    """The index of each value of X in its feature's categories; a value outside them raises
    (quoting neither the value nor its row)."""
    codes = np.empty(X.shape, dtype=np.int64)
    coders = _coders(categories)
    for start, stop in _blocks(X.shape[0], CATEGORY_BLOCK):
        codes[start:stop], bad = _block_codes(X[start:stop], categories, coders)
        if bad is not None:
            raise ValueError(f"X[:, {bad}] contains values outside categories[{bad}]")
    return codes
