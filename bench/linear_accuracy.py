"""Linear models and GaussianNB against diffprivlib under four preprocessings (issue 28 item 2).

    PYTHONPATH=python <peer venv>/bin/python bench/linear_accuracy.py [--data SET ...]
        [--splits 5] [--seeds 8] [--save FILE | --load FILE ...] [--learners NAME ...]
        [--first-seed 8]
        [--diagnose LEARNER DATA PREPROCESSING EPSILON ...]
    (or bench/learn_accuracy.py --linear with --data, --save, --load; --repeats for --seeds)

LogisticRegression, LinearSVC (against diffprivlib's LogisticRegression: the peer has no SVM)
and GaussianNB, defaults for both libraries and the same public inputs (data_norm; the feature
bounds, which dpcore's linear models also take and diffprivlib's LogisticRegression does not),
under four
preprocessings (:data:`PREPROCESSINGS`, :func:`preprocess`) on breast cancer, digits, wine,
iris and a 10^5-row make_classification problem (:data:`SYNTHETIC`), 5 stratified 70/30 splits
(random_state 0 .. 4; ``--splits``) x 8 noise seeds, epsilon 0.1 .. 5. One cell = (learner, data set,
preprocessing, epsilon); verdicts won (Holm-adjusted one-sided 95% bound of the difference of
medians > 0) / tied (>= -0.02) / lost / not shown (:func:`linear_report`). ``--data`` limits
the data sets, ``--save FILE`` stores the raw scores and ``--load FILE ...`` reports from
several saved runs at once (one Holm adjustment over all their cells); ``--diagnose`` tells a
lost cell's noise from its bias (:func:`noise_diagnosis`). The defaults were
chosen on bench/dev_suite.py (other data sets), never here.
"""
from __future__ import annotations

import argparse
import math
import pickle
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learn_accuracy import _minmax_bounds, _unit_rows, by_split, dpl, holm_lower_bounds  # noqa: E402,E501

from dpcore.learn import GaussianNB, LinearSVC, LogisticRegression  # noqa: E402

LINEAR_DATA = ("breast cancer", "digits", "wine", "iris", "synthetic 10^5")
LINEAR_EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
LINEAR_SPLITS = 5        # stratified 70/30 splits, random_state = 0 .. 4
LINEAR_SEEDS = 8         # noise seeds per split
LINEAR_MARGIN = 0.02     # non-inferiority margin (accuracy)
STANDARD_CLIP = 3.0      # standardised features are clipped to [-3, 3]
#: The preprocessings a user would plausibly choose (issue 28 item 2).
PREPROCESSINGS = ("min-max, data_norm=sqrt(d)", "min-max/sqrt(d), data_norm=1",
                  "standardised, clipped", "unit-norm rows")
# the 10^5-row synthetic problem: make_classification with this shape and seed
SYNTHETIC = dict(n_samples=100_000, n_features=20, n_informative=8, n_redundant=4,
                 n_classes=2, class_sep=0.8, random_state=28)


@dataclass
class Public:
    """The public inputs of a data set: feature bounds, and the centre and scale a user would
    standardise with (stand-ins for domain knowledge, like the bounds)."""
    lo: np.ndarray
    hi: np.ndarray
    centre: np.ndarray
    spread: np.ndarray


def public_inputs(X):
    lo, hi = _minmax_bounds(X)
    sd = X.std(axis=0)
    return Public(lo, hi, X.mean(axis=0), np.where(sd > 0, sd, 1.0))


