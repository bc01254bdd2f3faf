"""Calibration and conversion math: noise scales from privacy parameters, and back.

Small pure-Python functions, one formula each, that the mechanisms and the accountant call and
that tests call directly. Every function rounds towards safety: a noise scale is never smaller,
and a reported epsilon or delta never smaller, than the exact mathematical value (up to the
documented relative margins that cover floating-point error in special functions).

* Snapping (Mironov 2012): :func:`snapping_scale`, :func:`snapping_grid`, :func:`snapping_epsilon`
  (exact rational arithmetic).
* Gaussian: :func:`analytic_gaussian_sigma`, :func:`analytic_gaussian_delta` (Balle-Wang exact
  condition for the continuous Gaussian); :func:`discrete_gaussian_sigma`,
  :func:`discrete_gaussian_delta` (Canonne-Kamath-Steinke exact delta for the discrete Gaussian).
* Zero-concentrated DP: :func:`zcdp_delta`, :func:`zcdp_epsilon`, :func:`zcdp_rho_for` (tight
  conversion) and :func:`zcdp_epsilon_simple` (Bun-Steinke).
* Composition: :func:`advanced_composition` (Dwork-Rothblum-Vadhan).
* :func:`laplace_scale`.

Privacy
-------
Nothing here touches data or draws randomness: the inputs are public parameters (epsilon, delta,
rho, sensitivities, bounds), so calling these functions releases nothing and spends no budget.
The guarantees they compute are stated by the mechanisms that use them.

References
----------
.. [Mir12] I. Mironov, "On significance of the least significant bits for differential
   privacy", CCS 2012.
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
   analytical calibration and optimal denoising", ICML 2018.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020.
.. [BS16] M. Bun, T. Steinke, "Concentrated differential privacy: simplifications, extensions,
   and lower bounds", TCC 2016.
.. [DRV10] C. Dwork, G. Rothblum, S. Vadhan, "Boosting and differential privacy", FOCS 2010.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_up as _round_up

__all__ = [
    "ETA",
    "laplace_scale",
    "snapping_scale",
    "snapping_grid",
    "snapping_epsilon",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_epsilon_simple",
    "zcdp_rho_for",
    "advanced_composition",
]

#: Unit roundoff of IEEE double precision, 2**-53 (Mironov's eta).
ETA = 2.0**-53
_FRAC_ETA = Fraction(1, 2**53)

# Relative margin added to every delta computed with floating-point special functions. It covers
# the rounding of log_ndtr / erfcx / exp (a few units of 2**-52 each, amplified at most ~1e4-fold
# by the cancellations the formulas below leave) with a wide safety factor, and it is far below
# any precision a caller can use.
_REL_MARGIN = 2.0**-30
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_TINY = math.ulp(0.0)  # smallest positive double: what an underflowed upper bound reports


# --------------------------------------------------------------------------------------------
# exact rounding helpers


def _inflate(x: float, rel: float = 2.0**-44) -> float:
    """x (>= 0) pushed up by a relative ``rel`` and one ulp: covers a few roundings."""
    return math.nextafter(x * (1.0 + rel), math.inf)


def _exp_up(log_value: float) -> float:
    """exp of an upper bound on a log probability, as an upper bound in (0, 1]."""
    if log_value >= 0.0:
        return 1.0
    return min(1.0, max(_inflate(math.exp(log_value)), _TINY))


# --------------------------------------------------------------------------------------------
# Laplace and snapping


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``sensitivity / epsilon``, rounded up to the next double.

    Parameters
    ----------
    sensitivity : float
        L1 sensitivity, > 0.
    epsilon : float
        Privacy parameter, > 0.

    Returns
    -------
    float
        The smallest double b with sensitivity / b <= epsilon exactly.

    Examples
    --------
    >>> from dpcore import calibration
    >>> calibration.laplace_scale(1.0, 0.5)
    2.0
    >>> from fractions import Fraction
    >>> b = calibration.laplace_scale(1.0, 0.3)
    >>> Fraction(1.0) / Fraction(b) <= Fraction(0.3)
    True
    """
    sensitivity = check.positive(sensitivity, "sensitivity")
    epsilon = check.positive(epsilon, "epsilon")
    return _round_up(Fraction(sensitivity) / Fraction(epsilon))


