"""Accuracy vs epsilon of dpcore's private learners, side by side with diffprivlib and scikit-learn.

Run by hand (not a pytest module) in an environment with the peers, e.g.::

    PYTHONPATH=python /tmp/benchenv/bin/python bench/learn_accuracy.py [--repeats 20] [--timing]

Data sets (bundled with scikit-learn): breast cancer (binary logistic regression and Gaussian
naive Bayes), digits (10-class one-vs-rest logistic regression), diabetes (linear regression,
R^2). Every data set is split once 70/30 (seed 0); each (learner, epsilon) is fitted
``--repeats`` times with different noise seeds and the mean (and standard deviation) of the test
accuracy / R^2 is reported.

Public bounds: the features' min/max over the whole data set are used as "public" bounds for
both libraries (a data-dependent choice that a real deployment must replace by domain
knowledge; it is the same for every contender, so the comparison is fair). For the linear
classifiers the features are min-max scaled to [0, 1] with those bounds and rows are clipped to
the same L2 bound ``--data-norm`` (default 2; sqrt(n_features) would avoid clipping but shrinks
the signal) in both libraries. Regularisation: dpcore uses
alpha (Lambda of the averaged objective on rows [x, 1] / s, s = sqrt(data_norm^2 + 1), which is
also diffprivlib's row geometry); diffprivlib is run at its default C = 1 and at the matched
C = s^2 / (n_train alpha) (the same objective).

``--timing`` adds the fit-time comparison on n = 10^5, d = 50 (synthetic) against the
non-private scikit-learn fit; with two shared cores the timings are noisy.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LinearRegression as SkLinReg
from sklearn.linear_model import LogisticRegression as SkLogReg
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB as SkNB

from dpcore.learn._linear import LinearRegression, LogisticRegression
from dpcore.learn._naive_bayes import GaussianNB

try:
    import diffprivlib.models as dpl
except ImportError:  # pragma: no cover
    dpl = None

EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)


def _load(name):
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "digits":
        X, y = load_digits(return_X_y=True)
    else:
        X, y = load_diabetes(return_X_y=True)
    lo, hi = X.min(axis=0), X.max(axis=0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    strat = y if name != "diabetes" else None
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=strat)
    return Xtr, Xte, ytr, yte, (lo, hi), (float(y.min()), float(y.max()))


def _scaled(X, lo, hi):
    return np.clip((X - lo) / (hi - lo), 0.0, 1.0)


def _mean_std(values):
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def _contenders_classification(name, n_train, d, classes, lo, hi, alpha, norm):
    out = {
        "dpcore LR (objective)": lambda e, s: LogisticRegression(
            epsilon=e, data_norm=norm, alpha=alpha, classes=classes, random_state=s),
        "dpcore LR (output)": lambda e, s: LogisticRegression(
            epsilon=e, data_norm=norm, alpha=alpha, method="output", classes=classes, random_state=s),
        # (epsilon, delta)-DP through zCDP: not the same guarantee as the pure-epsilon rows
        "dpcore LR (gd, delta=1e-5)": lambda e, s: LogisticRegression(
            epsilon=e, data_norm=norm, alpha=alpha, method="gd", delta=1e-5, classes=classes,
            random_state=s),
    }
    if dpl is not None:
        out["diffprivlib LR (C=1)"] = lambda e, s: dpl.LogisticRegression(
            epsilon=e, data_norm=norm, random_state=s)
        # same objective: diffprivlib penalises raw weights on rows [x, 1] of norm <= s
        out["diffprivlib LR (matched C)"] = lambda e, s: dpl.LogisticRegression(
            epsilon=e, data_norm=norm, C=(norm ** 2 + 1) / (n_train * alpha), random_state=s)
    return out


def run_accuracy(repeats, alpha_binary, alpha_multi, norm):
    rows = []
    for name in ("breast_cancer", "digits"):
        Xtr, Xte, ytr, yte, (lo, hi), _ = _load(name)
        Str, Ste = _scaled(Xtr, lo, hi), _scaled(Xte, lo, hi)
        classes = np.unique(np.concatenate([ytr, yte]))   # public label set
        alpha = alpha_binary if classes.size == 2 else alpha_multi
        base = SkLogReg(max_iter=5000).fit(Str, ytr).score(Ste, yte)
        rows.append((name, "scikit-learn LogisticRegression (non-private)", {e: f"{base:.3f}" for e in EPSILONS}))
        for label, make in _contenders_classification(name, len(ytr), Xtr.shape[1], classes, lo, hi,
                                                      alpha, norm).items():
            res = {}
            for e in EPSILONS:
                res[e] = _mean_std([make(e, s).fit(Str, ytr).score(Ste, yte) for s in range(repeats)])
            rows.append((name, label, res))
        if name == "breast_cancer":
            base = SkNB().fit(Xtr, ytr).score(Xte, yte)
            rows.append((name, "scikit-learn GaussianNB (non-private)", {e: f"{base:.3f}" for e in EPSILONS}))
            nb = {"dpcore GaussianNB": lambda e, s: GaussianNB(epsilon=e, bounds=(lo, hi),
                                                              classes=classes, random_state=s)}
            if dpl is not None:
                nb["diffprivlib GaussianNB"] = lambda e, s: dpl.GaussianNB(
                    epsilon=e, bounds=(lo, hi), random_state=s)
            for label, make in nb.items():
                res = {e: _mean_std([make(e, s).fit(Xtr, ytr).score(Xte, yte) for s in range(repeats)])
                       for e in EPSILONS}
                rows.append((name, label, res))
    Xtr, Xte, ytr, yte, (lo, hi), (ylo, yhi) = _load("diabetes")
    base = SkLinReg().fit(Xtr, ytr).score(Xte, yte)
    rows.append(("diabetes (R^2)", "scikit-learn LinearRegression (non-private)",
                 {e: f"{base:.3f}" for e in EPSILONS}))
    reg = {"dpcore LinearRegression (FM)": lambda e, s: LinearRegression(
        epsilon=e, bounds_X=(lo, hi), bounds_y=(ylo, yhi), random_state=s)}
    if dpl is not None:
        reg["diffprivlib LinearRegression"] = lambda e, s: dpl.LinearRegression(
            epsilon=e, bounds_X=(lo, hi), bounds_y=(ylo, yhi), random_state=s)
    for label, make in reg.items():
        res = {e: _mean_std([make(e, s).fit(Xtr, ytr).score(Xte, yte) for s in range(repeats)])
               for e in EPSILONS}
        rows.append(("diabetes (R^2)", label, res))
    return rows


def run_timing(repeats=3):
    rng = np.random.default_rng(0)
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--alpha-binary", type=float, default=0.01)
    parser.add_argument("--alpha-multi", type=float, default=0.01)
    parser.add_argument("--data-norm", type=float, default=2.0)
    parser.add_argument("--timing", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")   # diffprivlib warns about its own settings
    t0 = time.perf_counter()
    rows = run_accuracy(args.repeats, args.alpha_binary, args.alpha_multi, args.data_norm)
    print(f"Accuracy (test; mean ± std over {args.repeats} noise seeds), alpha binary "
          f"{args.alpha_binary}, multiclass {args.alpha_multi}, data_norm {args.data_norm}")
    print("| data set | model | " + " | ".join(f"eps={e:g}" for e in EPSILONS) + " |")
    print("|---|---|" + "---|" * len(EPSILONS))
    for data, label, res in rows:
        print(f"| {data} | {label} | " + " | ".join(res[e] for e in EPSILONS) + " |")
    if args.timing:
        print("\nFit time, n = 100000, d = 50 (best of 3, seconds; 2 shared cores: noisy)")
        times = run_timing()
        ref = times["scikit-learn LogisticRegression (lbfgs)"]
        for label, t in times.items():
            print(f"| {label} | {t:.3f} s | {t / ref:.2f}x |")
    print(f"\n(total {time.perf_counter() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