def preprocess(kind, X, pub):
    """(rows, data_norm, GaussianNB bounds) of X under one of :data:`PREPROCESSINGS`: min-max
    scaled with the public bounds (clipped to [0, 1]) with the domain's largest row norm
    sqrt(d) as data_norm; the same divided by sqrt(d) with data_norm = 1; standardised with the
    public centre and scale, clipped to [-3, 3], data_norm = 3 sqrt(d) (the largest norm a
    clipped row can have); min-max rows divided by their own norm, data_norm = 1."""
    d = X.shape[1]
    unit = np.clip((X - pub.lo) / (pub.hi - pub.lo), 0.0, 1.0)
    if kind == PREPROCESSINGS[0]:
        return unit, math.sqrt(d), (0.0, 1.0)
    if kind == PREPROCESSINGS[1]:
        return unit / math.sqrt(d), 1.0, (0.0, 1.0 / math.sqrt(d))
    if kind == PREPROCESSINGS[2]:
        z = np.clip((X - pub.centre) / pub.spread, -STANDARD_CLIP, STANDARD_CLIP)
        return z, STANDARD_CLIP * math.sqrt(d), (-STANDARD_CLIP, STANDARD_CLIP)
    if kind == PREPROCESSINGS[3]:
        return _unit_rows(unit), 1.0, (0.0, 1.0)
    raise ValueError(kind)


def linear_data(name):
    """(X, y) of a data set of the linear study."""
    from sklearn.datasets import load_iris, load_wine, make_classification

    if name == "synthetic 10^5":
        return make_classification(**SYNTHETIC)
    loader = {"breast cancer": load_breast_cancer, "digits": load_digits, "wine": load_wine,
              "iris": load_iris}[name]
    return loader(return_X_y=True)


def linear_contenders(classes, data_norm, bounds):
    """learner -> {library: (epsilon, seed) -> estimator}; LinearSVC, which diffprivlib lacks,
    is compared with diffprivlib's LogisticRegression (the peer's linear classifier). dpcore's
    linear models get the preprocessing's public feature bounds too (the ones both libraries'
    GaussianNB get; diffprivlib's LogisticRegression takes none): with them they centre
    all-positive rows (``bounds``, chosen on bench/dev_suite.py centre)."""
    peer_lr = (lambda e, r: dpl.LogisticRegression(epsilon=e, data_norm=data_norm,
                                                   random_state=r))
    return {
        "LogisticRegression": {
            "dpcore": lambda e, r: LogisticRegression(epsilon=e, data_norm=data_norm,
                                                      bounds=bounds, classes=classes,
                                                      random_state=r),
            "diffprivlib": peer_lr},
        "LinearSVC": {
            "dpcore": lambda e, r: LinearSVC(epsilon=e, data_norm=data_norm, bounds=bounds,
                                             classes=classes, random_state=r),
            "diffprivlib": peer_lr},
        "GaussianNB": {
            "dpcore": lambda e, r: GaussianNB(epsilon=e, bounds=bounds, classes=classes,
                                              random_state=r),
            "diffprivlib": lambda e, r: dpl.GaussianNB(epsilon=e, bounds=bounds,
                                                       random_state=r)},
    }


def linear_scores(data=LINEAR_DATA, epsilons=LINEAR_EPSILONS, n_splits=LINEAR_SPLITS,
                  seeds=LINEAR_SEEDS, learners=None, progress=True, first_seed=0):
    """{(learner, data set, preprocessing, epsilon): {library: scores, shape (splits, seeds)}}. The peer's LogisticRegression is fitted once per cell and shared by the
    LinearSVC rows. Split ``sp`` draws its noise with the seeds 1000 sp + first_seed, ...:
    a ``first_seed`` of 8 or more gives noise seeds no earlier run with 8 seeds used (fresh
    seeds, to check a default chosen on the development suite)."""
    out = {}
    for name in data:
        X, y = linear_data(name)
        pub = public_inputs(X)
        classes = np.unique(y)
        t = time.perf_counter()
        for sp in range(n_splits):
            itr, ite = train_test_split(np.arange(len(y)), test_size=0.3, random_state=sp,
                                        stratify=y)
            for kind in PREPROCESSINGS:
                Z, data_norm, bounds = preprocess(kind, X, pub)
                Ztr, Zte, ytr, yte = Z[itr], Z[ite], y[itr], y[ite]
                peer_cache = {}
                for learner, libs in linear_contenders(classes, data_norm, bounds).items():
                    if learners is not None and learner not in learners:
                        continue
                    for e in epsilons:
                        cell = out.setdefault((learner, name, kind, e), {lib: [] for lib in libs})
                        for lib, make in libs.items():
                            for seed in range(seeds):
                                key = (lib, e, seed)
                                if learner != "GaussianNB" and lib == "diffprivlib" \
                                        and key in peer_cache:
                                    cell[lib].append(peer_cache[key])
                                    continue
                                score = make(e, 1000 * sp + first_seed + seed).fit(
                                    Ztr, ytr).score(Zte, yte)
                                if learner != "GaussianNB" and lib == "diffprivlib":
                                    peer_cache[key] = score
                                cell[lib].append(score)
        if progress:
            print(f"  {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return {key: {lib: np.array(v).reshape(n_splits, seeds) for lib, v in cell.items()}
            for key, cell in out.items()}


