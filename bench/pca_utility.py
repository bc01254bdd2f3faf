"""Utility of dpcore's private PCA: captured variance against non-private PCA (the table in docs/user_guide/pca.md).

    python bench/pca_utility.py [--reps 5] [--quick]
    python bench/pca_utility.py --burn-in [--chains 8] [--sweeps 1000]

For each data set, epsilon and method, the median over ``--reps`` fits of

    captured = tr(V^T A V) / (sum of the top-k eigenvalues of A),

A = X^T X / n for the prepared rows X (centred, scaled so every row has norm <= 1). Non-private
PCA (scikit-learn) captures 1 by definition. Data sets: scikit-learn's bundled digits (1797 x 64,
k = 5) and breast cancer (569 x 30, k = 2), and a synthetic spiked covariance (n = 5000, d = 50,
k = 3: variances 9, 4, 2.25, the rest 0.25).

Preparation (stated because it matters for privacy): the centring and the scale are taken from
the data here (a stand-in for public bounds; a real deployment must get them from public
knowledge or spend budget on them); data_norm = 1 after scaling. Methods: "ppca" (Gibbs,
default 200 sweeps; epsilon-DP at stationarity, see the PCA docstring), "ppca-deflation" (exact,
epsilon-DP), "sulq" and "power" ((epsilon, 1e-5)-DP).

``--burn-in``: for each data set and epsilon, independent Gibbs chains from uniform random
starts; the stationary band of tr(V^T C V) is its 1%-99% range over the chains' second halves,
and the burn-in reported is the first sweep after which every chain has entered the band (a
diagnostic of the trace only, not a proof of mixing).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

EPSILONS = [0.1, 0.5, 1.0, 2.0, 5.0]
DELTA = 1e-5
METHODS = {
    "ppca-gibbs": dict(method="ppca", sampler="gibbs", variance_share=0.0),
    "ppca-deflation (default)": dict(method="ppca", sampler="deflation", variance_share=0.0),
    "sulq": dict(method="sulq", delta=DELTA),
    "power": dict(method="power", delta=DELTA),
}


def _prepare(X):
    X = np.asarray(X, dtype=float)
    X = X - X.mean(axis=0)
    return X / np.linalg.norm(X, axis=1).max()


def datasets():
    from sklearn.datasets import load_breast_cancer, load_digits

    rng = np.random.default_rng(0)
    d = 50
    scales = np.concatenate([[3.0, 2.0, 1.5], np.full(d - 3, 0.5)])
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    spiked = (rng.standard_normal((5000, d)) * scales) @ Q.T
    return [
        ("digits", _prepare(load_digits().data), 5),
        ("breast cancer", _prepare(load_breast_cancer().data), 2),
        ("spiked (n=5000, d=50)", _prepare(spiked), 3),
    ]


def captured(X, V):
    A = X.T @ X / len(X)
    top = np.sort(np.linalg.eigvalsh(A))[::-1][: V.shape[1]].sum()
    return float(np.trace(V.T @ A @ V) / top)


def burn_in(chains, sweeps):
    from dpcore.bingham import bingham

    print(f"Gibbs burn-in of tr(V^T C V), C = (epsilon / 2) X^T X, {chains} chains of {sweeps} "
          f"sweeps from uniform starts: first sweep inside the stationary 1%-99% band.\n")
    print("| data | k | " + " | ".join(f"eps={e:g}" for e in EPSILONS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in EPSILONS) + " |")
    for name, X, k in datasets():
        cells = []
        for eps in EPSILONS:
            C = (eps / 2.0) * (X.T @ X)
            traces = np.array([bingham(C, k, n_sweeps=sweeps, random_state=s, return_trace=True)[1]
                               for s in range(chains)])
            tail = traces[:, sweeps // 2:]
            lo = np.quantile(tail, 0.01)
            cells.append(str(1 + max(int(np.argmax(t >= lo)) for t in traces)))
        print(f"| {name} | {k} | " + " | ".join(cells) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two epsilons, one repetition")
    parser.add_argument("--burn-in", action="store_true", help="Gibbs burn-in table instead")
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--sweeps", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.burn_in:
        return burn_in(args.chains, args.sweeps)
    from sklearn.decomposition import PCA as SkPCA

    from dpcore.learn import PCA

    eps_list = [0.5, 2.0] if args.quick else EPSILONS
    reps = 1 if args.quick else args.reps
    t0 = time.time()
    print(f"Captured variance tr(V^T A V) / top-k eigenvalue sum, median of {reps} fits "
          f"(1.000 = non-private PCA).\n")
    for name, X, k in datasets():
        sk = SkPCA(k).fit(X)
        print(f"**{name}**, n = {X.shape[0]}, d = {X.shape[1]}, k = {k}; "
              f"scikit-learn PCA: {captured(X, sk.components_.T):.3f}\n")
        print("| method | " + " | ".join(f"eps={e:g}" for e in eps_list) + " |")
        print("| --- | " + " | ".join("---:" for _ in eps_list) + " |")
        for label, kw in METHODS.items():
            cells = []
            for eps in eps_list:
                vals = [captured(X, PCA(k, epsilon=eps, data_norm=1.0, random_state=1000 * r + 7,
                                        **kw).fit(X).components_.T) for r in range(reps)]
                cells.append(f"{np.median(vals):.3f}")
            print(f"| {label} | " + " | ".join(cells) + " |")
        print()
    print(f"(random baseline: k/d; {time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
