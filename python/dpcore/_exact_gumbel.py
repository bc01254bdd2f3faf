"""The exact Gumbel race's rational fallback (dpcore._select.ExactState): enclosures of
G(x) = -ln(-ln(1 - x)) over cells of a real uniform, refined with fresh random bits until a
comparison is decided. Called with the GIL (and the generator's lock, when the bits come from a
shared generator) by the selection kernel only, for the rare comparisons its proven double
enclosures leave open.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, SupportsInt

from dpcore import _exact

TWO_64 = 2**64
START_DIGITS = 40

#: A cell [lo, hi) of a real uniform in [0, 1].
Cell = tuple[Fraction, Fraction]
#: An enclosure (lower, upper) of G over a cell; None for an unbounded side.
Enclosure = tuple[Optional[Fraction], Optional[Fraction]]



def ln_bounds(x: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """(low, high) Fractions with low <= ln(x) <= high, x a positive rational."""
    value, error = _exact._ln_enclosure(Fraction(x), digits)
    return value - error, value + error


def g_point(x: Fraction, digits: int) -> tuple[Fraction, Fraction] | None:
    """(low, high) with low <= G(x) <= high for a rational x in (0, 1), or None when the
    precision does not separate E = -ln(1 - x) from 0."""
    lo1, hi1 = ln_bounds(1 - x, digits)
    e_lo, e_hi = -hi1, -lo1  # E = -ln(1 - x) in [e_lo, e_hi]
    if e_lo <= 0:
        return None
    lo_hi = ln_bounds(e_hi, digits)[1]
    lo_lo = ln_bounds(e_lo, digits)[0]
    return -lo_hi, -lo_lo


def gumbel_cell(cell: Cell, digits: int) -> Enclosure | None:
    """(low, high) enclosure of G over the cell [lo, hi); None for an infinite end, or None
    altogether when the precision is too low."""
    lo, hi = cell
    upper = None
    lower = None
    if lo > 0:
        p = g_point(lo, digits)
        if p is None:
            return None
        upper = p[1]
    if hi < 1:
        p = g_point(hi, digits)
        if p is None:
            return None
        lower = p[0]
    return lower, upper


def refine(cell: Cell, bits: _exact.Words) -> Cell:
    """The sub-cell picked by 64 fresh bits (one of 2**64 equal parts)."""
    lo, hi = cell
    width = (hi - lo) / TWO_64
    j = int(bits())
    return lo + width * j, lo + width * (j + 1)


def word_cell(w: SupportsInt) -> Cell:
    """The cell [w 2**-64, (w + 1) 2**-64) of a 64-bit word."""
    return Fraction(int(w), TWO_64), Fraction(int(w) + 1, TWO_64)


def decide(d: Fraction, cell_r: Cell, cell_b: Cell, bits: _exact.Words,
           enc_b: Enclosure | None = None
           ) -> tuple[bool, Cell, Cell, Enclosure | None, Enclosure | None]:
    """Whether d + G(R_r) > G(R_b) for real uniforms R_r, R_b in the cells, exactly.

    Returns (wins, cell_r, cell_b, enc_r, enc_b): the cells as refined (both refined together,
    candidate first, 64 fresh bits each, whenever the enclosures overlap) and the enclosures of G
    at the final precision. ``enc_b``, if given, is an enclosure of G over cell_b to use in the
    first round. A tie has probability zero, so the loop ends with probability one.
    """
    digits = START_DIGITS
    while True:
        enc_r = gumbel_cell(cell_r, digits)
        if enc_b is None:
            enc_b = gumbel_cell(cell_b, digits)
        if enc_r is not None and enc_b is not None:
            (lr, hr), (lb, hb) = enc_r, enc_b
            if lr is not None and hb is not None and d + lr > hb:
                return True, cell_r, cell_b, enc_r, enc_b
            if hr is not None and lb is not None and d + hr < lb:
                return False, cell_r, cell_b, enc_r, enc_b
        cell_r = refine(cell_r, bits)
        cell_b = refine(cell_b, bits)
        enc_b = None
        digits += 24  # each refinement narrows a cell by 2**-64 (19.3 digits)


def down(q: Fraction | None) -> float:
    """The largest double <= q (a Fraction), or -inf for None."""
    if q is None:
        return -math.inf
    x = float(q)
    if Fraction(x) > q:
        x = math.nextafter(x, -math.inf)
    return x


def up(q: Fraction | None) -> float:
    """The smallest double >= q (a Fraction), or inf for None."""
    if q is None:
        return math.inf
    x = float(q)
    if Fraction(x) < q:
        x = math.nextafter(x, math.inf)
    return x
