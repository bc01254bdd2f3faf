"""The public pieces of the private trees that read no record: the threshold grid (the exact
doubles where a bin starts), the split quality and its sensitivity, the base measure's offsets,
and the defaults chosen from public inputs. :mod:`dpcore.learn._tree` grows the trees with them.

Privacy
-------
Nothing here draws or releases anything: these are public functions of public inputs (bounds,
bin counts, epsilon, the number of classes) or of counts whose sensitivity
:func:`split_sensitivity` states; the releases and their guarantees are in
:mod:`dpcore.learn._tree`.
"""
from __future__ import annotations

import math
import struct
import sys

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["bin_threshold", "counted_defaults", "forest_defaults", "random_forest_defaults",
           "rule_for_count", "sized_rules", "split_sensitivity", "split_utility",
           "tree_defaults"]

# ------------------------------------------------------------------------------------------------
# The public grid

_SIGN = 1 << 63


def _key(x):
    """An integer with the order of the doubles (-0.0 and 0.0 share 0)."""
    b = struct.unpack("<q", struct.pack("<d", x))[0]
    return b if b >= 0 else -(b & (_SIGN - 1))


def _from_key(key):
    return struct.unpack("<d", struct.pack("<Q", key if key >= 0 else -key | _SIGN))[0]


def bin_threshold(lower: float, inv: float, j: int) -> float:
    """The smallest double x whose bin floor(fl(fl(x - lower) * inv)) is >= j (j >= 1), i.e.
    lower + j / inv up to rounding, found by stepping from there over the adjacent doubles (by
    bisection over the ordered doubles when it is further). The kernel's binning is
    non-decreasing in x, so "bin >= j" and "x >= bin_threshold" agree for every double x: a
    record lands on the same side of a split when fitting and when predicting."""
    lower, inv = float(lower), float(inv)
    x = lower + j / inv
    if math.isfinite(x):   # usually a few doubles from the answer: step (+ 0.0: never -0.0)
        up = not (x - lower) * inv >= j   # (a NaN product does not reach j)
        for _ in range(8):
            y = math.nextafter(x, math.inf if up else -math.inf)
            if ((y - lower) * inv >= j) == up:
                return (y if up else x) + 0.0
            x = y

    def reaches(key):
        return (_from_key(key) - lower) * inv >= j

    # bracket bin(a) < j <= bin(b) around lower + j / inv, widened by doubling (a few steps);
    # the whole range of the doubles bounds it
    floor, ceiling = _key(-sys.float_info.max), _key(sys.float_info.max)
    guess = min(max(_key(lower + j / inv), floor), ceiling)
    width = 4
    a = max(guess - width, floor)
    while a > floor and reaches(a):
        width *= 2
        a = max(guess - width, floor)
    width = 4
    b = min(guess + width, ceiling)
    while b < ceiling and not reaches(b):
        width *= 2
        b = min(guess + width, ceiling)
    while b - a > 1:
        m = (a + b) // 2
        if reaches(m):
            b = m
        else:
            a = m
    return _from_key(b)


# ------------------------------------------------------------------------------------------------
# Split quality (public functions of counts: the tests check their sensitivities)

def split_utility(left: ArrayLike, right: ArrayLike, criterion: str) -> np.ndarray:
    """Quality of binary splits from the class counts of their two children (arrays (..., k)).

    ``"max"``: sum over the children of the largest class count (Friedman-Schuster's max
    operator); one record changes it by 0 or 1, in the same direction for every split
    (monotone, sensitivity 1).
    ``"gini"``: sum over the children of sum_c n_c**2 / n (0 for an empty child), which is
    minus the count-weighted Gini impurity plus the node's size; the size is the same for every
    split of a node, so the exponential mechanism's law is the one of the Gini quality. Adding a
    record of class c to a child with counts a (total t) changes its term by
    (t (2 a_c + 1) - sum a**2) / (t (t + 1)), which lies in (-1, 1]: sensitivity 1.

    The definition: the trees' growing loop computes the same doubles (with
    :func:`_base_offsets`) in one kernel, ``dpcore._tree_scores.level_scores``
    (tests/test_tree_scores.py checks that they are equal).
    """
    left, right = np.asarray(left), np.asarray(right)
    if criterion == "max":   # integers (exact) until the end
        return (left.max(axis=-1) + right.max(axis=-1)).astype(np.float64)
    left, right = left.astype(np.float64), right.astype(np.float64)
    out = np.zeros(left.shape[:-1])
    for side in (left, right):
        total = side.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            term = (side * side).sum(axis=-1) / total
        out += np.where(total > 0, term, 0.0)
    return out


