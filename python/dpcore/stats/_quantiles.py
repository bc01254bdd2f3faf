"""Private quantiles and medians: the exponential mechanism over a public grid (exact, the
default) or Smith's interval mechanism."""
from __future__ import annotations

from typing import TYPE_CHECKING
import math

import numpy as np

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore._release.quantiles import (
    FLIP_METHOD,
    GRID_METHODS,
    INTERVAL_METHODS,
    MAX_FLIP_GRID,
    MAX_QUANTILE_RECORDS,
    QUANTILE_BITS,
    CandidateGrid,
    GridWindow,
    LevelTree,
    PointUtilities,
    RunSampler,
    quantile_levels,
    rank_utility,
)
from dpcore._release.sums import flat_records, split_budget
from dpcore.curves import BoundedRange, PrivacyCurve
from dpcore.selection import EXACT_PERMUTE_AND_FLIP, ExponentialMechanism

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["quantile", "median"]


def quantile(x: ArrayLike, q: ArrayLike, *, epsilon: float, bounds: ArrayLike | None = None,
             grid: int | ArrayLike | str | None = None, method: str | None = None,
             split: str = "auto", random_state: RandomStateLike = None,
             accountant: AccountantLike | None = None) -> float | np.ndarray:
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
        Total privacy parameter, > 0, shared by the levels in ``q`` (see ``split``).
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
        ``"exact"`` (default), ``"gumbel"`` or ``"inverse-cdf"`` (the exponential mechanism),
        or ``"permute-and-flip"``: exact permute-and-flip over the grid points
        (:func:`dpcore.selection.permute_and_flip`; one coin per point, so ``grid=`` an int or
        an array of at most 2**22 + 1 points). Continuous: ``"gumbel"`` only (the default).
        Permute-and-flip is more accurate than the exponential mechanism when a grid step
        spans about 1 to 3 noise scales of rank (up to ~15% lower RMSE), and worse, without
        bound, when it spans many (the grid's rounding dominates): the right grid depends on
        the data's density, which is private, so it is not the default (see Notes).
    split : {"auto", "recursive", "equal"}, default="auto"
        How several levels share ``epsilon``. ``"equal"``: each level is an independent
        release with epsilon / m over all the records. ``"recursive"`` (m distinct levels, on a
        grid): the levels are sorted and released in ceil(log2(m + 1)) rounds of epsilon /
        rounds each: the middle level over all the records, then the middle level of each half
        over the records between the released neighbours (its level relative to theirs), and
        so on; each output lies between its neighbours', so the results come out sorted
        (Kaplan, Schnapp and Stemmer's recursive scheme). ``"auto"``: ``"recursive"`` for 3 or
        more distinct levels on a grid, ``"equal"`` otherwise (one or two levels, a repeated
        level, ``grid="continuous"``). Chosen on development data: RMSE over the levels 0.09-0.97
        times the equal split's, median 0.41-0.56 (see Notes).
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
        epsilon <= 0, an invalid grid or method, an invalid ``split`` (or ``"recursive"``
        with a repeated level or ``grid="continuous"``), more than 2**33 records, bounds whose
        spread overflows the continuous mechanism's scores.

    Privacy
    -------
    Guarantee: pure epsilon-DP in total. Neighbouring relation: add/remove one record (n is
    private). With ``split="equal"`` each of the m levels is an (epsilon/m)-DP exponential
    mechanism (share rounded down), composed sequentially. With ``split="recursive"`` there
    are R = ceil(log2(m + 1)) rounds of epsilon / R each (rounded down), composed
    sequentially; within a round the nodes run on disjoint sets of records (those between
    the neighbours released in earlier rounds, a partition fixed by public outputs: x below
    the lower neighbour's output, at or above it and below the upper one's, ...), so a record
    added or removed changes the input of one node per round (parallel composition) and the
    round is (epsilon / R)-DP. A node releases the level q' = (q - q_lo) / (q_hi - q_lo) of
    its n' records (q_lo, q_hi its neighbours' levels, 0 and 1 at the ends; q' = N / D in
    lowest terms) over the public grid points between its neighbours' outputs, with the
    exact utility -|D #{x_i < g} - N n'| (integers below 2**53), whose sensitivity is
    max(N, D - N): adding one of its records moves D r by D or 0 and N n' by N.

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
    that law up to rounding. ``method="permute-and-flip"``: permute-and-flip over the same
    public points with the same exact utilities and the same scale c; it is epsilon-DP for
    utilities of sensitivity Delta_q (McKenna-Sheldon 2020, the factor 2 kept: the utility is
    not monotone under add/remove), and its law is exactly permute-and-flip's, in floating point
    too (every acceptance an exact Bernoulli(exp(-gamma)) draw, gamma = c (max u - u(g))
    exactly).

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

    Charged: ``epsilon``, once. Every exponential-mechanism draw is also bounded-range, so
    (not for permute-and-flip) the charge carries the curve of the m levels (equal split) or R
    rounds (recursive; a round changes one node's input) as bounded-range mechanisms at their
    share (:class:`dpcore.curves.BoundedRange`, epsilon**2/8-zCDP each), which the
    accountants' zCDP, RDP and PLD analyses use.

    Notes
    -----
    The utility of a grid point depends only on its rank #{x_i < g}, so the grid falls into at
    most n + 1 runs of equal utility; run r (m_r points) has probability proportional to
    m_r exp(c u_r) and the point is uniform inside it. It is drawn exactly without visiting the
    G points: the exact exponential mechanism proposes run r with the utility
    u'_r >= u_r + ln(m_r) / c (from the correctly rounded logarithm, with a proven margin),
    the proposal is accepted with probability m_r exp(c u_r) / exp(c u'_r) <= 1 (an exact
    comparison of a real uniform with an exponential of a rational; the loss is at most
    2**-44 ln(m_r) plus a few rounding units of c u'_r, so rejections are rare), and a
    uniform point of the run is drawn as an exact integer. Accepted proposals have exactly the
    law above. The run time is not constant: it depends on n and, rarely, on a rejection.

    ``split="auto"`` was chosen on development data (``bench/dev_stats.py --part levels``: the
    data sets below, levels (0.25, 0.5, 0.75), (0.1, 0.25, 0.5, 0.75, 0.9) and the nine
    deciles; 64 cells each): the recursive scheme's RMSE over the levels was below the equal
    split's in all 192 cells (median ratio 0.54, 0.56 and 0.41; the largest 0.88, 0.97 and
    0.84): fewer rounds than levels, a smaller sensitivity inside a node, and a level's
    candidates limited to the range between its neighbours (no far-off outputs in sparse
    tails). Each output inherits part of its neighbours' rank error (a fraction q' or 1 - q'
    of it), which the larger share of the budget more than pays for from 3 levels on.

    The default (the exponential mechanism on the finest grid) was chosen on development data
    (``bench/dev_stats.py --part quantiles``: gamma, uniform, bimodal and exponential data on
    [0, 1], n from 300 to 10**5, epsilon 0.1-5, disjoint from the benchmark's): exact
    permute-and-flip over 2**10 + 1, 2**13 + 1 and 2**16 + 1 evenly spaced points had median
    RMSE ratios 1.11, 1.03 and 1.00 to it but maxima 101, 9.7 and 1.7 (large n epsilon, where
    the grid's rounding dominates); on a grid that fine permute-and-flip and the exponential
    mechanism have nearly the same law (many points share each rank).

    References
    ----------
    .. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal convergence
       rates", STOC 2011.
    .. [MT07] F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS 2007.
    .. [KSS22] H. Kaplan, S. Schnapp, U. Stemmer, "Differentially private approximate
       quantiles", ICML 2022.

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
    return _quantile(x, q, epsilon, bounds, grid, method, split, random_state, accountant,
                     "stats.quantile")


SPLITS = ("auto", "recursive", "equal")


def _use_recursion(split: str, numerators: np.ndarray, candidates: CandidateGrid | None) -> bool:
    """Whether the levels are released by the recursive scheme (a public decision)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}, got {split!r}")
    distinct = np.unique(numerators).size == numerators.size
    if split == "recursive":
        if candidates is None:
            raise ValueError("split='recursive' needs a grid (not grid='continuous')")
        if not distinct:
            raise ValueError("split='recursive' needs distinct levels q")
        return True
    # auto: when it has fewer rounds than the levels (3 levels or more), on a grid
    return split == "auto" and candidates is not None and distinct and numerators.size >= 3


def _quantile(x, q, epsilon, bounds, grid, method, split, random_state, accountant, label):
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
        if method == FLIP_METHOD and candidates.size > MAX_FLIP_GRID:
            raise ValueError(
                f"grid must have at most {MAX_FLIP_GRID} points for method {FLIP_METHOD!r} (one "
                f"coin per point), got {candidates.size}; pass grid= an int or an array"
            )
    if _use_recursion(split, numerators, candidates) and candidates is not None:
        return _recursive(records, shape, numerators, epsilon, lower, upper, candidates, method,
                          random_state, accountant, label)
    eps_each = split_budget(epsilon, numerators.size)
    # one mechanism per distinct level: sensitivity max(q, 1 - q), exact (q = k / 2**20)
    mechs = {
        int(k): ExponentialMechanism.calibrate(
            sensitivity=max(int(k), 2**QUANTILE_BITS - int(k)) / 2.0**QUANTILE_BITS,
            epsilon=eps_each, method=EXACT_PERMUTE_AND_FLIP if method == FLIP_METHOD else method,
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
    elif method == FLIP_METHOD:
        points = PointUtilities(candidates, z)
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
            elif method == FLIP_METHOD:
                out[j] = candidates.point(mech.select(points.of(int(k)), random_state=rng))
            else:
                out[j] = candidates.point(runs.draw(mech, int(k), rng))
        return out

    out = release(draw, cost=Cost(epsilon, curve=_rounds_curve(method, eps_each,
                                                             numerators.size)),
                  accountant=accountant, random_state=random_state, label=label).reshape(shape)
    return float(out[()]) if out.ndim == 0 else out


def _rounds_curve(method: str, eps_each: float, rounds: int) -> PrivacyCurve | None:
    """The curve of ``rounds`` exponential mechanisms of at most ``eps_each`` each (a round of
    the recursive scheme runs them on disjoint records: one changes, so the round is one such
    mechanism): bounded-range (epsilon**2/8-zCDP); None for permute-and-flip (pure only)."""
    return None if method == FLIP_METHOD else BoundedRange(eps_each).repeat(rounds)


def _recursive(records: np.ndarray, shape: tuple[int, ...], numerators: np.ndarray,
               epsilon: float, lower: float, upper: float, candidates: CandidateGrid,
               method: str, random_state: RandomStateLike, accountant: AccountantLike | None,
               label: str) -> float | np.ndarray:
    """The recursive scheme: the middle level over all records, then each half of the levels
    within the records between its released neighbours (see ``split`` in :func:`quantile`)."""
    order = np.argsort(numerators, kind="stable")
    levels = [int(k) for k in numerators[order]]
    tree = LevelTree(len(levels))
    eps_each = split_budget(epsilon, tree.depth)
    full = 2**QUANTILE_BITS
    # per node: the level relative to its neighbours' levels, N / D in lowest terms, and its
    # mechanism (sensitivity max(N, D - N) for the utility -|D r - N n| of the node's records)
    nodes = []
    for mid, _, below, above in tree.nodes:
        k_lo = 0 if below < 0 else levels[below]
        k_hi = full if above == len(levels) else levels[above]
        d, n_ = k_hi - k_lo, levels[mid] - k_lo
        g = math.gcd(d, n_)
        d, n_ = d // g, n_ // g
        mech = ExponentialMechanism.calibrate(
            sensitivity=float(max(n_, d - n_)), epsilon=eps_each,
            method=EXACT_PERMUTE_AND_FLIP if method == FLIP_METHOD else method)
        nodes.append((mid, below, above, n_, d, mech))
    z = np.sort(np.clip(records, lower, upper))
    last = candidates.size - 1

    def draw(rng: np.random.Generator) -> np.ndarray:
        index = np.empty(len(levels), dtype=np.int64)
        values = np.empty(len(levels))
        for mid, below, above, n_, d, mech in nodes:
            first = 0 if below < 0 else int(index[below])
            final = last if above == len(levels) else int(index[above])
            # the records between the neighbours: x >= y_below and x < y_above
            start = 0 if below < 0 else int(np.searchsorted(z, values[below], side="left"))
            stop = z.size if above == len(levels) else int(
                np.searchsorted(z, values[above], side="left"))
            window = GridWindow(candidates, first, final)
            subset = z[start:stop]
            if method == FLIP_METHOD:
                chosen = mech.select(PointUtilities(window, subset).of(n_, d), random_state=rng)
            else:
                chosen = RunSampler(window, subset).draw(mech, n_, rng, denominator=d)
            index[mid] = first + chosen
            values[mid] = candidates.point(index[mid])
        out = np.empty(len(levels))
        out[order] = values
        return out

    out = release(draw, cost=Cost(epsilon, curve=_rounds_curve(method, eps_each, tree.depth)),
                  accountant=accountant, random_state=random_state, label=label).reshape(shape)
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
    grid mechanism (the default) with ``method="exact"`` has exactly the mechanism's law, and
    ``method="permute-and-flip"`` (a grid of at most 2**22 + 1 points) exactly
    permute-and-flip's at the same scale; the continuous one (``grid="continuous"``) relies on
    floating point. Charged: ``epsilon``.

    Examples
    --------
    >>> from dpcore import stats
    >>> m = stats.median([1.0, 2.0, 3.0, 4.0, 100.0] * 200, epsilon=1.0, bounds=(0.0, 10.0),
    ...                  grid=101, random_state=0)
    >>> 2.0 <= m <= 4.0
    True
    """
    return _quantile(x, 0.5, epsilon, bounds, grid, method, "equal", random_state, accountant,
                     "stats.median")


