"""What the calibrations share: the unit roundoff, the safety margins of the special functions,
rounding up, and the bisection for the smallest safe noise scale.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["ETA"]


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