def _bootstrap_median_interval(v, seed=3, draws=2000):
    rng = np.random.default_rng(seed)  # insecure-ok: bootstrap resampling of benchmark scores
    v = v.ravel()
    boot = np.median(rng.choice(v, size=(draws, v.size)), axis=1)
    return np.percentile(boot, [2.5, 97.5])


def holm_conditional_bounds(cells, n_splits, alpha=0.05, draws=4000):
    """As :func:`holm_lower_bounds`, but conditional on the splits: each library's noise seeds
    are resampled within each split (:func:`stratified_median_difference_bound`), the splits
    kept fixed. Inference about these splits' noise, not about other splits of the data."""
    rng = np.random.default_rng(4)  # insecure-ok: bootstrap resampling of benchmark scores

    def boot(v):
        idx = rng.integers(0, v.shape[1], size=(draws,) + v.shape)
        picked = np.take_along_axis(np.broadcast_to(v, (draws,) + v.shape), idx, axis=2)
        return np.median(picked.reshape(draws, -1), axis=1)

    diffs = {key: boot(by_split(res["dpcore"], n_splits))
             - boot(by_split(res["diffprivlib"], n_splits)) for key, res in cells.items()}
    pvalues = {key: float(np.mean(d <= -LINEAR_MARGIN)) for key, d in diffs.items()}
    order = sorted(cells, key=lambda k: pvalues[k])
    bounds, level = {}, None
    for i, key in enumerate(order):
        step = alpha / (len(order) - i)
        if level is None and pvalues[key] > step:
            level = step
        bounds[key] = float(np.quantile(diffs[key], level if level is not None else step))
    return bounds


def compact_linear_table(cells, bounds):
    """One row per (learner, data set, preprocessing): median accuracy dpcore / diffprivlib at
    each epsilon, the cell marked L (lost) or n (not shown) by the verdict of
    :func:`linear_report`."""
    rows = {}
    for (learner, name, kind, e), res in cells.items():
        ours, theirs = np.median(res["dpcore"]), np.median(res["diffprivlib"])
        mark = ""
        if bounds[(learner, name, kind, e)] < -LINEAR_MARGIN:
            mark = " L" if ours < theirs else " n"
        rows.setdefault((learner, name, kind), {})[e] = f"{ours:.3f} / {theirs:.3f}{mark}"
    eps = sorted({key[3] for key in cells})
    print("| learner | data set | preprocessing | " + " | ".join(f"eps={e:g}" for e in eps)
          + " |")
    print("|---|---|---|" + "---|" * len(eps))
    for (learner, name, kind), row in rows.items():
        print(f"| {learner} | {name} | {kind} | " + " | ".join(row.get(e, "") for e in eps)
              + " |")


