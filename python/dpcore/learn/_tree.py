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
from fractions import Fraction

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpcore import _tree
from dpcore.mechanisms import discrete_laplace
from dpcore import _validation as check
from dpcore._floats import round_down, round_up
from dpcore._release import Cost, release
from dpcore.learn import _base
from dpcore.learn._permute_and_flip import permute_and_flip_labels
from dpcore.learn._tree_grid import (
    _base_offsets,
    bin_threshold,
    forest_defaults,
    random_forest_defaults,
    split_sensitivity,
    split_utility,
    tree_defaults,
)
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE
from dpcore.selection import ExponentialMechanism

__all__ = ["DecisionTreeClassifier", "RandomForestClassifier", "SingleLeafWarning", "Trees",
           "forest_defaults", "permute_and_flip_labels", "random_forest_defaults",
           "split_sensitivity", "split_utility", "tree_defaults"]

CRITERIA = ("gini", "max")
VOTING = ("proba", "counts")
ALGORITHMS = ("partition", "random")
# Largest count table one tree level may need (nodes x features x bins x classes, int64): a
# public limit on the parameters, checked before anything is charged.
_MAX_TABLE = 2**26
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
    def n_leaves(self):
        return int(self.values.shape[0])

    def apply(self, X):
        """(n, n_trees) index of the leaf each row of X reaches in each tree."""
        out = np.empty((X.shape[0], self.roots.size), dtype=np.int32)
        _tree.apply(X, self.feature, self.threshold, self.left, self.roots, self.depth, out)
        return out

    def vote(self, X):
        """(n, k) sum over the trees of the values of the leaves reached."""
        out = np.zeros((X.shape[0], self.values.shape[1]))
        _tree.vote(X, self.feature, self.threshold, self.left, self.roots, self.depth, self.slot,
                   self.values, out)
        return out


# ------------------------------------------------------------------------------------------------
# Shared checks

