"""Private quantiles: exact rank utilities, public candidate grids, and an exact sampler whose
cost does not grow with the grid.

The exponential mechanism over a public grid g_0 < ... < g_{G-1} gives point j the weight
exp(c u(j)), u(j) = -|#{x_i < g_j} - q n|. The utility only depends on the rank r = #{x_i < g_j},
so the grid falls into n + 1 *runs* of consecutive points (run r: the m_r points of rank r) and
the law is: run r with probability proportional to m_r exp(c u_r), then a uniform point of it.

:class:`RunSampler` draws exactly that, whatever G (up to 2**52 + 1), in O(n) work:

1. propose a run with the exact exponential mechanism (``ExactState``) over the runs, run r with
   the utility u'_r >= u_r + ln(m_r) / c (a double computed from the correctly rounded ln(m_r)
   with a proven margin; u'_r = u_r when m_r = 1), i.e. with probability exp(c u'_r) / Z';
2. accept it with probability m_r exp(c u_r) / exp(c u'_r) = m_r exp(-gamma_r) <= 1,
   gamma_r = c (u'_r - u_r) an exact rational: a real uniform U is accepted when
   U / m_r < exp(-gamma_r), decided exactly (:func:`dpcore._exact.uniform_below_exp`);
   otherwise go back to 1 with fresh randomness;
3. return a uniform integer point of the accepted run.

Steps 1-2 accept run r with probability proportional to m_r exp(c u_r): the law exactly, with
acceptance exp(-loss), loss <= 2**-44 ln(m_r) + a few rounding units of c u'_r. Not
constant-time (as the exact selection itself).

Privacy
-------
Sampling machinery; :func:`dpcore.stats.quantile` states the guarantee.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dpcore import _exact
from dpcore import _validation as check
from dpcore._crlog import log as correctly_rounded_log
from dpcore.random import Words64

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.selection import ExponentialMechanism

__all__ = ["DEFAULT_GRID", "GRID_CHUNK", "GRID_METHODS", "INTERVAL_METHODS", "MAX_QUANTILE_GRID",
           "MAX_QUANTILE_RECORDS", "QUANTILE_BITS", "CandidateGrid", "RunSampler",
           "default_grid_size", "grid_points", "quantile_levels", "rank_utility",
           "FLIP_METHOD", "MAX_FLIP_GRID", "PointUtilities", "GridWindow", "scaled_rank_utility",
           "LevelTree"]

#: Quantile levels are used as the nearest multiple of 2**-QUANTILE_BITS, so utilities are exact.
QUANTILE_BITS = 20
#: Largest number of records the quantile utilities are exact for (2**20 * n < 2**53).
MAX_QUANTILE_RECORDS = 2**33
#: Largest integer grid: point indices stay exact doubles.
MAX_QUANTILE_GRID = 2**52 + 1
#: ``grid=None``: the rule of :func:`default_grid_size`.
DEFAULT_GRID = "fine"
#: Candidates (runs) are streamed to the selection in chunks of this many.
GRID_CHUNK = 2**18
INTERVAL_METHODS = ("gumbel",)
#: Exact permute-and-flip over the grid points (one coin per point, so grids up to
#: ``MAX_FLIP_GRID`` points).
FLIP_METHOD = "permute-and-flip"
GRID_METHODS = ("exact", "gumbel", "inverse-cdf", FLIP_METHOD)
MAX_FLIP_GRID = 2**22 + 1


def quantile_levels(q: ArrayLike) -> tuple[tuple[int, ...], np.ndarray]:
    """q as an array of exact multiples of 2**-QUANTILE_BITS, plus their integer numerators."""
    if isinstance(q, (str, bytes)):
        raise TypeError(f"q must be a number or an array of numbers in [0, 1], got {type(q).__name__}")
    try:
        levels = np.asarray(q, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"q must be a number or an array of numbers in [0, 1], got {q!r}") from None
    if levels.size == 0:
        raise ValueError("q must contain at least one quantile level")
    if not np.all((levels >= 0.0) & (levels <= 1.0)):  # also rejects NaN
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    numerators = np.rint(levels * 2.0**QUANTILE_BITS).astype(np.int64)
    return levels.shape, numerators.reshape(-1)


def rank_utility(ranks: ArrayLike, numerator: int, n: int) -> np.ndarray:
    """-|r - q n| for integer ranks r, q = numerator / 2**QUANTILE_BITS, exactly (n < 2**33):
    2**20 r and numerator n are integers below 2**53, so their difference is exact in
    doubles, and so is its division by 2**20."""
    scaled = np.asarray(ranks, dtype=np.float64) * 2.0**QUANTILE_BITS - float(numerator * n)
    return np.abs(scaled) * -(2.0**-QUANTILE_BITS)


def scaled_rank_utility(ranks: ArrayLike, numerator: int, denominator: int, n: int
                        ) -> np.ndarray:
    """-|D r - N n| for integer ranks r (target rank q n, q = N / D), exactly: D <= 2**20 and
    r, n < 2**33 keep both products and their difference integers below 2**53. It is D times
    the utility -|r - q n|, with sensitivity max(N, D - N) (add/remove one record)."""
    scaled = (np.asarray(ranks, dtype=np.float64) * float(denominator)
              - float(numerator * n))
    return -np.abs(scaled)


def default_grid_size(lower: float, upper: float) -> int:
    """2**k + 1 evenly spaced points, k <= 52 the largest whose spacing (upper - lower) / 2**k is
    at least the spacing of doubles at the larger |bound|: as fine as doubles allow, a function
    of the public bounds only."""
    width = upper - lower
    log_width = math.log2(width) if math.isfinite(width) else math.log2(upper / 2 - lower / 2) + 1
    k = math.floor(log_width - math.log2(math.ulp(max(abs(lower), abs(upper)))))
    return 2 ** min(max(k, 1), 52) + 1


def grid_points(lower: float, upper: float, size: int, index: ArrayLike) -> np.ndarray:
    """The points of the evenly spaced grid of ``size`` points from lower to upper at the
    integer positions ``index`` (array): lower + j step, the last one exactly upper."""
    index = np.asarray(index)
    position = index.astype(np.float64)
    step = (upper - lower) / (size - 1)
    if math.isfinite(step):
        points = lower + position * step
    else:  # bounds near +-1e308: the spread overflows, each weighted end does not
        t = position / (size - 1)
        points = lower * (1.0 - t) + upper * t
    return np.where(index == size - 1, upper, points)


class CandidateGrid:
    """The public candidate points: an explicit increasing array, or ``size`` evenly spaced
    points (never materialised)."""

    points: np.ndarray | None

    def __init__(self, grid: int | ArrayLike | None, lower: float, upper: float) -> None:
        self.lower, self.upper = lower, upper
        if grid is None:
            grid = default_grid_size(lower, upper)
        if isinstance(grid, (int, np.integer)) and not isinstance(grid, (bool, np.bool_)):
            self.size = check.integer(grid, "grid", minimum=2, maximum=MAX_QUANTILE_GRID)
            self.points = None
            return
        points = check.finite_array(grid, "grid")
        if points.ndim != 1 or points.size == 0:
            raise ValueError(
                f"grid must be an int >= 2 or a non-empty 1-d array, got shape {points.shape}"
            )
        if points.size > 1 and not np.all(np.diff(points) > 0):
            raise ValueError("grid must be strictly increasing")
        if points[0] < lower or points[-1] > upper:
            raise ValueError(
                f"grid points must lie within bounds ({lower!r}, {upper!r}), got "
                f"[{points[0]!r}, {points[-1]!r}]"
            )
        self.size = points.size
        self.points = np.ascontiguousarray(points)

    def all_points(self) -> np.ndarray:
        """Every grid point (materialised: for grids of moderate size)."""
        if self.points is not None:
            return self.points
        return grid_points(self.lower, self.upper, self.size, np.arange(self.size))

    def point(self, index: int) -> float:
        """The point at ``index``."""
        if self.points is not None:
            return float(self.points[index])
        return float(grid_points(self.lower, self.upper, self.size, [index])[0])

    def count_at_most(self, values: np.ndarray) -> np.ndarray:
        """#{j : g_j <= v} for every v of a sorted array of values within the bounds."""
        if self.points is not None:
            return np.searchsorted(self.points, values, side="right").astype(np.int64)
        size, lower, upper = self.size, self.lower, self.upper

        def at(j: np.ndarray) -> np.ndarray:
            return grid_points(lower, upper, size, np.minimum(j, size - 1))

        # the arithmetic guess is almost always the answer; bisection settles the rest
        with np.errstate(over="ignore", invalid="ignore"):
            guess = np.floor((values / 2 - lower / 2) / (upper / 2 - lower / 2) * (size - 1))
        guess = np.clip(np.nan_to_num(guess), 0, size - 1).astype(np.int64)
        result = guess + 1
        exact = (at(guess) <= values) & ((result == size) | (at(result) > values))
        if exact.all():
            return result
        wrong = np.flatnonzero(~exact)
        v, g = values[wrong], guess[wrong]
        lo, hi = np.maximum(g - 2, 0), np.minimum(g + 3, size)
        inside = (at(lo) <= v) & ((hi == size) | (at(hi) > v))
        # invariant of the search: g_lo <= v < g_hi (g_size = +inf); the whole range otherwise
        lo, hi = np.where(inside, lo, 0), np.where(inside, hi, size)
        result[wrong] = _bisect(at, v, lo, hi) + 1
        return result