def _snapping_epsilon_exact(lam: float, bound: float) -> Fraction:
    return (1 + 12 * Fraction(bound) * _FRAC_ETA) / Fraction(lam) + 2 * _FRAC_ETA


def snapping_scale(epsilon: float, bound: float) -> float:
    """Mironov's snapping lambda for sensitivity 1: the smallest double meeting ``epsilon``.

    Parameters
    ----------
    epsilon : float
        Target privacy parameter, > 2 * 2**-53.
    bound : float
        Clamp bound B > 0 in units of the sensitivity.

    Returns
    -------
    float
        The smallest double lambda with (1 + 12 B eta) / lambda + 2 eta <= epsilon, eta = 2**-53,
        checked in exact rational arithmetic.

    Raises
    ------
    ValueError
        If ``epsilon <= 2 eta`` (no lambda can reach it), or if ``bound`` is outside the range
        lambda < B < 2**46 lambda that Mironov's theorem covers.

    Notes
    -----
    The general form of the guarantee is eps = (1 + 12 B eta) / lambda + 2 eta ([Mir12], last line
    of the proof of Theorem 1).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcore import calibration
    >>> lam = calibration.snapping_scale(1.0, 100.0)
    >>> eta = Fraction(1, 2**53)
    >>> (1 + 12 * 100 * eta) / Fraction(lam) + 2 * eta <= 1
    True
    >>> 1.0 < lam < 1.0 + 1e-12
    True
    """
    epsilon = check.positive(epsilon, "epsilon")
    bound = check.positive(bound, "bound")
    if epsilon <= 2.0 * ETA:
        raise ValueError(f"epsilon must be > 2 * 2**-53 for the snapping mechanism, got {epsilon!r}")
    target = Fraction(epsilon)
    lam = _round_up((1 + 12 * Fraction(bound) * _FRAC_ETA) / (target - 2 * _FRAC_ETA))
    while _snapping_epsilon_exact(lam, bound) > target:  # never taken after an exact round-up
        lam = math.nextafter(lam, math.inf)
    # The smallest double: step down while the exact condition still holds (at most one step).
    while lam > 0.0:
        lower = math.nextafter(lam, 0.0)
        if lower <= 0.0 or _snapping_epsilon_exact(lower, bound) > target:
            break
        lam = lower
    if not math.isfinite(lam):
        raise ValueError(f"epsilon={epsilon!r} and bound={bound!r} give an infinite snapping scale")
    if not (lam < bound < 2.0**46 * lam):
        raise ValueError(
            f"bound must satisfy lambda < bound < 2**46 * lambda (the range of Mironov's snapping "
            f"theorem), here lambda = {lam!r}; got bound={bound!r}"
        )
    return lam


def snapping_grid(lam: float) -> float:
    """The snapping grid Lambda: the smallest power of two >= ``lam`` (exact).

    Parameters
    ----------
    lam : float
        Snapping scale lambda, > 0.

    Returns
    -------
    float

    Examples
    --------
    >>> from dpcore import calibration
    >>> calibration.snapping_grid(3.0), calibration.snapping_grid(4.0), calibration.snapping_grid(0.3)
    (4.0, 4.0, 0.5)
    """
    lam = check.positive(lam, "lam")
    mantissa, exponent = math.frexp(lam)  # lam = mantissa * 2**exponent, mantissa in [0.5, 1)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def snapping_epsilon(lam: float, bound: float) -> float:
    """Effective epsilon of the snapping mechanism, (1 + 12 B eta) / lambda + 2 eta, rounded up.

    Parameters
    ----------
    lam : float
        Snapping scale lambda, > 0.
    bound : float
        Clamp bound B > 0 (sensitivity units).

    Returns
    -------
    float
        The smallest double >= the exact rational value.

    Examples
    --------
    >>> from dpcore import calibration
    >>> lam = calibration.snapping_scale(0.5, 10.0)
    >>> calibration.snapping_epsilon(lam, 10.0) <= 0.5
    True
    """
    lam = check.positive(lam, "lam")
    bound = check.positive(bound, "bound")
    return _round_up(_snapping_epsilon_exact(lam, bound))


