"""Propose-test-release (Dwork, Lei 2009): test privately that the data are far from any data
set whose local sensitivity exceeds the caller's proposed bound, then release with noise for that
bound, or refuse (:class:`PTRResult`): the median, the interquartile range and the trimmed mean."""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._floats import round_down as _round_down
from dpcore._floats import round_up as _round_up
from dpcore._release import Cost, public_arithmetic, release
from dpcore._smooth import _delta, _epsilon, _exact_sum, _Grid, _order_stats, _records, _trim_count
from dpcore.mechanisms import LaplaceMechanism, discrete_laplace

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["ptr_median", "ptr_iqr", "ptr_trimmed_mean", "PTRResult"]


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
    def released(self) -> bool:
        return not self.refused


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



def _bound_units(bound, grid):
    """The proposed bound in grid units (dividing by a power of two is exact), capped at twice
    the grid's span: no local sensitivity here exceeds the span, so the cap changes no test."""
    return min(bound / grid.step, 2.0 * (grid.hi - grid.lo))


def _ptr_plan(epsilon, delta, bound, name="sensitivity_bound"):
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
    with public_arithmetic("sensitivity_bound and epsilon"):
        lap = LaplaceMechanism.calibrate(sensitivity=release_sensitivity, epsilon=eps_release)

    def draw(rng):
        # distance is infinite when no data set of this size can exceed the bound: always pass
        if distance + int(discrete_laplace(scale, random_state=rng)) < cut:
            return PTRResult(True, None)
        noisy = float(lap.release(value, random_state=rng))
        return PTRResult(False, min(max(noisy, clamp[0]), clamp[1]))

    return release(draw, cost=Cost(epsilon, delta), accountant=accountant,
                   random_state=random_state, label=label)


_PTR_PRIVACY = """\
The test: g is a lower bound on the number of records to replace before reaching a
data set whose local sensitivity exceeds b (infinite when no data set of n records
does; computed on the clipped records rounded to the grid of 2**-40 of the width, a
per-record map). It satisfies |g(x) - g(y)| <= 1 for
neighbours (it is the first k where a maximum over the k-ball of the data exceeds the bound,
and the k-ball of x lies in the (k + 1)-ball of y), and g(x) >= 1 implies LS(x) <= b.
The mechanism draws Z ~ DLap(2 / epsilon) (exact) and refuses when g + Z < cut, with cut the
smallest integer >= 1 such that P(Z >= cut) < delta (decided with a 2**-40 relative margin):
an (epsilon / 2)-DP test. When g(x) >= 1,
every neighbour's statistic is within b and the value is released with
:func:`dpcore.laplace`'s exact discrete mechanism at epsilon / 2 (sensitivity b);
when g(x) = 0 the test passes with probability < delta. Together: (epsilon, delta)-DP under
**replace-one** neighbours (n is public; the local sensitivities are those of a fixed n)
(Dwork, Lei 2009; Dwork, Roth 2014, Section 7.3). Records are clipped to ``bounds``. Both
outcomes are outputs: a refusal reveals only what the test reveals. Charged:
``(epsilon, delta)``, once, whether it releases or refuses."""


def _ptr_release(function):
    """A public PTR release: its docstring's ``{privacy}`` filled in with the shared Privacy
    text, and the keyword ``bound`` (the old name of ``sensitivity_bound``; ``bound`` elsewhere in
    dpcore is a clamp bound) still accepted for one release, with a DeprecationWarning."""
    fill(privacy=_PTR_PRIVACY)(function)

    @functools.wraps(function)
    def ptr_release(*args, **kwargs):
        if "bound" in kwargs:
            warnings.warn(f"{function.__name__}(bound=...) is deprecated and will be removed in "
                          "the next release; use sensitivity_bound=...", DeprecationWarning,
                          stacklevel=2)
            if "sensitivity_bound" in kwargs:
                raise TypeError(f"{function.__name__}() got both sensitivity_bound and its "
                                "deprecated name bound; pass sensitivity_bound only")
            kwargs["sensitivity_bound"] = kwargs.pop("bound")
        return function(*args, **kwargs)

    return ptr_release


