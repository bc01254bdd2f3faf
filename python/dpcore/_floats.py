"""Exact conversions between rationals and doubles, rounding in a chosen direction.

Privacy parameters and noise scales are computed as exact rationals and turned into doubles in
the safe direction: a noise scale or a reported epsilon is rounded up, a budget share down.

Privacy
-------
Pure arithmetic on public parameters: releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Union

#: An exact rational: a Fraction, an int or a double (read exactly).
Rational = Union[Fraction, int, float]

__all__ = ["GRID_BITS", "round_up", "round_down", "pow2_floor", "pow2_ceil"]

#: Automatic power-of-two grids put the noise scale at about 2**GRID_BITS grid units: rounding
#: to the grid moves a value by at most 2**-(GRID_BITS + 1) noise scales (a sum of 10**9 rounded
#: records by less than 1%), and the integer scales stay below the exact samplers' limits (2**40).
GRID_BITS = 36


def round_up(q: Rational) -> float:
    """The smallest double >= the rational q."""
    x = float(q)  # int / int true division: correctly rounded to nearest
    if Fraction(x) < q:
        x = math.nextafter(x, math.inf)
    return x


def round_down(q: Rational) -> float:
    """The largest double <= the rational q."""
    x = float(q)
    if Fraction(x) > q:
        x = math.nextafter(x, -math.inf)
    return x


def pow2_floor(x: float) -> float:
    """The largest power of two <= x (x > 0 and finite), exactly."""
    _, exponent = math.frexp(x)  # x = m 2**exponent, m in [0.5, 1)
    return math.ldexp(1.0, exponent - 1)


def pow2_ceil(x: float) -> float:
    """The smallest power of two >= x (x > 0 and finite), exactly."""
    mantissa, exponent = math.frexp(x)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)
