"""Random Fourier features with public randomness (Rahimi & Recht 2007), for private kernel SVMs."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _validation as check
from dpcore.learn import _base
from dpcore.random import check_random_state

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray
    from typing_extensions import Self

    from dpcore.random import RandomStateLike

__all__ = ["RandomFourierFeatures"]


class RandomFourierFeatures(_base.SharedStateCloneMixin, TransformerMixin, BaseEstimator):
    """Map x to phi(x) = D^(-1/2) [cos(w_j^T x), sin(w_j^T x)]_{j=1..D}, approximating an RBF kernel.

    The frequencies w_j are drawn iid from N(0, 2 gamma I), the spectral density of
    k(x, y) = exp(-gamma ||x - y||^2), **independently of the data**: ``fit`` only reads the
    number of features. Every output row has L2 norm exactly 1 (up to rounding), so a private
    linear learner can use ``data_norm=1``; E[phi(x)^T phi(y)] = k(x, y). A private kernel SVM
    is ``make_pipeline(RandomFourierFeatures(...), LinearSVC(data_norm=1.0, ...))``
    (CMS 2011, Section 6).

    Parameters
    ----------
    gamma : float, default=1.0
        RBF kernel parameter, > 0.
    n_components : int, default=100
        Number D of frequencies, >= 1; the output has 2 D columns.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        Source of the (public) frequencies; None: dpcore's secure generator. A generator is
        shared with clones (``sklearn.base.clone``), so clones draw different frequencies.

    Attributes
    ----------
    frequencies_ : ndarray, shape (n_features, n_components)
        The public frequencies (release them with the model).

    Privacy
    -------
    Not a release of data: the map is drawn independently of the data and touches no private
    value (``fit`` reads only n_features, which is public). It costs no privacy budget; the
    guarantee of a pipeline is that of the private learner after it, whose row norm bound 1
    holds for every input.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._kernel import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))  # insecure-ok: example data, not noise
    >>> Z = RandomFourierFeatures(gamma=0.5, n_components=50, random_state=0).fit_transform(X)
    >>> Z.shape, bool(np.allclose(np.linalg.norm(Z, axis=1), 1.0))
    ((5, 100), True)
    """

    # its fit reads only the number of columns (public): safe inside PrivateGridSearch
    _dpcore_data_independent = True

    def __init__(self, *, gamma: float = 1.0, n_components: int = 100,
                 random_state: RandomStateLike = None) -> None:
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None
                      ) -> tuple[float, int, np.random.Generator]:
        """Every parameter (random_state too), checked before anything is drawn; also for a
        step of a grid search candidate. Returns (gamma, n_components, generator)."""
        gamma = check.positive(self.gamma, "gamma")
        D = check.integer(self.n_components, "n_components", minimum=1)
        return gamma, D, check_random_state(self.random_state)

    def _n_features_out(self, n_features: int | None) -> int:
        """Width of the output for an input of ``n_features`` columns (public)."""
        return 2 * check.integer(self.n_components, "n_components", minimum=1)

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> Self:
        """Draw the frequencies (only the number of columns of X is used). Returns self."""
        gamma, D, rng = self._check_params()
        X = _base.validate_data(self, X, reset=True, dtype=np.float64)
        self.frequencies_ = rng.normal(0.0, np.sqrt(2.0 * gamma), size=(X.shape[1], D))
        return self

    def get_feature_names_out(self, input_features: ArrayLike | None = None
                              ) -> NDArray[np.object_]:
        """Output column names ("randomfourierfeatures0", ...), which also enables ``set_output``."""
        check_is_fitted(self)
        return np.array([f"randomfourierfeatures{i}" for i in range(2 * self.frequencies_.shape[1])], dtype=object)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """The feature map, shape (n_samples, 2 n_components)."""
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        proj = X @ self.frequencies_
        scale = 1.0 / np.sqrt(self.frequencies_.shape[1])
        return np.hstack([np.cos(proj), np.sin(proj)]) * scale
