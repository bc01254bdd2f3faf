"""Zero-concentrated DP conversions: the tight delta of rho-zCDP at an epsilon, the epsilon at a
delta, the rho that fits an (epsilon, delta) budget, and Bun-Steinke's simple bound.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math

import numpy as np

from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore.calibration._common import ETA, _TINY, _exp_up, _inflate

__all__ = ["zcdp_delta", "zcdp_epsilon", "zcdp_epsilon_simple", "zcdp_rho_for"]

# The parameters the conversions share (docstring pieces, :func:`dpcore._docstrings.fill`).
_RHO = """\
rho : float
    zCDP parameter, > 0."""
_DELTA = """\
delta : float
    0 < delta < 1."""


def _zcdp_log_delta_at(x, rho, epsilon):
    """log delta(eps) for rho-zCDP at alpha = 1 + x, and a bound on its rounding error."""
    # (alpha - 1)(alpha rho - eps) - log(alpha - 1) + alpha log(1 - 1/alpha)
    t1 = x * ((1.0 + x) * rho - epsilon)
    t2 = -math.log(x)
    t3 = -(1.0 + x) * math.log1p(1.0 / x)
    value = t1 + t2 + t3
    err = 16.0 * ETA * (abs(x * ((1.0 + x) * rho)) + abs(x * epsilon) + abs(t2) + abs(t3))
    return value, err


@fill(rho=_RHO)
def zcdp_delta(rho: float, epsilon: float) -> float:
    """Tight delta(eps) of a rho-zCDP mechanism (Canonne-Kamath-Steinke).

    Parameters
    ----------
    {rho}
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


@fill(rho=_RHO, delta=_DELTA)
def zcdp_epsilon(rho: float, delta: float) -> float:
    """Tight epsilon of a rho-zCDP mechanism at ``delta`` (rounded up).

    Parameters
    ----------
    {rho}
    {delta}

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


@fill(rho=_RHO, delta=_DELTA)
def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """The simple rho-zCDP conversion eps = rho + 2 sqrt(rho ln(1/delta)) (Bun-Steinke).

    Parameters
    ----------
    {rho}
    {delta}

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


@fill(delta=_DELTA)
def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose tight conversion gives ``zcdp_delta(rho, epsilon) <= delta``.

    Parameters
    ----------
    epsilon : float
        > 0.
    {delta}

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
