"""Releases with data-dependent noise: smooth sensitivity, sample-and-aggregate,
propose-test-release and the sparse vector technique.

Global sensitivity calibrates noise to the worst data set; these frameworks calibrate it to the
data at hand, privately:

* :func:`median` adds noise scaled by the smooth sensitivity of the median (Nissim,
  Raskhodnikova, Smith 2007), computed in O(n log n) by the ``_robust`` kernel
  (:func:`smooth_sensitivity_median`).
* :func:`trimmed_mean` does the same for the trimmed mean, with a smooth bound built from the
  order statistics just outside the kept window.
* :func:`sample_aggregate` runs any estimator on disjoint blocks and releases a widened
  winsorized mean of the block estimates (NRS 2007; Smith 2011).
* :func:`ptr_median`, :func:`ptr_iqr`, :func:`ptr_trimmed_mean`: propose-test-release (Dwork,
  Lei 2009): test privately that the data are far from any data set whose local sensitivity
  exceeds the caller's proposed bound, then release with noise for that bound, or refuse
  (:class:`PTRResult`).
* :func:`sparse_vector` / :func:`above_threshold` answer "is this query above the threshold?"
  over a stream, paying only for the positives (Lyu, Su, Li 2017).

Conventions shared by the releases here (each Privacy section says which apply):

* **Bounds are public and required**; records are clipped to them. Nothing is inferred from the
  data.
* **Real outputs are grid points, drawn exactly.** :func:`median`, :func:`trimmed_mean` and the
  PTR releases round the clipped records to the public grid g = 2**floor(log2((upper - lower)
  2**-40)) and compute in integers; the smooth-sensitivity noise is drawn exactly (rational
  arithmetic on lazily refined uniforms, ``dpcore._exact``) and the other releases use the exact
  discrete Laplace of :func:`dpcore.laplace` and the exact exponential mechanism, so each output
  law is exactly the one documented and floating point leaks nothing. The sparse vector
  technique compares integers only.
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
from dpcore._floats import pow2_floor as _pow2_floor
from dpcore._floats import round_down as _round_down
from dpcore._floats import round_up as _round_up
from dpcore._random import Words64
from dpcore._release import Cost, public_arithmetic, release
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, LaplaceMechanism, discrete_laplace
from dpcore.selection import ExponentialMechanism

__all__ = [
    "smooth_sensitivity_median", "median", "trimmed_mean", "sample_aggregate", "ptr_median",
    "ptr_iqr", "ptr_trimmed_mean", "PTRResult", "sparse_vector", "above_threshold",
    "SmoothMedianPlan", "SparseVectorPlan", "GRID_BITS", "MIN_EPSILON", "MAX_EPSILON",
    "AGGREGATE_GRID", "WIDEN",
]

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
# absorb the kernel's rounding (relative error below 2**-44; see _smooth_units).
_BETA_SLACK = 2.0**-39
_MIN_DELTA = 2.0**-1000
_INFLATE = Fraction(1, 2**40)
#: Default number of public grid points the aggregation's quartiles are chosen from.
AGGREGATE_GRID = 2**20 + 1
#: The winsorizing interval is [q1 - WIDEN iqr, q3 + WIDEN iqr] (Smith 2011's widening).
WIDEN = 1.5
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
        if max(abs(lower), abs(upper)) >= 2.0**20 * width:  # keeps |units| < 2**61
            raise ValueError(f"{name} must satisfy max(|lower|, |upper|) < 2**20 (upper - lower) "
                             f"(shift the data towards 0), got ({lower!r}, {upper!r})")
        step = _pow2_floor(width * 2.0**-GRID_BITS)
        # dividing by a power of two is exact: the grid ends are exact integers
        return cls(lower, upper, step, int(np.rint(lower / step)), int(np.rint(upper / step)))

    def units(self, records):
        """Clipped records in grid units, sorted (rint: half to even; monotone)."""
        scaled = np.clip(records, self.lower, self.upper) / self.step
        return np.sort(np.rint(scaled).astype(np.int64))

    def to_real(self, k):
        """Grid point k as a double within the bounds (post-processing)."""
        return min(max(float(Fraction(k) * Fraction(self.step)), self.lower), self.upper)


# ------------------------------------------------------------------------------------------------
# smooth sensitivity of the median


def _smooth_units(units, grid, m, beta, *, floor=True):
    """A beta-smooth upper bound on the local sensitivity of the m-th order statistic, in grid
    units (a double), for sorted ``units``.

    The kernel finds, row by row, the exact argmax over j of c_j (x_j - x_i), c_j the doubles
    exp(-beta' (j - m)) made nonincreasing, then rounds exp(-beta' (j - i - 1)) (x_j - x_i)
    once per row, beta' = beta - 2**-39. Only terms above the floor F below can matter, and
    those have beta' k <= 27.7 (e**-27.7 > 2**-40), so exp's argument is rounded by
    < 28 * 2**-53 there: the result T is within a relative 2**-44 of the exact S*_{beta'}
    restricted to the window |i - m|, |j - m| <= reach (k itself reaches 2 reach - 1 in the
    window, but those terms are below F). Terms outside it have k = j - i - 1 >= reach >= 28 / beta', so they
    are below the floor F = 2**-40 (hi - lo) (e**-28 < 2**-40). Then S = max(F, (1 + 2**-40) T)
    satisfies S >= S*_{beta'} >= LS and S(x) <= e^{beta' + 2**-40 + 3 * 2**-44} S(y) <= e^beta S(y)
    for neighbours: a beta-smooth upper bound. (floor=False: the kernel's value over all pairs, for
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
        lo_c, hi_c = _positive_cell(word)
        # u < exp(-c) is E = -ln(u) > c
        if _exact.uniform_below_exp(lo_c, hi_c, (k + Fraction(1, 2) - center) / scale, word):
            lo_c, hi_c = _positive_cell(word)
            k = k + 1 + _exact.floor_neglog_scaled(lo_c, hi_c, scale, word)
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
        delta = _delta(delta)
        # alpha = epsilon / 2; with L = ln(1/delta0), delta0 = delta e^(-epsilon/2), beta must
        # satisfy beta + L (e^beta - 1) <= epsilon / 2: as beta <= e^beta - 1 it is enough that
        # (1 + L)(e^beta - 1) <= epsilon / 2. 1 - 2**-20 absorbs the rounding of the floats.
        log_term = -math.log(delta) + epsilon / 2
        beta = math.log1p(epsilon / (2.0 * (1.0 + log_term))) * (1.0 - 2.0**-20)
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
    * ``delta``: Z standard Laplace, alpha = epsilon / 2. Two steps on sets: the slide moves
      any set's probability by at most e^(epsilon/2) (pure); the dilation by e^lambda then
      changes the log-density by beta + |z| (e^beta - 1) at most, which is <= epsilon / 2
      wherever |z| <= L = ln(1/delta0), and |z| > L has probability delta0 =
      delta e^(-epsilon/2). beta = log1p(epsilon / (2 (1 + L))) gives
      beta + L (e^beta - 1) <= (1 + L)(e^beta - 1) = epsilon / 2; in all,
      (epsilon, e^(epsilon/2) delta0 = delta)-DP. ``delta`` must be at least 2**-1000.

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


def _trim_count(trim, n):
    trim = check.real(trim, "trim")
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim!r}")
    h = math.floor(Fraction(trim) * n)
    if n - 2 * h < 1:
        raise ValueError("trim removes every record; use a smaller trim")
    return h


def _smooth_trimmed_units(units, grid, h, beta):
    """A beta-smooth upper bound on the local sensitivity of the h-trimmed mean, in grid units.

    U_k = (x_(n-h+1+k) - x_(h-k)) / (n - 2h) (padded order statistics) bounds the local
    sensitivity of every data set within k replacements, and U_k(x) <= U_{k+1}(y) for neighbours
    (order statistics move by one position), so max_k e^(-beta k) U_k is beta-smooth and
    >= LS. It is evaluated with beta' = beta - 2**-39 over k < 28 / beta' + 1 (exact integer gaps,
    exp rounded: relative error below 2**-44), inflated by 2**-40 and floored at
    2**-40 (hi - lo) / (n - 2h) (covering the terms skipped), as in _smooth_units."""
    n = units.size
    kept = n - 2 * h
    beta_k = beta - _BETA_SLACK
    k = np.arange(min(n + 2, math.ceil(28.0 / beta_k) + 1))
    gaps = _order_stats(units, grid, n - h + 1 + k) - _order_stats(units, grid, h - k)
    t = float(np.max(np.exp(-beta_k * k) * gaps.astype(np.float64)))  # gaps < 2**53: exact
    smallest = math.ldexp(float(grid.hi - grid.lo), -_FLOOR_BITS) / kept
    return max(smallest, float(Fraction(t) * (1 + _INFLATE) / kept))


def trimmed_mean(x, *, bounds, epsilon, delta=None, trim=0.1, random_state=None, accountant=None):
    """Differentially private trimmed mean with noise scaled to a smooth sensitivity bound.

    The mean of x_(h+1), ..., x_(n-h) (h = floor(trim n)) plus (S(x) / alpha) Z on the public
    grid, S a beta-smooth bound built from the order statistics around the kept window; the
    noise and the (alpha, beta) split are those of :func:`median`.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record), at least one. NaN and infinities are
        rejected.
    bounds : (float, float)
        Public (lower, upper), as in :func:`median`. Records are clipped to it.
    epsilon : float
        In [2**-20, 2**10].
    delta : float, optional
        None: pure epsilon-DP (noise 1 / (1 + z**4)); in (0, 1): (epsilon, delta)-DP, Laplace.
    trim : float, default=0.1
        Fraction trimmed from each end, in [0, 0.5), keeping at least one record.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` once, after validation and before drawing.

    Returns
    -------
    float
        A multiple of the grid 2**floor(log2((upper - lower) 2**-40)), clamped to the bounds.

    Raises
    ------
    ValueError, TypeError
        As :func:`median`, and trim outside [0, 0.5).

    Privacy
    -------
    Neighbouring relation: **replace-one** (n is public). Replacing one record removes one value
    from the kept window and adds one, both within [x_(h), x_(n-h+1)] (padded with the bounds),
    so LS(x) <= U_0 = (x_(n-h+1) - x_(h)) / (n - 2h); within k replacements every order
    statistic moves by at most k positions, so U_k = (x_(n-h+1+k) - x_(h-k)) / (n - 2h) bounds
    the local sensitivity there and U_k(x) <= U_{k+1}(y) for neighbours. Hence
    S = max_k e^(-beta k) U_k satisfies S >= LS and S(x) <= e^beta S(y): a beta-smooth upper
    bound (computed with the rounding margins of :func:`median`). The centre is the exact
    rational trimmed mean of the clipped records rounded to the grid (a per-record map); the
    release, its rounding and clamping and the guarantee are then exactly those of
    :func:`median`: pure epsilon-DP (``delta=None``) or (epsilon, delta)-DP. Charged:
    ``(epsilon, delta)`` (delta = 0 when None), once.

    References
    ----------
    .. [NRS07] K. Nissim, S. Raskhodnikova, A. Smith, "Smooth sensitivity and sampling in private
       data analysis", STOC 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.random.default_rng(0).standard_cauchy(10_000)  # insecure-ok: example data
    >>> m = robust.trimmed_mean(x, bounds=(-1e4, 1e4), epsilon=1.0, random_state=0)
    >>> bool(abs(m) < 0.2)
    True
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    plan = SmoothMedianPlan.calibrate(epsilon, delta)
    h = _trim_count(trim, records.size)
    units = grid.units(records)
    n = units.size
    scale = Fraction(_smooth_trimmed_units(units, grid, h, plan.beta)) / plan.alpha
    center = Fraction(_exact_sum(units[h:n - h], grid.lo), n - 2 * h)
    sampler = _draw_h4 if plan.noise == "h4" else _draw_laplace

    def draw(rng):
        return grid.to_real(sampler(center, scale, grid.lo, grid.hi, _words(rng)))

    return release(draw, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="robust.trimmed_mean")


# ------------------------------------------------------------------------------------------------
# sample-and-aggregate


def _output_ranges(output_range):
    """(d, 2) array of public per-coordinate ranges and whether the output is a scalar."""
    if output_range is None:
        raise ValueError("output_range is required: give public (lower, upper) for the estimator's "
                         "output (or one pair per coordinate); it is never inferred from the data")
    ranges = check.finite_array(output_range, "output_range")
    scalar = ranges.shape == (2,)
    ranges = ranges.reshape(1, 2) if scalar else ranges
    if ranges.ndim != 2 or ranges.shape[1] != 2 or ranges.shape[0] == 0:
        raise ValueError("output_range must be a pair (lower, upper) or an array of shape (d, 2), "
                         f"got shape {ranges.shape}")
    if not np.all(ranges[:, 0] < ranges[:, 1]):
        raise ValueError("output_range must satisfy lower < upper in every coordinate")
    if not np.all(np.isfinite(ranges[:, 1] - ranges[:, 0])):
        raise ValueError("output_range is too wide: upper - lower overflows")
    return ranges, scalar


def _grid_points(lower, upper, size):
    step = (upper - lower) / (size - 1)
    points = lower + np.arange(size) * step
    points[-1] = upper
    return points, step


def _quartiles(z, points, mech, rng):
    """The exponential mechanism for the 1/4 and 3/4 quantiles of z over public points:
    u(g) = -|#{z < g} - q k|; under replace-one of one z_i, #{z < g} moves by at most 1."""
    ranks = np.searchsorted(np.sort(z), points, side="left").astype(np.float64)
    k = z.size
    out = []
    for q in (0.25, 0.75):
        index = mech.select(-np.abs(ranks - q * k), random_state=rng)  # q k: exact quarters
        out.append(float(points[index]))
    return sorted(out)


def _winsorized_mean(z, lower, upper, grid, epsilon, rng):
    """Smith's widened winsorized mean of one coordinate of the block estimates (see
    :func:`sample_aggregate`): epsilon / 4 per quartile, epsilon / 2 for the mean."""
    k = z.size
    z = np.clip(np.where(np.isnan(z), lower / 2 + upper / 2, z), lower, upper)
    points, step = _grid_points(lower, upper, grid)
    quarter = _round_down(Fraction(epsilon) / 4)
    mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=quarter, method="exact")
    q1, q3 = _quartiles(z, points, mech, rng)
    spread = max(q3 - q1, step)  # never zero: the sensitivity below stays positive
    a = max(lower, q1 - WIDEN * spread)
    b = min(upper, q3 + WIDEN * spread)
    clipped = np.clip(z, a, b)
    value = math.fsum(clipped.tolist()) / k
    return float(_winsorized_noise(b - a, max(abs(a), abs(b)), k, epsilon).release(
        value, random_state=rng))