def linear_report(n_splits=LINEAR_SPLITS, seeds=LINEAR_SEEDS, data=LINEAR_DATA, cells=None):
    """The linear-model table: medians over splits x seeds with 95% bootstrap intervals, the
    Holm-adjusted one-sided 95% lower bound of median(dpcore) - median(diffprivlib) per cell,
    and each cell's verdict: won (the bound > 0), tied (non-inferior: -margin <= bound <= 0),
    lost (bound < -margin and dpcore's median below the peer's) or not shown (bound < -margin
    with dpcore's median at or above the peer's: the seeds' and splits' spread is too wide).
    Printed as markdown; returns the cells. ``cells``: scores saved by earlier runs (``--save``,
    merged with ``--load``), so that Holm's adjustment runs over all of them at once."""
    t0 = time.perf_counter()
    if cells is None:
        cells = linear_scores(data=data, n_splits=n_splits, seeds=seeds)
    split_bounds, _ = holm_lower_bounds(cells, n_splits)
    bounds = holm_conditional_bounds(cells, n_splits)
    shapes = {}
    for (_, name, _, _), res in cells.items():
        shapes.setdefault(name, set()).add(by_split(res["dpcore"], n_splits).shape)
    design = "; ".join(f"{name}: " + " / ".join(f"{a} x {b}" for a, b in sorted(s))
                       for name, s in shapes.items())
    print(f"Linear models and GaussianNB: test accuracy, median over stratified 70/30 splits x "
          f"noise seeds ({design}) [95% bootstrap interval of the median]; defaults for "
          f"both libraries; LinearSVC against diffprivlib's LogisticRegression; bound: "
          f"Holm-adjusted (over all {len(cells)} cells) one-sided 95% lower bound of "
          f"median(dpcore) - median(diffprivlib), the noise seeds resampled within the fixed "
          f"splits (the verdict's); split bound: the same with the splits resampled too "
          f"(far more conservative with 5 splits); won: bound > 0; tied: bound >= "
          f"-{LINEAR_MARGIN}; lost: bound < -{LINEAR_MARGIN} with dpcore's median below; not "
          f"shown: bound < -{LINEAR_MARGIN} with dpcore's median at or above")
    print()
    print("| learner | data set | preprocessing | epsilon | dpcore | diffprivlib | bound | "
          "split bound | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    tally, split_tally = {}, {}
    for key, res in cells.items():
        text = {}
        for lib, v in res.items():
            lo, hi = _bootstrap_median_interval(v)
            text[lib] = f"{np.median(v):.3f} [{lo:.3f}, {hi:.3f}]"
        bound = bounds[key]
        below = np.median(res["dpcore"]) < np.median(res["diffprivlib"])
        verdict = ("won" if bound > 0 else "tied" if bound >= -LINEAR_MARGIN
                   else "lost" if below else "not shown")
        tally.setdefault(key[0], {"won": 0, "tied": 0, "not shown": [], "lost": []})
        if verdict in ("lost", "not shown"):
            tally[key[0]][verdict].append(key)
        else:
            tally[key[0]][verdict] += 1
        split_tally.setdefault(key[0], 0)
        split_tally[key[0]] += split_bounds[key] >= -LINEAR_MARGIN
        learner, name, kind, e = key
        print(f"| {learner} | {name} | {kind} | {e:g} | {text['dpcore']} | "
              f"{text['diffprivlib']} | {bound:+.3f} | {split_bounds[key]:+.3f} | {verdict} |")
    print()
    compact_linear_table(cells, bounds)
    print()
    for learner, t in tally.items():
        print(f"- {learner}: won {t['won']}, tied {t['tied']}, not shown "
              f"{len(t['not shown'])}, lost {len(t['lost'])}; split bound >= "
              f"-{LINEAR_MARGIN} in {split_tally[learner]}")
        for what in ("lost", "not shown"):
            if t[what]:
                print(f"  - {what}: " + ", ".join(f"{b} / {c} / eps={e:g}"
                                                   for _, b, c, e in t[what]))
    print(f"\n(linear: {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return cells


def noise_diagnosis(learner, name, kind, epsilon, n_splits=LINEAR_SPLITS, seeds=LINEAR_SEEDS,
                    reference_epsilon=1e6):
    """Why a cell is lost: per library, the accuracy's median, mean and spread over the splits x
    seeds of the study (the same seeds), the median accuracy of the same default at
    ``reference_epsilon`` (the default's bias without noise), and the cosine between each fitted
    model and that reference model on the same split (coef_, or GaussianNB's class means
    centred over the classes): a cosine near 0 means the released model is the noise's, not the
    data's. Prints one line per library and the largest class's share (chance level)."""
    X, y = linear_data(name)
    pub = public_inputs(X)
    classes = np.unique(y)
    Z, data_norm, bounds = preprocess(kind, X, pub)
    print(f"{learner} / {name} / {kind} / eps={epsilon:g}: largest class share "
          f"{np.bincount(np.searchsorted(classes, y)).max() / y.size:.3f}")

    def direction(model):
        v = model.theta_ - model.theta_.mean(axis=0) if learner == "GaussianNB" else model.coef_
        return v.ravel() / np.linalg.norm(v)

    for lib, make in linear_contenders(classes, data_norm, bounds)[learner].items():
        acc, cos, ref_acc = [], [], []
        for sp in range(n_splits):
            itr, ite = train_test_split(np.arange(len(y)), test_size=0.3, random_state=sp,
                                        stratify=y)
            ref = make(reference_epsilon, 0).fit(Z[itr], y[itr])
            ref_acc.append(ref.score(Z[ite], y[ite]))
            for seed in range(seeds):
                model = make(epsilon, 1000 * sp + seed).fit(Z[itr], y[itr])
                acc.append(model.score(Z[ite], y[ite]))
                cos.append(float(direction(model) @ direction(ref)))
        acc, cos = np.array(acc), np.array(cos)
        print(f"  {lib}: accuracy median {np.median(acc):.3f}, mean {acc.mean():.3f}, sd "
              f"{acc.std():.3f}; at epsilon {reference_epsilon:g}: {np.median(ref_acc):.3f}; "
              f"cosine with that model: median {np.median(cos):+.3f} [quartiles "
              f"{np.percentile(cos, 25):+.3f}, {np.percentile(cos, 75):+.3f}]")


def run(data=None, seeds=None, save=None, load=None, learners=None, first_seed=0,
        n_splits=LINEAR_SPLITS):
    """The command line's work: report (all or ``data``; only ``learners`` when given), ``save``
    the scores, or report from the ``load``-ed saves (a later file's cells replace an earlier
    one's; scores saved as 1-d split-major arrays, before the sixth session, have ``n_splits``
    splits)."""
    warnings.simplefilter("ignore")   # diffprivlib warns about its own settings
    if load:
        cells = {}
        for path in load:
            with open(path, "rb") as f:
                cells.update(pickle.load(f))
        linear_report(n_splits=n_splits, cells=cells)
        return
    data = tuple(data) if data else LINEAR_DATA
    if save:
        cells = linear_scores(data=data, n_splits=n_splits, seeds=seeds or LINEAR_SEEDS,
                              learners=learners, first_seed=first_seed)
        with open(save, "wb") as f:
            pickle.dump(cells, f)
        return
    linear_report(n_splits=n_splits, cells=linear_scores(
        data=data, n_splits=n_splits, seeds=seeds or LINEAR_SEEDS, learners=learners,
        first_seed=first_seed))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="*", default=None,
                        help="only these data sets (of LINEAR_DATA)")
    parser.add_argument("--splits", type=int, default=LINEAR_SPLITS,
                        help="stratified 70/30 splits, random_state 0 .. SPLITS - 1 (5); with "
                             "--load: the splits of pickles saved as 1-d arrays")
    parser.add_argument("--seeds", type=int, default=None, help="noise seeds per split (8)")
    parser.add_argument("--save", default=None,
                        help="save the raw scores to this pickle instead of reporting")
    parser.add_argument("--load", nargs="*", default=None,
                        help="report from saved scores (Holm over all of them)")
    parser.add_argument("--learners", nargs="*", default=None,
                        help="only these learners (LogisticRegression, LinearSVC, GaussianNB)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="noise seeds 1000 split + FIRST_SEED, ... (8: fresh seeds)")
    parser.add_argument("--diagnose", nargs=4, action="append", default=None,
                        metavar=("LEARNER", "DATA", "PREPROCESSING", "EPSILON"),
                        help="noise_diagnosis of one cell (PREPROCESSING: its index 0-3 in "
                             "PREPROCESSINGS); repeatable")
    args = parser.parse_args(argv)
    if args.diagnose:
        warnings.simplefilter("ignore")
        for learner, name, kind, eps in args.diagnose:
            noise_diagnosis(learner, name, PREPROCESSINGS[int(kind)], float(eps),
                            seeds=args.seeds or LINEAR_SEEDS)
        return
    run(data=args.data, seeds=args.seeds, save=args.save, load=args.load,
        learners=args.learners, first_seed=args.first_seed, n_splits=args.splits)


if __name__ == "__main__":
    main()
