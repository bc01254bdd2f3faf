"""Shared pieces of the development studies (bench/dev_suite.py, bench/dev_trees.py): a
development set, the median test accuracy over noise seeds, and a diffprivlib model when the peer
is installed. Development data only: never the reporting splits of bench/learn_accuracy.py."""
import warnings
from dataclasses import dataclass

import numpy as np


@dataclass
class DevSet:
    name: str
    ytr: np.ndarray
    yte: np.ndarray
    raw: tuple          # (X_train, X_test, (lower, upper)) for GaussianNB
    linear: tuple       # (X_train, X_test) unit rows for the linear models


def median_score(make, Xtr, ytr, Xte, yte, seeds):
    """Median test accuracy of ``make(seed).fit(Xtr, ytr)`` over noise seeds 1000, 1001, ..."""
    return float(np.median([make(1000 + seed).fit(Xtr, ytr).score(Xte, yte)
                            for seed in range(seeds)]))


def mean_score(make, Xtr, ytr, Xte, yte, seeds, first_seed=1000):
    """Mean test accuracy of ``make(seed).fit(Xtr, ytr)`` over noise seeds first_seed, ..."""
    return float(np.mean([make(first_seed + seed).fit(Xtr, ytr).score(Xte, yte)
                          for seed in range(seeds)]))


def peer_class(model):
    """diffprivlib's ``model`` class, or None when diffprivlib is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import diffprivlib.models as dpl
        return getattr(dpl, model)
    except ImportError:
        return None
