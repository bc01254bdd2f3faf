"""A private tree's plan, checked before anything is charged (``dpcore.learn._tree``): its
parameters, the split of epsilon between the levels that look at the data and the leaves, and,
when the defaults read one (:func:`dpcore.learn._tree_grid.sized_rules`), the noisy record
count that picks the rule: its budget and its draw, inside the tree's release.

Privacy
-------
Arithmetic on public parameters, except :func:`noisy_record_count`, which releases the number
of records plus exact discrete Laplace noise (:func:`dpcore.discrete_laplace`) of scale t = 1 /
epsilon_count rounded up: one record added or removed changes the count by 1, so the count is
(1 / t)-DP under add/remove neighbours. :func:`count_budget` returns t and the rest of epsilon
(epsilon - 1 / t, rounded down) for the splits and leaves (:func:`private_plan`); the count and
the tree compose sequentially (the rule the tree then takes is a function of the released
count and public inputs only), within the epsilon the tree charges. The caller
(``DecisionTreeClassifier``, ``RandomForestClassifier``) states the guarantee and charges it.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_down, round_up
from dpcore.learn._tree_grid import COUNT_SHARE, sized_rules, split_sensitivity
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, discrete_laplace
from dpcore.selection import ExponentialMechanism

__all__ = ["CRITERIA", "MAX_TABLE", "check_bins", "count_budget", "noisy_record_count",
           "private_plan", "sized_plans"]

CRITERIA = ("gini", "max")
# Largest count table one tree level may need (nodes x features x bins x classes, int64): a
# public limit on the parameters, checked before anything is charged.
MAX_TABLE = 2**26


def check_bins(n_bins: Any, n_features: int | None) -> Any:
    """An int, or one int per feature, each in 2 .. 65535."""
    if np.ndim(n_bins) == 0:
        return check.integer(n_bins, "n_bins", minimum=2, maximum=2**16 - 1)
    values = [check.integer(b, "n_bins", minimum=2, maximum=2**16 - 1)
              for b in np.asarray(n_bins).ravel()]
    if np.ndim(n_bins) != 1 or (n_features is not None and len(values) != n_features):
        raise ValueError("n_bins must be an int or one int per feature (n_features of them)")
    return np.array(values, dtype=np.int64)


def private_plan(epsilon: float, bounds: Any, classes: Any, depth: Any, n_bins: Any,
                 share: Any, criterion: str, n_features: int | None, n_trees: int = 1,
                 split_levels: Any = None) -> tuple:
    """(max_depth, n_bins, the splits' exponential mechanism of each level (None: random
    splits), the leaves' epsilon) of private trees, every parameter checked (before anything
    is charged). The first ``split_levels`` levels (None: all) share the splits' budget; the
    levels below split at random."""
    depth = check.integer(depth, "max_depth", minimum=0, maximum=20)
    n_bins = check_bins(n_bins, n_features)
    share = check.probability(share, "split_share", open_low=False)
    if split_levels is not None:
        split_levels = check.integer(split_levels, "split_levels", minimum=0, maximum=20)
    looking = depth if split_levels is None else min(depth, split_levels)
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    k = 2 if classes is None else classes.size
    mech = None
    if share > 0 and looking:
        split_eps = round_down(Fraction(epsilon) * Fraction(share) / looking)
        if split_eps <= 0:
            raise ValueError("epsilon, max_depth and split_share leave no budget per level: use "
                             "a larger epsilon")
        sensitivity, monotonic = split_sensitivity(criterion, k)
        mech = ExponentialMechanism.calibrate(sensitivity=sensitivity, epsilon=split_eps,
                                              monotonic=monotonic, method="exact")
    mechs = tuple(mech if level < looking else None for level in range(depth))
    spent = sum((Fraction(m.epsilon_effective) for m in mechs if m is not None), Fraction(0))
    leaf_eps = round_down(Fraction(epsilon) - spent)
    if leaf_eps <= 0:
        raise ValueError("epsilon, max_depth and split_share leave no budget for the leaves")
    with np.errstate(over="ignore"):
        narrow = not np.all(np.isfinite(np.max(n_bins) / (bounds[1] - bounds[0])))
    if narrow:
        raise ValueError("bounds: upper - lower is too small for n_bins equal bins")
    if n_features is not None and depth:
        if n_trees * 2 ** (depth - 1) * n_features * int(np.max(n_bins)) * k > MAX_TABLE:
            raise ValueError(
                f"n_estimators * 2**(max_depth - 1) * n_features * max(n_bins) * n_classes must "
                f"be <= 2**26 (the count table of a level), got max_depth={depth}, "
                f"n_bins={n_bins}, n_features={n_features}"
            )
    return depth, n_bins, mechs, leaf_eps


def count_budget(epsilon: float) -> tuple[float, float]:
    """(t, rest): the record count's discrete Laplace scale t = 1 / (``COUNT_SHARE`` epsilon)
    rounded up (so its effective epsilon 1 / t is at most that share), and the rest of the
    budget, epsilon - 1 / t rounded down: 1 / t + rest <= epsilon exactly (as rationals). A
    scale above 2**44 (epsilon below about 2**-40) is a ValueError naming epsilon."""
    scale = round_up(1 / (Fraction(epsilon) * Fraction(COUNT_SHARE)))
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError("epsilon gives the record count a noise scale above 2**44: use a "
                         "larger epsilon")
    return scale, round_down(Fraction(epsilon) - 1 / Fraction(scale))


def noisy_record_count(n: int, scale: float, rng: np.random.Generator) -> int:
    """n plus one exact discrete Laplace draw of scale ``scale`` (an int; may be negative)."""
    value = np.array([n], dtype=np.int64)
    discrete_laplace(scale, add_to=value, random_state=rng)
    return int(value[0])


def sized_plans(epsilon: float, bounds: Any, classes: Any, n_bins: Any, criterion: str,
                n_features: int | None, n_trees: int = 1) -> tuple | None:
    """(count scale, the two rules of :func:`sized_rules`, {rule: its plan}) when the
    defaults read a noisy record count, else None. The plans (:func:`private_plan`) share the
    rest of epsilon after the count and ``n_bins`` (the caller's resolved bins: the records
    are binned before the count is drawn); every one is checked here, before the charge."""
    rules = sized_rules(epsilon, 2 if classes is None else classes.size, n_features)
    if rules is None:
        return None
    scale, rest = count_budget(epsilon)
    plans = {rule: private_plan(rest, bounds, classes, rule[0], n_bins, rule[2], criterion,
                                n_features, n_trees, rule[3]) for rule in rules}
    return scale, rules, plans
