"""The trees' reported accuracy against diffprivlib (issue 28 items 2 and 3): every cell =
(learner, data set, preprocessing, epsilon), defaults for both libraries, the same public bounds.

    PYTHONPATH=python /work/benchenv/bin/python bench/tree_accuracy.py [--splits 5] [--seeds 8]
        [--first-seed 0] [--data iris wine] [--prep minmax] [--eps 0.1 0.5] [--bonferroni 200]
        [--shared-seeds] [--save part.pkl] [--load part1.pkl part2.pkl ...]

On a shared machine run it in pieces (``--data X --save X.pkl``, niced), then print the whole
table, with Holm's adjustment over all the cells, from ``--load *.pkl``.

Data: breast cancer, digits, wine, iris (stratified 70/30 splits, random_state 0 .. splits - 1)
and a 10^5-row synthetic problem (``make_classification``, 20 features, 3 classes; its own
splits). Preprocessings (issue 28 item 2), each from the data set's public ranges (the
data-set-wide min/max, mean and standard deviation, as learn_accuracy.py treats them):

* ``minmax``: (x - min) / (max - min), bounds (0, 1);
* ``minmax/sqrt(d)``: the same divided by sqrt(d), bounds (0, 1 / sqrt(d));
* ``standardised``: (x - mean) / std clipped to [-3, 3], bounds (-3, 3);
* ``unit rows``: min-max rows divided by their Euclidean norm, bounds (0, 1).

Noise seeds: split r takes seeds first + r * seeds .. first + (r + 1) * seeds - 1 (``--first-seed``,
default 0), for both libraries, so that
every fit draws its own random tree structure (diffprivlib's tree is a function of the bounds and
the seed only: with the same seeds on every split, as ``--shared-seeds`` and the tables before
the fifth session did, 8 seeds are 8 structures, and the bootstrap, which resamples the seeds of
each split independently, understates the spread). The defaults were chosen on bench/dev_suite.py
(other data), never here. Prints the markdown table: medians over splits x seeds with 95%
bootstrap intervals, and the Holm-adjusted one-sided 95% lower bound of median(dpcore) -
median(diffprivlib) over all cells (learn_accuracy.py's ``holm_lower_bounds``; non-inferior
when >= -0.02), then the DecisionTreeClassifier checks on iris, wine and digits at epsilon 0.1
and 0.5 (dpcore's median at least diffprivlib's).
"""
from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learn_accuracy as la  # noqa: E402

from dpcore.learn import DecisionTreeClassifier, RandomForestClassifier  # noqa: E402

DATA = ("breast cancer", "digits", "wine", "iris", "synthetic 1e5")
PREPROCESSINGS = ("minmax", "minmax/sqrt(d)", "standardised", "unit rows")
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
LEARNERS = ("DecisionTreeClassifier", "RandomForestClassifier")
MARGIN = la.TREE_MARGIN


def load(name):
    if name == "synthetic 1e5":
        return make_classification(n_samples=100_000, n_features=20, n_informative=6,
                                   n_redundant=4, n_classes=3, n_clusters_per_class=2,
                                   class_sep=1.0, random_state=2028)
    loader = {"breast cancer": load_breast_cancer, "digits": load_digits, "wine": load_wine,
              "iris": load_iris}[name]
    return loader(return_X_y=True)


