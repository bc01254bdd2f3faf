"""Exact noisy sums: integer noise calibrated to an integer sensitivity, real-valued sums
released on a power-of-two grid, and the plans (count plus sums) the statistics draw from.

Shared by :mod:`dpcore.stats` and :mod:`dpcore.distributed` (which computes the same exact
integers chunk by chunk), so both release the same law.

Privacy
-------
Calibration and exact arithmetic only; the releases that use it state their guarantees.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dpcore import _validation as check
from dpcore import calibration
from dpcore._floats import GRID_BITS, pow2_floor, round_down, round_up
from dpcore._release import Cost, release
from dpcore.mechanisms import (
    MAX_DISCRETE_GAUSSIAN_SIGMA,
    MAX_DISCRETE_LAPLACE_SCALE,
    discrete_gaussian,
    discrete_laplace,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

#: The exact answers a plan noises: (number of records, [integer totals]).
Exact = tuple[int, list[int]]

__all__ = ["CONSTRUCTIONS", "MECHANISMS", "RELATIONS", "IntegerNoise", "NoisePlan", "Statistic",
           "SumQuery", "VectorPlan", "check_privacy", "check_public_size", "flat_records",
           "record_vectors", "split_budget", "unit_position"]

MECHANISMS = ("laplace", "gaussian")


def split_budget(value: float, k: int) -> float:
    """The largest double e with k * e <= value (exactly): an equal share of a budget."""
    return round_down(Fraction(value) / k)


def flat_records(x: ArrayLike) -> np.ndarray:
    """The data as a flat float64 array of records; NaN and infinities rejected (naming x)."""
    return check.finite_array(x, "x").reshape(-1)


def check_privacy(mechanism: str, epsilon: float, delta: float | None
                  ) -> tuple[str, float, float]:
    """Validate (mechanism, epsilon, delta); returns (mechanism, epsilon, delta)."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
    epsilon = check.positive(epsilon, "epsilon")
    if mechanism == "laplace":
        delta = 0.0 if delta is None else check.real(delta, "delta")
        if delta != 0.0:
            raise ValueError(
                f"delta must be 0 for mechanism='laplace' (pure epsilon-DP), got {delta!r}; "
                "use mechanism='gaussian' for (epsilon, delta)-DP"
            )
    else:
        if delta is None:
            raise ValueError("delta is required for mechanism='gaussian': give 0 < delta < 1")
        delta = check.probability(delta, "delta")
    return mechanism, epsilon, delta