def split_sensitivity(criterion: str, n_classes: int) -> tuple[float, bool]:
    """(sensitivity, monotonic) of :func:`split_utility` as computed in doubles.

    The max operator is an exact integer, and so is its sum with the base measure's offset (a
    multiple of 2**-14 below 2**36 in size, :func:`_base_offsets`: the sum is a multiple of
    2**-14 below 2**38, a double). The Gini utility is a sum of 2k + 2 rounded terms, each at
    most the node size n <= 2**36 (``_base.MAX_RECORDS``), so its rounding error is below
    (2k + 3) 2**-53 2**36 = (2k + 3) 2**-17 on each data set, and adding the offset rounds once
    more, by at most 2**-53 2**38 = 2**-15; the sensitivity 1 is inflated by twice both
    (Casacuberta et al. 2022: rounding adds to the sensitivity)."""
    if criterion == "max":
        return 1.0, True
    return 1.0 + (2 * n_classes + 3) * 2.0**-16 + 2.0**-14, False


_OFFSET_GRID = 2.0**-14


def _base_offsets(per_feature, scale):
    """Utility offsets o_f = -log(n_f) / scale (n_f: a node's candidates on feature f), so that
    the exponential mechanism at score scale ``scale`` draws from the base measure weighing each
    feature equally: exp(scale (u + o_f)) = exp(scale u) / n_f. Rounded to multiples of 2**-14
    (the base measure moves by a factor exp(scale 2**-15) at most, and stays public), so that
    an integer utility plus its offset is an exact double; all 0 (the uniform base measure)
    when an offset would reach 2**36 (a scale below about 2**-32)."""
    with np.errstate(divide="ignore"):
        offsets = -np.log(per_feature) / scale     # -inf where n_f = 0: no candidate there
    usable = np.isfinite(offsets)
    if np.any(np.abs(offsets[usable]) >= 2.0**36):
        return np.zeros(per_feature.shape)
    offsets[~usable] = 0.0
    return np.round(offsets / _OFFSET_GRID) * _OFFSET_GRID


# ------------------------------------------------------------------------------------------------
# Defaults from public inputs (chosen on bench/dev_suite.py, studies "tree", "forest" and
# "tree-rules")

SMALL_EPSILON = 0.2
# Below SMALL_EPSILON: (max_depth, n_bins, split_share, split_levels) by the public shape of the
# problem (chosen on bench/dev_suite.py tree-rules, see tree_defaults). From WIDE features on a
# random split rarely falls on an informative feature, so the root's split takes half of
# epsilon; from MANY_CLASSES classes on more leaves and two data-driven levels pay.
WIDE = 20
MANY_CLASSES = 4
SMALL_NARROW = (4, 32, 0.2, 2)
SMALL_WIDE = (4, 32, 0.5, 1)
SMALL_MANY_CLASSES = (6, 32, 0.3, 2)


def tree_defaults(epsilon: float, n_classes: int,
                  n_features: int | None = None) -> tuple[int, int, float, int]:
    """(max_depth, n_bins, split_share, split_levels) of :class:`DecisionTreeClassifier` from
    public inputs (``n_features`` None: not known yet, as before the fit). The number of
    records is private under add/remove neighbours and is not used.

    Below ``SMALL_EPSILON`` (0.2), by the shape of the problem (``split_levels`` levels from the
    root look at the data and share ``split_share`` of epsilon; the levels below split at
    random, at no cost):

    * ``MANY_CLASSES`` (4) classes or more: depth 6, 30% of epsilon shared by the two top
      levels (``SMALL_MANY_CLASSES``): more classes need more leaves;
    * 2 or 3 classes and ``WIDE`` (20) features or more: depth 4, half of epsilon for the
      root's split alone (``SMALL_WIDE``): a random split rarely cuts an informative feature
      among many;
    * 2 or 3 classes and fewer features (or ``n_features`` unknown): depth 4, a fifth of
      epsilon shared by the two top levels (``SMALL_NARROW``).

    Chosen on ``bench/dev_suite.py tree-rules`` (26 generated tables and diabetes, 120 to
    30,000 records, 4 to 64 features, 2 to 10 classes, two splits each, under min-max,
    standardised and unit-norm preprocessing: 162 cells, epsilon 0.1, 12 noise seeds, mean test
    accuracy per cell), against the previous rule (depth 5 with a tenth of epsilon for every
    level below 20 features, the wide rule from 20 on). Mean accuracy, previous -> chosen (cells
    below diffprivlib's mean): 2-3 classes, < 20 features, 78 cells under 10^4 records 0.556
    -> 0.558 (30 -> 28), 12 cells of 12,000-20,000 records 0.572 -> 0.625; 4-10 classes, 42
    cells with >= 20 features 0.204 -> 0.213 (7 -> 5; on the digit-like glyph tables 0.172
    -> 0.197, diffprivlib 0.172), 12 cells with fewer 0.409 -> 0.501; 2-3 classes with >= 20
    features keep the wide rule (0.748 on 18 cells, ahead of every two-level rule tried:
    0.598-0.641; on the 25,000-record table with 40 features a second data-driven level would
    have gained 0.03, 0.621 -> 0.647). All 32 bins. Re-checked on fresh seeds (fifth
    session, ``tree-rules --first-seed 7000 .. 11000``, 80 seeds at 0.1 in all): a shallower
    tree with one data-driven level, (3, 0.1, 1), leads on the tables of 84 to 105 training
    records and loses 0.04 on those of 12,000 to 20,000 (0.590 -> 0.605 and 0.634 -> 0.593 at
    0.1; level with the rule at 0.05, 0.125 and 0.15): the trade is the private number of
    records, so the rule stayed; since the seventh session a noisy record count, bought with
    2% of epsilon, makes that trade (:func:`sized_rules`: the estimators read it when
    max_depth, split_share and split_levels are all "auto").

    From 0.2 on: 32 bins, 70% of epsilon for the splits of every level, and a depth that grows
    with epsilon and with the number of classes k: ceil(log2 k) + max(0, round(log2
    epsilon)), clipped to 2 .. 6, so that the tree has at least one leaf per class (before
    issue 28's widened suite the depth went below log2 k for epsilon < 0.7). On the 54
    tree-rules cells with 4 to 10 classes (8 seeds) mean accuracy 0.339 -> 0.366 at epsilon
    0.25 and 0.424 -> 0.454 at 0.5, the gain on the larger tables: the cell is worse in 27 and
    15 of the 54, mostly the small tables of 64 features at 0.25, where a tree one level
    shallower did a little better.
    """
    if epsilon < SMALL_EPSILON:
        if n_classes >= MANY_CLASSES:
            return SMALL_MANY_CLASSES
        if n_features is not None and n_features >= WIDE:
            return SMALL_WIDE
        return SMALL_NARROW
    per_class = math.ceil(math.log2(n_classes))
    depth = per_class + max(0, round(math.log2(epsilon)))
    depth = min(max(depth, 2), 6)
    return depth, 32, 0.7, depth


