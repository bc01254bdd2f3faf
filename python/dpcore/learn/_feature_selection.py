"""Private feature selection: top-k features by the exponential mechanism (one-shot Gumbel
top-k) on a score of sensitivity 1, and PrivateKD's greedy selection (Vinterbo 2012)."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore._release import Cost, release
from dpcore._release.sums import split_budget
from dpcore.curves import BoundedRange, Repeated
from dpcore.learn import _base
from dpcore.selection import ExponentialMechanism

if TYPE_CHECKING:
    from collections.abc import Collection

    from numpy.typing import ArrayLike, NDArray
    from typing_extensions import Self

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["PrivateKD", "SelectKBest", "majority_scores", "within_cell_pairs"]

#: Methods of :class:`SelectKBest`.
SELECT_METHODS = ("exact", "gumbel")


class ExactTopK:
    """Top-k by k peeling rounds of the exact exponential mechanism (monotone scores of
    sensitivity 1): round i selects candidate j among those not yet selected with probability
    exactly proportional to exp(c u_j), c the score scale of
    ``ExponentialMechanism.calibrate(sensitivity=1, epsilon=e, monotonic=True,
    method="exact")`` with e = the largest double such that k e <= epsilon; the winner is then
    excluded (utility -inf). Every draw is exact (:func:`dpcore.exponential` with
    ``method="exact"``: the law holds for the double scores and the double c, in floating
    point), so the ordered output has exactly the law of peeling, which the one-shot Gumbel
    method has only up to rounding. The charge is ``epsilon_effective``: k times a round's
    effective epsilon, rounded up (<= epsilon). Calibrated from public values only.
    """

    def __init__(self, epsilon: float, k: int) -> None:
        self.k = k
        self.round = ExponentialMechanism.calibrate(
            sensitivity=1.0, epsilon=split_budget(epsilon, k), monotonic=True, method="exact")
        self.epsilon_effective = round_up(k * Fraction(self.round.epsilon_effective))
        # k bounded-range rounds (epsilon**2/8-zCDP each, dpcore.curves.BoundedRange)
        self.curve = BoundedRange(self.round.epsilon_effective).repeat(k)

    def select(self, scores: ArrayLike, rng: np.random.Generator) -> NDArray[np.int64]:
        """The k selected indices, in order of selection (``scores`` a float array)."""
        utility = np.array(scores, dtype=np.float64)
        chosen = []
        for _ in range(self.k):
            j = self.round.select(utility, random_state=rng)
            chosen.append(j)
            utility[j] = -np.inf
        return np.array(chosen, dtype=np.int64)

#: Most (feature, bin, class) counts the score needs, checked before anything is counted.
MAX_SCORE_CELLS = 2**28


def bin_codes(X: np.ndarray, lower: np.ndarray, upper: np.ndarray, n_bins: int
              ) -> NDArray[np.int64]:
    """Bin of each value on the public grid: floor((x - l) n_bins / (u - l)), clipped to
    [0, n_bins - 1] (values outside the bounds fall in the end bins)."""
    Xc = np.clip(X, lower, upper)
    codes = np.floor((Xc - lower) / (upper - lower) * n_bins)
    return np.clip(codes, 0, n_bins - 1).astype(np.int64)


def majority_scores(codes: NDArray[np.int64], y_index: NDArray[np.intp], n_bins: int,
                    n_classes: int) -> NDArray[np.int64]:
    """For each feature j, the number of records that the one-feature majority rule on j's bins
    classifies correctly: u_j = sum over bins b of max over classes c of n_jbc (exact
    integers)."""
    n, d = codes.shape
    scores = np.empty(d, dtype=np.int64)
    for j in range(d):
        table = np.bincount(codes[:, j] * n_classes + y_index, minlength=n_bins * n_classes)
        scores[j] = table.reshape(n_bins, n_classes).max(axis=1).sum()
    return scores


class SelectKBest(_base.SharedStateCloneMixin, SelectorMixin, BaseEstimator):
    """Select k features with epsilon-DP: the exponential mechanism on a majority-rule score.

    Each feature j is cut into ``n_bins`` equal bins of its public bounds; its score u_j is the
    number of training records the one-feature rule "predict the majority class of the record's
    bin" gets right, sum over bins b of max over classes c of n_jbc. The k features are chosen
    by k successive exponential mechanisms ("peeling": select feature j with probability
    proportional to exp(epsilon u_j / k), remove it, repeat), each drawn exactly
    (``method="exact"``, the default), or by one-shot Gumbel top-k (:func:`dpcore.top_k`),
    which has the same law up to double rounding. The scores themselves are never released.

    Parameters
    ----------
    k : int, default=10
        Number of features to select, 1 <= k <= n_features.
    epsilon : float, default=1.0
        Privacy parameter of the whole selection, > 0.
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required; values
        outside are put in the end bins (clipped).
    classes : array_like, default=None
        The public label set. None: taken from y with a ``dpcore.PrivacyWarning`` (it reveals
        which labels occur); pass it for the stated guarantee.
    n_bins : int, default=10
        Bins per feature, >= 1 (public). For a categorical feature coded 0..m-1 use bounds
        (-0.5, m - 0.5) and n_bins = m.
    method : {"exact", "gumbel"}, default="exact"
        ``"exact"``: k rounds of the exact exponential mechanism (:class:`ExactTopK`), whose
        law is exactly peeling's in floating point. ``"gumbel"``: one-shot Gumbel top-k
        (:func:`dpcore.top_k`), the same law up to double rounding, one pass.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged once, after every argument has been checked: the effective epsilon
        (<= ``epsilon``) of the top-k selection.

    Attributes
    ----------
    selected_ : ndarray of int64, shape (k,)
        The selected features, in order of selection (released).
    classes_ : ndarray
    n_features_in_ : int

    No ``scores_``: the exact scores are functions of the private data.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for labels in the
    public set. Adding a record raises one count n_jbc of every feature by 1, so every score u_j
    rises by 0 or 1 (removing one lowers every score by 0 or 1): the scores have sensitivity 1
    and are monotone (they all move in the same direction), so each of the k peeling rounds is
    an exponential mechanism exp(c u_j) with c = epsilon / k (the factor 2 is not needed for
    monotone utilities, McSherry-Talwar), and the k rounds compose to epsilon
    (``ExponentialMechanism.epsilon_effective`` <= epsilon, which is what is charged). The scores
    are exact integers. With ``method="exact"`` (the default) every round is the exact
    exponential mechanism, so the guarantee holds in floating point; with ``"gumbel"`` the
    Gumbel draws are double precision (see :func:`dpcore.top_k` for the floating-point
    caveat). Each round is also bounded-range, so the charge carries the curve of k
    bounded-range rounds (k (epsilon/k)**2/8-zCDP, :class:`dpcore.curves.BoundedRange`),
    which the accountants' zCDP, RDP and PLD analyses use.

    References
    ----------
    .. [MT07] F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS 2007.
    .. [DR19] D. Durfee, R. Rogers, "Practical differentially private top-k selection with
       pay-what-you-get composition", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._feature_selection import SelectKBest
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> y = rng.integers(0, 2, 5000)
    >>> X = rng.random((5000, 6))
    >>> X[:, 4] = 0.6 * y + 0.4 * rng.random(5000)       # feature 4 predicts y
    >>> sel = SelectKBest(k=1, epsilon=1.0, bounds=(0, 1), classes=[0, 1], random_state=0)
    >>> sel.fit(X, y).selected_.tolist()
    [4]
    >>> sel.transform(X).shape
    (5000, 1)
    """

    def __init__(self, k: int = 10, *, epsilon: float = 1.0,
                 bounds: tuple[ArrayLike, ArrayLike] | None = None,
                 classes: ArrayLike | None = None, n_bins: int = 10,
                 method: Literal["exact", "gumbel"] = "exact",
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None) -> None:
        self.k = k
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.n_bins = n_bins
        self.method = method
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None
                      ) -> tuple[ExactTopK | ExponentialMechanism, int,
                                 tuple[np.ndarray, np.ndarray], np.ndarray | None]:
        """Every parameter, checked before anything is charged. Returns (mechanism, n_bins,
        (lower, upper), classes); the mechanism is an :class:`ExactTopK` or a calibrated
        Gumbel top-k, both with ``epsilon_effective``."""
        epsilon = _base.check_epsilon(self.epsilon)
        k = check.integer(self.k, "k", minimum=1)
        if n_features is not None and k > n_features:
            raise ValueError(f"k must be <= n_features = {n_features}, got {k}")
        n_bins = check.integer(self.n_bins, "n_bins", minimum=1)
        bounds = _base.bounds_array(self.bounds, "bounds", n_features)
        classes = _base.check_classes(self.classes)
        if n_features is not None and classes is not None:
            _check_cells(n_features, n_bins, classes.size)
        if self.method not in SELECT_METHODS:
            raise ValueError(f"method must be one of {SELECT_METHODS}, got {self.method!r}")
        if self.method == "exact":
            mech = ExactTopK(epsilon, k)
        else:
            mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=epsilon,
                                                  monotonic=True, method="gumbel", k=k)
        _base.check_n(n_samples)
        return mech, n_bins, bounds, classes

    def _n_features_out(self, n_features: int | None) -> int:
        return check.integer(self.k, "k", minimum=1)

    def _cost(self) -> Cost:
        mech = self._check_params()[0]
        return Cost(mech.epsilon_effective, curve=mech.curve)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Select the features (see the class docstring). Returns self."""
        self._check_params()
        X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64)
        _base.check_targets(y)
        d = X.shape[1]
        mech, n_bins, (lower, upper), classes = self._check_params(X.shape[0], d)
        classes = _base.label_set(y, classes, minimum=1)
        _check_cells(d, n_bins, classes.size)
        codes = bin_codes(X, lower, upper, n_bins)
        scores = majority_scores(codes, np.searchsorted(classes, y), n_bins, classes.size)

        def draw(rng: np.random.Generator) -> NDArray[np.int64]:
            if isinstance(mech, ExactTopK):
                return mech.select(scores.astype(np.float64), rng)
            return mech.select_top_k(scores.astype(np.float64), random_state=rng)

        self.selected_ = np.asarray(
            release(draw, cost=Cost(mech.epsilon_effective, curve=mech.curve),
                    accountant=self.accountant,
                    random_state=self.random_state, label=f"SelectKBest({self.method})"),
            dtype=np.int64)
        self.classes_ = classes
        return self

    def _get_support_mask(self) -> NDArray[np.bool_]:
        check_is_fitted(self)
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_] = True
        return mask

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _check_cells(d: int, n_bins: int, n_classes: int) -> None:
    cells = d * n_bins * n_classes
    if cells > MAX_SCORE_CELLS:
        raise ValueError(f"n_features * n_bins * classes = {cells} counts, more than "
                         f"MAX_SCORE_CELLS = {MAX_SCORE_CELLS}")


