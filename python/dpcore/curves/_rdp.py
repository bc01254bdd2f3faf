"""Rényi-DP arithmetic: the orders grid, the conversion to (epsilon, delta), closed forms of the
RDP of the basic mechanisms, and amplification by subsampling.

Every function returns upper bounds on the Rényi divergence of order alpha of the mechanism's
output laws on neighbouring data sets, *both orders of the pair* (D_a(M(x) || M(x')) and
D_a(M(x') || M(x))), as an array over the orders (``inf`` where no bound is known).

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.

References
----------
.. [Mir17] I. Mironov, "Renyi differential privacy", CSF 2017.
.. [MTZ19] I. Mironov, K. Talwar, L. Zhang, "Renyi differential privacy of the sampled Gaussian
   mechanism", 2019.
.. [BBGHS20] B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato, "Hypothesis testing
   interpretations and Renyi differential privacy", AISTATS 2020.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020.
.. [vEH14] T. van Erven, P. Harremoes, "Renyi divergence and Kullback-Leibler divergence", IEEE
   Trans. Inf. Theory 2014.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dpcore._floats import round_up

#: The default orders grid (that of Google's dp_accounting, so the two can be compared order for
#: order): 1.1 .. 10.9 by 0.1, 11 .. 63, and 128, 256, 512, 1024.
DEFAULT_ORDERS = tuple(
    [round(1.0 + x / 10.0, 1) for x in range(1, 100)] + [float(a) for a in range(11, 64)]
    + [128.0, 256.0, 512.0, 1024.0]
)
# Largest integer order for which the binomial expansions are summed term by term.
MAX_BINOMIAL_ORDER = 1024
_REL_MARGIN = 2.0**-40


def check_orders(orders: ArrayLike) -> np.ndarray:
    """A sorted float64 array of distinct orders > 1 (ValueError naming ``orders`` otherwise)."""
    arr = np.asarray(orders, dtype=np.float64).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 1.0):
        raise ValueError("orders must be a non-empty sequence of finite numbers > 1")
    return np.unique(arr)


def up(values: ArrayLike) -> np.ndarray:
    """Values pushed up by a relative 2**-40 (covers the rounding of the closed forms)."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(values > 0, values * (1.0 + _REL_MARGIN) + 2.0**-1000, values)


def epsilon_from_rdp(orders: ArrayLike, rdp: ArrayLike, delta: float) -> tuple[float, float]:
    """The smallest epsilon over the orders with the improved conversion [BBGHS20; CKS20]:
    eps = rdp(a) + log(1/delta)/(a - 1) + log(1 - 1/a) - log(a)/(a - 1). Returns (epsilon,
    order); epsilon is inf if every order is."""
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    if not 0.0 < delta < 1.0:
        return (0.0 if np.all(rdp == 0.0) else math.inf), math.nan
    with np.errstate(invalid="ignore", over="ignore"):
        eps = (rdp + (-math.log(delta) - np.log(orders)) / (orders - 1.0)
               + np.log1p(-1.0 / orders))
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    best = float(eps[i])
    if not math.isfinite(best):
        return math.inf, math.nan
    return max(0.0, float(up(best))), float(orders[i])


def delta_from_rdp(orders: ArrayLike, rdp: ArrayLike, epsilon: float) -> float:
    """The smallest delta over the orders with the same conversion:
    delta = exp((a - 1)(rdp(a) - eps)) (1 - 1/a)^(a - 1) / a."""
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        log_delta = ((orders - 1.0) * (rdp - epsilon) + (orders - 1.0) * np.log1p(-1.0 / orders)
                     - np.log(orders))
    log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
    value = float(np.min(log_delta))
    return min(1.0, math.exp(value + 2.0**-40 * abs(value))) if value < 700 else 1.0


# ---------------------------------------------------------------------------------------------
# closed forms


def randomized_response(orders: ArrayLike, epsilon: float) -> np.ndarray:
    """RDP of randomized response with parameter epsilon, the largest of any epsilon-DP
    mechanism [Mir17, Prop. 5; KOV]: log((e^(a eps) + e^((1-a) eps)) / (1 + e^eps)) / (a - 1),
    plus an allowance for the cancellation of its terms (about log 2 each for a small eps, whose
    RDP is near a eps**2 / 2), and never above a eps**2 / 2 (eps-DP is eps**2/2-zCDP, Bun-Steinke
    2016) nor eps."""
    a = np.asarray(orders, dtype=np.float64)
    e = float(epsilon)
    if e == 0.0:
        return np.zeros_like(a)
    value = (a * e + np.log1p(np.exp((1.0 - 2.0 * a) * e)) - np.logaddexp(0.0, e)) / (a - 1.0)
    return _pure_capped(value, a, e, a * e + e + 2.0 * math.log(2.0))


