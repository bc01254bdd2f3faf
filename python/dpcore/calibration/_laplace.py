"""Laplace and snapping (Mironov 2012): the noise scale for a sensitivity and epsilon, and the
snapping mechanism's scale, grid and effective epsilon in exact rational arithmetic.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction

from dpcore import _validation as check
from dpcore._floats import round_up as _round_up
from dpcore.calibration._common import ETA, _FRAC_ETA

__all__ = ["laplace_scale", "snapping_scale", "snapping_grid", "snapping_epsilon"]


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
