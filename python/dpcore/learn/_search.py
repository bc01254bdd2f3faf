"""Private hyper-parameter selection: a split of the records with the exponential mechanism
(Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 3), or random stopping over repeated private
trials (Liu-Talwar 2019; Papernot-Steinke 2022)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._progress import Progress
from dpcore._release import Cost
from dpcore.learn import _base
from dpcore.mechanisms import discrete_laplace
from dpcore.tuning import select_candidate, validation_errors

__all__ = ["PrivateGridSearch", "SELECTIONS", "RANDOM_STOPPING_FACTOR"]

SELECTIONS = ("exponential", "random_stopping")
#: Random stopping with a geometric number of trials costs this many times a trial's epsilon
#: (Liu-Talwar 2019, Theorem 3.4; Papernot-Steinke 2022, Theorem 2 with eta = 1).
RANDOM_STOPPING_FACTOR = 3
#: Share of the records held out to score the trials of random stopping (public).
VALIDATION_SHARE = Fraction(1, 5)


def _keys(params, name):
    return [k for k in params if k == name or k.endswith("__" + name)]


def _flat_steps(est):
    """(name, step) of a pipeline, nested pipelines flattened, "passthrough"/None skipped."""
    for name, step in getattr(est, "steps", None) or []:
        if step is None or step == "passthrough":
            continue
        if hasattr(step, "steps"):
            yield from _flat_steps(step)
        else:
            yield name, step


def _check_steps(est):
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
        must be pure epsilon-DP (not ``method="gd"`` / ``"sgd"``).
    n_trials : int, default=None
        ``"random_stopping"`` only: the expected number of trials, >= 1 (None: m, the number of
        candidates). The number of fits is random and unbounded (more than 10 n_trials with
        probability about e^-10). The number of trials run is secret: it is not stored, no
        progress bar is shown, and the privacy guarantee does not cover the running time,
        which grows with it.

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

    def __init__(self, estimator, param_grid, *, epsilon=1.0, classes=None, random_state=None,
                 accountant=None, progress=False, selection="exponential", n_trials=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.classes = classes
        self.random_state = random_state
        self.accountant = accountant
        self.progress = progress
        self.selection = selection
        self.n_trials = n_trials

    def _candidates(self, classes, epsilon, n_samples, n_features):
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
            extra = {k: epsilon for k in _keys(own, "epsilon")}
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
    def _wire(est, accountant, rng):
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
    def _costs(models):
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
                                        label=type(step).__name__))
            costs.append(charges)
        return costs

    def fit(self, X, y):
        """Run the search (see the class docstring). Returns self."""
        epsilon = _base.check_epsilon(self.epsilon)
        _base.check_bool(self.progress, "progress")
        check.option(self.selection, "selection", SELECTIONS)
        if self.selection == "random_stopping":
            if self.n_trials is not None:
                check.integer(self.n_trials, "n_trials", minimum=1, maximum=10**6)
        elif self.n_trials is not None:
            raise ValueError("n_trials applies to selection='random_stopping' only")
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
            costs.append([dict(epsilon=epsilon, label="select_candidate")])
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

    def _fit_random_stopping(self, X, y, classes, epsilon, m):
        """Random stopping (see the class docstring); every check before the one charge."""
        n, d = X.shape
        n_val = int(n * VALIDATION_SHARE)   # a public function of n
        if n_val < 1 or n - n_val < 1:
            raise ValueError("too few samples for random stopping (one validation record and "
                             "one training record at least)")
        eps_trial = round_down(Fraction(epsilon) / RANDOM_STOPPING_FACTOR)
        grid, models = self._candidates(classes, eps_trial, n - n_val, d)
        for est, charges in zip(models, self._costs(models)):
            if any(c["rho"] is not None or c["delta"] > 0 for c in charges) or len(charges) != 1:
                raise ValueError(
                    "selection='random_stopping' needs candidates with one pure epsilon-DP "
                    f"private step; {type(est).__name__} with these parameters is not (use "
                    "selection='exponential')")
        n_trials = m if self.n_trials is None else int(self.n_trials)
        rng = _base.release_rng(self.random_state, self.accountant)
        Cost(round_down(Fraction(eps_trial) * RANDOM_STOPPING_FACTOR)).charge(
            self.accountant, f"PrivateGridSearch(random stopping, {m} candidates)")
        order = rng.permutation(n)
        train, val = order[n_val:], order[:n_val]
        best = best_score = best_model = None
        # The number of trials must stay secret (the best of a known number k of trials is
        # only k epsilon_t-DP): no progress bar, no count kept.
        while True:
            i = int(rng.integers(m))
            est = self._wire(clone(models[i]), None, rng).fit(X[train], y[train])
            errors = int(validation_errors([est], X[val], y[val])[0])
            score = errors + int(discrete_laplace(1.0 / eps_trial, random_state=rng))
            if best_score is None or score < best_score:
                best, best_score, best_model = i, score, est
            if rng.integers(n_trials) == 0:   # stop with probability 1 / n_trials, exactly
                break
        self.best_index_ = best
        self.best_params_ = grid[best]
        self.best_estimator_ = self._wire(best_model, self.accountant, self.random_state)
        self.n_candidates_ = m
        self.epsilon_per_trial_ = eps_trial
        if classes is not None:
            self.classes_ = classes
        return self

    def predict(self, X):
        """Predictions of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    def predict_proba(self, X):
        """Class probabilities of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    def decision_function(self, X):
        """Decision function of ``best_estimator_``."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    def score(self, X, y):
        """Score of ``best_estimator_`` (accuracy for classifiers)."""
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)
