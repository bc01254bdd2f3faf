"""Exact permute-and-flip for the leaf labels of private trees (McKenna, Sheldon 2020): a class
per row of integer class counts, each acceptance an exact Bernoulli(exp(-x)) draw of
``dpcore._random`` (Canonne, Kamath, Steinke 2020).

Privacy
-------
:func:`permute_and_flip_labels` states its guarantee (epsilon-DP per row for the monotone count
utility of sensitivity 1, epsilon rounded down to 31 significant bits); it charges nothing (its
callers release and charge).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcore import _random
from dpcore.random import check_random_state

__all__ = ["permute_and_flip_labels"]


_PF_BITS = 31


def _epsilon_ratio(epsilon):
    """(p, s) with p / 2**s <= epsilon, p < 2**31, s <= 62: epsilon rounded down to 31
    significant bits (a smaller epsilon is a stronger guarantee). floor(epsilon 2**s) grows
    with s, so s is the largest exponent <= 62 (and >= 0) leaving it below 2**31, read from
    the bit length of floor(epsilon 2**62) (floor(floor(a) / 2**k) = floor(a / 2**k))."""
    f = Fraction(epsilon)
    top = (f.numerator << 62) // f.denominator          # floor(epsilon 2**62)
    extra = top.bit_length() - _PF_BITS                 # bits beyond 31
    if extra <= 0:
        return top, 62
    if extra <= 62:
        return top >> extra, 62 - extra
    return min(math.floor(f), 2**_PF_BITS - 1), 0


def _accept(gap, p, s, rng):
    """Bernoulli(exp(-gap p / 2**s)), exactly: a product of exact Bernoulli(exp(-a / 2**s))
    draws with a = p g < 2**63 (gap cut into pieces g < 2**32)."""
    while gap > 0:
        g = min(gap, 2**32 - 1)
        if not _random._bernoulli_exp(rng, p * g, 1 << s, 1)[0]:
            return False
        gap -= g
    return True


def permute_and_flip_labels(counts, epsilon, random_state=None):
    """One label per row of integer class counts, by permute-and-flip (McKenna, Sheldon 2020)
    for the monotone count utility of sensitivity 1, exactly.

    For each row: visit the classes in a uniformly random order and stop at the first class c
    accepted with probability exp(-epsilon' (max(counts) - counts[c])) (the top class always
    is), epsilon' = epsilon rounded down to 31 significant bits. Every draw is exact: the
    order by numpy's bounded integers (rejection sampling), each acceptance by exact
    Bernoulli(exp(-a / 2**s)) draws (Canonne, Kamath, Steinke 2020), so the law is exactly
    permute-and-flip's, in floating point too.

    Privacy: epsilon'-DP (<= epsilon) for each row, under add/remove neighbours when one record
    changes one count of the row by 1 (the counts are monotone, so there is no factor 2). Never
    less likely than the exponential mechanism at the same epsilon to return the top class.
    """
    counts = np.asarray(counts, dtype=np.int64)
    rng = check_random_state(random_state)
    p, s = _epsilon_ratio(epsilon)
    labels = np.empty(counts.shape[0], dtype=np.int64)
    for i, row in enumerate(counts):
        best = int(row.max())
        for c in rng.permutation(row.size):
            if _accept(best - int(row[c]), p, s, rng):
                labels[i] = c
                break
    return labels