# --------------------------------------------------------------------------------------------
# Continuous Gaussian (Balle-Wang)


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


def _bisect_smallest(holds, guess: float, name: str, rel_tol: float = 0.0) -> float:
    """Smallest positive double x (to ``rel_tol``) with holds(x), for a predicate that is false
    for small and true for large x. The result is always a point where holds() was observed."""
    lo = hi = guess
    if holds(guess):
        for _ in range(2200):
            lo = lo / 2.0
            if lo == 0.0:
                raise ValueError(f"no positive {name} found (the condition holds for any value)")
            if not holds(lo):
                break
            hi = lo
        else:  # pragma: no cover - the loop always ends by underflow
            raise ValueError(f"no bracket found for {name}")
    else:
        for _ in range(2200):
            hi = hi * 2.0
            if not math.isfinite(hi):
                raise ValueError(f"{name} would be infinite for these parameters")
            if holds(hi):
                break
            lo = hi
        else:  # pragma: no cover
            raise ValueError(f"no bracket found for {name}")
    # invariant: holds(hi), not holds(lo)
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi or hi - lo <= rel_tol * hi:
            return hi
        if holds(mid):
            hi = mid
        else:
            lo = mid


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


# --------------------------------------------------------------------------------------------
# Discrete Gaussian (Canonne-Kamath-Steinke Theorem 7)

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


# --------------------------------------------------------------------------------------------
# zCDP


def _zcdp_log_delta_at(x, rho, epsilon):
    """log delta(eps) for rho-zCDP at alpha = 1 + x, and a bound on its rounding error."""
    # (alpha - 1)(alpha rho - eps) - log(alpha - 1) + alpha log(1 - 1/alpha)
    t1 = x * ((1.0 + x) * rho - epsilon)
    t2 = -math.log(x)
    t3 = -(1.0 + x) * math.log1p(1.0 / x)
    value = t1 + t2 + t3
    err = 16.0 * ETA * (abs(x * ((1.0 + x) * rho)) + abs(x * epsilon) + abs(t2) + abs(t3))
    return value, err


def zcdp_delta(rho: float, epsilon: float) -> float:
    """Tight delta(eps) of a rho-zCDP mechanism (Canonne-Kamath-Steinke).

    Parameters
    ----------
    rho : float
        zCDP parameter, > 0.
    epsilon : float
        >= 0.

    Returns
    -------
    float
        inf over alpha > 1 of exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1 - 1/alpha)**alpha,
        in (0, 1], rounded up.

    Notes
    -----
    The logarithm of the bound is convex in alpha with derivative
    (2 alpha - 1) rho - eps + log(1 - 1/alpha), whose root is found with Brent's method on
    log(alpha - 1). Any alpha
    gives a valid bound, so an inexact minimiser only costs tightness; the evaluation at the
    minimiser is increased by a bound on its rounding error.

    Examples
    --------
    >>> from dpcore import calibration
    >>> d = calibration.zcdp_delta(0.025, 1.01407)
    >>> 0.99e-6 < d < 1.01e-6
    True
    """
    from scipy.optimize import brentq  # lazily: importing scipy takes 0.3 s
    rho = check.positive(rho, "rho")
    epsilon = check.nonnegative(epsilon, "epsilon")

    def slope(t):  # d/dalpha of the log bound at alpha = 1 + e^t (increasing in t)
        x = math.exp(t)
        return (2.0 * x + 1.0) * rho - epsilon - math.log1p(1.0 / x)

    t_hi = math.log((epsilon + 1.0) / (2.0 * rho) + 1.0)  # slope > 0 here
    t_lo = min(0.0, t_hi - 1.0)
    while slope(t_lo) > 0.0 and t_lo > -690.0:
        t_lo -= 10.0
    if slope(t_lo) > 0.0:
        t_star = t_lo
    else:
        t_star = brentq(slope, t_lo, t_hi, xtol=1e-14, rtol=8.0 * ETA, maxiter=500)
    value, err = _zcdp_log_delta_at(math.exp(t_star), rho, epsilon)
    return _exp_up(value + err)