# Below SMALL_EPSILON with 2-3 classes and fewer than WIDE features, the rule also reads a noisy
# record count (dpcore.learn._tree_plan) bought with COUNT_SHARE of epsilon: below SMALL_TABLE
# noisy records per tree the tree takes SMALL_TABLE_RULE (see sized_rules). At epsilon 0.1 the
# count's noise has scale 500, far below the gap between the tables where each rule wins.
COUNT_SHARE = 0.02
SMALL_TABLE = 2000
SMALL_TABLE_RULE = (4, 32, 0.1, 1)


def sized_rules(epsilon: float, n_classes: int,
                n_features: int | None = None) -> tuple[tuple, tuple] | None:
    """(rule for a small table, rule otherwise), each (max_depth, n_bins, split_share,
    split_levels), when :class:`DecisionTreeClassifier`'s defaults read a noisy record count;
    None when they do not (the rule is :func:`tree_defaults`'). Public inputs only: the choice
    between the two is :func:`rule_for_count`'s, from the released noisy count.

    Below ``SMALL_EPSILON`` with 2 or 3 classes and fewer than ``WIDE`` features
    (``SMALL_NARROW``'s group; ``n_features`` None: not known yet, as before the fit, and
    treated as narrow): ``SMALL_TABLE_RULE`` (depth 4, a tenth of the budget for the root's
    split alone, the levels below at random: the leaves get the rest) below ``SMALL_TABLE``
    (2000) noisy records, ``SMALL_NARROW`` (the two top levels share a fifth) from there on.
    Both use the same bins (the records are binned before the count is drawn). The count takes
    ``COUNT_SHARE`` (2%) of epsilon.

    Chosen on ``bench/dev_suite.py tree-rules`` (seventh session, the 2-3 class tables with
    fewer than 20 features; seeds unused before). Among 11 candidate rules (depth 2 to 5, 0 to
    30% for the splits on 0 to 2 levels, 16 or 32 bins; 12 seeds, epsilon 0.1 and 0.15), depth
    4 with a tenth on the root led on the 72 cells of tables of 120 to 442 records (0.600 and
    0.637 against the previous rule's 0.573 and 0.611; depth 3 with a tenth 0.599 and 0.625),
    was level with the previous rule on the 5000-record table (0.758 / 0.761) and behind it
    from 12,000 records on (0.744 / 0.752 and 0.462 / 0.518 on the 12,000 and 20,000-record
    tables): hence a threshold between, at 2000 records. With the count at 5% of epsilon the
    small tables gained about 0.01 less than with 2% or 1% (100 seeds, epsilon 0.1: +0.009 /
    +0.011 / +0.014 over the previous rule); 2% keeps the count's noise (scale 500 at epsilon
    0.1, 1000 at 0.05) well inside the gap between the tables where each rule wins. Confirmed
    on fresh seeds (``tree-rules --rules 4,0.2,2,32 4,0.1,1,32 --first-seed 320000 --seeds 100
    --epsilons 0.05 0.1 0.15``), previous rule -> these defaults, mean over the 72 cells of 84
    to 309 training records (cells below diffprivlib's mean): 0.503 -> 0.511 (23 -> 18) at
    epsilon 0.05, 0.571 -> 0.588 (13 -> 12) at 0.1, 0.613 -> 0.631 (10 -> 9) at 0.15; on the
    18 cells of 3,500 to 14,000 training records (``--first-seed 310000 --seeds 24``) 0.674
    -> 0.674 at 0.1 and 0.686 -> 0.686 at 0.15."""
    if epsilon >= SMALL_EPSILON or n_classes >= MANY_CLASSES:
        return None
    if n_features is not None and n_features >= WIDE:
        return None
    return SMALL_TABLE_RULE, SMALL_NARROW


