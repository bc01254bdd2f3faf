"""Private decision trees: complete trees whose splits are drawn with the exponential mechanism and
whose leaves release a label by permute-and-flip; forests of such trees, each grown on a random
part of the records (parallel composition), or of random decision trees (Jagannathan,
Pillaipakkamnatt, Wright) with noisy leaves.

Counting, binning and tree walks run in the compiled kernel ``dpcore._tree``. Every split is drawn
by :class:`dpcore.selection.ExponentialMechanism` (method ``"exact"``), every leaf label by the
exact permute-and-flip of :func:`permute_and_flip_labels` (``learn._permute_and_flip``), and
every noisy count is exact discrete Laplace noise (:func:`dpcore.discrete_laplace`, ``add_to=``) on an
integer count.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any
from fractions import Fraction

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _tree
from dpcore.mechanisms import discrete_laplace
from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore._release import Cost, release
from dpcore.curves import BoundedRange, Composed, PureDP
from dpcore.learn import _base
from dpcore.learn._dask import (DaskLevelCounts, DaskRecords, check_tree_flags, class_index,
                                is_dask_collection, tree_chunks)
from dpcore.learn._permute_and_flip import permute_and_flip_labels
from dpcore.learn._tree_grow import grow_trees
from dpcore.learn._tree_memory import record_arrays
from dpcore.learn._tree_random import random_tree_arrays
from dpcore.learn._tree_grid import (  # noqa: F401 (_base_offsets, bin_threshold: re-exported)
    _base_offsets,
    bin_threshold,
    forest_defaults,
    random_forest_defaults,
    counted_defaults,
    rule_for_count,
    split_sensitivity,
    split_utility,
    tree_defaults,
)
from dpcore.learn._tree_plan import noisy_record_count, private_plan, sized_plans
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE
from dpcore.random import RandomStateLike

__all__ = ["DecisionTreeClassifier", "RandomForestClassifier", "SingleLeafWarning", "Trees",
           "forest_defaults", "permute_and_flip_labels", "random_forest_defaults",
           "split_sensitivity", "split_utility", "tree_defaults"]

VOTING = ("proba", "counts")
ALGORITHMS = ("partition", "random")
_MAX_NODES = 2**24


class SingleLeafWarning(UserWarning):
    """The released tree (or forest) predicts the same class for every input: in effect a single
    leaf. At a small epsilon on few records the noise can drown every split; the model is then
    no better than always answering that class. Raised after the release, from its public
    output only (it costs no privacy); silence it with :func:`warnings.filterwarnings`."""


@dataclass
class Trees:
    """One or more binary trees in flat node arrays (the layout the kernel walks).

    Node v is a leaf when ``feature[v] == -1``; otherwise a record goes to ``right[v]`` (always
    ``left[v] + 1``) when x[feature[v]] >= threshold[v], else to ``left[v]``. ``depth`` is the
    depth of the deepest leaf. ``roots[t]`` is the root of tree t;
    ``slot[v]`` is the row of leaf v in ``values`` (the released, noisy class counts).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    slot: np.ndarray
    roots: np.ndarray
    values: np.ndarray
    depth: int

    @property
    def n_leaves(self) -> int:
        return int(self.values.shape[0])

    def apply(self, X: np.ndarray) -> np.ndarray:
        """(n, n_trees) index of the leaf each row of X reaches in each tree."""
        out = np.empty((X.shape[0], self.roots.size), dtype=np.int32)
        _tree.apply(X, self.feature, self.threshold, self.left, self.roots, self.depth, out)
        return out

    def vote(self, X: np.ndarray) -> np.ndarray:
        """(n, k) sum over the trees of the values of the leaves reached."""
        out = np.zeros((X.shape[0], self.values.shape[1]))
        _tree.vote(X, self.feature, self.threshold, self.left, self.roots, self.depth, self.slot,
                   self.values, out)
        return out


# ------------------------------------------------------------------------------------------------
# Shared checks

def _check_common(est, n_features):
    epsilon = _base.check_epsilon(est.epsilon)
    if est.bounds is None:
        raise ValueError("bounds is required: give public feature bounds (lower, upper); "
                         "they are never inferred from the data")
    bounds = _base.bounds_array(est.bounds, "bounds", n_features)
    classes = _base.check_classes(est.classes)
    return epsilon, bounds, classes


def _dlap_scale(sensitivity_over_epsilon, names):
    """The discrete Laplace scale, rounded up (so the guarantee is never weaker than stated)."""
    scale = round_up(sensitivity_over_epsilon)
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError(f"{names} give a noise scale above 2**44: use a larger epsilon")
    return scale