def _pure_capped(value: np.ndarray, a: np.ndarray, e0: float, magnitude: ArrayLike
                 ) -> np.ndarray:
    """The RDP ``value`` of an e0-DP mechanism from a closed form whose terms, of size up to
    ``magnitude`` in total, cancel (for a small e0 they are O(1) while the RDP is near
    a e0**2 / 2): plus a rounding allowance of 2**-46 ``magnitude`` / (a - 1), and capped by
    a e0**2 / 2 (e0-DP is e0**2/2-zCDP, Bun-Steinke 2016) and e0; pushed up."""
    allowance = 2.0**-46 * np.asarray(magnitude, dtype=np.float64) / (a - 1.0)
    return up(np.minimum(np.minimum(value + allowance, a * (e0 * e0 / 2.0)), e0))


def laplace(orders: ArrayLike, e0: float) -> np.ndarray:
    """RDP of the Laplace mechanism with sensitivity / scale = e0 [Mir17, Prop. 6]:
    log(a/(2a-1) e^((a-1) e0) + (a-1)/(2a-1) e^(-a e0)) / (a - 1)."""
    a = np.asarray(orders, dtype=np.float64)
    first = np.log(a / (2.0 * a - 1.0)) + (a - 1.0) * e0
    second = np.log((a - 1.0) / (2.0 * a - 1.0)) - a * e0
    value = np.logaddexp(first, second) / (a - 1.0)
    return _pure_capped(value, a, e0, np.abs(first) + np.abs(second))


def discrete_laplace(orders: ArrayLike, scale: float, shift: int) -> np.ndarray:
    """RDP of the discrete Laplace mechanism, integer shift D and scale t (exact sum):
    sum_z P(z)^a Q(z)^(1-a) = (e^(-a D/t) + e^((a-1) D/t)) / (1 + r)
    + c e^(-a D/t) (s^D - s) / (s - 1), with r = e^(-1/t), s = e^((2a-1)/t),
    c = (1 - r)/(1 + r)."""
    a = np.asarray(orders, dtype=np.float64)
    d, t = float(shift), float(scale)
    log1pr = math.log1p(math.exp(-1.0 / t))
    terms = [-a * d / t - log1pr, (a - 1.0) * d / t - log1pr]
    if shift > 1:
        w = (2.0 * a - 1.0) / t  # log s
        log_c = math.log(-math.expm1(-1.0 / t)) - log1pr
        with np.errstate(over="ignore"):
            middle = (log_c - a * d / t + w + _log_expm1((d - 1.0) * w) - _log_expm1(w))
        terms.append(middle)
    stacked = np.stack(terms)
    value = np.logaddexp.reduce(stacked, axis=0) / (a - 1.0)
    e0 = round_up(Fraction(shift) / Fraction(scale))  # D / t: the pure guarantee
    magnitude = np.sum(np.where(np.isfinite(stacked), np.abs(stacked), 0.0), axis=0)
    return _pure_capped(value, a, e0, magnitude)


