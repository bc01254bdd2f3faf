"""Differentially private statistics: counts, sums, means, variances, quantiles and histograms.

Every function here takes the data ``x`` (any shape; **each element is one record**), the
public bounds that determine the sensitivity, the privacy parameters, ``random_state`` and
``accountant``, and returns a numpy-like result.

Conventions shared by all of them (see each function's Privacy section):

* **Neighbouring relation: add/remove one record.** The number of records n is private; mean,
  variance and standard deviation estimate it with a noisy count (the budget is split between
  the noisy count and the noisy sums). Under replace-one neighbours the guarantees hold with
  (at most) twice the epsilon (a replacement is a removal plus an addition).
* **Bounds are public and required.** Records are clipped to ``bounds`` before anything is
  computed (histograms: records outside ``range`` are not counted, as in numpy); bounds are
  never inferred from the data.
* **Sums are exact.** Each clipped record is rounded to a power-of-two grid (about 2**-36 of the
  noise scale) and the integers are added exactly, so the sensitivity in grid units is exactly
  the rounded bound and cannot be underestimated through floating-point rounding of a long sum
  (Casacuberta et al. 2022). Exact discrete Laplace or discrete Gaussian noise is added to the
  integers; the released floats are post-processing.
* **Accounting.** The accountant is charged the requested ``epsilon`` (and ``delta``) once,
  before anything is drawn; if the budget would be overspent it raises ``BudgetExceeded`` and
  nothing is released. The guarantee actually given is at most what is charged.
* ``random_state=None`` is dpcore's cryptographically secure generator; seeds are for tests.
"""
from __future__ import annotations

from typing import TYPE_CHECKING
import math

import numpy as np

from dpcore import _validation as check
from dpcore._floats import GRID_BITS as GRID_BITS  # public: the sums' grid resolution
from dpcore._release import Cost, release
from dpcore._release.bins import MAX_HISTOGRAM_CELLS as MAX_HISTOGRAM_CELLS  # public limit
from dpcore._release.bins import (
    OUTSIDE,
    BinGrid,
    add_cell_noise,
    histogram_noise,
    postprocess_counts,
    sample_2d,
)
from dpcore._release.quantiles import (
    GRID_METHODS,
    INTERVAL_METHODS,
    MAX_QUANTILE_GRID as MAX_QUANTILE_GRID,  # public limit
    MAX_QUANTILE_RECORDS,
    QUANTILE_BITS as QUANTILE_BITS,  # public: the levels' resolution
    CandidateGrid,
    RunSampler,
    quantile_levels,
    rank_utility,
)
from dpcore._release.sums import (
    IntegerNoise,
    Statistic,
    check_privacy,
    flat_records,
    split_budget,
)
from dpcore.mestimators import perturbed_histogram
from dpcore.selection import ExponentialMechanism

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["count", "sum", "mean", "var", "std", "quantile", "median", "histogram", "histogramdd",
           "perturbed_histogram"]

# ------------------------------------------------------------------------------------------------
# count, sum, mean, var, std