def _labels(est, X, y, classes, *, finite=True):
    """Validated X (float64, C order), the label set (public ``classes``, or read from y with a
    PrivacyWarning when None) and the class index of each label (integers: y itself when the
    classes are 0 .. k - 1, else uint8 or intp). No message quotes a label. ``finite=False`` leaves the check that X is finite to the caller (the tree's binning
    pass makes it, the forest a sum)."""
    kw = {}
    if not finite:   # scikit-learn < 1.6 names it force_all_finite
        kw = {"ensure_all_finite" if _base._sk_validate_data else "force_all_finite": False}
    X, y = _base.validate_data(est, X, y, reset=True, dtype=np.float64, order="C", **kw)
    if classes is None:
        _base.check_targets(y)
        classes = _base.label_set(y, None)
    # with public classes, membership is the whole check (a continuous y fails it too)
    try:
        if (classes.dtype.kind in "iu" and y.dtype.kind in "iu" and classes[0] == 0
                and classes[-1] == classes.size - 1):
            # classes 0 .. k - 1 (sorted distinct integers: all of them): a label is its index
            index = y
            found = y.min() >= 0 and y.max() < classes.size
        elif classes.size <= 16:   # a few passes without temporaries beat searchsorted's
            index = np.zeros(y.shape, dtype=np.uint8)   # the number of classes below y
            found = 0
            for c in classes:
                index += c < y
                found += np.count_nonzero(c == y)
            found = found == y.size
        else:
            index = np.searchsorted(classes, y)
            found = np.all(np.take(classes, np.minimum(index, classes.size - 1)) == y)
    except (TypeError, ValueError):
        found = False   # labels not comparable with the classes
    if not found:
        raise ValueError("y contains labels outside classes")
    return X, classes, index   # callers convert


def _noisy(counts, scale, rng):
    """counts (int64) plus independent exact discrete Laplace noise, as float64."""
    flat = np.ascontiguousarray(counts, dtype=np.int64).reshape(-1)
    discrete_laplace(scale, add_to=flat, random_state=rng)
    return flat.reshape(np.shape(counts)).astype(np.float64)


def _proba(votes):
    """Class probabilities from summed noisy counts: negatives clipped, uniform when nothing is
    left (post-processing)."""
    votes = np.maximum(votes, 0.0)
    total = votes.sum(axis=1, keepdims=True)
    k = votes.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, votes / total, 1.0 / k)


