"""Utility of dpcore's private PCA: captured variance against diffprivlib (the tables in docs/user_guide/pca.md).

    PYTHONPATH=python /work/benchenv/bin/python bench/pca_utility.py [--reps 20]   # report
    PYTHONPATH=python python bench/pca_utility.py --dev [--reps 8]                 # rule choice
    PYTHONPATH=python python bench/pca_utility.py --burn-in [--chains 8] [--sweeps 1000]

Captured variance of a fit with components V (d x k):

    captured = tr(V^T A V) / (sum of the top-k eigenvalues of A),

A = X^T X for the rows X after the centre and the clipping to ``data_norm`` (what every fit
sees); non-private PCA captures 1, a random subspace about k/d.

Report (default; the data the defaults were NOT chosen on), k = 5, epsilon 0.25, 0.5, 1, 2:

* spiked: 10**4 x 100, centre 0, standard deviations 3, 2.5, 2, 1.5, 1.25 along five random
  orthonormal axes and 0.5 in the other 95 directions; a new matrix for every repetition (data
  seeds 5000 + r); ``data_norm`` the 99th percentile of the row norm under that model, from an
  independent draw (public: it uses the model, not the rows);
* digits (1797 x 64) and breast cancer (569 x 30, standardised): centred by their mean and
  ``data_norm`` the 95th percentile of the centred row norms -- stand-ins for public values (a
  deployment must take them from public knowledge); every contender gets the same rows and
  bound.

Contenders: dpcore's defaults ``PCA(5, epsilon, data_norm)`` (method "auto": pure epsilon-DP,
"ppca" with the eigengap allocation) and ``PCA(5, epsilon, delta=1e-5, data_norm)`` ("auto":
"sulq"), and diffprivlib's ``PCA(5, epsilon, data_norm, centered=True)`` (epsilon-DP; given the
centred rows so that it spends nothing on a mean). diffprivlib's fits run in a child process;
a fit that has not finished within 45 s ends the cell ("dnf": its Bingham sampler can fail to
accept a proposal; such cells are not compared). Fresh noise seeds for every repetition.

A cell passes when the Holm-adjusted (over all compared cells) one-sided 95% lower bound of
mean(dpcore) - mean(diffprivlib) is >= -0.02 (the margin; Welch t). The sulq line also states
the median on the spiked matrix at epsilon 1 with a distribution-free one-sided 95% lower bound
(an order statistic).

``--dev``: the development data on which the "auto" rule was chosen (two other spiked matrices,
5000 x 60 and 20000 x 120 with other spikes and seeds, and scikit-learn's wine and diabetes,
k = 3, standardised) and the candidates: for delta, SuLQ on the plain upper triangle (the
previous calibration), SuLQ on Frobenius coordinates (the library's "sulq") and the noisy power
method; for pure epsilon, the deflation sampler with equal shares and with the eigengap
allocation, and the Gibbs chain for reference (its epsilon holds only at stationarity).

``--burn-in``: for each dev data set and epsilon, independent Gibbs chains from uniform random
starts; the first sweep after which every chain has entered the stationary 1%-99% band of
tr(V^T C V) (a diagnostic of the trace only, not a proof of mixing).
"""
from __future__ import annotations

import argparse
import math
import multiprocessing
import queue
import sys
import time
import warnings

import numpy as np
from scipy import stats

EPSILONS = (0.25, 0.5, 1.0, 2.0)
DELTA = 1e-5
K = 5
MARGIN = 0.02
PEER_TIMEOUT = 45.0


# -- data ----------------------------------------------------------------------------------------
def spiked(n, d, stds, bulk, seed):
    """Rows N(0, Q diag(scales)^2 Q^T), Q a random rotation; and the public norm bound (99th
    percentile of the row norm under the model, from an independent draw)."""
    rng = np.random.default_rng(seed)  # insecure-ok: benchmark data, not noise
    scales = np.concatenate([stds, np.full(d - len(stds), bulk)])
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = (rng.standard_normal((n, d)) * scales) @ Q.T
    model = np.random.default_rng(seed + 99991).standard_normal((20000, d)) * scales  # insecure-ok
    return X, float(np.quantile(np.linalg.norm(model, axis=1), 0.99))


