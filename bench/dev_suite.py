"""Development suite: the data sets on which the learners' defaults were chosen, disjoint from
the test splits that bench/learn_accuracy.py reports.

    PYTHONPATH=python python bench/dev_suite.py alpha [--seeds 20]     # alpha="auto"
    PYTHONPATH=python python bench/dev_suite.py nb-split [--seeds 20]  # GaussianNB's budget
    PYTHONPATH=python python bench/dev_suite.py intercept [--seeds 20] # intercept_scaling
    PYTHONPATH=python python bench/dev_suite.py regression [--seeds 20] # LinearRegression
    PYTHONPATH=python python bench/dev_suite.py tree [--seeds 9]       # DecisionTreeClassifier
    PYTHONPATH=python python bench/dev_suite.py forest [--seeds 9]     # RandomForestClassifier
    PYTHONPATH=python python bench/dev_suite.py scaling [--seeds 8]    # linear models, 4 scalings
    PYTHONPATH=python python bench/dev_suite.py nb-floor [--seeds 10]  # GaussianNB's var_floor
    PYTHONPATH=python python bench/dev_suite.py tree-prep --epsilons 0.1  # trees, issue 28 item 2
    PYTHONPATH=python python bench/dev_suite.py tree-small --seeds 30  # trees below epsilon 0.2
    PYTHONPATH=python python bench/dev_suite.py tree-rules --seeds 12 --epsilons 0.1 [--rules
        5,0.3,2,32 ...] [--sets REGEX]                  # tree_defaults' rules, widened suite
    PYTHONPATH=python python bench/dev_suite.py centre --seeds 8 [--exclude 1800x64]
                                                       # linear models' bounds (centring)
    PYTHONPATH=python python bench/dev_suite.py tree-split-law --seeds 30 --epsilons 0.1 0.5
        [--sets REGEX]                                  # the random levels' split law
    PYTHONPATH=python python bench/dev_suite.py svc-h --seeds 8 [--sets REGEX]
                                                       # LinearSVC's Huber width h

Data sets (for the linear models, rows min-max scaled and divided by their own norm,
``data_norm=1``, as in learn_accuracy.py; GaussianNB sees the raw features with the public
bounds, or the training part's min/max for the synthetic sets):

* the adult-like generator of learn_accuracy.py with another seed (101), its own 70/30 split;
* breast cancer and digits: two stratified 70/30 splits of learn_accuracy.py's TRAINING rows
  only (their test rows are never read here);
* four ``make_classification`` problems (n from 600 to 20,000, d from 10 to 50), min/max from
  their training part.

``alpha``: LogisticRegression and LinearSVC (objective perturbation) under these rules for
alpha of the averaged objective on the unit-ball rows [x, 1] / sqrt(2):

* ``1/n``: the previous rule (C = 1 on the unit-ball rows);
* ``C=1``: 1 / (n s^2), scikit-learn's C = 1 in the caller's units;
* ``prior P``: :func:`dpcore.learn.auto_alpha` with its weight-norm prior set to P (the library
  uses :data:`dpcore.learn._erm_calibration.WEIGHT_NORM_PRIOR_SQ`).

``intercept``: LogisticRegression and LinearSVC (objective perturbation, ``alpha="auto"``) with
the intercept column's constant ``intercept_scaling`` from 1 down to 1/16 (run after ``alpha``,
whose rule it keeps; ``alpha`` runs with the column 1 it was chosen with).

``nb-split``: GaussianNB with epsilon in thirds (counts, sums, sums of squares) against
:func:`dpcore.learn.gaussian_nb_budget`.

``regression``: LinearRegression's method (the functional mechanism, pure epsilon only; SSP;
AdaSSP with its ridge at a quarter of the noise bound, and at the whole bound with a token
eigenvalue floor as in Wang 2018) and SSP's public rules (``dpcore.learn._ssp``: the eigenvalue
floor ``EIGEN_FLOOR``, the spectrum shrinkage ``SHRINK_SPECTRUM``, the gates
``MAX_NOISE_PER_RECORD`` and ``MAX_NOISE_PER_RECORD_GAUSSIAN``, the mean's noise target
``MEAN_NOISE``), pure epsilon and with delta = 1e-6, on regression data of its own
(:func:`regression_sets`, disjoint from learn_accuracy.py's diabetes and make_regression data):
four ``make_regression`` problems (n from 3,000 to 10^5, d from 5 to 30, two with correlated
features, Gaussian noise added for a population R^2 of 0.5 to 0.92) and four small
latent-factor problems (n from 300 to 1,500, d from 8 to 15, correlated features, two with half
of them log-normal, R^2 0.3 to 0.6), each
split 70/30 once; bounds are the training part's min/max. The score is the test R^2.
``tree`` and ``forest`` (issue 28 item 3): the trees' defaults from public inputs
(:func:`dpcore.learn._tree.tree_defaults`, :func:`~dpcore.learn._tree.forest_defaults`) against
fixed settings and diffprivlib's model (when importable; run with the peers' Python), at epsilon
0.1 .. 5. Their data sets are disjoint from learn_accuracy.py's tree cells (breast cancer,
digits, wine, iris): ``make_classification`` problems shaped like them and like other small
tables (n 150 .. 5000, d 4 .. 64, 2 .. 10 classes; 2 stratified 70/30 splits each, bounds =
the generated data's min/max) and diabetes with its target cut at the median; widened for
issue 28 item 3 (``TREE_WIDE_SUITE``, ``GLYPHS``): tables of 12,000 to 30,000 records
(some with two clusters per class), few-feature tables as separable as small public ones (120
to 210 records, 4 to 7 features), 10 classes with signal (``make_classification`` with 16
and 64 features, and :func:`glyphs`, digit-like 8 x 8 images without digits).

``scaling`` (issue 28 items 1 and 2): LogisticRegression's and LinearSVC's default (objective
perturbation, ``alpha="auto"``: C = 1 on the unit-ball rows) against the C = 1 term at other
row scales (in the caller's units, the rule before issue 28; at data_norm = sqrt(d); at
d^(1/4)), with LogisticRegression's ``method="output"`` and diffprivlib's LogisticRegression
(when importable) for reference, under the four preprocessings of linear_accuracy.py
(:data:`linear_accuracy.PREPROCESSINGS`, the public inputs from the whole
table as there), on the trees' development sets (below: none of them is a reporting set),
at epsilon 0.1 .. 5. (Before issue 28 item 2 it ran on the breast cancer and digits training
rows above, which the ``--linear`` study's own splits reuse as test rows.)

``nb-floor`` (issue 28 item 2): GaussianNB's ``var_floor="auto"`` (each class's variances
floored at a multiple of the variance estimate's noise level, ``NOISE_VAR_FLOOR``) at 0.5 / 1
/ 2 / 4 against the fixed floor 1e-3 and diffprivlib, under three of the preprocessings (min-max
divided by sqrt(d) is min-max for naive Bayes) on the trees' development sets.

``tree-prep``: DecisionTreeClassifier's defaults against depth 6 with 16 bins and diffprivlib
under the preprocessings of issue 28 item 2 (``tree_accuracy.preprocess``: min-max, standardised
and clipped, unit-norm rows) on the same sets.

``tree-small``: DecisionTreeClassifier below epsilon 0.2 (0.1 and 0.15 by default), under the
three preprocessings of ``tree-prep``: the narrow rule (depth 5, a tenth of epsilon shared by
every level) against a root split drawn from the data at 30 / 50 / 70% of epsilon with random
splits below (``split_levels=1``; depth 4, 5 or 6), the two top levels at 60%, and finer grids
(64 to 256 bins) for the narrow rule and the chosen wide one; the score of
a cell is the MEAN test accuracy over the seeds, and the summary is given separately for the
sets with fewer than ``_tree_grid.WIDE`` (20) features and the others.

``tree-rules``: DecisionTreeClassifier's rules from public inputs on the widened suite, under
the three preprocessings of ``tree-prep``: below epsilon 0.2 the candidates of
:data:`TREE_RULES` (or ``--rules``: depth, split_share, split_levels, n_bins), from 0.2 on
tree_defaults changed as in :data:`TREE_RULES_ABOVE`; with diffprivlib's tree. The score of a
cell is the mean test accuracy over the seeds; the summary gives, per group of cells (fewer or
at least 20 features, 2-3 or more classes, under or over 10^4 records: the last is private and
only tells the reader where a rule wins), each rule's mean, its mean difference from
diffprivlib and the cells where it is below diffprivlib.

``centre`` (issue 28 item 2, the intercept under all-positive features): LogisticRegression
and LinearSVC (defaults) without feature bounds against ``bounds=`` the preprocessing's public
bounds (the rows centred at the box's midpoint when that tightens the norm bound,
:func:`dpcore.learn._erm.centring`), and with bounds and the intercept column at half or all of
the centred rows' radius, with diffprivlib's LogisticRegression for reference, under the four
preprocessings of linear_accuracy.py on the trees' development sets (one split each).

``tree-split-law``: DecisionTreeClassifier with its defaults, the levels that do not look at
the data drawn by the default law (below 20 features a feature by its candidates left in the
node, cut at their middle; from 20 on the former law), by the former one (a feature with candidates and one of its candidates, uniformly) and
by a uniform feature cut at its middle, and by a coin between the default and the former law
(eighth session: the default led on average, the former law on unit-norm rows of 13 features);
with diffprivlib, summarised as ``tree-rules``.

``svc-h`` (issue 28 item 2, LinearSVC on rows concentrated in a small cap of the sphere):
LinearSVC (defaults, the preprocessing's bounds) with the Huber width h at :data:`SVC_WIDTHS`
(the library's default first), diffprivlib's LogisticRegression for reference, under the four
preprocessings of linear_accuracy.py on the trees' development sets (one split each).

Prints the median test accuracy over the noise seeds per data set, model and epsilon, then each
rule's mean difference from the first and its wins and losses over all cells.
"""
import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learn_accuracy as la  # noqa: E402
import linear_accuracy as lin  # noqa: E402
from dev_common import DevSet, median_score, peer_class  # noqa: E402
from dev_trees import (  # noqa: E402
    TREE_RULES,
    forest_cells,
    group_summary,
    size_summary,
    tree_cells,
    tree_data_sets,
    tree_prep_cells,
    tree_rules_cells,
    tree_small_cells,
    tree_split_law_cells,
)

