"""Goodness-of-fit helpers shared by the distribution tests (alpha fixed before the data, fixed seeds, power computed).

Every test states alpha before looking at data; with a fixed seed the outcome is deterministic,
and alpha is the chance that a correct sampler would fail for a random seed.
"""
import math
from contextlib import contextmanager

import numpy as np
from scipy import stats

ALPHA = 1e-4


def merge_sparse_bins(observed, expected, min_expected=5.0):
    """Merge adjacent bins (in order) until every expected count is >= min_expected."""
    obs_out, exp_out = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(observed, expected):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            obs_out.append(acc_o)
            exp_out.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0 or acc_o > 0:
        if exp_out:
            obs_out[-1] += acc_o
            exp_out[-1] += acc_e
        else:
            obs_out.append(acc_o)
            exp_out.append(acc_e)
    return np.array(obs_out), np.array(exp_out)


def chisquare_pvalue(observed, probabilities):
    """Chi-square p-value of counts against exact cell probabilities (summing to 1)."""
    observed = np.asarray(observed, dtype=float)
    probabilities = np.asarray(probabilities, dtype=float)
    assert abs(probabilities.sum() - 1.0) < 1e-9, probabilities.sum()
    obs, exp = merge_sparse_bins(observed, probabilities * observed.sum())
    assert len(obs) >= 2, "need at least two cells after merging"
    return stats.chisquare(obs, exp).pvalue


def integer_pvalue(samples, pmf, support, p_below=None):
    """Chi-square of integer samples against pmf on `support` (a contiguous int range); the
    mass below and above the support are one extra cell each (p_below defaults to half the
    missing mass, right for symmetric laws)."""
    support = np.asarray(support)
    probs = np.array([pmf(k) for k in support], dtype=float)
    missing = max(0.0, 1.0 - probs.sum())
    p_below = missing / 2 if p_below is None else p_below
    counts = np.array([np.sum(samples == k) for k in support], dtype=float)
    below = np.sum(samples < support[0])
    above = np.sum(samples > support[-1])
    observed = np.concatenate([[below], counts, [above]])
    p = np.concatenate([[p_below], probs, [max(0.0, missing - p_below)]])
    p = p / p.sum()
    return chisquare_pvalue(observed, p)


def z_score(estimate, exact, standard_error):
    return abs(estimate - exact) / standard_error


def z_critical(alpha=ALPHA, n_checks=1):
    """Two-sided critical value with a Bonferroni correction for n_checks parallel checks."""
    return stats.norm.isf(alpha / (2 * n_checks))


# -- exact laws of the integer noises (one definition each; vectorised in k) --------------------

def dlap_pmf(scale):
    """k -> P(Z = k) for Z ~ DLap(t), the discrete Laplace of scale t = ``scale``:
    P(k) = (1 - q) / (1 + q) q**|k| with q = exp(-1/t) (so P(k) is proportional to
    exp(-|k| / t), the law of dpcore.discrete_laplace(t)). ``k``: an int or an integer array.
    1 - q is computed as -expm1(-1/t), accurate for large t too."""
    q = math.exp(-1.0 / scale)
    c = -math.expm1(-1.0 / scale) / (1.0 + q)
    return lambda k: c * q ** np.abs(k)


def dgauss_pmf(sigma):
    """k -> P(Z = k) for Z ~ N_Z(0, sigma**2), the discrete Gaussian (Canonne-Kamath-Steinke):
    exp(-k**2 / (2 sigma**2)) / S, S the sum of those weights over all integers, summed here
    over |k| <= 40 sigma + 40 (every further weight is below exp(-800): zero in doubles).
    ``k``: an int or an integer array."""
    two_s2 = 2.0 * sigma * sigma
    tail = np.arange(1, int(40 * sigma) + 41, dtype=np.float64)
    norm = 1.0 + 2.0 * math.fsum(np.exp(-tail**2 / two_s2))
    return lambda k: np.exp(-np.square(np.asarray(k, dtype=np.float64)) / two_s2) / norm


@contextmanager
def exact_path(kernel):
    """Inside the block, ``kernel`` (``dpcore._noise`` or ``dpcore._select``) decides every draw
    on its exact slow path, so the law tests reach that path; the fast path is restored after."""
    kernel._force_exact_path(True)
    try:
        yield
    finally:
        kernel._force_exact_path(False)