def _centred(Z, standardise):
    Z = np.asarray(Z, dtype=float)
    Z = Z - Z.mean(axis=0)
    if standardise:
        Z = Z / Z.std(axis=0)
    return Z, float(np.quantile(np.linalg.norm(Z, axis=1), 0.95))


def report_sets():
    """(name, k, data(r) -> (X, data_norm)) for the report."""
    from sklearn.datasets import load_breast_cancer, load_digits

    digits = _centred(load_digits().data, standardise=False)
    cancer = _centred(load_breast_cancer().data, standardise=True)
    return [
        ("spiked 10^4 x 100", K, lambda r: spiked(10_000, 100, [3, 2.5, 2, 1.5, 1.25], 0.5,
                                                  5000 + r)),
        ("digits", K, lambda r: digits),
        ("breast cancer", K, lambda r: cancer),
    ]


def dev_sets():
    from sklearn.datasets import load_diabetes, load_wine

    spk60 = spiked(5000, 60, [3, 2.2, 1.6, 1.3, 1.1], 0.45, 11)
    spk120 = spiked(20000, 120, [2.5, 2.0, 1.6, 1.3, 1.0], 0.5, 12)
    return [("dev spiked 5000 x 60", 5, spk60), ("dev spiked 20000 x 120", 5, spk120),
            ("wine", 3, _centred(load_wine().data, True)),
            ("diabetes", 3, _centred(load_diabetes().data, True))]


def clipped(X, norm):
    sq = np.einsum("ij,ij->i", X, X)
    return X * (1.0 / np.maximum(norm, np.sqrt(sq)))[:, None]


def captured(X, norm, V):
    Xc = clipped(X, norm)
    A = Xc.T @ Xc
    top = np.sort(np.linalg.eigvalsh(A))[::-1][: V.shape[1]].sum()
    return float(np.trace(V.T @ A @ V) / top)


# -- contenders ----------------------------------------------------------------------------------
def dpcore_fit(X, norm, k, eps, seed, **kw):
    import dpcore
    from dpcore.learn import PCA

    pca = PCA(k, epsilon=eps, data_norm=norm, random_state=dpcore.default_rng(seed), **kw)
    return pca.fit(X).components_.T


def sulq_plain_triangle(X, norm, k, eps, seed):
    """The previous "sulq": noise on the plain upper triangle (sensitivity sqrt(2) too)."""
    import dpcore

    Xc = clipped(X, norm)
    S = Xc.T @ Xc
    d = S.shape[0]
    iu = np.triu_indices(d)
    noisy = dpcore.gaussian(S[iu], sensitivity=math.sqrt(2.0) * (1 + 2.0**-12), epsilon=eps,
                            delta=DELTA, random_state=dpcore.default_rng(seed))
    M = np.zeros((d, d))
    M[iu] = noisy
    lam, U = np.linalg.eigh(M + np.triu(M, 1).T)
    return U[:, np.argsort(lam)[::-1][:k]]


def _peer_worker(X, norm, k, eps, seeds, out):
    from diffprivlib.models import PCA as PeerPCA

    for seed in seeds:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            V = PeerPCA(k, epsilon=eps, data_norm=norm, centered=True,
                        random_state=seed).fit(X).components_.T
        out.put((captured(X, norm, V), time.perf_counter() - t0))