def _bisect_between(holds, lo, hi, *, increasing):
    """Bisect between a failing and a verified point down to adjacent doubles; returns the
    verified end. ``increasing``: the condition holds above (True) or below (False) the root."""
    good, bad = (hi, lo) if increasing else (lo, hi)
    while True:
        mid = good + (bad - good) / 2.0
        if mid == good or mid == bad:
            return good
        if holds(mid):
            good = mid
        else:
            bad = mid


def _grid_then_refine(fun, lo, hi, num=741):
    """argmin and min of a function of t on [lo, hi]: coarse grid (``fun`` evaluated on a numpy
    array), then bounded Brent between the grid neighbours of the best point."""
    from scipy.optimize import minimize_scalar  # lazily: importing scipy takes 0.3 s
    grid = np.linspace(lo, hi, num)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        values = np.asarray(fun(grid), dtype=np.float64)
        values = np.where(np.isnan(values), np.inf, values)
        i = int(np.argmin(values))
        a, b = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, num - 1)])
        best_t, best = float(grid[i]), float(values[i])
        res = minimize_scalar(fun, bounds=(a, b), method="bounded", options={"xatol": 1e-12})
    if float(res.fun) < best:
        best_t, best = float(res.x), float(res.fun)
    return best_t, best


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Tight epsilon of a rho-zCDP mechanism at ``delta`` (rounded up).

    Parameters
    ----------
    rho : float
        zCDP parameter, > 0.
    delta : float
        0 < delta < 1.

    Returns
    -------
    float
        The smallest eps (up to a relative ~2**-40, on the safe side) with
        ``zcdp_delta(rho, eps) <= delta``.

    Notes
    -----
    For a fixed alpha the conversion solves in closed form for eps:
    eps(alpha) = alpha rho + log(1/delta)/(alpha-1) + log(alpha-1) - alpha log(alpha)/(alpha-1)
    (the same bound: Balle et al. 2020; Canonne-Kamath-Steinke 2020, conversion from concentrated DP), so the tight eps is its minimum over alpha, found by a grid
    and Brent's method on log(alpha-1). The candidate is then verified with :func:`zcdp_delta`
    and raised until the check passes, so the two functions are consistent.

    Examples
    --------
    >>> from dpcore import calibration
    >>> round(calibration.zcdp_epsilon(0.025, 1e-6), 5)
    1.01407
    >>> round(calibration.zcdp_epsilon_simple(0.025, 1e-6), 5)
    1.20039
    """
    rho = check.positive(rho, "rho")
    delta = check.probability(delta, "delta")
    log_inv_delta = -math.log(delta)

    def eps_of(t):  # scalar or array
        x = np.exp(t)
        return (1.0 + x) * rho + log_inv_delta / x + np.log(x) - (1.0 + x) * np.log1p(x) / x

    def holds(eps):
        return zcdp_delta(rho, eps) <= delta

    _, eps = _grid_then_refine(eps_of, -40.0, 700.0)
    eps = max(eps, 0.0)
    if holds(eps):
        return eps
    # Raise until verified, then bisect back to the smallest verified value (to ~1 ulp).
    lo, step = eps, 2.0**-44
    hi = max(eps * (1.0 + step), _TINY)
    while not holds(hi):
        lo, step = hi, step * 2.0
        hi = hi * (1.0 + step)
        if not math.isfinite(hi):  # pragma: no cover
            raise ArithmeticError("zCDP epsilon conversion failed its verification")
    return _bisect_between(holds, lo, hi, increasing=True)


def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """The simple rho-zCDP conversion eps = rho + 2 sqrt(rho ln(1/delta)) (Bun-Steinke).

    Parameters
    ----------
    rho : float
        > 0.
    delta : float
        0 < delta < 1.

    Returns
    -------
    float
        Always >= :func:`zcdp_epsilon`; kept for comparison and reporting.

    Examples
    --------
    >>> from dpcore import calibration
    >>> round(calibration.zcdp_epsilon_simple(0.5, 1e-5), 5)
    5.29853
    """
    rho = check.positive(rho, "rho")
    delta = check.probability(delta, "delta")
    return _inflate(rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose tight conversion gives ``zcdp_delta(rho, epsilon) <= delta``.

    Parameters
    ----------
    epsilon : float
        > 0.
    delta : float
        0 < delta < 1.

    Returns
    -------
    float
        rho, verified (safe side) and within a relative ~1e-13 of the largest such value.

    Notes
    -----
    For fixed alpha = 1 + x the condition is linear in rho:
    rho <= [log delta + x eps + log x + (1+x) log(1 + 1/x)] / (x (1 + x)); the maximum over x is
    found by a grid and Brent's method on log x. The result is verified in both directions
    (``zcdp_delta(rho, epsilon) <= delta`` and ``zcdp_epsilon(rho, delta) <= epsilon``, so that
    charging the returned rho to an accountant with budget (epsilon, delta) fits), lowering it
    by bisection to the largest verified value if rounding makes a check fail.

    Examples
    --------
    >>> from dpcore import calibration
    >>> rho = calibration.zcdp_rho_for(1.0, 1e-6)
    >>> calibration.zcdp_delta(rho, 1.0) <= 1e-6
    True
    >>> round(rho, 4)
    0.0244
    """
    epsilon = check.positive(epsilon, "epsilon")
    delta = check.probability(delta, "delta")
    log_delta = math.log(delta)

    def neg_rho_of(t):  # scalar or array
        x = np.exp(t)
        return -(log_delta + x * epsilon + np.log(x) + (1.0 + x) * np.log1p(1.0 / x)) / (x * (1.0 + x))

    def holds(rho):
        # both directions, so that rho_for and zcdp_epsilon round-trip: eps(rho) <= epsilon
        return zcdp_delta(rho, epsilon) <= delta and zcdp_epsilon(rho, delta) <= epsilon

    _, neg = _grid_then_refine(neg_rho_of, -40.0, 700.0)
    rho = -neg
    if not rho > 0.0:
        raise ValueError(f"no rho > 0 reaches epsilon={epsilon!r}, delta={delta!r}")
    if holds(rho):
        return rho
    # Lower until verified, then bisect back up to the largest verified value (to ~1 ulp).
    hi, step = rho, 2.0**-44
    lo = rho * (1.0 - step)
    while not holds(lo):
        hi, step = lo, min(step * 2.0, 0.5)
        lo = lo * (1.0 - step)
        if lo == 0.0:  # pragma: no cover
            raise ArithmeticError("zCDP rho calibration failed its verification")
    return _bisect_between(holds, lo, hi, increasing=False)


