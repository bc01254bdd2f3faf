"""Privacy-loss distributions on a grid: pessimistic discretisation, FFT composition, and the
conversion to (epsilon, delta).

A :class:`LossDistribution` is one direction of a dominating pair (P, Q): the law of the privacy
loss L = log(P(o) / Q(o)) for o ~ P, each loss rounded *up* to a multiple of ``interval`` (so
every delta computed from it is an upper bound), a mass at +inf (outputs Q cannot produce) and a
bound on the numerical error of the stored masses (added to every delta).

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.

References
----------
.. [KJH20] A. Koskela, J. Jalko, A. Honkela, "Computing tight differential privacy guarantees
   using FFT", AISTATS 2020.
.. [ZDW22] Y. Zhu, J. Dong, Y.-X. Wang, "Optimal accounting of differential privacy via
   characteristic function", AISTATS 2022.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

#: Mass (per truncation) of a tail that is dropped from the grid: the upper tail goes to +inf
#: (it then counts fully in every delta), the lower tail is moved up to the first kept loss
#: (which raises a later delta by at most its mass). 2**-46 (1.4e-14) per operation: a few
#: hundred operations stay far below any delta budget in use.
TAIL_MASS = 2.0**-46
#: Largest number of grid points a distribution may hold (about 130 MB per FFT buffer).
MAX_POINTS = 1 << 24
# Constant of the normwise error bound of an FFT convolution, ||c_fft - c||_2 <= C u log2(N)
# ||a||_2 ||b||_2 (u = 2**-53); 10 is a generous constant for pocketfft's radix-2/3/5 passes.
_FFT_ERROR = 10.0 * 2.0**-53
# Relative margin on reported epsilons: covers the rounding of grid losses (offset + i) * interval
# and of the logarithms in the piecewise solve.
_EPS_MARGIN = 2.0**-40


def _inflate(x):
    return math.nextafter(x * (1.0 + _EPS_MARGIN) + 2.0**-60, math.inf) if x > 0 else x


@dataclass(frozen=True, eq=False)
class LossDistribution:
    """The pessimistic law of the privacy loss in one direction (see the module docstring).

    Attributes
    ----------
    interval : float
        Grid step: the loss of ``probs[i]`` is ``(offset + i) * interval``.
    offset : int
    probs : ndarray of float64
        Masses of the finite losses (read-only).
    infinity_mass : float
        Mass of the loss +inf.
    error : float
        Bound on the L1 error of ``probs`` (floating point and FFT), added to every delta.
    """

    interval: float
    offset: int
    probs: np.ndarray
    infinity_mass: float
    error: float

    @property
    def losses(self) -> np.ndarray:
        """The grid losses of ``probs``."""
        return (self.offset + np.arange(self.probs.size)) * self.interval

    def delta(self, epsilon: float) -> float:
        """Upper bound on delta(epsilon) = E[(1 - e^(epsilon - L))_+] + P(L = inf)."""
        losses = self.losses
        above = losses > epsilon
        value = float(np.sum(self.probs[above] * -np.expm1(epsilon - losses[above])))
        return min(1.0, value + self.infinity_mass + self.error)

    def epsilon_solver(self) -> Callable[[float], float]:
        """A function delta -> the smallest epsilon >= 0 with ``delta(epsilon) <= delta``
        (rounded up; inf when the infinite mass and the error exceed delta), precomputed so
        that each call costs O(log n)."""
        return _EpsilonSolver(self)

    def compose(self, other: LossDistribution) -> LossDistribution:
        """The distribution of the sum of independent losses (composition of the pairs)."""
        if other.interval != self.interval:
            raise ValueError(
                f"cannot compose privacy-loss distributions with different intervals "
                f"({self.interval!r} and {other.interval!r})"
            )
        a, b = self.probs, other.probs
        n = a.size + b.size - 1
        if n > 2 * MAX_POINTS:
            raise ValueError("the composed privacy-loss distribution would exceed "
                             f"{2 * MAX_POINTS} grid points: use a coarser interval")
        if min(a.size, b.size) <= 64 or a.size * b.size <= 1 << 16:
            c = np.convolve(a, b)
            # each entry is a sum of at most min(len) products, each rounded: relative error
            # <= min(len) * u of the entry, and the entries sum to <= 1
            fresh = (min(a.size, b.size) + 1) * 2.0**-53
        else:
            from scipy import fft  # lazily: importing scipy takes 0.3 s
            size = fft.next_fast_len(n, real=True)
            c = fft.irfft(fft.rfft(a, size) * fft.rfft(b, size), size)[:n]
            # normwise bound on the error vector: it bounds every entry's error, and (times
            # sqrt(n)) the L1 error
            floor = _FFT_ERROR * math.log2(size) * math.sqrt(_sum_squares(a) * _sum_squares(b))
            fresh = floor * math.sqrt(n)
            # entries below the floor may be rounding noise: zero them (their sum joins the
            # error, which counts in every delta, so dropping real mass there stays safe)
            noise = c < floor
            fresh += float(np.sum(c[noise & (c > 0.0)]))
            c[noise] = 0.0
        np.maximum(c, 0.0, out=c)  # the exact masses are >= 0: clipping only reduces the error
        # ||(a + e_a) * (b + e_b) - a * b||_1 <= e_a ||b||_1 + e_b ||a||_1 + e_a e_b, ||.||_1 <= 1
        error = self.error + other.error + self.error * other.error + fresh
        infinity = self.infinity_mass + other.infinity_mass  # >= 1 - (1 - a)(1 - b): safe
        return _trimmed(self.interval, self.offset + other.offset, c, infinity, error)

    def self_compose(self, count: int) -> LossDistribution:
        """``count``-fold composition, by repeated squaring."""
        result, base = None, self
        while count:
            if count & 1:
                result = base if result is None else result.compose(base)
            count >>= 1
            if count:
                base = base.compose(base)
        return cast(LossDistribution, result)  # count >= 1 (PrivacyCurve.repeat checks)


def _sum_squares(x):
    # not np.linalg.norm: BLAS threads contend on a shared machine (20 ms for 10**5 entries)
    return float(np.sum(np.square(x)))


def _trimmed(interval, offset, probs, infinity, error, tail=TAIL_MASS):
    """A distribution with its negligible tails cut: an upper tail of mass <= ``tail`` goes to
    +inf, a lower tail of mass <= ``tail`` is moved up to the first kept loss (both pessimistic:
    losses only increase)."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.size == 0:
        return LossDistribution(interval, offset, np.zeros(1), min(1.0, infinity), error)
    upper = np.cumsum(probs[::-1])  # upper[j]: mass of the top j + 1 entries
    n_top = int(np.searchsorted(upper, tail, side="right"))  # entries whose joint mass <= tail
    n_top = min(n_top, probs.size - 1)
    moved_up = float(upper[n_top - 1]) if n_top else 0.0
    kept = probs[: probs.size - n_top]
    lower = np.cumsum(kept)
    n_low = int(np.searchsorted(lower, tail, side="right"))
    n_low = min(n_low, kept.size - 1)
    if n_low:
        raised = float(lower[n_low - 1])
        kept = kept[n_low:].copy()
        kept[0] += raised
    else:
        kept = kept.copy()
    # drop exact zeros at both ends (nothing moves)
    nonzero = np.flatnonzero(kept)
    if nonzero.size:
        kept = kept[nonzero[0]: nonzero[-1] + 1]
        first = int(nonzero[0])
    else:
        kept, first = np.zeros(1), 0
    kept.setflags(write=False)
    return LossDistribution(interval, offset + n_low + first, kept,
                            min(1.0, infinity + moved_up), error)


