"""The discrete Gaussian's exact delta (Canonne-Kamath-Steinke 2020, Theorem 7), summed directly
or by Euler-Maclaurin with proven bounds, and the smallest sigma for a delta.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcore import _validation as check
from dpcore.calibration._common import ETA, _LOG_SQRT_2PI, _REL_MARGIN, _bisect_smallest, _exp_up
from dpcore.calibration._gaussian import analytic_gaussian_sigma

__all__ = ["discrete_gaussian_delta", "discrete_gaussian_sigma"]


# Direct summation is used while it needs at most this many terms; beyond, Euler-Maclaurin.
_DIRECT_TERMS = 1 << 17


def _log_normaliser_lower(sigma: float) -> float:
    """log of a lower bound on Z = sum_k exp(-k**2 / (2 sigma**2))."""
    # Poisson summation: Z = sqrt(2 pi) sigma * (1 + 2 sum_{m>=1} exp(-2 pi**2 sigma**2 m**2));
    # dropping terms gives lower bounds. Likewise for the direct sum over |k| <= 6.
    poisson = 1.0 + 2.0 * sum(math.exp(-2.0 * math.pi**2 * sigma * sigma * m * m) for m in range(1, 6))
    log_poisson = _LOG_SQRT_2PI + math.log(sigma) + math.log(poisson)
    direct = 1.0 + 2.0 * sum(math.exp(-k * k / (2.0 * sigma * sigma)) for k in range(1, 7))
    return max(log_poisson, math.log(direct)) - 8.0 * ETA * (1.0 + abs(log_poisson))


def _dg_direct(m: int, n: int, sigma: float, k_ref: int, factor: float):
    """Upper bound on sum_{k=m}^{n} w_k - factor * sum_{k>n} w_k, scaled by exp(k_ref**2/(2 s2)).

    w_k = exp(-k**2/(2 sigma**2)); the subtracted tail is truncated (only lowers it: safe)."""
    two_s2 = 2.0 * sigma * sigma
    d = n - m + 1
    # Tail length: stop once the weights fall below exp(-45) of the first tail weight.
    first = n + 1
    tail = int(math.isqrt(first * first + int(math.ceil(90.0 * sigma * sigma)) + 1) - first) + 2
    j = np.arange(d + tail, dtype=np.float64)
    # (k - k_ref) (k + k_ref) with k = m + j, in floating point (relative error ~1e-16 each)
    k = float(m) + j
    expo = (k - float(k_ref)) * (k + float(k_ref)) / two_s2
    w = np.exp(-expo)
    body = float(np.sum(w[:d]))
    tail_sum = float(np.sum(w[d:]))
    slack = 1e-12 * (body + factor * tail_sum) + 1e-300
    return body - factor * tail_sum + slack


def _dg_euler_maclaurin(m: int, n: int, sigma: float, k_ref: int, factor: float):
    """As :func:`_dg_direct`, by the Euler-Maclaurin formula with its rigorous remainder.

    For f(x) = exp(-x**2/(2 sigma**2)) and integers p <= q,
    sum_{k=p}^{q} f(k) = int_p^q f + (f(p) + f(q))/2 + (f'(q) - f'(p))/12 + R with
    |R| <= TV(f', [p, q]) / 12 (B_2 = 1/6, |B_2({x})| <= 1/6). f' changes monotonicity only at
    +-sigma, so the total variation is exact from its values there.
    """
    from scipy.special import erfcx, ndtr  # lazily: importing scipy takes 0.3 s
    s2 = sigma * sigma
    two_s2 = 2.0 * s2
    c = sigma * math.sqrt(0.5 * math.pi)
    k_ref_f = float(k_ref)

    def f(x):  # scaled weight f(x) / exp(-k_ref**2/(2 s2)), x a float
        if x == math.inf:
            return 0.0
        return math.exp(-((x - k_ref_f) * (x + k_ref_f)) / two_s2)

    def fprime(x):
        return 0.0 if x == math.inf else -(x / s2) * f(x)

    def upper_integral(x):  # int_x^inf f, scaled
        if x == math.inf:
            return 0.0
        if x >= 0.0:
            return c * float(erfcx(x / (sigma * math.sqrt(2.0)))) * f(x)
        # x < 0 only when k_ref = 0 (no scaling)
        return sigma * math.sqrt(2.0 * math.pi) * float(ndtr(-x / sigma))

    def tv_fprime(p, q):
        points = [p] + [t for t in (-sigma, sigma) if p < t < q] + [q]
        return sum(abs(fprime(points[i + 1]) - fprime(points[i])) for i in range(len(points) - 1))

    def sum_bounds(p, q):
        integral = upper_integral(p) - upper_integral(q)
        centre = integral + (f(p) + f(q)) / 2.0 + (fprime(q) - fprime(p)) / 12.0
        rem = tv_fprime(p, q) / 12.0
        scale = upper_integral(p) + f(p) + abs(fprime(p)) + rem
        return centre - rem, centre + rem, scale

    fm, fn = float(m), float(n)
    _, body_hi, scale_b = sum_bounds(fm, fn)
    tail_lo, _, scale_t = sum_bounds(fn + 1.0, math.inf)
    slack = 1e-12 * (scale_b + factor * scale_t) + 1e-300
    return body_hi - factor * max(tail_lo - 1e-12 * scale_t, 0.0) + slack


def _dg_log_delta(sigma2, epsilon, sensitivity, method=None):
    """log of the upper bound on the CKS delta (see :func:`discrete_gaussian_delta`).

    ``method`` (tests only): None chooses, ``"direct"`` or ``"euler-maclaurin"`` forces."""
    sigma = math.sqrt(sigma2)
    # thresholds in exact arithmetic: X > a and X > b = a + D with a = eps s2 / D - D / 2
    a = Fraction(epsilon) * Fraction(sigma2) / sensitivity - Fraction(sensitivity, 2)
    m = math.floor(a) + 1  # first integer > a
    n = m + sensitivity - 1  # last integer <= b; n >= 0 since b > 0
    k_ref = max(m, 0)  # the largest weight in [m, inf)
    log_ref = -(float(k_ref) / sigma) ** 2 / 2.0
    if log_ref < -1e5:  # delta < exp(-1e5): below every double
        return -math.inf
    factor = math.expm1(min(epsilon, 700.0))  # a smaller factor only raises the bound: safe
    if method is None:
        tail = 10.0 * sigma + 2.0
        method = "direct" if sensitivity + tail <= _DIRECT_TERMS else "euler-maclaurin"
    if method == "direct":
        numerator = _dg_direct(m, n, sigma, k_ref, factor)
    elif method == "euler-maclaurin":
        numerator = _dg_euler_maclaurin(m, n, sigma, k_ref, factor)
    else:
        raise ValueError(f"method must be 'direct' or 'euler-maclaurin', got {method!r}")
    if numerator <= 0.0:  # impossible for the exact value (delta > 0); keep a positive bound
        return -math.inf
    log_ref_up = log_ref + 8.0 * ETA * abs(log_ref)
    return math.log(numerator) + log_ref_up - _log_normaliser_lower(sigma) + _REL_MARGIN


def discrete_gaussian_delta(sigma2: float, epsilon: float, sensitivity: float) -> float:
    """Exact delta of the scalar discrete Gaussian N_Z(0, sigma2), rounded up (CKS Theorem 7).

    Parameters
    ----------
    sigma2 : float
        The parameter sigma**2 of N_Z(0, sigma2) (P(z) proportional to exp(-z**2/(2 sigma2))),
        > 0; values up to about 2**80 are handled.
    epsilon : float
        Privacy parameter, >= 0.
    sensitivity : int
        Integer sensitivity D >= 1 (grid units).

    Returns
    -------
    float
        An upper bound, in (0, 1], on
        delta = P[X > eps sigma2/D - D/2] - e^eps P[X > eps sigma2/D + D/2], X ~ N_Z(0, sigma2).
        Adding N_Z(0, sigma2) to an integer query with sensitivity D is (eps, delta)-DP.

    Notes
    -----
    With w_k = exp(-k**2/(2 sigma2)), integers m = floor(a) + 1 and n = m + D - 1 (a the first
    threshold, computed exactly with fractions) and Z the normaliser,
    delta = [sum_{k=m}^{n} w_k - (e^eps - 1) sum_{k>n} w_k] / Z. Every piece is bounded in the
    safe direction:

    * Z from below, by the Poisson summation formula Z = sqrt(2 pi sigma2) (1 + 2 sum_m
      exp(-2 pi**2 sigma2 m**2)) truncated (or the truncated direct sum for tiny sigma2).
    * When at most 2**17 terms are needed: direct summation; the subtracted tail is truncated
      after its weights fall below e^-45 of its first one (truncation only lowers it).
    * Otherwise (large sigma or D): the Euler-Maclaurin formula to first order for both sums,
      with its rigorous remainder |R| <= TV(f', [p, q]) / 12, evaluated with ``erfcx``; the
      remainder is about (a/sigma)**4 / sigma**2 of delta, so ~1e-6 at sigma ~ 1e4 and
      negligible at the sigma ~ 2**30 the mechanisms use. The bound converges to the continuous
      (Balle-Wang) delta as sigma and D grow with eps sigma/D fixed.
    * Floating-point error: an absolute slack of 1e-12 times the largest sum involved is added
      to the numerator, and a relative 2**-30 to the result.

    The result is never 0: an upper bound that underflows is reported as 2**-1074.

    Examples
    --------
    >>> from dpcore import calibration
    >>> round(calibration.discrete_gaussian_delta(4.0, 1.0, 1), 7)
    0.0072488
    >>> round(calibration.discrete_gaussian_delta(25.0, 0.5, 1) * 1e4, 5)
    4.97763
    """
    sigma2 = check.positive(sigma2, "sigma2")
    epsilon = check.nonnegative(epsilon, "epsilon")
    sensitivity = check.integer(sensitivity, "sensitivity", minimum=1)
    return _exp_up(_dg_log_delta(sigma2, epsilon, sensitivity))


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma (to a relative 2**-40) for which N_Z(0, sigma**2) is (eps, delta)-DP.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    delta : float
        Privacy parameter, 0 < delta < 1.
    sensitivity : int
        Integer sensitivity D >= 1 (grid units; may be ~2**30).

    Returns
    -------
    float
        sigma with ``discrete_gaussian_delta(sigma * sigma, epsilon, sensitivity) <= delta``
        (checked on the returned value), and the same condition fails at
        sigma * (1 - 2**-40) (up to non-monotonicity of the discrete privacy curve, see Notes).

    Notes
    -----
    Bisection on sigma between brackets found from the analytic Gaussian sigma. The discrete
    curve is continuous in sigma but is not proven monotone, so "smallest" is what bisection finds;
    the returned sigma always satisfies the condition (it is a point where it was verified).

    Examples
    --------
    >>> from dpcore import calibration
    >>> sigma = calibration.discrete_gaussian_sigma(1.0, 1e-5, 1)
    >>> calibration.discrete_gaussian_delta(sigma * sigma, 1.0, 1) <= 1e-5
    True
    """
    epsilon = check.positive(epsilon, "epsilon")
    delta = check.probability(delta, "delta")
    sensitivity = check.integer(sensitivity, "sensitivity", minimum=1)

    def holds(sigma):
        s2 = sigma * sigma
        if s2 == 0.0:
            return False
        if not math.isfinite(s2):
            return True
        return discrete_gaussian_delta(s2, epsilon, sensitivity) <= delta

    guess = analytic_gaussian_sigma(epsilon, delta, float(sensitivity))
    sigma = _bisect_smallest(holds, guess, "sigma", rel_tol=2.0**-40)
    if not holds(sigma):  # pragma: no cover - _bisect_smallest only returns verified points
        raise ArithmeticError("discrete Gaussian calibration failed its final check")
    return sigma