# --------------------------------------------------------------------------------------------
# composition


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float
                         ) -> tuple[float, float]:
    """Advanced composition of k adaptively chosen (eps, delta)-DP mechanisms (DRV 2010).

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, >= 0.
    delta : float
        Per-mechanism delta, 0 <= delta < 1.
    k : int
        Number of mechanisms, >= 1.
    delta_prime : float
        Extra failure probability of the composition, 0 < delta_prime < 1.

    Returns
    -------
    (float, float)
        (eps sqrt(2 k ln(1/delta')) + k eps (e^eps - 1), k delta + delta'), both rounded up
        (delta capped at 1). Basic composition, (k eps, k delta), may be smaller for few or large
        epsilons; the accountant takes the better one.

    Examples
    --------
    >>> from dpcore import calibration
    >>> eps, delta = calibration.advanced_composition(0.1, 0.0, 100, 1e-6)
    >>> round(eps, 3), delta
    (6.308, 1e-06)
    """
    epsilon = check.nonnegative(epsilon, "epsilon")
    delta = check.probability(delta, "delta", open_low=False)
    k = check.integer(k, "k", minimum=1)
    delta_prime = check.probability(delta_prime, "delta_prime")
    eps_total = epsilon * math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) + k * epsilon * math.expm1(epsilon)
    delta_total = min(1.0, _round_up(k * Fraction(delta) + Fraction(delta_prime)))
    return (_inflate(eps_total) if eps_total > 0 else 0.0), delta_total
