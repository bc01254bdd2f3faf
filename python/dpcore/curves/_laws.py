"""Dominating pairs on the real line, and their pessimistic discretisation (with Poisson
subsampling).

A law describes a dominating pair (P, Q) (P: the output law with the differing record, Q:
without) through the distribution functions of its privacy loss L = log(P(o)/Q(o)), under P and
under Q. Every pair here is *symmetric*: the law of L under Q is the law of -L under P (the
mechanisms are shift families of symmetric noise, or randomized response), so only P's functions
are written out.

For a base pair (P, Q) and a Poisson rate q the subsampled mechanism is dominated by
(A, B) = (q P + (1 - q) Q, Q) for removal and by (B, A) for addition [ZDW22, Thm. 11]; its loss
log(A/B) = g(L) with g(l) = log(1 - q + q e^l), an increasing function of the base loss, so the
distribution functions of the subsampled losses follow from those of L.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import abc
import math

import numpy as np
from numpy.typing import ArrayLike

from dpcore.curves._pld import MAX_POINTS, PrivacyLossDistribution, from_masses

# Quantile of a base loss beyond which the tail is cut (upper: to +inf; lower: moved up).
_QUANTILE_TAIL = 2.0**-60
# Relative accuracy of the distribution functions (ndtr, exp, log1p: a few units of 2**-53;
# 16 units allowed): a mass computed as a difference of two values v1 >= v2 is off by at most
# _RELATIVE_ERROR * 2 * v1.
_RELATIVE_ERROR = 2.0**-49


class _SymmetricLaw(abc.ABC):
    """Base class: P's loss distribution; Q's follows by reflection."""

    #: mass of L = +inf under P (outputs Q cannot produce)
    infinity_mass = 0.0

    @abc.abstractmethod
    def cdf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        """P(-inf <= L <= t), or P(L < t) when strict: the finite part only."""

    @abc.abstractmethod
    def support(self) -> tuple[float, float]:
        """(lo, hi): the finite losses lie in [lo, hi] up to tails of mass <= 2**-60."""

    def sf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        """P(t < L < inf) or P(t <= L < inf)."""
        return np.maximum(1.0 - self.infinity_mass - self.cdf(t, strict=strict), 0.0)

    # Q's functions by reflection, L_Q ~ -L_P (infinite masses swap sign)
    def cdf_q(self, t: np.ndarray | float, strict: bool = False) -> np.ndarray:
        # Q(L <= t) = P(-L <= t) = P(L >= -t), the +inf mass of P becoming -inf under Q
        return self.sf(-t, strict=not strict) + self.infinity_mass

    def sf_q(self, t: np.ndarray | float, strict: bool = False) -> np.ndarray:
        # Q(t < L < inf) = P(-inf < L < -t)
        return self.cdf(-t, strict=not strict)


class GaussianLaw(_SymmetricLaw):
    """N(D, s^2) against N(0, s^2): L ~ N(mu, 2 mu) under P, mu = (D/s)**2 / 2."""

    def __init__(self, mu: float) -> None:
        self.mu = mu
        self.scale = math.sqrt(2.0 * mu)

    def cdf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        from scipy.special import ndtr  # lazily: importing scipy takes 0.3 s
        return ndtr((np.asarray(t, dtype=np.float64) - self.mu) / self.scale)

    def sf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        from scipy.special import ndtr
        return ndtr((self.mu - np.asarray(t, dtype=np.float64)) / self.scale)

    def support(self) -> tuple[float, float]:
        z = 11.5  # Phi(-11.5) < 2**-100
        return self.mu - z * self.scale, self.mu + z * self.scale


class LaplaceLaw(_SymmetricLaw):
    """Lap(D, b) against Lap(0, b), e0 = D / b: atoms 1/2 at e0 and e^-e0 / 2 at -e0 under P,
    and P(L <= t) = e^((t - e0)/2) / 2 between."""

    def __init__(self, e0: float) -> None:
        self.e0 = e0

    def cdf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        e0 = self.e0
        inside = 0.5 * np.exp((np.clip(t, -e0, e0) - e0) / 2.0)
        if strict:
            return np.where(t <= -e0, 0.0, np.where(t > e0, 1.0, inside))
        return np.where(t < -e0, 0.0, np.where(t >= e0, 1.0, inside))

    def support(self) -> tuple[float, float]:
        return -self.e0, self.e0


class DiscreteLaplaceLaw(_SymmetricLaw):
    """DLap(D, t) against DLap(0, t) on the integers (integer shift D, scale t): L(z) =
    (|z| - |z - D|)/t, so P(L <= l) = P(Z <= floor((l t + D)/2)) and
    P(Z <= k) = e^(-(D - k)/t) / (1 + e^(-1/t)) for k <= D."""

    def __init__(self, scale: float, shift: int) -> None:
        self.scale = scale
        self.shift = shift
        self.e0 = shift / scale
        self._log_norm = math.log1p(math.exp(-1.0 / scale))

    def cdf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        d, s = float(self.shift), self.scale
        x = (np.clip(t, -2 * self.e0, 2 * self.e0) * s + d) / 2.0
        k = np.ceil(x) - 1.0 if strict else np.floor(x)
        k = np.clip(k, -1.0, d)
        inside = np.exp(-(d - k) / s - self._log_norm)
        if strict:
            return np.where(t <= -self.e0, 0.0, np.where(t > self.e0, 1.0, inside))
        return np.where(t < -self.e0, 0.0, np.where(t >= self.e0, 1.0, inside))

    def support(self) -> tuple[float, float]:
        return -self.e0, self.e0


class RandomizedResponseLaw(_SymmetricLaw):
    """The canonical (epsilon, delta) pair [Kairouz-Oh-Viswanath]: mass delta at +inf, atoms
    (1 - delta) e^eps / (1 + e^eps) at eps and (1 - delta) / (1 + e^eps) at -eps. It dominates
    every (epsilon, delta)-DP mechanism (delta = 0: randomized response, every epsilon-DP one)."""

    def __init__(self, epsilon: float, delta: float | None = None) -> None:
        self.epsilon = epsilon
        self.infinity_mass = 0.0 if delta is None else delta
        self._low = (1.0 - self.infinity_mass) / (1.0 + math.exp(epsilon)) if epsilon < 700 else 0.0

    def cdf(self, t: ArrayLike, strict: bool = False) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        e = self.epsilon
        top = 1.0 - self.infinity_mass
        if strict:
            return np.where(t <= -e, 0.0, np.where(t > e, top, self._low))
        return np.where(t < -e, 0.0, np.where(t >= e, top, self._low))

    def support(self) -> tuple[float, float]:
        return -self.epsilon, self.epsilon


def _g(t, q):
    """log(1 - q + q e^t): the loss of the subsampled pair as a function of the base loss."""
    if q == 1.0:
        return np.asarray(t, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.log1p(q * np.expm1(np.asarray(t, dtype=np.float64)))


def _g_inverse(y, q):
    """The base loss whose subsampled loss is y (-inf below log(1 - q))."""
    y = np.asarray(y, dtype=np.float64)
    if q == 1.0:
        return y
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.log1p(np.expm1(y) / q)
    return np.where(y <= math.log1p(-q), -np.inf, x)


def _down(x):
    """Thresholds pushed down by a few ulps: a loss computed a few ulps too low then falls in
    the next bin up (pessimistic) rather than the one below."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(x), x - (np.abs(x) * 2.0**-48 + 2.0**-1000), x)


