"""Shared helpers of the private learners: input validation, public bounds, the generator and
accountant checks made before a fit is charged, and clone/accountant sharing."""
from __future__ import annotations

import math

import numpy as np
from sklearn.base import clone

from dpcore import _validation as check
from dpcore._release import check_accountant
from dpcore.random import check_random_state

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    _sk_validate_data = None

__all__ = ["MAX_RECORDS", "SharedStateCloneMixin", "bounds_array", "check_labels", "check_n",
           "laplace_grid", "release_rng", "validate_data"]

NO_Y = object()


def validate_data(est, X, y=NO_Y, *, reset, **kw):
    """scikit-learn's input validation (sets/checks n_features_in_); y=None in fit raises."""
    if _sk_validate_data is not None:
        if y is NO_Y:
            return _sk_validate_data(est, X, reset=reset, **kw)
        return _sk_validate_data(est, X, y, reset=reset, **kw)
    if y is NO_Y:  # pragma: no cover
        return est._validate_data(X, reset=reset, **kw)
    return est._validate_data(X, y, reset=reset, **kw)  # pragma: no cover


class SharedStateCloneMixin:
    """``sklearn.base.clone`` that shares the accountant and a generator instead of copying them.

    scikit-learn deep-copies non-estimator parameters: a copied Accountant would record charges
    that the caller never sees (and it holds a lock, which cannot be copied), and a copied numpy
    Generator would make every clone draw the same noise. Both are kept by reference; every
    other parameter is cloned as scikit-learn does.
    """

    def __sklearn_clone__(self):
        params = self.get_params(deep=False)
        shared = {"accountant"}
        if isinstance(params.get("random_state"), (np.random.Generator, np.random.BitGenerator)):
            shared.add("random_state")
        return type(self)(**{k: v if k in shared else clone(v, safe=False) for k, v in params.items()})


# Public cap on the number of records: every released count/sum/coefficient has |value| <=
# 2 * MAX_RECORDS, which fixes the coarsest grid the learners may need independently of the data.
MAX_RECORDS = 2**36


def laplace_grid(sensitivity, epsilon):
    """Power-of-two grid for :func:`dpcore.laplace`: its default (sensitivity/epsilon * 2^-30),
    but never finer than 2^-23, so that any |value| <= 2 * 2^36 stays below 2^60 grid units
    (a huge epsilon would otherwise make the grid too fine). Independent of the data."""
    fine = 2.0 ** math.floor(math.log2(sensitivity / epsilon) - 30)
    return max(fine, 2.0 ** (37 - 60))


def check_n(n):
    if n > MAX_RECORDS:
        raise ValueError("at most 2**36 records are supported")  # n itself may be private


def bounds_array(bounds, name, d):
    if bounds is None:
        raise ValueError(
            f"{name} is required: give public bounds (lower, upper), scalars or arrays of length "
            f"n_features; they are never inferred from the data"
        )
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (lower, upper), got {bounds!r}") from None
    lower = np.broadcast_to(check.finite_array(lower, f"{name}[0]"), (d,)).astype(float)
    upper = np.broadcast_to(check.finite_array(upper, f"{name}[1]"), (d,)).astype(float)
    if np.any(lower >= upper):
        raise ValueError(f"{name} must satisfy lower < upper for every feature")
    return lower, upper


def release_rng(random_state, accountant):
    """Check ``accountant`` and resolve ``random_state`` before a fit charges anything."""
    check_accountant(accountant)
    return check_random_state(random_state)


def check_labels(y, classes):
    """The public ``classes`` (sorted, unique) with every label of y in it. The messages never
    quote a label of y (labels are private)."""
    if classes is None:
        raise ValueError(
            "classes is required: give the public list of labels (taking it from y would "
            "reveal which labels occur in the private data)"
        )
    classes = np.unique(np.asarray(classes))
    if classes.size < 2:
        raise ValueError(f"classes must hold at least 2 labels, got {classes.size}")
    if not np.all(np.isin(y, classes)):
        raise ValueError("y contains labels outside classes")
    return classes
