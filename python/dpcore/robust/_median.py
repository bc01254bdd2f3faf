"""Smooth-sensitivity releases: the median and the trimmed mean with noise scaled to a
beta-smooth upper bound on their local sensitivity (Nissim, Raskhodnikova, Smith 2007), and the
smooth sensitivity of the median itself, computed in O(n log n) by the ``_robust`` kernel."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _robust
from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore._smooth import (
    SmoothMedianPlan,
    _draw_h4,
    _draw_laplace,
    _exact_sum,
    _Grid,
    _order_stats,
    _records,
    _trim_count,
    _words,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["smooth_sensitivity_median", "median", "trimmed_mean"]

# The smooth bound is computed with beta - _BETA_SLACK and inflated by 1 + _INFLATE: together they
# absorb the kernel's rounding (relative error below 2**-44; see _smooth_units).
_BETA_SLACK = 2.0**-39
_INFLATE = Fraction(1, 2**40)
# Terms of the smooth sensitivity below 2**-_FLOOR_BITS of the width are replaced by that floor.
_FLOOR_BITS = 40


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


def smooth_sensitivity_median(x: ArrayLike, bounds: tuple[float, float], beta: float) -> float:
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
# the smooth-sensitivity releases


def median(x: ArrayLike, *, bounds: tuple[float, float], epsilon: float,
           delta: float | None = None, random_state: RandomStateLike = None,
           accountant: AccountantLike | None = None) -> float:
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


# the trimmed mean: its smooth bound from the order statistics around the kept window


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


def trimmed_mean(x: ArrayLike, *, bounds: tuple[float, float], epsilon: float,
                 delta: float | None = None, trim: float = 0.1,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None) -> float:
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

