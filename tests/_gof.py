"""Goodness-of-fit helpers shared by the distribution tests (alpha fixed before the data, fixed seeds, power computed).

Every test states alpha before looking at data; with a fixed seed the outcome is deterministic,
and alpha is the chance that a correct sampler would fail for a random seed.
"""
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