def peer_cell(data, k, eps, reps, seed_base=0):
    """diffprivlib's captured variances for one cell, or None when a fit exceeds the time limit
    (the child is then ended: it is ours)."""
    values = []
    for r in range(reps):
        X, norm = data(r)
        out = multiprocessing.get_context("fork").Queue()
        proc = multiprocessing.get_context("fork").Process(
            target=_peer_worker, args=(X, norm, k, eps, [seed_base + 7919 * r + 13], out), daemon=True)
        proc.start()
        try:
            value, _ = out.get(timeout=PEER_TIMEOUT)
        except queue.Empty:
            proc.terminate()
            proc.join()
            return None
        proc.join()
        values.append(value)
    return np.array(values)


# -- statistics ----------------------------------------------------------------------------------
def welch(a, b):
    """Mean difference, its standard error and Welch's degrees of freedom."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else 1e9
    return float(a.mean() - b.mean()), se, df


def holm_lower_bounds(cells, alpha=0.05):
    """Holm step-down over H0_c: diff_c <= -MARGIN. Returns {cell: (lower bound, passed)}, the
    bound at the level Holm gives the cell's rank."""
    pvals = {c: stats.t.sf((d + MARGIN) / se, df) if se > 0 else float(d < -MARGIN)
             for c, (d, se, df) in cells.items()}
    out, m, stopped = {}, len(cells), False
    for i, c in enumerate(sorted(pvals, key=pvals.get)):
        level = alpha / (m - i)
        d, se, df = cells[c]
        lower = d - stats.t.isf(level, df) * se
        stopped = stopped or pvals[c] > level
        out[c] = (lower, not stopped)
    return out


def median_lower_bound(values, alpha=0.05):
    """Distribution-free one-sided lower confidence bound for the median: the largest order
    statistic X_(j) with P(Binomial(n, 1/2) < j) <= alpha."""
    v = np.sort(values)
    j = int(stats.binom.ppf(alpha, len(v), 0.5))
    while j > 0 and stats.binom.cdf(j - 1, len(v), 0.5) > alpha:
        j -= 1
    return float(v[j - 1]) if j >= 1 else -math.inf


# -- modes ---------------------------------------------------------------------------------------
def report(reps, only=None, epsilons=EPSILONS, seed_base=0):
    """The report table; ``only`` (a substring of the data set's name), ``epsilons`` and
    ``seed_base`` (added to every noise seed) re-run chosen cells with new seeds."""
    t_start = time.time()
    contenders = {"dpcore auto, epsilon-DP": {},
                  f"dpcore auto, delta={DELTA:g} (sulq)": dict(delta=DELTA)}
    rows, cells = [], {}
    for name, k, data in report_sets():
        if only is not None and only not in name:
            continue
        for eps in epsilons:
            ours = {label: np.empty(reps) for label in contenders}
            for r in range(reps):
                X, norm = data(r)
                for label, kw in contenders.items():
                    ours[label][r] = captured(X, norm, dpcore_fit(
                        X, norm, k, eps, seed_base + 1000 * r + 7, **kw))
            peer = peer_cell(data, k, eps, reps, seed_base)
            rows.append((name, eps, ours, peer))
            if peer is not None:
                for label, v in ours.items():
                    cells[(name, eps, label)] = welch(v, peer)
            print(f"  {name} eps={eps:g} done ({time.time() - t_start:.0f} s)", file=sys.stderr)
    bounds = holm_lower_bounds(cells)
    print(f"Captured variance (top-{K}), mean over {reps} repetitions (median in brackets); "
          f"diffprivlib 'dnf' = a fit did not finish within {PEER_TIMEOUT:g} s.\n"
          f"Last columns: Holm-adjusted one-sided 95% lower bound of mean(dpcore) - "
          f"mean(diffprivlib) over {len(cells)} cells, pass when >= -{MARGIN}.\n")
    print("| data | epsilon | dpcore | diffprivlib | dpcore contender | lower bound | pass |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- |")
    for name, eps, ours, peer in rows:
        p = "dnf" if peer is None else f"{peer.mean():.3f} ({np.median(peer):.3f})"
        for label, v in ours.items():
            lb, ok = bounds.get((name, eps, label), (None, None))
            tail = "- | -" if lb is None else f"{lb:+.3f} | {'yes' if ok else 'NO'}"
            print(f"| {name} | {eps:g} | {v.mean():.3f} ({np.median(v):.3f}) | {p} | {label} "
                  f"| {tail} |")
    spk = [o for n, e, o, _ in rows if n.startswith("spiked") and e == 1.0]
    if not spk:
        return
    v = spk[0][f"dpcore auto, delta={DELTA:g} (sulq)"]
    print(f"\nspiked 10^4 x 100, epsilon 1, delta {DELTA:g}: median {np.median(v):.3f}, "
          f"one-sided 95% lower bound {median_lower_bound(v):.3f} (target >= 0.8)")
    print(f"({time.time() - t_start:.0f} s)", file=sys.stderr)


