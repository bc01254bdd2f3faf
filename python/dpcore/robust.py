"""Releases with data-dependent noise: smooth sensitivity, sample-and-aggregate, propose-test-release
and the sparse vector technique.

Global sensitivity calibrates noise to the worst data set; these frameworks calibrate it to the
data at hand, privately:

* :func:`median` adds noise scaled by the smooth sensitivity of the median (Nissim,
  Raskhodnikova, Smith 2007), computed in O(n log n) by the ``_robust`` kernel
  (:func:`smooth_sensitivity_median`).

Conventions shared by the releases here (each Privacy section says which apply):

* **Bounds are public and required**; records are clipped to them. Nothing is inferred from the
  data.
* **Outputs are grid points.** Clipped records are rounded to the public grid
  g = 2**floor(log2((upper - lower) 2**-40)); the released value is a multiple of g computed from
  exact integers, and the noise is drawn exactly (rational arithmetic on lazily refined uniforms,
  ``dpcore._exact``), so the output law is exactly the one documented and floating point leaks
  nothing.
* **Validate, charge once, draw** (``dpcore._release.release``): a bad argument raises before
  anything is charged; error messages never quote data values or the number of records.
* ``random_state=None`` is dpcore's cryptographically secure generator; seeds are for tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcore import _exact, _robust
from dpcore import _validation as check
from dpcore._floats import pow2_floor as _pow2_floor, round_down as _round_down
from dpcore._release import Cost, release

__all__ = ["smooth_sensitivity_median", "median", "SmoothMedianPlan", "GRID_BITS", "MIN_EPSILON",
           "MAX_EPSILON"]

#: Records are rounded to a grid of 2**-GRID_BITS of the bounds' width (and outputs lie on it).
GRID_BITS = 40
#: Smallest epsilon accepted by the smooth-sensitivity releases (keeps beta far above rounding).
MIN_EPSILON = 2.0**-20
#: Largest epsilon accepted by them (keeps exp(epsilon) and the calibration finite).
MAX_EPSILON = 2.0**10
#: Upper bound on sup_z 4 |z|**3 / (1 + z**4) = 3**(3/4) (the log-density's Lipschitz constant of
#: the noise law 1 / (1 + z**4)); 2.2796**4 >= 27 is checked in the tests.
LIPSCHITZ_H4 = Fraction(22796, 10000)
# The smooth bound is computed with beta - _BETA_SLACK and inflated by 1 + _INFLATE: together they
# absorb the kernel's rounding (relative error below 2**-45; see _smooth_units).
_BETA_SLACK = 2.0**-39
_INFLATE = Fraction(1, 2**40)
# Terms of the smooth sensitivity below 2**-_FLOOR_BITS of the width are replaced by that floor.
_FLOOR_BITS = 40


# ------------------------------------------------------------------------------------------------
# validation and the public record grid


def _epsilon(epsilon):
    epsilon = check.positive(epsilon, "epsilon")
    if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ValueError(f"epsilon must be in [2**-20, 2**10], got {epsilon!r}")
    return epsilon


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
        step = _pow2_floor(width * 2.0**-GRID_BITS)
        if max(abs(lower), abs(upper)) >= 2.0**61 * step:
            raise ValueError(f"{name} must satisfy max(|lower|, |upper|) < 2**20 (upper - lower) "
                             f"(shift the data towards 0), got ({lower!r}, {upper!r})")
        # dividing by a power of two is exact: the grid ends are exact integers
        return cls(lower, upper, step, int(np.rint(lower / step)), int(np.rint(upper / step)))

    def units(self, records):
        """Clipped records in grid units, sorted (rint: half to even; monotone)."""
        return np.sort(np.rint(np.clip(records, self.lower, self.upper) / self.step).astype(np.int64))

    def to_real(self, k):
        """Grid point k as a double within the bounds (post-processing)."""
        return min(max(float(Fraction(k) * Fraction(self.step)), self.lower), self.upper)


# ------------------------------------------------------------------------------------------------
# smooth sensitivity of the median


def _smooth_units(units, grid, m, beta, *, floor=True):
    """A beta-smooth upper bound on the local sensitivity of the m-th order statistic, in grid
    units (a double), for sorted ``units``.

    The kernel maximises d_i c_j (x_j - x_i) with c_j, d_i doubles within 2**-47 (relative) of
    exp(-beta' (j - m)), exp(-beta' (m - 1 - i)), beta' = beta - 2**-39 (|beta' k| <= 28 in the
    window, so exp's argument is rounded by < 28 * 2**-53), and the maximum of the exact matrix is
    found exactly (see the kernel), then rounded once: the result T is within a relative 2**-45 of
    the exact S*_{beta'} restricted to the window. Terms outside the window are below the floor
    F = 2**-40 (hi - lo) (beta' k > 40 ln 2 there). Then S = max(F, (1 + 2**-40) T) satisfies
    S >= S*_{beta'} >= LS and S(x) <= e^{beta' + 2**-40 + 3 * 2**-45} S(y) <= e^beta S(y) for
    neighbours: a beta-smooth upper bound. (floor=False: the kernel's value over all pairs, for
    :func:`smooth_sensitivity_median`.)"""
    n = units.size
    if not floor:
        return _robust.smooth_sensitivity_sorted(units, grid.lo, grid.hi, m, beta, n + 1)
    beta_k = beta - _BETA_SLACK
    reach = min(n + 1, math.ceil(28.0 / beta_k) + 1)
    t = _robust.smooth_sensitivity_sorted(units, grid.lo, grid.hi, m, beta_k, reach)
    smallest = math.ldexp(float(grid.hi - grid.lo), -_FLOOR_BITS)  # exact
    return max(smallest, float(Fraction(t) * (1 + _INFLATE)))


def smooth_sensitivity_median(x, bounds, beta):
    """The beta-smooth sensitivity of the median (Nissim, Raskhodnikova, Smith 2007), in
    O(n log n).

    For the records clipped to ``bounds`` and sorted, x_1 <= ... <= x_n, the median
    x_m (m = ceil(n / 2): the lower median when n is even) and x_i := lower for i <= 0,
    upper for i > n:

        S*(x) = max_{k = 0..n} exp(-beta k) max_{t = 0..k+1} (x_{m+t} - x_{m+t-k-1})

    is the smallest beta-smooth upper bound on the local sensitivity of the median under
    replace-one neighbours. The O(n**2) definition is evaluated by a divide and conquer over the
    monotone argmax (kernel ``dpcore._robust``).

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record), at least one. NaN and infinities are
        rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper; records are clipped to it. The records are also
        rounded to the grid of 2**-40 of the width that :func:`median` uses (exact when they lie
        on it, e.g. small integers with integer bounds).
    beta : float
        Smoothness parameter, > 0.

    Returns
    -------
    float
        S*(x), rounded (relative error below 2**-44).

    Raises
    ------
    ValueError, TypeError
        Invalid records, bounds or beta (naming the parameter).

    Privacy
    -------
    Not a release: it reads the private data and returns a data-dependent number that is not
    differentially private (use :func:`median`). Charges nothing.

    Examples
    --------
    >>> from dpcore import robust
    >>> robust.smooth_sensitivity_median([1.0, 2.0, 3.0], (0.0, 4.0), 10.0)  # local sensitivity
    1.0
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    beta = check.positive(beta, "beta")
    units = grid.units(records)
    s = _smooth_units(units, grid, (units.size + 1) // 2, beta, floor=False)
    return float(Fraction(s) * Fraction(grid.step))


# ------------------------------------------------------------------------------------------------
# exact noise on the grid


def _words(rng):
    """Fresh uniformly random 64-bit integers from the generator (it holds its own lock)."""
    return rng.bit_generator.random_raw


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


def _positive_cell(word):
    """(lo, hi) with 0 < lo: the cell of a real uniform, refined past 0 if needed."""
    u = _Uniform(word)
    while u.num == 0:
        u.refine()
    return u.lo, u.hi


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
    """clamp(floor(center + scale L + 1/2), lo, hi) for L standard Laplace, exactly (center an
    integer in [lo, hi], scale > 0 rational). L = sign * E, E ~ Exp(1): E < 1/(2 scale) keeps the
    centre cell; otherwise, by memorylessness, E' = E - 1/(2 scale) is a fresh Exp(1) and the
    number of further whole cells is floor(scale E') = floor(-ln(u) scale), u uniform."""
    negative = bool(int(word()) & 1)
    if negative:  # mirror: the cells' half-open ends differ only on a null set
        center, lo, hi = -center, -hi, -lo
    k = center
    if k < hi:
        lo_c, hi_c = _positive_cell(word)
        # u < exp(-c) with c = 1 / (2 scale): that is E = -ln(u) > c
        if _exact.uniform_below_exp(lo_c, hi_c, Fraction(1, 2) / scale, word):
            lo_c, hi_c = _positive_cell(word)
            k = center + 1 + _exact.floor_neglog_scaled(lo_c, hi_c, scale, word)
    k = min(max(k, lo), hi)
    return -k if negative else k


# ------------------------------------------------------------------------------------------------
# the smooth-sensitivity median


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
    def calibrate(cls, epsilon, delta=None):
        """Split epsilon between sliding (alpha) and dilation (beta); see :func:`median`."""
        epsilon = _epsilon(epsilon)
        eps = Fraction(epsilon)
        if delta is None:
            # L alpha + 3 beta <= epsilon, L >= 3**(3/4): half each
            return cls("h4", epsilon, 0.0, eps / (2 * LIPSCHITZ_H4), _round_down(eps / 6))
        delta = check.probability(delta, "delta")
        # alpha = epsilon / 2; beta (1 + ln(1/delta0) e^(epsilon/2)) <= epsilon / 2 with
        # delta0 = delta e^(-epsilon/2); 1 - 2**-20 absorbs the rounding of the floats below.
        log_term = (math.log(1.0 / delta) + epsilon / 2) * math.exp(epsilon / 2)
        beta = epsilon / (2.0 * (1.0 + log_term)) * (1.0 - 2.0**-20)
        return cls("laplace", epsilon, delta, eps / 2, beta)


def median(x, *, bounds, epsilon, delta=None, random_state=None, accountant=None):
    """Differentially private median with noise scaled to its smooth sensitivity.

    Releases med(x) + (S(x) / alpha) Z rounded to the public grid (Nissim, Raskhodnikova, Smith
    2007), where S is a beta-smooth upper bound on the median's local sensitivity (computed in
    O(n log n), see :func:`smooth_sensitivity_median`). On well-spread data S is about the gap
    between the order statistics next to the median, far below the width of ``bounds``.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record), at least one. NaN and infinities are
        rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper, with max(|lower|, |upper|) < 2**20 (upper - lower).
        Required, never inferred from the data. Records are clipped to it.
    epsilon : float
        Privacy parameter, in [2**-20, 2**10].
    delta : float, optional
        None (default): pure epsilon-DP with the heavy-tailed noise 1 / (1 + z**4). A value in
        (0, 1): (epsilon, delta)-DP with Laplace noise (lighter tails, smaller beta).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` once, after validation and before drawing.

    Returns
    -------
    float
        A multiple of the grid g = 2**floor(log2((upper - lower) 2**-40)), clamped to the bounds.

    Raises
    ------
    ValueError, TypeError
        Empty, NaN or infinite records (naming ``x``), missing or invalid ``bounds``, epsilon
        outside [2**-20, 2**10], delta outside (0, 1).

    Privacy
    -------
    Neighbouring relation: **replace-one** (n is public): the median's local and smooth
    sensitivity are defined for a fixed n (under add/remove the median shifts by one position,
    not covered). Records are clipped to ``bounds`` and rounded to the grid (a per-record map, so
    neighbours stay neighbours); f(x) = x_(m), m = ceil(n / 2) (the lower median for even n).

    S is a beta-smooth upper bound: S(x) >= LS(x) and S(x) <= e^beta S(y) for neighbours (the
    computed bound is inflated by 2**-40 and uses beta - 2**-39 to absorb rounding, and never
    goes below the public floor 2**-40 (upper - lower)). The unrounded output
    f(x) + (S(x) / alpha) Z then differs between neighbours by a slide of at most alpha (in
    units of the noise scale; |f(x) - f(y)| <= LS(x) <= S(x)) and a dilation by e^lambda,
    |lambda| <= beta:

    * ``delta=None``: Z has density proportional to 1 / (1 + z**4). Its log-density is
      L-Lipschitz with L = 3**(3/4) < 2.2796, and a dilation changes it by at most 3 |lambda|
      (gamma - 1 with gamma = 4). With alpha = epsilon / (2 * 2.2796) and beta = epsilon / 6 the
      log-ratio of the output densities is at most L alpha + 3 beta <= epsilon: pure
      epsilon-DP.
    * ``delta``: Z standard Laplace, alpha = epsilon / 2; the dilation's log-ratio is at most
      beta + |z| (e^beta - 1), and |z| <= ln(1/delta0) except with probability delta0 =
      delta e^(-epsilon/2); beta is chosen with beta + ln(1/delta0) (e^beta - 1) <= epsilon / 2,
      giving (epsilon, e^(epsilon/2) delta0 = delta)-DP.

    Rounding to the grid and clamping to the bounds are post-processing, and they are sampled
    exactly (rational arithmetic on lazily refined uniforms), so the output law is exactly that
    of the rounded mechanism. The sampler is not constant-time. Charged: ``(epsilon, delta)``
    (delta = 0 when None), once.

    References
    ----------
    .. [NRS07] K. Nissim, S. Raskhodnikova, A. Smith, "Smooth sensitivity and sampling in private
       data analysis", STOC 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.arange(1001.0)
    >>> m = robust.median(x, bounds=(0.0, 1e4), epsilon=1.0, random_state=0)
    >>> bool(abs(m - 500.0) < 100)
    True
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    plan = SmoothMedianPlan.calibrate(epsilon, delta)
    units = grid.units(records)
    m = (units.size + 1) // 2
    scale = Fraction(_smooth_units(units, grid, m, plan.beta)) / plan.alpha
    center = int(units[m - 1])
    sampler = _draw_h4 if plan.noise == "h4" else _draw_laplace

    def draw(rng):
        return grid.to_real(sampler(center, scale, grid.lo, grid.hi, _words(rng)))

    return release(draw, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="robust.median")