def rule_for_count(rules: tuple[tuple, tuple], n_records_noisy: int,
                   n_trees: int = 1) -> tuple:
    """The rule of :func:`sized_rules`' pair that a tree takes: the small table's when the
    noisy record count per tree (``n_records_noisy / n_trees``: each tree of a partition
    forest gets about that many records) is below ``SMALL_TABLE``. A function of the released
    count and public inputs only (post-processing)."""
    return rules[0] if n_records_noisy < SMALL_TABLE * n_trees else rules[1]


def counted_defaults(epsilon: float, n_classes: int, n_features: int | None,
                     n_records_noisy: int, n_trees: int = 1) -> tuple:
    """(max_depth, n_bins, split_share, split_levels) of a tree whose fit released the noisy
    record count ``n_records_noisy``: :func:`rule_for_count` of :func:`sized_rules` (the
    :func:`tree_defaults` rule where no count is read)."""
    rules = sized_rules(epsilon, n_classes, n_features)
    if rules is None:
        return tree_defaults(epsilon, n_classes, n_features)
    return rule_for_count(rules, n_records_noisy, n_trees)


def random_forest_defaults(epsilon: float) -> tuple[int, int]:
    """(n_estimators, max_depth) of :class:`RandomForestClassifier` with ``algorithm="random"``
    from public inputs.

    Each tree's leaves get epsilon / n_estimators, so a smaller epsilon wants fewer trees:
    round(10 sqrt(epsilon)) trees, clipped to 5 .. 25 (10 at epsilon 1), of depth 5 (3 below
    epsilon 0.2, where fewer, larger leaves keep some signal; from epsilon 5 on,
    5 + round(log2(epsilon / 5)), at most 8, as leaves can then be smaller). On the development
    sets this led the previous 10 trees of depth 8 from epsilon 0.1 to 5; depths 4 to 6 were
    within the noise of each other from epsilon 1 to 10, depth 8 led depth 5 at 50 (22 cells
    of 26). The number of records is private and not used.
    """
    trees = min(max(round(10.0 * math.sqrt(epsilon)), 5), 25)
    if epsilon < SMALL_EPSILON:
        return trees, 3
    return trees, min(8, 5 + max(0, round(math.log2(epsilon / 5.0))))


def forest_defaults(epsilon: float, n_classes: int,
                    n_features: int | None = None) -> tuple[int, int, int, float, int]:
    """(n_estimators, max_depth, n_bins, split_share, split_levels) of
    :class:`RandomForestClassifier` (trees on a random partition of the records) from public
    inputs: one tree, grown with :func:`tree_defaults`.

    Chosen on bench/dev_suite.py (study "forest": 30 development sets of 150 to 5000 records,
    epsilon 0.1 to 5, 7 noise seeds): one tree led 2, 3, 5, 10 and 20 trees at every epsilon
    (mean accuracy 0.444 / 0.671 / 0.746 / 0.773 / 0.795 at epsilon 0.1 / 0.5 / 1 / 2 / 5;
    3 trees, the best ensemble, 0.420 / 0.552 / 0.636 / 0.718 / 0.766; the random trees of
    ``algorithm="random"`` 0.444 / 0.533 / 0.584 / 0.655 / 0.719): a tree on a T-th of the
    records loses more than the vote of T of them wins back on sets of this size. On the five
    development tables of 12,000 to 30,000 records added for issue 28 (study "forest" with
    ``--sets``, epsilon 0.1 and 1) one tree still led 2 to 20 trees on average, by 0.011 to
    0.028, though 20 trees gained 0.08 on one of them at epsilon 1. The number of records is
    private and not used; on much larger data, give ``n_estimators``.
    """
    return (1,) + tree_defaults(epsilon, n_classes, n_features)