from dpcore.learn import (  # noqa: E402
    GaussianNB,
    LinearRegression,
    LinearSVC,
    LogisticRegression,
    auto_alpha,
)
from dpcore.learn import _naive_bayes, _ssp  # noqa: E402
from dpcore.learn._erm import INTERCEPT_SCALING_RATIO  # noqa: E402
from dpcore.learn._erm_calibration import WEIGHT_NORM_PRIOR_SQ  # noqa: E402

EPSILONS = (0.5, 1.0, 2.0, 5.0)
ROW_SCALE = math.sqrt(2.0)          # data_norm = 1 with an intercept
PRIORS = (2.0, 3.0, 4.0, 5.0, 10.0)
INTERCEPT_SCALINGS = (1.0, 0.5, 0.25, 0.125, 0.0625)


def _minmax_unit(Xtr, Xte):
    lo, hi = Xtr.min(axis=0), Xtr.max(axis=0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    return tuple(la._unit_rows(np.clip((X - lo) / (hi - lo), 0.0, 1.0)) for X in (Xtr, Xte))


def data_sets():
    out = []
    codes, numeric, y = la.adult_like(40_000, seed=101)
    original = la.adult_like
    la.adult_like = lambda n: (codes, numeric, y)       # adult_split reads the generator
    try:
        s = la.adult_split(40_000)
    finally:
        la.adult_like = original
    out.append(DevSet("adult-like (seed 101)", s.ytr, s.yte, (s.Xtr, s.Xte, (s.lo, s.hi)),
                      la.linear_inputs(s)))
    for name in ("breast cancer", "digits"):
        split = la.sklearn_split(name)
        Ltr, _ = la.linear_inputs(split)              # training rows only
        for rep in range(2):
            idx = np.arange(len(split.ytr))
            a, b = train_test_split(idx, test_size=0.3, random_state=100 + rep,
                                    stratify=split.ytr)
            out.append(DevSet(f"{name} (training rows, split {rep})", split.ytr[a],
                              split.ytr[b], (split.Xtr[a], split.Xtr[b], (split.lo, split.hi)),
                              (Ltr[a], Ltr[b])))
    for n, d, informative, sep, seed in [(600, 10, 4, 1.0, 1), (2000, 30, 8, 0.8, 2),
                                         (20_000, 50, 10, 0.5, 3), (1000, 20, 5, 1.5, 4)]:
        X, y = make_classification(n_samples=n, n_features=d, n_informative=informative,
                                   class_sep=sep, random_state=seed)
        a, b, ya, yb = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
        out.append(DevSet(f"make_classification n={n} d={d}", ya, yb,
                          (a, b, (a.min(axis=0), a.max(axis=0))), _minmax_unit(a, b)))
    return out


def rules(n, d, epsilon, curvature, k):
    """Rule name -> alpha. ``prior P`` rescales the library's noise term from its prior."""
    stat = 1.0 / (n * ROW_SCALE ** 2)
    lib = auto_alpha("objective", n, d, epsilon, row_scale=ROW_SCALE, curvature=curvature, k=k)
    out = {"1/n": 1.0 / n, "C=1": stat}
    for prior in PRIORS:
        out[f"prior {prior:g}"] = stat + (lib - stat) * WEIGHT_NORM_PRIOR_SQ / prior
    return out


def alpha_cells(sets, seeds):
    for s in sets:
        classes = np.unique(s.ytr)
        k = 1 if classes.size == 2 else classes.size
        Xtr, Xte = s.linear
        n, d = Xtr.shape[0], Xtr.shape[1] + 1
        models = [("LogisticRegression", LogisticRegression, 0.25)]
        if k == 1:                                   # LinearSVC has no softmax mode
            models.append(("LinearSVC", LinearSVC, 1.0))
        for model, est, curvature in models:
            for eps in EPSILONS:
                row = {}
                for rule, alpha in rules(n, d, eps, curvature, k).items():
                    def make(seed, est=est, eps=eps, alpha=alpha):
                        # the intercept column 1 (ROW_SCALE), as when the rule was chosen
                        return est(epsilon=eps, data_norm=1.0, alpha=alpha, intercept_scaling=1.0,
                                   classes=classes, random_state=seed)
                    row[rule] = median_score(make, Xtr, s.ytr, Xte, s.yte, seeds)
                yield (s.name, model, eps), row


def intercept_cells(sets, seeds):
    for s in sets:
        classes = np.unique(s.ytr)
        Xtr, Xte = s.linear
        models = [("LogisticRegression", LogisticRegression)]
        if classes.size == 2:
            models.append(("LinearSVC", LinearSVC))
        for model, est in models:
            for eps in EPSILONS:
                row = {}
                for t in INTERCEPT_SCALINGS:
                    def make(seed, est=est, eps=eps, t=t):
                        return est(epsilon=eps, data_norm=1.0, intercept_scaling=t,
                                   classes=classes, random_state=seed)
                    row[f"t={t:g}"] = median_score(make, Xtr, s.ytr, Xte, s.yte, seeds)
                yield (s.name, model, eps), row


def nb_split_cells(sets, seeds):
    splits = {"thirds": lambda epsilon, d: (epsilon / 3.0,) * 3,
              "gaussian_nb_budget": _naive_bayes.gaussian_nb_budget}
    library = _naive_bayes.gaussian_nb_budget
    for s in sets:
        classes = np.unique(s.ytr)
        Xtr, Xte, bounds = s.raw
        for eps in EPSILONS:
            row = {}
            for rule, split in splits.items():
                def make(seed, eps=eps):
                    return GaussianNB(epsilon=eps, bounds=bounds, classes=classes,
                                      random_state=seed)
                _naive_bayes.gaussian_nb_budget = split     # GaussianNB.fit looks it up
                try:
                    row[rule] = median_score(make, Xtr, s.ytr, Xte, s.yte, seeds)
                finally:
                    _naive_bayes.gaussian_nb_budget = library
            yield (s.name, "GaussianNB", eps), row


def _latent_regression(n, d, r2, seed, skew):
    """Features from 3 latent factors plus noise (half of them exponentiated when ``skew``),
    y linear in them plus noise for a population R^2 of ``r2``."""
    rng = np.random.default_rng(seed)  # insecure-ok: benchmark data, not noise
    A = rng.normal(size=(3, d))
    X = rng.normal(size=(n, 3)) @ A + 0.7 * rng.normal(size=(n, d))
    if skew:
        X[:, : d // 2] = np.exp(0.5 * X[:, : d // 2])
    w = rng.normal(size=d) * (rng.random(d) < 0.6)
    s = X @ w
    return X, s + rng.normal(size=n) * s.std() * math.sqrt((1 - r2) / r2)


def regression_sets():
    """(name, X_train, X_test, y_train, y_test, bounds_X, bounds_y) for the regression study."""
    out = []
    for n, d, noise, rank, seed in [(100_000, 10, 0.3, None, 101), (20_000, 20, 0.6, 5, 102),
                                    (3_000, 5, 0.3, None, 103), (100_000, 30, 0.5, 8, 104)]:
        X, y = make_regression(n_samples=n, n_features=d, n_informative=max(2, d // 2),
                               effective_rank=rank, random_state=seed)
        y = y + np.random.default_rng(seed).normal(size=n) * y.std() * noise  # insecure-ok: data
        out.append((f"make_regression n={n} d={d}", X, y))
    for n, d, r2, skew, seed in [(440, 10, 0.5, True, 201), (300, 8, 0.3, False, 202),
                                 (1500, 10, 0.6, True, 203), (800, 15, 0.5, False, 204)]:
        X, y = _latent_regression(n, d, r2, seed, skew)
        out.append((f"latent n={n} d={d}{' skewed' if skew else ''}", X, y))
    sets = []
    for i, (name, X, y) in enumerate(out):
        a, b, ya, yb = train_test_split(X, y, test_size=0.3, random_state=300 + i)
        sets.append((name, a, b, ya, yb, (a.min(axis=0), a.max(axis=0)),
                     (float(ya.min()), float(ya.max()))))
    return sets


# name -> (LinearRegression keywords, {_ssp constant: value}); the first is the reference
REGRESSION_RULES = {
    "functional": ({"method": "functional"}, {}),
    "ssp": ({}, {}),
    "adassp": ({"method": "adassp"}, {}),
    "adassp Wang": ({"method": "adassp"}, {"RIDGE_SCALE": 1.0, "EIGEN_FLOOR": 0.02}),
    "ssp floor 0.25": ({}, {"EIGEN_FLOOR": 0.25}),
    "ssp floor 1": ({}, {"EIGEN_FLOOR": 1.0}),
    "ssp no shrink": ({}, {"SHRINK_SPECTRUM": False}),
    "gate 1 (Laplace)": ({}, {"MAX_NOISE_PER_RECORD": 1.0}),
    "gate 4 (Laplace)": ({}, {"MAX_NOISE_PER_RECORD": 4.0}),
    "gate 0.5 (Gaussian)": ({}, {"MAX_NOISE_PER_RECORD_GAUSSIAN": 0.5}),
    "gate 2 (Gaussian)": ({}, {"MAX_NOISE_PER_RECORD_GAUSSIAN": 2.0}),
    "mean 0.01": ({}, {"MEAN_NOISE": 0.01}),
    "mean 0.05": ({}, {"MEAN_NOISE": 0.05}),
}


def regression_cells(seeds, rules=None):
    rules = rules or REGRESSION_RULES
    for name, Xtr, Xte, ytr, yte, bx, by in regression_sets():
        for delta in (None, 1e-6):
            for eps in (0.1,) + EPSILONS:
                row = {}
                for rule, (kw, constants) in rules.items():
                    if delta is not None and kw.get("method") == "functional":
                        continue       # pure epsilon only
                    saved = {k: getattr(_ssp, k) for k in constants}
                    for k, v in constants.items():
                        setattr(_ssp, k, v)
                    try:
                        def make(seed, kw=kw, eps=eps, delta=delta):
                            extra = {} if delta is None else {"delta": delta}
                            return LinearRegression(epsilon=eps, bounds_X=bx, bounds_y=by,
                                                    random_state=seed, **kw, **extra)
                        row[rule] = median_score(make, Xtr, ytr, Xte, yte, seeds)
                    finally:
                        for k, v in saved.items():
                            setattr(_ssp, k, v)
                label = "LinearRegression" + ("" if delta is None else " delta=1e-6")
                yield (name, label, eps), row
def _scaling_kwargs(rule, est, n, d, eps, data_norm, k):
    """Keyword arguments of a ``scaling`` rule: "auto" is the library's default; "C=1 in the
    caller's units" the rule before issue 28 (the C = 1 term at the rows' own scale
    sqrt(data_norm^2 + t^2)); "t=R" puts the intercept column at R data_norm."""
    if rule.startswith("t="):
        num, _, den = rule[2:].partition("/")
        return {"intercept_scaling": data_norm * float(num) / float(den or 1)}
    if rule == "auto":
        return {}
    model = est(epsilon=eps, data_norm=data_norm)
    multinomial = model._multinomial(k)
    eps_model = eps if multinomial or k <= 2 else eps / k
    if rule == "C=1 in the caller's units":
        scale = model._row_scale(data_norm)
    else:   # "C=1 at X": C = 1 where the rows' bound is X (with the auto intercept column)
        scale = {"sqrt(d)": math.sqrt(d), "d^1/4": d ** 0.25}[rule[len("C=1 at "):]] * math.hypot(
            1.0, INTERCEPT_SCALING_RATIO)
    return {"alpha": auto_alpha("objective", n, d + 1, eps_model, row_scale=scale,
                                curvature=model._curvature(), k=k if multinomial else 1)}


def _peer_linear_row(peer, eps, data_norm, split, seeds):
    """{"diffprivlib": median score} of the peer's LogisticRegression on one split (X_train,
    y_train, X_test, y_test), or {} without the peer."""
    import warnings

    if peer is None:
        return {}

    def make_peer(seed):
        return peer(epsilon=eps, data_norm=data_norm, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"diffprivlib": median_score(make_peer, *split, seeds)}


SCALING_RULES = ("auto", "C=1 in the caller's units", "C=1 at sqrt(d)", "C=1 at d^1/4")
SCALING_OUTPUT = True   # also method="output", for reference


def scaling_cells(sets, seeds, epsilons=None):
    """LogisticRegression and LinearSVC (objective perturbation) under the ``SCALING_RULES``,
    with ``method="output"`` and diffprivlib's LogisticRegression for reference, under the four
    preprocessings of linear_accuracy.py (public inputs from the whole table, as there) on the
    trees' development sets (:func:`tree_data_sets`: none of them is a reporting set)."""

    peer = peer_class("LogisticRegression")
    for s in sets:
        Xtr, Xte, (lo, hi) = s.raw
        X = np.vstack([Xtr, Xte])
        pub = lin.public_inputs(X)   # as linear_accuracy.py: from the whole table
        classes = np.unique(s.ytr)
        n, d = Xtr.shape
        for kind in lin.PREPROCESSINGS:
            Ztr, data_norm, _ = lin.preprocess(kind, Xtr, pub)
            Zte = lin.preprocess(kind, Xte, pub)[0]
            for eps in (0.1,) + EPSILONS if epsilons is None else epsilons:
                peer_row = _peer_linear_row(peer, eps, data_norm, (Ztr, s.ytr, Zte, s.yte), seeds)
                for model, est in (("LogisticRegression", LogisticRegression),
                                   ("LinearSVC", LinearSVC)):
                    row = {}
                    for rule in SCALING_RULES:
                        kw = _scaling_kwargs(rule, est, n, d, eps, data_norm, classes.size)

                        def make(seed, eps=eps, kw=kw, est=est):
                            return est(epsilon=eps, data_norm=data_norm, classes=classes,
                                       random_state=seed, **kw)
                        row[rule] = median_score(make, Ztr, s.ytr, Zte, s.yte, seeds)
                    if model == "LogisticRegression" and SCALING_OUTPUT:
                        def make_output(seed, eps=eps):
                            return LogisticRegression(epsilon=eps, data_norm=data_norm,
                                                      classes=classes, random_state=seed,
                                                      method="output")
                        row["output"] = median_score(make_output, Ztr, s.ytr, Zte, s.yte,
                                                      seeds)
                    row.update(peer_row)
                    yield (f"{s.name} / {kind}", model, eps), row


NB_FLOORS = (0.5, 1.0, 2.0, 4.0)   # NOISE_VAR_FLOOR candidates (the library's is one of them)


def nb_floor_cells(sets, seeds, epsilons=None):
    """GaussianNB's ``var_floor="auto"`` at the NOISE_VAR_FLOOR candidates against the fixed
    floor 1e-3 (the earlier default) and diffprivlib, under linear_accuracy.py's preprocessings
    (min-max divided by sqrt(d) is min-max for naive Bayes: left out) on the trees' development
    sets."""
    import warnings

    peer = peer_class("GaussianNB")
    library = _naive_bayes.NOISE_VAR_FLOOR
    for s in sets:
        Xtr, Xte, _ = s.raw
        pub = lin.public_inputs(np.vstack([Xtr, Xte]))
        classes = np.unique(s.ytr)
        for kind in (lin.PREPROCESSINGS[0], lin.PREPROCESSINGS[2], lin.PREPROCESSINGS[3]):
            Ztr, _, bounds = lin.preprocess(kind, Xtr, pub)
            Zte = lin.preprocess(kind, Xte, pub)[0]
            for eps in (0.1,) + EPSILONS if epsilons is None else epsilons:
                row = {}
                for rule in ("1e-3",) + NB_FLOORS:
                    floor = 1e-3 if rule == "1e-3" else "auto"

                    def make(seed, eps=eps, floor=floor):
                        return GaussianNB(epsilon=eps, bounds=bounds, classes=classes,
                                          var_floor=floor, random_state=seed)
                    if rule != "1e-3":
                        _naive_bayes.NOISE_VAR_FLOOR = rule
                    try:
                        row[f"floor {rule}" if rule == "1e-3" else f"auto x{rule:g}"] = \
                            median_score(make, Ztr, s.ytr, Zte, s.yte, seeds)
                    finally:
                        _naive_bayes.NOISE_VAR_FLOOR = library
                if peer is not None:
                    def make_peer(seed, eps=eps):
                        return peer(epsilon=eps, bounds=bounds, random_state=seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        row["diffprivlib"] = median_score(make_peer, Ztr, s.ytr, Zte, s.yte,
                                                           seeds)
                yield (f"{s.name} / {kind}", "GaussianNB", eps), row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=["alpha", "nb-split", "intercept", "regression", "tree",
                                          "forest", "scaling",
                                          "tree-prep", "tree-small", "nb-floor",
                                          "tree-rules", "centre", "tree-split-law",
                                          "svc-h"])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--epsilons", type=float, nargs="*", default=None,
                        help="tree and forest: only these epsilons")
    parser.add_argument("--rules", nargs="*", default=None,
                        help="tree-rules below epsilon 0.2: these candidates instead of "
                             "TREE_RULES, each DEPTH,SHARE,LEVELS,BINS (e.g. 5,0.3,2,32)")
    parser.add_argument("--sets", default=None,
                        help="tree studies: only the development sets whose name matches this "
                             "regular expression")
    parser.add_argument("--first-seed", type=int, default=None,
                        help="tree-rules, tree-split-law: the first noise seed (fresh seeds for "
                             "a new study)")
    parser.add_argument("--exclude", nargs="*", default=(),
                        help="centre: leave out the sets whose name contains one of these")
    args = parser.parse_args(argv)
    if args.rules:
        TREE_RULES.clear()
        for text in args.rules:
            depth, share, levels, bins = text.split(",")
            TREE_RULES[f"({depth}, {share}, {levels}, {bins})"] = (
                int(depth), float(share), int(levels), int(bins))
    cells = {}
    if args.study == "regression":
        cells_iter = regression_cells(args.seeds)
    elif args.study == "scaling":
        cells_iter = scaling_cells(tree_data_sets(), args.seeds, epsilons=args.epsilons)
    elif args.study == "nb-floor":
        cells_iter = nb_floor_cells(tree_data_sets(), args.seeds, epsilons=args.epsilons)
    elif args.study == "centre":
        sets = [s for s in tree_data_sets(reps=1) if not any(x in s.name for x in args.exclude)]
        cells_iter = centre_cells(sets, args.seeds, epsilons=args.epsilons)
    elif args.study == "svc-h":
        sets = [s for s in tree_data_sets(reps=1)
                if args.sets is None or re.search(args.sets, s.name)]
        cells_iter = svc_width_cells(sets, args.seeds, epsilons=args.epsilons)
    elif args.study in ("tree", "forest", "tree-prep", "tree-small", "tree-rules",
                        "tree-split-law"):
        study = {"tree": tree_cells, "forest": forest_cells,
                 "tree-prep": tree_prep_cells, "tree-small": tree_small_cells,
                 "tree-rules": tree_rules_cells,
                 "tree-split-law": tree_split_law_cells}[args.study]
        sets = [s for s in tree_data_sets() if args.sets is None or re.search(args.sets, s.name)]
        fresh = ({} if args.first_seed is None
                 or args.study not in ("tree-rules", "tree-split-law")
                 else {"first_seed": args.first_seed})
        cells_iter = study(sets, args.seeds, epsilons=args.epsilons, **fresh)
    else:
        study = {"alpha": alpha_cells, "nb-split": nb_split_cells,
                 "intercept": intercept_cells}[args.study]
        cells_iter = study(data_sets(), args.seeds)
    for (name, model, eps), row in cells_iter:
        cells[(name, model, eps)] = row
        print(f"{name:40s} {model:18s} eps {eps:<4g}",
              " ".join(f"{r}: {v:.3f}" for r, v in row.items()), flush=True)
    if args.study in ("tree-rules", "tree-split-law"):
        group_summary(cells)
        size_summary(cells)
    elif args.study == "tree-small":
        for group in sorted({(model, eps) for _, model, eps in cells}):
            print(f"\n{group[0]}, epsilon {group[1]:g}:", end="")
            summarise({k: v for k, v in cells.items() if k[1:] == group})
    else:
        summarise(cells)
    if args.study in ("scaling", "nb-floor", "centre", "svc-h"):
        scaling_summary(cells)


def scaling_summary(cells, margin=0.02):
    """Per model, rule and preprocessing: the mean difference of medians from diffprivlib and
    the cells whose median is more than ``margin`` below it."""
    for model in dict.fromkeys(key[1] for key in cells):
        rows = {key: row for key, row in cells.items() if key[1] == model}
        rules = [r for r in next(iter(rows.values())) if r != "diffprivlib"]
        print(f"\n{model}: rule / preprocessing: mean difference from diffprivlib, cells more "
              f"than {margin} below it")
        for rule in rules:
            parts = []
            for kind in lin.PREPROCESSINGS:
                diff = np.array([row[rule] - row["diffprivlib"] for key, row in rows.items()
                                 if key[0].endswith(" / " + kind)])
                if diff.size == 0:
                    continue
                parts.append(f"{kind}: {diff.mean():+.3f}, {int((diff < -margin).sum())}/"
                             f"{diff.size}")
            print(f"  {rule:28s} " + "; ".join(parts))


def summarise(cells, floor=-1.0):
    """Each rule's mean difference from the first rule of its rows, with wins / losses; scores
    are floored at ``floor`` first (an R^2 of -500 would otherwise drown every other cell).
    Rows without the first rule (AdaSSP with delta has no functional-mechanism twin) are
    compared with their own first rule."""
    groups = {}
    for key, row in cells.items():
        groups.setdefault(tuple(row), []).append(row)
    for rules, rows in groups.items():
        first = rules[0]
        print(f"\nrule: mean score difference from {first} over {len(rows)} cells "
              f"(scores floored at {floor:g}), wins / losses")
        for rule in rules:
            diff = np.array([max(floor, row[rule]) - max(floor, row[first]) for row in rows])
            print(f"{rule:18s} {diff.mean():+.4f}  {int((diff > 0).sum())} / "
                  f"{int((diff < 0).sum())}")


CENTRE_RULES = ("no bounds", "bounds", "bounds, t=r/2", "bounds, t=r")


def centre_cells(sets, seeds, epsilons=None):
    """LogisticRegression and LinearSVC (defaults) under :data:`CENTRE_RULES` (module
    docstring, ``centre``), diffprivlib's LogisticRegression for reference, under the four
    preprocessings of linear_accuracy.py on the trees' development sets."""

    from dpcore.learn._erm import centring

    peer = peer_class("LogisticRegression")
    for s, kind, classes, (Ztr, Zte, data_norm, bounds), eps in _preprocessed(sets, epsilons):
        d = Ztr.shape[1]
        lower, upper = (np.broadcast_to(np.asarray(b, dtype=float), (d,)) for b in bounds)
        shift = centring(lower, upper, data_norm)
        radius = data_norm if shift is None else shift[1]
        peer_row = _peer_linear_row(peer, eps, data_norm, (Ztr, s.ytr, Zte, s.yte), seeds)
        for model, est in (("LogisticRegression", LogisticRegression), ("LinearSVC", LinearSVC)):
            row = {}
            for rule in CENTRE_RULES:
                kw = {} if rule == "no bounds" else {"bounds": bounds}
                if rule.endswith("t=r/2"):
                    kw["intercept_scaling"] = radius / 2.0
                elif rule.endswith("t=r"):
                    kw["intercept_scaling"] = radius

                def make(seed, eps=eps, kw=kw, est=est):
                    return est(epsilon=eps, data_norm=data_norm, classes=classes,
                               random_state=seed, **kw)
                row[rule] = median_score(make, Ztr, s.ytr, Zte, s.yte, seeds)
            row.update(peer_row)
            yield (f"{s.name} / {kind}", model, eps), row


def _preprocessed(sets, epsilons=None):
    """(set, preprocessing, classes, (Z_train, Z_test, data_norm, bounds), epsilon) for each
    development set under the four preprocessings of linear_accuracy.py (public inputs from the
    whole table, as there) and each epsilon (0.1 and :data:`EPSILONS` unless given)."""
    for s in sets:
        Xtr, Xte, _ = s.raw
        pub = lin.public_inputs(np.vstack([Xtr, Xte]))
        classes = np.unique(s.ytr)
        for kind in lin.PREPROCESSINGS:
            Ztr, data_norm, bounds = lin.preprocess(kind, Xtr, pub)
            Zte = lin.preprocess(kind, Xte, pub)[0]
            for eps in (0.1,) + EPSILONS if epsilons is None else epsilons:
                yield s, kind, classes, (Ztr, Zte, data_norm, bounds), eps


SVC_WIDTHS = (0.5, 1.0, 2.0)   # LinearSVC's Huber width h: the library's default first


def svc_width_cells(sets, seeds, epsilons=None):
    """LinearSVC (defaults, the preprocessing's bounds) at each Huber width of
    :data:`SVC_WIDTHS`, diffprivlib's LogisticRegression for reference, under the four
    preprocessings of linear_accuracy.py on the trees' development sets."""
    peer = peer_class("LogisticRegression")
    for s, kind, classes, (Ztr, Zte, data_norm, bounds), eps in _preprocessed(sets, epsilons):
        row = {}
        for h in SVC_WIDTHS:
            def make(seed, eps=eps, h=h):
                return LinearSVC(epsilon=eps, data_norm=data_norm, bounds=bounds, h=h,
                                 classes=classes, random_state=seed)
            row[f"h={h:g}"] = median_score(make, Ztr, s.ytr, Zte, s.yte, seeds)
        row.update(_peer_linear_row(peer, eps, data_norm, (Ztr, s.ytr, Zte, s.yte), seeds))
        yield (f"{s.name} / {kind}", "LinearSVC", eps), row

if __name__ == "__main__":
    main()