def _bisect(at: Callable[[np.ndarray], np.ndarray], values: np.ndarray, lo: np.ndarray,
            hi: np.ndarray) -> np.ndarray:
    """The largest j in [lo, hi) with at(j) <= value, given at(lo) <= value < at(hi)."""
    while values.size and np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        below = at(mid) <= values
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return lo


def run_logs(counts: np.ndarray) -> np.ndarray:
    """RN(ln m) (correctly rounded) for each run size m >= 1."""
    return np.asarray(correctly_rounded_log(counts.astype(np.float64)))


def _utility_offsets(logs: np.ndarray, scale: float) -> np.ndarray:
    """u' - u >= ln(m) / c for each run size m >= 1 (0 for m = 1), as doubles, from
    logs = RN(ln m).

    l = RN(ln m) satisfies ln m <= l (1 + 2**-53); each of the two products/quotients below
    loses at most a factor (1 - 2**-53), so
    fl(fl(l / c) (1 + 2**-45)) >= (l / c) (1 - 2**-53)**2 (1 + 2**-45) >= ln(m) / c."""
    offsets = (logs / scale) * (1.0 + 2.0**-45)
    if np.any((offsets > 0) & (offsets < np.finfo(np.float64).tiny)):
        raise ValueError("epsilon is too large for the quantile grid's multiplicities")
    return offsets