class _TreeClassifierBase(_base.SharedStateCloneMixin, ClassifierMixin, BaseEstimator):

    def _votes(self, X):
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64, order="C")
        return self._voting_tree.vote(X)

    @property
    def _voting_tree(self):
        return self.tree_

    def predict_proba(self, X):
        """Class probabilities: the normalised noisy class counts of the leaves reached (summed
        over the trees; negative counts count as 0)."""
        return _proba(self._votes(X))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """The class with the largest (summed) noisy count."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def apply(self, X):
        """Index of the leaf each row reaches (one column per tree for a forest)."""
        check_is_fitted(self)
        X = _base.validate_data(self, X, reset=False, dtype=np.float64, order="C")
        leaves = self.tree_.slot[self.tree_.apply(X)]
        return leaves[:, 0] if isinstance(self, DecisionTreeClassifier) else leaves


# ------------------------------------------------------------------------------------------------
# Decision tree: exponential-mechanism splits, permute-and-flip leaves

class DecisionTreeClassifier(_TreeClassifierBase):
    """Decision tree with epsilon-DP: splits drawn by the exponential mechanism (Friedman,
    Schuster 2010), leaf labels by permute-and-flip (McKenna, Sheldon 2020).

    Each feature k is cut into B_k = ``n_bins`` (or ``n_bins[k]``) equal bins of the public
    ``bounds`` [l_k, u_k]: the candidate thresholds are l_k + j (u_k - l_k) / B_k,
    j = 1 .. B_k - 1 (exactly: the doubles where floor((x - l_k) B_k / (u_k - l_k)) reaches j,
    :func:`bin_threshold`); values outside the bounds fall in the end bins (clipping). The tree
    is complete, of depth ``max_depth``, grown level by level: every internal node draws its
    split (feature, threshold) among the grid thresholds inside its box (the bounds narrowed by
    the splits above; all sum_k (B_k - 1) at the root) with the exponential mechanism on the
    quality ``criterion`` of its records, at ``split_share`` * epsilon / max_depth, over the
    base measure that gives every feature with candidates the same weight, shared equally by
    its thresholds (so a feature already cut keeps its chance to be cut again where the records
    are). A level that does not look at the data (all with ``split_share=0``; those below the
    first ``split_levels``, which then share the splits' budget, at ``split_share`` * epsilon /
    split_levels each) takes a public split: below 20 features a feature with probability
    proportional to its candidates in the node's box, cut at the middle of them (of the two
    middle ones, each with probability 1/2); from 20 features on a feature uniformly among those
    with candidates, then one of its candidates uniformly. Every
    leaf then releases one class, drawn by permute-and-flip on its class counts at the rest of
    the budget; it predicts that class. No node count is released, so a small node costs
    nothing more than a large one (there is no stopping rule that the noise could trip at the
    root). If every leaf releases the same class the fit warns with :class:`SingleLeafWarning`.

    Below epsilon 0.2, with 2 or 3 classes and fewer than 20 features, and ``max_depth``,
    ``split_share`` and ``split_levels`` all ``"auto"``, the fit first releases the number of
    records with exact discrete Laplace noise, at ``_tree_grid.COUNT_SHARE`` (2%) of epsilon,
    and grows the tree at the rest of the budget with the rule that count picks
    (:func:`sized_rules`, :func:`rule_for_count`): below ``_tree_grid.SMALL_TABLE`` (2000)
    noisy records depth 4 with a tenth of the budget for the root's split alone (the levels
    below split at random), else :func:`tree_defaults`' rule. On small tables the root's split
    needs less of the budget than the leaves, which then hold few records each.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0: ``split_share`` of it for the splits (epsilon * split_share /
        min(max_depth, split_levels) per level that looks at the data), the rest for the leaf
        labels; when a record count is drawn (see above) it takes 2% first and the splits and
        leaves share the rest the same way.
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required.
    classes : array_like, default=None
        Public label set, at least 2 labels. None: taken from y with a PrivacyWarning (the set
        of labels present is then not protected).
    max_depth : int or "auto", default="auto"
        Depth of the tree, 0 .. 20 (0: one leaf). ``"auto"``: :func:`tree_defaults` from
        epsilon, the number of classes and of features (below epsilon 0.2: 6 with 4 classes or
        more, else 4; from 0.2 on 2 .. 6), and the noisy record count when one is drawn (see
        above).
    n_bins : int, array_like of int, or "auto", default="auto"
        Number of equal bins of each feature's public range, 2 .. 65535 (one value for all
        features, or one per feature). A categorical feature with m categories coded
        0 .. m - 1 gets one bin per category with bounds (0, m) and m bins; its splits are
        then "code < j" (ordered categories). ``"auto"``: :func:`tree_defaults` (32).
    split_share : float or "auto", default="auto"
        Share of epsilon spent on the splits, in [0, 1). ``"auto"``: :func:`tree_defaults`
        (below epsilon 0.2: 0.3 with 4 classes or more, else 0.5 with 20 features or more,
        else 0.2, or 0.1 of the budget left after the record count on a small table; from 0.2
        on 0.7).
    criterion : {"max", "gini"}, default="max"
        Split quality of the exponential mechanism (:func:`split_utility`): ``"max"``
        (Friedman-Schuster's max operator: an exact integer, monotone, sensitivity 1, so the
        mechanism runs at scale epsilon / sensitivity) or ``"gini"`` (Gini impurity,
        sensitivity 1 plus a rounding allowance, not monotone: half that scale). On breast
        cancer both score alike; ``"max"`` is the default for its exact, halved calibration.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once, after every argument has been checked and before anything is
        drawn.
    split_levels : int or "auto", default="auto"
        Number of levels, from the root, whose splits are drawn from the data (0 .. 20;
        max_depth or more: all); the levels below take public splits (no budget; see above).
        ``"auto"``: :func:`tree_defaults` (below epsilon 0.2: the root's split only with 2 or 3
        classes and 20 features or more or on a small table by the noisy record count, else
        the two top levels; from 0.2 on every level).

    Attributes
    ----------
    classes_ : ndarray
    tree_ : Trees
        The released tree: split features and thresholds, and the leaves' released labels as
        one-hot rows (``tree_.values``).
    max_depth_, n_bins_, split_share_, split_levels_ : the values used (``"auto"`` resolved).
    n_records_noisy_ : int or None
        The released noisy number of records that picked the rule (None when none was drawn).
    n_features_in_ : int

    Warns
    -----
    SingleLeafWarning
        When every leaf released the same class: the tree predicts it everywhere.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for features clipped
    to the public bounds and labels in the public set. The records of the nodes of one level are
    disjoint, so the releases of a level compose in parallel: a record takes part in one split
    choice per level of the first L = min(max_depth, split_levels) (exponential mechanism,
    method "exact", at epsilon_s = split_share * epsilon / L rounded down, sensitivities in
    :func:`split_sensitivity`, the Gini one including a floating-point rounding allowance; the
    levels below draw a public split, a function of the released splits above and the
    generator only, and cost nothing) and in one leaf label (exact
    permute-and-flip, :func:`permute_and_flip_labels`, one record changes one count by 1, at
    epsilon minus the L splits' effective epsilons, rounded down). The levels compose
    sequentially: epsilon in all, charged once (with the curve of L bounded-range split levels
    and the pure leaves, :class:`dpcore.curves.Composed`, so the accountants' zCDP analyses
    count L epsilon_s**2/8 + epsilon_leaf**2/2). When the defaults read a record count (see
    above) it is released first: the number of records plus exact discrete Laplace noise of
    scale t = 1 / (COUNT_SHARE epsilon) rounded up (sensitivity 1 under add/remove: (1 /
    t)-DP), and the splits and leaves above share epsilon' = epsilon - 1 / t (rounded down) in
    place of epsilon, with the rule the released count picks (a function of the count and
    public inputs only); count, splits and leaves compose sequentially, at most epsilon in all,
    charged once as pure epsilon (no finer curve: the plan depends on the count's draw). The
    count is ``n_records_noisy_``. A node's candidates and base measure depend
    only on the released splits above (post-processing; the base measure enters as a public
    offset of each utility, -log(n_f) / c on a 2**-14 grid, c the mechanism's scale, which
    leaves the max operator's sums exact and adds its rounding to the Gini sensitivity); the
    threshold grid is public; random splits (``split_share=0``) do not look at the data. The label set
    must be public: with ``classes=None`` it is read from y (see ``classes``). The warning reads
    the released labels only. Not constant-time: the exact samplers' time depends on their
    draws.

    References
    ----------
    .. [FS10] A. Friedman, A. Schuster, "Data mining with differential privacy", KDD 2010.
    .. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: a new mechanism for differentially
       private selection", NeurIPS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._tree import DecisionTreeClassifier
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.uniform(0, 1, (4000, 3))
    >>> y = (X[:, 1] > 0.5).astype(int)
    >>> tree = DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1],
    ...                               random_state=0).fit(X, y)
    >>> tree.score(X, y) > 0.9
    True
    """

    def __init__(self, *, epsilon: float = 1.0, bounds: Any = None, classes: Any = None,
                 max_depth: int | str = "auto", n_bins: Any = "auto",
                 split_share: float | str = "auto", criterion: str = "max",
                 random_state: RandomStateLike = None, accountant: Any = None,
                 split_levels: int | str = "auto") -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.max_depth = max_depth
        self.n_bins = n_bins
        self.split_share = split_share
        self.split_levels = split_levels
        self.criterion = criterion
        self.random_state = random_state
        self.accountant = accountant

    def _resolved(self, epsilon, classes, n_features, n_records_noisy=None):
        """(max_depth, n_bins, split_share, split_levels) with "auto" resolved (2 classes when
        unknown; n_features None before the fit; the rule the noisy record count picked when
        one was drawn)."""
        k = 2 if classes is None else classes.size
        auto = (tree_defaults(epsilon, k, n_features) if n_records_noisy is None
                else counted_defaults(epsilon, k, n_features, n_records_noisy))
        given = (self.max_depth, self.n_bins, self.split_share, self.split_levels)
        return tuple(a if _is_auto(g) else g for a, g in zip(auto, given))

    def _check_params(self, n_samples=None, n_features=None, classes=None):
        """Every parameter, checked before anything is charged. Returns (epsilon, bounds,
        classes, max_depth, n_bins, the splits' exponential mechanism (None: random splits),
        the leaves' epsilon, the sized plans (:func:`_sized`; None: no record count))."""
        epsilon, bounds, classes_given = _check_common(self, n_features)
        classes = classes_given if classes is None else classes
        depth, bins, share, levels = self._resolved(epsilon, classes, n_features)
        plan = private_plan(epsilon, bounds, classes, depth, bins, share, self.criterion,
                            n_features, split_levels=levels)
        sized = _sized(self, epsilon, bounds, classes, bins, n_features, 1)
        _base.check_n(n_samples)
        return (epsilon, bounds, classes_given) + plan + (sized,)

    def _cost(self):
        return Cost(self._check_params()[0])

    def fit(self, X: Any, y: Any) -> DecisionTreeClassifier:
        """Grow the private tree (see the class docstring). Returns self.

        X and y may be Dask collections (array, dataframe, series; ``classes`` required): the
        records are binned and counted chunk by chunk on the workers, only the exact integer
        count tables come back, and the splits and labels are drawn here (the same tree as in
        memory for the same seed, whatever the chunking)."""
        # every parameter is checked once, with the data's shape, before anything is charged
        classes = _base.check_classes(self.classes)
        if is_dask_collection(X) or is_dask_collection(y):
            X, y = tree_chunks(self, X, y, classes)
            epsilon, bounds, _, *plan = self._check_params(X.shape[0], X.shape[1], classes)
            self.tree_, self.n_records_noisy_ = _fit_private_dask(
                self, X, y, classes, bounds, plan, 1, epsilon, "DecisionTreeClassifier")
        else:
            X, classes, yi = _labels(self, X, y, classes, finite=False)
            epsilon, bounds, _, *plan = self._check_params(X.shape[0], X.shape[1], classes)
            self.tree_, self.n_records_noisy_ = _fit_private(
                self, X, yi, classes.size, bounds, plan, 1, epsilon, "DecisionTreeClassifier")
        self.classes_ = classes
        (self.max_depth_, self.n_bins_, self.split_share_,
         self.split_levels_) = self._resolved(epsilon, classes, X.shape[1],
                                              self.n_records_noisy_)
        _warn_if_one_class(self.tree_.values, "tree")
        return self


def _sized(est, epsilon, bounds, classes, n_bins, n_features, n_trees):
    """:func:`sized_plans` when the defaults read a noisy record count (``max_depth``,
    ``split_share`` and ``split_levels`` all "auto", :func:`sized_rules` not None), else
    None."""
    if not all(_is_auto(v) for v in (est.max_depth, est.split_share, est.split_levels)):
        return None
    return sized_plans(epsilon, bounds, classes, n_bins, est.criterion, n_features, n_trees)


def _fit_private(est, X, yi, k, bounds, plan, n_trees, epsilon, label):
    """Bin X on the public grid and release ``n_trees`` private trees (one per random part of
    the records when n_trees > 1), charging ``epsilon`` once."""
    n, d = X.shape
    lower, inv, top, width, code_dtype = _grid(bounds, plan[1], d)
    codes, node, labels = record_arrays(n, d, code_dtype)
    np.copyto(labels, yi, casting="unsafe")   # class indices: 0 .. k - 1
    root = np.zeros((d, k, width), dtype=np.int64)   # the root's table, counted while binning
    if _tree.bin_codes(X, lower, inv, top, labels, codes, root):
        raise ValueError("Input X contains NaN or infinity")
    return _release_private(est, _RecordCounts(codes, labels, node), root, n, (lower, inv),
                            plan, n_trees, epsilon, label)


def _grid(bounds, n_bins, d):
    """(lower, inv, top, width, code dtype) of the public grid: bin = floor((x - lower) * inv)
    clamped to [0, top]; width = the largest number of bins."""
    lower, upper = bounds
    n_bins = np.broadcast_to(n_bins, (d,))
    width = int(n_bins.max())
    return (lower, n_bins / (upper - lower), (n_bins - 1).astype(np.float64), width,
            np.uint8 if width <= 256 else np.uint16)


class _RecordCounts:
    """The level counts of records in memory: ``start(part)`` puts every record at its tree's
    root (``part``: the tree of each record, None: tree 0); ``count(routing, row, table)``
    moves the records one level down the splits ``routing`` and adds the class counts of the
    nodes with ``row[v] >= 0`` to ``table[row[v]]`` (``dpcore._tree.level_counts``).
    ``dpcore.learn._dask.DaskRecords`` counts the same integers chunk by chunk."""

    def __init__(self, codes, labels, node):
        self.codes, self.labels, self.node = codes, labels, node

    def start(self, part):
        if part is None:
            self.node.fill(0)
        else:
            self.node[:] = part

    def count(self, routing: tuple[np.ndarray, np.ndarray, np.ndarray], row: np.ndarray,
              table: np.ndarray) -> None:
        _tree.level_counts(self.codes, self.labels, self.node, *routing, row, table)


def _memory_leaf_counts(X, yi):
    """leaf_counts(forest, shape) of random trees over X in memory (checked finite here)."""
    # scikit-learn's test (a finite sum, else element by element), without its overhead
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(np.sum(X)) or np.isfinite(X).all()
    if not finite:
        raise ValueError("Input X contains NaN or infinity")
    labels = yi.astype(np.int32)

    def leaf_counts(forest, shape):
        counts = np.zeros(shape, dtype=np.int64)
        _tree.forest_counts(X, labels, forest.feature, forest.threshold, forest.roots.size,
                            forest.depth, counts)
        return counts

    return leaf_counts


# ------------------------------------------------------------------------------------------------
# Dask collections: the same counts, chunk by chunk on the workers (dpcore.learn._dask)

def _fit_private_dask(est, Xd, yd, classes, bounds, plan, n_trees, epsilon, label):
    """:func:`_fit_private` on Dask arrays: binned and counted on the workers."""
    lower, inv, top, width, code_dtype = _grid(bounds, plan[1], int(Xd.shape[1]))
    records = DaskRecords(Xd, yd, chunk_codes, (lower, inv, top, width, code_dtype, classes))
    (root,), bad_values, bad_labels = records.summary
    check_tree_flags(bad_values, bad_labels)
    return _release_private(est, DaskLevelCounts(records, chunk_level_counts), root, records.shape[0],
                            (lower, inv), plan, n_trees, epsilon, label)


def chunk_codes(x: Any, y: Any, lower: np.ndarray, inv: np.ndarray, top: np.ndarray, width: int,
                code_dtype: Any, classes: np.ndarray) -> tuple[tuple, tuple]:
    """On a Dask worker: the payload (codes, class indices) of a chunk and its summary ((root
    table,), X not finite, a label outside classes), as :func:`_fit_private` bins in memory."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    labels, outside = class_index(y, classes)
    codes = np.empty(x.shape, dtype=code_dtype)
    root = np.zeros((x.shape[1], classes.size, width), dtype=np.int64)
    bad = bool(_tree.bin_codes(x, lower, inv, top, labels, codes, root))
    return (codes, labels), ((root,), bad, outside)


def chunk_level_counts(payload: tuple, start: np.ndarray | None, history: list, row: np.ndarray,
                       shape: tuple) -> np.ndarray:
    """On a Dask worker: a chunk's part of a level's table (``shape``, nodes ``row``), its
    records started at ``start`` (None: node 0) and moved down every level of ``history``
    ((routing, nodes of that level) pairs, the last one this level's)."""
    codes, labels = payload
    node = np.zeros(labels.size, np.int32) if start is None else np.array(start, np.int32)
    table = np.zeros(shape, dtype=np.int64)
    for i, ((feature, split, left), m) in enumerate(history):
        last = i + 1 == len(history)
        _tree.level_counts(codes, labels, node, feature, split, left,
                           row if last else np.full(m, -1, dtype=np.int32),
                           table if last else table[:0])
    return table


def chunk_rows(x: Any, y: Any, classes: np.ndarray) -> tuple[tuple, tuple]:
    """On a Dask worker: the payload (rows, class indices) of a chunk for random trees and
    its summary ((), X not finite, a label outside classes)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    labels, outside = class_index(y, classes)
    return (x, labels), ((), not bool(np.isfinite(x).all()), outside)


def chunk_forest_counts(payload: tuple, _: None, forest: Trees, shape: tuple) -> np.ndarray:
    """On a Dask worker: a chunk's leaf class counts in the random trees ``forest``."""
    x, labels = payload
    counts = np.zeros(shape, dtype=np.int64)
    _tree.forest_counts(x, labels, forest.feature, forest.threshold, forest.roots.size,
                        forest.depth, counts)
    return counts


def _release_private(est, counts, root, n, grid, plan, n_trees, epsilon, label):
    """Release ``n_trees`` private trees over ``n`` binned records whose root table (d, k, B)
    is ``root`` and whose level counts ``counts`` gives, charging ``epsilon`` once. Returns
    (the trees, the released noisy record count or None). With sized plans (``plan[4]``, see
    :func:`_sized`) the count is drawn first and picks the plan of the trees."""
    depth, n_bins, mechs, leaf_eps, sized = plan
    n_bins = np.broadcast_to(n_bins, (root.shape[0],))
    criterion = est.criterion

    def draw(rng):
        noisy = None
        depth_, mechs_, leaf_eps_ = depth, mechs, leaf_eps
        if sized is not None:   # every record counted once at the root's feature 0
            noisy = noisy_record_count(int(root[0].sum()), sized[0], rng)
            depth_, _, mechs_, leaf_eps_ = sized[2][rule_for_count(sized[1], noisy, n_trees)]
        if n_trees == 1:
            counts.start(None)   # every record at the root
            return Trees(**grow_trees(counts, root[None], grid, root.shape[1], depth_, n_bins,
                                      mechs_, leaf_eps_, criterion, rng)), noisy
        # each record joins one tree, uniformly at random and independently of the data
        counts.start(rng.integers(0, n_trees, n, dtype=np.int32))
        roots = np.zeros((n_trees,) + root.shape, dtype=np.int64)
        through = np.arange(n_trees, dtype=np.int32)   # a pass-through level: node u stays u
        counts.count((np.zeros(n_trees, dtype=np.int32),
                      np.full(n_trees, 2**31 - 1, dtype=np.int32), through), through, roots)
        return Trees(**grow_trees(counts, roots, grid, root.shape[1], depth_, n_bins, mechs_,
                                  leaf_eps_, criterion, rng)), noisy

    # per record: one split choice per level that looks (exponential mechanisms, parallel over
    # a level's nodes: bounded-range) and one leaf label (permute-and-flip: pure)
    looks = [m for m in mechs if m is not None]
    leaves = PureDP(leaf_eps)
    curve = Composed((BoundedRange(looks[0].epsilon_effective).repeat(len(looks)),
                      leaves)) if looks else leaves
    if sized is not None:   # the plan depends on the count's draw: charged as pure epsilon
        curve = None
    return release(draw, cost=Cost(epsilon, curve=curve), accountant=est.accountant,
                   random_state=est.random_state, label=label)


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


def _warn_if_one_class(values, what):
    """SingleLeafWarning when every leaf favours the same class (post-processing of the
    release). A sum or average of rows that all favour class c favours c too, so the model then
    predicts c everywhere."""
    top = np.argmax(np.maximum(values, 0.0), axis=1)
    if top.size and np.all(top == top[0]):
        warnings.warn(
            f"the released {what} predicts one class everywhere (every leaf favours the same "
            f"class): the noise at this epsilon drowned the splits; use a larger epsilon or "
            f"more records", SingleLeafWarning, stacklevel=3)


# ------------------------------------------------------------------------------------------------
# Random decision trees

class RandomForestClassifier(_TreeClassifierBase):
    """Ensemble of private decision trees, epsilon-DP: by default each tree is grown as
    :class:`DecisionTreeClassifier` grows one, on its own random part of the records, at the
    whole epsilon (parallel composition); ``algorithm="random"`` draws random decision trees
    instead (Jagannathan, Pillaipakkamnatt, Wright 2009/2012) with noisy leaf counts.

    ``algorithm="partition"`` (default): every record joins one of the ``n_estimators`` trees,
    uniformly at random and independently of the data; each tree is then grown on its records
    exactly as :class:`DecisionTreeClassifier` grows one (complete, of depth ``max_depth``,
    splits on the public grid of ``n_bins`` bins drawn by the exponential mechanism at
    ``split_share`` of epsilon, one label per leaf by permute-and-flip at the rest), with the
    whole epsilon. A prediction is the majority vote of the trees' leaf labels. Splitting the
    records rather than the budget keeps each tree's signal to noise ratio (a tree on n / T
    records at epsilon sees as much as one on n records at epsilon / T) while drawing each tree
    once, on a T-th of the work. With few records the trees get too small: on the development
    sets (150 to 5000 records) one tree led every larger number at every epsilon, so the
    default is one tree, :class:`DecisionTreeClassifier`'s (:func:`forest_defaults`); give
    ``n_estimators`` for an ensemble on large data.

    ``algorithm="random"``: every tree is a complete binary tree of depth ``max_depth`` drawn
    without looking at the data: each internal node takes a feature uniformly at random and a
    threshold uniformly at random in that feature's interval at the node (the public
    ``bounds`` narrowed by the splits above). The records are passed down every tree and each
    leaf releases its class counts with exact discrete Laplace noise. A prediction sums, over
    the trees, the normalised noisy class counts of the leaves reached (``voting="proba"``) or
    the noisy counts themselves (``voting="counts"``, Jagannathan et al.'s rule).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0: every tree's (``"partition"``), or epsilon / n_estimators for
        each tree's leaf counts (``"random"``).
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required. Values
        outside them follow the edge branch (clipping).
    classes : array_like, default=None
        Public label set, at least 2 labels. None: taken from y with a PrivacyWarning.
    n_estimators : int or "auto", default="auto"
        Number of trees, 1 .. 10000. ``"auto"``: :func:`forest_defaults` (``"partition"``: 1)
        or :func:`random_forest_defaults` (``"random"``: 5 .. 25 trees from epsilon).
    max_depth : int or "auto", default="auto"
        Depth of every tree, 0 .. 20. ``"auto"``: as ``n_estimators``.
    n_bins, split_share, criterion, split_levels :
        As in :class:`DecisionTreeClassifier`, for every tree (``"partition"`` only;
        ``"auto"``: :func:`forest_defaults`).
    algorithm : {"partition", "random"}, default="partition"
        How the trees are grown (above).
    voting : {"proba", "counts"}, default="proba"
        How the trees' leaves are combined (post-processing of the same release). ``"proba"``:
        each leaf's values (noisy counts or a one-hot label), negatives clipped to 0,
        normalised to a class distribution (uniform when nothing is left), averaged over the
        trees, as scikit-learn's forests do. ``"counts"``: the values are summed (Jagannathan
        et al.). With ``"partition"`` both are the majority vote.
    random_state : None, int, numpy Generator or BitGenerator, default=None
        None: dpcore's secure generator (it draws the partition, the structure and the
        noise). Seeds are for tests only.
    accountant : dpcore.Accountant, default=None
        Charged ``epsilon`` once, after every argument has been checked and before anything is
        drawn.

    Attributes
    ----------
    classes_ : ndarray
    tree_ : Trees
        All trees in flat node arrays; ``tree_.values`` holds the leaves' released values
        (one-hot labels, or noisy counts for ``"random"``).
    n_estimators_, max_depth_, n_bins_, split_share_, split_levels_ :
        The values used (``"auto"`` resolved; n_bins_, split_share_ and split_levels_ are None
        for ``"random"``).
    n_records_noisy_ : int or None
        The released noisy number of records that picked the trees' rule (None when none was
        drawn, always for ``"random"``).
    n_features_in_ : int

    Warns
    -----
    SingleLeafWarning
        When every leaf of every tree favours the same class: the forest predicts it everywhere.

    Privacy
    -------
    epsilon-DP under add/remove neighbours (2 epsilon under replace-one), for features clipped
    to the public bounds and labels in the public set. ``"partition"``: the part each record
    joins is drawn independently of the data and of the other records (it is not released);
    given the parts, each tree is :class:`DecisionTreeClassifier`'s epsilon-DP release on its
    own records (see its Privacy section: splits at split_share * epsilon / min(max_depth,
    split_levels) per level that looks at the data, rounded down, leaves at the rest), and a
    record added or removed changes the records of one tree only, so the trees compose in
    parallel: epsilon in all, charged once. When the defaults read a record count (below
    epsilon 0.2, as in :class:`DecisionTreeClassifier`; a tree's rule is the small table's when
    the noisy count over n_estimators is below 2000) the count of all the records is released
    first at 1 / t <= COUNT_SHARE epsilon and every tree is grown at the rest (sequential
    composition with the count, parallel between the trees), charged once as pure epsilon;
    it is ``n_records_noisy_``.
    ``"random"``: the structure of the trees is drawn independently of the data (no budget).
    Within a tree the leaves hold disjoint records (parallel composition: the vector of a
    tree's leaf counts has L1 sensitivity 1); across the n_estimators trees the releases
    compose sequentially, so the whole count vector has L1 sensitivity n_estimators and gets
    exact discrete Laplace noise of scale n_estimators / epsilon (rounded up): epsilon in all,
    charged once. Predictions are post-processing. The label set must be public: with
    ``classes=None`` it is read from y.

    References
    ----------
    .. [JPW09] G. Jagannathan, K. Pillaipakkamnatt, R. N. Wright, "A practical differentially
       private random decision tree classifier", ICDM Workshops 2009; Transactions on Data
       Privacy 5(1), 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn._tree import RandomForestClassifier
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.uniform(0, 1, (4000, 2))
    >>> y = (X[:, 0] + X[:, 1] > 1).astype(int)
    >>> forest = RandomForestClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1],
    ...                                 random_state=0).fit(X, y)
    >>> forest.score(X, y) > 0.85
    True
    """

    def __init__(self, *, epsilon: float = 1.0, bounds: Any = None, classes: Any = None,
                 n_estimators: int | str = "auto", max_depth: int | str = "auto",
                 n_bins: Any = "auto", split_share: float | str = "auto",
                 criterion: str = "max", algorithm: str = "partition", voting: str = "proba",
                 random_state: RandomStateLike = None, accountant: Any = None,
                 split_levels: int | str = "auto") -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.n_bins = n_bins
        self.split_share = split_share
        self.split_levels = split_levels
        self.criterion = criterion
        self.algorithm = algorithm
        self.voting = voting
        self.random_state = random_state
        self.accountant = accountant

    def _check_params(self, n_samples=None, n_features=None, classes=None):
        """Every parameter, checked before anything is charged. Returns (epsilon, bounds,
        classes, n_estimators, then the private trees' plan (:func:`private_plan`, then
        :func:`_sized`) or (max_depth, noise scale) for random trees)."""
        epsilon, bounds, classes_given = _check_common(self, n_features)
        classes = classes_given if classes is None else classes
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.voting not in VOTING:
            raise ValueError(f"voting must be one of {VOTING}, got {self.voting!r}")
        trees, depth, bins, share, levels = self._resolved(epsilon, classes, n_features)
        trees = check.integer(trees, "n_estimators", minimum=1, maximum=10000)
        depth = check.integer(depth, "max_depth", minimum=0, maximum=20)
        if trees * 2 ** (depth + 1) > _MAX_NODES:
            raise ValueError(f"n_estimators * 2**(max_depth + 1) must be <= 2**24, got "
                             f"n_estimators={trees}, max_depth={depth}")
        if self.algorithm == "partition":
            plan = private_plan(epsilon, bounds, classes, depth, bins, share, self.criterion,
                                n_features, trees, levels)
            plan += (_sized(self, epsilon, bounds, classes, bins, n_features, trees),)
        else:
            if n_features is not None and trees * 2**depth * n_features > 2**27:
                raise ValueError(f"n_estimators * 2**max_depth * n_features must be <= 2**27, "
                                 f"got n_estimators={trees}, max_depth={depth}, "
                                 f"n_features={n_features}")
            plan = (depth, _dlap_scale(Fraction(trees) / Fraction(epsilon),
                                       "epsilon and n_estimators"))
        _base.check_n(n_samples)
        return (epsilon, bounds, classes_given, trees) + plan

    def _cost(self):
        return Cost(self._check_params()[0])

    def _resolved(self, epsilon, classes, n_features, n_records_noisy=None):
        """(n_estimators, max_depth, n_bins, split_share, split_levels) with "auto" resolved (2
        classes when unknown; n_features None before the fit; the rule the noisy record count
        picked when one was drawn; the last three None for random trees)."""
        if self.algorithm == "partition":
            k = 2 if classes is None else classes.size
            auto = forest_defaults(epsilon, k, n_features)
            if n_records_noisy is not None:
                trees = auto[0] if _is_auto(self.n_estimators) else int(self.n_estimators)
                auto = (auto[0],) + counted_defaults(epsilon, k, n_features, n_records_noisy,
                                                     trees)
            given = (self.n_estimators, self.max_depth, self.n_bins, self.split_share,
                     self.split_levels)
        else:
            auto = random_forest_defaults(epsilon) + (None, None, None)
            given = (self.n_estimators, self.max_depth, None, None, None)
        return tuple(a if _is_auto(g) or g is None else g for a, g in zip(auto, given))

    def fit(self, X: Any, y: Any) -> RandomForestClassifier:
        """Grow the trees and release their leaves. Returns self.

        X and y may be Dask collections (``classes`` required), counted chunk by chunk on the
        workers as in :meth:`DecisionTreeClassifier.fit`: the same model as in memory for the
        same seed."""
        # every parameter is checked once, with the data's shape, before anything is charged
        classes = _base.check_classes(self.classes)
        label = "RandomForestClassifier"
        self.n_records_noisy_ = None
        if is_dask_collection(X) or is_dask_collection(y):
            X, y = tree_chunks(self, X, y, classes)
            epsilon, bounds, _, trees, *plan = self._check_params(X.shape[0], X.shape[1],
                                                                  classes)
            if self.algorithm == "partition":
                self.tree_, self.n_records_noisy_ = _fit_private_dask(
                    self, X, y, classes, bounds, plan, trees, epsilon, label)
            else:
                records = DaskRecords(X, y, chunk_rows, (classes,))
                check_tree_flags(*records.summary[1:])
                self.tree_ = self._fit_random(
                    lambda f, c: records.sum(chunk_forest_counts, records.per_chunk(), f, c),
                    classes.size, bounds, trees, plan, epsilon)
        else:
            X, classes, yi = _labels(self, X, y, classes, finite=False)
            epsilon, bounds, _, trees, *plan = self._check_params(X.shape[0], X.shape[1],
                                                                  classes)
            if self.algorithm == "partition":
                self.tree_, self.n_records_noisy_ = _fit_private(
                    self, X, yi, classes.size, bounds, plan, trees, epsilon, label)
            else:
                self.tree_ = self._fit_random(_memory_leaf_counts(X, yi), classes.size, bounds,
                                              trees, plan, epsilon)
        self.classes_ = classes
        (self.n_estimators_, self.max_depth_, self.n_bins_, self.split_share_,
         self.split_levels_) = self._resolved(epsilon, classes, X.shape[1],
                                              self.n_records_noisy_)
        _warn_if_one_class(self.tree_.values, "forest")
        return self

    def _fit_random(self, leaf_counts, k, bounds, trees, plan, epsilon):
        """Random trees whose leaf class counts ``leaf_counts(forest, counts_shape)`` gives
        (exact integers), released with discrete Laplace noise; ``plan``: (max_depth, noise
        scale)."""
        lower, upper = bounds
        depth, scale = plan

        def draw(rng):
            forest = random_trees(lower, upper, trees, depth, rng)
            counts = leaf_counts(forest, (forest.values.shape[0], k))
            forest.values = _noisy(counts, scale, rng)
            return forest

        return release(draw, cost=Cost(epsilon), accountant=self.accountant,
                       random_state=self.random_state, label="RandomForestClassifier")

    @property
    def _voting_tree(self):
        if self.voting == "counts":
            return self.tree_
        return replace(self.tree_, values=_proba(self.tree_.values))


def random_trees(lower: np.ndarray, upper: np.ndarray, n_trees: int, depth: int,
                 rng: np.random.Generator) -> Trees:
    """``n_trees`` complete random trees of depth ``depth`` over the box [lower, upper]
    (data-independent, :func:`random_tree_arrays`), leaves numbered in order; ``values`` is
    left empty (0 columns)."""
    return Trees(**random_tree_arrays(lower, upper, n_trees, depth, rng))
