"""Equal-epsilon accuracy of dpcore.stats against OpenDP and diffprivlib, side by side (issue 27).

    PYTHONPATH=python /work/benchenv/bin/python bench/utility_stats.py [--quick] [--seed S]

Cells: count, sum, mean, var, std, quantiles (q = 0.1, 0.25, 0.5, 0.75, 0.9), median, histogram
(20 bins) and histogramdd (10 x 10 bins) x epsilon in {0.1, 0.5, 1, 2, 5} x n in {10**3,
10**5} x two data sets on the public bounds [0, 20]: **skewed** (lognormal(0, 1) clipped) and
**symmetric** (normal(10, 3) clipped); histogramdd pairs each with a second column
(lognormal(0.5, 0.8), resp. normal(10, 3)). The data are drawn once (seed 27); every cell draws
its releases with fresh seeds.

Pairings (each under one neighbouring relation with the same public inputs for both sides):

* OpenDP (0.16), add/remove (symmetric distance 1), its idiom: clamp to the bounds, then
  ``resize(n, constant=10)`` (the centre), then ``mean`` / ``variance`` (ddof 1) / ``sum``,
  then ``laplace`` with the scale from ``binary_search_param`` at d_in = 1, d_out = epsilon.
  dpcore side: ``n=`` (public n, add/remove). std = sqrt(max(variance, 0)) of that release.
  count (of the records above 5, a public row-wise filter, in every library, applied once
  per cell outside the timed releases: deterministic, so the same law): ``count`` +
  ``laplace`` (dpcore ``count``); sum without n: ``clamp`` + ``sum`` +
  ``laplace`` (dpcore ``sum``); quantiles: ``make_private_quantile`` (score candidates +
  ``noisy_max`` with exponential noise, max-divergence) over OpenDP's candidate grid, **1001
  evenly spaced points on [0, 20]** (its free choice), epsilon / 5 per level (dpcore: its
  default grid); histogram: ``find_bin`` + ``count_by_categories`` + ``laplace`` (raw noisy
  counts, its idiom); histogramdd: the same over the cell index of each row (a row-wise,
  1-stable map computed with numpy's edges).
  OpenDP's randomness is only in its last measurement, so the transformation is evaluated once
  per cell and the calibrated measurement is invoked for every release: the same law as
  invoking the whole chain, without converting 10**5 floats each time.
* diffprivlib (0.6.6) defaults: ``count_nonzero`` (of x > 5: sensitivity 1, clamped to
  [0, size]), ``histogram`` /
  ``histogramdd`` (truncated geometric, sensitivity 1: add/remove), ``quantile`` / ``median``
  (exponential mechanism over the intervals, sensitivity 1: add/remove; epsilon split over the
  levels): dpcore defaults. ``sum``, ``mean``, ``var``, ``std`` use the data's size as public
  (sensitivities (u - l), (u - l)/n, (u - l)**2 (n - 1)/n**2): replace-one; dpcore side
  ``relation="replace"`` (ddof 0).
* Rows marked "info" (not in the verdict): dpcore's default mean / var / std with n private
  against OpenDP's public-n answer (different public inputs; the gap the issue asks to state).

Metric: RMSE over releases (quantiles: over releases and levels; truth = numpy's quantile of
the clipped data), mean L1 error for histograms. Each look estimates the one-sided upper bound
of RMSE(dpcore) / RMSE(peer) from a bootstrap of the log-ratio (400 resamples of each side;
normal bound on the bootstrap standard error) and the p-value of "ratio >= 1.05".

Sequential scheme (stated before the run): a cell is looked at after 1000, 4000, 20000, 10**5
and 4 * 10**5 releases per side (cumulative, fresh seeds for every release; dpcore's first-look
releases are shared by the two pairings of the same dpcore variant). It stops at the first look
where it is decided as a pass (its p-value below 0.05 / m, m = the number of verdict cells: a
pass under Holm whatever the other cells), where the ratio is significantly above 1.05
(futile), or where the next look would exceed ``--cell-seconds`` (6 s) of CPU. A cell failing
after Holm is re-run once with new seeds, with the same looks. Every cell thus has at most 10
planned looks (5 in the run, 5 in the re-run), and its p-value is 10 times the smallest
p-value of its looks (Bonferroni over the planned looks, valid for any stopping rule; the
verdict's bound is read from that look at the cell's Holm level / 10). Holm over all verdict
cells at 5%; a cell passes when its p-value clears its Holm level (equivalently, its bound is at
most 1.05). diffprivlib's quantiles and median at n = 10**5 take 0.3 s and 0.06 s of CPU a
release (it scores the intervals in Python per level), so it gets a tenth of dpcore's releases
(100 at the first look). ``--quick`` runs n = 10**3, epsilon in {0.5, 5}, 100 releases (a smoke
run; no verdict claims); ``--only REGEX`` runs the cells whose "data n=N eps=E variant vs peer"
matches (development; m stays the full run's).

The second table ("private n") compares dpcore's default mean and variance with the first-order
RMSE of the minimax construction it implements (the derived optimum), the oracle split of a
count and sums that knows the data's mean and variance, the previous equal split, and OpenDP's
public-n RMSE, all from formulas evaluated on the data (documented in the user guide).

``--median-laws`` draws nothing: it computes the exact output laws of dpcore's default median
(the exponential mechanism on the finest grid: the continuous law up to its spacing, 20 * 2**-52)
and OpenDP's (permute-and-flip over its 1001 points, from the coin formulation by quadrature,
checked to sum to 1) on the benchmark's data, and decomposes the RMSE: bias, OpenDP's grid step
in noise scales, OpenDP's grid shifted by 8 offsets, and permute-and-flip at an oracle step
(which needs the data's density near the median: private).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

LOWER, UPPER = 0.0, 20.0
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
SIZES = (1_000, 100_000)
LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)
OPENDP_CANDIDATES = 1001
BINS, BINS_2D = 20, 10
THRESHOLD = 5.0  # count: the records above it (a public row-wise predicate)
MARGIN, ALPHA, BOOTSTRAP = 1.05, 0.05, 400
# Sequential looks: releases per side (cumulative) at which a cell is evaluated; the run and the
# one re-run of a failing cell each have up to len(LOOKS) looks, so every cell has at most
# PLANNED_LOOKS looks in all, and its p-value is PLANNED_LOOKS times the smallest p-value of its
# looks (Bonferroni over the planned looks: valid whatever the stopping rule).
LOOKS = (1000, 4000, 20000, 100000, 400000)
PLANNED_LOOKS = 2 * len(LOOKS)
SLOW_PEER_SHARE = 0.1


def make_data(name, n, seed=27):
    rng = np.random.default_rng([seed, n, name == "skewed"])
    if name == "skewed":
        first, second = rng.lognormal(0.0, 1.0, n), rng.lognormal(0.5, 0.8, n)
    else:
        first, second = rng.normal(10.0, 3.0, n), rng.normal(10.0, 3.0, n)
    return np.clip(first, LOWER, UPPER), np.clip(np.column_stack([first, second]), LOWER, UPPER)


# ------------------------------------------------------------------------------------------------
# contenders: each is setup(x, x2, epsilon) -> release(seed) -> estimate


def dpcore_contenders():
    from dpcore import stats
    b = (LOWER, UPPER)

    def scalar(fn, **kw):
        return lambda x, x2, eps: lambda seed: fn(x, bounds=b, epsilon=eps, random_state=seed,
                                                  **kw)

    return {
        "count": lambda x, x2, eps: (lambda above: lambda seed: stats.count(
            above, epsilon=eps, random_state=seed))(x[x > THRESHOLD]),
        "sum": scalar(stats.sum),
        "sum n=": lambda x, x2, eps: scalar(stats.sum, n=len(x))(x, x2, eps),
        "sum replace": scalar(stats.sum, relation="replace"),
        "mean": scalar(stats.mean),
        "mean n=": lambda x, x2, eps: scalar(stats.mean, n=len(x))(x, x2, eps),
        "mean replace": scalar(stats.mean, relation="replace"),
        "var": scalar(stats.var, ddof=1),
        "var n=": lambda x, x2, eps: scalar(stats.var, n=len(x), ddof=1)(x, x2, eps),
        "var replace": scalar(stats.var, relation="replace"),
        "std": scalar(stats.std, ddof=1),
        "std n=": lambda x, x2, eps: scalar(stats.std, n=len(x), ddof=1)(x, x2, eps),
        "std replace": scalar(stats.std, relation="replace"),
        "quantiles": lambda x, x2, eps: lambda seed: stats.quantile(
            x, LEVELS, bounds=b, epsilon=eps, random_state=seed),
        "median": scalar(stats.median),
        "histogram": lambda x, x2, eps: lambda seed: stats.histogram(
            x, bins=BINS, range=b, epsilon=eps, random_state=seed)[0],
        "histogramdd": lambda x, x2, eps: lambda seed: stats.histogramdd(
            x2, bins=BINS_2D, range=[b, b], epsilon=eps, random_state=seed)[0],
    }


def opendp_contenders():
    import opendp.prelude as dp
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    center = (LOWER + UPPER) / 2

    def laplace_after(transformation, eps, post=float):
        scale = dp.binary_search_param(lambda s: transformation >> dp.m.then_laplace(s),
                                       d_in=1, d_out=eps)
        noise = dp.m.make_laplace(transformation.output_domain, transformation.output_metric,
                                  scale)
        return noise, scale

    def chain(build, post=float, rows=lambda x: x):
        def setup(x, x2, eps):
            t = build(len(x))
            exact = t(rows(x).tolist())
            noise, _ = laplace_after(t, eps)
            return lambda seed: post(noise(exact))
        return setup

    def above_threshold(x):
        return x[x > THRESHOLD]

    def resized(step, n):
        return (space >> dp.t.then_clamp((LOWER, UPPER))
                >> dp.t.then_resize(size=n, constant=center) >> step())

    def quantiles(levels):
        candidates = np.linspace(LOWER, UPPER, OPENDP_CANDIDATES)

        def setup(x, x2, eps):
            data = x.tolist()
            parts = []
            for q in levels:
                t = space >> dp.t.then_quantile_score_candidates(candidates.tolist(), q)
                scale = dp.binary_search_param(
                    lambda s, t=t: t >> dp.m.then_noisy_max(dp.max_divergence(), s, negate=True),
                    d_in=1, d_out=eps / len(levels))
                pick = dp.m.make_noisy_max(t.output_domain, t.output_metric, dp.max_divergence(),
                                           scale, negate=True)
                parts.append((pick, t(data)))
            single = len(levels) == 1
            return lambda seed: (candidates[parts[0][0](parts[0][1])] if single else
                                 np.array([candidates[p(s)] for p, s in parts]))
        return setup

    def histogram_setup(cells_of, size):
        def setup(x, x2, eps):
            cells = cells_of(x, x2)
            t = (dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()) >> \
                dp.t.then_count_by_categories(categories=list(range(size)), null_category=False)
            exact = t(cells.tolist())
            noise, _ = laplace_after(t, eps)
            return lambda seed: np.array(noise(exact))
        return setup

    def cells_1d(x, x2):
        return np.clip(np.searchsorted(np.linspace(LOWER, UPPER, BINS + 1), x, side="right") - 1,
                       0, BINS - 1)

    def cells_2d(x, x2):
        edges = np.linspace(LOWER, UPPER, BINS_2D + 1)
        ij = np.clip(np.searchsorted(edges, x2, side="right") - 1, 0, BINS_2D - 1)
        return ij[:, 0] * BINS_2D + ij[:, 1]

    return {
        "count": chain(lambda n: space >> dp.t.then_count(), post=int, rows=above_threshold),
        "sum": chain(lambda n: space >> dp.t.then_clamp((LOWER, UPPER)) >> dp.t.then_sum()),
        "sum n=": chain(lambda n: resized(dp.t.then_sum, n)),
        "mean n=": chain(lambda n: resized(dp.t.then_mean, n)),
        "var n=": chain(lambda n: resized(dp.t.then_variance, n)),
        "std n=": chain(lambda n: resized(dp.t.then_variance, n),
                        post=lambda v: math.sqrt(max(v, 0.0))),
        "quantiles": quantiles(LEVELS),
        "median": quantiles((0.5,)),
        "histogram": histogram_setup(cells_1d, BINS),
        "histogramdd": histogram_setup(cells_2d, BINS_2D**2),
    }


def diffprivlib_contenders():
    import warnings

    from diffprivlib import tools
    from diffprivlib.accountant import BudgetAccountant
    warnings.filterwarnings("ignore", module="diffprivlib")
    b = (LOWER, UPPER)

    def tool(fn, **kw):
        return lambda x, x2, eps: lambda seed: fn(x, epsilon=eps, bounds=b, random_state=seed,
                                                  accountant=BudgetAccountant(), **kw)

    return {
        "count": lambda x, x2, eps: (lambda mask: lambda seed: tools.count_nonzero(
            mask, epsilon=eps, random_state=seed, accountant=BudgetAccountant()))(x > THRESHOLD),
        "sum replace": tool(tools.sum),
        "mean replace": tool(tools.mean),
        "var replace": tool(tools.var),
        "std replace": tool(tools.std),
        "quantiles": lambda x, x2, eps: lambda seed: tools.quantile(
            x, np.array(LEVELS), epsilon=eps, bounds=b, random_state=seed,
            accountant=BudgetAccountant()),
        "median": tool(tools.median),
        "histogram": lambda x, x2, eps: lambda seed: tools.histogram(
            x, epsilon=eps, bins=BINS, range=b, random_state=seed,
            accountant=BudgetAccountant())[0],
        "histogramdd": lambda x, x2, eps: lambda seed: tools.histogramdd(
            x2, epsilon=eps, bins=BINS_2D, range=[b, b], random_state=seed,
            accountant=BudgetAccountant())[0],
    }


# (dpcore variant, peer, peer variant, relation / public inputs, verdict?)
PAIRINGS = [
    ("count", "OpenDP", "count", "add/remove", True),
    ("count", "diffprivlib", "count", "add/remove", True),
    ("sum", "OpenDP", "sum", "add/remove, n private", True),
    ("sum n=", "OpenDP", "sum n=", "add/remove, n public", True),
    ("sum replace", "diffprivlib", "sum replace", "replace-one, n = size", True),
    ("mean n=", "OpenDP", "mean n=", "add/remove, n public", True),
    ("mean", "OpenDP", "mean n=", "info: dpcore n private, OpenDP n public", False),
    ("mean replace", "diffprivlib", "mean replace", "replace-one, n = size", True),
    ("var n=", "OpenDP", "var n=", "add/remove, n public (ddof 1)", True),
    ("var", "OpenDP", "var n=", "info: dpcore n private, OpenDP n public", False),
    ("var replace", "diffprivlib", "var replace", "replace-one, n = size", True),
    ("std n=", "OpenDP", "std n=", "add/remove, n public (ddof 1)", True),
    ("std", "OpenDP", "std n=", "info: dpcore n private, OpenDP n public", False),
    ("std replace", "diffprivlib", "std replace", "replace-one, n = size", True),
    ("quantiles", "OpenDP", "quantiles", "add/remove", True),
    ("quantiles", "diffprivlib", "quantiles", "add/remove", True),
    ("median", "OpenDP", "median", "add/remove", True),
    ("median", "diffprivlib", "median", "add/remove", True),
    ("histogram", "OpenDP", "histogram", "add/remove", True),
    ("histogram", "diffprivlib", "histogram", "add/remove", True),
    ("histogramdd", "OpenDP", "histogramdd", "add/remove", True),
    ("histogramdd", "diffprivlib", "histogramdd", "add/remove", True),
]


def truth_of(variant, x, x2):
    base = variant.split()[0]
    if base == "count":
        return float(np.count_nonzero(x > THRESHOLD))
    if base == "sum":
        return float(x.sum())
    if base == "mean":
        return float(x.mean())
    ddof = 0 if variant.endswith("replace") else 1
    if base == "var":
        return float(x.var(ddof=ddof))
    if base == "std":
        return float(x.std(ddof=ddof))
    if base == "quantiles":
        return np.quantile(x, LEVELS)
    if base == "median":
        return float(np.median(x))
    if base == "histogram":
        return np.histogram(x, bins=BINS, range=(LOWER, UPPER))[0]
    return np.histogramdd(x2, bins=BINS_2D, range=[(LOWER, UPPER)] * 2)[0]


def losses(variant, outputs, truth):
    """Per-release loss whose mean is the squared RMSE (or the mean L1 for histograms)."""
    out = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
    truth = np.asarray(truth, dtype=float).reshape(1, -1)
    if variant.startswith("histogram"):
        return np.abs(out - truth).sum(axis=1)
    err = out - truth
    return np.mean(err * err, axis=1)


def metric(variant, loss):
    return float(loss.mean()) if variant.startswith("histogram") else math.sqrt(loss.mean())


def log_ratio(ours, theirs):
    """log(ours / theirs); 0 when both are 0 (every release exact), +-50 when one is."""
    if ours == theirs:
        return 0.0
    if ours == 0.0 or theirs == 0.0:
        return -50.0 if ours == 0.0 else 50.0
    return math.log(ours / theirs)


@dataclass
class Cell:
    dataset: str
    n: int
    epsilon: float
    variant: str
    peer: str
    peer_variant: str
    relation: str
    verdict: bool
    ours: float = math.nan
    theirs: float = math.nan
    log_ratio: float = math.nan
    se: float = math.nan
    seconds: float = 0.0
    releases: int = 0
    rerun: bool = False
    p_value: float = math.nan
    p_min: float = 1.0
    looks: int = 0
    passed: bool | None = None
    bound: float = math.nan
    extra: dict = field(default_factory=dict)


def draw_losses(release, variant, seeds, truth):
    start = time.process_time()
    loss = losses(variant, [release(int(s)) for s in seeds], truth)
    return loss, time.process_time() - start


def new_seeds(seed_seq, r, r_peer):
    """Fresh seeds: 62-bit for dpcore's ChaCha20, 32-bit for diffprivlib's generators."""
    seeds = seed_seq.generate_state(r + r_peer, dtype=np.uint64).astype(np.int64) & (2**62 - 1)
    seeds[r:] &= 2**32 - 1
    return seeds[:r], seeds[r:]


def evaluate(variant, ours, theirs, boot_seq):
    """(metric ours, metric theirs, log-ratio, bootstrap standard error of the log-ratio, the
    one-sided p-value of "ratio >= MARGIN") for the releases so far."""
    boot = np.random.default_rng(boot_seq)
    ours_m, theirs_m = metric(variant, ours), metric(variant, theirs)
    logs = [log_ratio(metric(variant, ours[boot.integers(0, ours.size, ours.size)]),
                      metric(variant, theirs[boot.integers(0, theirs.size, theirs.size)]))
            for _ in range(BOOTSTRAP)]
    lr = log_ratio(ours_m, theirs_m)
    se = float(np.std(logs, ddof=1))
    if se == 0.0:  # every resample alike (e.g. no error on either side): no evidence
        return ours_m, theirs_m, lr, se, 1.0
    return ours_m, theirs_m, lr, se, float(sps.norm.cdf((lr - math.log(MARGIN)) / se))


def sequential(cell, x, x2, contenders, seed_seq, looks, m, seconds, shared=None):
    """One run of a cell: releases on both sides with fresh seeds, evaluated at the looks
    ``looks`` (cumulative (dpcore, peer) release counts), stopping at the first look where

    * the cell is decided as a pass: PLANNED_LOOKS * (smallest p so far) <= ALPHA / m, a pass
      under Holm over the m verdict cells whatever the other cells' p-values; or
    * it is futile: the ratio is above the margin, significantly (its lower bound at the
      loosest Holm level, ALPHA / PLANNED_LOOKS, is above MARGIN); or
    * the next look would take more than ``seconds`` of CPU for this cell and run.

    The stopping rule only decides when to stop; the p-value (PLANNED_LOOKS times the smallest
    look's) is valid for any rule. dpcore's first-look releases may come from ``shared`` (the
    same dpcore variant on the same cell for the other peer)."""
    truth = truth_of(cell.variant, x, x2)
    ours_fn = contenders["dpcore"][cell.variant](x, x2, cell.epsilon)
    theirs_fn = contenders[cell.peer][cell.peer_variant](x, x2, cell.epsilon)
    ours, theirs = np.empty(0), np.empty(0)
    spent = [0.0, 0.0]
    z_loose = sps.norm.isf(ALPHA / PLANNED_LOOKS)
    for k, (r, r_peer) in enumerate(looks):
        look_seq, boot_seq = seed_seq.spawn(2)
        seeds_ours, seeds_theirs = new_seeds(look_seq, r - ours.size, r_peer - theirs.size)
        key = (cell.dataset, cell.n, cell.epsilon, cell.variant, r)
        if k == 0 and shared is not None and key in shared:
            more, t = shared[key]
        else:
            more, t = draw_losses(ours_fn, cell.variant, seeds_ours, truth)
            if k == 0 and shared is not None:
                shared[key] = more, t
        ours, spent[0] = np.concatenate([ours, more]), spent[0] + t
        more, t = draw_losses(theirs_fn, cell.variant, seeds_theirs, truth)
        theirs, spent[1] = np.concatenate([theirs, more]), spent[1] + t
        ours_m, theirs_m, lr, se, p = evaluate(cell.variant, ours, theirs, boot_seq)
        cell.looks += 1
        if p <= cell.p_min or cell.looks == 1:  # the look the verdict is read from
            cell.p_min = min(cell.p_min, p)
            cell.ours, cell.theirs, cell.log_ratio, cell.se = ours_m, theirs_m, lr, se
            cell.releases, cell.extra["peer_releases"] = r, r_peer
        if PLANNED_LOOKS * cell.p_min <= ALPHA / m or k + 1 == len(looks):
            break
        if lr - z_loose * se > math.log(MARGIN):
            break
        next_r, next_peer = looks[k + 1]
        per_ours, per_theirs = spent[0] / r, spent[1] / r_peer
        if (next_r - r) * per_ours + (next_peer - r_peer) * per_theirs + sum(spent) > seconds:
            break
    cell.seconds = sum(spent)
    cell.extra["per_release"] = (spent[0] / ours.size, spent[1] / theirs.size)
    cell.p_value = min(1.0, PLANNED_LOOKS * cell.p_min)


def looks_for(variant, n, peer, quick):
    """Cumulative (dpcore, peer) releases at each look: LOOKS, the peer's scaled down where a
    release is slow (diffprivlib's quantiles and median at n = 10**5: about 0.3 s and 0.06 s
    of CPU a release, so SLOW_PEER_SHARE of dpcore's)."""
    if quick:
        return [(100, 100)]
    slow = peer == "diffprivlib" and variant in ("quantiles", "median") and n >= 100_000
    return [(r, int(r * SLOW_PEER_SHARE) if slow else r) for r in LOOKS]


def holm(cells, m=None):
    """Holm's step-down over the verdict cells: passes, and the upper bound of the ratio at each
    cell's level (read from the look with the smallest p-value, at level / PLANNED_LOOKS).

    ``m`` larger than the number of cells given (a subset of a run): every level is at most the
    full run's Holm level of the same cell (its rank among all cells is at least its rank here),
    so every cell above its own full-run level gets its re-run (which only decides re-runs: all
    looks are within the Bonferroni budget); the verdict is then taken by Holm over all the
    cells (``--merge``), or by Bonferroni at the full m over a partial set."""
    tested = sorted((c for c in cells if c.verdict), key=lambda c: c.p_value)
    m, still = (len(tested) if m is None else m), True
    for rank, c in enumerate(tested):
        level = ALPHA / (m - rank)
        still = still and c.p_value <= level
        c.passed = still
        c.bound = math.exp(min(c.log_ratio + sps.norm.isf(level / PLANNED_LOOKS) * c.se, 50.0))


# ------------------------------------------------------------------------------------------------
# the private-n derivations (formulas; the user guide has the algebra)


def private_n_table(x, n, eps):
    """First-order RMSEs of the mean and the variance (Laplace) for these data."""
    h, c = (UPPER - LOWER) / 2, (UPPER + LOWER) / 2
    z = (x - LOWER) / (UPPER - LOWER)
    m1 = x.mean() - c
    rows = {}
    # mean: Bernstein pair; oracle split of (count, centred sum); equal split; OpenDP public n
    bern = 2 * math.sqrt(h**2 + m1**2) / (eps * n)
    oracle = math.sqrt(2 * (h ** (2 / 3) + abs(m1) ** (2 / 3)) ** 3) / (eps * n)
    equal = math.sqrt(8 * (h**2 + m1**2)) / (eps * n)
    rows["mean"] = (bern, oracle, equal, 2 * math.sqrt(2) * h / (eps * n))
    mz, vz = z.mean(), z.var()
    w = np.array([mz * mz - vz, mz * mz - mz - vz, (1 - mz) ** 2 - vz])
    bern = (UPPER - LOWER) ** 2 * math.sqrt(2 * np.sum(w * w)) / (eps * n)
    # centred t in [-1, 1]: count (1), sum (h), squares (h**2): error n dV = e2 - 2 m e1 +
    # (m**2 - v) eN with Laplace scales h**2/e2, h/e1, 1/eN (t units times h**2)
    t = (x - c) / h
    mt, vt = t.mean(), t.var()
    coef = np.array([1.0, 2 * abs(mt), abs(mt * mt - vt)])  # per unit budget, in h**2 units
    oracle = h**2 * math.sqrt(2 * np.sum(coef ** (2 / 3)) ** 3) / (eps * n)
    equal = h**2 * math.sqrt(2 * 9 * np.sum(coef**2)) / (eps * n)
    rows["var"] = (bern, oracle, equal, math.sqrt(2) * (UPPER - LOWER) ** 2 / (eps * n))
    return rows


# ------------------------------------------------------------------------------------------------
# the median's exact output laws (--median-laws): where dpcore's median and OpenDP's differ


def median_em_law(x, eps):
    """dpcore's default median on ``x``: the exponential mechanism on its finest grid (2**k + 1
    points, k = 52 here: spacing 20 * 2**-52), whose law is the continuous one up to that
    rounding: the interval with r records to its left has probability proportional to its
    length times exp(-eps |r - n/2|), and the output is uniform inside it. Returns the edges
    and the probabilities of the n + 1 intervals."""
    z = np.sort(x)
    edges = np.concatenate([[LOWER], z, [UPPER]])
    lengths = np.diff(edges)
    with np.errstate(divide="ignore"):
        logw = np.log(lengths) - eps * np.abs(np.arange(z.size + 1) - z.size / 2)
    w = np.exp(logw - logw.max())
    return edges, w / w.sum()


def flip_law(scores):
    """Permute-and-flip's law over candidates with scores s_j (in noise units): candidate j
    flips heads with p_j = exp(s_j - max s) and the answer is uniform among the heads, so
    P(j) = p_j E[1 / (1 + heads among the others)] = p_j int_0^1 prod_{k != j} (1 - p_k s) ds.
    Gauss-Legendre quadrature (32 nodes on each of 40 geometric pieces of [0, 1]) over the
    distinct scores; the probabilities sum to 1 within 1e-9 (checked)."""
    values, index, counts = np.unique(scores, return_inverse=True, return_counts=True)
    p = np.exp(values - values[-1])
    nodes, weights = np.polynomial.legendre.leggauss(32)
    cuts = np.concatenate([[0.0], 2.0 ** np.arange(-39, 1)])
    half = np.diff(cuts)[:, None] / 2
    s = (cuts[:-1, None] + half * (nodes + 1)).ravel()
    ds = (half * weights).ravel()
    logs = np.log1p(-np.outer(s, p))  # log(1 - p_k s), finite: s < 1
    total = logs @ counts
    law = p * (np.exp(total[:, None] - logs).T @ ds)
    probs = law[index]
    if abs(probs.sum() - 1.0) > 1e-9:
        raise AssertionError(f"quadrature of permute-and-flip's law: total {probs.sum()!r}")
    return probs


def opendp_median_law(x, eps, points):
    """OpenDP's median over ``points``: make_quantile_score_candidates (score |#{x < g} -
    #{x > g}|, sensitivity 1) then noisy_max with exponential noise at scale 2 / eps (its
    binary search at d_in = 1, d_out = eps), i.e. permute-and-flip on -(eps / 2) score."""
    z = np.sort(x)
    below = np.searchsorted(z, points, side="left")
    above = z.size - np.searchsorted(z, points, side="right")
    return flip_law(-(eps / 2) * np.abs(below - above).astype(float))


def median_law_rows(x, eps, offsets=8):
    """Exact RMSE decomposition of dpcore's median and OpenDP's on ``x`` at ``eps``."""
    z, n = np.sort(x), x.size
    truth = float(np.median(x))
    edges, p = median_em_law(x, eps)
    a, b = edges[:-1] - truth, edges[1:] - truth
    mse_em = float(np.sum(p * (a * a + a * b + b * b) / 3))
    bias_em = float(np.sum(p * (a + b) / 2))
    within = float(np.sum(p * (b - a) ** 2 / 12))
    # the records per unit near the median, and the noise scale 1 / eps ranks in those units
    lo, hi = z[int(n / 2 - 0.1 * n)], z[int(n / 2 + 0.1 * n) - 1]
    scale = 1 / (eps * 0.2 * n / (hi - lo))
    # only points within 80 noise scales (in ranks) of the median carry mass worth counting
    reach = int(min(n / 2, 80 / eps))
    window = (z[n // 2 - reach] - 1e-9 if reach < n / 2 else LOWER,
              z[n // 2 + reach - 1] + 1e-9 if reach < n / 2 else UPPER)

    def flip_mse(step, offset):
        points = LOWER + (np.arange(math.floor(window[0] / step) - 1,
                                    math.ceil(window[1] / step) + 2) + offset) * step
        points = points[(points >= LOWER) & (points <= UPPER)]
        q = opendp_median_law(x, eps, points)
        return float(np.sum(q * (points - truth) ** 2)), float(np.sum(q * (points - truth)))

    step = (UPPER - LOWER) / (OPENDP_CANDIDATES - 1)
    mse_pf, bias_pf = flip_mse(step, 0.0)
    shifted = [flip_mse(step, k / offsets)[0] for k in range(offsets)]
    oracle = {m: np.mean([flip_mse(m * scale, k / offsets)[0] for k in range(offsets)])
              for m in (0.5, 1.0, 1.5, 2.0, 3.0)}
    best = min(oracle, key=oracle.get)
    return {"truth": truth, "step_in_scales": step / scale, "dpcore": math.sqrt(mse_em),
            "opendp": math.sqrt(mse_pf), "ratio": math.sqrt(mse_em / mse_pf),
            "bias2_dpcore": bias_em**2 / mse_em, "bias2_opendp": bias_pf**2 / mse_pf,
            "within_dpcore": within / mse_em,
            "ratio_offsets": (math.sqrt(mse_em / max(shifted)), math.sqrt(mse_em / min(shifted)),
                              math.sqrt(mse_em / np.mean(shifted))),
            "oracle_step": best, "ratio_oracle": math.sqrt(mse_em / oracle[best])}


def print_median_laws(sizes, epsilons):
    print("Median, exact output laws on the benchmark's data (no releases): dpcore's default "
          "(exponential mechanism, finest grid) and OpenDP's permute-and-flip over 1001 "
          "points; a = OpenDP's grid step in noise scales (1 / epsilon ranks, at the data's "
          "density around the median)\n")
    print("| data | n | epsilon | a | dpcore RMSE | OpenDP RMSE | ratio | bias^2 share dpcore / "
          "OpenDP | ratio, OpenDP's grid shifted (min - mean - max over 8 offsets) | ratio to "
          "permute-and-flip at the oracle step (random offset) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dataset in ("skewed", "symmetric"):
        for n in sizes:
            x = make_data(dataset, n)[0]
            for eps in epsilons:
                r = median_law_rows(x, eps)
                lo_, hi_, mid = r["ratio_offsets"]
                print(f"| {dataset} | {n:,} | {eps:g} | {r['step_in_scales']:.3g} | "
                      f"{r['dpcore']:.4g} | {r['opendp']:.4g} | {r['ratio']:.3f} | "
                      f"{r['bias2_dpcore']:.1%} / {r['bias2_opendp']:.1%} | "
                      f"{lo_:.3f} - {mid:.3f} - {hi_:.3f} | {r['ratio_oracle']:.3f} "
                      f"(step {r['oracle_step']:g} scales) |", flush=True)


# ------------------------------------------------------------------------------------------------


def save(cells, path):
    """The cells so far as JSON (rewritten after every cell, so a stopped run leaves them)."""
    if path:
        with open(path, "w") as f:
            json.dump([{k: v for k, v in vars(c).items()} for c in cells], f, default=float)


def run(quick, seed, cell_seconds, only=None, json_path=None):
    contenders = {"dpcore": dpcore_contenders(), "OpenDP": opendp_contenders(),
                  "diffprivlib": diffprivlib_contenders()}
    sizes = (1_000,) if quick else SIZES
    epsilons = (0.5, 5.0) if quick else EPSILONS
    root = np.random.SeedSequence(seed)
    cells, data = [], {}
    for dataset in ("skewed", "symmetric"):
        for n in sizes:
            data[dataset, n] = make_data(dataset, n)
            for eps in epsilons:
                for variant, peer, peer_variant, relation, verdict in PAIRINGS:
                    cells.append(Cell(dataset, n, eps, variant, peer, peer_variant, relation,
                                      verdict))
    seeds = root.spawn(2 * len(cells))  # the run's and the re-run's, fixed per cell position
    if only:  # a subset (development); m stays the full run's number of verdict cells
        keep = [i for i, c in enumerate(cells) if re.search(only, cell_name(c))]
        m = sum(c.verdict for c in cells)
        cells, seeds = [cells[i] for i in keep], ([seeds[i] for i in keep] +
                                                  [seeds[len(seeds) // 2 + i] for i in keep])
    else:
        m = sum(c.verdict for c in cells)
    shared = {}
    for i, cell in enumerate(cells):
        x, x2 = data[cell.dataset, cell.n]
        looks = looks_for(cell.variant, cell.n, cell.peer, quick)
        sequential(cell, x, x2, contenders, seeds[i], looks if cell.verdict else looks[:1], m,
                   cell_seconds, shared)
        print(f"[{i + 1}/{len(cells)}] {cell_name(cell)}: {math.exp(cell.log_ratio):.3f} "
              f"p={cell.p_value:.2g} {cell.releases}/{cell.extra['peer_releases']} releases, "
              f"{cell.looks} looks ({cell.seconds:.1f} s)", file=sys.stderr, flush=True)
        save(cells[:i + 1], json_path)
    holm(cells, m)
    failed = [c for c in cells if c.verdict and not c.passed]
    for j, cell in enumerate(failed):  # once, with new seeds: looks 4 to 6 of the cell
        x, x2 = data[cell.dataset, cell.n]
        sequential(cell, x, x2, contenders, seeds[len(cells) + cells.index(cell)],
                   looks_for(cell.variant, cell.n, cell.peer, quick), m, cell_seconds)
        cell.rerun = True
        print(f"[rerun {j + 1}/{len(failed)}] {cell_name(cell)}: "
              f"{math.exp(cell.log_ratio):.3f} p={cell.p_value:.2g} "
              f"{cell.releases}/{cell.extra['peer_releases']} releases, {cell.looks} looks "
              f"({cell.seconds:.1f} s)", file=sys.stderr, flush=True)
        save(cells, json_path)
    if failed:
        holm(cells, m)
    return cells, data, sizes, epsilons


def merge(paths):
    """The cells of subset runs (``--json`` files of ``--only`` runs, or of a stopped run), with
    Holm over all of them. A cell in a later file replaces the same cell of an earlier one (a
    subset re-run with new seeds after a change of dpcore's default)."""
    by_name = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                cell = Cell(**row)
                by_name[cell_name(cell)] = cell
    cells = list(by_name.values())
    # Holm at the full run's m: a missing cell counts as a p-value of 1 (valid for a partial set)
    holm(cells, m=2 * len(SIZES) * len(EPSILONS) * sum(p[-1] for p in PAIRINGS))
    sizes = tuple(sorted({c.n for c in cells}))
    data = {(d, n): make_data(d, n) for d in ("skewed", "symmetric") for n in sizes}
    return cells, data, sizes, tuple(sorted({c.epsilon for c in cells}))


def cell_name(c):
    return f"{c.dataset} n={c.n} eps={c.epsilon:g} {c.variant} vs {c.peer}"


def print_tables(cells, data, sizes, epsilons, quick):
    print("| statistic | peer | relation, public inputs | data | n | epsilon | releases (dpcore/peer) | dpcore | "
          "peer | ratio | Holm upper bound | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        if c.verdict:
            verdict = ("pass" if c.passed else "FAIL") + (" (rerun)" if c.rerun else "")
            bound = f"{c.bound:.3f}"
        else:
            verdict = "info"
            bound = f"(95%: {math.exp(min(c.log_ratio + 1.645 * c.se, 50.0)):.3f})"
        name = c.variant if c.variant == c.peer_variant else f"{c.variant} vs {c.peer_variant}"
        print(f"| {name} | {c.peer} | {c.relation} | {c.dataset} | {c.n:,} | {c.epsilon:g} | "
              f"{c.releases:,}/{c.extra['peer_releases']:,} | {c.ours:.4g} | {c.theirs:.4g} | {math.exp(c.log_ratio):.3f} | {bound} | "
              f"{verdict} |")
    tested = [c for c in cells if c.verdict]
    print(f"\n{sum(bool(c.passed) for c in tested)} of {len(tested)} verdict cells pass "
          f"(Holm, one-sided {100 * (1 - ALPHA):.0f}%, margin {MARGIN}); "
          f"{sum(c.rerun for c in tested)} re-run once."
          + (" Quick run: a smoke test, not evidence." if quick else ""))
    print("\nPer pairing:\n")
    print("| statistic | peer | relation, public inputs | cells | pass | ratio dpcore/peer "
          "(min - median - max) | n = 10^5: pass | releases per side (median, max) |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, peer, peer_variant, relation, verdict in PAIRINGS:
        group = [c for c in cells if (c.variant, c.peer, c.peer_variant) ==
                 (variant, peer, peer_variant)]
        if not group:
            continue
        ratios = [math.exp(c.log_ratio) for c in group]
        big = [c for c in group if c.n >= 100_000]
        name = variant if variant == peer_variant else f"{variant} vs {peer_variant}"
        passed = sum(bool(c.passed) for c in group) if verdict else "info"
        big_pass = f"{sum(bool(c.passed) for c in big)} of {len(big)}" if verdict else "info"
        releases = [c.releases for c in group]
        print(f"| {name} | {peer} | {relation} | {len(group)} | {passed} | "
              f"{min(ratios):.2f} - {np.median(ratios):.2f} - {max(ratios):.2f} | {big_pass} | "
              f"{int(np.median(releases)):,}, {max(releases):,} |")
    print("\nPrivate n (Laplace, first-order RMSE from the data; measured = dpcore's default):\n")
    print("| statistic | data | n | epsilon | measured | derived optimum (Bernstein) | "
          "measured / derived | oracle split | equal split (before) | OpenDP public n |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    measured = {(c.variant, c.dataset, c.n, c.epsilon): c.ours for c in cells
                if c.variant in ("mean", "var") and not c.verdict}
    for (variant, dataset, n, eps), value in measured.items():
        x = data[dataset, n][0]
        bern, oracle, equal, opendp = private_n_table(x, n, eps)[variant]
        print(f"| {variant} | {dataset} | {n:,} | {eps:g} | {value:.4g} | {bern:.4g} | "
              f"{value / bern:.3f} | {oracle:.4g} | {equal:.4g} | {opendp:.4g} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description="dpcore.stats against OpenDP and diffprivlib")
    parser.add_argument("--quick", action="store_true", help="a smoke run (n = 1000, 2 epsilons)")
    parser.add_argument("--seed", type=int, default=2711, help="root of the noise seeds")
    parser.add_argument("--cell-seconds", type=float, default=6.0,
                        help="CPU-time cap of one run of a cell (both sides) for further looks")
    parser.add_argument("--only", default=None,
                        help="regular expression on 'data n=N eps=E variant vs peer' (a subset)")
    parser.add_argument("--json", default=None,
                        help="also write the cells to this JSON file (after every cell)")
    parser.add_argument("--median-laws", action="store_true",
                        help="the median's exact output laws against OpenDP's (no releases)")
    parser.add_argument("--merge", nargs="+", default=None,
                        help="JSON files of subset runs: Holm over all their cells, the tables")
    args = parser.parse_args(argv)
    start = time.process_time()
    if args.median_laws:
        print_median_laws((1_000,) if args.quick else SIZES, EPSILONS)
        return
    if args.merge:
        cells, data, sizes, epsilons = merge(args.merge)
    else:
        cells, data, sizes, epsilons = run(args.quick, args.seed, args.cell_seconds, args.only,
                                           args.json)
    print_tables(cells, data, sizes, epsilons, args.quick)
    print(f"\n({time.process_time() - start:.0f} s of CPU)")
    save(cells, args.json)


if __name__ == "__main__":
    main()