def _winsorized_noise(width, magnitude, k, epsilon):
    """The Laplace mechanism for the mean of k values clipped to an interval of ``width``: one
    clipped estimate moves the exact sum by <= width; fsum and the division each round by
    <= 2**-53 relative to |value| <= magnitude: 2**-49 magnitude covers both, both neighbours."""
    sensitivity = math.nextafter(width / k + 2.0**-49 * magnitude, math.inf)
    return LaplaceMechanism.calibrate(sensitivity=sensitivity,
                                      epsilon=_round_down(Fraction(epsilon) / 2))


def sample_aggregate(x, estimator, *, n_blocks, output_range, epsilon, grid=AGGREGATE_GRID,
                     random_state=None, accountant=None):
    """Release any estimator privately by sample-and-aggregate with a widened winsorized mean.

    The records are split at random into ``n_blocks`` disjoint blocks, the (non-private)
    ``estimator`` is run on each, and the block estimates are aggregated coordinate by
    coordinate (Nissim, Raskhodnikova, Smith 2007; Smith 2011): private lower and upper quartiles
    q1, q3 of the block estimates (exponential mechanism over ``grid`` public points of
    ``output_range``), the interval [q1 - 1.5 iqr, q3 + 1.5 iqr] (iqr = q3 - q1, at least one
    grid step; ``WIDEN`` = 1.5), and the mean of the estimates clipped to it plus exact Laplace
    noise of scale (width / n_blocks) / (epsilon / 2) per coordinate.

    Parameters
    ----------
    x : array_like
        The records along the first axis (``x[i]`` is one record: a number or a row). NaN and
        infinities are rejected.
    estimator : callable
        ``estimator(block)`` for a block ``x[idx]`` (same number of dimensions as ``x``) returns
        a number (``output_range`` a pair) or a 1-d array of d numbers (``output_range`` of shape
        (d, 2)). Any Python function; its output is clipped to ``output_range``, and a NaN counts
        as the range's centre.
    n_blocks : int
        Number of blocks, 2 <= n_blocks <= number of records. Blocks have sizes n // n_blocks
        or one more. More blocks mean less noise but more bias for estimators biased on small
        samples; for a mean, a few thousand blocks is typical at n = 10**6.
    output_range : (float, float) or array_like of shape (d, 2)
        Public range of each output coordinate. Required, never inferred from the data.
    epsilon : float
        Total privacy parameter, in [2**-20, 2**10]; epsilon / d per coordinate.
    grid : int, default=AGGREGATE_GRID (2**20 + 1)
        Number of evenly spaced public candidates for the quartiles in each coordinate's range
        (3 <= grid <= 2**26 + 1). The range divided by ``grid`` should be below the spread of
        the block estimates.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator (it also draws the
        partition). Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once, after validation and before anything is drawn or estimated.

    Returns
    -------
    float or ndarray of shape (d,)
        Each coordinate a multiple of the Laplace grid (see :func:`dpcore.laplace`).

    Raises
    ------
    ValueError, TypeError
        Invalid records, estimator (not callable), n_blocks, output_range, epsilon or grid,
        before anything is charged. An estimator that raises, or returns the wrong shape,
        raises after the charge (the budget is spent; nothing is released).

    Privacy
    -------
    Pure epsilon-DP under **replace-one** neighbours (n is public: the partition depends only on
    n and the random generator, never on the data). Replacing one record changes one block,
    hence at most one block estimate per coordinate (whatever the estimator), so the block
    estimates are a data set of n_blocks records under replace-one. For each of the d
    coordinates (epsilon_c = epsilon / d, shares rounded down; basic composition):

    * each quartile is an exponential mechanism with utility -|#{z < g} - q k| of sensitivity 1
      (the count moves by at most 1, k = n_blocks is fixed): epsilon_c / 4 each;
    * given the released interval [a, b] (post-processing of the quartiles), the mean of the
      estimates clipped to it has sensitivity (b - a) / k, plus 2**-49 max(|a|, |b|) for the
      rounding of the correctly rounded sum (``math.fsum``) and of the division; it is released
      with :func:`dpcore.laplace`'s exact discrete mechanism at epsilon_c / 2.

    The estimator sees the raw data: its running time and side effects are not protected.
    Charged: ``epsilon``, once.

    Notes
    -----
    The quartile step needs enough blocks: a grid point far from every estimate has utility
    about -k/4 against 0 near the quartile, so the far part of the range (up to ``grid``
    points) keeps a negligible probability only when k epsilon_c / 32 is well above ln(grid)
    (k >~ 450 / epsilon_c for the default grid). With fewer blocks the interval can be wide and
    the noise large (the release stays private, only less accurate).

    References
    ----------
    .. [NRS07] K. Nissim, S. Raskhodnikova, A. Smith, "Smooth sensitivity and sampling in private
       data analysis", STOC 2007.
    .. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal convergence
       rates", STOC 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.random.default_rng(0).normal(3.0, 1.0, 100_000)  # insecure-ok: example data
    >>> m = robust.sample_aggregate(x, np.mean, n_blocks=400, output_range=(-100.0, 100.0),
    ...                             epsilon=1.0, random_state=0)
    >>> bool(abs(m - 3.0) < 0.05)
    True
    """
    records = check.finite_array(x, "x")
    if records.ndim == 0:
        raise ValueError("x must have at least one dimension (records along the first axis)")
    if not callable(estimator):
        raise TypeError(f"estimator must be callable, got {type(estimator).__name__}")
    n_blocks = check.integer(n_blocks, "n_blocks", minimum=2)
    if n_blocks > records.shape[0]:
        raise ValueError("n_blocks must not exceed the number of records")
    ranges, scalar = _output_ranges(output_range)
    epsilon = _epsilon(epsilon)
    grid = check.integer(grid, "grid", minimum=3, maximum=2**26 + 1)
    d = ranges.shape[0]
    eps_coord = _round_down(Fraction(epsilon) / d)
    n = records.shape[0]
    with public_arithmetic("output_range and epsilon"):
        # the widest interval any coordinate can get: its noise must be calibratable (before
        # the charge); narrower intervals give smaller scales
        for lower, upper in ranges.tolist():
            _winsorized_noise(upper - lower, max(abs(lower), abs(upper)), n_blocks, eps_coord)

    def draw(rng):
        order = rng.permutation(n)
        estimates = np.empty((n_blocks, d))
        for b, idx in enumerate(np.array_split(order, n_blocks)):
            value = np.asarray(estimator(records[idx]), dtype=np.float64)
            if value.shape not in ((d,), () if d == 1 else (d,)):
                raise ValueError(
                    "estimator must return a number or an array of shape (d,) matching "
                    "output_range (the budget of this release was charged)"
                )
            estimates[b] = value
        out = np.array([
            _winsorized_mean(estimates[:, c], float(ranges[c, 0]), float(ranges[c, 1]), grid,
                             eps_coord, rng)
            for c in range(d)
        ])
        return float(out[0]) if scalar else out

    return release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                   label="robust.sample_aggregate")


