"""The two calibrations of a subgraph count (triangles, k-stars) and the ladder sampler.

* The ladder mechanism (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2015, pure epsilon-DP): the
  exponential mechanism over the integers whose rungs are the local sensitivities at distance
  t, sampled exactly by :class:`_Ladder`.
* The smooth-sensitivity plan ((epsilon, delta)-DP, Laplace noise on a beta-smooth bound;
  ``dpcore._smooth``), with the slack that absorbs the rounding of the bounds.

Privacy
-------
Calibration and samplers only; the counts that use them state their guarantees.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpcore import _exact
from dpcore import _validation as check
from dpcore._floats import round_up as _round_up
from dpcore.random import Words64
from dpcore._smooth import SmoothMedianPlan
from dpcore.selection import ExponentialMechanism, exponential_index


# The smooth bound of triangle_count is computed with beta - _BETA_SLACK and inflated by
# 1 + _INFLATE: together they absorb the rounding of exp (see _smooth_bound).
_BETA_SLACK = 2.0**-38
_INFLATE = Fraction(1, 2**40)


def _graph_beta(beta):
    beta = check.positive(beta, "beta")
    return beta


def _triangle_plan(epsilon, delta):
    """(epsilon, delta, alpha, beta) of the Laplace smooth-sensitivity mechanism."""
    if delta is None:
        raise TypeError("delta is required: the smooth-sensitivity release is (epsilon, delta)-DP "
                        "(Laplace noise on a smooth bound), e.g. delta=1e-6")
    plan = SmoothMedianPlan.calibrate(epsilon, delta)
    if plan.beta <= 2 * _BETA_SLACK:
        raise ValueError(f"epsilon and delta give too small a smoothness beta; use epsilon >= "
                         f"2**-20 and delta >= 1e-300, got epsilon={epsilon!r}, delta={delta!r}")
    return plan


def _ladder_plan(epsilon, delta, method):
    """(method, plan): "ladder" with the exponential mechanism's calibration (sensitivity 1 of
    the rung index), or "smooth" with the smooth-sensitivity plan."""
    pure = delta is None or (isinstance(delta, (int, float, np.floating)) and
                             not isinstance(delta, bool) and delta == 0)
    if method is None:
        method = "ladder" if pure else "smooth"
    if method not in ("ladder", "smooth"):
        raise ValueError(f"method must be 'ladder' or 'smooth', got {method!r}")
    if method == "smooth":
        return method, _triangle_plan(epsilon, delta)
    if not pure:
        raise ValueError(f"method='ladder' is pure epsilon-DP: pass delta=None (or 0), "
                         f"got delta={delta!r}")
    return method, ExponentialMechanism.calibrate(sensitivity=1, epsilon=check.epsilon(epsilon),
                                                  method="exact")


# A rational above ln 2 (ln 2 = 0.693147180559945309417232121458176...).
_LN2_UP = Fraction(693147180559945309417232121459, 10**30)


class _Ladder:
    """The ladder mechanism's law for one graph, prepared for :meth:`draw`.

    ``rungs`` holds I_s = LS^(s) for s = 0..S, constant from S on (int64 or Python ints). Rung 0
    is {count}; rung t >= 1 holds the integers at offset d, L_{t-1} < |d| <= L_t,
    L_u = I_0 + ... + I_{u-1}: m_t = 2 I_{t-1} of them, each of weight exp(-c t).

    m_t is nondecreasing, so m_t = sum over tau <= t of its jumps D_tau = m_tau - m_{tau-1} and
    the rung law is that of (tau, t), t >= tau, with weight D_tau exp(-c t): tau has weight
    D_tau exp(-c tau) / (1 - exp(-c)), and t - tau is geometric with ratio exp(-c). The
    centre takes the same form (D = 1, tau = 0) and is kept only when t = 0.

    tau is drawn by rejection from the exact exponential mechanism on utilities
    u_tau >= e ln(2) / c - tau, e = bit_length(D_tau) (so exp(c u_tau) >= 2^e exp(-c tau)),
    accepting with probability D_tau exp(-c (u_tau + tau)) = (D_tau / 2^e) (2^e exp(-gamma)),
    gamma = c (u_tau + tau) >= e ln 2: a uniform integer below 2^e compared with D_tau, and a
    uniform on (0, 2^-e] compared with exp(-gamma) (``_exact.uniform_below_exp``). Every step is
    exact. A round is accepted with probability above 1/10: D_tau / 2^e > 1/2, the rounding
    slack in gamma is ~2**-50 relative, and the centre's extension costs at most a factor 0.24
    (I_s >= 1 from s = k - 1 on for k-stars, s = 2 for triangles).
    """

    def __init__(self, count, rungs, scale):
        self.count = count
        self.scale = scale
        self.rungs = rungs
        self.last = len(rungs) - 1
        self.prefix = np.concatenate([np.zeros(1, dtype=rungs.dtype), np.cumsum(rungs)])
        jumps = 2 * np.diff(np.concatenate([np.zeros(1, dtype=rungs.dtype), rungs]))
        where = np.flatnonzero(jumps > 0)
        self.tau = np.concatenate([[0], where + 1]).astype(np.int64)  # m_t jumps at t = s + 1
        self.jump = [1] + [int(d) for d in jumps[where]]
        self.bits = [d.bit_length() for d in self.jump]
        lift = {e: _round_up(e * _LN2_UP / Fraction(scale)) for e in set(self.bits)}
        u = np.array([lift[e] for e in self.bits]) - self.tau.astype(np.float64)
        self.utility = np.nextafter(u, np.inf)  # >= lift - tau exactly (one step above RN)

    def _offset_end(self, u):
        """L_u = I_0 + ... + I_{u-1} (a Python int)."""
        if u <= self.last + 1:
            return int(self.prefix[u])
        return int(self.prefix[self.last + 1]) + (u - self.last - 1) * int(self.rungs[self.last])

    def draw(self, rng):
        if len(self.jump) == 1:  # every rung is empty: the count is constant on n vertices
            return self.count
        word = Words64(rng)
        c = Fraction(self.scale)
        while True:
            i = exponential_index(self.utility, self.scale, random_state=rng)
            e, tau = self.bits[i], int(self.tau[i])
            if _exact.uniform_integer(1 << e, word) >= self.jump[i]:
                continue
            lo, hi = _exact.positive_cell(word)
            gamma = c * (Fraction(float(self.utility[i])) + tau)
            if not _exact.uniform_below_exp(lo / 2**e, hi / 2**e, gamma, word):
                continue
            lo, hi = _exact.positive_cell(word)
            t = tau + _exact.floor_neglog_scaled(lo, hi, 1 / c, word)
            if i == 0:
                if t == 0:
                    return self.count
                continue
            width = int(self.rungs[min(t - 1, self.last)])
            pick = _exact.uniform_integer(2 * width, word)
            offset = self._offset_end(t - 1) + pick // 2 + 1
            return self.count + offset if pick % 2 else self.count - offset