#: Most fine points per grid interval: losses are first rounded up to interval / r, then each
#: fine atom is split between the two grid losses around it (see ``_split_masses``); r grows
#: with the interval's mass, up to SUBDIVISION.
SUBDIVISION = 1024
_FINE_BUDGET = 1 << 20  # about this many fine points per distribution


def _masses(u, v):
    """Masses between consecutive points from P(Y <= y) (``u``) and P(y < Y < inf) (``v``):
    differences of ``u`` up to the median, of ``v`` beyond (less cancellation), clipped at 0;
    also the total clipped away."""
    use_u = u[..., 1:] <= 0.5
    raw = np.where(use_u, u[..., 1:] - u[..., :-1], v[..., :-1] - v[..., 1:])
    return np.maximum(raw, 0.0), float(-np.sum(np.minimum(raw, 0.0)))


def _split_masses(interval, i_lo, n_bins, up_to, above):
    """Grid masses for a loss Y from its distribution functions, by a dominating split.

    ``up_to(y)`` = P(Y <= y) (with -inf), ``above(y)`` = P(y < Y < inf). Each loss is rounded
    up to the fine grid of step h/r (pessimistic), then each fine atom at y in (e_{j-1}, e_j] is
    split between the grid losses e_{j-1} and e_j keeping its P-mass and its Q-mass (P-mass
    times e^-y): the share w = (1 - e^(e_{j-1} - y)) / (1 - e^-h) goes to e_j. The split pair's
    hockey-stick curve is the chord of the original's between grid points and equal at them,
    so it dominates at every order (the "connect the dots" construction of Doroshenko et al.
    2022), without the upward bias of rounding every loss to the grid. An interval of mass p is
    cut into r = 2**ceil(log2(p 2**20)) pieces (1 .. SUBDIVISION), so the upward bias of the
    fine rounding, p h / r summed, stays near (number of intervals with mass) h 2**-20.

    Error: every delta (and every later composition's) is a sum of the masses against a
    non-decreasing weight in [0, 1]. The masses are differences of consecutive values of ``u``
    (a prefix of the points) or of ``v`` (the rest), so by summation by parts the errors of
    those values (each <= _RELATIVE_ERROR times a value <= 1) enter at most three times per
    sequence; masses clipped at 0 and the rounding of the split sums are added as they are.
    """
    if n_bins + 1 > MAX_POINTS:  # before any work: the grid would be too long
        raise ValueError(f"the privacy-loss distribution needs {n_bins + 1} grid points, more "
                         f"than {MAX_POINTS}: use a coarser interval")
    y = (i_lo + np.arange(n_bins + 1)) * interval
    u, v = up_to(y), above(y)
    coarse, clipped = _masses(u, v)
    upper, lower = coarse.copy(), np.zeros(n_bins)
    with np.errstate(divide="ignore"):
        pieces = np.exp2(np.clip(np.ceil(np.log2(coarse * _FINE_BUDGET)), 0,
                                 math.log2(SUBDIVISION))).astype(np.int64)
    for r in np.unique(pieces):
        if r == 1:
            continue
        refine = np.flatnonzero(pieces == r)
        # the end points are the coarse ones (same doubles): the sequence still telescopes
        fine_y = ((i_lo + refine)[:, None] + np.arange(r + 1)[None, :] / r) * interval
        fine, fine_clipped = _masses(up_to(fine_y), above(fine_y))
        clipped += fine_clipped
        share = np.expm1(-np.arange(1, r + 1) * interval / r) / np.expm1(-interval)
        upper[refine] = fine @ share
        lower[refine] = fine @ (1.0 - share)
    r = int(pieces.max()) if n_bins else 1
    knots = np.zeros(n_bins + 1)
    knots[0] = u[0]
    knots[:-1] += lower
    knots[1:] += upper
    error = (_RELATIVE_ERROR * 8.0 + clipped + (r + 2) * 2.0**-53 * float(np.sum(knots)))
    return knots, float(v[-1]), error


