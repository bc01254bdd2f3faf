"""Private hyper-parameter selection (Chaudhuri, Monteleoni, Sarwate 2011, Algorithm 3)."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore.learn._linear import _SharedStateCloneMixin, _validate_data
from dpcore.random import check_random_state
from dpcore.tuning import select_candidate, validation_errors

__all__ = ["PrivateGridSearch"]


def _keys(params, name):
    return [k for k in params if k == name or k.endswith("__" + name)]


class PrivateGridSearch(_SharedStateCloneMixin, MetaEstimatorMixin, BaseEstimator):
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
    random_state : None, int, numpy Generator or BitGenerator, default=None
        Drives the split, the fits and the selection. None: dpcore's secure generator.
    accountant : dpcore.Accountant, default=None
        The m fits and the selection are charged to one ``accountant.parallel()`` block, so
        the accountant records their maximum, ``epsilon``.

    Attributes
    ----------
    best_index_ : int
    best_params_ : dict
    best_estimator_ : estimator
        The chosen candidate, fitted on its part (about n / (m + 1) records).
    classes_ : ndarray
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

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk
       minimization", JMLR 12 (2011), Algorithm 3.

    Examples
    --------
    >>> import numpy as np
    >>> import dpcore
    >>> from dpcore.learn._linear import LogisticRegression
    >>> from dpcore.learn._search import PrivateGridSearch
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.normal(size=(6000, 3)); y = (X[:, 0] - X[:, 2] > 0).astype(int)
    >>> acc = dpcore.Accountant(1.0)
    >>> search = PrivateGridSearch(LogisticRegression(data_norm=4.0),
    ...                            {"alpha": [0.001, 0.01, 0.1]}, epsilon=1.0,
    ...                            random_state=0, accountant=acc).fit(X, y)
    >>> search.score(X, y) > 0.85, acc.spent
    (True, (1.0, 0.0))
    """

    def __init__(self, estimator, param_grid, *, epsilon=1.0, random_state=None, accountant=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.random_state = random_state
        self.accountant = accountant

    def _fit_all(self, X, y, classes, candidates, epsilon, rng, block):
        n = X.shape[0]
        m = len(candidates)
        if n < m + 1:
            raise ValueError(
                f"need at least m + 1 = {m + 1} samples for {m} candidates (one part each plus a "
                f"validation part), got {n} sample(s)"
            )
        parts = np.array_split(rng.permutation(n), m + 1)
        models = []
        for i, params in enumerate(candidates):
            est = clone(self.estimator).set_params(**params)
            own = est.get_params()
            extra = {k: epsilon for k in _keys(own, "epsilon")}
            if not extra:
                raise ValueError("estimator has no epsilon parameter: PrivateGridSearch needs a private learner")
            for k in _keys(own, "classes"):
                if own[k] is None:  # one label set for all parts (None reveals the labels of y)
                    extra[k] = classes
            for k in _keys(own, "epsilon"):
                # every private step draws from the search's generator and charges the block:
                # a seed shared by the candidates would repeat their noise across the parts
                prefix = k[: -len("epsilon")]
                for sibling, value in (("accountant", block), ("random_state", rng)):
                    if prefix + sibling in own:
                        extra[prefix + sibling] = value
            est.set_params(**extra)
            models.append(est.fit(X[parts[i]], y[parts[i]]))
        errors = validation_errors(models, X[parts[m]], y[parts[m]])
        best = select_candidate(errors, epsilon=epsilon, sensitivity=1.0, higher_is_better=False,
                                random_state=rng, accountant=block)
        return models, best

    def fit(self, X, y):
        """Run the search (see the class docstring). Returns self."""
        epsilon = check.positive(self.epsilon, "epsilon")
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid must give at least one candidate")
        X, y = _validate_data(self, X, y, reset=True, dtype=None)
        classes = np.unique(y)
        rng = check_random_state(self.random_state)
        if self.accountant is not None:
            with self.accountant.parallel(label=f"PrivateGridSearch({len(candidates)} candidates)") as block:
                models, best = self._fit_all(X, y, classes, candidates, epsilon, rng, block)
        else:
            models, best = self._fit_all(X, y, classes, candidates, epsilon, rng, None)
        self.best_index_ = int(best)
        self.best_params_ = candidates[best]
        self.best_estimator_ = models[best]
        self.n_candidates_ = len(candidates)
        if hasattr(self.best_estimator_, "classes_"):
            self.classes_ = self.best_estimator_.classes_
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
