"""Private hyper-parameter selection: a split of the records with the exponential mechanism
(Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 3), or random stopping over repeated private
trials (Liu-Talwar 2019; Papernot-Steinke 2022)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._progress import Progress
from dpcore._release import Cost
from dpcore.calibration import zcdp_rho_for
from dpcore.curves import DEFAULT_ORDERS, BoundedRange, PrivacyCurve, ZCDP
from dpcore.learn import _base
from dpcore.mechanisms import discrete_gaussian, discrete_laplace
from dpcore.tuning import select_candidate, validation_errors

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from numpy.typing import ArrayLike, NDArray
    from typing_extensions import Self

    from dpcore.accounting import Accountant, AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["PrivateGridSearch", "SELECTIONS", "RANDOM_STOPPING_FACTOR", "RandomStopping",
           "random_stopping_rho"]

SELECTIONS = ("exponential", "random_stopping")
#: Random stopping with a geometric number of trials costs this many times a trial's epsilon
#: (Liu-Talwar 2019, Theorem 3.4; Papernot-Steinke 2022, Theorem 2 with eta = 1).
RANDOM_STOPPING_FACTOR = 3
#: Share of the records held out to score the trials of random stopping (public).
VALIDATION_SHARE = Fraction(1, 5)


@dataclass(frozen=True)
class RandomStopping(PrivacyCurve):
    """The RDP curve of random stopping: the best of K runs of a ``trial`` mechanism, K
    geometric with mean ``n_trials`` (P(K = k) = g (1 - g)**(k - 1), g = 1 / n_trials).

    Papernot-Steinke 2022, Theorem 2, with the truncated negative binomial's eta = 1 (the
    geometric law, E[K] = 1 / g): if the trial is (lambda, e(lambda))-RDP at every order, the
    best of K runs is (lambda, e')-RDP for every lambda > 1 and every lambda_hat >= 1, with

        e' = e(lambda) + 2 (1 - 1/lambda_hat) e(lambda_hat) + 2 log(n_trials) / lambda_hat
             + log(n_trials) / (lambda - 1).

    :meth:`rdp` takes, at each order lambda, the smallest e' over lambda_hat in
    {1} and :data:`dpcore.curves.DEFAULT_ORDERS` (each lambda_hat gives a valid bound, so the
    minimum is one too); at lambda_hat = 1 the second term is 0 whatever e(1) is. With
    n_trials = 1 (K = 1) it is the trial's curve. The relation is the trial's.
    """

    trial: PrivacyCurve
    n_trials: int
    relation: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_trials", check.integer(self.n_trials, "n_trials", minimum=1))
        object.__setattr__(self, "relation", self.trial.relation)

    def rdp(self, orders: ArrayLike = DEFAULT_ORDERS) -> np.ndarray:
        orders = np.asarray(orders, dtype=np.float64)
        hats = np.array((1.0,) + tuple(DEFAULT_ORDERS))
        log_t = math.log(self.n_trials)
        with np.errstate(invalid="ignore"):   # inf * 0 at lambda_hat = 1
            hat_terms = np.where(hats == 1.0, 0.0,
                                 2.0 * (1.0 - 1.0 / hats) * self.trial.rdp(hats)) + 2.0 * log_t / hats
        bound = self.trial.rdp(orders) + float(np.min(hat_terms)) + log_t / (orders - 1.0)
        # rounded up: every float operation above may round down by half an ulp
        return np.nextafter(np.nextafter(bound, np.inf), np.inf)


def _largest(ok: Callable[[float], bool], rel: float, cap: float = 2.0**20) -> float:
    """The largest x in (0, cap] with ok(x) (ok monotone: true below a threshold), to ``rel``
    relative precision, by doubling or halving from 1 then bisection; 0.0 if ok(2**-40)
    fails."""
    lo, hi = 0.0, 1.0
    while ok(hi) and hi < cap:
        lo, hi = hi, hi * 2.0
    if lo == 0.0:
        while hi > 2.0**-40 and not ok(hi / 2.0):
            hi /= 2.0
        if hi <= 2.0**-40:
            return 0.0
        lo = hi / 2.0
    while hi - lo > rel * lo:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def random_stopping_rho(epsilon: float, delta: float, n_trials: int) -> float:
    """The largest rho (to 0.1%) for which random stopping over rho-zCDP trials
    (:class:`RandomStopping` of ``ZCDP(rho)``, ``n_trials`` expected) is (epsilon, delta)-DP by
    its RDP curve (the improved conversion, :data:`dpcore.curves.DEFAULT_ORDERS`); bisection,
    verified. Public values only.

    >>> rho = random_stopping_rho(1.0, 1e-6, 10)
    >>> RandomStopping(ZCDP(rho), 10).epsilon_for(1e-6) <= 1.0
    True
    """
    rho = _largest(lambda r: RandomStopping(ZCDP(r), n_trials).epsilon_for(delta) <= epsilon,
                   1e-3)
    if rho == 0.0:
        raise ValueError(f"epsilon={epsilon!r} at delta={delta!r} is too small for random "
                         f"stopping with n_trials={n_trials}: raise epsilon or delta, or lower "
                         "n_trials")
    return rho


def _zcdp_epsilon(rho: float, delta: float) -> float:
    """The largest epsilon (to 1e-6 relative) whose zcdp_rho_for(epsilon, delta) <= rho: the
    epsilon to give a zCDP candidate (``method="gd"``) so that it spends at most rho (0.0 if
    none above 2**-40)."""
    return _largest(lambda e: zcdp_rho_for(e, delta) <= rho, 1e-6)


def _keys(params: Iterable[str], name: str) -> list[str]:
    return [k for k in params if k == name or k.endswith("__" + name)]


def _flat_steps(est: Any) -> Iterator[tuple[str, Any]]:
    """(name, step) of a pipeline, nested pipelines flattened, "passthrough"/None skipped."""
    for name, step in getattr(est, "steps", None) or []:
        if step is None or step == "passthrough":
            continue
        if hasattr(step, "steps"):
            yield from _flat_steps(step)
        else:
            yield name, step


def _check_steps(est: Any) -> None:
    """Every step of a pipeline candidate is a private estimator (an ``epsilon`` parameter) or
    data-independent (its fit reads only public shapes: RandomFourierFeatures, scikit-learn's
    FunctionTransformer, "passthrough"). Any other step (StandardScaler, say) would be fitted on
    the private rows without noise and returned in ``best_estimator_``: refused before any
    charge, naming the step."""
    for name, step in _flat_steps(est):
        private = "epsilon" in step.get_params(deep=False)
        independent = getattr(step, "_dpcore_data_independent", False) or isinstance(
            step, FunctionTransformer)
        if not (private or independent):
            raise ValueError(
                f"pipeline step {name!r} ({type(step).__name__}) is neither a private estimator "
                "nor data-independent: it would be fitted on the private rows without noise and "
                "returned in best_estimator_; scale with public bounds (e.g. a "
                "FunctionTransformer) or use a dpcore estimator")


class PrivateGridSearch(_base.SharedStateCloneMixin, MetaEstimatorMixin, BaseEstimator):
    """Choose hyper-parameters privately: fit each candidate on its own part, select by the EM.

    With m candidates from ``param_grid``, the records are split by a uniformly random
    permutation of their positions (drawn independently of the data) into m + 1 parts of
    public sizes. Candidate i is fitted on part i with privacy parameter ``epsilon``; all
    candidates are scored by their number of errors on part m + 1; one is chosen with
    :func:`dpcore.tuning.select_candidate` (exponential mechanism, utility -errors,
    sensitivity 1, ``epsilon``). The chosen fitted model is ``best_estimator_``; the error
    counts themselves are private and are not kept.

    Parameters
    ----------
    estimator : estimator
        A private classifier from :mod:`dpcore.learn` (or a pipeline ending in one). Its
        ``epsilon`` (any ``*__epsilon``) parameters are set by the search, and so are the
        ``accountant`` and ``random_state`` of the same steps (one generator for all fits, so
        candidates never share noise).
    param_grid : dict or list of dicts
        Candidate parameters, as in scikit-learn's ``GridSearchCV``. The grid is public.
    epsilon : float, default=1.0
        Privacy parameter of every fit and of the selection, > 0. The whole search costs
        ``epsilon`` (see Privacy).
    classes : array_like, default=None
        The public label set, required for classifiers (unless the estimator has its own
        ``classes``): taking it from y would reveal which labels occur in the private data.
        Every fit uses it.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        Drives the split, the fits and the selection. None: dpcore's secure generator.
    accountant : dpcore.Accountant, default=None
        The m fits and the selection are charged to one ``accountant.parallel()`` block, each
        to its own partition (a fit that charges several times sums on its partition), so the
        accountant records the maximum over partitions, ``epsilon``. Every argument and every
        candidate's parameters are checked, and every part's cost is charged at once (all or
        nothing: :meth:`ParallelBlock.charge_partitions`), before the first fit. The costs are
        the private steps' ``cost`` properties: functions of public parameters only.
    progress : bool, default=False
        Show a progress bar on stderr (candidates fitted out of m: public counters only).
    selection : {"exponential", "random_stopping"}, default="exponential"
        ``"exponential"``: the split above. ``"random_stopping"`` (Liu-Talwar 2019;
        Papernot-Steinke 2022): a held-out fifth of the records (by a random permutation,
        drawn independently of the data) scores the trials; each trial picks a candidate
        uniformly at random, fits it on the other four fifths with epsilon / 3, and scores it
        by its validation errors plus discrete Laplace noise of scale 3 / epsilon; after each
        trial the search stops with probability 1 / ``n_trials`` (a geometric number of
        trials, mean ``n_trials``); the trial with the fewest noisy errors is returned. Every
        fit sees four fifths of the data (not 1 / (m + 1)), at a third of epsilon. Candidates
        must be pure epsilon-DP (not ``method="gd"`` / ``"sgd"``), unless ``delta`` is given.
    n_trials : int, default=None
        ``"random_stopping"`` only: the expected number of trials, >= 1 (None: m, the number of
        candidates). The number of fits is random and unbounded (more than 10 n_trials with
        probability about e^-10). The number of trials run is secret: it is not stored, no
        progress bar is shown, and the privacy guarantee does not cover the running time,
        which grows with it.
    delta : float, default=None
        ``"random_stopping"`` only: 0 < delta < 1 makes the search (epsilon, delta)-DP by the
        RDP bound of Papernot-Steinke 2022 (see Privacy): every trial is rho-zCDP with the
        largest rho that bound allows (:func:`random_stopping_rho`); pure candidates are fitted
        at epsilon = sqrt(2 rho), zCDP candidates (``method="gd"``, at their own delta) at
        the epsilon whose rho is at most rho, and the score noise is a discrete Gaussian
        (sigma = 1 / sqrt(2 rho)). This admits ``method="gd"`` candidates and composes
        tightly in ``Accountant(method="rdp")``; for pure candidates at small epsilon the
        pure version (delta None) gives each trial more: at epsilon 1, delta 1e-6 and 3
        expected trials, a pure trial gets epsilon 1/3 there and 0.134 here. None: the pure
        version.

    Attributes
    ----------
    best_index_ : int
    best_params_ : dict
    best_estimator_ : estimator
        The chosen candidate, fitted on its part (about n / (m + 1) records; four fifths of
        them with random stopping).
    classes_ : ndarray
        The public ``classes`` (classifiers only).
    n_candidates_ : int
    epsilon_per_trial_, rho_per_trial_ : float
        Random stopping: a trial's epsilon (pure version) or rho (with ``delta``).

    Privacy
    -------
    ``selection="exponential"``: ``epsilon``-DP under replace-one neighbours when the
    estimator is ``epsilon``-DP under
    replace-one (dpcore's LogisticRegression, LinearSVC, LinearRegression): the parts are
    chosen by position, so a replaced record stays in one part and changes one mechanism only:
    fit i (epsilon-DP in part i; the selection is post-processing of it for a fixed
    validation part) or the selection (error counts have sensitivity 1 under replace-one).
    Parallel composition gives max(epsilon, ..., epsilon) = epsilon (CMS 2011, Theorem 9).
    For an estimator that is epsilon-DP only under add/remove (GaussianNB), the search is
    2 epsilon-DP under replace-one (epsilon-DP for the fits under add/remove, where the part
    sizes are still drawn independently of the values). The privacy caveats of the estimator
    (floating point, inexact minimisation) carry over. With probability 1 - beta the chosen
    model makes at most min_i z_i + 2 log(m / beta) / epsilon validation errors.

    Each private step of a pipeline gets ``epsilon`` (e.g. ``PCA -> LogisticRegression``): its
    fit charges once per step, the charges sum on the candidate's partition, and the search
    costs the largest partition total (2 epsilon for two private steps). Only public values
    are kept: the label set is the given ``classes`` (never ``np.unique(y)``), the error
    counts are dropped, and the errors raised quote no label or row count. Every candidate's
    parameters are checked (with the public shape of X where it reaches a step) before the
    first fit, so a bad grid entry costs nothing.

    ``selection="random_stopping"``: ``epsilon``-DP under replace-one neighbours for
    estimators that are epsilon-DP under replace-one. One trial is epsilon_t-DP with epsilon_t
    = epsilon / 3 (rounded down): a replaced record lies either in the training part (the fit
    is epsilon_t-DP; the validation count is post-processing of the fit on unchanged records)
    or in the validation part (the error count has sensitivity 1 and gets exact discrete
    Laplace noise of scale 1 / epsilon_t; the fit is unchanged): parallel composition. The
    candidate is drawn independently of the data, the number of trials K is geometric
    (P(K = k) = g (1 - g)^(k - 1), g = 1 / n_trials, drawn exactly with integer uniforms), and
    only the best trial (model and noisy score order) is returned: this is the random-stopping
    algorithm of Liu-Talwar 2019 (Theorem 3.4: 3 epsilon_t-DP), the eta = 1 case of
    Papernot-Steinke 2022, Theorem 2 (whose RDP bound tends to (2 + eta) epsilon_t as the
    orders grow). Charged once, ``3 epsilon_t <= epsilon``, before the first fit.

    ``selection="random_stopping"`` with ``delta``: (epsilon, delta)-DP under replace-one
    neighbours for candidates that are pure epsilon-DP or rho-zCDP under replace-one (not
    ``method="sgd"``, whose guarantee is add/remove). One trial is rho-zCDP: a replaced record
    lies in the training part (the fit is rho-zCDP: epsilon-DP implies epsilon**2 / 2-zCDP,
    Bun-Steinke 2016, and a zCDP candidate's cost is checked to be at most rho) or in the
    validation part (the error count, sensitivity 1, gets the exact discrete Gaussian
    N_Z(0, sigma**2) with 1 / (2 sigma**2) <= rho checked in rationals, which is rho-zCDP,
    Canonne-Kamath-Steinke 2020); the candidate is drawn independently of the data (a
    mixture does not raise a Rényi divergence above the largest of its parts). The best of K
    trials, K geometric with mean n_trials, is then (lambda, e')-RDP at every order lambda >
    1 with e' = rho lambda + min over lambda_hat of [2 (1 - 1/lambda_hat) rho lambda_hat +
    2 log(n_trials) / lambda_hat] + log(n_trials) / (lambda - 1) (Papernot-Steinke 2022,
    Theorem 2 with eta = 1: :class:`RandomStopping`), converted to (epsilon, delta) with
    the improved conversion on :data:`dpcore.curves.DEFAULT_ORDERS`. Charged once before the
    first fit as ``Cost(epsilon, delta, curve=RandomStopping(ZCDP(rho), n_trials))``.
    ``tests/test_learn_search_rdp.py`` checks the bound against the exact Rényi divergences
    of the best-of-K law on small cases (and that the bound without its lambda_hat terms
    fails there).

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk
       minimization", JMLR 12 (2011), Algorithm 3.
    .. [LT19] J. Liu, K. Talwar, "Private selection from private candidates", STOC 2019.
    .. [PS22] N. Papernot, T. Steinke, "Hyperparameter tuning with Renyi differential privacy",
       ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> import dpcore
    >>> from dpcore.learn import LogisticRegression
    >>> from dpcore.learn._search import PrivateGridSearch
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.normal(size=(6000, 3)); y = (X[:, 0] - X[:, 2] > 0).astype(int)
    >>> acc = dpcore.Accountant(1.0)
    >>> search = PrivateGridSearch(LogisticRegression(data_norm=4.0),
    ...                            {"alpha": [0.001, 0.01, 0.1]}, epsilon=1.0, classes=[0, 1],
    ...                            random_state=0, accountant=acc).fit(X, y)
    >>> search.score(X, y) > 0.85, acc.spent
    (True, (1.0, 0.0))
    """

    def __init__(self, estimator: BaseEstimator,
                 param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]],
                 *, epsilon: float = 1.0, classes: ArrayLike | None = None,
                 random_state: RandomStateLike = None, accountant: Accountant | None = None,
                 progress: bool = False,
                 selection: Literal["exponential", "random_stopping"] = "exponential",
                 n_trials: int | None = None, delta: float | None = None) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.classes = classes
        self.random_state = random_state
        self.accountant = accountant
        self.progress = progress
        self.selection = selection
        self.n_trials = n_trials
        self.delta = delta

    def _candidates(self, classes: np.ndarray | None, epsilon: float, n_samples: int,
                    n_features: int) -> tuple[list[dict[str, Any]], list[Any]]:
        """Every candidate estimator, built and checked (each private step's parameters, with the
        shapes it will see where they are public) before anything is charged; their accountant
        and random_state are set at fit time."""
        grid = list(ParameterGrid(self.param_grid))
        if not grid:
            raise ValueError("param_grid must give at least one candidate")
        models = []
        for params in grid:
            est = clone(self.estimator).set_params(**params)
            _check_steps(est)
            own = est.get_params()
            extra: dict[str, Any] = {k: epsilon for k in _keys(own, "epsilon")}
            if not extra:
                raise ValueError("estimator has no epsilon parameter: PrivateGridSearch needs a private learner")
            for k in _keys(own, "classes"):
                if own[k] is None:
                    extra[k] = classes
            est.set_params(**extra)
            _base.check_candidate(est, n_samples=n_samples, n_features=n_features)
            models.append(est)
        return grid, models

    @staticmethod
    def _wire(est: Any, accountant: AccountantLike | None, rng: RandomStateLike) -> Any:
        """Every private step draws from the search's generator and charges ``accountant`` (a
        seed shared by the candidates would repeat their noise across the parts)."""
        own = est.get_params()
        extra = {}
        for k in _keys(own, "epsilon"):
            prefix = k[: -len("epsilon")]
            for sibling, value in (("accountant", accountant), ("random_state", rng)):
                if prefix + sibling in own:
                    extra[prefix + sibling] = value
        return est.set_params(**extra)

    @staticmethod
    def _costs(models: Sequence[Any]) -> list[list[dict[str, Any]]]:
        """What each candidate's fit charges: the ``cost`` of each private step (a function of
        public parameters only; no fit on stand-in data)."""
        costs = []
        for est in models:
            steps = [step for _, step in _flat_steps(est)] if hasattr(est, "steps") else [est]
            charges = []
            for step in steps:
                if "epsilon" in step.get_params(deep=False):
                    cost = step.cost
                    charges.append(dict(epsilon=cost.epsilon, delta=cost.delta, rho=cost.rho,
                                        curve=cost.curve, label=type(step).__name__))
            costs.append(charges)
        return costs

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Run the search (see the class docstring). Returns self."""
        epsilon = _base.check_epsilon(self.epsilon)
        _base.check_bool(self.progress, "progress")
        check.option(self.selection, "selection", SELECTIONS)
        if self.selection == "random_stopping":
            if self.n_trials is not None:
                check.integer(self.n_trials, "n_trials", minimum=1, maximum=10**6)
            if self.delta is not None:
                check.probability(self.delta, "delta")
        elif self.n_trials is not None:
            raise ValueError("n_trials applies to selection='random_stopping' only")
        elif self.delta is not None:
            raise ValueError("delta applies to selection='random_stopping' only (the split "
                             "with the exponential mechanism charges its candidates' costs)")
        X, y = _base.validate_data(self, X, y, reset=True, dtype=None)
        needs_classes = bool(_keys(self.estimator.get_params(), "classes"))
        classes = None
        if needs_classes:
            own = [v for k, v in self.estimator.get_params().items()
                   if k.endswith("classes") and v is not None]
            classes = _base.check_labels(y, self.classes if self.classes is not None
                                         else (own[0] if own else None))
        n, d = X.shape
        m = len(ParameterGrid(self.param_grid))
        if self.selection == "random_stopping":
            return self._fit_random_stopping(X, y, classes, epsilon, m)
        if n < m + 1:  # n is not quoted: it may be private
            raise ValueError(f"need at least m + 1 = {m + 1} samples for {m} candidates (one part "
                             "each plus a validation part)")
        # each fit sees at most ceil(n / (m + 1)) rows (the parts' sizes are public given n)
        grid, models = self._candidates(classes, epsilon, -(-n // (m + 1)), d)
        rng = _base.release_rng(self.random_state, self.accountant)
        if self.accountant is not None:
            # every part's cost, charged at once before any fit: all or nothing
            costs = self._costs(models)
            # the exponential mechanism ("exact"): bounded-range at epsilon_effective <= epsilon
            costs.append([dict(epsilon=epsilon, curve=BoundedRange(epsilon),
                               label="select_candidate")])
            with self.accountant.parallel(label=f"PrivateGridSearch({m} candidates)") as block:
                block.charge_partitions(
                    costs, labels=[f"candidate {i}" for i in range(m)] + ["selection"])
        parts = np.array_split(rng.permutation(X.shape[0]), m + 1)
        with Progress("PrivateGridSearch candidates", m, enabled=self.progress) as bar:
            for i, est in enumerate(models):
                self._wire(est, None, rng).fit(X[parts[i]], y[parts[i]])
                bar.update(i + 1)
        errors = validation_errors(models, X[parts[m]], y[parts[m]])
        best = select_candidate(errors, epsilon=epsilon, sensitivity=1.0, higher_is_better=False,
                                random_state=rng)
        self.best_index_ = int(best)
        self.best_params_ = grid[best]
        # a refit of the chosen model is charged to the search's own accountant
        self.best_estimator_ = self._wire(models[best], self.accountant, self.random_state)
        self.n_candidates_ = m
        if classes is not None:
            self.classes_ = classes
        return self

    def _rdp_candidates(self, classes: np.ndarray | None, epsilon: float, delta: float,
                        n_trials: int, n_train: int, d: int
                        ) -> tuple[list[dict[str, Any]], list[Any], float, float]:
        """The candidates of random stopping with delta: each trial rho-zCDP, rho the largest
        that :func:`random_stopping_rho` allows; a pure step gets epsilon = sqrt(2 rho)
        (epsilon-DP implies epsilon**2 / 2-zCDP, Bun-Steinke 2016), a zCDP step (``gd``) the
        epsilon whose rho is at most rho at its own delta. Checked before the charge."""
        rho = random_stopping_rho(epsilon, delta, n_trials)
        eps_pure = math.sqrt(2.0 * rho)
        while Fraction(eps_pure) ** 2 / 2 > Fraction(rho):
            eps_pure = math.nextafter(eps_pure, 0.0)
        grid, models = self._candidates(classes, eps_pure, n_train, d)
        for est, charges in zip(models, self._costs(models)):
            ok = len(charges) == 1
            if ok and charges[0]["rho"] is not None:
                key = _keys(est.get_params(), "epsilon")[0]
                step_delta = est.get_params()[key[: -len("epsilon")] + "delta"]
                eps_zcdp = _zcdp_epsilon(rho, step_delta)
                ok = eps_zcdp > 0.0
                if ok:
                    est.set_params(**{key: eps_zcdp})
                    (charge,) = self._costs([est])[0]
                    ok = charge["rho"] is not None and charge["rho"] <= rho
            elif ok:
                ok = not charges[0]["delta"] and charges[0]["epsilon"] <= eps_pure
            if not ok:
                raise ValueError(
                    "selection='random_stopping' with delta needs candidates with one private "
                    "step that is pure epsilon-DP or rho-zCDP under replace-one (method='gd'); "
                    f"{type(est).__name__} with these parameters is not (method='sgd' is "
                    "add/remove)")
        sigma = 1.0 / math.sqrt(2.0 * rho)   # the score's discrete Gaussian: 1/(2 sigma^2) <= rho
        while Fraction(1, 2) / Fraction(sigma) ** 2 > Fraction(rho):
            sigma = math.nextafter(sigma, math.inf)
        return grid, models, rho, sigma

    def _fit_random_stopping(self, X: np.ndarray, y: np.ndarray, classes: np.ndarray | None,
                             epsilon: float, m: int) -> Self:
        """Random stopping (see the class docstring); every check before the one charge."""
        n, d = X.shape
        n_val = int(n * VALIDATION_SHARE)   # a public function of n
        if n_val < 1 or n - n_val < 1:
            raise ValueError("too few samples for random stopping (one validation record and "
                             "one training record at least)")
        n_trials = m if self.n_trials is None else int(self.n_trials)
        label = f"PrivateGridSearch(random stopping, {m} candidates)"
        if self.delta is not None:   # rho-zCDP trials, the RDP bound of Papernot-Steinke
            delta = check.probability(self.delta, "delta")
            grid, models, rho, sigma = self._rdp_candidates(classes, epsilon, delta, n_trials,
                                                           n - n_val, d)
            curve = RandomStopping(ZCDP(rho), n_trials)
            cost = Cost(epsilon, delta, curve=curve)

            def score_noise(rng: np.random.Generator) -> int:
                return int(discrete_gaussian(sigma, random_state=rng))
        else:
            eps_trial = round_down(Fraction(epsilon) / RANDOM_STOPPING_FACTOR)
            grid, models = self._candidates(classes, eps_trial, n - n_val, d)
            for est, charges in zip(models, self._costs(models)):
                if (any(c["rho"] is not None or c["delta"] > 0 for c in charges)
                        or len(charges) != 1):
                    raise ValueError(
                        "selection='random_stopping' needs candidates with one pure "
                        f"epsilon-DP private step; {type(est).__name__} with these parameters "
                        "is not (give delta, or use selection='exponential')")
            cost = Cost(round_down(Fraction(eps_trial) * RANDOM_STOPPING_FACTOR))

            def score_noise(rng: np.random.Generator) -> int:
                return int(discrete_laplace(1.0 / eps_trial, random_state=rng))
        rng = _base.release_rng(self.random_state, self.accountant)
        cost.charge(self.accountant, label)
        order = rng.permutation(n)
        train, val = order[n_val:], order[:n_val]
        best = best_score = best_model = None
        # The number of trials must stay secret (the best of a known number k of trials is
        # only k epsilon_t-DP): no progress bar, no count kept.
        while True:
            i = int(rng.integers(m))
            est = self._wire(clone(models[i]), None, rng).fit(X[train], y[train])
            errors = int(validation_errors([est], X[val], y[val])[0])
            score = errors + score_noise(rng)
            if best_score is None or score < best_score:
                best, best_score, best_model = i, score, est
            if rng.integers(n_trials) == 0:   # stop with probability 1 / n_trials, exactly
                break
        assert best is not None   # at least one trial ran
        self.best_index_ = best
        self.best_params_ = grid[best]
        self.best_estimator_ = self._wire(best_model, self.accountant, self.random_state)
        self.n_candidates_ = m
        if self.delta is not None:
            self.rho_per_trial_ = rho
        else:
            self.epsilon_per_trial_ = eps_trial
        if classes is not None:
            self.classes_ = classes
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predictions of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Decision function of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Score of ``best_estimator_`` (accuracy for classifiers)."""
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)
