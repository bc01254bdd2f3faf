"""Sample-and-aggregate: any estimator run on disjoint random blocks of the records, the block
estimates released by a widened winsorized mean (Nissim, Raskhodnikova, Smith 2007; Smith
2011)."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_down as _round_down
from dpcore._release import Cost, public_arithmetic, release
from dpcore._smooth import _epsilon
from dpcore.curves import BoundedRange, Composed, PureDP
from dpcore.mechanisms import LaplaceMechanism
from dpcore.selection import ExponentialMechanism

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["sample_aggregate", "AGGREGATE_GRID", "WIDEN"]

#: Default number of public grid points the aggregation's quartiles are chosen from.
AGGREGATE_GRID = 2**20 + 1
#: The winsorizing interval is [q1 - WIDEN iqr, q3 + WIDEN iqr] (Smith 2011's widening).
WIDEN = 1.5


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


def sample_aggregate(x: ArrayLike, estimator: Callable[[np.ndarray], Any], *, n_blocks: int,
                     output_range: Any, epsilon: float, grid: int = AGGREGATE_GRID,
                     random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> float | np.ndarray:
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
    Charged: ``epsilon``, once, with the curve of the 2 d quartiles (bounded-range,
    epsilon_c**2/128-zCDP each) and the d means (pure, :class:`dpcore.curves.Composed`), which
    the accountants' zCDP, RDP and PLD analyses use.

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
            output = estimator(records[idx])
            try:
                value = np.asarray(output, dtype=np.float64)
            except (TypeError, ValueError):  # numpy's message quotes the (private) output
                raise ValueError("estimator must return numbers (the budget of this release "
                                 "was charged)") from None
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

    # per coordinate two exponential mechanisms (bounded-range) and one Laplace mean (pure)
    curve = Composed((BoundedRange(_round_down(Fraction(eps_coord) / 4)).repeat(2 * d),
                      PureDP(_round_down(Fraction(eps_coord) / 2)).repeat(d)))
    return release(draw, cost=Cost(epsilon, curve=curve), accountant=accountant,
                   random_state=random_state, label="robust.sample_aggregate")