@_ptr_release
def ptr_median(x: ArrayLike, *, bounds: tuple[float, float], sensitivity_bound: float,
               epsilon: float, delta: float, random_state: RandomStateLike = None,
               accountant: AccountantLike | None = None) -> PTRResult:
    """Propose-test-release median: release med(x) + Laplace(b / (epsilon / 2)) if the data are
    privately found far from any data set whose median's local sensitivity exceeds the proposed
    bound b = ``sensitivity_bound``, else refuse.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record), at least one; NaN and infinities
        are rejected.
    bounds : (float, float)
        Public (lower, upper); records are clipped to it (required: a data set at distance k may
        move the median's neighbours up to the bounds).
    sensitivity_bound : float
        The proposed bound b > 0 on the local sensitivity (public: choose it without looking at
        the data, e.g. from n and the expected spread). Its old name ``bound`` is deprecated
        (accepted with a DeprecationWarning until the next release).
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
        Invalid records, bounds, sensitivity_bound, epsilon or delta (naming the parameter),
        before the charge.

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
    >>> r = robust.ptr_median(x, bounds=(0.0, 100.0), sensitivity_bound=1.0, epsilon=1.0,
    ...                       delta=1e-6, random_state=0)
    >>> r.refused, bool(abs(r.value - 50.0) < 5)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, sensitivity_bound)
    units = grid.units(records)
    m = (units.size + 1) // 2
    distance = _median_distance(units, grid, _bound_units(bound, grid))
    value = grid.to_real(int(units[m - 1]))  # a grid point: exact
    return _ptr("robust.ptr_median", distance, value, bound, eps_release, scale, cut,
                (grid.lower, grid.upper), epsilon, delta, random_state, accountant)


@_ptr_release
def ptr_iqr(x: ArrayLike, *, bounds: tuple[float, float], sensitivity_bound: float,
            epsilon: float, delta: float, random_state: RandomStateLike = None,
            accountant: AccountantLike | None = None) -> PTRResult:
    """Propose-test-release interquartile range x_(p3) - x_(p1), p1 = ceil(n / 4),
    p3 = ceil(3 n / 4): released with Laplace(b / (epsilon / 2)) noise if the private test
    passes, else refused.

    Parameters
    ----------
    x, bounds, sensitivity_bound, epsilon, delta, random_state, accountant
        As in :func:`ptr_median` (``sensitivity_bound`` proposes a bound b on the IQR's local
        sensitivity).

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
    >>> r = robust.ptr_iqr(x, bounds=(0.0, 100.0), sensitivity_bound=1.0, epsilon=1.0,
    ...                    delta=1e-6, random_state=0)
    >>> r.refused, bool(abs(r.value - 50.0) < 5)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, sensitivity_bound)
    units = grid.units(records)
    p1, p3 = _iqr_positions(units.size)
    distance = _iqr_distance(units, grid, _bound_units(bound, grid))
    value = float(Fraction(int(units[p3 - 1] - units[p1 - 1])) * Fraction(grid.step))  # exact
    return _ptr("robust.ptr_iqr", distance, value, bound, eps_release, scale, cut,
                (0.0, grid.upper - grid.lower), epsilon, delta, random_state, accountant)


@_ptr_release
def ptr_trimmed_mean(x: ArrayLike, *, bounds: tuple[float, float], sensitivity_bound: float,
                     epsilon: float, delta: float, trim: float = 0.1,
                     random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> PTRResult:
    """Propose-test-release trimmed mean: the mean of x_(h+1), ..., x_(n-h), h = floor(trim n),
    released with Laplace noise for the proposed ``sensitivity_bound`` if the private test
    passes.

    Parameters
    ----------
    x, bounds, sensitivity_bound, epsilon, delta, random_state, accountant
        As in :func:`ptr_median` (``sensitivity_bound`` proposes a bound b on the trimmed mean's
        local sensitivity; about (x_(n-h+1) - x_(h)) / (n - 2h) on the data, so a few times
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
    >>> r = robust.ptr_trimmed_mean(x, bounds=(-1e4, 1e4), sensitivity_bound=20 / 10_000,
    ...                             epsilon=1.0, delta=1e-6, random_state=0)
    >>> r.refused, bool(abs(r.value) < 0.2)
    (False, True)
    """
    records = _records(x)
    grid = _Grid.of(bounds)
    epsilon, delta, bound, eps_release, scale, cut = _ptr_plan(epsilon, delta, sensitivity_bound)
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