def _log_expm1(x):
    """log(e^x - 1) for x > 0, stable for small and large x."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return np.where(x > 30.0, x + np.log1p(-np.exp(-np.minimum(x, 700.0))),
                        np.log(np.expm1(np.minimum(x, 30.0))))


# ---------------------------------------------------------------------------------------------
# subsampling


def _log_binomial(n, k):
    from scipy.special import gammaln  # lazily: importing scipy takes 0.3 s
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _mixture_bound(eps, orders, rate):
    """Joint convexity: a mixture (1 - rate) X + rate Y against X (or X against the mixture, or
    two mixtures sharing X) has exp((a-1) D_a) <= 1 - rate + rate exp((a-1) eps(a)). Any real
    order."""
    with np.errstate(over="ignore", invalid="ignore"):
        value = np.log1p(rate * np.expm1((orders - 1.0) * eps)) / (orders - 1.0)
    return np.where(np.isnan(value), np.inf, value)


def _chord(values_at_integers, integer_orders, orders):
    """(a - 1) D_a is convex in a with value 0 at a = 1 [vEH14], so between integer orders it is
    below the chord of its values there; below 2, D_a <= D_2."""
    x = np.concatenate([[1.0], integer_orders])
    y = np.concatenate([[0.0], (integer_orders - 1.0) * values_at_integers])
    out = np.full(orders.shape, np.inf)
    inside = orders <= x[-1]
    with np.errstate(invalid="ignore"):
        out[inside] = np.interp(orders[inside], x, y) / (orders[inside] - 1.0)
    out = np.where(np.isnan(out), np.inf, out)
    return out


def _sampled_gaussian_fractional(ratio, rate, orders):
    """D_a(q N(D, s^2) + (1-q) N(0, s^2) || N(0, s^2)) for any real order, ratio = D/s, by the
    trapezoid rule in log space: A_a = E_z[(1 - q + q e^(r z - r^2/2))^a], z ~ N(0, 1). The
    integrand is analytic in the strip |Im z| < pi / r, so the rule's relative error is about
    exp(-2 pi^2 / (r step)) (< 1e-30 with the step used) once the range covers the mass; a
    relative 2**-36 (covering the rounding of the sum) is added."""
    a = np.asarray(orders, dtype=np.float64)
    q, r = float(rate), float(ratio)
    step = min(0.02, 0.25 / r)
    # the integrand peaks near 0 and, for large orders, near a r (the tilted mode)
    hi = max(12.0, float(a.max()) * r + 12.0)
    z = np.arange(-40.0, hi + step, step)
    with np.errstate(over="ignore"):
        log_mix = np.log1p(q * np.expm1(r * z - r * r / 2.0))
    out = np.empty(a.size)
    for i, alpha in enumerate(a):
        log_terms = -z * z / 2.0 + alpha * log_mix
        log_a = np.logaddexp.reduce(log_terms) + math.log(step) - 0.5 * math.log(2.0 * math.pi)
        out[i] = (log_a + 2.0**-36 * (1.0 + abs(log_a))) / (alpha - 1.0)
    return np.maximum(out, 0.0)


def _at_orders(values_at_integers, integer_orders, orders, other):
    """Bounds at ``orders`` from bounds at the integer orders 2, 3, ...: the value itself at an
    integer, the chord between them elsewhere, and never above ``other``. Also returns which
    orders are integers within range."""
    result = np.minimum(other, _chord(values_at_integers, integer_orders, orders))
    is_int = (orders == np.round(orders)) & (orders <= integer_orders[-1])
    idx = np.clip(np.round(orders).astype(np.int64) - 2, 0, integer_orders.size - 1)
    return np.where(is_int, np.minimum(result, values_at_integers[idx]), result), is_int


def poisson_subsampled(base: Callable[[np.ndarray], np.ndarray], rate: float, orders: np.ndarray, *,
                       remove_dominates: bool = False,
                       gaussian_ratio: float | None = None) -> np.ndarray:
    """RDP of a mechanism run on a Poisson sample (each record kept with probability ``rate``),
    add/remove neighbours, from the base mechanism's RDP ``base(orders)`` (both orders of a
    pair).

    Removal, D_a(A || Q) with A = (1 - q) Q + q P: for integer a, the binomial expansion
    E_Q[(1 - q + q P/Q)^a] = sum_k C(a, k) (1 - q)^(a - k) q^k E_Q[(P/Q)^k] with
    E_Q[(P/Q)^k] = exp((k - 1) D_k(P || Q)) <= exp((k - 1) eps(k)) (exact for the Gaussian:
    [MTZ19]). Addition, D_a(Q || A) = log E_Q[(1 + q Z)^-(a-1)] / (a - 1) with Z = P/Q - 1,
    E_Q[Z] = 0, E_Q[Z^2] = e^(D_2(P||Q)) - 1: Taylor's theorem for (1 + u)^-m with u >= -q gives
    1 + q^2 E[Z^2] (C(a, 2) + C(a + 1, 3) q (1 - q)^-(a + 2)) (third-order remainder, |Z| <= 1
    where Z < 0) and 1 + C(a, 2) q^2 E[Z^2] (1 - q)^-(a + 1) (second order). Both directions are
    also bounded by joint convexity, and fractional orders by the chord of (a - 1) D_a.
    ``remove_dominates``: the addition direction is known to be below the removal one (the
    Gaussian, [MTZ19, Thm. 5]), so only the removal bound is used. Averaging over the sample of
    the other records (joint convexity) makes every bound hold for the whole data set.
    """
    orders = np.asarray(orders, dtype=np.float64)
    q = float(rate)
    if q == 1.0:
        return np.asarray(base(orders), dtype=np.float64)
    top = int(min(MAX_BINOMIAL_ORDER, math.ceil(orders.max())))
    ints = np.arange(2.0, top + 1.0)
    base_ints = np.asarray(base(ints), dtype=np.float64)
    base_orders = np.asarray(base(orders), dtype=np.float64)
    mixture = _mixture_bound(base_orders, orders, q)

    # removal at the integers: log-sum-exp of the binomial terms
    eps_k = np.concatenate([[0.0, 0.0], base_ints])  # (k - 1) eps(k) is 0 for k = 0, 1
    k = np.arange(0.0, top + 1.0)
    remove_ints = np.empty(ints.size)
    log_q, log_1q = math.log(q), math.log1p(-q)
    for i, a in enumerate(ints):
        kk = k[: int(a) + 1]
        with np.errstate(invalid="ignore"):
            terms = (_log_binomial(a, kk) + (a - kk) * log_1q + kk * log_q
                     + (kk - 1.0) * eps_k[: int(a) + 1])
        terms = np.where(np.isnan(terms), np.inf, terms)
        remove_ints[i] = np.logaddexp.reduce(terms) / (a - 1.0)
    remove_ints = np.minimum(up(remove_ints), _mixture_bound(base_ints, ints, q))
    remove, is_int = _at_orders(remove_ints, ints, orders, mixture)
    if gaussian_ratio is not None and not np.all(is_int):
        frac = ~is_int
        remove[frac] = np.minimum(remove[frac], _sampled_gaussian_fractional(
            gaussian_ratio, q, orders[frac]))
    if remove_dominates:
        return up(remove)

    # addition: the two Taylor bounds (any real order), the mixture bound
    chi2 = math.expm1(float(base(np.array([2.0]))[0]))
    a = orders
    log_chi = math.log(chi2) if chi2 > 0 else -math.inf
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        second = np.log(a * (a - 1.0) / 2.0) + 2.0 * log_q + log_chi - (a + 1.0) * log_1q
        third = (np.log(a * (a - 1.0) / 2.0 + (a + 1.0) * a * (a - 1.0) / 6.0 * q
                        * np.exp(-(a + 2.0) * log_1q)) + 2.0 * log_q + log_chi)
        taylor = np.log1p(np.exp(np.minimum(second, third))) / (a - 1.0)
    taylor = np.where(np.isnan(taylor), np.inf, taylor)
    add = np.minimum(mixture, taylor)
    return up(np.maximum(remove, add))


def without_replacement(base: Callable[[np.ndarray], np.ndarray], rate: float,
                        orders: np.ndarray) -> np.ndarray:
    """RDP of a mechanism run on a uniformly random subset of m of the n records (sampling
    without replacement, rate = m/n), substitution neighbours, from the base mechanism's RDP
    under substitution.

    Coupling the samples [Balle et al. 2018], the pair is ((1 - g) R + g P, (1 - g) R + g P')
    with R, P, P' pairwise substitution neighbours, averaged over the coupling. For integer a,
    E_B[(1 + g W)^a] with W = (P - P')/B, E_B[W] = 0, expands into
    1 + sum_{j >= 2} C(a, j) g^j E_B[|W|^j], and E_B[|W|^j] is bounded two ways: B >= (1-g) R
    gives (1-g)^(1-j) 2^(j-1) (E_R|P/R - 1|^j + E_R|P'/R - 1|^j), and B >= g P' gives
    g^(1-j) E_P'|P/P' - 1|^j, with E|t - 1|^2 = e^(eps(2)) - 1 and E|t - 1|^j <= e^((j-1) eps(j)) + 1
    (|t - 1|^j <= max(t, 1)^j). Plus the joint-convexity bound and the chord for fractional
    orders. The bound is symmetric in the two orders of the pair.
    """
    orders = np.asarray(orders, dtype=np.float64)
    g = float(rate)
    if g == 1.0:
        return np.asarray(base(orders), dtype=np.float64)
    top = int(min(MAX_BINOMIAL_ORDER, math.ceil(orders.max())))
    ints = np.arange(2.0, top + 1.0)
    base_ints = np.asarray(base(ints), dtype=np.float64)
    mixture = _mixture_bound(np.asarray(base(orders), dtype=np.float64), orders, g)
    j = ints  # j = 2 .. top
    with np.errstate(over="ignore"):
        log_moment = np.where(j == 2.0, _log_expm1(np.maximum(base_ints, 1e-300)),
                              np.logaddexp((j - 1.0) * base_ints, 0.0))
    log_g, log_1g = math.log(g), math.log1p(-g)
    via_r = (1.0 - j) * log_1g + j * math.log(2.0) + log_moment  # 2^(j-1) * 2 moments
    via_p = (1.0 - j) * log_g + log_moment
    log_w = np.minimum(via_r, via_p)  # log of the bound on E_B|W|^j
    values = np.empty(ints.size)
    for i, a in enumerate(ints):
        jj = j[: int(a) - 1]
        with np.errstate(invalid="ignore"):
            terms = _log_binomial(a, jj) + jj * log_g + log_w[: int(a) - 1]
        terms = np.where(np.isnan(terms), np.inf, terms)
        values[i] = np.logaddexp(0.0, np.logaddexp.reduce(terms)) / (a - 1.0)
    values = np.minimum(up(values), _mixture_bound(base_ints, ints, g))
    return up(_at_orders(values, ints, orders, mixture)[0])