def count(x: ArrayLike, *, epsilon: float, delta: float = 0.0, mechanism: str = "laplace",
          random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> int:
    """Differentially private number of records.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace (scale 1/epsilon) or exact discrete Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    int
        n + Z with Z exact integer noise; can be negative (clip it yourself if needed: that is
        post-processing).

    Raises
    ------
    ValueError
        NaN or infinite records (naming ``x``), epsilon <= 0, delta out of range for the
        mechanism, an unknown mechanism.

    Privacy
    -------
    Neighbouring relation: add/remove one record (the count then has sensitivity 1; it also has
    sensitivity 0 under replace-one). ``"laplace"``: pure epsilon-DP with discrete Laplace noise
    of scale t = 1/epsilon rounded up to a double, so the loss is 1/t <= epsilon, exactly.
    ``"gaussian"``: (epsilon, delta)-DP with the smallest discrete Gaussian sigma whose exact
    delta at sensitivity 1 is <= delta. No bounds are needed. Charged: ``(epsilon, delta)``.

    Examples
    --------
    >>> from dpcore import stats
    >>> n = stats.count([3.0, 1.0, 4.0, 1.0, 5.0], epsilon=1.0, random_state=0)
    >>> isinstance(n, int)
    True
    """
    records = flat_records(x)
    stat = Statistic.make("count", mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(stat.plan.exact(records), accountant=accountant,
                        random_state=random_state, label="stats.count")


def sum(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, delta: float = 0.0,
        mechanism: str = "laplace", random_state: RandomStateLike = None,
        accountant: AccountantLike | None = None) -> float:
    """Differentially private sum of records clipped to ``bounds``.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records
        are clipped to it.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise (see Privacy).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        gamma * (sum_i round(clip(x_i) / gamma) + Z): a multiple of the grid gamma (a power of
        two about 2**-36 of the noise scale), Z exact integer noise. Unbiased for
        the sum of the clipped records rounded to the grid (each record moves by <= gamma/2).

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range for the mechanism.

    Privacy
    -------
    Neighbouring relation: add/remove one record. Records are clipped to ``bounds``; one record
    then changes the sum by at most M = max(|lower|, |upper|). The sum is computed exactly: each
    clipped record is rounded to the grid gamma (a power of two, so the division is exact) and
    the integers are added without rounding, so in grid units the sensitivity is exactly
    D = max(|round(lower/gamma)|, |round(upper/gamma)|) <= M/gamma + 1/2, whatever the number of
    records (floating-point sums can exceed their nominal sensitivity; Casacuberta et al. 2022).
    ``"laplace"``: discrete Laplace noise with scale D/epsilon rounded up: pure epsilon-DP,
    exactly. ``"gaussian"``: discrete Gaussian with the exact CKS delta at (epsilon, D) <= delta:
    (epsilon, delta)-DP. The float output is post-processing of an integer. Under replace-one
    neighbours the sensitivity is upper - lower instead; this function is then 2 epsilon-DP.
    Charged: ``(epsilon, delta)``.

    References
    ----------
    .. [CSVW22] C. Casacuberta, M. Shoemate, S. Vadhan, C. Wagaman, "Widespread underestimation
       of sensitivity in differentially private libraries and how to fix it", CCS 2022.

    Examples
    --------
    >>> from dpcore import stats
    >>> s = stats.sum([0.5, 2.0, 7.5, 100.0], bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(s - 20.0) < 100        # 100.0 is clipped to 10.0; noise scale 10
    True
    """
    records = flat_records(x)
    stat = Statistic.make("sum", bounds=bounds, mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(stat.plan.exact(records), accountant=accountant,
                        random_state=random_state, label="stats.sum")


def mean(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, delta: float = 0.0,
         mechanism: str = "laplace", random_state: RandomStateLike = None,
         accountant: AccountantLike | None = None) -> float:
    """Differentially private mean of records clipped to ``bounds``.

    A noisy sum of the centred records divided by a noisy count (n is private), each released
    with half of the budget.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records
        are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (total; half for the count, half for the sum).
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"`` (split in
        halves too).
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        clip(c + S / max(N, 1), lower, upper), where c = (lower + upper) / 2, S the noisy sum of
        (clip(x_i) - c) and N the noisy count. In [lower, upper]. For large n its bias is
        O(1/n**2) relative (from dividing by a noisy count).

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range for the mechanism.

    Privacy
    -------
    Neighbouring relation: add/remove one record; the number of records is private. Records are
    clipped to ``bounds`` and centred at c = (lower + upper)/2, so one record changes the centred
    sum by at most (upper - lower)/2 and the count by 1. Two releases, each with epsilon/2 (and
    delta/2; shares rounded down so they add up to at most the total): the count as in
    :func:`count` and the centred sum as in :func:`sum` (exact integer accumulation on a
    power-of-two grid, sensitivity charged in grid units, exact discrete noise). By basic
    composition the pair, and the mean computed from it (post-processing, including the clamps),
    is epsilon-DP (``"laplace"``) or (epsilon, delta)-DP (``"gaussian"``). Under replace-one
    neighbours it is 2 epsilon-DP. Charged: ``(epsilon, delta)``, once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.linspace(0.0, 10.0, 1001)
    >>> m = stats.mean(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(m - 5.0) < 0.5
    True
    """
    records = flat_records(x)
    stat = Statistic.make("mean", bounds=bounds, mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(stat.plan.exact(records), accountant=accountant,
                        random_state=random_state, label="stats.mean")


def _variance(x, bounds, epsilon, delta, mechanism, ddof, random_state, accountant, label):
    records = flat_records(x)
    stat = Statistic.make("var", bounds=bounds, mechanism=mechanism, epsilon=epsilon, delta=delta,
                          ddof=ddof)
    return stat.release(stat.plan.exact(records), accountant=accountant,
                        random_state=random_state, label=label)


def var(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, ddof: int = 0,
        delta: float = 0.0, mechanism: str = "laplace", random_state: RandomStateLike = None,
        accountant: AccountantLike | None = None) -> float:
    """Differentially private variance of records clipped to ``bounds``.

    Noisy count, noisy sum and noisy sum of squares of the centred records, each with a third
    of the budget.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records
        are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (total; a third for each of the three releases).
    ddof : int, default=0
        As in numpy: the divisor is N - ddof (N the noisy count), at least 1.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"`` (split in
        thirds too).
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        With N = max(noisy count, 1), S1 and S2 the noisy sums of y_i = clip(x_i) - c and
        y_i**2 (c the middle of the bounds): (S2/N - (S1/N)**2) * N / max(N - ddof, 1),
        clipped to [0, ((upper - lower)/2)**2 * N / max(N - ddof, 1)].

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range, ddof < 0.

    Privacy
    -------
    Neighbouring relation: add/remove one record; the number of records is private. Records are
    clipped to ``bounds`` and centred at c = (lower + upper)/2, so one record changes the count
    by 1, the centred sum by at most h = (upper - lower)/2 and the sum of squares by at most
    h**2. Three releases with epsilon/3 (and delta/3) each (shares rounded down), each summed
    exactly on its own power-of-two grid with the sensitivity charged in grid units (see
    :func:`sum`) and exact discrete Laplace or Gaussian noise. By basic composition the result
    (post-processing of the three) is epsilon-DP (``"laplace"``) or (epsilon, delta)-DP
    (``"gaussian"``). Under replace-one neighbours it is 2 epsilon-DP. Charged:
    ``(epsilon, delta)``, once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.tile([0.0, 10.0], 500)                 # variance 25
    >>> v = stats.var(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(v - 25.0) < 2.0
    True
    """
    return _variance(x, bounds, epsilon, delta, mechanism, ddof, random_state, accountant,
                     "stats.var")


def std(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, ddof: int = 0,
        delta: float = 0.0, mechanism: str = "laplace", random_state: RandomStateLike = None,
        accountant: AccountantLike | None = None) -> float:
    """Differentially private standard deviation: the square root of :func:`var`.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required; records are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (split in thirds as in :func:`var`).
    ddof : int, default=0
        As in numpy.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        sqrt of the private variance, in [0, (upper - lower)/2] for ddof=0.

    Raises
    ------
    ValueError
        As :func:`var`.

    Privacy
    -------
    Exactly that of :func:`var` (the square root is post-processing): add/remove neighbours,
    records clipped to ``bounds``, epsilon-DP (``"laplace"``) or (epsilon, delta)-DP
    (``"gaussian"``) by basic composition of a noisy count, sum and sum of squares with a third
    of the budget each. Charged: ``(epsilon, delta)``, once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> s = stats.std(np.tile([0.0, 10.0], 500), bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(s - 5.0) < 0.5
    True
    """
    return math.sqrt(_variance(x, bounds, epsilon, delta, mechanism, ddof, random_state,
                               accountant, "stats.std"))


# ------------------------------------------------------------------------------------------------
# quantiles


def quantile(x: ArrayLike, q: ArrayLike, *, epsilon: float, bounds: ArrayLike | None = None,
             grid: int | ArrayLike | str | None = None, method: str | None = None,
             random_state: RandomStateLike = None, accountant: AccountantLike | None = None
             ) -> float | np.ndarray:
    """Differentially private quantile(s) with the exponential mechanism.

    The candidates, chosen with ``grid``:

    * ``grid=None`` (default): the finest evenly spaced public grid doubles can hold: 2**k + 1
      points from lower to upper (both included), k <= 52 the largest with a spacing
      (upper - lower) / 2**k at least the spacing of doubles at the larger |bound| (2**52 + 1
      points for bounds such as (0, 10)); the output is ``lower`` plus a multiple of that
      spacing, drawn with the exact sampler. The precision is not capped by the grid: it is
      the data's and the noise's.
    * ``grid=`` an int G (2 <= G <= ``MAX_QUANTILE_GRID`` = 2**52 + 1; G evenly spaced points)
      or an increasing array of points within the bounds: the exponential mechanism over these
      public points, u(g) = -|#{x_i < g} - q n|. With ``method="exact"`` (the default) the
      output law is exactly the mechanism's, in floating point too. The work is O(n log n)
      whatever G (see Notes).
    * ``grid="continuous"``: Smith's mechanism over the continuum [lower, upper]. The sorted
      clipped records cut it into n + 1 intervals; interval i (i records to its left) is chosen
      with probability proportional to length_i * exp(epsilon u_i / (2 Delta_q)),
      u_i = -|i - q n|, Delta_q = max(q, 1 - q), and the output is a uniform point inside it.
      It relies on floating point and its output's low-order bits depend on the data (see
      Privacy): use it only when that is acceptable.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    q : float or array_like of float
        Quantile level(s) in [0, 1]; each is used as the nearest multiple of 2**-20 (so the
        utilities are exact; a change below 5e-7 in the level).
    epsilon : float
        Total privacy parameter, > 0, split equally over the levels in ``q``.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records
        are clipped to it; outputs lie in it.
    grid : None, int, array_like of float or "continuous", default=None
        None: the finest evenly spaced grid (above). An int G or an array: a public grid
        (integer grids are never materialised). "continuous": intervals between the sorted
        records (not floating-point safe).
    method : str, optional
        Sampler of the selection (see :func:`dpcore.selection.exponential`). Grid:
        ``"exact"`` (default), ``"gumbel"`` or ``"inverse-cdf"``. Continuous: ``"gumbel"``
        only (the default).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator (with
        ``grid="continuous"`` it also draws the uniform point inside the chosen interval).
        Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` (pure) before anything is drawn; if the budget would be overspent it
        raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float or ndarray
        Same shape as ``q``.

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), q outside [0, 1],
        epsilon <= 0, an invalid grid or method, more than 2**33 records, bounds whose spread
        overflows the continuous mechanism's scores.

    Privacy
    -------
    Guarantee: pure epsilon-DP in total; each of the m levels is an (epsilon/m)-DP exponential
    mechanism (share rounded down), composed sequentially. Neighbouring relation: add/remove
    one record (n is private).

    Sensitivity: records are clipped to ``bounds``. For every candidate y, adding a record moves
    #{x_i < y} - q n by 1 - q (record below y) or by -q (record at or above y), and removing one
    by the opposite, so u(y) = -|#{x_i < y} - q n| moves by at most Delta_q = max(q, 1 - q) <= 1.
    The exponential mechanism with weights exp(epsilon u / (2 Delta_q)) is then epsilon-DP
    (McSherry-Talwar); for the median that is exp(epsilon u). (Smith's and diffprivlib's
    Delta = 1 is valid too, with up to twice the noise.) Under replace-one neighbours n is fixed
    and u moves by at most 1, so the same release is epsilon / max(q, 1 - q) <= 2 epsilon-DP. The
    utilities are exact: the level is a multiple of 2**-20, so 2**20 (r - q n) is an integer
    below 2**53.

    Grid (the default, or ``grid`` given): the candidates are public points fixed before seeing
    the data, so the output reveals nothing through its representation; with
    ``method="exact"`` (the default) the law is exactly P(g) proportional to exp(c u(g)) for
    the exact utilities (c <= epsilon / (2 m Delta_q), rounded down), so the guarantee holds in
    floating point (see Notes for how it is drawn). ``"gumbel"`` and ``"inverse-cdf"`` match
    that law up to rounding.

    A public n does not help here (so there is no ``n=``): with n fixed the utility
    -|#{x_i < g} - q n| moves by up to 1 when a record is added, more than max(q, 1 - q).

    ``grid="continuous"`` (Smith 2011): the mechanism is the exponential mechanism over [lower, upper]
    with Lebesgue base measure; the output density is proportional to exp(c u(y)),
    c = epsilon / (2 Delta_q), constant between consecutive records, so choosing an interval
    with weight length * exp(c u) and then a uniform point in it has exactly that density. It
    is implemented with the ``"gumbel"`` exponential mechanism on u_i + log(length_i) / c (so
    the score is c u_i + log(length_i)); empty intervals (ties, clipped records at the bounds)
    get -inf. The uniform point is drawn from ``random_state`` (the secure generator by
    default). **This path relies on floating point**: the lengths, their logarithms and the
    Gumbel noise are rounded, and the output is a uniform double whose low-order bits depend on
    the interval's endpoints (data points), a Mironov-type channel not covered by the proof:
    on one data set every output was a multiple of 2**-52, on a neighbour about half were not.

    Charged: ``epsilon``, once.

    Notes
    -----
    The utility of a grid point depends only on its rank #{x_i < g}, so the grid falls into at
    most n + 1 runs of equal utility; run r (m_r points) has probability proportional to
    m_r exp(c u_r) and the point is uniform inside it. It is drawn exactly without visiting the
    G points: the exact exponential mechanism proposes run r with the utility
    u'_r >= u_r + ln(m_r) / c (from the correctly rounded logarithm, with a proven margin),
    the proposal is accepted with probability m_r exp(c u_r) / exp(c u'_r) <= 1 (an exact
    comparison of a real uniform with an exponential of a rational; about 1 - 2**-40), and a
    uniform point of the run is drawn as an exact integer. Accepted proposals have exactly the
    law above. The run time is not constant: it depends on n and, rarely, on a rejection.

    References
    ----------
    .. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal convergence
       rates", STOC 2011.
    .. [MT07] F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.arange(1000.0)
    >>> m = stats.quantile(x, 0.5, epsilon=1.0, bounds=(0.0, 1000.0), random_state=0)
    >>> bool(abs(m - 500.0) < 50)
    True
    >>> qs = stats.quantile(x, [0.25, 0.75], epsilon=1.0, bounds=(0.0, 1000.0), grid=1001,
    ...                     random_state=0)
    >>> qs.shape, bool(abs(qs[0] - 250.0) < 50)
    ((2,), True)
    """
    return _quantile(x, q, epsilon, bounds, grid, method, random_state, accountant,
                     "stats.quantile")


def _quantile(x, q, epsilon, bounds, grid, method, random_state, accountant, label):
    records = flat_records(x)
    lower, upper = check.bounds_pair(bounds, "bounds")
    epsilon = check.positive(epsilon, "epsilon")
    shape, numerators = quantile_levels(q)
    if records.size >= MAX_QUANTILE_RECORDS:
        raise ValueError("x must have fewer than 2**33 records for quantile")
    if isinstance(grid, str):
        if grid != "continuous":
            raise ValueError(f"grid must be None, an int, an array or 'continuous', got {grid!r}")
        method = "gumbel" if method is None else method
        if method not in INTERVAL_METHODS:
            raise ValueError(
                f"method must be 'gumbel' for the continuous mechanism (grid='continuous'), got "
                f"{method!r}; use a grid for 'exact'"
            )
        candidates = None
    else:
        method = "exact" if method is None else method
        if method not in GRID_METHODS:
            raise ValueError(
                f"method must be one of {', '.join(map(repr, GRID_METHODS))} with a grid, "
                f"got {method!r}"
            )
        candidates = CandidateGrid(grid, lower, upper)
    eps_each = split_budget(epsilon, numerators.size)
    # one mechanism per distinct level: sensitivity max(q, 1 - q), exact (q = k / 2**20)
    mechs = {
        int(k): ExponentialMechanism.calibrate(
            sensitivity=max(int(k), 2**QUANTILE_BITS - int(k)) / 2.0**QUANTILE_BITS,
            epsilon=eps_each, method=method,
        )
        for k in np.unique(numerators)
    }
    if candidates is None:
        # every length is <= upper - lower, so this public check keeps every score finite
        width = upper - lower
        smallest = min(m.scale for m in mechs.values())
        if not math.isfinite(width) or not math.isfinite(math.log(width) / smallest):
            raise ValueError(
                f"bounds ({lower!r}, {upper!r}) with epsilon={epsilon!r} overflow the interval "
                "mechanism's scores; use a grid"
            )
    z = np.sort(np.clip(records, lower, upper))
    n = z.size
    if candidates is None:
        edges = np.concatenate([[lower], z, [upper]])
        lengths = np.diff(edges)
        with np.errstate(divide="ignore"):
            log_lengths = np.log(lengths)  # -inf for empty intervals
        ranks = np.arange(n + 1, dtype=np.int64)
    else:
        runs = RunSampler(candidates, z)

    def draw(rng):
        out = np.empty(numerators.size)
        for j, k in enumerate(numerators):
            mech = mechs[int(k)]
            if candidates is None:
                u = rank_utility(ranks, int(k), n) + log_lengths / mech.scale
                index = mech.select(u, random_state=rng)
                out[j] = rng.uniform(edges[index], edges[index + 1])
            else:
                out[j] = candidates.point(runs.draw(mech, int(k), rng))
        return out

    out = release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                  label=label).reshape(shape)
    return float(out[()]) if out.ndim == 0 else out


def median(x: ArrayLike, *, epsilon: float, bounds: ArrayLike | None = None,
           grid: int | ArrayLike | str | None = None, method: str | None = None,
           random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> float:
    """Differentially private median: :func:`quantile` at q = 0.5.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    epsilon : float
        Privacy parameter, > 0.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required; records are clipped to it.
    grid : None, int, array_like of float or "continuous", default=None
        None: the finest evenly spaced public grid; an int or an array: a public grid;
        "continuous": Smith's interval mechanism (not floating-point safe). See
        :func:`quantile`.
    method : str, optional
        As in :func:`quantile`.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` before anything is drawn; refusal releases nothing.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        As :func:`quantile`.

    Privacy
    -------
    As :func:`quantile` with one level: pure epsilon-DP under add/remove neighbours (2 epsilon
    under replace-one), records clipped to ``bounds``. The utility -|#{x_i < y} - n/2| moves by
    at most 1/2 when a record is added or removed, so the weights are exp(epsilon u). The
    grid mechanism (the default) with ``method="exact"`` has exactly the mechanism's law; the
    continuous one (``grid="continuous"``) relies on floating point. Charged: ``epsilon``.

    Examples
    --------
    >>> from dpcore import stats
    >>> m = stats.median([1.0, 2.0, 3.0, 4.0, 100.0] * 200, epsilon=1.0, bounds=(0.0, 10.0),
    ...                  grid=101, random_state=0)
    >>> 2.0 <= m <= 4.0
    True
    """
    return _quantile(x, 0.5, epsilon, bounds, grid, method, random_state, accountant,
                     "stats.median")


# ------------------------------------------------------------------------------------------------
# histogram


def _bin_edges(bins, value_range):
    """Validate public bins: an int with a required range, or an explicit edge array.
    Returns (bins, range) in the form numpy.histogram gets them."""
    if isinstance(bins, (str, bytes)):
        raise ValueError(
            f"bins must be an int or an array of edges, got {bins!r}: rules such as 'auto' look "
            "at the data"
        )
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
        bins = check.integer(bins, "bins", minimum=1)
        lower, upper = check.bounds_pair(value_range, "range")
        return bins, (lower, upper)
    edges = check.finite_array(bins, "bins")
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError(
            f"bins must be an int >= 1 or a 1-d array of at least 2 edges, got shape {edges.shape}"
        )
    if not np.all(np.diff(edges) > 0):
        raise ValueError("bins must be strictly increasing when given as edges")
    if value_range is not None:
        lower, upper = check.bounds_pair(value_range, "range")
        if lower != edges[0] or upper != edges[-1]:
            raise ValueError(
                f"range ({lower!r}, {upper!r}) disagrees with the edges given in bins "
                f"({edges[0]!r}, {edges[-1]!r}); give one or make them agree"
            )
    return edges, None


def histogram(x: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
              epsilon: float, delta: float = 0.0, mechanism: str = "laplace",
              nonnegative: bool = False, random_state: RandomStateLike = None,
              accountant: AccountantLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Differentially private histogram: exact integer noise on every bin, empty bins included.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bins : int or array_like of float
        Public: the number of equal-width bins over ``range``, or the increasing bin edges.
        Rules that look at the data (``"auto"`` and the like) are refused.
    range : (float, float) or None
        Public (lower, upper) of the bins. Required when ``bins`` is an int (never inferred from
        the data); with explicit edges it may be None or must equal (edges[0], edges[-1]).
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace (scale 1/epsilon) or exact discrete Gaussian noise per bin.
    nonnegative : bool, default=False
        Post-processing: the non-negative counts closest (least squares) to the noisy ones with
        the same total (the noisy total, 0 if negative; Lee, Wang, Kifer 2015): unlike
        clamping negatives to 0 it does not inflate the total. Returns float64 counts.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    counts : ndarray of int64
        Noisy counts, one per bin (as ``numpy.histogram``'s first output).
    edges : ndarray of float64
        The bin edges, equal to ``numpy.histogram(x, bins=bins, range=range)[1]``.

    Raises
    ------
    ValueError
        Missing ``range`` with an int ``bins`` (naming ``range``), data-dependent or invalid
        bins, NaN or infinite records (naming ``x``), epsilon <= 0, delta out of range.

    Privacy
    -------
    Neighbouring relation: add/remove one record. Bins are numpy's (half-open, the last one
    closed); records outside the range are not counted (as in numpy; nothing is clipped into
    the edge bins). One record is in at most one bin, so the vector of counts has L1 and L2
    sensitivity 1. Every bin, empty or not, gets independent exact integer noise, so the set of
    bins with nonzero output reveals nothing. ``"laplace"``: discrete Laplace with scale
    1/epsilon rounded up: pure epsilon-DP exactly. ``"gaussian"``: only one coordinate moves,
    by 1, so the exact scalar CKS delta applies: (epsilon, delta)-DP. ``nonnegative`` is
    post-processing. Under replace-one neighbours the sensitivity is 2: 2 epsilon-DP. Charged:
    ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.concatenate([np.full(500, 0.5), np.full(300, 2.5)])
    >>> counts, edges = stats.histogram(x, bins=4, range=(0.0, 4.0), epsilon=1.0, random_state=0)
    >>> edges
    array([0., 1., 2., 3., 4.])
    >>> bool(abs(counts[0] - 500) < 30 and abs(counts[1]) < 30)
    True
    """
    records = flat_records(x)
    bins, value_range = _bin_edges(bins, range)
    mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise TypeError(f"nonnegative must be True or False, got {type(nonnegative).__name__}")
    noise = IntegerNoise.calibrate(mechanism, 1, epsilon, delta)
    grid = BinGrid.make_1d(bins, value_range)
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(records[:, None], counts, False, name="x")
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon, delta),
            accountant=accountant, random_state=random_state, label="stats.histogram")
    return postprocess_counts(counts, nonnegative, False), grid.edges[0]


# ------------------------------------------------------------------------------------------------
# d-dimensional histogram (kernel _histogram)

def histogramdd(sample: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
                epsilon: float, delta: float = 0.0, mechanism: str = "laplace",
                outside: str = "drop", relation: str = "add_remove", nonnegative: bool = False,
                consistent: bool = False, random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Differentially private d-dimensional histogram: exact integer noise on every cell.

    Parameters
    ----------
    sample : array_like, shape (N, D) or (N,)
        The records, one row each (a 1-d array is N records in one dimension, as in numpy).
        float32 and float64 are binned as they are; other real types as float64. NaN and
        infinities are rejected.
    bins : int, sequence of ints or sequence of edge arrays
        Public, as ``numpy.histogramdd``: the number of equal-width bins (for every axis or per
        axis) over ``range``, or per-axis increasing edges. Rules that look at the data are
        refused.
    range : sequence of (float, float), optional
        Public (lower, upper) per axis; required for every axis whose bins are given as an int
        (never inferred from the data). For D = 1 a single pair is accepted.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default=0.0
        0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise in every cell.
    outside : {"drop", "clip"}, default="drop"
        Records with a coordinate outside its range: not counted (``"drop"``, as numpy), or
        counted in the nearest edge cell of that axis (``"clip"``).
    relation : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation the noise is calibrated for (L1 sensitivity 1 or 2).
    nonnegative : bool, default=False
        Post-processing: the Euclidean projection of the noisy counts onto non-negative vectors
        with the same total (the noisy total, 0 if negative; Lee, Wang, Kifer 2015, least
        squares): unlike clamping negatives to 0 it does not inflate the total. Returns
        float64 counts.
    consistent : bool, default=False
        The same projection (the name of earlier versions; either flag turns it on).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    counts : ndarray of int64 (float64 with ``consistent=True``), shape = number of bins per axis
        The noisy counts.
    edges : list of ndarray of float64
        The bin edges per axis, equal to ``numpy.histogramdd``'s.

    Raises
    ------
    ValueError
        A missing ``range`` for an int ``bins`` (naming it), invalid bins, NaN or infinite
        records (naming ``sample``), epsilon <= 0, delta out of range, an unknown ``outside``
        or ``relation``, more than 2**28 cells (``MAX_HISTOGRAM_CELLS``).
    TypeError
        Non-numeric ``sample``; non-bool ``nonnegative``/``consistent``.

    Privacy
    -------
    Pure epsilon-DP (``"laplace"``) or (epsilon, delta)-DP (``"gaussian"``) under the chosen
    neighbouring relation (add/remove one record by default, or replace-one). The cell of a record depends only on that record and the public
    edges (clipped with ``outside="clip"``, else possibly in no cell), so adding or removing one
    record changes one count by 1 (L1 = L2 sensitivity 1) and replacing one changes two counts
    by 1 (L1 sensitivity 2; Laplace only). Every cell, empty or not, gets independent exact
    integer noise (discrete Laplace of scale sensitivity/epsilon rounded up, or the CKS-
    calibrated discrete Gaussian), so which cells are occupied is not revealed. The noise is
    drawn after the counts are final; ``nonnegative`` and ``consistent`` use only the noisy
    counts (post-processing). Charged: ``(epsilon, delta)``.

    Notes
    -----
    Binning is ``numpy.histogramdd``'s exactly (half-open cells, the last one per axis closed;
    equal-width bins are guessed arithmetically and corrected against the edges), done by the
    ``_histogram`` kernel in one pass over the data without the GIL.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> xy = np.column_stack([np.full(400, 0.25), np.full(400, 0.75)])
    >>> counts, edges = stats.histogramdd(xy, bins=2, range=[(0, 1), (0, 1)], epsilon=1.0,
    ...                                   random_state=0)
    >>> counts.shape
    (2, 2)
    >>> bool(abs(counts[0, 1] - 400) < 30 and abs(counts[1, 0]) < 30)
    True
    """
    arr = sample_2d(sample)
    grid = BinGrid.make(bins, range, arr.shape[1])
    mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be 'drop' or 'clip', got {outside!r}")
    noise = histogram_noise(mechanism, relation, epsilon, delta)
    for flag, name in ((nonnegative, "nonnegative"), (consistent, "consistent")):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {type(flag).__name__}")
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(arr, counts, outside == "clip")
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon, delta),
            accountant=accountant, random_state=random_state, label="stats.histogramdd")
    return postprocess_counts(counts, nonnegative, consistent).reshape(grid.shape), list(grid.edges)