def _remove_direction(law, q, interval):
    """Loss g(L) under A = q P + (1 - q) Q."""
    lo, hi = law.support()
    if q < 1.0:  # A mixes in Q, whose losses lie in [-hi, -lo]
        lo = min(lo, -hi)
    g_lo = max(math.log1p(-q) if q < 1.0 else -math.inf, float(_g(lo, q)))
    g_hi = float(_g(hi, q))
    i_lo = math.ceil(g_lo / interval)
    # one bin of slack: an atom at the top loss stays on the grid after the edges move down
    i_hi = max(math.ceil(g_hi / interval), i_lo) + 1

    def up_to(y):  # A(g(L) <= y): edges pushed down, so borderline losses count higher
        x = _down(_g_inverse(y, q))
        return q * law.cdf(x) + (1.0 - q) * law.cdf_q(x)

    def above(y):
        x = _down(_g_inverse(y, q))
        return q * law.sf(x) + (1.0 - q) * law.sf_q(x)

    knots, above_top, error = _split_masses(interval, i_lo, i_hi - i_lo, up_to, above)
    infinity = q * law.infinity_mass
    return from_masses(interval, i_lo, knots, min(1.0, infinity + above_top), error)


def _add_direction(law, q, interval):
    """Loss -g(L) under B = Q: -g(L) <= y iff L >= g^-1(-y)."""
    lo, hi = law.support()  # P's losses; Q's lie in [-hi, -lo]
    top = -math.log1p(-q)  # q < 1 here: -g(L) <= -log(1 - q), reached at L = -inf
    if law.infinity_mass == 0.0:
        top = min(top, -float(_g(-hi, q)))
    bottom = -float(_g(-lo, q))
    i_lo = math.ceil(bottom / interval)
    i_hi = max(math.ceil(top / interval), i_lo) + 1  # slack for an atom at the top loss

    def edge(y):  # pushed up: borderline base losses count in the higher bin of -g
        return -_down(-_g_inverse(-y, q))

    def up_to(y):  # Q(L >= edge)
        return law.sf_q(edge(y), strict=True)

    def above(y):  # Q(L < edge)
        return law.cdf_q(edge(y), strict=True)

    knots, above_top, error = _split_masses(interval, i_lo, i_hi - i_lo, up_to, above)
    infinity = law.infinity_mass if q == 1.0 else 0.0  # Q-mass where P = 0 (L = -inf)
    return from_masses(interval, i_lo, knots, min(1.0, infinity + above_top), error)


def discretise(law: _SymmetricLaw, interval: float, q: float = 1.0) -> PrivacyLossDistribution:
    """The pessimistic :class:`PrivacyLossDistribution` of ``law`` Poisson-subsampled at rate
    ``q`` (q = 1: the base pair itself)."""
    remove = _remove_direction(law, q, interval)
    if q == 1.0:  # symmetric pair: the add direction is the same law
        return PrivacyLossDistribution(remove, remove)
    return PrivacyLossDistribution(remove, _add_direction(law, q, interval))