def _accept(m: int, log_m: float, gamma: Fraction, word: Words64) -> bool:
    """Whether a real uniform U is below m exp(-gamma) (<= 1), exactly.

    Fast path: with l = log_m = RN(ln m) (so ln m >= l (1 - 2**-53)), the loss
    gamma - ln m is at most L = gamma - l (1 - 2**-53), and m exp(-gamma) = exp(-loss) >= 1 - L;
    a U whose 64-bit cell lies below 1 - L is accepted. Otherwise U / m is compared with
    exp(-gamma) exactly (:func:`dpcore._exact.uniform_below_exp`)."""
    lo, hi = _exact.positive_cell(word)
    if hi <= 1 - (gamma - Fraction(log_m) * (1 - Fraction(1, 2**53))):
        return True
    return _exact.uniform_below_exp(lo / m, hi / m, gamma, word)


class Grid(Protocol):
    """What the samplers need of a grid: :class:`CandidateGrid` or :class:`GridWindow`."""

    size: int

    def all_points(self) -> np.ndarray: ...

    def point(self, index: int) -> float: ...

    def count_at_most(self, values: np.ndarray) -> np.ndarray: ...


class RunSampler:
    """The exponential mechanism over a public grid, drawn through the runs of equal rank."""

    def __init__(self, grid: Grid, sorted_records: np.ndarray) -> None:
        self.grid = grid
        n = sorted_records.size
        starts = np.empty(n + 2, dtype=np.int64)
        starts[0], starts[-1] = 0, grid.size
        starts[1:-1] = grid.count_at_most(sorted_records)
        counts = np.diff(starts)
        self.ranks = np.flatnonzero(counts > 0)  # runs that hold grid points
        self.starts = starts[self.ranks]
        self.counts = counts[self.ranks]
        self.logs = run_logs(self.counts)
        self.n = n
        self._proposals: dict[tuple[float, int, int | None], tuple[Any, ...]] = {}

    def _proposal(self, scale: float, numerator: int, denominator: int | None
                  ) -> tuple[Any, ...]:
        """(u, u', pivot, candidates in selection order) for one level: public arithmetic on
        the runs, cached per (scale, level)."""
        key = (scale, numerator, denominator)
        if key not in self._proposals:
            if denominator is None:
                u = rank_utility(self.ranks, numerator, self.n)
                target = self.n * numerator / 2.0**QUANTILE_BITS
            else:
                u = scaled_rank_utility(self.ranks, numerator, denominator, self.n)
                target = self.n * numerator / denominator
            proposal = u + _utility_offsets(self.logs, scale)
            proposal = np.where(self.counts > 1, np.nextafter(proposal, np.inf), u)
            # The order does not change the law. From the best rank outwards (first up, then
            # down), later candidates are mostly rejected by the selection's cheapest test.
            pivot = int(np.searchsorted(self.ranks, target))
            ordered = np.concatenate([proposal[pivot:], proposal[:pivot][::-1]])
            source = ordered if ordered.size <= GRID_CHUNK else self._chunks(ordered)
            self._proposals[key] = (u, proposal, pivot, source)
        return self._proposals[key]

    def draw(self, mech: ExponentialMechanism, numerator: int, rng: np.random.Generator,
             denominator: int | None = None) -> int:
        """One grid index with probability proportional to exp(mech.scale u(j)): u the rank
        utility of the level numerator / 2**QUANTILE_BITS, or (``denominator`` given)
        :func:`scaled_rank_utility` of numerator / denominator."""
        u, proposal, pivot, source = self._proposal(mech.scale, numerator, denominator)
        above = u.size - pivot
        word = Words64(rng)
        scale = Fraction(mech.scale)
        while True:
            i = mech.select(source, random_state=rng)
            r = pivot + i if i < above else pivot - 1 - (i - above)
            m = int(self.counts[r])
            if m > 1:
                gamma = scale * (Fraction(float(proposal[r])) - Fraction(float(u[r])))
                if not _accept(m, float(self.logs[r]), gamma, word):
                    continue
            return int(self.starts[r]) + (_exact.uniform_integer(m, word) if m > 1 else 0)

    @staticmethod
    def _chunks(utilities: np.ndarray) -> Callable[[], Iterator[np.ndarray]]:
        def chunks() -> Iterator[np.ndarray]:
            for start in range(0, utilities.size, GRID_CHUNK):
                yield utilities[start:start + GRID_CHUNK]
        return chunks