def preprocess(X, how):
    """(transformed X, (lower, upper)) from the data set's public ranges."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    unit = np.clip((X - lo) / span, 0.0, 1.0)
    d = X.shape[1]
    if how == "minmax":
        return unit, (0.0, 1.0)
    if how == "minmax/sqrt(d)":
        return unit / np.sqrt(d), (0.0, 1.0 / np.sqrt(d))
    if how == "standardised":
        sd = X.std(axis=0)
        return np.clip((X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0), -3.0, 3.0), (-3.0, 3.0)
    if how == "unit rows":
        norm = np.linalg.norm(unit, axis=1, keepdims=True)
        return unit / np.where(norm > 0, norm, 1.0), (0.0, 1.0)
    raise ValueError(how)


def contenders(bounds, classes):
    from diffprivlib import models as dpl

    return {
        "DecisionTreeClassifier": {
            "dpcore": lambda e, r: DecisionTreeClassifier(epsilon=e, bounds=bounds,
                                                          classes=classes, random_state=r),
            "diffprivlib": lambda e, r: dpl.DecisionTreeClassifier(
                epsilon=e, bounds=bounds, classes=classes, random_state=r)},
        "RandomForestClassifier": {
            "dpcore": lambda e, r: RandomForestClassifier(epsilon=e, bounds=bounds,
                                                          classes=classes, random_state=r),
            "diffprivlib": lambda e, r: dpl.RandomForestClassifier(
                epsilon=e, bounds=bounds, classes=classes, random_state=r)},
    }


def scores(data, preps, epsilons, n_splits, seeds, shared_seeds=False, first_seed=0):
    """{(learner, data set, preprocessing, epsilon): {library: scores, shape (splits, seeds)}};
    split r takes seeds first_seed + r * seeds + 0 .. seeds - 1 (``shared_seeds``: first_seed ..
    first_seed + seeds - 1 on every split)."""
    out = {}
    for name in data:
        X0, y = load(name)
        classes = np.unique(y)
        for prep in preps:
            X, bounds = preprocess(X0, prep)
            for rep in range(n_splits):
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=rep,
                                                      stratify=y)
                for learner, libs in contenders(bounds, classes).items():
                    for e in epsilons:
                        cell = out.setdefault((learner, name, prep, e), {lib: [] for lib in libs})
                        for lib, make in libs.items():
                            first = first_seed + (0 if shared_seeds else rep * seeds)
                            for seed in range(first, first + seeds):
                                est = make(e, seed).fit(Xtr, ytr)
                                cell[lib].append(est.score(Xte, yte))
            print(f"  {name} / {prep}: done", file=sys.stderr, flush=True)
    return {key: {lib: np.array(v).reshape(n_splits, seeds) for lib, v in cell.items()}
            for key, cell in out.items()}


def interval(v):
    rng = np.random.default_rng(3)  # insecure-ok: bootstrap resampling of benchmark scores
    v = v.ravel()
    boot = np.median(rng.choice(v, size=(2000, v.size)), axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return f"{np.median(v):.3f} [{lo:.3f}, {hi:.3f}]"


def report(cells, n_splits, seeds, bonferroni=None):
    """The table. ``bonferroni=N``: each bound at level 0.05 / N (a part of a table of N cells
    re-run on its own: at least as strict as Holm's adjustment over the N)."""
    if bonferroni:
        bounds = {key: la.median_difference_bound(res["dpcore"], res["diffprivlib"], n_splits,
                                                  0.05 / bonferroni)
                  for key, res in cells.items()}
        how = f"Bonferroni-adjusted (level 0.05 / {bonferroni})"
    else:
        bounds, _ = la.holm_lower_bounds(cells, n_splits)
        how = f"Holm-adjusted (over all {len(cells)} cells)"
    print(f"Trees: test accuracy, median over {design(cells, n_splits)} noise "
          f"seeds [95% bootstrap interval]; defaults for both libraries, the same bounds; last "
          f"columns: {how} one-sided lower bound of median(dpcore) - median(diffprivlib), "
          f"non-inferior when >= -{MARGIN}")
    print()
    print("| learner | data set | preprocessing | epsilon | dpcore | diffprivlib | bound | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    fails, small = [], []
    for key, res in cells.items():
        learner, name, prep, e = key
        ok = bounds[key] >= -MARGIN
        if not ok:
            fails.append(key)
        if learner == LEARNERS[0] and name in ("iris", "wine", "digits") and e in (0.1, 0.5):
            small.append((name, prep, e, np.median(res["dpcore"]), np.median(res["diffprivlib"])))
        print(f"| {learner} | {name} | {prep} | {e:g} | {interval(res['dpcore'])} | "
              f"{interval(res['diffprivlib'])} | {bounds[key]:+.3f} | "
              f"{'non-inferior' if ok else 'NOT shown'} |")
    print()
    print(f"- non-inferior: {len(cells) - len(fails)} of {len(cells)} cells"
          + ("" if not fails else "; NOT shown: " + ", ".join(
              f"{a} / {b} / {c} / eps={d:g}" for a, b, c, d in fails)))
    passed = sum(ours >= theirs for *_, ours, theirs in small)
    print(f"- DecisionTreeClassifier at epsilon 0.1 and 0.5 on iris, wine, digits: median at "
          f"least diffprivlib's in {passed} of {len(small)} cells")
    for name, prep, e, ours, theirs in small:
        if ours < theirs:
            print(f"  - FAIL {name} / {prep} / eps={e:g}: {ours:.3f} vs {theirs:.3f}")
    compact(cells, bounds)


def design(cells, n_splits):
    """"10 stratified 70/30 splits x 16" or, for a table put together from runs of different
    sizes, the splits x seeds of each data set."""
    shapes = {}
    for (_, name, _, _), res in cells.items():
        shapes.setdefault(name, set()).add(la.by_split(res["dpcore"], n_splits).shape)
    if len(set().union(*shapes.values())) == 1:
        (splits, seeds), = set().union(*shapes.values())
        return f"{splits} stratified 70/30 splits x {seeds}"
    return "stratified 70/30 splits x (" + ", ".join(
        f"{name}: " + " / ".join(f"{a} x {b}" for a, b in sorted(s)) for name, s in shapes.items()
    ) + ")"


def compact(cells, bounds):
    """The same cells, one row per (data set, preprocessing, learner): dpcore / diffprivlib
    medians by epsilon, "(ns)" where non-inferiority is not shown (the user guide's table)."""
    rows = {}
    for (learner, name, prep, e), res in cells.items():
        flag = "" if bounds[(learner, name, prep, e)] >= -MARGIN else " (ns)"
        rows.setdefault((name, prep, learner), {})[e] = (
            f"{np.median(res['dpcore']):.3f} / {np.median(res['diffprivlib']):.3f}{flag}")
    epsilons = sorted({e for *_, e in cells})
    print()
    print("| model | data set | preprocessing | " + " | ".join(f"eps={e:g}" for e in epsilons)
          + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in epsilons) + " |")
    for (name, prep, learner) in sorted(rows, key=lambda r: (DATA.index(r[0]),
                                                             PREPROCESSINGS.index(r[1]),
                                                             LEARNERS.index(r[2]))):
        row = rows[(name, prep, learner)]
        print(f"| {learner.replace('Classifier', '')} | {name} | {prep} | "
              + " | ".join(row.get(e, "") for e in epsilons) + " |")


def _table_order(item):
    (learner, name, prep, e), _ = item
    return (LEARNERS.index(learner), DATA.index(name), PREPROCESSINGS.index(prep), e)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5,
                        help="with --load: the splits of pickles saved as 1-d (split-major) "
                             "arrays, before the sixth session")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="split r takes noise seeds first + r * seeds .. + seeds - 1")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--data", nargs="*", default=list(DATA))
    parser.add_argument("--prep", nargs="*", default=list(PREPROCESSINGS))
    parser.add_argument("--eps", type=float, nargs="*", default=list(EPSILONS))
    parser.add_argument("--bonferroni", type=int, default=None,
                        help="bounds at level 0.05 / N (re-running part of an N-cell table)")
    parser.add_argument("--shared-seeds", action="store_true",
                        help="the same seeds 0 .. seeds - 1 on every split (the earlier tables)")
    parser.add_argument("--save", default=None, help="pickle the scores here (a piece)")
    parser.add_argument("--load", nargs="*", default=None,
                        help="report the pieces saved with --save instead of running")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.load:
        cells = {}
        for path in args.load:
            with open(path, "rb") as f:
                cells.update(pickle.load(f))
        cells = dict(sorted(cells.items(), key=_table_order))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cells = scores(args.data, args.prep, args.eps, args.splits, args.seeds,
                           args.shared_seeds, args.first_seed)
        if args.save:
            with open(args.save, "wb") as f:
                pickle.dump(cells, f)
    report(cells, args.splits, args.seeds, args.bonferroni)
    print(f"\n(tree_accuracy: {time.perf_counter() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
