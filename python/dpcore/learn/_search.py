"""Private hyper-parameter selection (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 3)."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

from dpcore._progress import Progress
from dpcore.learn import _base
from dpcore.tuning import select_candidate, validation_errors

__all__ = ["PrivateGridSearch"]


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

    Attributes
    ----------
    best_index_ : int
    best_params_ : dict
    best_estimator_ : estimator
        The chosen candidate, fitted on its part (about n / (m + 1) records).
    classes_ : ndarray
        The public ``classes`` (classifiers only).
    n_candidates_ : int

    Privacy
    -------
    ``epsilon``-DP under replace-one neighbours when the estimator is ``epsilon``-DP under
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

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk
       minimization", JMLR 12 (2011), Algorithm 3.

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
                 accountant=None, progress=False):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.classes = classes
        self.random_state = random_state
        self.accountant = accountant
        self.progress = progress

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
