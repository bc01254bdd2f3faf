"""The continuous Gaussian mechanism's exact (epsilon, delta) condition (Balle-Wang 2018): delta
for a sigma, and the smallest sigma for a delta.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math

from dpcore import _validation as check
from dpcore.calibration._common import _REL_MARGIN, _bisect_smallest, _exp_up

__all__ = ["analytic_gaussian_delta", "analytic_gaussian_sigma"]


def _neg_erfcx_prime(x: float) -> float:
    """-erfcx'(x) = 2/sqrt(pi) - 2 x erfcx(x) (> 0)."""
    from scipy.special import erfcx  # lazily: importing scipy takes 0.3 s
    return 2.0 / math.sqrt(math.pi) - 2.0 * x * float(erfcx(x))


def _agm_log_delta(s: float, epsilon: float) -> float:
    """log of delta(eps) for N(0, s**2) noise and sensitivity 1 (before the safety margin).

    delta = Phi(a) - e^eps Phi(b), a = 1/(2s) - eps s, b = -1/(2s) - eps s.
    """
    from scipy.special import erfcx, log_ndtr  # lazily: importing scipy takes 0.3 s
    a = 0.5 / s - epsilon * s
    if a >= 0.0:
        # Phi(a) >= 1/2: log space, no severe cancellation here.
        la = float(log_ndtr(a))
        lb = float(log_ndtr(-0.5 / s - epsilon * s))
        d = epsilon + lb - la
        if d >= 0.0:  # cannot happen mathematically; fall back to delta <= Phi(a)
            return la
        return la + math.log(-math.expm1(d))
    # a < 0: with A = -a, B = -b and e^eps phi(B) = phi(A) (B**2 - A**2 = 2 eps exactly),
    # delta = exp(-A**2/2) / 2 * (erfcx(A/sqrt2) - erfcx(B/sqrt2)).
    big_a = -a
    ap = big_a / math.sqrt(2.0)
    h = 1.0 / (s * math.sqrt(2.0))  # B/sqrt2 - A/sqrt2
    bp = ap + h
    if h > 1e-4 * ap:
        diff = float(erfcx(ap)) - float(erfcx(bp))
    else:
        # erfcx is completely monotone (a Laplace transform of a positive function), so
        # g = -erfcx' = 2/sqrt(pi) - 2 x erfcx(x) is positive and convex, and the trapezoid rule
        # over-estimates its integral: erfcx(A') - erfcx(B') <= h (g(A') + g(B')) / 2
        # (relative excess about (h/A')**2 / 2 <= 5e-9).
        diff = 0.5 * h * (_neg_erfcx_prime(ap) + _neg_erfcx_prime(bp))
    if diff <= 0.0:  # rounding only; delta <= Phi(a) always
        return float(log_ndtr(a))
    return -0.5 * big_a * big_a + math.log(0.5) + math.log(diff)


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Exact delta of the continuous Gaussian mechanism at ``epsilon`` (Balle-Wang).

    Parameters
    ----------
    sigma : float
        Standard deviation of the Gaussian noise, > 0.
    epsilon : float
        Privacy parameter, >= 0.
    sensitivity : float
        L2 sensitivity Delta, > 0.

    Returns
    -------
    float
        Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta),
        evaluated in log space / with scaled complementary error functions, then increased by a
        relative 2**-30 safety margin (never below the exact value). In (0, 1].

    Notes
    -----
    Adding N(0, sigma**2 I) to a query of L2 sensitivity Delta is (eps, delta)-DP if and only if
    delta >= this value [BW18]. For ``a = Delta/(2 sigma) - eps sigma/Delta < 0`` the value is
    computed as exp(-a**2/2)/2 * (erfcx(-a/sqrt2) - erfcx(-b/sqrt2)), which avoids the
    exponentially large factor e^eps; when the two erfcx arguments are very close, the
    difference is bounded above by the trapezoid rule on -erfcx', which is convex because erfcx
    is completely monotone.

    Examples
    --------
    >>> from dpcore import calibration
    >>> round(calibration.analytic_gaussian_delta(3.730632, 1.0, 1.0) * 1e5, 4)
    1.0
    """
    sigma = check.positive(sigma, "sigma")
    epsilon = check.nonnegative(epsilon, "epsilon")
    sensitivity = check.positive(sensitivity, "sensitivity")
    s = sigma / sensitivity
    if s == 0.0 or not math.isfinite(s):
        raise ValueError(f"sigma / sensitivity must be a positive finite number, got {s!r}")
    return _exp_up(_agm_log_delta(s, epsilon) + _REL_MARGIN)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Balle-Wang analytic Gaussian: the smallest sigma making N(0, sigma**2) (eps, delta)-DP.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0 (any size; the classical formula needs eps < 1, this one does not).
    delta : float
        Privacy parameter, 0 < delta < 1.
    sensitivity : float
        L2 sensitivity Delta, > 0.

    Returns
    -------
    float
        The smallest double sigma with ``analytic_gaussian_delta(sigma, epsilon, sensitivity)
        <= delta`` (which includes the 2**-30 relative safety margin).

    Notes
    -----
    Solves the exact condition of [BW18] (their Theorem 8) by bisection on sigma down to
    adjacent doubles. The condition is monotone in sigma, so this finds the same root as their
    Algorithm 1 (a reparametrisation of the same equation); every candidate is checked with the
    exact condition, and the returned sigma is one at which it was observed to hold.

    Examples
    --------
    >>> from dpcore import calibration
    >>> round(calibration.analytic_gaussian_sigma(1.0, 1e-5, 1.0), 6)
    3.730632
    >>> round(calibration.analytic_gaussian_sigma(0.5, 1e-6, 1.0), 6)
    8.057618
    """
    epsilon = check.positive(epsilon, "epsilon")
    delta = check.probability(delta, "delta")
    sensitivity = check.positive(sensitivity, "sensitivity")
    def holds(sigma):
        s = sigma / sensitivity
        if s == 0.0:
            return False
        if not math.isfinite(s):
            return True
        return analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta

    guess = sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    return _bisect_smallest(holds, guess, "sigma")