@dataclass(frozen=True)
class IntegerNoise:
    """Exact integer noise for an integer query of integer sensitivity D (L1 = L2 = D: one
    coordinate changes by at most D between neighbours).

    ``"laplace"``: discrete Laplace with scale t = D / epsilon rounded up (pure, epsilon_effective
    = D / t <= epsilon). ``"gaussian"``: discrete Gaussian with the smallest sigma for which the
    exact Canonne-Kamath-Steinke delta at (epsilon, D) is <= delta.
    """

    mechanism: str
    sensitivity: int
    epsilon: float
    delta: float
    scale: float  # discrete Laplace scale t, or discrete Gaussian sigma

    @classmethod
    def calibrate(cls, mechanism: str, sensitivity: int, epsilon: float, delta: float
                  ) -> IntegerNoise:
        # a class is hashable (mypy reads the frozen dataclass's instance __hash__)
        return _calibrated_noise(cls, mechanism, max(int(sensitivity), 1), epsilon,  # type: ignore[arg-type]
                                 delta)

    @classmethod
    def _calibrate(cls, mechanism, sensitivity, epsilon, delta):
        if mechanism == "laplace":
            exact = Fraction(sensitivity) / Fraction(epsilon)
            if exact > MAX_DISCRETE_LAPLACE_SCALE:
                raise ValueError(
                    f"epsilon={epsilon!r} is too small for the exact discrete Laplace sampler "
                    f"(scale {float(exact):.3g} grid units > {MAX_DISCRETE_LAPLACE_SCALE:.3g})"
                )
            scale = round_up(exact)
        else:
            scale = calibration.discrete_gaussian_sigma(epsilon, delta, sensitivity)
            if scale > MAX_DISCRETE_GAUSSIAN_SIGMA:
                raise ValueError(
                    f"epsilon={epsilon!r}, delta={delta!r} are too small for the exact discrete "
                    f"Gaussian sampler (sigma {scale:.3g} grid units)"
                )
        return cls(mechanism, sensitivity, epsilon, delta, scale)

    @property
    def epsilon_effective(self) -> float:
        """Laplace: D / t rounded up (<= epsilon). Gaussian: epsilon (at the calibrated delta)."""
        if self.mechanism == "laplace":
            return round_up(Fraction(self.sensitivity) / Fraction(self.scale))
        return self.epsilon

    @property
    def variance(self) -> float:
        """Variance of one noise draw, in grid units squared."""
        if self.mechanism == "laplace":
            q = math.exp(-1.0 / self.scale)
            return 2.0 * q / (1.0 - q) ** 2
        # the discrete Gaussian's variance is below sigma**2 (CKS); summed for small sigma
        sigma = self.scale
        if sigma > 50:
            return sigma * sigma
        k = np.arange(-int(40 * sigma) - 10, int(40 * sigma) + 11, dtype=float)
        w = np.exp(-(k * k) / (2 * sigma * sigma))
        return float(np.sum(k * k * w) / np.sum(w))

    def draw(self, size: int | tuple[int, ...] | None, rng: np.random.Generator) -> Any:
        if self.mechanism == "laplace":
            return discrete_laplace(self.scale, size, random_state=rng)
        return discrete_gaussian(self.scale, size, random_state=rng)


@functools.lru_cache(maxsize=256)
def _calibrated_noise(cls, mechanism, sensitivity, epsilon, delta):
    # Pure functions of public parameters (the Gaussian ones take milliseconds): cached.
    return cls._calibrate(mechanism, sensitivity, epsilon, delta)


@functools.lru_cache(maxsize=256)
def _gaussian_spread(epsilon, delta, reach):
    return calibration.analytic_gaussian_sigma(epsilon, delta, reach)


