"""Exact slow paths behind the kernels' fast floating-point decisions.

The noise kernels decide "which integer is floor(-ln(u) * scale)", "is u < exp(-gamma)" and
"which double is ln(x) rounded to nearest" in double-double arithmetic with a proven error bound.
The rare draws that bound cannot decide come here and are decided exactly, so the output law is
exactly the promised one.

Every logarithm here comes from `decimal.Decimal.ln`, which the Python documentation specifies as
correctly rounded (round-half-even) at the context precision, so its error is below one unit in the
last digit; that gives a rigorous enclosure. All comparisons are then made on exact rationals, and
the precision doubles until the answer is decided (Ziv's strategy). Logarithms of rationals other
than 1 are irrational, so no comparison against a rational (an integer, a midpoint between doubles,
a rational gamma) can be a tie, and every loop ends.

A real uniform on a cell [lo, hi) is refined on demand: 64 fresh random bits pick one of 2**64
equal sub-cells. The sub-cell is uniform and the real uniform conditioned on it is uniform on it,
so nothing is redrawn and nothing is biased.
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Callable, SupportsInt, Union

__all__ = ["log_correctly_rounded", "floor_neglog_scaled", "positive_cell", "uniform_below_exp",
           "uniform_integer"]

START_DIGITS = 40
TWO_64 = 2**64
_ONE = Fraction(1)

#: An exact rational argument: a Fraction, an int or a double (read exactly).
Rational = Union[Fraction, int, float]
#: A source of uniformly random 64-bit words.
Words = Callable[[], SupportsInt]


def _context(digits: int) -> decimal.Context:
    return decimal.Context(
        prec=digits, rounding=decimal.ROUND_HALF_EVEN, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN
    )


def _ln_integer(n: int, digits: int) -> tuple[Fraction, Fraction]:
    """(value, error bound) as Fractions with |ln(n) - value| <= error, n >= 1 an integer."""
    if n == 1:
        return Fraction(0), Fraction(0)
    ln = decimal.Decimal(n).ln(_context(digits))
    # correctly rounded to `digits` digits: off by at most half a unit in the last digit
    return Fraction(ln), Fraction(10) ** (ln.adjusted() - digits + 1)


def _ln_enclosure(x: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """(value, error bound) with |ln(x) - value| <= error for a positive rational x."""
    v1, e1 = _ln_integer(x.numerator, digits)
    v2, e2 = _ln_integer(x.denominator, digits)
    return v1 - v2, e1 + e2


def log_correctly_rounded(x: float) -> float:
    """ln(x) rounded to the nearest double (ties to even), for a positive finite double x."""
    x = float(x)
    if not (x > 0.0 and math.isfinite(x)):
        raise ValueError(f"x must be a positive finite double, got {x!r}")
    if x == 1.0:
        return 0.0
    exact = Fraction(x)
    digits = START_DIGITS
    while True:
        value, error = _ln_enclosure(exact, digits)
        # Fraction -> float is int / int true division: correctly rounded to nearest even.
        low, high = float(value - error), float(value + error)
        if low == high:
            return low
        digits *= 2


def _neglog_sign(x: Fraction, target: Fraction) -> int:
    """The sign of -ln(x) - target (never 0 unless x == 1 and target == 0)."""
    if x == _ONE:
        return (target < 0) - (target > 0)
    digits = START_DIGITS
    while True:
        value, error = _ln_enclosure(x, digits)
        if -value - error > target:
            return 1
        if -value + error < target:
            return -1
        digits *= 2


def _floor_neglog_times(x: Fraction, scale: Fraction) -> int:
    """floor(-ln(x) * scale) exactly, for 0 < x <= 1 and scale > 0."""
    if x == _ONE:
        return 0
    digits = START_DIGITS + int(math.log10(float(scale)) + 1 if scale > 1 else 0)
    while True:
        value, error = _ln_enclosure(x, digits)
        low = math.floor((-value - error) * scale)
        if low == math.floor((-value + error) * scale):
            return low
        digits *= 2


def _refine(lo: Fraction, hi: Fraction, bits: Words) -> tuple[Fraction, Fraction]:
    """The sub-cell, one of 2**64 equal parts of [lo, hi), picked by 64 fresh random bits."""
    width = (hi - lo) / TWO_64
    j = int(bits())
    return lo + width * j, lo + width * (j + 1)


def floor_neglog_scaled(lo: Rational, hi: Rational, scale: Rational, bits: Words) -> int:
    """floor(-ln(u) * scale) for u a real uniform on the cell [lo, hi) inside (0, 1].

    Parameters
    ----------
    lo, hi : Fraction
        The cell, 0 < lo < hi <= 1.
    scale : Fraction
        > 0.
    bits : callable
        Returns uniformly random 64-bit integers (the caller holds the generator's lock).

    Returns
    -------
    int
        The value for the real uniform, exactly: a geometric draw with ratio exp(-1/scale) when
        the cell is U*'s (Mironov, CCS 2012, Section 5.2).
    """
    lo, hi, scale = Fraction(lo), Fraction(hi), Fraction(scale)
    while True:
        # -ln(u) * scale decreases in u: its value over (lo, hi) lies between those at the ends
        top = _floor_neglog_times(lo, scale)
        if _floor_neglog_times(hi, scale) == top:
            return top
        lo, hi = _refine(lo, hi, bits)


def uniform_below_exp(lo: Rational, hi: Rational, gamma: Rational, bits: Words) -> bool:
    """Whether u < exp(-gamma) for u a real uniform on the cell [lo, hi) inside (0, 1].

    That event has probability exp(-gamma) when the cell is U*'s: an exact
    Bernoulli(exp(-gamma)) draw for a rational gamma >= 0.
    """
    lo, hi, gamma = Fraction(lo), Fraction(hi), Fraction(gamma)
    if gamma == 0:
        return True  # u < 1
    while True:
        if _neglog_sign(hi, gamma) > 0:  # hi < exp(-gamma): the whole cell is below
            return True
        if _neglog_sign(lo, gamma) < 0:  # lo > exp(-gamma): the whole cell is above
            return False
        lo, hi = _refine(lo, hi, bits)


def positive_cell(word: Words) -> tuple[Fraction, Fraction]:
    """(lo, hi), 0 < lo < hi <= 1: the cell of width 2**-64k holding a real uniform, read from
    64-bit words (``word()``) and refined past 0 if needed."""
    num, bits = int(word()), 64
    while num == 0:
        num, bits = (num << 64) | int(word()), bits + 64
    return Fraction(num, 1 << bits), Fraction(num + 1, 1 << bits)


def uniform_integer(m: int, word: Words) -> int:
    """A uniform integer in [0, m) for an int m >= 1, from 64-bit words (rejection on
    bit_length(m - 1) bits: exact)."""
    bits = (m - 1).bit_length()
    while True:
        x, have = 0, 0
        while have < bits:
            x, have = (x << 64) | int(word()), have + 64
        x >>= have - bits
        if x < m:
            return x