#: Most records PrivateKD accepts (pair counts stay below 2**62 in int64).
MAX_PAIR_RECORDS = 2**31
_DENSE_CELLS = 2**24


def within_cell_pairs(cells: NDArray[np.int64], y_index: NDArray[np.intp], n_classes: int) -> int:
    """Number of pairs of records with different labels in the same cell (exact integer):
    sum over cells of (m**2 - sum over classes of m_c**2) / 2."""
    n_cells = int(cells.max()) + 1 if cells.size else 0
    if n_cells * n_classes > _DENSE_CELLS:
        cells = np.unique(cells, return_inverse=True)[1].reshape(-1)
        n_cells = int(cells.max()) + 1
    table = np.bincount(cells * n_classes + y_index, minlength=n_cells * n_classes)
    table = table.reshape(n_cells, n_classes).astype(np.int64)
    m = table.sum(axis=1)
    return int((np.sum(m * m) - np.sum(table * table)) // 2)


def pair_gains(cells: NDArray[np.int64], codes: NDArray[np.int64], y_index: NDArray[np.intp],
               n_bins: int, n_classes: int, excluded: Collection[int]) -> NDArray[np.float64]:
    """Gain of each feature a for the partition ``cells`` (compact codes of the features
    selected so far): the number of different-label pairs in a common cell that a separates.
    Excluded features get -inf."""
    base = within_cell_pairs(cells, y_index, n_classes)
    gains = np.full(codes.shape[1], -np.inf)
    for a in range(codes.shape[1]):
        if a not in excluded:
            gains[a] = base - within_cell_pairs(cells * n_bins + codes[:, a], y_index, n_classes)
    return gains


class PrivateKD(_base.SharedStateCloneMixin, SelectorMixin, BaseEstimator):
    """Greedy feature selection with epsilon-DP (PrivateKD, Vinterbo 2012).

    Each feature is cut into ``n_bins`` equal bins of its public bounds (a categorical feature
    coded 0..m-1: bounds (-0.5, m - 0.5), n_bins = m). A set S of features puts two records in
    the same cell when their bins agree on every feature of S; F(S) is the number of pairs of
    records with different labels that S separates (in different cells). Starting from S = {},
    each of k rounds adds the feature a drawn by the exponential mechanism with utility the gain
    F(S + {a}) - F(S) (exact integers), at epsilon / k per round. The gains are never released.

    Parameters
    ----------
    k : int, default=10
        Number of features to select, 1 <= k <= n_features.
    epsilon : float, default=1.0
        Privacy parameter of the whole selection, > 0 (epsilon / k per round).
    bounds : (lower, upper), default=None
        Public per-feature bounds. Required; values outside fall in the end bins.
    classes : array_like, default=None
        The public label set. None: taken from y with a ``dpcore.PrivacyWarning``.
    n_bins : int, default=10
        Bins per feature, 1 <= n_bins <= 2**20 (public).
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once, after every argument has been checked.

    Attributes
    ----------
    selected_ : ndarray of int64, shape (k,)
        The selected features, in order of selection (released).
    classes_ : ndarray
    n_features_in_ : int

    Privacy
    -------
    epsilon-DP under **replace-one** neighbours: the number of records n is public (it sets the
    sensitivity; the guarantee does not extend to add/remove, where n would be private).
    Replacing one record r by r' changes only the pairs involving it: before, between 0 and n - 1
    of them count in a gain, after, between 0 and n - 1, so every gain moves by at most n - 1.
    The utilities are handed to the mechanism as doubles (each rounded within 2**-53 of its
    value, and |gain| <= n**2 / 4), so the sensitivity used is n - 1 + 2**-52 n**2, and, the
    gains not moving in one direction, each round is the exponential mechanism with the factor
    2 (:func:`dpcore.exponential`, method "exact") at epsilon / k (shares rounded down): the k
    rounds compose to epsilon, charged once. Later rounds use S, which the earlier rounds
    released (adaptive composition). Each round is also bounded-range: the charge carries the
    curve of k bounded-range rounds at epsilon / k (:class:`dpcore.curves.BoundedRange`,
    k (epsilon/k)**2/8-zCDP), which the accountants' zCDP, RDP and PLD analyses use.

    References
    ----------
    .. [Vin12] S. A. Vinterbo, "Differentially private projected histograms: construction and
       use for prediction", ECML PKDD 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._feature_selection import PrivateKD
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> y = rng.integers(0, 2, 4000)
    >>> X = rng.integers(0, 3, (4000, 8)).astype(float)
    >>> X[:, 2] = np.where(rng.random(4000) < 0.9, y, 2)   # feature 2 separates the labels
    >>> kd = PrivateKD(k=1, epsilon=1.0, bounds=(-0.5, 2.5), classes=[0, 1], n_bins=3,
    ...                random_state=0).fit(X, y)
    >>> kd.selected_.tolist()
    [2]
    """

    def __init__(self, k: int = 10, *, epsilon: float = 1.0,
                 bounds: tuple[ArrayLike, ArrayLike] | None = None,
                 classes: ArrayLike | None = None, n_bins: int = 10,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None) -> None:
        self.k = k
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.n_bins = n_bins
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None
                      ) -> tuple[float, int, int, tuple[np.ndarray, np.ndarray],
                                 np.ndarray | None, ExponentialMechanism | None]:
        """Every parameter, checked before anything is charged. Returns (epsilon, k, n_bins,
        (lower, upper), classes, mechanism or None)."""
        epsilon = _base.check_epsilon(self.epsilon)
        k = check.integer(self.k, "k", minimum=1)
        if n_features is not None and k > n_features:
            raise ValueError(f"k must be <= n_features = {n_features}, got {k}")
        n_bins = check.integer(self.n_bins, "n_bins", minimum=1, maximum=2**20)
        bounds = _base.bounds_array(self.bounds, "bounds", n_features)
        classes = _base.check_classes(self.classes)
        mech: ExponentialMechanism | None = None
        if n_samples is not None:   # n is public under replace-one neighbours
            if n_samples > MAX_PAIR_RECORDS:
                raise ValueError("PrivateKD supports at most 2**31 records")
            n = float(n_samples)
            sensitivity = max(n - 1.0, 0.0) + 2.0**-52 * n * n
            mech = ExponentialMechanism.calibrate(sensitivity=sensitivity,
                                                  epsilon=split_budget(epsilon, k),
                                                  method="exact")
        return epsilon, k, n_bins, bounds, classes, mech

    def _n_features_out(self, n_features: int | None) -> int:
        return check.integer(self.k, "k", minimum=1)

    def _cost(self) -> Cost:
        epsilon, k = self._check_params()[:2]
        return Cost(epsilon, curve=_rounds_curve(epsilon, k))

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Select the features (see the class docstring). Returns self."""
        self._check_params()
        X, y = _base.validate_data(self, X, y, reset=True, dtype=np.float64)
        _base.check_targets(y)
        n, d = X.shape
        epsilon, k, n_bins, (lower, upper), classes, mech = self._check_params(n, d)
        classes = _base.label_set(y, classes, minimum=1)
        codes = bin_codes(X, lower, upper, n_bins)
        y_index = np.searchsorted(classes, y)
        n_classes = classes.size
        assert mech is not None   # calibrated: n_samples was given

        def draw(rng: np.random.Generator) -> NDArray[np.int64]:
            cells = np.zeros(n, dtype=np.int64)
            chosen: list[int] = []
            for _ in range(k):
                gains = pair_gains(cells, codes, y_index, n_bins, n_classes, chosen)
                a = int(mech.select(gains, random_state=rng))
                chosen.append(a)
                cells = np.unique(cells * n_bins + codes[:, a], return_inverse=True)[1]
                cells = cells.reshape(-1).astype(np.int64)
            return np.array(chosen, dtype=np.int64)

        self.selected_ = release(draw, cost=Cost(epsilon, curve=_rounds_curve(epsilon, k)),
                                 accountant=self.accountant, random_state=self.random_state,
                                 label="PrivateKD")
        self.classes_ = classes
        return self

    def _get_support_mask(self) -> NDArray[np.bool_]:
        check_is_fitted(self)
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_] = True
        return mask

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _rounds_curve(epsilon: float, k: int) -> Repeated:
    """k exponential mechanisms of at most split_budget(epsilon, k) each (whatever n calibrates
    their sensitivity to): k bounded-range rounds, known before the data."""
    return BoundedRange(split_budget(epsilon, k)).repeat(k)