@dataclass(frozen=True)
class SumQuery:
    """A sum over records of a per-record map, released on a power-of-two grid.

    Each record x is clipped to [lower, upper], shifted by ``center``, raised to ``power`` (1 or
    2), divided by ``grid`` and rounded to an integer (half to even); the integers are summed
    exactly. Every step is monotone in the clipped record (in |x - center| for power 2), so the
    largest |integer| any one record can contribute is attained at a bound: that is the
    sensitivity in grid units under add/remove, exactly.
    """

    lower: float
    upper: float
    center: float
    power: int
    grid: float
    noise: IntegerNoise

    @classmethod
    def calibrate(cls, lower: float, upper: float, center: float, power: int, mechanism: str,
                  epsilon: float, delta: float) -> SumQuery:
        ends = np.array([lower, upper])
        reach = float(np.max(np.abs(cls._mapped(ends, lower, upper, center, power))))
        if reach == 0.0:  # unreachable with lower < upper; keeps the grid well defined
            reach = 1.0
        if mechanism == "laplace":
            spread = reach / epsilon
        else:
            spread = _gaussian_spread(epsilon, delta, reach)
        if not math.isfinite(spread * 2.0**-GRID_BITS):
            raise ValueError(
                f"bounds ({lower!r}, {upper!r}) are too wide for epsilon={epsilon!r}: the noise "
                "scale overflows; rescale the data"
            )
        # about 2**-GRID_BITS of the noise scale, but never so fine that one record spans more
        # than 2**60 units (huge epsilon)
        grid = max(pow2_floor(spread * 2.0**-GRID_BITS), 2.0 * pow2_floor(reach * 2.0**-61))
        if not 0.0 < grid < math.inf or not math.isfinite(reach / grid):
            raise ValueError(
                f"bounds ({lower!r}, {upper!r}) with epsilon={epsilon!r} give no usable grid; "
                "rescale the data"
            )
        units = cls._units_of(ends, lower, upper, center, power, grid)
        sensitivity = int(np.max(np.abs(units)))
        noise = IntegerNoise.calibrate(mechanism, sensitivity, epsilon, delta)
        return cls(lower, upper, center, power, grid, noise)

    @staticmethod
    def _mapped(values, lower, upper, center, power):
        y = np.clip(values, lower, upper) - center
        return y * y if power == 2 else y

    @classmethod
    def _units_of(cls, values, lower, upper, center, power, grid):
        scaled = cls._mapped(values, lower, upper, center, power) / grid
        with np.errstate(over="raise", invalid="raise"):
            units = np.rint(scaled)
        if units.size and float(np.max(np.abs(units))) >= 2.0**62:
            raise ValueError(
                "epsilon is too large for these bounds: one record would span more than 2**62 "
                "grid units"
            )
        return units.astype(np.int64)

    def units(self, records: np.ndarray) -> np.ndarray:
        """The per-record integers (grid units)."""
        return self._units_of(records, self.lower, self.upper, self.center, self.power, self.grid)

    def exact_total(self, records: np.ndarray) -> int:
        """The exact sum of the per-record integers (Python int; int64 partial sums that
        provably cannot overflow)."""
        units = self.units(records)
        step = max(1, (2**62) // max(self.noise.sensitivity, 1))
        return sum(int(np.sum(units[i:i + step], dtype=np.int64))
                            for i in np.arange(0, units.size, step))

    def to_real(self, total: int) -> float:
        """Grid units back to a double (one correctly rounded conversion; post-processing)."""
        try:
            return float(Fraction(total) * Fraction(self.grid))
        except OverflowError:  # beyond the double range
            return math.copysign(math.inf, total)


@dataclass(frozen=True)
class NoisePlan:
    """The noisy count and noisy sums a statistic releases, with the budget split equally."""

    count: IntegerNoise | None
    sums: tuple[SumQuery, ...]

    @classmethod
    def calibrate(cls, lower: float, upper: float, center: float, powers: tuple[int, ...],
                  mechanism: str, epsilon: float, delta: float,
                  with_count: bool = True) -> NoisePlan:
        parts = len(powers) + (1 if with_count else 0)
        eps_part = split_budget(epsilon, parts)
        delta_part = split_budget(delta, parts) if delta else 0.0
        count = IntegerNoise.calibrate(mechanism, 1, eps_part, delta_part) if with_count else None
        sums = tuple(
            SumQuery.calibrate(lower, upper, center, p, mechanism, eps_part, delta_part)
            for p in powers
        )
        return cls(count, sums)

    def exact(self, records: np.ndarray) -> Exact:
        """The exact (unreleased) answers: (number of records, [sums in grid units])."""
        return int(records.size), [s.exact_total(records) for s in self.sums]

    def release(self, exact: Exact, rng: np.random.Generator
                ) -> tuple[int | None, list[float]]:
        """Noise the exact answers: (noisy count or None, [noisy sums as floats]), drawn in
        that order."""
        n, totals = exact
        noisy_count = None
        if self.count is not None:
            noisy_count = n + int(self.count.draw(None, rng))
        noisy_sums = [s.to_real(t + int(s.noise.draw(None, rng))) for s, t in zip(self.sums, totals)]
        return noisy_count, noisy_sums


# ------------------------------------------------------------------------------------------------
# Record vectors: each record maps to a short integer vector of bounded L1 norm, summed exactly

#: How the records of a mean or variance are turned into integer vectors (see :class:`VectorPlan`).
CONSTRUCTIONS = ("bernstein1", "bernstein2", "centred", "rotated", "moments", "deviations")
RELATIONS = ("add_remove", "replace")
# the largest unit: unit positions of doubles in [0, 1] keep all their bits below it
_MAX_UNITS = 2**52


def _units_for(epsilon, sensitivity_per_unit=1):
    """The power of two D with D * sensitivity_per_unit / epsilon about 2**GRID_BITS (the noise
    scale in integer units, as for :class:`SumQuery`), between 1 and 2**52."""
    target = Fraction(epsilon) * 2**GRID_BITS / sensitivity_per_unit
    if target < 1:
        return 1
    return min(_MAX_UNITS, 1 << (int(target).bit_length() - 1))


def unit_position(records: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """z = (clip(x) - lower) / (upper - lower) in [0, 1] for every record (never overflows).

    Floating-point rounding moves z slightly; that is harmless: every construction below holds
    its sensitivity for *any* z in [0, 1], so z need not be exact or even monotone."""
    half_lower = lower * 0.5
    width = upper * 0.5 - half_lower
    z = (np.clip(records, lower, upper) * 0.5 - half_lower) / width
    return np.clip(z, 0.0, 1.0)


def record_vectors(construction: str, z: np.ndarray, units: int) -> np.ndarray:
    """The integer vector of each record (rows), for unit positions z in [0, 1].

    * ``bernstein1``: (D - b, b), b = rint(D z). Non-negative, each row sums to D.
    * ``bernstein2``: the degree-2 Bernstein basis D ((1 - z)**2, 2 z (1 - z), z**2) rounded so
      that the entries are non-negative integers and each row sums to D exactly.
    * ``centred``: rint(D t), t = 2 z - 1 in [-1, 1]: |entry| <= D.
    * ``rotated``: (D (t**2 + t) / 2, D (t**2 - t) / 2) rounded, then shrunk so that
      |r| + |l| <= D (in exact arithmetic |r| + |l| = D |t|).
    * ``moments``: (rint(D t), rint(D t**2)): |entries| <= D each.
    * ``deviations``: rint(D t) (the variance of these integers is released; see
      :class:`VectorPlan`).
    """
    d = float(units)
    if construction == "bernstein1":
        b = np.rint(d * z).astype(np.int64)
        return np.column_stack([units - b, b])
    if construction == "bernstein2":
        b0 = np.rint(d * ((1.0 - z) * (1.0 - z))).astype(np.int64)
        b2 = np.rint(d * (z * z)).astype(np.int64)
        b0 -= np.maximum(b0 + b2 - units, 0)  # rounding can overshoot by one near the ends
        return np.column_stack([b0, units - b0 - b2, b2])
    t = 2.0 * z - 1.0
    if construction in ("centred", "deviations"):
        return np.rint(d * t).astype(np.int64)[:, None]
    if construction == "moments":
        return np.column_stack([np.rint(d * t), np.rint(d * (t * t))]).astype(np.int64)
    square = t * t
    r = np.rint(d * (0.5 * (square + t))).astype(np.int64)
    left = np.rint(d * (0.5 * (square - t))).astype(np.int64)
    excess = np.maximum(np.abs(r) + np.abs(left) - units, 0)
    shrink_r = np.abs(r) >= np.abs(left)
    r -= np.where(shrink_r, np.sign(r) * excess, 0)
    left -= np.where(shrink_r, 0, np.sign(left) * excess)
    return np.column_stack([r, left])


def _column_totals(vectors, bound):
    """Exact column sums (Python ints) of an int64 matrix whose entries are <= bound in size."""
    step = max(1, (2**62) // max(int(bound), 1))
    totals = [0] * vectors.shape[1]
    for i in range(0, vectors.shape[0], step):
        part = np.sum(vectors[i:i + step], axis=0, dtype=np.int64)
        totals = [a + int(b) for a, b in zip(totals, cast(np.ndarray, part))]
    return totals


@dataclass(frozen=True)
class VectorPlan:
    """One release of the exact column sums of :func:`record_vectors`, with exact integer noise.

    Laplace: the vector of sums moves, between neighbours, by one record's vector (add/remove)
    or the difference of two (replace), whose L1 norm is at most ``sensitivity`` (D for
    ``bernstein1/2``, ``centred`` and ``rotated`` under add/remove; 2 D for ``centred`` under
    replace-one), so independent discrete Laplace noise of scale sensitivity / epsilon on every
    coordinate is epsilon-DP (the privacy loss is the L1 distance over the scale). Gaussian (one
    coordinate, or ``moments`` with the budget split in halves): the exact scalar CKS calibration
    per coordinate.

    ``deviations`` (replace-one, N public): the integer T = N sum(k**2) - (sum k)**2 = N times the
    sum of squared deviations of the integers k = rint(D t). Replacing one record changes the sum
    of squared deviations by (N - 1)/N ((k - m)**2 - (k' - m)**2) (m the mean of the other N - 1),
    so T by at most (N - 1) (2 D)**2. T is released as floor(T / G) (G a power of two; the
    floors of two integers at distance <= s differ by <= floor(s / G) + 1).
    """

    construction: str
    lower: float
    upper: float
    units: int
    noises: tuple[IntegerNoise, ...]  # one per coordinate
    size: int | None = None  # N, for ``deviations``
    coarsen: int = 1  # G, for ``deviations``

    @classmethod
    def calibrate(cls, construction: str, lower: float, upper: float, mechanism: str,
                  epsilon: float, delta: float, *, relation: str = "add_remove",
                  size: int | None = None) -> VectorPlan:
        if construction == "deviations":
            return cls._calibrate_deviations(lower, upper, mechanism, epsilon, delta, size)
        reach = 2 if relation == "replace" else 1  # L1 distance per unit D between neighbours
        units = _units_for(epsilon, reach)
        coordinates = {"bernstein1": 2, "bernstein2": 3, "rotated": 2, "moments": 2}.get(
            construction, 1)
        if mechanism == "laplace":
            noise = IntegerNoise.calibrate("laplace", reach * units, epsilon, 0.0)
            return cls(construction, lower, upper, units, (noise,) * coordinates)
        if construction not in ("centred", "moments"):
            raise ValueError(f"construction {construction!r} is calibrated for the Laplace only")
        share = split_budget(epsilon, coordinates)
        delta_share = split_budget(delta, coordinates)
        noise = IntegerNoise.calibrate("gaussian", reach * units, share, delta_share)
        return cls(construction, lower, upper, units, (noise,) * coordinates)

    @classmethod
    def _calibrate_deviations(cls, lower, upper, mechanism, epsilon, delta, size):
        units = 2**26  # t rounded to 2**-27: far below any noise the variance can carry
        spread = (size - 1) * (2 * units) ** 2 if size > 1 else 0
        target = Fraction(epsilon) * 2**GRID_BITS
        coarsen, sensitivity = 1, spread
        while sensitivity > target:  # floor(T / G) moves by at most floor(spread / G) + 1
            coarsen *= 2
            sensitivity = spread // coarsen + 1
        noise = IntegerNoise.calibrate(mechanism, sensitivity, epsilon, delta)
        return cls("deviations", lower, upper, units, (noise,), size, coarsen)

    def exact(self, records: np.ndarray) -> Exact:
        """(number of records, [exact integer totals]); additive over chunks except for
        ``deviations``, which needs all records at once."""
        vectors = record_vectors(self.construction, unit_position(records, self.lower,
                                                                  self.upper), self.units)
        if self.construction != "deviations":
            bound = self.units * 2 if self.construction == "rotated" else self.units
            return int(records.size), _column_totals(vectors, bound)
        k = vectors[:, 0]
        first = _column_totals(k[:, None], self.units)[0]
        second = _column_totals((k * k)[:, None], self.units * self.units)[0]
        spread_total = records.size * second - first * first  # N * sum of squared deviations
        return int(records.size), [spread_total // self.coarsen]

    def release(self, exact: Exact, rng: np.random.Generator) -> tuple[None, list[int]]:
        """Noise the exact totals: (None, [noisy integer totals]) (no separate count)."""
        n, totals = exact
        return None, [t + int(noise.draw(None, rng)) for t, noise in zip(totals, self.noises)]


def check_public_size(n: int | None, relation: str) -> int | None:
    """Validate the public record count ``n`` (None or an int >= 1) against ``relation``."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be 'add_remove' or 'replace', got {relation!r}")
    if n is None:
        return None
    if relation == "replace":
        raise ValueError("n must be None with relation='replace': the number of records is then "
                         "the size of x (replace-one neighbours have the same size)")
    return check.integer(n, "n", minimum=1)


def _construction(kind, mechanism, n, relation):
    """Which records-to-integers construction a statistic uses (None: :class:`NoisePlan`)."""
    if relation == "replace":
        return "deviations" if kind == "var" else "centred"
    if n is not None:
        if kind == "var":
            return "rotated" if mechanism == "laplace" else "moments"
        return "centred"
    if kind == "sum" or mechanism == "gaussian":
        return None
    return "bernstein1" if kind == "mean" else "bernstein2"


@dataclass(frozen=True)
class Statistic:
    """count, sum, mean or var: the noisy answers it needs and how its value is made from them.

    :mod:`dpcore.stats` and :mod:`dpcore.distributed` both release through it (they differ only
    in how the exact answers are computed), so a statistic has one law whichever module runs it.

    Which answers (the derivations are in the user guide, "Statistics"):

    * n private, Laplace: mean and variance release the degree-1 / degree-2 Bernstein sums of
      z = (x - lower) / (upper - lower) (:func:`record_vectors`), whose L1 sensitivity is one
      record's total weight, with the whole budget; sum: the plain sum.
    * n private, Gaussian: a noisy count and noisy centred sums (and of squares), the budget
      split equally (:class:`NoisePlan`).
    * n public (``n=``, add/remove): the centred sum (mean, sum) or the rotated pair of centred
      sums (variance; ``moments`` with the Gaussian), divided by n: n is used only after the
      noise (post-processing).
    * replace-one (``relation="replace"``, N = the size of the data, invariant under the
      relation): the centred sum with twice the sensitivity, or N times the sum of squared
      deviations (variance).
    """

    kind: str
    plan: NoisePlan | VectorPlan
    cost: Cost
    lower: float = 0.0
    upper: float = 0.0
    center: float = 0.0
    ddof: int = 0
    size: int | None = None  # the divisor when it is public (n=, or N under replace-one)

    @classmethod
    def make(cls, kind: str, *, bounds: Any = None, mechanism: str, epsilon: float,
             delta: float | None, ddof: int = 0, n: int | None = None,
             relation: str = "add_remove", records: np.ndarray | None = None) -> Statistic:
        """Validate the public parameters (naming them) and calibrate the noise. ``records``
        is needed only with relation="replace" (its size is the public N)."""
        if kind == "count":
            mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
            plan = NoisePlan(IntegerNoise.calibrate(mechanism, 1, epsilon, delta), ())
            return cls(kind, plan, Cost(epsilon, delta))
        lower, upper = check.bounds_pair(bounds, "bounds")
        mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
        n = check_public_size(n, relation)
        if kind == "var":
            ddof = check.integer(ddof, "ddof", minimum=0)
        center = lower / 2 + upper / 2  # no overflow
        construction = _construction(kind, mechanism, n, relation)
        size = n if relation == "add_remove" else int(cast(np.ndarray, records).size)
        if construction is not None:
            plan = VectorPlan.calibrate(construction, lower, upper, mechanism, epsilon, delta,
                                        relation=relation, size=size)
            return cls(kind, plan, Cost(epsilon, delta), lower, upper, center, ddof, size)
        if kind == "sum":
            center, powers, with_count = 0.0, (1,), False
        else:
            powers, with_count = ((1,) if kind == "mean" else (1, 2)), True
        plan = NoisePlan.calibrate(lower, upper, center, powers, mechanism, epsilon, delta,
                                   with_count=with_count)
        return cls(kind, plan, Cost(epsilon, delta), lower, upper, center, ddof)

    def finish(self, n: int | None, sums: list[Any]) -> Any:
        """The statistic from the noisy answers (post-processing)."""
        if self.kind == "count":
            return n
        if isinstance(self.plan, VectorPlan):
            return self._finish_vector(sums)
        if self.kind == "sum":
            return sums[0]
        n = max(cast(int, n), 1)  # mean and var plans release a count
        if self.kind == "mean":
            return float(np.clip(self.center + sums[0] / n, self.lower, self.upper))
        m1 = sums[0] / n
        denominator = max(n - self.ddof, 1)
        v = (sums[1] / n - m1 * m1) * (n / denominator)
        half_width = self.upper / 2 - self.lower / 2
        return float(np.clip(v, 0.0, half_width * half_width * (n / denominator)))

    def _finish_vector(self, totals):
        plan = cast(VectorPlan, self.plan)
        units = plan.units
        half_width = self.upper / 2 - self.lower / 2
        construction = plan.construction
        if construction == "bernstein1":
            weight = max(totals[0] + totals[1], units)  # D times the noisy count, at least 1
            t = min(max((totals[1] - totals[0]) / weight, -1.0), 1.0)
            return float(np.clip(self.center + half_width * t, self.lower, self.upper))
        if construction == "bernstein2":
            weight = max(totals[0] + totals[1] + totals[2], units)
            m = (totals[1] / 2 + totals[2]) / weight  # mean of z
            var_z = min(max(totals[2] / weight - m * m, 0.0), 0.25)
            count = weight / units
            return self._scaled_variance(4.0 * var_z, count, half_width)
        size = max(cast(int, self.size), 1)  # set for every construction but bernstein*
        if construction == "centred":
            t_mean = totals[0] / (units * size)
            if self.kind == "mean":
                return float(np.clip(self.center + half_width * t_mean, self.lower, self.upper))
            low, high = sorted((size * self.lower, size * self.upper))
            return float(np.clip(size * self.center + half_width * (t_mean * size), low, high))
        if construction == "deviations":
            spread = (totals[0] + 0.5) * plan.coarsen if plan.coarsen > 1 else totals[0]
            var_t = max(spread / (size * float(units) ** 2 * size), 0.0)
            return self._scaled_variance(min(var_t, 1.0), size, half_width)
        if construction == "rotated":
            first, second = (totals[0] - totals[1]) / units, (totals[0] + totals[1]) / units
        else:  # moments
            first, second = totals[0] / units, totals[1] / units
        m = first / size
        var_t = min(max(second / size - m * m, 0.0), 1.0)
        return self._scaled_variance(var_t, size, half_width)

    def _scaled_variance(self, var_t, count, half_width):
        """half_width**2 var_t (var_t the population variance of t = (x - c) / half_width,
        in [0, 1]) with numpy's ddof correction for ``count`` records."""
        factor = count / max(count - self.ddof, 1)
        return float(half_width * (half_width * (var_t * factor)))

    def release(self, exact: Exact, *, accountant: AccountantLike | None,
                random_state: RandomStateLike, label: str) -> Any:
        """Charge once, then noise the exact answers (from ``self.plan.exact``) and finish."""
        return release(lambda rng: self.finish(*self.plan.release(exact, rng)), cost=self.cost,
                       accountant=accountant, random_state=random_state, label=label)
