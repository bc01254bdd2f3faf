"""Bounded-range mechanisms (the exponential mechanism): a Rényi-DP bound tighter than pure DP.

A mechanism is epsilon-bounded-range (epsilon-BR, [DR19]) when, for every pair of neighbours,
its privacy loss L(y) = log(P(y) / Q(y)) takes values in an interval [t, t + epsilon] of width
epsilon (t depends on the pair). The exponential mechanism P(r) ~ exp(c u_r) is epsilon-BR
with epsilon = c times the width of the interval the differences u_r - u'_r range over
(2 sensitivity c; sensitivity c for monotone utilities), which is exactly the epsilon it is
calibrated to be epsilon-DP for.

The Rényi bound. For a pair (P, Q), D_a(P || Q) = log E_Q[X^a] / (a - 1) with X = e^L, and
E_Q[X] = 1. Given X in [m, m e^epsilon], X^a is convex, so E_Q[X^a] is largest when X takes
only the two end values; with m = e^-s (s in [0, epsilon], since E_Q[X] = 1 puts 1 in the
interval) the mean constraint fixes Q(X = m e^epsilon) = (e^s - 1) / (e^epsilon - 1), so

    D_a <= max over s in [0, epsilon] of f(s) = (log(1 + (e^s - 1) K) - a s) / (a - 1),
    K = (e^(a epsilon) - 1) / (e^epsilon - 1).

f is concave in s (its derivative a' K e^s / (1 + (e^s - 1) K) - a decreases, K > 1), with its
maximum where K e^s (a - 1) = a (K - 1): s* = log(a / (a - 1)) + log(1 - 1 / K), which lies in
(0, epsilon). The same bound holds for D_a(Q || P) (the loss -L has the same width). It is the
exact supremum over epsilon-BR pairs (two-point pairs attain every s), it is at most
a epsilon**2 / 8 (epsilon-BR implies epsilon**2/8-zCDP, [CR21]), and below the
randomized-response bound of pure epsilon-DP (an epsilon-BR loss lies in [-epsilon, epsilon]).

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.

References
----------
.. [DR19] D. Durfee, R. Rogers, "Practical differentially private top-k selection with
   pay-what-you-get composition", NeurIPS 2019.
.. [CR21] M. Cesar, R. Rogers, "Bounding, concentrating, and truncating: unifying privacy loss
   composition for data analytics", ALT 2021.
.. [DPorg21] "A better privacy analysis of the exponential mechanism", differentialprivacy.org,
   2021 (https://differentialprivacy.org/exponential-mechanism-bounded-range/).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore.curves import _laws, _rdp
from dpcore.curves._curves import Plain, PrivacyCurve, _check_relation

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# Rounding allowance of the closed form, relative to the magnitudes summed (its logs, exps and
# the computed s* are each within a few units of 2**-53; 2**-46 covers them with room to spare).
_ROUNDING = 2.0**-46


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0, without overflow."""
    with np.errstate(over="ignore"):
        return np.where(x > 1.0, x + np.log1p(-np.exp(-x)), np.log(np.expm1(np.minimum(x, 1.0))))


def bounded_range_rdp(orders: ArrayLike, epsilon: float) -> np.ndarray:
    """Upper bounds on the RDP of any epsilon-bounded-range mechanism at ``orders`` (both
    orders of the pair): the maximum of f at s* (see the module), pushed up by its rounding
    allowance, and never above a epsilon**2 / 8 (it is below the randomized-response bound
    of pure epsilon-DP mathematically; the tests check it numerically)."""
    a = np.asarray(orders, dtype=np.float64)
    e = float(epsilon)
    log_k = _log_expm1(a * e) - _log_expm1(np.full_like(a, e))
    s = np.clip(np.log(a / (a - 1.0)) + np.log1p(-np.exp(-log_k)), 0.0, e)
    with np.errstate(divide="ignore"):
        log_term = np.logaddexp(0.0, _log_expm1(np.maximum(s, 2.0**-1000)) + log_k)
    value = (log_term - a * s) / (a - 1.0)
    allowance = _ROUNDING * (log_term + a * s + a * e) / (a - 1.0)
    bound = _rdp.up(np.maximum(value, 0.0) + allowance)
    return np.minimum(bound, _rdp.up(a * (e * e / 8.0)))


@dataclass(frozen=True)
class BoundedRange(PrivacyCurve):
    """An epsilon-bounded-range mechanism (the exponential mechanism calibrated to epsilon-DP,
    one peeling round of top-k): pure epsilon-DP, whose privacy loss for every pair of
    neighbours lies in an interval of width epsilon.

    RDP: the exact supremum over epsilon-BR pairs (module docstring), at most a epsilon**2 / 8
    (so epsilon**2 / 8-zCDP, [CR21]): long compositions of exponential mechanisms grow like
    epsilon * sqrt(k / 2 log(1/delta)) instead of pure DP's epsilon * sqrt(2 k log(1/delta)).
    Privacy-loss distribution: that of pure epsilon-DP (randomized response dominates every
    epsilon-DP mechanism; no single dominating pair of all epsilon-BR pairs is used here), so a
    PLD accountant composes these as pure epsilon-DP in its PLD analysis and with the RDP bound
    in its RDP analysis, reporting the better.
    """

    epsilon: float
    relation: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check.epsilon(self.epsilon))
        _check_relation(self.relation)

    @property
    def rho(self) -> float:
        """epsilon**2 / 8 rounded up: the zCDP guarantee of an epsilon-BR mechanism [CR21]
        (see :meth:`implied_rho`)."""
        return round_up(Fraction(self.epsilon) ** 2 / 8)

    def implied_rho(self) -> float:
        """epsilon**2 / 8 rounded up: an epsilon-BR mechanism is (epsilon**2 / 8)-zCDP
        ([CR21]; [DPorg21] gives the same proof), a quarter of the epsilon**2 / 2 that pure
        epsilon-DP gives.

        Proof sketch. Fix neighbours and let Z = L(Y), Y ~ P, be the privacy loss: it lies in
        an interval of width epsilon, and E[e^-Z] = E_P[Q/P] = 1. Hoeffding's lemma (a variable
        in an interval of width w has E[e^(t (Z - E Z))] <= e^(t**2 w**2 / 8) for every real
        t) at t = -1 gives 1 <= e^(-E Z + epsilon**2 / 8), so the KL divergence E Z is at most
        epsilon**2 / 8; at t = a - 1 it gives, for every order a > 1,
        D_a(P || Q) = log E[e^((a - 1) Z)] / (a - 1) <= E Z + (a - 1) epsilon**2 / 8
        <= a epsilon**2 / 8, which is (epsilon**2 / 8)-zCDP. The swapped pair is epsilon-BR as
        well, so both directions hold. Conditions: the width bound must hold for every pair of
        neighbours under the relation the mechanism was calibrated for (the exponential
        mechanism's score differences u_r(D) - u_r(D') range over an interval of width
        2 sensitivity, or sensitivity when monotone); the bound then composes adaptively with
        other zCDP guarantees by summation (Bun-Steinke 2016, Lemma 2.3).
        """
        return self.rho

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return bounded_range_rdp(orders, self.epsilon)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.RandomizedResponseLaw(self.epsilon)

    def fallback(self) -> Plain | None:
        return {"epsilon": self.epsilon, "delta": 0.0}

