"""How good synthetic data is: the error on a workload of marginals, and the accuracy of a
classifier trained on synthetic records and tested on real ones. Evaluation only: both read the
real data exactly and release nothing private."""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from dpcore import _validation as check
from dpcore.synth._domain import Domain
from dpcore.synth._marginals import count_marginals

__all__ = ["tstr_accuracy", "workload_error"]


def _codes(data, domain, name, codes):
    if not codes:
        return domain.encode(data)
    arr = check.real_array(data, name)
    if arr.ndim != 2 or arr.shape[1] != len(domain) or arr.dtype.kind not in "iu":
        raise ValueError(f"with codes=True, {name} must be a 2-d integer array with "
                         f"{len(domain)} columns, got shape {arr.shape}, dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or np.any(arr.max(axis=0) >= np.array(domain.shape))):
        raise ValueError(f"{name} codes must lie in 0 .. size - 1 for each column")
    return arr


def workload_error(real: Any, synthetic: Any, *, domain: Domain,
                   ways: int | Sequence[int] = (2, 3), codes: bool = False) -> float:
    """Average L1 distance between the real and synthetic normalised marginals over every set
    of ``ways`` columns (all 2-way and 3-way marginals by default).

    Parameters
    ----------
    real, synthetic : DataFrame, mapping, 2-d array or CSV path
        Records (encoded by ``domain``), or with ``codes=True`` their codes.
    domain : Domain
        The public domain both are encoded with.
    ways : int or sequence of int, default=(2, 3)
        Marginal widths of the workload (1 <= width <= number of columns).
    codes : bool, default=False
        ``real`` and ``synthetic`` are already integer codes (records x columns, as
        ``Domain.encode`` and ``sample(output="codes")`` return).

    Returns
    -------
    float
        mean over the workload's marginals of sum_cells |p_real - p_synth|, between 0 and 2
        (each marginal normalised to frequencies; an empty data set counts as uniform).

    Privacy
    -------
    Not a release: reads the real data exactly, for evaluating synthetic data. Its value is
    private to whoever holds the real data.

    Examples
    --------
    >>> from dpcore.synth import Categorical, Domain, workload_error
    >>> dom = Domain({"a": Categorical([0, 1]), "b": Categorical([0, 1])})
    >>> real = {"a": [0, 1, 0, 1], "b": [0, 1, 0, 1]}
    >>> workload_error(real, real, domain=dom, ways=2)
    0.0
    >>> workload_error(real, {"a": [0, 1, 0, 1], "b": [1, 0, 1, 0]}, domain=dom, ways=2)
    2.0
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a dpcore.synth.Domain, got {type(domain).__name__}")
    widths = [ways] if isinstance(ways, (int, np.integer)) else list(ways)
    widths = [check.integer(w, "ways", minimum=1, maximum=len(domain)) for w in widths]
    if not widths:
        raise ValueError("ways must name at least one marginal width")
    x, y = _codes(real, domain, "real", codes), _codes(synthetic, domain, "synthetic", codes)
    cliques = [c for w in widths for c in itertools.combinations(range(len(domain)), w)]
    errors = [np.abs(_frequencies(a) - _frequencies(b)).sum()
              for a, b in zip(count_marginals(x, domain.shape, cliques),
                              count_marginals(y, domain.shape, cliques))]
    return float(np.mean(errors))


def _frequencies(counts):
    total = counts.sum()
    if total == 0:
        return np.full(counts.shape, 1.0 / counts.size)
    return counts / total


def one_hot(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Indicator features of integer codes (one block of ``sizes[j]`` columns per column)."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.zeros((codes.shape[0], int(np.sum(sizes))), dtype=np.float64)
    rows = np.repeat(np.arange(codes.shape[0]), codes.shape[1])
    out[rows, (codes + offsets).reshape(-1)] = 1.0
    return out


def tstr_accuracy(synthetic: Any, real: Any, *, domain: Domain, label: str,
                  estimator: Any = None,
                  codes: bool = False) -> float:
    """Train on synthetic, test on real: the accuracy on ``real`` of a classifier of ``label``
    trained on ``synthetic`` (the other columns one-hot encoded by their domain codes).

    Parameters
    ----------
    synthetic, real : DataFrame, mapping, 2-d array or CSV path
        Training records and test records (encoded by ``domain``), or with ``codes=True`` their
        codes.
    domain : Domain
    label : str
        The column to predict (its codes are the classes).
    estimator : scikit-learn classifier, optional
        Default: ``LogisticRegression(max_iter=1000)``. Cloned before fitting.
    codes : bool, default=False
        The data are already integer codes (as in :func:`workload_error`).

    Returns
    -------
    float
        Accuracy in [0, 1]. Training data with a single class predicts that class.

    Privacy
    -------
    Not a release: reads the real data exactly, for evaluating synthetic data. Passing real
    training records as ``synthetic`` gives the train-on-real baseline.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.synth import Categorical, Domain, tstr_accuracy
    >>> dom = Domain({"x": Categorical([0, 1, 2]), "y": Categorical([0, 1])})
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data
    >>> x = rng.integers(0, 3, 500)
    >>> data = {"x": x, "y": (x == 2).astype(int)}
    >>> tstr_accuracy(data, data, domain=dom, label="y")
    1.0
    """
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression

    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a dpcore.synth.Domain, got {type(domain).__name__}")
    target = domain.index(label)
    train = _codes(synthetic, domain, "synthetic", codes)
    test = _codes(real, domain, "real", codes)
    features = [j for j in range(len(domain)) if j != target]
    sizes = [domain.shape[j] for j in features]
    if test.shape[0] == 0:
        return math.nan
    y_train = train[:, target]
    if train.shape[0] == 0 or np.unique(y_train).size < 2:
        constant = y_train[0] if y_train.size else 0
        return float(np.mean(test[:, target] == constant))
    model = clone(estimator) if estimator is not None else LogisticRegression(max_iter=1000)
    model.fit(one_hot(train[:, features], sizes), y_train)
    return float(model.score(one_hot(test[:, features], sizes), test[:, target]))