def dev(reps):
    candidates = {
        "sulq plain triangle (previous)": lambda X, L, k, e, s: sulq_plain_triangle(X, L, k, e, s),
        "sulq Frobenius (library)": lambda X, L, k, e, s: dpcore_fit(X, L, k, e, s,
                                                                     method="sulq", delta=DELTA),
        "power": lambda X, L, k, e, s: dpcore_fit(X, L, k, e, s, method="power", delta=DELTA),
        "ppca deflation, equal": lambda X, L, k, e, s: dpcore_fit(X, L, k, e, s, method="ppca",
                                                                  allocation="equal"),
        "ppca deflation, eigengap": lambda X, L, k, e, s: dpcore_fit(X, L, k, e, s,
                                                                     method="ppca"),
        "ppca gibbs (reference)": lambda X, L, k, e, s: dpcore_fit(X, L, k, e, s, method="ppca",
                                                                   sampler="gibbs"),
    }
    print(f"Development data: mean captured variance over {reps} noise seeds "
          f"(delta = {DELTA:g} for the first three).\n")
    print("| data | epsilon | " + " | ".join(candidates) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in candidates) + " |")
    for name, k, (X, norm) in dev_sets():
        for eps in EPSILONS:
            cells = [np.mean([captured(X, norm, f(X, norm, k, eps, 1000 * r + 3))
                              for r in range(reps)]) for f in candidates.values()]
            print(f"| {name} | {eps:g} | " + " | ".join(f"{c:.3f}" for c in cells) + " |",
                  flush=True)


def burn_in(chains, sweeps):
    from dpcore.bingham import bingham

    print(f"Gibbs burn-in of tr(V^T C V), C = (epsilon / 2) X^T X, {chains} chains of {sweeps} "
          f"sweeps from uniform starts: first sweep inside the stationary 1%-99% band.\n")
    print("| data | k | " + " | ".join(f"eps={e:g}" for e in EPSILONS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in EPSILONS) + " |")
    for name, k, (X, norm) in dev_sets():
        Xc = clipped(X, norm)
        row = []
        for eps in EPSILONS:
            C = (eps / 2.0) * (Xc.T @ Xc)
            traces = np.array([bingham(C, k, n_sweeps=sweeps, random_state=s, return_trace=True)[1]
                               for s in range(chains)])
            lo = np.quantile(traces[:, sweeps // 2:], 0.01)
            row.append(str(1 + max(int(np.argmax(t >= lo)) for t in traces)))
        print(f"| {name} | {k} | " + " | ".join(row) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--only", default=None, help="report: data sets whose name contains this")
    parser.add_argument("--eps", type=float, nargs="+", default=list(EPSILONS), help="report")
    parser.add_argument("--seed-base", type=int, default=0, help="report: new noise seeds")
    parser.add_argument("--dev", action="store_true", help="the rule-choice table instead")
    parser.add_argument("--burn-in", action="store_true", help="Gibbs burn-in table instead")
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--sweeps", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.burn_in:
        return burn_in(args.chains, args.sweeps)
    if args.dev:
        return dev(args.reps or 8)
    return report(args.reps or 20, args.only, tuple(args.eps), args.seed_base)


if __name__ == "__main__":
    main()
