"""Smooth-sensitivity machinery shared by :mod:`dpcore.robust` and :mod:`dpcore.graph_stats`.

* **The public record grid** (:class:`_Grid`): records clipped to public bounds and rounded to
  the grid g = 2**floor(log2((upper - lower) 2**-SMOOTH_GRID_BITS)), in integer units, with the
  order-statistic helpers the smooth-sensitivity and propose-test-release bounds are built from.
* **Exact samplers on a grid**: clamp(floor(center + scale Z + 1/2), lo, hi) for Z with density
  proportional to 1 / (1 + z**4) (:func:`_draw_h4`) or standard Laplace (:func:`_draw_laplace`,
  :func:`_rounded_laplace`), decided in rational
  arithmetic on lazily refined uniforms made of fresh 64-bit words (``dpcore._random.Words64``,
  ``dpcore._exact``): each output law is exactly the one documented and floating point leaks
  nothing.
* **The calibration** of the smooth-sensitivity releases (:class:`SmoothMedianPlan`): the split
  of epsilon between the slide (alpha) and the dilation (beta) of the noise, for the pure
  1 / (1 + z**4) noise and the (epsilon, delta) Laplace noise (Nissim, Raskhodnikova, Smith 2007).

The public names are re-exported by :mod:`dpcore.robust`; nothing here reads private data
except through the functions that are given it.

Privacy
-------
Shared machinery, not a release: the calibrations hold for the releases built on them
(robust.median, trimmed_mean, PTR, graph counts), whose Privacy sections state the guarantee and
relation; nothing here charges budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcore import _exact
from dpcore import _validation as check
from dpcore._floats import pow2_floor as _pow2_floor
from dpcore._floats import round_down as _round_down
from dpcore.random import Words64

__all__ = ["SMOOTH_GRID_BITS", "MIN_SMOOTH_EPSILON", "MAX_SMOOTH_EPSILON", "LIPSCHITZ_H4",
           "SmoothMedianPlan"]

#: Records are rounded to a grid of 2**-SMOOTH_GRID_BITS of the bounds' width (and outputs lie
#: on it).
SMOOTH_GRID_BITS = 40
#: Smallest epsilon accepted by the smooth-sensitivity releases (keeps beta far above rounding).
MIN_SMOOTH_EPSILON = 2.0**-20
#: Largest epsilon accepted by them and by robust's other releases (keeps exp(epsilon) and the
#: calibration finite); the library-wide limit is ``dpcore._validation.MAX_EPSILON`` = 2**40.
MAX_SMOOTH_EPSILON = 2.0**10
#: Upper bound on sup_z 4 |z|**3 / (1 + z**4) = 3**(3/4) (the log-density's Lipschitz constant of
#: the noise law 1 / (1 + z**4)); 2.2796**4 >= 27 is checked in the tests.
LIPSCHITZ_H4 = Fraction(22796, 10000)
_MIN_DELTA = 2.0**-1000


# ------------------------------------------------------------------------------------------------
# validation and the public record grid


def _epsilon(epsilon):
    # the smooth-sensitivity calibrations are proven on [2**-20, 2**10]
    return check.epsilon(epsilon, minimum=MIN_SMOOTH_EPSILON, maximum=MAX_SMOOTH_EPSILON)


def _delta(delta):
    """delta in [2**-1000, 1): below 2**-1000 the tail bounds' floating-point margins (and
    1 / delta) stop being meaningful."""
    delta = check.probability(delta, "delta")
    if delta < _MIN_DELTA:
        raise ValueError(f"delta must be at least 2**-1000, got {delta!r}")
    return delta


def _records(x):
    records = check.finite_array(x, "x").reshape(-1)
    if records.size == 0:
        raise ValueError("x must contain at least one record")
    return records


@dataclass(frozen=True)
class _Grid:
    """The public grid of the bounds: records and outputs are integers in units of ``step``."""

    lower: float
    upper: float
    step: float  # a power of two
    lo: int  # rint(lower / step)
    hi: int  # rint(upper / step)

    @classmethod
    def of(cls, bounds, name="bounds"):
        lower, upper = check.bounds_pair(bounds, name)
        width = upper - lower
        if not (math.isfinite(width) and width >= 2.0**-900):
            raise ValueError(f"{name} must have a width (upper - lower) in [2**-900, 1e308], got "
                             f"({lower!r}, {upper!r})")
        if max(abs(lower), abs(upper)) >= 2.0**20 * width:  # keeps |units| < 2**61
            raise ValueError(f"{name} must satisfy max(|lower|, |upper|) < 2**20 (upper - lower) "
                             f"(shift the data towards 0), got ({lower!r}, {upper!r})")
        step = _pow2_floor(width * 2.0**-SMOOTH_GRID_BITS)
        # dividing by a power of two is exact: the grid ends are exact integers
        return cls(lower, upper, step, int(np.rint(lower / step)), int(np.rint(upper / step)))

    def units(self, records):
        """Clipped records in grid units, sorted (rint: half to even; monotone)."""
        scaled = np.clip(records, self.lower, self.upper) / self.step
        return np.sort(np.rint(scaled).astype(np.int64))

    def to_real(self, k):
        """Grid point k as a double within the bounds (post-processing)."""
        return min(max(float(Fraction(k) * Fraction(self.step)), self.lower), self.upper)


def _order_stats(units, grid, i):
    """x_i for an array of 1-based positions i, padded: the grid's ends below 1 and above n."""
    n = units.size
    inner = units[np.clip(i, 1, n) - 1]
    return np.where(i <= 0, grid.lo, np.where(i > n, grid.hi, inner))


