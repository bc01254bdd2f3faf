"""Exact permute-and-flip for the leaf labels of private trees (McKenna, Sheldon 2020): a class
per row of integer class counts, each row one :func:`dpcore.selection.permute_and_flip`
selection (exact: every acceptance an exact Bernoulli(exp(-x)) draw).

Privacy
-------
:func:`permute_and_flip_labels` states its guarantee (epsilon-DP per row for the monotone count
utility of sensitivity 1, the scale a double rounded down); it charges nothing (its callers
release and charge).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dpcore.random import check_random_state
from dpcore.selection import EXACT_PERMUTE_AND_FLIP, ExponentialMechanism, flip_coins_rows

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from dpcore.random import RandomStateLike

__all__ = ["permute_and_flip_labels"]


def permute_and_flip_labels(counts: ArrayLike, epsilon: float,
                            random_state: RandomStateLike = None) -> NDArray[np.int64]:
    """One label per row of integer class counts, by permute-and-flip (McKenna, Sheldon 2020)
    for the monotone count utility of sensitivity 1, exactly.

    For each row: visit the classes in a uniformly random order and stop at the first class c
    accepted with probability exp(-epsilon' (max(counts) - counts[c])) (the top class always
    is), epsilon' the largest double <= epsilon. Every draw is exact
    (:func:`dpcore.selection.permute_and_flip`), so the law is exactly permute-and-flip's, in
    floating point too.

    Privacy: epsilon'-DP (<= epsilon) for each row, under add/remove neighbours when one record
    changes one count of the row by 1 (the counts are monotone, so there is no factor 2). Never
    less likely than the exponential mechanism at the same epsilon to return the top class.
    Nothing is charged here.
    """
    counts = np.asarray(counts, dtype=np.int64)
    rng = check_random_state(random_state)
    if counts.size and np.abs(counts).max() >= 2**53:
        raise ValueError("counts must be below 2**53 in absolute value (exact doubles)")
    # permute_and_flip's calibration, once; each row then flips its coins as it would
    scale = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=epsilon, monotonic=True,
                                           method=EXACT_PERMUTE_AND_FLIP).scale
    if counts.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    return flip_coins_rows(counts.astype(np.float64), scale, rng)  # exact: |counts| < 2**53
