"""Accuracy vs epsilon of dpcore's private learners against diffprivlib, default hyper-parameters.

Run by hand (not a pytest module) in an environment with the peers, e.g.::

    PYTHONPATH=python /tmp/dplenv/bin/python bench/learn_accuracy.py [--repeats 20] [--quick] [--timing]

What it measures (issue 18): every dpcore learner against diffprivlib's model of the same kind,
both constructed with their DEFAULT hyper-parameters and only the public inputs each needs
(epsilon, ``data_norm`` / feature bounds / target bounds / label set / category lists /
``n_clusters``, ``random_state``), at epsilon in {0.5, 1, 2, 5}. Every (learner, epsilon) is
fitted with the noise seeds ``random_state = 0 .. repeats - 1`` (the same seeds for both
libraries; ``--repeats`` defaults to 20). A cell of the table is the MEDIAN test score over the
seeds followed by its interquartile range ``[q1, q3]``; the ``non-private`` column is
scikit-learn's model of the same kind, default parameters (``random_state=0`` where it takes
one), on the same inputs. The last column says, from the medians, whether dpcore >= diffprivlib
at every epsilon ("pass", or "FAIL at" the epsilons where it is not, with both medians and a
95% bootstrap interval of their difference: one holding 0 means the shortfall is within the
noise seeds' spread); "n/a" where diffprivlib has no such model. A last line checks dpcore's LogisticRegression >= 0.85 at
epsilon = 2 on breast cancer.

Data sets and splits: breast cancer (binary), digits (10 classes) and diabetes (regression,
R^2) from scikit-learn; the adult-like data below; blobs for k-means. The supervised ones are
split once 70/30 with ``random_state=0`` (stratified for classification).

Public inputs. Feature bounds are the data-set-wide min/max (the documented stand-in for public
domain bounds; a real deployment must take them from domain knowledge); a constant feature gets
(min, min + 1). For the adult-like data the generator's declared domain is used (public by
construction; it contains the data). The same bounds go to both libraries. The label set is
given to the learners that take one (dpcore's, diffprivlib's trees); diffprivlib's logistic
regression and naive Bayes have no such parameter and read it from y.

Linear classifiers (LogisticRegression; LinearSVC, which diffprivlib lacks, against
scikit-learn's only): the features are min-max scaled to [0, 1] with those bounds (clipped; the
adult-like categorical columns one-hot encoded), then every row is divided by its own L2 norm
(scikit-learn's ``Normalizer``; a per-record public transform), so every row has norm 1 and
both libraries get ``data_norm=1``, which then clips nothing. ``--rows max`` divides every row by
the largest norm a row can have in the domain instead (sqrt(d) for d features in [0, 1];
sqrt(6 + 4) for the adult-like rows: 6 one-hot blocks and 4 numeric columns): no row loses its
length, but the typical row then has norm 0.25 (breast cancer) to 0.8 (adult-like), a smaller
signal against the same noise. The other learners get the raw features and the bounds.

Learners (dpcore | diffprivlib | non-private reference):

* LogisticRegression (default method) | LogisticRegression | LogisticRegression.
* LinearSVC | - | LinearSVC.
* GaussianNB | GaussianNB | GaussianNB.
* CategoricalNB (adult-like only: the 6 categorical codes and the 4 numeric columns cut into 8
  equal-width bins of their domain) | - | CategoricalNB (``min_categories`` = category counts).
* DecisionTreeClassifier | DecisionTreeClassifier | DecisionTreeClassifier.
* RandomForestClassifier | RandomForestClassifier | RandomForestClassifier.
* LinearRegression (diabetes; bounds_X, bounds_y = data min/max) | LinearRegression |
  LinearRegression.
* KMeans (``make_blobs``: n = 10**5 (``--quick``: 10**4), d = 2, 5 centres in (-10, 10), standard
  deviation 1, seed 0; bounds (-15, 15); ``n_clusters=5``) | KMeans | KMeans(n_init=10). Its
  score is the k-means cost on the data divided by the non-private cost: LOWER is better, and
  the pass column then asks dpcore <= diffprivlib.

Adult-like data (:func:`adult_like`; seed 18, n = 40000, ``--quick``: 5000). A latent
standard-normal factor z per row (not released) shifts everything. Six categorical columns:
education (16 levels), marital status (7), occupation (14), relationship (6), race (5), sex (2);
level v of a column with m levels is drawn with probability proportional to
p_v exp(a_v z), with p ~ Dirichlet(1.5, ..., 1.5) and a_v ~ N(0, 0.7^2) fixed per column
(Gumbel-max sampling). Four numeric columns with a declared domain: age = clip(round(17 +
Gamma(4, 5.5) + 3 z), 17, 90); education years = clip(round(education code + 1 + N(0, 1)), 1,
16); hours per week = clip(round(N(40 + 3 z, 11^2)), 1, 99); capital gain = a LogNormal(8, 1)
amount with probability sigmoid(-2.5 + 0.8 z), else 0, clipped to [0, 99999]. Label: Bernoulli(
sigmoid(b + sum of per-level effects (N(0, 0.6^2) each, centred per column) + 0.03 (age - 38) +
0.3 (education years - 9) + 0.03 (hours - 40) + 0.0003 capital gain + 0.8 z)), the intercept b
solved (bisection) so that the mean probability is 0.24 (the realised positive rate is printed).

``--quick``: 3 seeds, adult-like n = 5000, blobs n = 10**4: a smoke run (under a minute).

``--regression`` runs the LinearRegression study instead (:func:`regression_study`; issue 28
item 4): dpcore's sufficient-statistics perturbation (SSP, the default, and AdaSSP; pure
epsilon, and with delta = 1e-6) against its functional mechanism and the train-mean predictor,
epsilon in {0.1, 0.5, 1, 2, 5}, on

* a make_regression problem: n = 10^5, d = 10 (all informative), noise 60, seed 7; five 70/30
  splits (``random_state`` 0..4) x 8 noise seeds. Public bounds from the generator's declared
  law: features are standard normal, bounds (-4.5, 4.5); y's declared standard deviation is
  sqrt(d 100^2 / 3 + 60^2) (coefficients uniform on [0, 100]), bounds +-4.5 times it;
* diabetes: twenty 70/30 splits (``random_state`` 0..19) x 8 noise seeds, bounds the data-set-wide
  min/max (as above).

Cells are the median test R^2 over all (split, seed) fits; differences come with one-sided
bootstrap lower bounds (seeds resampled within each split, Bonferroni over the 5 epsilons, i.e.
each at level 0.05 / 5). ``--repeats`` sets the seeds (default 8), ``--quick`` 2 splits x 3.
``--trees`` runs only the tree cells (issue 28): DecisionTreeClassifier and
RandomForestClassifier, dpcore and diffprivlib with their defaults, on breast cancer, digits, wine
and iris, 5 stratified 70/30 splits (``random_state`` 0 .. 4; bounds = the data-set-wide
min/max) x 8 noise seeds (``--repeats``), epsilon in {0.1, 0.5, 1, 2, 5}. Each cell gives the
median accuracy over the 40 fits with a 95% bootstrap interval, and a Holm-adjusted one-sided
95% lower bound of median(dpcore) - median(diffprivlib) (bootstrap over splits, then seeds);
non-inferiority is shown when the bound is >= -0.02.

``--linear`` runs only the linear cells (issue 28 item 2), the study of linear_accuracy.py
(see there; ``--data``, ``--repeats`` for its seeds, ``--save`` and ``--load`` as there).

``--timing`` adds the fit-time comparison on n = 10^5, d = 50 (synthetic) against the
non-private scikit-learn fit; with two shared cores the timings are noisy.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    make_blobs,
    make_regression,
)
from sklearn.ensemble import RandomForestClassifier as SkForest
from sklearn.linear_model import LinearRegression as SkLinReg
from sklearn.linear_model import LogisticRegression as SkLogReg
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import CategoricalNB as SkCatNB
from sklearn.naive_bayes import GaussianNB as SkNB
from sklearn.svm import LinearSVC as SkSVC
from sklearn.tree import DecisionTreeClassifier as SkTree

from dpcore.learn import (
    CategoricalNB,
    DecisionTreeClassifier,
    GaussianNB,
    KMeans,
    LinearRegression,
    LinearSVC,
    LogisticRegression,
    RandomForestClassifier,
)

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import diffprivlib.models as dpl
except ImportError:  # pragma: no cover
    dpl = None

EPSILONS = (0.5, 1.0, 2.0, 5.0)
SPLIT_SEED = 0

# ------------------------------------------------------------------------------------------------
# Data


@dataclass
class Split:
    """A 70/30 split with its public inputs."""
    name: str
    Xtr: np.ndarray
    Xte: np.ndarray
    ytr: np.ndarray
    yte: np.ndarray
    lo: np.ndarray            # public feature bounds
    hi: np.ndarray
    classes: np.ndarray | None = None
    extra: dict = field(default_factory=dict)


def _minmax_bounds(X):
    lo, hi = X.min(axis=0).astype(float), X.max(axis=0).astype(float)
    return lo, np.where(hi > lo, hi, lo + 1.0)


def sklearn_split(name):
    loader = {"breast cancer": load_breast_cancer, "digits": load_digits,
              "diabetes": load_diabetes}[name]
    X, y = loader(return_X_y=True)
    lo, hi = _minmax_bounds(X)
    regression = name == "diabetes"
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=SPLIT_SEED,
                                          stratify=None if regression else y)
    split = Split(name, Xtr, Xte, ytr, yte, lo, hi,
                  classes=None if regression else np.unique(y))
    if regression:
        split.extra["bounds_y"] = (float(y.min()), float(y.max()))
    return split


ADULT_CATEGORICAL = (("education", 16), ("marital", 7), ("occupation", 14), ("relationship", 6),
                     ("race", 5), ("sex", 2))
ADULT_NUMERIC = (("age", 17.0, 90.0), ("education_years", 1.0, 16.0), ("hours", 1.0, 99.0),
                 ("capital_gain", 0.0, 99999.0))
ADULT_BINS = 8   # equal-width bins of a numeric column's domain for CategoricalNB


def _sigmoid(t):
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def adult_like(n=40_000, seed=18):
    """The adult-like table (see the module docstring): (codes (n, 6) int, numeric (n, 4)
    float, y (n,) int)."""
    rng = np.random.default_rng(seed)  # insecure-ok: benchmark data, not noise
    z = rng.normal(size=n)
    codes, logit = [], np.zeros(n)
    for _, m in ADULT_CATEGORICAL:
        p = rng.dirichlet(np.full(m, 1.5))
        a = rng.normal(0.0, 0.7, m)
        scores = np.log(p)[None, :] + z[:, None] * a[None, :] + rng.gumbel(size=(n, m))
        c = np.argmax(scores, axis=1)
        effect = rng.normal(0.0, 0.6, m)
        logit += (effect - effect.mean())[c]
        codes.append(c)
    codes = np.column_stack(codes)
    age = np.clip(np.round(17 + rng.gamma(4.0, 5.5, n) + 3.0 * z), 17, 90)
    edu_years = np.clip(np.round(codes[:, 0] + 1 + rng.normal(0.0, 1.0, n)), 1, 16)
    hours = np.clip(np.round(rng.normal(40 + 3.0 * z, 11.0)), 1, 99)
    has_gain = rng.random(n) < _sigmoid(-2.5 + 0.8 * z)
    gain = np.clip(np.where(has_gain, rng.lognormal(8.0, 1.0, n), 0.0), 0, 99999)
    numeric = np.column_stack([age, edu_years, hours, gain])
    logit += (0.03 * (age - 38) + 0.3 * (edu_years - 9) + 0.03 * (hours - 40) + 3e-4 * gain
              + 0.8 * z)
    a, b = -20.0, 20.0                 # intercept: mean probability 0.24
    for _ in range(100):
        mid = (a + b) / 2
        if _sigmoid(logit + mid).mean() < 0.24:
            a = mid
        else:
            b = mid
    y = (rng.random(n) < _sigmoid(logit + (a + b) / 2)).astype(np.int64)
    return codes, numeric, y


def adult_split(n):
    codes, numeric, y = adult_like(n)
    ms = np.array([m for _, m in ADULT_CATEGORICAL])
    num_lo = np.array([lo for _, lo, _ in ADULT_NUMERIC])
    num_hi = np.array([hi for _, _, hi in ADULT_NUMERIC])
    X = np.column_stack([codes, numeric]).astype(float)     # raw: codes and numeric values
    lo = np.concatenate([np.zeros(len(ms)), num_lo])
    hi = np.concatenate([ms - 1.0, num_hi])
    idx = np.arange(n)
    itr, ite = train_test_split(idx, test_size=0.3, random_state=SPLIT_SEED, stratify=y)
    split = Split("adult-like", X[itr], X[ite], y[itr], y[ite], lo, hi, classes=np.array([0, 1]))
    # linear classifiers: one-hot codes, min-max numeric, rows divided by sqrt(6 + 4)
    onehot = np.concatenate([(codes[:, [j]] == np.arange(m)[None, :]).astype(float)
                             for j, m in enumerate(ms)], axis=1)
    scaled = np.clip((numeric - num_lo) / (num_hi - num_lo), 0.0, 1.0)
    L = np.hstack([onehot, scaled]) / np.sqrt(len(ms) + len(ADULT_NUMERIC))
    split.extra["linear"] = (L[itr], L[ite])
    # categorical naive Bayes: codes, numeric columns binned on their domain
    binned = np.minimum(((numeric - num_lo) / (num_hi - num_lo) * ADULT_BINS).astype(int),
                        ADULT_BINS - 1)
    C = np.column_stack([codes, binned])
    split.extra["categorical"] = (C[itr], C[ite])
    split.extra["n_categories"] = np.concatenate([ms, np.full(len(ADULT_NUMERIC), ADULT_BINS)])
    return split


def _unit_rows(X):
    norm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norm > 0, norm, 1.0)


def linear_inputs(split, rows="unit"):
    """Features min-max scaled with the public bounds (clipped to [0, 1]); then every row
    divided by its own L2 norm (``rows="unit"``) or by the largest norm a row can have in the
    domain (``rows="max"``: sqrt(d), sqrt(6 + 4) for the adult-like one-hot rows)."""
    if "linear" in split.extra:
        Ltr, Lte = split.extra["linear"]
    else:
        def scale(X):
            return np.clip((X - split.lo) / (split.hi - split.lo), 0.0, 1.0) / np.sqrt(X.shape[1])
        Ltr, Lte = scale(split.Xtr), scale(split.Xte)
    if rows == "unit":
        Ltr, Lte = _unit_rows(Ltr), _unit_rows(Lte)
    return Ltr, Lte


def blobs(n):
    X = make_blobs(n_samples=n, n_features=2, centers=5, cluster_std=1.0,
                   center_box=(-10.0, 10.0), random_state=0)[0]
    return X


def kmeans_cost(X, centers):
    c = np.asarray(centers, dtype=float)
    d2 = (X * X).sum(axis=1)[:, None] - 2.0 * X @ c.T + (c * c).sum(axis=1)[None, :]
    return float(np.maximum(d2, 0).min(axis=1).sum())


# ------------------------------------------------------------------------------------------------
# Experiments


@dataclass
class Experiment:
    data: str
    learner: str
    fit_data: tuple                       # (X_train, y_train) (y None for k-means)
    score: Callable                       # fitted estimator -> score
    contenders: dict                      # library -> (epsilon, seed) -> unfitted estimator
    reference: float                      # non-private scikit-learn score
    higher_better: bool = True


def _score(Xte, yte):
    return lambda est: est.score(Xte, yte)


def classification_experiments(s, rows):
    """The classifiers on one split (a function of its own, so the factories' closures bind
    this split's public inputs)."""
    out = []
    peer = dpl is not None
    name = s.name
    cls, bounds = s.classes, (s.lo, s.hi)
    Ltr, Lte = linear_inputs(s, rows)
    score_lin = _score(Lte, s.yte)
    score_raw = _score(s.Xte, s.yte)

    c = {"dpcore": lambda e, r: LogisticRegression(epsilon=e, data_norm=1.0, classes=cls,
                                                   random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.LogisticRegression(epsilon=e, data_norm=1.0,
                                                               random_state=r)
    out.append(Experiment(name, "LogisticRegression", (Ltr, s.ytr), score_lin, c,
                          score_lin(SkLogReg().fit(Ltr, s.ytr))))

    c = {"dpcore": lambda e, r: LinearSVC(epsilon=e, data_norm=1.0, classes=cls,
                                          random_state=r)}
    out.append(Experiment(name, "LinearSVC", (Ltr, s.ytr), score_lin, c,
                          score_lin(SkSVC().fit(Ltr, s.ytr))))

    c = {"dpcore": lambda e, r: GaussianNB(epsilon=e, bounds=bounds, classes=cls,
                                           random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.GaussianNB(epsilon=e, bounds=bounds,
                                                       random_state=r)
    out.append(Experiment(name, "GaussianNB", (s.Xtr, s.ytr), score_raw, c,
                          score_raw(SkNB().fit(s.Xtr, s.ytr))))

    if name == "adult-like":
        Ctr, Cte = s.extra["categorical"]
        counts = s.extra["n_categories"]
        cats = [np.arange(m) for m in counts]
        score_cat = _score(Cte, s.yte)
        c = {"dpcore": lambda e, r: CategoricalNB(epsilon=e, categories=cats, classes=cls,
                                                  random_state=r)}
        out.append(Experiment(name, "CategoricalNB", (Ctr, s.ytr), score_cat, c,
                              score_cat(SkCatNB(min_categories=counts).fit(Ctr, s.ytr))))

    c = {"dpcore": lambda e, r: DecisionTreeClassifier(epsilon=e, bounds=bounds, classes=cls,
                                                       random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.DecisionTreeClassifier(
            epsilon=e, bounds=bounds, classes=cls, random_state=r)
    out.append(Experiment(name, "DecisionTreeClassifier", (s.Xtr, s.ytr), score_raw, c,
                          score_raw(SkTree(random_state=0).fit(s.Xtr, s.ytr))))

    c = {"dpcore": lambda e, r: RandomForestClassifier(epsilon=e, bounds=bounds, classes=cls,
                                                       random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.RandomForestClassifier(
            epsilon=e, bounds=bounds, classes=cls, random_state=r)
    out.append(Experiment(name, "RandomForestClassifier", (s.Xtr, s.ytr), score_raw, c,
                          score_raw(SkForest(random_state=0).fit(s.Xtr, s.ytr))))
    return out


def describe(s):
    what = (f"{s.name}: {len(s.ytr)} training / {len(s.yte)} test rows, "
            f"{s.Xtr.shape[1]} features")
    if s.classes is None:
        return what
    y = np.concatenate([s.ytr, s.yte])
    if s.classes.size == 2:
        return what + f", positive rate {np.mean(y == s.classes[1]):.3f}"
    return what + f", {s.classes.size} classes"


def experiments(quick, rows="unit"):
    """(list of Experiment, list of one-line data set descriptions)."""
    out, notes = [], []
    peer = dpl is not None
    for name in ("breast cancer", "digits", "adult-like"):
        s = sklearn_split(name) if name != "adult-like" else adult_split(5_000 if quick else 40_000)
        out += classification_experiments(s, rows)
        notes.append(describe(s))

    s = sklearn_split("diabetes")
    notes.append(describe(s))
    bounds, bounds_y = (s.lo, s.hi), s.extra["bounds_y"]
    score = _score(s.Xte, s.yte)      # RegressorMixin.score: R^2
    c = {"dpcore": lambda e, r: LinearRegression(epsilon=e, bounds_X=bounds, bounds_y=bounds_y,
                                                 random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.LinearRegression(epsilon=e, bounds_X=bounds,
                                                             bounds_y=bounds_y, random_state=r)
    out.append(Experiment("diabetes (R^2)", "LinearRegression", (s.Xtr, s.ytr), score, c,
                          score(SkLinReg().fit(s.Xtr, s.ytr))))

    n = 10_000 if quick else 100_000
    X = blobs(n)
    base = SkKMeans(n_clusters=5, n_init=10, random_state=0).fit(X).inertia_
    kb = (-15.0, 15.0)
    c = {"dpcore": lambda e, r: KMeans(5, epsilon=e, bounds=kb, random_state=r)}
    if peer:
        c["diffprivlib"] = lambda e, r: dpl.KMeans(n_clusters=5, epsilon=e, bounds=kb,
                                                   random_state=r)
    out.append(Experiment(f"blobs n={n} (cost ratio, lower is better)", "KMeans", (X, None),
                          lambda est: kmeans_cost(X, est.cluster_centers_) / base, c, 1.0,
                          higher_better=False))
    notes.append(f"blobs: n = {n}, d = 2, 5 centres; non-private (scikit-learn, n_init=10) cost "
                 f"{base:.6g}")
    return out, notes


def run(exp, repeats):
    """{library: {epsilon: array of scores over the seeds}}."""
    X, y = exp.fit_data
    res = {}
    for lib, make in exp.contenders.items():
        res[lib] = {}
        for e in EPSILONS:
            scores = []
            for seed in range(repeats):
                est = make(e, seed)
                est.fit(X) if y is None else est.fit(X, y)
                scores.append(exp.score(est))
            res[lib][e] = np.array(scores)
    return res


def _num(v):
    return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1e}"


def _cell(v):
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return f"{_num(med)} [{_num(q1)}, {_num(q3)}]"


def median_difference_interval(ours, theirs, draws=4000):
    """95% bootstrap interval of median(ours) - median(theirs), each library's seeds resampled
    on their own (the two libraries' noises are independent, so there is nothing to pair)."""
    rng = np.random.default_rng(0)  # insecure-ok: bootstrap resampling of benchmark scores
    a = np.median(rng.choice(ours, size=(draws, ours.size)), axis=1)
    b = np.median(rng.choice(theirs, size=(draws, theirs.size)), axis=1)
    return np.percentile(a - b, [2.5, 97.5])


def verdict(exp, res):
    """"pass", or the epsilons where dpcore's median is worse, each with the 95% bootstrap
    interval of the difference of medians (an interval holding 0 is within the seeds' noise)."""
    if "diffprivlib" not in res:
        return "n/a (no diffprivlib model)" if dpl is not None else "n/a (diffprivlib absent)"
    bad = []
    for e in EPSILONS:
        ours, theirs = np.median(res["dpcore"][e]), np.median(res["diffprivlib"][e])
        if (ours < theirs) if exp.higher_better else (ours > theirs):
            lo, hi = median_difference_interval(res["dpcore"][e], res["diffprivlib"][e])
            bad.append(f"eps={e:g} ({ours:.4g} vs {theirs:.4g}; difference 95% CI "
                       f"[{lo:+.4f}, {hi:+.4f}])")
    return "pass" if not bad else "FAIL at " + ", ".join(bad)


# ------------------------------------------------------------------------------------------------
# LinearRegression (--regression)

REGRESSION_EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
SYNTH_N, SYNTH_D, SYNTH_NOISE, SYNTH_SEED = 100_000, 10, 60.0, 7
SYNTH_BOUND = 4.5


def synthetic_regression():
    """(X, y, bounds_X, bounds_y): the make_regression problem with its declared bounds."""
    X, y = make_regression(n_samples=SYNTH_N, n_features=SYNTH_D, n_informative=SYNTH_D,
                           noise=SYNTH_NOISE, random_state=SYNTH_SEED)
    sd_y = np.sqrt(SYNTH_D * 100.0**2 / 3.0 + SYNTH_NOISE**2)
    return X, y, (-SYNTH_BOUND, SYNTH_BOUND), (-SYNTH_BOUND * sd_y, SYNTH_BOUND * sd_y)


REGRESSION_METHODS = {
    "functional": dict(method="functional"),
    "ssp": {},
    "adassp": dict(method="adassp"),
    "ssp delta=1e-6": dict(delta=1e-6),
    "adassp delta=1e-6": dict(method="adassp", delta=1e-6),
}
PURE = ("ssp", "adassp")
WITH_DELTA = ("ssp delta=1e-6", "adassp delta=1e-6")


def _r2(y, pred):
    return 1.0 - float(np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def regression_scores(X, y, bx, by, splits, seeds):
    """{method or "train mean": {epsilon: array (splits, seeds) of test R^2}}."""
    out = {m: {e: np.empty((splits, seeds)) for e in REGRESSION_EPSILONS}
           for m in REGRESSION_METHODS}
    out["train mean"] = {e: np.empty((splits, seeds)) for e in REGRESSION_EPSILONS}
    out["non-private"] = {e: np.empty((splits, seeds)) for e in REGRESSION_EPSILONS}
    for sp in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=sp)
        mean_r2 = _r2(yte, np.full(yte.shape, ytr.mean()))
        ols_r2 = SkLinReg().fit(Xtr, ytr).score(Xte, yte)
        for e in REGRESSION_EPSILONS:
            out["train mean"][e][sp] = mean_r2
            out["non-private"][e][sp] = ols_r2
            for m, kw in REGRESSION_METHODS.items():
                for seed in range(seeds):
                    reg = LinearRegression(epsilon=e, bounds_X=bx, bounds_y=by,
                                           random_state=1000 * sp + seed, **kw).fit(Xtr, ytr)
                    out[m][e][sp, seed] = reg.score(Xte, yte)
    return out


def stratified_median_difference_bound(a, b, level, draws=4000):
    """One-sided lower confidence bound (at ``level``) of median(a) - median(b), a and b arrays
    (splits, seeds): each split's seeds resampled on their own (splits are fixed)."""
    rng = np.random.default_rng(1)  # insecure-ok: bootstrap resampling of benchmark scores

    def boot(v):
        idx = rng.integers(0, v.shape[1], size=(draws,) + v.shape)
        picked = np.take_along_axis(np.broadcast_to(v, (draws,) + v.shape), idx, axis=2)
        return np.median(picked.reshape(draws, -1), axis=1)
    return float(np.quantile(boot(a) - boot(b), level))


def regression_study(splits_synth, splits_diabetes, seeds):
    """Print the LinearRegression tables and the issue's checks; returns the checks' lines."""
    level = 0.05 / len(REGRESSION_EPSILONS)
    checks = []
    Xd, yd = load_diabetes(return_X_y=True)
    lo, hi = _minmax_bounds(Xd)
    data = [("make_regression n=10^5 d=10", *synthetic_regression(), splits_synth),
            ("diabetes", Xd, yd, (lo, hi), (float(yd.min()), float(yd.max())), splits_diabetes)]
    for name, X, y, bx, by, splits in data:
        t = time.perf_counter()
        res = regression_scores(X, y, bx, by, splits, seeds)
        print(f"\n{name}: median test R^2 over {splits} splits x {seeds} noise seeds "
              f"[q1, q3] ({time.perf_counter() - t:.0f} s)\n")
        print("| method | " + " | ".join(f"eps={e:g}" for e in REGRESSION_EPSILONS) + " |")
        print("|---|" + "---|" * len(REGRESSION_EPSILONS))
        for m, by_eps in res.items():
            print(f"| {m} | " + " | ".join(_cell(by_eps[e].ravel()) for e in REGRESSION_EPSILONS)
                  + " |")
        for e in REGRESSION_EPSILONS:
            med = {m: float(np.median(res[m][e])) for m in res}
            if name.startswith("make_regression"):
                for m in PURE:
                    bound = stratified_median_difference_bound(res[m][e], res["functional"][e],
                                                               level)
                    ok = med[m] >= med["functional"]
                    checks.append(f"{name}, eps={e:g}: {m} (pure) {med[m]:.4f} vs functional "
                                  f"{med['functional']:.4f}: {'pass' if ok else 'FAIL'} "
                                  f"(difference {med[m] - med['functional']:+.4f}, one-sided "
                                  f"{1 - level:.0%} lower bound {bound:+.4f})")
                if e == 0.5:
                    for m in WITH_DELTA:
                        ok = med[m] >= 0.85
                        checks.append(f"{name}, eps=0.5: {m} {med[m]:.4f} >= 0.85: "
                                      f"{'pass' if ok else 'FAIL'}")
            else:
                for m in PURE + WITH_DELTA:
                    # per split: the median over the seeds minus the train-mean predictor's R^2
                    per_split = np.median(res[m][e], axis=1) - res["train mean"][e][:, 0]
                    target = med["train mean"] - 0.01
                    ok = med[m] >= target
                    checks.append(f"{name}, eps={e:g}: {m} median {med[m]:.4f} >= train mean "
                                  f"{med['train mean']:.4f} - 0.01: {'pass' if ok else 'FAIL'} "
                                  f"(per split, median over seeds minus train mean: median "
                                  f"{np.median(per_split):+.4f}, worst {per_split.min():+.4f})")
    print("\nChecks (issue 28 item 4)")
    for line in checks:
        print("- " + line)
    return checks


# ------------------------------------------------------------------------------------------------
# Fit time (--timing)


def run_timing(repeats=3):
    rng = np.random.default_rng(0)  # insecure-ok: benchmark data, not noise
    n, d = 100_000, 50
    X = rng.normal(size=(n, d))
    y = (X @ rng.normal(size=d) + rng.normal(size=n) > 0).astype(int)
    norm = float(np.quantile(np.linalg.norm(X, axis=1), 0.99))   # public in this synthetic test

    def best(fn):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    out = {
        "scikit-learn LogisticRegression (lbfgs)": best(lambda: SkLogReg().fit(X, y)),
        "dpcore LogisticRegression (objective)": best(
            lambda: LogisticRegression(epsilon=1.0, data_norm=norm, classes=[0, 1],
                                       random_state=0).fit(X, y)),
        "dpcore LogisticRegression (output)": best(
            lambda: LogisticRegression(epsilon=1.0, data_norm=norm, method="output",
                                       classes=[0, 1], random_state=0).fit(X, y)),
    }
    if dpl is not None:
        out["diffprivlib LogisticRegression"] = best(
            lambda: dpl.LogisticRegression(epsilon=1.0, data_norm=norm, random_state=0).fit(X, y))
    return out


# ------------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None,
                        help="noise seeds per (learner, epsilon); default 20 (--quick: 3)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 seeds, adult-like n = 5000, blobs n = 10**4")
    parser.add_argument("--rows", choices=("unit", "max"), default="unit",
                        help="row scaling of the linear classifiers' inputs (see the docstring)")
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--regression", action="store_true",
                        help="the LinearRegression study only (see the docstring)")
    parser.add_argument("--trees", action="store_true",
                        help="only the tree cells: DecisionTreeClassifier and "
                             "RandomForestClassifier on breast cancer, digits, wine, iris, "
                             "5 splits x 8 seeds, epsilon 0.1 .. 5, Holm-adjusted bounds")
    parser.add_argument("--linear", action="store_true",
                        help="only the linear models and GaussianNB under four preprocessings "
                             "(issue 28 item 2): 5 data sets, 5 splits x 8 seeds, epsilon 0.1 .. 5")
    parser.add_argument("--data", nargs="*", default=None,
                        help="--linear: only these data sets (of LINEAR_DATA)")
    parser.add_argument("--save", default=None,
                        help="--linear: save the raw scores to this pickle instead of reporting")
    parser.add_argument("--load", nargs="*", default=None,
                        help="--linear: report from saved scores (Holm over all of them)")
    args = parser.parse_args(argv)
    if args.linear:   # the study lives in linear_accuracy.py (same options)
        import linear_accuracy

        linear_accuracy.run(data=args.data, seeds=args.repeats, save=args.save, load=args.load)
        return
    if args.regression:
        seeds = args.repeats if args.repeats is not None else (3 if args.quick else 8)
        regression_study(2 if args.quick else 5, 2 if args.quick else 20, seeds)
        return
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 20)
    warnings.simplefilter("ignore")   # diffprivlib warns about its own settings
    if args.trees:
        tree_report(seeds=args.repeats or TREE_SEEDS)
        return
    t0 = time.perf_counter()
    exps, notes = experiments(args.quick, args.rows)
    rows, verdicts, lr_check = [], [], None
    for exp in exps:
        t = time.perf_counter()
        res = run(exp, repeats)
        v = verdict(exp, res)
        verdicts.append((exp.data, exp.learner, v))
        for i, lib in enumerate(res):
            rows.append((exp.data, exp.learner, lib, [_cell(res[lib][e]) for e in EPSILONS],
                         f"{exp.reference:.3f}" if i == 0 else "", v if i == 0 else ""))
        if exp.data == "breast cancer" and exp.learner == "LogisticRegression":
            lr_check = float(np.median(res["dpcore"][2.0]))
        print(f"  {exp.data} / {exp.learner}: {time.perf_counter() - t:.1f} s", file=sys.stderr)

    print(f"Test score: median [q1, q3] over {repeats} noise seeds (random_state = 0 .. "
          f"{repeats - 1}, both libraries), default hyper-parameters; accuracy, R^2 for diabetes, "
          f"k-means cost / non-private cost for blobs; linear classifiers' rows: {args.rows}")
    print()
    print("| data set | learner | library | " + " | ".join(f"eps={e:g}" for e in EPSILONS)
          + " | non-private | dpcore >= diffprivlib (medians) |")
    print("|---|---|---|" + "---|" * len(EPSILONS) + "---|---|")
    for data, learner, lib, cells, ref, v in rows:
        print(f"| {data} | {learner} | {lib} | " + " | ".join(cells) + f" | {ref} | {v} |")
    print()
    print("Data: " + "; ".join(notes))
    print()
    print("Per (data set, learner): dpcore >= diffprivlib at every epsilon (medians)")
    for data, learner, v in verdicts:
        print(f"- {data}, {learner}: {v}")
    if lr_check is not None:
        ok = "pass" if lr_check >= 0.85 else "FAIL"
        print(f"- breast cancer, LogisticRegression at eps=2: median {lr_check:.3f} >= 0.85: {ok}")
    if args.timing:
        print("\nFit time, n = 100000, d = 50 (best of 3, seconds; 2 shared cores: noisy)")
        times = run_timing()
        ref = times["scikit-learn LogisticRegression (lbfgs)"]
        for label, t in times.items():
            print(f"| {label} | {t:.3f} s | {t / ref:.2f}x |")
    print(f"\n(total {time.perf_counter() - t0:.0f} s)", file=sys.stderr)



# ------------------------------------------------------------------------------------------------
# Trees (issue 28 item 3): --trees


TREE_DATA = ("breast cancer", "digits", "wine", "iris")
TREE_EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
TREE_SPLITS = 5          # stratified 70/30 splits, random_state = 0 .. 4
TREE_SEEDS = 8           # noise seeds per split
TREE_MARGIN = 0.02       # non-inferiority margin (accuracy)


def tree_splits(name, n_splits=TREE_SPLITS):
    """``n_splits`` stratified 70/30 splits of a scikit-learn data set with the data-set-wide
    min/max as the public bounds (the same for both libraries)."""
    from sklearn.datasets import load_iris, load_wine

    loader = {"breast cancer": load_breast_cancer, "digits": load_digits, "wine": load_wine,
              "iris": load_iris}[name]
    X, y = loader(return_X_y=True)
    lo, hi = _minmax_bounds(X)
    for rep in range(n_splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=rep, stratify=y)
        yield Split(f"{name} #{rep}", Xtr, Xte, ytr, yte, lo, hi, classes=np.unique(y))


def tree_contenders(s):
    bounds, cls = (s.lo, s.hi), s.classes
    return {
        "DecisionTreeClassifier": {
            "dpcore": lambda e, r: DecisionTreeClassifier(epsilon=e, bounds=bounds, classes=cls,
                                                          random_state=r),
            "diffprivlib": lambda e, r: dpl.DecisionTreeClassifier(epsilon=e, bounds=bounds,
                                                                   classes=cls, random_state=r)},
        "RandomForestClassifier": {
            "dpcore": lambda e, r: RandomForestClassifier(epsilon=e, bounds=bounds, classes=cls,
                                                          random_state=r),
            "diffprivlib": lambda e, r: dpl.RandomForestClassifier(epsilon=e, bounds=bounds,
                                                                   classes=cls, random_state=r)},
    }


def tree_scores(data=TREE_DATA, epsilons=TREE_EPSILONS, n_splits=TREE_SPLITS, seeds=TREE_SEEDS):
    """{(learner, data set, epsilon): {library: scores over splits x seeds (split-major)}}."""
    out = {}
    for name in data:
        for s in tree_splits(name, n_splits):
            for learner, libs in tree_contenders(s).items():
                for e in epsilons:
                    cell = out.setdefault((learner, name, e), {lib: [] for lib in libs})
                    for lib, make in libs.items():
                        for seed in range(seeds):
                            cell[lib].append(make(e, seed).fit(s.Xtr, s.ytr).score(s.Xte, s.yte))
    return {key: {lib: np.array(v) for lib, v in cell.items()} for key, cell in out.items()}


def by_split(scores, n_splits):
    """Scores as (splits, seeds): a 2-d array as it is (its rows are the splits: cells of one
    table may then have different split counts), a split-major 1-d one cut into ``n_splits``."""
    return scores if scores.ndim == 2 else scores.reshape(n_splits, -1)


def median_difference_bound(ours, theirs, n_splits, alpha, draws=4000):
    """One-sided (1 - alpha) lower bootstrap bound of median(ours) - median(theirs): the splits
    are resampled (the same splits for both libraries: they share each split's data), then the
    noise seeds within each split, for each library on its own."""
    rng = np.random.default_rng(1)  # insecure-ok: bootstrap resampling of benchmark scores
    a = by_split(ours, n_splits)
    b = by_split(theirs, n_splits)
    n_splits = a.shape[0]
    diffs = np.empty(draws)
    for i in range(draws):
        rows = rng.integers(0, n_splits, n_splits)
        pick = rng.integers(0, a.shape[1], (n_splits, a.shape[1]))
        diffs[i] = (np.median(np.take_along_axis(a[rows], pick, axis=1))
                    - np.median(np.take_along_axis(b[rows], pick, axis=1)))
    return float(np.percentile(diffs, 100 * alpha))


def holm_lower_bounds(cells, n_splits, alpha=0.05):
    """Holm-adjusted one-sided lower bounds of the median differences (dpcore - diffprivlib),
    for the non-inferiority hypotheses H_c: difference <= -margin. The cells are ordered by
    their unadjusted p-values (bootstrap proportion of differences at or below -margin); the
    i-th of m gets its bound at level alpha / (m - i), as long as every earlier one rejected
    (after the first that does not, the rest keep level alpha / (m - i) of that step)."""
    rng = np.random.default_rng(2)  # insecure-ok: bootstrap resampling of benchmark scores
    pvalues = {}
    for key, res in cells.items():
        a = by_split(res["dpcore"], n_splits)
        b = by_split(res["diffprivlib"], n_splits)
        diffs = []
        for _ in range(2000):
            rows = rng.integers(0, a.shape[0], a.shape[0])
            pick = rng.integers(0, a.shape[1], a.shape)
            diffs.append(np.median(np.take_along_axis(a[rows], pick, axis=1))
                         - np.median(np.take_along_axis(b[rows], pick, axis=1)))
        pvalues[key] = float(np.mean(np.array(diffs) <= -TREE_MARGIN))
    order = sorted(cells, key=lambda k: pvalues[k])
    m = len(order)
    bounds, level = {}, None
    for i, key in enumerate(order):
        if level is None:
            step = alpha / (m - i)
            if pvalues[key] > step:
                level = step            # Holm stops rejecting here: the rest keep this level
        bounds[key] = median_difference_bound(cells[key]["dpcore"], cells[key]["diffprivlib"],
                                              n_splits, level if level is not None else
                                              alpha / (m - i))
    return bounds, pvalues


def tree_report(n_splits=TREE_SPLITS, seeds=TREE_SEEDS):
    """The tree table: medians over splits x seeds with 95% bootstrap intervals, and the
    non-inferiority bounds; printed as markdown."""
    t0 = time.perf_counter()
    cells = tree_scores(n_splits=n_splits, seeds=seeds)
    bounds, pvalues = holm_lower_bounds(cells, n_splits)
    print(f"Trees: test accuracy, median over {n_splits} stratified 70/30 splits x {seeds} noise "
          f"seeds [95% bootstrap interval of the median]; defaults for both libraries; bounds = "
          f"data-set-wide min/max; last column: Holm-adjusted one-sided 95% lower bound of "
          f"median(dpcore) - median(diffprivlib) over all {len(cells)} cells (non-inferior when "
          f">= -{TREE_MARGIN})")
    print()
    print("| learner | data set | epsilon | dpcore | diffprivlib | difference bound | verdict |")
    print("|---|---|---|---|---|---|---|")
    fails, small = [], []
    for (learner, name, e), res in cells.items():
        meds = {}
        text = {}
        for lib, v in res.items():
            rng = np.random.default_rng(3)  # insecure-ok: bootstrap resampling
            boot = np.median(rng.choice(v, size=(2000, v.size)), axis=1)
            lo, hi = np.percentile(boot, [2.5, 97.5])
            meds[lib] = float(np.median(v))
            text[lib] = f"{meds[lib]:.3f} [{lo:.3f}, {hi:.3f}]"
        bound = bounds[(learner, name, e)]
        ok = bound >= -TREE_MARGIN
        if not ok:
            fails.append((learner, name, e))
        if (learner == "DecisionTreeClassifier" and name in ("iris", "wine", "digits")
                and e in (0.1, 0.5)):
            small.append((name, e, meds["dpcore"], meds["diffprivlib"]))
        print(f"| {learner} | {name} | {e:g} | {text['dpcore']} | {text['diffprivlib']} | "
              f"{bound:+.3f} | {'non-inferior' if ok else 'NOT shown'} |")
    print()
    print(f"- non-inferiority (margin {TREE_MARGIN}, Holm, one-sided 95%): "
          + ("every cell" if not fails else "NOT shown for " + ", ".join(
              f"{a} / {b} / eps={c:g}" for a, b, c in fails)))
    for name, e, ours, theirs in small:
        verdict = "pass" if ours >= theirs else "FAIL"
        print(f"- DecisionTreeClassifier, {name}, eps={e:g}: median {ours:.3f} vs diffprivlib "
              f"{theirs:.3f}: {verdict}")
    print(f"\n(trees: {time.perf_counter() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