def _exact_sum(units, lo):
    """The exact sum of int64 grid units (a Python int): shifted to >= 0, < 2**42 each, and
    summed in int64 chunks of 2**20 that cannot overflow."""
    shifted = units - np.int64(lo)
    chunk = 2**20
    return sum(int(np.sum(shifted[i:i + chunk], dtype=np.int64))
               for i in range(0, shifted.size, chunk)) + lo * shifted.size


def _trim_count(trim, n):
    trim = check.real(trim, "trim")
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim!r}")
    h = math.floor(Fraction(trim) * n)
    if n - 2 * h < 1:
        raise ValueError("trim removes every record; use a smaller trim")
    return h


# ------------------------------------------------------------------------------------------------
# exact noise on the grid


def _words(rng):
    """Fresh uniformly random 64-bit integers from the generator, one per call."""
    return Words64(rng)


class _Uniform:
    """A real uniform on [0, 1), known to lie in [num / 2**bits, (num + 1) / 2**bits) and refined
    on demand with fresh random words (the conditional law stays uniform: nothing is redrawn)."""

    __slots__ = ("num", "bits", "_word")

    def __init__(self, word):
        self.num, self.bits, self._word = 0, 0, word
        self.refine()

    def refine(self):
        self.num = (self.num << 64) | int(self._word())
        self.bits += 64

    @property
    def lo(self):
        return Fraction(self.num, 1 << self.bits)

    @property
    def hi(self):
        return Fraction(self.num + 1, 1 << self.bits)