def _check_bins(n_bins, n_features):
    """An int, or one int per feature, each in 2 .. 65535."""
    if np.ndim(n_bins) == 0:
        return check.integer(n_bins, "n_bins", minimum=2, maximum=2**16 - 1)
    values = [check.integer(b, "n_bins", minimum=2, maximum=2**16 - 1)
              for b in np.asarray(n_bins).ravel()]
    if np.ndim(n_bins) != 1 or (n_features is not None and len(values) != n_features):
        raise ValueError("n_bins must be an int or one int per feature (n_features of them)")
    return np.array(values, dtype=np.int64)


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
    PrivacyWarning when None) and the class index of each label (int32). No message quotes a
    label. ``finite=False`` leaves the check that X is finite to the caller (the tree's binning
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
        if classes.size <= 16:   # a few passes without temporaries beat searchsorted's
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
    return X, classes, index.astype(np.int32)


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
    are); ``split_share=0`` draws from that base measure, without looking at the data, and so
    do the levels below the first ``split_levels`` (which then share the splits' budget, at
    ``split_share`` * epsilon / split_levels each). Every
    leaf then releases one class, drawn by permute-and-flip on its class counts at the rest of
    the budget; it predicts that class. No node count is released, so a small node costs
    nothing more than a large one (there is no stopping rule that the noise could trip at the
    root). If every leaf releases the same class the fit warns with :class:`SingleLeafWarning`.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, > 0: ``split_share`` of it for the splits (epsilon * split_share /
        min(max_depth, split_levels) per level that looks at the data), the rest for the leaf
        labels.
    bounds : (lower, upper), default=None
        Public per-feature bounds (scalars or arrays of length n_features). Required.
    classes : array_like, default=None
        Public label set, at least 2 labels. None: taken from y with a PrivacyWarning (the set
        of labels present is then not protected).
    max_depth : int or "auto", default="auto"
        Depth of the tree, 0 .. 20 (0: one leaf). ``"auto"``: :func:`tree_defaults` from
        epsilon, the number of classes and of features (below epsilon 0.2: 6 with 4 classes or
        more, else 4; from 0.2 on 2 .. 6).
    n_bins : int, array_like of int, or "auto", default="auto"
        Number of equal bins of each feature's public range, 2 .. 65535 (one value for all
        features, or one per feature). A categorical feature with m categories coded
        0 .. m - 1 gets one bin per category with bounds (0, m) and m bins; its splits are
        then "code < j" (ordered categories). ``"auto"``: :func:`tree_defaults` (32).
    split_share : float or "auto", default="auto"
        Share of epsilon spent on the splits, in [0, 1). ``"auto"``: :func:`tree_defaults`
        (below epsilon 0.2: 0.3 with 4 classes or more, else 0.5 with 20 features or more,
        else 0.2; from 0.2 on 0.7).
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
        max_depth or more: all); the levels below split at random (the base measure, no
        budget). ``"auto"``: :func:`tree_defaults` (below epsilon 0.2: the root's split only
        with 2 or 3 classes and 20 features or more, else the two top levels; from 0.2 on every
        level).

    Attributes
    ----------
    classes_ : ndarray
    tree_ : Trees
        The released tree: split features and thresholds, and the leaves' released labels as
        one-hot rows (``tree_.values``).
    max_depth_, n_bins_, split_share_, split_levels_ : the values used (``"auto"`` resolved).
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
    levels below draw from the public base measure, a function of the released splits above
    only, and cost nothing) and in one leaf label (exact
    permute-and-flip, :func:`permute_and_flip_labels`, one record changes one count by 1, at
    epsilon minus the L splits' effective epsilons, rounded down). The levels compose
    sequentially: epsilon in all, charged once. A node's candidates and base measure depend
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

    def __init__(self, *, epsilon=1.0, bounds=None, classes=None, max_depth="auto",
                 n_bins="auto", split_share="auto", criterion="max", random_state=None,
                 accountant=None, split_levels="auto"):
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

    def _resolved(self, epsilon, classes, n_features):
        """(max_depth, n_bins, split_share, split_levels) with "auto" resolved (2 classes when
        unknown; n_features None before the fit)."""
        auto = tree_defaults(epsilon, 2 if classes is None else classes.size, n_features)
        given = (self.max_depth, self.n_bins, self.split_share, self.split_levels)
        return tuple(a if _is_auto(g) else g for a, g in zip(auto, given))

    def _check_params(self, n_samples=None, n_features=None, classes=None):
        """Every parameter, checked before anything is charged. Returns (epsilon, bounds,
        classes, max_depth, n_bins, the splits' exponential mechanism (None: random splits),
        the leaves' epsilon)."""
        epsilon, bounds, classes_given = _check_common(self, n_features)
        classes = classes_given if classes is None else classes
        depth, bins, share, levels = self._resolved(epsilon, classes, n_features)
        plan = _private_plan(epsilon, bounds, classes, depth, bins, share, self.criterion,
                             n_features, split_levels=levels)
        _base.check_n(n_samples)
        return (epsilon, bounds, classes_given) + plan

    def _cost(self):
        return Cost(self._check_params()[0])

    def fit(self, X, y):
        """Grow the private tree (see the class docstring). Returns self."""
        classes = self._check_params()[2]
        X, classes, yi = _labels(self, X, y, classes, finite=False)
        epsilon, bounds, _, *plan = self._check_params(*X.shape, classes)
        self.tree_ = _fit_private(self, X, yi, classes.size, bounds, plan, 1, epsilon,
                                  "DecisionTreeClassifier")
        self.classes_ = classes
        (self.max_depth_, self.n_bins_, self.split_share_,
         self.split_levels_) = self._resolved(epsilon, classes, X.shape[1])
        _warn_if_one_class(self.tree_.values, "tree")
        return self


def _private_plan(epsilon, bounds, classes, depth, n_bins, share, criterion, n_features,
                  n_trees=1, split_levels=None):
    """(max_depth, n_bins, the splits' exponential mechanism of each level (None: random
    splits), the leaves' epsilon) of private trees, every parameter checked (before anything
    is charged). The first ``split_levels`` levels (None: all) share the splits' budget; the
    levels below split at random."""
    depth = check.integer(depth, "max_depth", minimum=0, maximum=20)
    n_bins = _check_bins(n_bins, n_features)
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
        if n_trees * 2 ** (depth - 1) * n_features * int(np.max(n_bins)) * k > _MAX_TABLE:
            raise ValueError(
                f"n_estimators * 2**(max_depth - 1) * n_features * max(n_bins) * n_classes must "
                f"be <= 2**26 (the count table of a level), got max_depth={depth}, "
                f"n_bins={n_bins}, n_features={n_features}"
            )
    return depth, n_bins, mechs, leaf_eps


def _fit_private(est, X, yi, k, bounds, plan, n_trees, epsilon, label):
    """Bin X on the public grid and release ``n_trees`` private trees (one per random part of
    the records when n_trees > 1), charging ``epsilon`` once."""
    depth, n_bins, mechs, leaf_eps = plan
    lower, upper = bounds
    n, d = X.shape
    n_bins = np.broadcast_to(n_bins, (d,))
    inv = n_bins / (upper - lower)   # public grid: bin = floor((x - lower) * inv)
    width = int(n_bins.max())
    codes = np.empty((n, d), dtype=np.uint8 if width <= 256 else np.uint16)
    root = np.zeros((d, k, width), dtype=np.int64)   # the root's table, counted while binning
    if _tree.bin_codes(X, lower, inv, (n_bins - 1).astype(np.float64), yi, codes, root):
        raise ValueError("Input X contains NaN or infinity")
    criterion = est.criterion

    def draw(rng):
        if n_trees == 1:
            return _grow(codes, yi, root[None], (lower, inv), k, depth, n_bins, mechs, leaf_eps,
                         criterion, rng)
        # each record joins one tree, uniformly at random and independently of the data
        node = rng.integers(0, n_trees, n, dtype=np.int32)
        roots = np.zeros((n_trees, d, k, width), dtype=np.int64)
        through = np.arange(n_trees, dtype=np.int32)   # a pass-through level: node u stays u
        _tree.level_counts(codes, yi, node, np.zeros(n_trees, dtype=np.int32),
                           np.full(n_trees, 2**31 - 1, dtype=np.int32), through, through, roots)
        return _grow(codes, yi, roots, (lower, inv), k, depth, n_bins, mechs, leaf_eps,
                     criterion, rng, node)

    return release(draw, cost=Cost(epsilon), accountant=est.accountant,
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


def _grow(codes, yi, roots, grid, k, depth, bins, mechs, leaf_eps, criterion, rng, node=None):
    """Complete trees of depth ``depth``, one per row of ``roots`` (the root tables (T, d, k, B)),
    grown together level by level inside the release (draws with ``rng``); ``node`` (None: every
    record in tree 0) is the tree of each record, an int32 array the growth overwrites.

    Level l holds T 2**l nodes, node r of the level being position r % 2**l of tree r // 2**l
    (its children at the next level are 2r and 2r + 1); in the flat arrays tree t takes
    2**(depth + 1) - 1 nodes in heap order (node i has children 2i + 1 and 2i + 2). Count tables
    are (node, feature, class, bin). A node's class counts come from its parent's table at the
    chosen split; a node's table is counted, or is its parent's minus its sibling's: of each pair
    of siblings only the one with fewer records is counted."""
    n_bins = int(bins.max())   # the tables' width; feature f uses its first bins[f] bins
    d = bins.size
    n_trees = roots.shape[0]
    # split j + 1 of feature f (j = 0 .. n_bins - 2) exists when j + 1 < bins[f]; a node's
    # candidates are the splits strictly inside its box (bins lo[f] .. hi[f] - 1, narrowed by
    # the released splits above), so none leaves a child empty by construction. The others get
    # -inf: a public exclusion (a function of the released splits only).
    cut = np.arange(1, n_bins)
    excluded = (cut[None, :] >= bins[:, None]).ravel()
    lo = np.zeros((n_trees, d), dtype=np.int64)
    hi = np.repeat(np.asarray(bins, dtype=np.int64)[None, :], n_trees, axis=0)
    per_tree = 2 ** (depth + 1) - 1
    base = np.arange(n_trees, dtype=np.int32) * per_tree       # flat id of each tree's root
    total = n_trees * per_tree
    feature = np.full(total, -1, dtype=np.int32)
    threshold = np.zeros(total)
    left = np.full(total, -1, dtype=np.int32)
    right = np.full(total, -1, dtype=np.int32)
    slot = np.full(total, -1, dtype=np.int32)
    class_counts = roots[:, 0].sum(axis=2)  # (m, k): records per class of each node of the level
    parents = None                          # the tables of the level above
    routing = None                          # the level above's splits, to move the records down
    for level in range(depth):
        mech = mechs[level]
        width = 2**level
        m = n_trees * width
        if parents is None:
            tables = roots
        else:
            tables, node = _level_tables(codes, yi, node, routing, class_counts,
                                         np.arange(m), parents)
        cum = np.cumsum(tables, axis=3)                  # (m, d, k, B)
        below = cum[..., :-1]                            # split j + 1: bins <= j go left
        above = cum[..., -1:] - below
        inside = ((cut[None, None, :] > lo[:, :, None])
                  & (cut[None, None, :] < hi[:, :, None])).reshape(m, -1)
        # a node with no split inside its box (every feature cut down to one bin) takes any
        inside[~inside.any(axis=1)] = ~excluded
        # base measure: each feature with candidates equally likely, then its thresholds (a
        # feature whose box was narrowed keeps its weight, so a dense region can be cut again)
        per_feature = inside.reshape(m, d, n_bins - 1).sum(axis=2)          # (m, d)
        if mech is not None:
            utility = split_utility(below.transpose(0, 1, 3, 2), above.transpose(0, 1, 3, 2),
                                    criterion)                                # (m, d, B - 1)
            utility = (utility + _base_offsets(per_feature, mech.scale)[:, :, None])
            utility = utility.reshape(m, -1)
            utility[~inside] = -np.inf
        split_f = np.empty(m, dtype=np.int32)
        split_j = np.empty(m, dtype=np.int32)
        children = np.empty((2 * m, k), dtype=np.int64)
        for r in range(m):
            if mech is None:   # data-independent: a feature, then one of its thresholds
                usable = np.flatnonzero(per_feature[r])
                f = int(usable[rng.integers(usable.size)])
                row = np.flatnonzero(inside[r].reshape(d, -1)[f])
                choice = f * (n_bins - 1) + int(row[rng.integers(row.size)])
            else:
                choice = mech.select(utility[r], random_state=rng)
            f, j = divmod(choice, n_bins - 1)
            t, i = divmod(r, width)
            v = base[t] + width - 1 + i
            feature[v], threshold[v] = f, bin_threshold(grid[0][f], grid[1][f], j + 1)
            left[v] = base[t] + 2 * width - 1 + 2 * i
            right[v] = left[v] + 1
            split_f[r], split_j[r] = f, j + 1
            children[2 * r], children[2 * r + 1] = below[r, f, :, j], above[r, f, :, j]
        class_counts = children
        parents = tables
        routing = (split_f, split_j, 2 * np.arange(m, dtype=np.int32))
        lo, hi = np.repeat(lo, 2, axis=0), np.repeat(hi, 2, axis=0)   # children in level order
        rows = np.arange(m)
        hi[2 * rows, split_f] = np.minimum(hi[2 * rows, split_f], split_j)
        lo[2 * rows + 1, split_f] = np.maximum(lo[2 * rows + 1, split_f], split_j)
    leaves = (base[:, None] + np.arange(2**depth - 1, per_tree)[None, :]).ravel()
    slot[leaves] = np.arange(leaves.size, dtype=np.int32)
    labels = permute_and_flip_labels(class_counts, leaf_eps, rng)
    values = np.zeros((leaves.size, k))
    values[np.arange(leaves.size), labels] = 1.0
    return Trees(feature=feature, threshold=threshold, left=left, right=right, slot=slot,
                 roots=base, values=values, depth=depth)


def _level_tables(codes, yi, node, routing, class_counts, growing, parents):
    """(tables of the growing nodes of a level, node of each record at this level). Nodes come
    in sibling pairs (2p, 2p + 1) under the p-th growing node of the level above; parents[p]
    is its table."""
    if node is None:
        node = np.zeros(codes.shape[0], dtype=np.int32)
    m = class_counts.shape[0]
    sizes = class_counts.sum(axis=1)
    pairs = np.unique(growing // 2)
    counted = 2 * pairs + (sizes[2 * pairs + 1] < sizes[2 * pairs])   # the smaller sibling
    row = np.full(m, -1, dtype=np.int32)
    row[counted] = np.arange(counted.size, dtype=np.int32)
    table = np.zeros((counted.size,) + parents.shape[1:], dtype=np.int64)
    _tree.level_counts(codes, yi, node, *routing, row, table)   # moves the records too
    tables = np.empty((growing.size,) + parents.shape[1:], dtype=np.int64)
    own = row[growing] >= 0
    tables[own] = table[row[growing[own]]]
    other = growing[~own]
    tables[~own] = parents[other // 2] - table[row[other ^ 1]]
    return tables, node


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
    parallel: epsilon in all, charged once.
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

    def __init__(self, *, epsilon=1.0, bounds=None, classes=None, n_estimators="auto",
                 max_depth="auto", n_bins="auto", split_share="auto", criterion="max",
                 algorithm="partition", voting="proba", random_state=None, accountant=None,
                 split_levels="auto"):
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
        classes, n_estimators, then the private trees' plan (:func:`_private_plan`) or
        (max_depth, noise scale) for random trees)."""
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
            plan = _private_plan(epsilon, bounds, classes, depth, bins, share, self.criterion,
                                 n_features, trees, levels)
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

    def _resolved(self, epsilon, classes, n_features):
        """(n_estimators, max_depth, n_bins, split_share, split_levels) with "auto" resolved (2
        classes when unknown; n_features None before the fit; the last three None for random
        trees)."""
        if self.algorithm == "partition":
            auto = forest_defaults(epsilon, 2 if classes is None else classes.size, n_features)
            given = (self.n_estimators, self.max_depth, self.n_bins, self.split_share,
                     self.split_levels)
        else:
            auto = random_forest_defaults(epsilon) + (None, None, None)
            given = (self.n_estimators, self.max_depth, None, None, None)
        return tuple(a if _is_auto(g) or g is None else g for a, g in zip(auto, given))

    def fit(self, X, y):
        """Grow the trees and release their leaves. Returns self."""
        classes = self._check_params()[2]
        X, classes, yi = _labels(self, X, y, classes, finite=False)
        epsilon, bounds, _, trees, *plan = self._check_params(*X.shape, classes)
        if self.algorithm == "partition":
            self.tree_ = _fit_private(self, X, yi, classes.size, bounds, plan, trees, epsilon,
                                      "RandomForestClassifier")
        else:
            self.tree_ = self._fit_random(X, yi, classes.size, bounds, trees, *plan, epsilon)
        self.classes_ = classes
        (self.n_estimators_, self.max_depth_, self.n_bins_, self.split_share_,
         self.split_levels_) = self._resolved(epsilon, classes, X.shape[1])
        _warn_if_one_class(self.tree_.values, "forest")
        return self

    def _fit_random(self, X, yi, k, bounds, trees, depth, scale, epsilon):
        # scikit-learn's test (a finite sum, else element by element), without its overhead
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.isfinite(np.sum(X)) or np.isfinite(X).all()
        if not finite:
            raise ValueError("Input X contains NaN or infinity")
        lower, upper = bounds

        def draw(rng):
            forest = random_trees(lower, upper, trees, depth, rng)
            counts = np.zeros((forest.values.shape[0], k), dtype=np.int64)
            _tree.forest_counts(X, yi, forest.feature, forest.threshold, trees, depth, counts)
            forest.values = _noisy(counts, scale, rng)
            return forest

        return release(draw, cost=Cost(epsilon), accountant=self.accountant,
                       random_state=self.random_state, label="RandomForestClassifier")

    @property
    def _voting_tree(self):
        if self.voting == "counts":
            return self.tree_
        return replace(self.tree_, values=_proba(self.tree_.values))


def random_trees(lower, upper, n_trees, depth, rng):
    """``n_trees`` complete random trees of depth ``depth`` over the box [lower, upper]
    (data-independent), leaves numbered in order; ``values`` is left empty (0 columns)."""
    d = lower.size
    per_tree = 2 ** (depth + 1) - 1
    n_internal = 2**depth - 1
    total = n_trees * per_tree
    feature = np.full(total, -1, dtype=np.int32)
    threshold = np.zeros(total)
    left = np.full(total, -1, dtype=np.int32)
    right = np.full(total, -1, dtype=np.int32)
    slot = np.full(total, -1, dtype=np.int32)
    # intervals of the current level's nodes only: (n_trees, nodes, d)
    lo = np.broadcast_to(lower, (n_trees, 1, d)).copy()
    hi = np.broadcast_to(upper, (n_trees, 1, d)).copy()
    offsets = np.arange(n_trees) * per_tree
    rows = np.arange(n_trees)[:, None]
    # heap order inside a tree: node i has children 2i + 1 and 2i + 2; a level at a time
    for level in range(depth):
        nodes = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        cols = np.arange(nodes.size)[None, :]
        f = rng.integers(0, d, size=(n_trees, nodes.size))
        a = lo[rows, cols, f]
        b = hi[rows, cols, f]
        t = a + (b - a) * rng.random((n_trees, nodes.size))
        gid = offsets[:, None] + nodes[None, :]
        feature[gid] = f
        threshold[gid] = t
        left[gid] = gid + nodes + 1      # offset + 2i + 1
        right[gid] = gid + nodes + 2
        if level + 1 == depth:
            break
        # children in heap order: (left of node 0, right of node 0, left of node 1, ...)
        lo = np.repeat(lo, 2, axis=1)
        hi = np.repeat(hi, 2, axis=1)
        hi[rows, 2 * cols, f] = t
        lo[rows, 2 * cols + 1, f] = t
    leaves = offsets[:, None] + np.arange(n_internal, per_tree)[None, :]
    slot[leaves.ravel()] = np.arange(leaves.size, dtype=np.int32)
    return Trees(feature=feature, threshold=threshold, left=left, right=right, slot=slot,
                 roots=offsets.astype(np.int32), values=np.zeros((leaves.size, 0)), depth=depth)
