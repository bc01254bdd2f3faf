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

__all__ = ["MECHANISMS", "IntegerNoise", "NoisePlan", "Statistic", "SumQuery", "check_privacy",
           "flat_records", "split_budget"]

MECHANISMS = ("laplace", "gaussian")


def split_budget(value: float, k: int) -> float:
    """The largest double e with k * e <= value (exactly): an equal share of a budget."""
    return round_down(Fraction(value) / k)


def flat_records(x):
    """The data as a flat float64 array of records; NaN and infinities rejected (naming x)."""
    return check.finite_array(x, "x").reshape(-1)


def check_privacy(mechanism, epsilon, delta):
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
    def calibrate(cls, mechanism, sensitivity, epsilon, delta):
        return _calibrated_noise(cls, mechanism, max(int(sensitivity), 1), epsilon, delta)

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
    def epsilon_effective(self):
        """Laplace: D / t rounded up (<= epsilon). Gaussian: epsilon (at the calibrated delta)."""
        if self.mechanism == "laplace":
            return round_up(Fraction(self.sensitivity) / Fraction(self.scale))
        return self.epsilon

    @property
    def variance(self):
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

    def draw(self, size, rng):
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
    def calibrate(cls, lower, upper, center, power, mechanism, epsilon, delta):
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

    def units(self, records):
        """The per-record integers (grid units)."""
        return self._units_of(records, self.lower, self.upper, self.center, self.power, self.grid)

    def exact_total(self, records) -> int:
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

    count: IntegerNoise
    sums: tuple

    @classmethod
    def calibrate(cls, lower, upper, center, powers, mechanism, epsilon, delta, with_count=True):
        parts = len(powers) + (1 if with_count else 0)
        eps_part = split_budget(epsilon, parts)
        delta_part = split_budget(delta, parts) if delta else 0.0
        count = IntegerNoise.calibrate(mechanism, 1, eps_part, delta_part) if with_count else None
        sums = tuple(
            SumQuery.calibrate(lower, upper, center, p, mechanism, eps_part, delta_part)
            for p in powers
        )
        return cls(count, sums)

    def exact(self, records):
        """The exact (unreleased) answers: (number of records, [sums in grid units])."""
        return int(records.size), [s.exact_total(records) for s in self.sums]

    def release(self, exact, rng):
        """Noise the exact answers: (noisy count or None, [noisy sums as floats]), drawn in
        that order."""
        n, totals = exact
        noisy_count = None
        if self.count is not None:
            noisy_count = n + int(self.count.draw(None, rng))
        noisy_sums = [s.to_real(t + int(s.noise.draw(None, rng))) for s, t in zip(self.sums, totals)]
        return noisy_count, noisy_sums


@dataclass(frozen=True)
class Statistic:
    """count, sum, mean or var: the noisy answers it needs and how its value is made from them.

    :mod:`dpcore.stats` and :mod:`dpcore.distributed` both release through it (they differ only
    in how the exact answers are computed), so a statistic has one law whichever module runs it.
    Mean and variance centre the records on the middle of the bounds (any public centre is
    valid) before summing.
    """

    kind: str
    plan: NoisePlan
    cost: Cost
    lower: float = 0.0
    upper: float = 0.0
    center: float = 0.0
    ddof: int = 0

    @classmethod
    def make(cls, kind, *, bounds=None, mechanism, epsilon, delta, ddof=0):
        """Validate the public parameters (naming them) and calibrate the noise."""
        if kind == "count":
            mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
            plan = NoisePlan(IntegerNoise.calibrate(mechanism, 1, epsilon, delta), ())
            return cls(kind, plan, Cost(epsilon, delta))
        lower, upper = check.bounds_pair(bounds, "bounds")
        mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
        if kind == "var":
            ddof = check.integer(ddof, "ddof", minimum=0)
        if kind == "sum":
            center, powers, with_count = 0.0, (1,), False
        else:
            center = lower / 2 + upper / 2  # no overflow
            powers, with_count = ((1,) if kind == "mean" else (1, 2)), True
        plan = NoisePlan.calibrate(lower, upper, center, powers, mechanism, epsilon, delta,
                                   with_count=with_count)
        return cls(kind, plan, Cost(epsilon, delta), lower, upper, center, ddof)

    def finish(self, n, sums):
        """The statistic from the noisy count n and noisy sums (post-processing)."""
        if self.kind == "count":
            return n
        if self.kind == "sum":
            return sums[0]
        n = max(n, 1)
        if self.kind == "mean":
            return float(np.clip(self.center + sums[0] / n, self.lower, self.upper))
        m1 = sums[0] / n
        denominator = max(n - self.ddof, 1)
        v = (sums[1] / n - m1 * m1) * (n / denominator)
        half_width = self.upper / 2 - self.lower / 2
        return float(np.clip(v, 0.0, half_width * half_width * (n / denominator)))

    def release(self, exact, *, accountant, random_state, label):
        """Charge once, then noise the exact answers (from ``self.plan.exact``) and finish."""
        return release(lambda rng: self.finish(*self.plan.release(exact, rng)), cost=self.cost,
                       accountant=accountant, random_state=random_state, label=label)