class PointUtilities:
    """The utility of every grid point, -|#{x_i < g_j} - q n| (exact doubles), per level: the
    candidates of permute-and-flip, which (unlike the exponential mechanism) does not reduce
    to the runs of equal rank, so it visits the points themselves."""

    def __init__(self, grid: Grid, sorted_records: np.ndarray) -> None:
        self.ranks = np.searchsorted(sorted_records, grid.all_points(), side="left")
        self.n = sorted_records.size
        self._levels: dict[tuple[int, int | None], np.ndarray] = {}

    def of(self, numerator: int, denominator: int | None = None) -> np.ndarray:
        """The points' utilities for the level numerator / 2**QUANTILE_BITS (or, with
        ``denominator``, :func:`scaled_rank_utility` of numerator / denominator)."""
        key = (numerator, denominator)
        if key not in self._levels:
            self._levels[key] = (
                rank_utility(self.ranks, numerator, self.n) if denominator is None
                else scaled_rank_utility(self.ranks, numerator, denominator, self.n))
        return self._levels[key]


class GridWindow:
    """The points ``first`` .. ``last`` (indices, both included) of a :class:`CandidateGrid`:
    the candidates of one node of :class:`LevelTree`, with the grid's interface (indices
    relative to ``first``)."""

    def __init__(self, grid: CandidateGrid, first: int, last: int) -> None:
        self.grid, self.first = grid, first
        self.size = last - first + 1

    def all_points(self) -> np.ndarray:
        """Every point of the window."""
        if self.grid.points is not None:
            return self.grid.points[self.first:self.first + self.size]
        return grid_points(self.grid.lower, self.grid.upper, self.grid.size,
                           np.arange(self.first, self.first + self.size))

    def point(self, index: int) -> float:
        """The point at ``index`` (relative to the window)."""
        return self.grid.point(self.first + index)

    def count_at_most(self, values: np.ndarray) -> np.ndarray:
        """#{j in the window : g_j <= v} for sorted values."""
        return np.clip(self.grid.count_at_most(values) - self.first, 0, self.size)


class LevelTree:
    """The order in which the recursive scheme releases m distinct sorted levels: the middle
    one of a segment first, then each half within the records between the released
    neighbours; depth ceil(log2(m + 1)).

    ``nodes`` lists (level index, depth, index of the lower neighbour or -1, of the upper one
    or m) in an order where every node comes after its neighbours."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.nodes: list[tuple[int, int, int, int]] = []
        segments = [(0, m, 0)]  # [lo, hi) of level indices, depth
        while segments:
            lo, hi, depth = segments.pop(0)  # breadth first: parents before children
            mid = (lo + hi) // 2
            self.nodes.append((mid, depth, lo - 1, hi))
            if lo < mid:
                segments.append((lo, mid, depth + 1))
            if mid + 1 < hi:
                segments.append((mid + 1, hi, depth + 1))
        self.depth = 1 + max(depth for _, depth, _, _ in self.nodes)