def from_masses(interval: float, offset: int, probs: np.ndarray, infinity: float,
                error: float) -> LossDistribution:
    """A :class:`LossDistribution` from pessimistically binned masses (tails trimmed)."""
    if probs.size > MAX_POINTS:
        raise ValueError(f"the privacy-loss distribution needs {probs.size} grid points, more "
                         f"than {MAX_POINTS}: use a coarser interval")
    return _trimmed(interval, offset, np.maximum(probs, 0.0), infinity, error)


class _EpsilonSolver:
    """epsilon(delta) of a :class:`LossDistribution`, with suffix sums precomputed.

    On [l_j, l_{j+1}) the curve is delta(eps) = c + S_j - e^eps T_j with S_j, T_j the sums of
    p_i and p_i e^(-l_i) over the losses above l_j (c the infinite mass plus the error), so each
    query is a binary search for the piece and a logarithm.
    """

    def __init__(self, dist):
        losses = dist.losses
        keep = losses > 0.0
        self._c = dist.infinity_mass + dist.error
        self._losses = losses[keep]  # increasing
        p = dist.probs[keep]
        # suffix sums over i > j (index j in 0..m, the last being empty); and the point eps = 0
        self._s = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        self._t = np.concatenate([np.cumsum((p * np.exp(-self._losses))[::-1])[::-1], [0.0]])
        # delta at the knots: eps = 0 (all positive losses above) and eps = l_j (those above l_j)
        knots = np.concatenate([[0.0], self._losses])
        s_above = self._s  # s_above[j]: sum over losses above knot j
        t_above = self._t
        self._knots = knots
        with np.errstate(divide="ignore"):  # log(0) = -inf: no loss above that knot
            self._at_knots = self._c + s_above - np.exp(knots + np.log(t_above))

    def __call__(self, delta):
        if self._c > delta:
            return math.inf
        at = self._at_knots
        if at[0] <= delta:
            return 0.0
        # first knot where delta(knot) <= target (at is non-increasing); the last knot has none above
        j = int(np.searchsorted(-at, -delta, side="left"))
        # the answer lies in (knot_{j-1}, knot_j]: solve c + S - e^eps T = delta on that piece
        s, t = float(self._s[j - 1]), float(self._t[j - 1])
        lo, hi = float(self._knots[j - 1]), float(self._knots[j])
        if t <= 0.0:
            return _inflate(hi)
        eps = math.log((self._c + s - delta) / t) if self._c + s > delta else lo
        return _inflate(min(max(eps, lo), hi))