# ------------------------------------------------------------------------------------------------
# propose-test-release


@dataclass(frozen=True)
class PTRResult:
    """The outcome of a propose-test-release mechanism.

    Attributes
    ----------
    refused : bool
        True when the private test failed: nothing but the refusal is released (the refusal is
        an output of the mechanism and the budget is charged all the same).
    value : float or None
        The noisy statistic, or None when refused.
    """

    refused: bool
    value: float | None

    @property
    def released(self):
        return not self.refused


def _order_stats(units, grid, i):
    """x_i for an array of 1-based positions i, padded: the grid's ends below 1 and above n."""
    n = units.size
    inner = units[np.clip(i, 1, n) - 1]
    return np.where(i <= 0, grid.lo, np.where(i > n, grid.hi, inner))


def _ball_gaps(units, grid, p, k):
    """max_{t = 0..k+1} (x_{p+t} - x_{p+t-k-1}): the largest local sensitivity of the p-th order
    statistic over the data sets within k replacements (NRS 2007, Proposition 3.4's argument)."""
    t = np.arange(k + 2)
    return int(np.max(_order_stats(units, grid, p + t) - _order_stats(units, grid, p + t - k - 1)))


def _first_above(bound_exceeded, n):
    """The smallest k in [0, n] with bound_exceeded(k) (nondecreasing in k), or infinity: the
    n-ball holds every data set of n records, so nothing beyond it can exceed."""
    lo, hi = 0, n
    if not bound_exceeded(hi):
        return math.inf
    while lo < hi:
        mid = (lo + hi) // 2
        if bound_exceeded(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _distance_order_statistics(units, grid, positions, bound_units):
    """min k with sum over positions p of A_p^(k) > bound (A_p^(k) as in _ball_gaps): a lower
    bound on the replace distance to a data set where the local sensitivity of any statistic
    moved by at most the sum of those order statistics' moves exceeds the bound."""
    return _first_above(
        lambda k: sum(_ball_gaps(units, grid, p, k) for p in positions) > bound_units, units.size)


def _median_distance(units, grid, bound_units):
    return _distance_order_statistics(units, grid, [(units.size + 1) // 2], bound_units)


def _iqr_positions(n):
    return (n + 3) // 4, (3 * n + 3) // 4  # ceil(n / 4), ceil(3 n / 4)


def _iqr_distance(units, grid, bound_units):
    return _distance_order_statistics(units, grid, list(_iqr_positions(units.size)), bound_units)


def _trimmed_distance(units, grid, h, bound_units):
    """min k with (x_(n-h+1+k) - x_(h-k)) / (n - 2h) > bound (padded order statistics)."""
    n = units.size
    limit = Fraction(bound_units) * (n - 2 * h)

    def exceeded(k):
        ends = _order_stats(units, grid, np.array([n - h + 1 + k, h - k]))
        return int(ends[0] - ends[1]) > limit

    return _first_above(exceeded, n)


def _exact_sum(units, lo):
    """The exact sum of int64 grid units (a Python int): shifted to >= 0, < 2**42 each, and
    summed in int64 chunks of 2**20 that cannot overflow."""
    shifted = units - np.int64(lo)
    chunk = 2**20
    return sum(int(np.sum(shifted[i:i + chunk], dtype=np.int64))
               for i in range(0, shifted.size, chunk)) + lo * shifted.size


def _bound_units(bound, grid):
    """The proposed bound in grid units (dividing by a power of two is exact), capped at twice
    the grid's span: no local sensitivity here exceeds the span, so the cap changes no test."""
    return min(bound / grid.step, 2.0 * (grid.hi - grid.lo))


def _delta(delta):
    """delta in [2**-1000, 1): below 2**-1000 the tail bounds' floating-point margins (and
    1 / delta) stop being meaningful."""
    delta = check.probability(delta, "delta")
    if delta < _MIN_DELTA:
        raise ValueError(f"delta must be at least 2**-1000, got {delta!r}")
    return delta


def _ptr_plan(epsilon, delta, bound, name="bound"):
    epsilon = _epsilon(epsilon)
    delta = _delta(delta)
    bound = check.positive(bound, name)
    eps_test = _round_down(Fraction(epsilon) / 2)
    eps_release = _round_down(Fraction(epsilon) - Fraction(eps_test))
    scale = _round_up(1 / Fraction(eps_test))
    # refuse unless g + Z >= cut, Z ~ DLap(scale): with g = 0 the test passes with probability
    # P(Z >= cut) = p**cut / (1 + p), p = e**(-1 / scale); cut is the smallest c >= 1 making that
    # < delta (decided with a 2**-40 relative margin against the rounding of exp)
    p = math.exp(-1.0 / scale)

    def small_enough(c):
        return math.exp(-c / scale) / (1.0 + p) < delta * (1.0 - 2.0**-40)

    cut = max(1, math.floor(scale * (-math.log(delta) - math.log1p(p))))
    while not small_enough(cut):
        cut += 1
    while cut > 1 and small_enough(cut - 1):
        cut -= 1
    return epsilon, delta, bound, eps_release, scale, cut


def _ptr(label, distance, value, release_sensitivity, eps_release, scale, cut, clamp, epsilon,
         delta, random_state, accountant):
    with public_arithmetic("bound and epsilon"):
        lap = LaplaceMechanism.calibrate(sensitivity=release_sensitivity, epsilon=eps_release)

    def draw(rng):
        # distance is infinite when no data set of this size can exceed the bound: always pass
        if distance + int(discrete_laplace(scale, random_state=rng)) < cut:
            return PTRResult(True, None)
        noisy = float(lap.release(value, random_state=rng))
        return PTRResult(False, min(max(noisy, clamp[0]), clamp[1]))

    return release(draw, cost=Cost(epsilon, delta), accountant=accountant,
                   random_state=random_state, label=label)


_PTR_PRIVACY = """The test: g is a lower bound on the number of records to replace before reaching a
    data set whose local sensitivity exceeds ``bound`` (infinite when no data set of n records
    does; computed on the clipped records rounded to the grid of 2**-40 of the width, a
    per-record map). It satisfies |g(x) - g(y)| <= 1 for
    neighbours (it is the first k where a maximum over the k-ball of the data exceeds the bound,
    and the k-ball of x lies in the (k + 1)-ball of y), and g(x) >= 1 implies LS(x) <= bound.
    The mechanism draws Z ~ DLap(2 / epsilon) (exact) and refuses when g + Z < cut, with cut the
    smallest integer >= 1 such that P(Z >= cut) < delta (decided with a 2**-40 relative margin):
    an (epsilon / 2)-DP test. When g(x) >= 1,
    every neighbour's statistic is within ``bound`` and the value is released with
    :func:`dpcore.laplace`'s exact discrete mechanism at epsilon / 2 (sensitivity ``bound``);
    when g(x) = 0 the test passes with probability < delta. Together: (epsilon, delta)-DP under
    **replace-one** neighbours (n is public; the local sensitivities are those of a fixed n)
    (Dwork, Lei 2009; Dwork, Roth 2014, Section 7.3). Records are clipped to ``bounds``. Both
    outcomes are outputs: a refusal reveals only what the test reveals. Charged:
    ``(epsilon, delta)``, once, whether it releases or refuses."""


def ptr_median(x, *, bounds, bound, epsilon, delta, random_state=None, accountant=None):
    """Propose-test-release median: release med(x) + Laplace(bound / (epsilon / 2)) if the data
    are privately found far from any data set whose median's local sensitivity exceeds the
    proposed ``bound``, else refuse.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record), at least one; NaN and infinities
        are rejected.
    bounds : (float, float)
        Public (lower, upper); records are clipped to it (required: a data set at distance k may
        move the median's neighbours up to the bounds).
    bound : float
        The proposed bound b > 0 on the local sensitivity (public: choose it without looking at
        the data, e.g. from n and the expected spread).
    epsilon : float
        In [2**-20, 2**10]; half for the test, half for the release.
    delta : float
        In (0, 1): the chance that the test passes on a data set whose local sensitivity exceeds
        the bound.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` once, after validation, also when the result is a refusal.

    Returns
    -------
    PTRResult
        ``refused`` and ``value`` (the lower median, m = ceil(n / 2), plus noise, clamped to the
        bounds; None when refused).

    Raises
    ------
    ValueError, TypeError
        Invalid records, bounds, bound, epsilon or delta (naming the parameter), before the
        charge.

    Privacy
    -------
    Exact distance for the median: g = min k with max_{t=0..k+1} (x_{m+t} - x_{m+t-k-1}) > b
    (padded with the bounds), the largest local sensitivity within k replacements (NRS 2007).
    {privacy}

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.linspace(0.0, 100.0, 10_001)
    >>> r = robust.ptr_median(x, bounds=(0.0, 100.0), bound=1.0, epsilon=1.0, delta=1e-6,
    ...                       random_state=0)
    >>> r.refused, bool(abs(r.value - 50.0) < 5)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, bound)
    units = grid.units(records)
    m = (units.size + 1) // 2
    distance = _median_distance(units, grid, _bound_units(bound, grid))
    value = grid.to_real(int(units[m - 1]))  # a grid point: exact
    return _ptr("robust.ptr_median", distance, value, bound, eps_release, scale, cut,
                (grid.lower, grid.upper), epsilon, delta, random_state, accountant)


def ptr_iqr(x, *, bounds, bound, epsilon, delta, random_state=None, accountant=None):
    """Propose-test-release interquartile range x_(p3) - x_(p1), p1 = ceil(n / 4),
    p3 = ceil(3 n / 4): released with Laplace(bound / (epsilon / 2)) noise if the private test
    passes, else refused.

    Parameters
    ----------
    x, bounds, bound, epsilon, delta, random_state, accountant
        As in :func:`ptr_median` (``bound`` proposes a bound on the IQR's local sensitivity).

    Returns
    -------
    PTRResult
        The noisy IQR clamped to [0, upper - lower], or a refusal.

    Raises
    ------
    ValueError, TypeError
        As :func:`ptr_median`.

    Privacy
    -------
    One replacement moves each quartile by at most its own local sensitivity (and both can move
    at once), so LS_IQR <= LS_p1 + LS_p3, and within k replacements the same holds with the
    ball maxima A_p^(k) = max_t (x_{p+t} - x_{p+t-k-1}): g = min k with A_p1^(k) + A_p3^(k) > b.
    {privacy}

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.linspace(0.0, 100.0, 10_001)
    >>> r = robust.ptr_iqr(x, bounds=(0.0, 100.0), bound=1.0, epsilon=1.0, delta=1e-6,
    ...                    random_state=0)
    >>> r.refused, bool(abs(r.value - 50.0) < 5)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, bound)
    units = grid.units(records)
    p1, p3 = _iqr_positions(units.size)
    distance = _iqr_distance(units, grid, _bound_units(bound, grid))
    value = float(Fraction(int(units[p3 - 1] - units[p1 - 1])) * Fraction(grid.step))  # exact
    return _ptr("robust.ptr_iqr", distance, value, bound, eps_release, scale, cut,
                (0.0, grid.upper - grid.lower), epsilon, delta, random_state, accountant)


def ptr_trimmed_mean(x, *, bounds, bound, epsilon, delta, trim=0.1, random_state=None,
                     accountant=None):
    """Propose-test-release trimmed mean: the mean of x_(h+1), ..., x_(n-h), h = floor(trim n),
    released with Laplace noise for the proposed ``bound`` if the private test passes.

    Parameters
    ----------
    x, bounds, bound, epsilon, delta, random_state, accountant
        As in :func:`ptr_median` (``bound`` proposes a bound on the trimmed mean's local
        sensitivity; about (x_(n-h+1) - x_(h)) / (n - 2h) on the data, so a few times
        (spread of the central part) / n).
    trim : float, default=0.1
        Fraction trimmed from each end, 0 <= trim < 0.5 (at least one record must remain).

    Returns
    -------
    PTRResult
        The noisy trimmed mean clamped to the bounds, or a refusal.

    Raises
    ------
    ValueError, TypeError
        As :func:`ptr_median`, and trim outside [0, 0.5) or trimming every record.

    Privacy
    -------
    Replacing one record removes one value from the kept window and adds one, both within
    [x_(h), x_(n-h+1)] (padded with the bounds), so LS <= (x_(n-h+1) - x_(h)) / (n - 2h); within k
    replacements every order statistic moves by at most k positions, so g = min k with
    (x_(n-h+1+k) - x_(h-k)) / (n - 2h) > b. The exact rational mean is rounded once to a double
    (at most 2**-53 (max(|lower|, |upper|) + step) on each neighbour, step the grid spacing),
    so the release's sensitivity is b + 2**-52 (max(|lower|, |upper|) + step).
    {privacy}

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import robust
    >>> x = np.random.default_rng(0).standard_cauchy(10_000)  # insecure-ok: example data
    >>> r = robust.ptr_trimmed_mean(x, bounds=(-1e4, 1e4), bound=20 / 10_000, epsilon=1.0,
    ...                             delta=1e-6, random_state=0)
    >>> r.refused, bool(abs(r.value) < 0.2)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, bound)
    h = _trim_count(trim, records.size)
    units = grid.units(records)
    n = units.size
    kept = n - 2 * h
    distance = _trimmed_distance(units, grid, h, _bound_units(bound, grid))
    total = _exact_sum(units[h:n - h], grid.lo)
    value = float(Fraction(total, kept) * Fraction(grid.step))
    # each neighbour's double is within half an ulp of its exact mean (|mean| <= M + step)
    slack = 2.0**-52 * (max(abs(grid.lower), abs(grid.upper)) + grid.step)
    sensitivity = math.nextafter(bound + slack, math.inf)
    return _ptr("robust.ptr_trimmed_mean", distance, value, sensitivity, eps_release, scale, cut,
                (grid.lower, grid.upper), epsilon, delta, random_state, accountant)


for _f in (ptr_median, ptr_iqr, ptr_trimmed_mean):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.replace("{privacy}", _PTR_PRIVACY)
del _f


# ------------------------------------------------------------------------------------------------
# sparse vector


@dataclass(frozen=True)
class SparseVectorPlan:
    """Calibration of :func:`sparse_vector` (public values only).

    Attributes
    ----------
    epsilon, epsilon1, epsilon2 : float
        Total; threshold share epsilon / (1 + (2c)**(2/3)) rounded down; queries' share
        epsilon - epsilon1 rounded down (Lyu, Su, Li's allocation).
    max_positives : int
        c.
    grid : float
        Power of two; query answers and the threshold are rounded to it (integers below).
    sensitivity_units : int
        D = floor(sensitivity / grid) + 1: the largest change of a rounded answer.
    threshold_scale, query_scale : float
        Discrete Laplace scales t1 = D / epsilon1 and t2 = 2 c D / epsilon2, rounded up.
    """

    epsilon: float
    epsilon1: float
    epsilon2: float
    max_positives: int
    grid: float
    sensitivity_units: int
    threshold_scale: float
    query_scale: float

    @classmethod
    def calibrate(cls, *, epsilon, max_positives, sensitivity=1.0, granularity=None):
        epsilon = check.positive(epsilon, "epsilon")
        if epsilon > MAX_EPSILON:
            raise ValueError(f"epsilon must be <= 2**10, got {epsilon!r}")
        c = check.integer(max_positives, "max_positives", minimum=1, maximum=2**20)
        sensitivity = check.positive(sensitivity, "sensitivity")
        if granularity is None:
            grid = _pow2_floor(sensitivity * 2.0**-20)
        else:
            grid = check.positive(granularity, "granularity")
            if _pow2_floor(grid) != grid:
                raise ValueError(f"granularity must be a power of two, got {grid!r}")
        units = Fraction(sensitivity) / Fraction(grid)
        if units > 2**40:
            raise ValueError("granularity is too fine for this sensitivity (more than 2**40 "
                             "grid units)")
        d = math.floor(units) + 1
        eps1 = _round_down(Fraction(epsilon) / (1 + (2 * c) ** (2 / 3)))
        eps2 = _round_down(Fraction(epsilon) - Fraction(eps1))
        t1 = _round_up(Fraction(d) / Fraction(eps1))
        t2 = _round_up(Fraction(2 * c * d) / Fraction(eps2))
        if max(t1, t2) > MAX_DISCRETE_LAPLACE_SCALE:
            raise ValueError("epsilon is too small for max_positives and the granularity: the "
                             "noise scale exceeds the exact sampler's range; pass a coarser "
                             "granularity")
        return cls(epsilon, eps1, eps2, c, grid, d, t1, t2)

    def units(self, value, name):
        """A query answer (or the threshold) in grid units: rint(value / grid), exactly (in
        rationals: no overflow for huge answers)."""
        value = check.real(value, name)
        return round(Fraction(value) / Fraction(self.grid))  # half to even, as rint


def sparse_vector(queries, threshold, *, epsilon, max_positives, sensitivity=1.0,
                  granularity=None, random_state=None, accountant=None):
    """Report which query answers are above a threshold, paying only for the positives.

    The sparse vector technique in the variant of Lyu, Su and Li (2017, Algorithm 1): one noisy
    threshold T + rho for the whole run, fresh noise nu_i for each query, output
    ``q_i + nu_i >= T + rho`` for each query in turn, and stop after ``max_positives`` True
    answers (or when ``queries`` ends). Nothing else is released: not the noisy values, not the
    answers. Works on a stream: the next answer is read only when needed.

    Parameters
    ----------
    queries : iterable of float
        The query answers q_1, q_2, ... on the private data, each of sensitivity
        ``sensitivity``; a list or array is checked entirely before the charge, an iterator
        (a stream) item by item.
    threshold : float
        Public threshold T.
    epsilon : float
        Total privacy parameter, 0 < epsilon <= 2**10.
    max_positives : int
        c >= 1: the run stops after c True answers.
    sensitivity : float, default=1.0
        Public bound on how much each query answer can change between neighbours, > 0.
    granularity : float, optional
        Power of two the answers and the threshold are rounded to (default: the largest power of
        two <= sensitivity * 2**-20).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once, after the arguments (and a finite list of answers) are
        validated and before any noise is drawn.

    Returns
    -------
    ndarray of bool
        One entry per query read: True for "above". Its length is where the run stopped.

    Raises
    ------
    ValueError, TypeError
        Invalid epsilon, max_positives, sensitivity, granularity, threshold, or (for a list or
        array) a non-finite answer, before the charge. A non-finite answer from an iterator
        raises when it is reached, after the charge (the answers so far are not returned).

    Privacy
    -------
    Pure epsilon-DP for the whole run, under the neighbouring relation ``sensitivity`` was
    derived for (add/remove or replace-one): every answer changes by at most ``sensitivity``
    between neighbours, whatever the other answers; the queries may be chosen adaptively.
    Answers and threshold are rounded to the grid, so a rounded answer moves by at most
    D = floor(sensitivity / grid) + 1 units. The noises are exact discrete Laplace:
    rho ~ DLap(D / epsilon1), nu_i ~ DLap(2 c D / epsilon2), epsilon1 = epsilon /
    (1 + (2c)**(2/3)) and epsilon2 = epsilon - epsilon1 (shares rounded down, scales up). Lyu
    et al.'s proof shifts rho by D (a below-threshold answer stays below) and each positive's
    nu_i by 2D (it stays above), which holds verbatim for integer shifts of the discrete
    Laplace: epsilon1 + epsilon2 <= epsilon. The comparisons are exact integer comparisons, so
    floating point plays no part. (Variants that also add noise to the count, reuse rho after a
    positive without it, or release the noisy answers are not private; this is not one.)
    Charged: ``epsilon``, once, also when the run stops early.

    References
    ----------
    .. [LSL17] M. Lyu, D. Su, N. Li, "Understanding the sparse vector technique for
       differential privacy", PVLDB 2017.
    .. [DR14] C. Dwork, A. Roth, "The algorithmic foundations of differential privacy", 2014,
       Section 3.6.

    Examples
    --------
    >>> from dpcore import robust
    >>> out = robust.sparse_vector([1.0, 2.0, 500.0, 3.0, 800.0], 100.0, epsilon=1.0,
    ...                            max_positives=1, random_state=0)
    >>> out.tolist()
    [False, False, True]
    """
    plan = SparseVectorPlan.calibrate(epsilon=epsilon, max_positives=max_positives,
                                      sensitivity=sensitivity, granularity=granularity)
    t_units = plan.units(threshold, "threshold")
    if isinstance(queries, (str, bytes)) or not hasattr(queries, "__iter__"):
        raise TypeError(f"queries must be an iterable of numbers, got {type(queries).__name__}")
    if isinstance(queries, (list, tuple, np.ndarray)):
        answers = check.finite_array(queries, "queries")
        if answers.ndim != 1:
            raise ValueError(f"queries must be one-dimensional, got {answers.ndim} dimensions")
        queries = answers.tolist()

    def draw(rng):
        noisy_threshold = t_units + int(discrete_laplace(plan.threshold_scale, random_state=rng))
        out = []
        positives = 0
        for q in queries:
            if not (isinstance(q, (int, float, np.integer, np.floating)) and math.isfinite(q)):
                raise ValueError("queries must be finite numbers (the budget of this run was "
                                 "charged)")
            nu = int(discrete_laplace(plan.query_scale, random_state=rng))
            above = plan.units(q, "queries") + nu >= noisy_threshold
            out.append(above)
            positives += above
            if positives >= plan.max_positives:
                break  # stop reading the stream
        return np.array(out, dtype=bool)

    return release(draw, cost=Cost(plan.epsilon), accountant=accountant, random_state=random_state,
                   label="robust.sparse_vector")


def above_threshold(queries, threshold, *, epsilon, sensitivity=1.0, granularity=None,
                    random_state=None, accountant=None):
    """:func:`sparse_vector` with ``max_positives=1``: read queries until the first one found
    above the threshold.

    Parameters
    ----------
    queries, threshold, epsilon, sensitivity, granularity, random_state, accountant
        As in :func:`sparse_vector`.

    Returns
    -------
    ndarray of bool
        False for every query read but the last, which is True if one was found above.

    Privacy
    -------
    As :func:`sparse_vector` with c = 1: pure epsilon-DP under the neighbouring relation the
    sensitivity was derived for (add/remove or replace-one): rho ~ DLap(D / epsilon1),
    nu_i ~ DLap(2 D / epsilon2), epsilon1 = epsilon / (1 + 2**(2/3)). Charged: ``epsilon``, once.

    Examples
    --------
    >>> from dpcore import robust
    >>> robust.above_threshold([3.0, 900.0], 100.0, epsilon=1.0, random_state=0).tolist()
    [False, True]
    """
    return sparse_vector(queries, threshold, epsilon=epsilon, max_positives=1,
                         sensitivity=sensitivity, granularity=granularity,
                         random_state=random_state, accountant=accountant)