def _icbrt(n):
    """floor(n ** (1/3)) for an integer n >= 0, exactly."""
    if n < 2:
        return n
    r = 1 << ((n.bit_length() + 2) // 3)  # >= the cube root
    while True:  # Newton's iteration from above decreases to the floor
        s = (2 * r + n // (r * r)) // 3
        if s >= r:
            return r
        r = s


def _h4_accept(tail, u, v):
    """Rejection step of the law proportional to 1 / (1 + z**4) on z >= 0 (envelope: 1 on [0, 1],
    z**-4 on (1, inf), masses 3/4 and 1/4). Core (z = u): accept when v (1 + u**4) < 1. Tail
    (z = u**(-1/3), density 3 z**-4): accept when v < z**4 / (1 + z**4), i.e.
    u**4 v**3 < (1 - v)**3. Decided exactly on the cells, refining until they do."""
    while True:
        if not tail:
            if v.hi * (1 + u.hi**4) <= 1:
                return True
            if v.lo * (1 + u.lo**4) >= 1:
                return False
        else:
            if u.hi**4 * v.hi**3 <= (1 - v.hi) ** 3:
                return True
            if u.lo**4 * v.lo**3 >= (1 - v.lo) ** 3:
                return False
        u.refine()
        v.refine()


def _cell(center, scale, z, lo, hi):
    """clamp(floor(center + scale z + 1/2), lo, hi) for a rational or infinite z."""
    if z == math.inf:
        return hi if scale > 0 else lo
    if z == -math.inf:
        return lo if scale > 0 else hi
    return min(max(math.floor(center + scale * z + Fraction(1, 2)), lo), hi)


def _draw_h4(center, scale, lo, hi, word):
    """clamp(floor(center + scale Z + 1/2), lo, hi) for Z with density (sqrt(2) / pi) / (1 + z**4),
    exactly (center an integer, scale > 0 rational, lo <= hi integers)."""
    while True:
        w = int(word())
        tail = (w & 3) == 3  # probability 1/4
        sign = 1 if (w >> 2) & 1 else -1
        u, v = _Uniform(word), _Uniform(word)
        if _h4_accept(tail, u, v):
            break
    signed = scale * sign
    while True:
        if not tail:
            z_small, z_large = u.lo, u.hi
        else:  # z = u**(-1/3) in [hi**(-1/3), lo**(-1/3)]; (q / p)**(1/3) = (q p**2)**(1/3) / p
            den = 1 << u.bits
            p = u.num + 1
            z_small = Fraction(_icbrt(den * p * p), p)
            p = u.num
            z_large = math.inf if p == 0 else Fraction(_icbrt(den * p * p) + 1, p)
        a = _cell(center, signed, z_small, lo, hi)
        if a == _cell(center, signed, z_large, lo, hi):
            return a
        u.refine()


def _draw_laplace(center, scale, lo, hi, word):
    """clamp(floor(center + scale L + 1/2), lo, hi) for L standard Laplace, exactly (center
    rational in [lo, hi], scale > 0 rational). L = sign * E, E ~ Exp(1): with k0 the cell of the
    centre and c = (k0 + 1/2 - center) / scale in (0, 1/scale] the distance to its upper end,
    E < c keeps k0; otherwise, by memorylessness, E' = E - c is a fresh Exp(1) and the number of
    further whole cells is floor(scale E') = floor(-ln(u) scale), u uniform."""
    negative = bool(int(word()) & 1)
    center = Fraction(center)
    if negative:  # mirror: the cells' half-open ends differ only on a null set
        center, lo, hi = -center, -hi, -lo
    k = math.floor(center + Fraction(1, 2))
    if k < hi:
        lo_c, hi_c = _exact.positive_cell(word)
        # u < exp(-c) is E = -ln(u) > c
        if _exact.uniform_below_exp(lo_c, hi_c, (k + Fraction(1, 2) - center) / scale, word):
            lo_c, hi_c = _exact.positive_cell(word)
            k = k + 1 + _exact.floor_neglog_scaled(lo_c, hi_c, scale, word)
    k = min(max(k, lo), hi)
    return -k if negative else k


def _rounded_laplace(center, scale, word):
    """floor(center + scale L + 1/2) for L standard Laplace, exactly (center an integer, scale a
    positive rational): :func:`_draw_laplace` with no clamp. With E = |L| ~ Exp(1): |offset| = 0
    when E <= 1 / (2 scale); otherwise E - 1 / (2 scale) is a fresh Exp(1) (memorylessness) and
    |offset| = 1 + floor(scale E')."""
    return _draw_laplace(center, scale, -math.inf, math.inf, word)


# ------------------------------------------------------------------------------------------------
# the smooth-sensitivity calibration


@dataclass(frozen=True)
class SmoothMedianPlan:
    """Calibration of :func:`median` (public values only).

    Attributes
    ----------
    noise : {"h4", "laplace"}
        ``"h4"``: density proportional to 1 / (1 + z**4) (pure epsilon-DP). ``"laplace"``:
        standard Laplace ((epsilon, delta)-DP).
    epsilon, delta : float
        The guarantee (delta = 0 for ``"h4"``); what is charged.
    alpha : Fraction
        Noise scale = S / alpha (S the smooth bound).
    beta : float
        Smoothness of S.
    """

    noise: str
    epsilon: float
    delta: float
    alpha: Fraction
    beta: float

    @classmethod
    def calibrate(cls, epsilon: float, delta: float | None = None) -> SmoothMedianPlan:
        """Split epsilon between sliding (alpha) and dilation (beta); see :func:`median`."""
        epsilon = _epsilon(epsilon)
        eps = Fraction(epsilon)
        if delta is None:
            # L alpha + 3 beta <= epsilon, L >= 3**(3/4): half each
            return cls("h4", epsilon, 0.0, eps / (2 * LIPSCHITZ_H4), _round_down(eps / 6))
        delta = _delta(delta)
        # alpha = epsilon / 2; with L = ln(1/delta0), delta0 = delta e^(-epsilon/2), beta must
        # satisfy beta + L (e^beta - 1) <= epsilon / 2: as beta <= e^beta - 1 it is enough that
        # (1 + L)(e^beta - 1) <= epsilon / 2. 1 - 2**-20 absorbs the rounding of the floats.
        log_term = -math.log(delta) + epsilon / 2
        beta = math.log1p(epsilon / (2.0 * (1.0 + log_term))) * (1.0 - 2.0**-20)
        return cls("laplace", epsilon, delta, eps / 2, beta)