@dataclass(frozen=True, eq=False)
class PrivacyLossDistribution:
    """A dominating pair's two directions: ``remove`` (the law of log(P/Q) under P) and ``add``
    (log(Q/P) under Q); for a symmetric pair they are one object.

    ``delta`` and ``epsilon`` are the worse of the two directions, since a neighbouring pair of
    data sets can be met in either order.
    """

    remove: LossDistribution
    add: LossDistribution

    @property
    def interval(self) -> float:
        return self.remove.interval

    @property
    def symmetric(self) -> bool:
        return self.add is self.remove

    @property
    def size(self) -> int:
        return self.remove.probs.size + (0 if self.symmetric else self.add.probs.size)

    def delta(self, epsilon: float) -> float:
        """Upper bound on the hockey-stick divergence at ``epsilon``, both directions."""
        if self.symmetric:
            return self.remove.delta(epsilon)
        return max(self.remove.delta(epsilon), self.add.delta(epsilon))

    def epsilon_solver(self) -> Callable[[float], float]:
        """delta -> epsilon (both directions), see :meth:`LossDistribution.epsilon_solver`."""
        solvers = [self.remove.epsilon_solver()]
        if not self.symmetric:
            solvers.append(self.add.epsilon_solver())
        return lambda delta: max(s(delta) for s in solvers)

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon (rounded up) with ``delta(epsilon) <= delta``."""
        return self.epsilon_solver()(delta)

    def compose(self, other: PrivacyLossDistribution) -> PrivacyLossDistribution:
        remove = self.remove.compose(other.remove)
        if self.symmetric and other.symmetric:
            return PrivacyLossDistribution(remove, remove)
        return PrivacyLossDistribution(remove, self.add.compose(other.add))

    def self_compose(self, count: int) -> PrivacyLossDistribution:
        remove = self.remove.self_compose(count)
        if self.symmetric:
            return PrivacyLossDistribution(remove, remove)
        return PrivacyLossDistribution(remove, self.add.self_compose(count))
